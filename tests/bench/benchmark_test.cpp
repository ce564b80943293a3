// The in-process benchmark (runtime/benchmark.h): workloads and variants, sample statistics,
// /proc status parsing, and run_benchmark on a tiny synthetic model — fixed-length requests, output
// hashes that match a direct Generator run, speedups, greedy parity, and the context check.
#include <gtest/gtest.h>

#include <set>

#include "core/error.h"
#include "core/sha256.h"
#include "model/generation_config.h"
#include "model/tiny_model.h"
#include "runtime/benchmark.h"

namespace {

using namespace mere;

TEST(Benchmark, BuiltinWorkloads) {
  const auto& w = builtin_workloads();
  ASSERT_EQ(w.size(), 5u);
  const char* names[] = {"code", "chat", "prose", "math", "summary"};
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(w[i].name, names[i]);
    EXPECT_GT(w[i].prompt.size(), 100u) << names[i];
    EXPECT_EQ(&builtin_workload(names[i]), &w[i]);
  }
  EXPECT_NE(builtin_workload("summary").prompt.find("Open questions"), std::string::npos);
  EXPECT_THROW(builtin_workload("poetry"), Error);
}

TEST(Benchmark, Variants) {
  for (auto v : {BenchmarkVariant::Baseline, BenchmarkVariant::Adaptive, BenchmarkVariant::Forced})
    EXPECT_EQ(parse_variant(variant_name(v)), v);
  EXPECT_THROW(parse_variant("turbo"), Error);
  BenchmarkOptions o;
  o.block_size = 5;
  o.cost_ratio = 0.3;
  o.profile = true;
  EXPECT_EQ(variant_speculation(BenchmarkVariant::Baseline, o).mode, SpeculationOptions::Mode::Off);
  const SpeculationOptions a = variant_speculation(BenchmarkVariant::Adaptive, o);
  EXPECT_EQ(a.mode, SpeculationOptions::Mode::Auto);
  EXPECT_EQ(a.block_size, 5);
  EXPECT_DOUBLE_EQ(a.cost_ratio, 0.3);
  EXPECT_TRUE(a.profile);
  EXPECT_EQ(variant_speculation(BenchmarkVariant::Forced, o).mode, SpeculationOptions::Mode::Forced);
}

TEST(Benchmark, SampleSummary) {
  SampleSummary s = summarize_sample({3, 1, 2});
  EXPECT_EQ(s.median, 2);
  EXPECT_EQ(s.min, 1);
  EXPECT_EQ(s.max, 3);
  s = summarize_sample({4, 1, 2, 3});
  EXPECT_EQ(s.median, 2.5);
  s = summarize_sample({});
  EXPECT_EQ(s.median, 0);
}

TEST(Benchmark, ProcStatusMemory) {
  const ResidentMemory m = parse_proc_status_memory("Name:\tmere.run\nVmPeak:\t  9 kB\nVmHWM:\t    2048 kB\nVmRSS:\t    1024 kB\n");
  EXPECT_EQ(m.resident_bytes, 1024 * 1024);
  EXPECT_EQ(m.peak_resident_bytes, 2048 * 1024);
  EXPECT_EQ(parse_proc_status_memory("").resident_bytes, 0);
  const ResidentMemory self = read_resident_memory();
  EXPECT_GT(self.resident_bytes, 0);
  EXPECT_GE(self.peak_resident_bytes, self.resident_bytes);
}

struct TinySetup {
  std::string dir = test::tiny_model_dir("tiny-dense");
  const Qwen35Model& model = test::tiny_model("tiny-dense");
  Tokenizer tok = Tokenizer::from_dir(dir);
  ChatTemplate tmpl = ChatTemplate::from_model_dir(dir);
  GenerationConfig gc = GenerationConfig::load(dir);
};

TEST(Benchmark, GreedyRunOnTinyModel) {
  TinySetup t;
  BenchmarkOptions o;
  o.scenarios = {{"probe", "Count from one to five."}};
  o.variants = {BenchmarkVariant::Baseline, BenchmarkVariant::Adaptive, BenchmarkVariant::Forced};
  o.tokens = 5;
  o.warmups = 1;
  o.warmup_tokens = 2;
  o.repetitions = 2;
  std::vector<std::string> progress;
  const Json doc = run_benchmark(t.model, t.tok, &t.tmpl, t.gc.eos_token_ids, o,
                                 [&](const std::string& s) { progress.push_back(s); });
  EXPECT_EQ(progress.size(), 3u * (1 + 2));
  EXPECT_EQ(doc.at("settings").at("stopOnEos").as_bool(), false);
  ASSERT_EQ(doc.at("scenarios").size(), 1u);
  const Json& sc = doc.at("scenarios").at(0);
  EXPECT_EQ(sc.at("name").as_string(), "probe");
  EXPECT_TRUE(sc.at("greedyOutputParity").as_bool());
  EXPECT_TRUE(sc.at("fixedLength").as_bool());
  EXPECT_TRUE(sc.at("speedups").contains("adaptive"));
  EXPECT_TRUE(sc.at("speedups").contains("forced"));
  EXPECT_FALSE(sc.at("speedups").contains("baseline"));

  // The reference: the same request through Generator directly, MTP off.
  Json msgs = Json::parse(R"([{"role": "user", "content": "Count from one to five."}])");
  ChatRenderOptions ro;
  ro.enable_thinking = false;
  const std::vector<int32_t> prompt = t.tok.encode(t.tmpl.render(msgs, ro), EncodeOptions{});
  SamplingParams p;
  p.temperature = 0;
  p.max_tokens = 5;
  p.ignore_eos = true;
  std::vector<int32_t> ids;
  Generator(t.model).run(prompt, p, t.gc.eos_token_ids, 8192, [&](int32_t id) {
    ids.push_back(id);
    return true;
  });
  ASSERT_EQ(ids.size(), 5u);
  const std::string want = sha256_hex_token_ids(ids);
  EXPECT_EQ(sc.at("referenceOutputSHA256").as_string(), want);

  std::set<std::string> names;
  for (const Json& v : sc.at("variants").as_array()) {
    names.insert(v.at("variant").as_string());
    ASSERT_EQ(v.at("warmups").size(), 1u);
    EXPECT_EQ(v.at("warmups").at(0).at("generatedTokens").as_int(), 2);
    ASSERT_EQ(v.at("repetitions").size(), 2u);
    for (const Json& r : v.at("repetitions").as_array()) {
      EXPECT_EQ(r.at("generatedTokens").as_int(), 5);
      EXPECT_EQ(r.at("promptTokens").as_int(), static_cast<int64_t>(prompt.size()));
      EXPECT_EQ(r.at("outputSHA256").as_string(), want);
      EXPECT_EQ(r.at("textSHA256").as_string().size(), 64u);
      EXPECT_GT(r.at("decodeTokensPerSecond").as_number(), 0);
      EXPECT_GE(r.at("ttftSeconds").as_number(), r.at("prefillSeconds").as_number());
      EXPECT_GE(r.at("elapsedSeconds").as_number(), r.at("decodeSeconds").as_number());
      EXPECT_GT(r.at("residentBytesBefore").as_int(), 0);
      EXPECT_TRUE(r.at("acceleration").contains("route"));
    }
    EXPECT_TRUE(v.at("summary").at("outputsConsistent").as_bool());
  }
  EXPECT_EQ(names, (std::set<std::string>{"baseline", "adaptive", "forced"}));
  EXPECT_EQ(sc.at("variants").at(0).at("speculation").at("mode").as_string(), "off");
}

