// The op-case table: the fast CPU backend (AVX2 and portable kernels) against the reference ops
// (ops.h) on real Qwen3.5 shapes and kernel-breaking sizes. Each case checks an aggregate error
// (NMSE), an element-wise bound, that no NaN comes out (outputs are poisoned with NaN first), and
// batch-width invariance: every row of a T-row call equals that row computed alone, bitwise.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/fast/fast_backend.h"
#include "ops/ops.h"
#include "quant/affine.h"

namespace {

using mere::Backend;
using mere::DType;
using mere::Matrix;

std::vector<float> randn(size_t n, std::mt19937& g, float s = 1.0f) {
  std::normal_distribution<float> d(0.0f, s);
  std::vector<float> v(n);
  for (auto& x : v) x = d(g);
  return v;
}

std::vector<float> poisoned(size_t n) { return std::vector<float>(n, std::nanf("")); }

struct Err {
  double nmse = 0;
  bool nan = false;
};
Err compare(const std::vector<float>& ref, const std::vector<float>& got) {
  double num = 0, den = 0;
  Err e;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (std::isnan(got[i])) e.nan = true;
    num += (double(ref[i]) - got[i]) * (double(ref[i]) - got[i]);
    den += double(ref[i]) * ref[i];
  }
  e.nmse = den > 0 ? num / den : num;
  return e;
}

std::unique_ptr<Backend> backend(bool generic, int threads = 2) {
  mere::FastCpuOptions o;
  o.threads = threads;
  o.force_generic = generic;
  return mere::make_cpu_fast_backend(o);
}

// ---- linear ----

struct WeightFormat {
  const char* name;
  DType dtype;  // float weights (bits == 0) or scale dtype
  int bits, group;
};

// Owns the storage of a test matrix.
struct TestMatrix {
  Matrix m;
  std::vector<uint8_t> data, scales, biases;
};

TestMatrix make_matrix(const WeightFormat& f, int64_t rows, int64_t cols, std::mt19937& g) {
  TestMatrix t;
  t.m.rows = rows;
  t.m.cols = cols;
  auto w = randn(static_cast<size_t>(rows * cols), g, 0.05f);
  if (f.bits == 0) {
    t.m.dtype = f.dtype;
    t.data.resize(static_cast<size_t>(rows * cols) * mere::dtype_size(f.dtype));
    for (int64_t i = 0; i < rows * cols; ++i) {
      if (f.dtype == DType::F32) std::memcpy(t.data.data() + i * 4, &w[static_cast<size_t>(i)], 4);
      else {
        uint16_t h = f.dtype == DType::BF16 ? mere::f32_to_bf16(w[static_cast<size_t>(i)]) : mere::f32_to_f16(w[static_cast<size_t>(i)]);
        std::memcpy(t.data.data() + i * 2, &h, 2);
      }
    }
    t.m.data = t.data.data();
    return t;
  }
  const int64_t groups = cols / f.group;
  t.data.resize(static_cast<size_t>(rows * cols * f.bits / 8));
  t.scales.resize(static_cast<size_t>(rows * groups) * mere::dtype_size(f.dtype));
  t.biases.resize(t.scales.size());
  if (f.bits == 2 || f.bits == 4 || f.bits == 8) {
    mere::quant::quantize_rows_as(w.data(), rows, cols, f.bits, f.group, reinterpret_cast<uint32_t*>(t.data.data()), f.dtype,
                                  t.scales.data(), t.biases.data());
  } else {  // 3/5/6-bit: random codes in the little-endian bit stream, random scales
    std::uniform_int_distribution<int> byte(0, 255);
    for (auto& b : t.data) b = static_cast<uint8_t>(byte(g));
    auto s = randn(static_cast<size_t>(rows * groups), g, 0.01f);
    for (size_t i = 0; i < s.size(); ++i) {
      uint16_t h = mere::f32_to_bf16(s[i]), b = mere::f32_to_bf16(-s[i] * 3);
      std::memcpy(t.scales.data() + 2 * i, &h, 2);
      std::memcpy(t.biases.data() + 2 * i, &b, 2);
    }
  }
  t.m.bits = f.bits;
  t.m.group = f.group;
  t.m.scale_dtype = f.dtype;
  t.m.data = t.data.data();
  t.m.scales = t.scales.data();
  t.m.biases = t.biases.data();
  return t;
}

