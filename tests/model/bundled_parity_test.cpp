// Greedy parity of MTP on the bundled trained models (issue 7; CI also runs the full form: tests/cmake/parity.cmake): for prompts in the spirit of the
// five benchmark workloads, the token ids with MTP — adaptive, and forced at every depth 1..B-1 —
// equal the ids without MTP. Real acceptance (the heads are trained), so accepted prefixes, bonus
// tokens and partial rollbacks all occur. CI runs 32 tokens per prompt at depths adaptive, 1 and 3 (MERE_PARITY_TOKENS and
// MERE_PARITY_ALL_DEPTHS=1 widen it); tools/mtp_parity.sh runs
// the full version in a release build.
#include <gtest/gtest.h>

#include <cstdlib>

#include "model/qwen35.h"
#include "runtime/generator.h"
#include "text/tokenizer.h"

using namespace mere;

namespace {

const char* kPrompts[] = {
    "# A least-recently-used cache built on a dict and a doubly linked list\nclass LRUCache:\n",
    "User: I stopped reading books last year. How can I get back into the habit?\nAssistant:",
    "The old railway station had been empty for years before the town decided to turn it into a library.",
    "We prove by induction that the sum of the first n squares is n(n+1)(2n+1)/6.\n",
    "Incident log: 14:02 deploy of v2.3 started; 14:09 p99 latency rose to 2.4 s; 14:15 rollback. Summary:",
};

int64_t tokens_per_prompt() {
  const char* e = std::getenv("MERE_PARITY_TOKENS");
  return e ? std::atoll(e) : 32;
}

std::vector<int32_t> generate(const Qwen35Model& m, const std::vector<int32_t>& prompt, int64_t n,
                              const SpeculationOptions& spec, AccelerationStats* accel) {
  SamplingParams p;
  p.temperature = 0;
  p.max_tokens = n;
  p.ignore_eos = true;
  std::vector<int32_t> out;
  GenerationStats st = Generator(m).run(prompt, p, {}, 4096, [&](int32_t id) {
    out.push_back(id);
    return true;
  }, spec);
  if (accel) *accel = st.accel;
  return out;
}

class BundledParity : public ::testing::TestWithParam<std::string> {};

}  // namespace

TEST_P(BundledParity, GreedyOutputUnchangedByMtp) {
  const std::string dir = std::string(MERE_SOURCE_DIR) + "/models/" + GetParam();
  auto model = Qwen35Model::load(dir);
  const Tokenizer tok = Tokenizer::from_dir(dir);
  const int64_t n = tokens_per_prompt();
  int64_t accepted = 0, partial_rounds = 0;
  for (const char* text : kPrompts) {
    SCOPED_TRACE(text);
    const auto prompt = tok.encode(text);
    const auto serial = generate(*model, prompt, n, SpeculationOptions::off(), nullptr);
    ASSERT_EQ(static_cast<int64_t>(serial.size()), n);
    const bool all = std::getenv("MERE_PARITY_ALL_DEPTHS") != nullptr;
    for (int depth : all ? std::vector<int>{0, 1, 2, 3} : std::vector<int>{0, 1, 3}) {
      SpeculationOptions s;
      s.mode = SpeculationOptions::Mode::Forced;
      s.block_size = 4;
      s.forced_depth = depth;  // 0: adaptive depth
      AccelerationStats a;
      EXPECT_EQ(generate(*model, prompt, n, s, &a), serial) << "depth " << depth;
      accepted += a.accepted;
      partial_rounds += a.rounds - a.accepted_by_position.back();
    }
  }
  EXPECT_GT(accepted, 0) << "the trained head never got a draft accepted";
  EXPECT_GT(partial_rounds, 0) << "no round was partially rejected: rollback was not exercised";
}

INSTANTIATE_TEST_SUITE_P(Models, BundledParity, ::testing::Values("qwen35-dense-tiny", "qwen35-moe-tiny"));
