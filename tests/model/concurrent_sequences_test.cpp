// One loaded model serves several sequences from several threads at once (the reference and the
// fast CPU backends keep no per-call state in the model; each sequence owns its memory): greedy
// generations run in parallel threads equal the same generations run one after another. The GPU
// check tool relies on this for the reference side of its parity runs (tools/cuda/engine_check.cpp).
#include <gtest/gtest.h>

#include <future>
#include <string>
#include <vector>

#include "model/qwen35.h"
#include "runtime/generator.h"

using namespace mere;

namespace {

std::vector<int32_t> greedy(const Qwen35Model& m, const std::vector<int32_t>& prompt, int64_t n) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.max_tokens = n;
  p.ignore_eos = true;
  std::vector<int32_t> out;
  Generator(m).run(prompt, p, {}, m.config().max_position_embeddings, [&](int32_t id) {
    out.push_back(id);
    return true;
  });
  return out;
}

}  // namespace

TEST(ConcurrentSequences, ParallelGenerationsEqualSerialOnes) {
  for (const char* backend : {"ref", "cpu"}) {
    for (const char* name : {"qwen35-dense-tiny", "qwen35-moe-tiny"}) {
      auto m = Qwen35Model::load(std::string(MERE_SOURCE_DIR) + "/models/" + name, backend);
      std::vector<std::vector<int32_t>> prompts;
      for (int p = 0; p < 4; ++p) {
        std::vector<int32_t> pr;
        for (int i = 0; i < 5 + 3 * p; ++i) pr.push_back((37 * (i + 1) + 101 * p) % 1000 + 10);
        prompts.push_back(pr);
      }
      std::vector<std::vector<int32_t>> serial;
      for (const auto& pr : prompts) serial.push_back(greedy(*m, pr, 16));
      std::vector<std::future<std::vector<int32_t>>> fut;
      for (const auto& pr : prompts) fut.push_back(std::async(std::launch::async, [&m, &pr] { return greedy(*m, pr, 16); }));
      for (size_t p = 0; p < prompts.size(); ++p)
        EXPECT_EQ(fut[p].get(), serial[p]) << name << " on " << backend << ", prompt " << p;
    }
  }
}
