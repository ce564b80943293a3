// The MERERUN_Q35_* controls (mtp.md §5): parsing from the environment (unrecognised values act as
// unset, the cost ratio is validated) and resolution against a model (opt-in through
// generation_config.json, eligibility reasons, the CUDA scheduling controls' defaults).
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "model/tiny_model.h"
#include "runtime/generator.h"

using namespace mere;

namespace {

const char* const kVars[] = {"MERERUN_Q35_MTP_SPECULATION",        "MERERUN_Q35_MTP_BLOCK_SIZE",
                             "MERERUN_Q35_MTP_HEAD_COST_RATIO",    "MERERUN_Q35_MTP_COST_MODEL",
                             "MERERUN_Q35_MTP_PIPELINED_FALLBACK", "MERERUN_Q35_MTP_PROFILE",
                             "MERERUN_Q35_SCOPED_COMPILE",         "MERERUN_Q35_ASYNC_DECODE_BLOCKS"};

// Clears every control for the test's lifetime, restoring what was set before.
class CleanEnv {
 public:
  CleanEnv() {
    for (const char* v : kVars) {
      const char* old = std::getenv(v);
      saved_.emplace_back(v, old ? std::string(old) : std::string("\x01"));
      unsetenv(v);
    }
  }
  ~CleanEnv() {
    for (const auto& [name, value] : saved_) {
      if (value == "\x01") unsetenv(name.c_str());
      else setenv(name.c_str(), value.c_str(), 1);
    }
  }

 private:
  std::vector<std::pair<std::string, std::string>> saved_;
};

const Qwen35Model& bundled_dense() {
  static auto m = Qwen35Model::load(std::string(MERE_SOURCE_DIR) + "/models/qwen35-dense-tiny", "cpu");
  return *m;
}

}  // namespace

TEST(SpeculationOptions, DefaultsWithNothingSet) {
  CleanEnv env;
  const SpeculationOptions o = SpeculationOptions::from_env();
  EXPECT_EQ(o.mode, SpeculationOptions::Mode::Auto);
  EXPECT_EQ(o.block_size, 0);
  EXPECT_DOUBLE_EQ(o.cost_ratio, 0.18);
  EXPECT_FALSE(o.measured_costs.has_value());
  EXPECT_FALSE(o.pipelined_fallback.has_value());
  EXPECT_FALSE(o.profile);
  EXPECT_FALSE(o.scoped_compile.has_value());
  EXPECT_FALSE(o.async_decode_blocks.has_value());
}

TEST(SpeculationOptions, ParsesEveryControl) {
  CleanEnv env;
  setenv("MERERUN_Q35_MTP_SPECULATION", "yes", 1);
  setenv("MERERUN_Q35_MTP_BLOCK_SIZE", "6", 1);
  setenv("MERERUN_Q35_MTP_HEAD_COST_RATIO", "0.3", 1);
  setenv("MERERUN_Q35_MTP_PIPELINED_FALLBACK", "ON", 1);
  setenv("MERERUN_Q35_MTP_PROFILE", "1", 1);
  setenv("MERERUN_Q35_SCOPED_COMPILE", "0", 1);
  setenv("MERERUN_Q35_ASYNC_DECODE_BLOCKS", "true", 1);
  SpeculationOptions o = SpeculationOptions::from_env();
  EXPECT_EQ(o.mode, SpeculationOptions::Mode::Forced);
  EXPECT_EQ(o.block_size, 6);
  EXPECT_DOUBLE_EQ(o.cost_ratio, 0.3);
  ASSERT_TRUE(o.measured_costs.has_value());
  EXPECT_FALSE(*o.measured_costs) << "an explicit ratio selects the fixed-ratio rule";
  EXPECT_EQ(o.pipelined_fallback, std::optional<bool>(true));
  EXPECT_TRUE(o.profile);
  EXPECT_EQ(o.scoped_compile, std::optional<bool>(false));
  EXPECT_EQ(o.async_decode_blocks, std::optional<bool>(true));

  setenv("MERERUN_Q35_MTP_SPECULATION", "off", 1);
  setenv("MERERUN_Q35_MTP_COST_MODEL", "measured", 1);
  o = SpeculationOptions::from_env();
  EXPECT_EQ(o.mode, SpeculationOptions::Mode::Off);
  EXPECT_EQ(o.measured_costs, std::optional<bool>(true)) << "MERERUN_Q35_MTP_COST_MODEL wins over the ratio's implication";
}