// Element bound for int8-quantised activations: per group |err| <= d/2 * sum_c |s (q_c - o)| with
// d = max|x|/127 and |s (q_c - o)| = |w_c - (b + o s)| <= |w_c| + max|w| (b + o s lies inside the
// group's range); plus fp32 slack. mag (optional): sum_c |w_c x_c| per output, the aggregate scale.
std::vector<float> linear_bound(const Matrix& W, const float* x, int64_t T, bool int8_acts,
                                std::vector<float>* mag_out = nullptr) {
  std::vector<float> row(static_cast<size_t>(W.cols)), bound(static_cast<size_t>(T * W.rows));
  if (mag_out) mag_out->assign(bound.size(), 0.0f);
  const int64_t G = W.quantized() ? W.group : W.cols;
  for (int64_t r = 0; r < W.rows; ++r) {
    W.row_f32(r, row.data());
    for (int64_t t = 0; t < T; ++t) {
      const float* xt = x + t * W.cols;
      double b = 0, mag = 0;
      for (int64_t g0 = 0; g0 < W.cols; g0 += G) {
        double amax = 0, wsum = 0, wmax = 0;
        for (int64_t c = g0; c < g0 + G; ++c) {
          const double w = std::fabs(double(row[static_cast<size_t>(c)]));
          amax = std::max(amax, std::fabs(double(xt[c])));
          wsum += w;
          wmax = std::max(wmax, w);
          mag += w * std::fabs(double(xt[c]));
        }
        if (int8_acts) b += amax / 254.0 * (wsum + double(G) * wmax);
      }
      bound[static_cast<size_t>(t * W.rows + r)] = static_cast<float>(b * 1.01 + 1e-5 * mag + 1e-6);
      if (mag_out) (*mag_out)[static_cast<size_t>(t * W.rows + r)] = static_cast<float>(mag);
    }
  }
  return bound;
}

struct LinearCase {
  int64_t rows, cols, T;
};

void run_linear_case(const WeightFormat& f, const LinearCase& c, bool generic, uint32_t seed) {
  std::mt19937 g(seed);
  TestMatrix tm = make_matrix(f, c.rows, c.cols, g);
  const Matrix& W = tm.m;
  auto x = randn(static_cast<size_t>(c.T * c.cols), g);
  std::vector<float> ref(static_cast<size_t>(c.T * c.rows));
  mere::ops::linear(W, x.data(), c.T, ref.data());
  auto be = backend(generic);
  auto got = poisoned(ref.size());
  be->linear(W, x.data(), c.T, got.data());
  const std::string what = std::string(f.name) + (generic ? " generic" : " avx2") + " rows=" + std::to_string(c.rows) +
                           " cols=" + std::to_string(c.cols) + " T=" + std::to_string(c.T);
  Err e = compare(ref, got);
  ASSERT_FALSE(e.nan) << what;
  const bool int8_acts = !generic && W.quantized() && (W.bits == 4 || W.bits == 8);
  std::vector<float> mag;
  auto bound = linear_bound(W, x.data(), c.T, int8_acts, &mag);
  // aggregate error relative to sum_c |w_c x_c| (robust when few outputs happen to be near zero)
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    num += (double(ref[i]) - got[i]) * (double(ref[i]) - got[i]);
    den += double(mag[i]) * mag[i];
  }
  EXPECT_LT(num / den, int8_acts ? 2e-5 : 1e-12) << what << " (NMSE vs y: " << e.nmse << ")";
  int bad = 0;
  for (size_t i = 0; i < ref.size(); ++i)
    if (!(std::fabs(ref[i] - got[i]) <= bound[i]) && bad++ < 3)
      ADD_FAILURE() << what << " element " << i << ": ref " << ref[i] << " got " << got[i] << " bound " << bound[i];
  // batch-width invariance: each row alone, bitwise
  for (int64_t t = 0; t < c.T; ++t) {
    auto one = poisoned(static_cast<size_t>(c.rows));
    be->linear(W, x.data() + t * c.cols, 1, one.data());
    ASSERT_EQ(0, std::memcmp(one.data(), got.data() + t * c.rows, static_cast<size_t>(c.rows) * 4))
        << what << ": row " << t << " differs from the same row computed alone";
  }
  // thread-count invariance
  auto be1 = mere::make_cpu_fast_backend({1, generic});
  auto got1 = poisoned(ref.size());
  be1->linear(W, x.data(), c.T, got1.data());
  ASSERT_EQ(0, std::memcmp(got1.data(), got.data(), got.size() * 4)) << what << ": 1 thread vs 2 threads";
}

