// GenerationConfig: reading generation_config.json and config.json from a model directory (missing
// files, Qwen-style files, eos as int or list, text_config), clear errors for malformed files, and
// the merge rule request > generation_config.json > built-in defaults.
#include "model/generation_config.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>

#include "core/error.h"
#include "core/json.h"

namespace mere {
namespace {

namespace fs = std::filesystem;

class ModelDir {
 public:
  ModelDir() {
    dir_ = fs::temp_directory_path() /
           ("mere_genconfig_" + std::to_string(Rng::random_seed()));
    fs::create_directories(dir_);
  }
  ~ModelDir() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  void write(const std::string& name, const std::string& text) const {
    std::ofstream(dir_ / name, std::ios::binary) << text;
  }
  std::string path() const { return dir_.string(); }

 private:
  fs::path dir_;
};

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(GenerationConfig, MissingFilesGiveBuiltInDefaults) {
  ModelDir d;
  const GenerationConfig g = GenerationConfig::load(d.path());
  EXPECT_TRUE(g.eos_token_ids.empty());
  const SamplingParams p = g.resolve();
  const SamplingParams def;
  EXPECT_EQ(p.temperature, def.temperature);
  EXPECT_EQ(p.top_k, 0);
  EXPECT_EQ(p.top_p, 1.0f);
  EXPECT_EQ(p.min_p, 0.0f);
  EXPECT_EQ(p.repetition_penalty, 1.0f);
  EXPECT_FALSE(p.max_tokens.has_value());
  EXPECT_FALSE(p.seed.has_value());
  EXPECT_EQ(GenerationConfig::load(d.path() + "/does-not-exist").eos_token_ids.size(), 0u);
}

TEST(GenerationConfig, QwenStyleFiles) {
  ModelDir d;
  d.write("generation_config.json", R"({
    "bos_token_id": 248044, "do_sample": true, "eos_token_id": [248046, 248044],
    "pad_token_id": 248044, "temperature": 0.6, "top_k": 20, "top_p": 0.95,
    "presence_penalty": 1.5, "max_new_tokens": 32768, "transformers_version": "4.57.0"})");
  d.write("config.json", R"({"architectures": ["Qwen3_5ForConditionalGeneration"],
    "text_config": {"eos_token_id": 248044, "vocab_size": 248320}})");
  const GenerationConfig g = GenerationConfig::load(d.path());
  EXPECT_EQ(g.eos_token_ids, (std::vector<TokenId>{248046, 248044}));
  const SamplingParams p = g.resolve();
  EXPECT_FLOAT_EQ(p.temperature, 0.6f);
  EXPECT_EQ(p.top_k, 20);
  EXPECT_FLOAT_EQ(p.top_p, 0.95f);
  EXPECT_FLOAT_EQ(p.presence_penalty, 1.5f);
  EXPECT_EQ(p.max_tokens, 32768);
  EXPECT_EQ(p.min_p, 0.0f);  // not in the file: built-in
}

TEST(GenerationConfig, RequestOverridesFileOverridesDefaults) {
  ModelDir d;
  d.write("generation_config.json", R"({"temperature": 0.6, "top_k": 20, "top_p": 0.95, "min_p": 0.05})");
  const GenerationConfig g = GenerationConfig::load(d.path());
  SamplingOverrides r;
  r.temperature = 1.1f;
  r.top_k = 0;
  r.seed = 99;
  r.max_tokens = 16;
  r.stop = {"\n\n"};
  r.stop_token_ids = {5};
  r.ignore_eos = true;
  const SamplingParams p = g.resolve(r);
  EXPECT_FLOAT_EQ(p.temperature, 1.1f);
  EXPECT_EQ(p.top_k, 0);
  EXPECT_FLOAT_EQ(p.top_p, 0.95f);
  EXPECT_FLOAT_EQ(p.min_p, 0.05f);
  EXPECT_EQ(p.seed, 99u);
  EXPECT_EQ(p.max_tokens, 16);
  EXPECT_EQ(p.stop, std::vector<std::string>{"\n\n"});
  EXPECT_EQ(p.stop_token_ids, std::vector<TokenId>{5});
  EXPECT_TRUE(p.ignore_eos);
  SamplingOverrides bad;
  bad.top_p = 0;
  EXPECT_NE(error_of([&] { g.resolve(bad); }).find("[request] top_p"), std::string::npos);
}