TEST(SpeculationOptions, UnrecognisedValuesActAsUnset) {
  CleanEnv env;
  setenv("MERERUN_Q35_MTP_SPECULATION", "maybe", 1);
  setenv("MERERUN_Q35_SCOPED_COMPILE", "2", 1);
  setenv("MERERUN_Q35_ASYNC_DECODE_BLOCKS", "", 1);
  setenv("MERERUN_Q35_MTP_BLOCK_SIZE", "1", 1);  // below 2: ignored
  setenv("MERERUN_Q35_MTP_HEAD_COST_RATIO", "nan", 1);
  const SpeculationOptions o = SpeculationOptions::from_env();
  EXPECT_EQ(o.mode, SpeculationOptions::Mode::Auto);
  EXPECT_FALSE(o.scoped_compile.has_value());
  EXPECT_FALSE(o.async_decode_blocks.has_value());
  EXPECT_EQ(o.block_size, 0);
  EXPECT_DOUBLE_EQ(o.cost_ratio, 0.18) << "invalid ratio falls back to 0.18";
}

TEST(SpeculationOptions, ResolvesAgainstTheModel) {
  CleanEnv env;
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  // the bundled dense model opts in through generation_config.json (block 4); not a managed geometry
  ResolvedSpeculation r = resolve_speculation(SpeculationOptions{}, bundled_dense(), greedy);
  EXPECT_TRUE(r.enabled) << r.reason;
  EXPECT_EQ(r.block_size, 4);
  EXPECT_TRUE(r.measured_costs);
  EXPECT_TRUE(r.pipelined_fallback) << "opted-in models take the managed defaults";
  EXPECT_FALSE(r.async_decode) << "the pipelined decoder defaults on for the managed geometries only";
  EXPECT_TRUE(r.scoped_graphs);
  SpeculationOptions o;
  o.async_decode_blocks = true;
  o.scoped_compile = false;
  o.block_size = 12;
  r = resolve_speculation(o, bundled_dense(), greedy);
  EXPECT_TRUE(r.async_decode);
  EXPECT_FALSE(r.scoped_graphs);
  EXPECT_EQ(r.block_size, 9) << "capped at the widest verification the backends guarantee";
  SamplingParams sampled;
  sampled.temperature = 0.7f;
  EXPECT_FALSE(resolve_speculation(o, bundled_dense(), sampled).async_decode)
      << "the pipelined decoder chains the greedy argmax: sampled requests keep the plain loop";
  // speculation off: the scheduling controls still resolve
  r = resolve_speculation(SpeculationOptions::off(), bundled_dense(), greedy);
  EXPECT_FALSE(r.enabled);
  EXPECT_FALSE(r.reason.empty());
  SamplingParams penalised = greedy;
  penalised.repetition_penalty = 1.1f;
  r = resolve_speculation(SpeculationOptions{}, bundled_dense(), penalised);
  EXPECT_FALSE(r.enabled);
  EXPECT_NE(r.reason.find("penalties"), std::string::npos) << r.reason;
  // a random tiny model neither managed nor opted in: MTP only when forced
  const Qwen35Model& tiny = test::tiny_model("tiny-dense");
  r = resolve_speculation(SpeculationOptions{}, tiny, greedy);
  EXPECT_FALSE(r.enabled);
  EXPECT_NE(r.reason.find("not a managed model"), std::string::npos) << r.reason;
  o = SpeculationOptions{};
  o.mode = SpeculationOptions::Mode::Forced;
  r = resolve_speculation(o, tiny, greedy);
  EXPECT_EQ(r.enabled, tiny.has_mtp()) << r.reason;
  EXPECT_FALSE(r.pipelined_fallback);
}