const WeightFormat kFormats[] = {
    {"q4g64-bf16", DType::BF16, 4, 64}, {"q4g32-bf16", DType::BF16, 4, 32}, {"q4g128-bf16", DType::BF16, 4, 128},
    {"q8g64-bf16", DType::BF16, 8, 64}, {"q8g32-f16", DType::F16, 8, 32},   {"q8g128-f32", DType::F32, 8, 128},
    {"q4g64-f16", DType::F16, 4, 64},   {"q4g32-f32", DType::F32, 4, 32},   {"q2g64-bf16", DType::BF16, 2, 64},
    {"q3g64-bf16", DType::BF16, 3, 64}, {"q6g32-bf16", DType::BF16, 6, 32}, {"f32", DType::F32, 0, 0},
    {"bf16", DType::BF16, 0, 0},        {"f16", DType::F16, 0, 0},
};

class FastLinear : public ::testing::TestWithParam<bool> {};

TEST_P(FastLinear, OpCaseTable) {
  const bool generic = GetParam();
  uint32_t seed = 1;
  for (const auto& f : kFormats) {
    const int64_t unit = f.bits ? std::max(f.group, 32) : 1;
    std::vector<LinearCase> cases = {
        // real Qwen3.5 widths, a few rows (0.8B: H 1024, FFN 3584, GDN value dim 2048; 35B-A3B expert 512)
        {5, 1024, 1}, {9, 3584, 2}, {4, 2048, 3}, {3, 512, 5},
        // large enough to run on both threads (the others stay below the dispatch threshold)
        {257, 1024, 1}, {70, 1024, 9}, {33, 3584, 3}, {3, 1024, 65},
        // kernel-breaking row counts and token counts
        {1, 4 * unit, 1}, {7, 2 * unit, 7}, {31, unit, 4}, {32, 2 * unit, 9}, {33, unit, 1}, {65, unit, 3},
        {257, unit, 2}, {2, 3 * unit, 33}, {3, unit, 65}};
    if (f.bits == 0) cases.push_back({7, 33, 5}), cases.push_back({9, 7, 3}), cases.push_back({3, 257, 4});
    if (f.bits == 4 && f.group == 32) cases.push_back({6, 96, 5});  // a trailing half chunk
    for (const auto& c : cases) run_linear_case(f, c, generic, seed++);
  }
}

INSTANTIATE_TEST_SUITE_P(Isa, FastLinear, ::testing::Values(false, true),
                         [](const auto& i) { return i.param ? std::string("generic") : std::string("avx2"); });

// ---- gated delta ----

struct GdnCase {
  int64_t T, Hk, Hv, Dk, Dv;
  bool chunked;
};