// The run order the progress lines record: interleaved (the default) runs every variant's warm-ups,
// then repetition i of each variant in --variants order; grouped runs variant by variant.
TEST(Benchmark, RepetitionOrder) {
  TinySetup t;
  BenchmarkOptions o;
  o.scenarios = {{"probe", "Count from one to five."}};
  o.variants = {BenchmarkVariant::Baseline, BenchmarkVariant::Adaptive};
  o.tokens = 3;
  o.warmups = 1;
  o.warmup_tokens = 2;
  o.repetitions = 2;
  auto order = [&](bool interleave) {
    o.interleave = interleave;
    std::vector<std::string> steps;
    const Json doc = run_benchmark(t.model, t.tok, &t.tmpl, t.gc.eos_token_ids, o, [&](const std::string& s) {
      // "[benchmark] probe/VARIANT warm-up 1/1: ..." or "... repetition I/N: ..."
      const size_t a = s.find('/') + 1, b = s.find(':');
      steps.push_back(s.substr(a, b - a));
    });
    EXPECT_EQ(doc.at("settings").at("order").as_string(), interleave ? "interleaved" : "grouped");
    EXPECT_TRUE(doc.at("scenarios").at(0).at("greedyOutputParity").as_bool());
    return steps;
  };
  EXPECT_EQ(order(true), (std::vector<std::string>{"baseline warm-up 1/1", "adaptive warm-up 1/1",
                                                   "baseline repetition 1/2", "adaptive repetition 1/2",
                                                   "baseline repetition 2/2", "adaptive repetition 2/2"}));
  EXPECT_EQ(order(false), (std::vector<std::string>{"baseline warm-up 1/1", "baseline repetition 1/2",
                                                    "baseline repetition 2/2", "adaptive warm-up 1/1",
                                                    "adaptive repetition 1/2", "adaptive repetition 2/2"}));
}

TEST(Benchmark, SampledRunHasNoParityButIsReproducible) {
  TinySetup t;
  BenchmarkOptions o;
  o.scenarios = {{"probe", "Say something."}};
  o.variants = {BenchmarkVariant::Baseline};
  o.tokens = 4;
  o.warmups = 0;
  o.repetitions = 2;
  o.temperature = 0.9f;
  o.seed = 7;
  const Json doc = run_benchmark(t.model, t.tok, &t.tmpl, t.gc.eos_token_ids, o, nullptr);
  const Json& sc = doc.at("scenarios").at(0);
  EXPECT_TRUE(sc.at("greedyOutputParity").is_null());
  EXPECT_TRUE(sc.at("variants").at(0).at("summary").at("outputsConsistent").as_bool());  // same seed, same output
  EXPECT_EQ(sc.at("speedups").size(), 0u);
}

TEST(Benchmark, RawPromptAndErrors) {
  TinySetup t;
  BenchmarkOptions o;
  o.scenarios = {{"raw", "hello world"}};
  o.variants = {BenchmarkVariant::Baseline};
  o.tokens = 3;
  o.warmups = 0;
  o.repetitions = 1;
  o.chat_template = false;
  const Json doc = run_benchmark(t.model, t.tok, nullptr, t.gc.eos_token_ids, o, nullptr);
  EXPECT_EQ(doc.at("scenarios").at(0).at("variants").at(0).at("repetitions").at(0).at("promptTokens").as_int(),
            static_cast<int64_t>(t.tok.encode("hello world").size()));
  o.repetitions = 0;
  EXPECT_THROW(run_benchmark(t.model, t.tok, nullptr, t.gc.eos_token_ids, o, nullptr), Error);
  o.repetitions = 1;
  o.context = 4;  // the prompt plus 3 tokens does not fit
  try {
    run_benchmark(t.model, t.tok, nullptr, t.gc.eos_token_ids, o, nullptr);
    FAIL() << "expected a context error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("context"), std::string::npos) << e.what();
  }
}

}  // namespace
