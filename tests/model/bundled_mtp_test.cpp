// The bundled trained models against the PyTorch reference (tools/mtp_reference.py): main logits,
// the MTP head's priming pass over a held-out sequence, and two chained drafts at fixed positions.
// The MoE model is the 4-bit MLX checkpoint; its fixtures were computed from the dequantised weights.
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

const std::string kRoot = MERE_SOURCE_DIR;

void expect_close(const float* got, const float* ref, int64_t rows, int64_t V, const std::string& what) {
  double max_diff = 0, max_ref = 0;
  int64_t agree = 0;
  for (int64_t t = 0; t < rows; ++t) {
    for (int64_t v = 0; v < V; ++v) {
      ASSERT_TRUE(std::isfinite(got[t * V + v])) << what;
      max_diff = std::max(max_diff, std::fabs(double(got[t * V + v]) - ref[t * V + v]));
      max_ref = std::max(max_ref, std::fabs(double(ref[t * V + v])));
    }
    agree += std::max_element(got + t * V, got + (t + 1) * V) - (got + t * V) ==
             std::max_element(ref + t * V, ref + (t + 1) * V) - (ref + t * V);
  }
  EXPECT_LE(max_diff, 1e-3 * max_ref) << what << ": max |diff| " << max_diff << ", max |ref| " << max_ref;
  EXPECT_GE(double(agree) / double(rows), rows >= 1000 ? 0.999 : 1.0) << what << ": argmax agrees at " << agree << "/" << rows;
}

class BundledMtp : public ::testing::TestWithParam<std::string> {};

}  // namespace

TEST_P(BundledMtp, MatchesPyTorchReference) {
  const std::string name = GetParam();
  const std::string fx = kRoot + "/tests/data/mtp/" + name;
  ASSERT_TRUE(fs::exists(fx + "/mtp_logits_1.npy")) << fx;
  auto model = Qwen35Model::load(kRoot + "/models/" + name, "ref");  // the reference backend vs PyTorch
  ASSERT_TRUE(model->has_mtp());
  const int64_t H = model->config().hidden_size, V = model->config().vocab_size;
  std::vector<int32_t> ids;
  const Json ids_json = Json::parse_file(fx + "/input_ids.json");  // must outlive the loop
  for (const auto& v : ids_json.as_array()) ids.push_back(static_cast<int32_t>(v.as_int()));
  const int64_t T = static_cast<int64_t>(ids.size());

  SequenceMemory mem = model->new_memory();
  std::vector<float> hidden(static_cast<size_t>(T * H)), logits(static_cast<size_t>(T * V));
  model->forward(ids.data(), T, mem, hidden.data(), logits.data(), LogitsMode::All);
  auto main_ref = read_npy_f32(fx + "/main_logits.npy");
  ASSERT_EQ(main_ref.shape, (std::vector<int64_t>{T, V}));
  expect_close(logits.data(), main_ref.data.data(), T, V, "main logits");

  // priming: rows i = (h_i, x_{i+1}) at positions 0..T-2
  std::vector<float> mh(static_cast<size_t>((T - 1) * H)), ml(static_cast<size_t>((T - 1) * V));
  model->mtp_forward(hidden.data(), ids.data() + 1, T - 1, mem, mh.data(), ml.data());
  auto m1 = read_npy_f32(fx + "/mtp_logits_1.npy");
  ASSERT_EQ(m1.shape, (std::vector<int64_t>{T - 1, V}));
  expect_close(ml.data(), m1.data.data(), T - 1, V, "draft 1 (priming)");

  // chained drafts at the fixture's base positions, fed the fixture's drafts
  const Json drafts = Json::parse_file(fx + "/drafts.json");
  auto m2 = read_npy_f32(fx + "/mtp_logits_2.npy");
  auto m3 = read_npy_f32(fx + "/mtp_logits_3.npy");
  const int64_t P = static_cast<int64_t>(drafts.size());
  ASSERT_EQ(m2.shape, (std::vector<int64_t>{P, V}));
  for (int64_t k = 0; k < P; ++k) {
    const Json& d = drafts.at(static_cast<size_t>(k));
    const int64_t b = d.at("b").as_int();
    SequenceMemory f = mem.fork();
    f.mtp_kv().truncate(b + 1);
    const int32_t d1 = static_cast<int32_t>(d.at("d1").as_int()), d2 = static_cast<int32_t>(d.at("d2").as_int());
    std::vector<float> h2(static_cast<size_t>(H)), h3(static_cast<size_t>(H)), l2(static_cast<size_t>(V)), l3(static_cast<size_t>(V));
    model->mtp_forward(mh.data() + b * H, &d1, 1, f, h2.data(), l2.data());
    model->mtp_forward(h2.data(), &d2, 1, f, h3.data(), l3.data());
    expect_close(l2.data(), m2.data.data() + k * V, 1, V, "draft 2 at b=" + std::to_string(b));
    expect_close(l3.data(), m3.data.data() + k * V, 1, V, "draft 3 at b=" + std::to_string(b));
  }
}

INSTANTIATE_TEST_SUITE_P(Models, BundledMtp, ::testing::Values("qwen35-dense-tiny", "qwen35-moe-tiny"));