void ref_gated_delta(std::vector<float>& S, const std::vector<float>& q, const std::vector<float>& k,
                     const std::vector<float>& v, const std::vector<float>& gg, const std::vector<float>& bb,
                     const GdnCase& c, int64_t chunk, std::vector<float>& o) {
  auto ref = mere::make_cpu_reference_backend();
  ref->gated_delta(S.data(), q.data(), k.data(), v.data(), gg.data(), bb.data(), c.T, c.Hk, c.Hv, c.Dk, c.Dv, c.chunked,
                   chunk, o.data());
}

class FastGdn : public ::testing::TestWithParam<bool> {};

TEST_P(FastGdn, OpCaseTable) {
  const bool generic = GetParam();
  const GdnCase cases[] = {
      {1, 16, 16, 128, 128, false}, {1, 2, 4, 128, 128, false}, {7, 1, 2, 128, 128, false}, {16, 1, 1, 128, 128, false},
      {3, 1, 3, 16, 24, false},     {5, 2, 2, 8, 7, false},     {1, 1, 1, 12, 5, false},    {33, 1, 2, 128, 128, true},
      {65, 1, 1, 128, 128, true},   {17, 2, 2, 16, 24, true},   {64, 1, 1, 16, 8, true},    {130, 1, 1, 32, 16, true},
      {7, 1, 1, 8, 8, true},        {1, 1, 1, 16, 16, true}};
  uint32_t seed = 100;
  for (const auto& c : cases) {
    std::mt19937 g(seed++);
    auto q = randn(static_cast<size_t>(c.T * c.Hk * c.Dk), g), k = randn(q.size(), g);
    auto v = randn(static_cast<size_t>(c.T * c.Hv * c.Dv), g);
    for (int64_t i = 0; i < c.T * c.Hk; ++i) {
      mere::ops::l2_normalize(q.data() + i * c.Dk, c.Dk, 1e-6f);
      mere::ops::l2_normalize(k.data() + i * c.Dk, c.Dk, 1e-6f);
      for (int64_t j = 0; j < c.Dk; ++j) q[static_cast<size_t>(i * c.Dk + j)] /= std::sqrt(float(c.Dk));
    }
    std::uniform_real_distribution<float> u(0.0f, 1.0f);
    std::vector<float> gg(static_cast<size_t>(c.T * c.Hv)), bb(gg.size());
    for (size_t i = 0; i < gg.size(); ++i) gg[i] = -3.0f * u(g), bb[i] = u(g);
    auto S0 = randn(static_cast<size_t>(c.Hv * c.Dv * c.Dk), g, 0.3f);
    std::vector<float> Sr = S0, orr(static_cast<size_t>(c.T * c.Hv * c.Dv));
    ref_gated_delta(Sr, q, k, v, gg, bb, c, 64, orr);
    auto be = backend(generic);
    std::vector<float> Sf = S0;
    auto of = poisoned(orr.size());
    be->gated_delta(Sf.data(), q.data(), k.data(), v.data(), gg.data(), bb.data(), c.T, c.Hk, c.Hv, c.Dk, c.Dv, c.chunked, 64,
                    of.data());
    const std::string what = std::string(generic ? "generic" : "avx2") + (c.chunked ? " chunked" : " recurrent") +
                             " T=" + std::to_string(c.T) + " Hv=" + std::to_string(c.Hv) + " Dk=" + std::to_string(c.Dk) +
                             " Dv=" + std::to_string(c.Dv);
    Err eo = compare(orr, of), es = compare(Sr, Sf);
    ASSERT_FALSE(eo.nan || es.nan) << what;
    EXPECT_LT(eo.nmse, 1e-10) << what << " outputs";
    EXPECT_LT(es.nmse, 1e-10) << what << " state";
    double scale = 0;
    for (float x : orr) scale = std::max(scale, std::fabs(double(x)));
    for (size_t i = 0; i < orr.size(); ++i)
      ASSERT_LE(std::fabs(orr[i] - of[i]), 1e-4 * scale + 1e-6) << what << " element " << i;
    if (c.chunked) continue;
    // recurrent: T tokens at once == token by token, bitwise (outputs and final state)
    std::vector<float> S1 = S0, o1 = poisoned(orr.size());
    for (int64_t t = 0; t < c.T; ++t)
      be->gated_delta(S1.data(), q.data() + t * c.Hk * c.Dk, k.data() + t * c.Hk * c.Dk, v.data() + t * c.Hv * c.Dv,
                      gg.data() + t * c.Hv, bb.data() + t * c.Hv, 1, c.Hk, c.Hv, c.Dk, c.Dv, false, 64,
                      o1.data() + t * c.Hv * c.Dv);
    ASSERT_EQ(0, std::memcmp(o1.data(), of.data(), of.size() * 4)) << what << ": batch-width invariance (outputs)";
    ASSERT_EQ(0, std::memcmp(S1.data(), Sf.data(), Sf.size() * 4)) << what << ": batch-width invariance (state)";
  }
}