TEST(GenerationConfig, DoSampleFalseMeansGreedyDefault) {
  ModelDir d;
  d.write("generation_config.json", R"({"do_sample": false, "temperature": 0.7, "eos_token_id": 2})");
  const GenerationConfig g = GenerationConfig::load(d.path());
  EXPECT_TRUE(g.resolve().greedy());
  SamplingOverrides r;
  r.temperature = 0.5f;
  EXPECT_FLOAT_EQ(g.resolve(r).temperature, 0.5f);  // the request may still ask for sampling
  EXPECT_EQ(g.eos_token_ids, std::vector<TokenId>{2});
}

TEST(GenerationConfig, EosFromConfigTopLevelAndTextConfigAreMerged) {
  ModelDir d;
  d.write("generation_config.json", R"({"eos_token_id": 7})");
  d.write("config.json", R"({"eos_token_id": [8, 7], "text_config": {"eos_token_id": 9}})");
  EXPECT_EQ(GenerationConfig::load(d.path()).eos_token_ids, (std::vector<TokenId>{7, 8, 9}));
  ModelDir only_config;
  only_config.write("config.json", R"({"eos_token_id": null, "text_config": {"eos_token_id": [3]}})");
  EXPECT_EQ(GenerationConfig::load(only_config.path()).eos_token_ids, std::vector<TokenId>{3});
}

TEST(GenerationConfig, TopKMinusOneOrZeroDisables) {
  const Json a = Json::parse(R"({"top_k": -1})");
  EXPECT_EQ(GenerationConfig::from_json(&a, nullptr).top_k, 0);
  const Json b = Json::parse(R"({"top_k": null, "temperature": null})");
  const GenerationConfig g = GenerationConfig::from_json(&b, nullptr);
  EXPECT_FALSE(g.top_k.has_value());
  EXPECT_FALSE(g.temperature.has_value());
}

TEST(GenerationConfig, MalformedFilesAreClearErrors) {
  ModelDir d;
  d.write("generation_config.json", R"({"temperature": 0.6,)");
  const std::string syntax = error_of([&] { GenerationConfig::load(d.path()); });
  EXPECT_NE(syntax.find("generation_config.json"), std::string::npos) << syntax;

  auto from = [](const std::string& text) {
    return error_of([&] {
      const Json j = Json::parse(text);
      GenerationConfig::from_json(&j, nullptr);
    });
  };
  EXPECT_EQ(from(R"({"temperature": "hot"})"),
            "[generation_config.json] temperature: expected a number, got string");
  EXPECT_EQ(from(R"({"temperature": -0.5})"),
            "[generation_config.json] temperature: expected a finite value >= 0, got -0.5");
  EXPECT_EQ(from(R"({"top_k": 2.5})"), "[generation_config.json] top_k: expected an integer, got 2.5");
  EXPECT_NE(from(R"({"top_k": -3})").find("top_k: expected an integer >= 0"), std::string::npos);
  EXPECT_NE(from(R"({"top_p": 1.5})").find("top_p: expected a value in (0, 1]"), std::string::npos);
  EXPECT_NE(from(R"({"do_sample": "yes"})").find("do_sample: expected true or false"), std::string::npos);
  EXPECT_NE(from(R"({"eos_token_id": "x"})").find("eos_token_id: expected an integer or a list"),
            std::string::npos);
  EXPECT_NE(from(R"({"eos_token_id": [1, -2]})").find("eos_token_id[]: expected a token id"),
            std::string::npos);
  EXPECT_NE(from(R"({"max_new_tokens": 0})").find("max_new_tokens: expected >= 1"), std::string::npos);
  EXPECT_NE(from(R"([1, 2])").find("expected a JSON object, got array"), std::string::npos);

  ModelDir c;
  c.write("config.json", R"({"text_config": {"eos_token_id": [1.5]}})");
  const std::string cfg = error_of([&] { GenerationConfig::load(c.path()); });
  EXPECT_NE(cfg.find("config.json text_config] eos_token_id[]"), std::string::npos) << cfg;
}

}  // namespace
}  // namespace mere
