// Goldens from Hugging Face transformers (tools/goldens/make_goldens.py, run on the GPU machine):
// the CPU reference engine's logits must match within 1e-3 * max|ref| per sequence, with identical
// argmax at >= 99.9% of positions. Every case directory under tests/data/goldens is checked.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "core/json.h"
#include "io/npy.h"
#include "model/qwen35.h"

namespace fs = std::filesystem;
using namespace mere;

namespace {

std::vector<std::string> golden_cases() {
  std::vector<std::string> out;
  const fs::path root = fs::path(MERE_SOURCE_DIR) / "tests/data/goldens";
  if (fs::is_directory(root))
    for (const auto& e : fs::directory_iterator(root))
      if (fs::exists(e.path() / "logits.npy")) out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

struct Compare {
  double max_abs_diff = 0, max_abs_ref = 0;
  int64_t argmax_agree = 0, rows = 0;
};

Compare compare_logits(const std::vector<float>& got, const NpyArray<float>& ref, int64_t V) {
  Compare c;
  c.rows = ref.shape[0];
  for (int64_t t = 0; t < c.rows; ++t) {
    const float* g = got.data() + t * V;
    const float* r = ref.data.data() + t * V;
    for (int64_t v = 0; v < V; ++v) {
      EXPECT_TRUE(std::isfinite(g[v])) << "non-finite logit at " << t << "," << v;
      c.max_abs_diff = std::max(c.max_abs_diff, std::fabs(double(g[v]) - r[v]));
      c.max_abs_ref = std::max(c.max_abs_ref, std::fabs(double(r[v])));
    }
    c.argmax_agree += (std::max_element(g, g + V) - g) == (std::max_element(r, r + V) - r);
  }
  return c;
}

}  // namespace

TEST(Goldens, CasesExist) {
  // The fixtures are committed; an empty directory would make the comparison vacuous.
  EXPECT_GE(golden_cases().size(), 4u) << "tests/data/goldens has too few cases";
}

TEST(Goldens, CpuLogitsMatchTransformers) {
  for (const auto& dir : golden_cases()) {
    SCOPED_TRACE(dir);
    auto model = Qwen35Model::load(dir, "ref");  // the reference backend vs transformers
    const int64_t V = model->config().vocab_size;
    Json ids_json = Json::parse_file(dir + "/input_ids.json");
    std::vector<int32_t> ids;
    for (const auto& v : ids_json.as_array()) ids.push_back(static_cast<int32_t>(v.as_int()));
    const auto ref = read_npy_f32(dir + "/logits.npy");
    ASSERT_EQ(ref.shape.size(), 2u);
    ASSERT_EQ(ref.shape[0], static_cast<int64_t>(ids.size()));
    ASSERT_EQ(ref.shape[1], V);
    const int64_t T = static_cast<int64_t>(ids.size());
    std::vector<float> got(static_cast<size_t>(T * V), NAN);
    SequenceMemory mem = model->new_memory();
    model->forward(ids.data(), T, mem, nullptr, got.data(), LogitsMode::All);
    Compare c = compare_logits(got, ref, V);
    EXPECT_LE(c.max_abs_diff, 1e-3 * c.max_abs_ref) << "max |diff| " << c.max_abs_diff << " vs max |ref| " << c.max_abs_ref;
    EXPECT_GE(double(c.argmax_agree) / double(c.rows), 0.999) << c.argmax_agree << "/" << c.rows << " argmax agree";
    // decode path: the last 8 positions again, one token at a time after a prefill of the rest
    SequenceMemory mem2 = model->new_memory();
    const int64_t P = T - 8;
    model->forward(ids.data(), P, mem2, nullptr, nullptr, LogitsMode::None);
    std::vector<float> step(static_cast<size_t>(8 * V));
    for (int64_t t = 0; t < 8; ++t) model->forward(&ids[static_cast<size_t>(P + t)], 1, mem2, nullptr, step.data() + t * V, LogitsMode::Last);
    NpyArray<float> tail;
    tail.shape = {8, V};
    tail.data.assign(ref.data.begin() + P * V, ref.data.end());
    Compare d = compare_logits(step, tail, V);
    EXPECT_LE(d.max_abs_diff, 1e-3 * d.max_abs_ref) << "decode: max |diff| " << d.max_abs_diff;
  }
}