INSTANTIATE_TEST_SUITE_P(Isa, FastGdn, ::testing::Values(false, true),
                         [](const auto& i) { return i.param ? std::string("generic") : std::string("avx2"); });

// ---- attention ----

struct AttnCase {
  int64_t T, first_len, nh, nkv, hd;
};

class FastAttention : public ::testing::TestWithParam<bool> {};

TEST_P(FastAttention, OpCaseTable) {
  const bool generic = GetParam();
  const AttnCase cases[] = {{1, 1, 8, 2, 256},  {1, 257, 8, 2, 256}, {7, 1, 8, 2, 256},  {4, 60, 16, 2, 256},
                            {33, 31, 4, 1, 16}, {65, 1, 2, 2, 8},    {3, 5, 24, 4, 32},  {2, 9, 6, 3, 12},
                            {1, 64, 9, 1, 40},  {32, 33, 2, 1, 24},  {257, 1, 1, 1, 8}};
  uint32_t seed = 500;
  for (const auto& c : cases) {
    std::mt19937 g(seed++);
    const int64_t len = c.first_len + c.T - 1;
    auto q = randn(static_cast<size_t>(c.T * c.nh * c.hd), g), k = randn(static_cast<size_t>(len * c.nkv * c.hd), g),
         v = randn(k.size(), g);
    const float scale = 1.0f / std::sqrt(float(c.hd));
    std::vector<float> ref(q.size());
    mere::make_cpu_reference_backend()->attention(q.data(), k.data(), v.data(), c.T, c.first_len, c.nh, c.nkv, c.hd, scale,
                                                  ref.data());
    auto be = backend(generic);
    auto got = poisoned(q.size());
    be->attention(q.data(), k.data(), v.data(), c.T, c.first_len, c.nh, c.nkv, c.hd, scale, got.data());
    const std::string what = std::string(generic ? "generic" : "avx2") + " T=" + std::to_string(c.T) +
                             " first_len=" + std::to_string(c.first_len) + " nh=" + std::to_string(c.nh) +
                             " nkv=" + std::to_string(c.nkv) + " hd=" + std::to_string(c.hd);
    Err e = compare(ref, got);
    ASSERT_FALSE(e.nan) << what;
    EXPECT_LT(e.nmse, 1e-11) << what;
    for (size_t i = 0; i < ref.size(); ++i) ASSERT_LE(std::fabs(ref[i] - got[i]), 1e-5f) << what << " element " << i;
    for (int64_t t = 0; t < c.T; ++t) {
      auto one = poisoned(static_cast<size_t>(c.nh * c.hd));
      be->attention(q.data() + t * c.nh * c.hd, k.data(), v.data(), 1, c.first_len + t, c.nh, c.nkv, c.hd, scale, one.data());
      ASSERT_EQ(0, std::memcmp(one.data(), got.data() + t * c.nh * c.hd, one.size() * 4)) << what << ": row " << t;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Isa, FastAttention, ::testing::Values(false, true),
                         [](const auto& i) { return i.param ? std::string("generic") : std::string("avx2"); });

}  // namespace
