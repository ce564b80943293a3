// Reference ops against independent oracles: chunked vs recurrent GatedDeltaNet (1e-5 relative),
// RMSNorm and attention against double-precision loops, on kernel-breaking sizes.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "ops/ops.h"

namespace {
std::vector<float> randn(size_t n, std::mt19937& g, float s = 1.0f) {
  std::normal_distribution<float> d(0.0f, s);
  std::vector<float> v(n);
  for (auto& x : v) x = d(g);
  return v;
}
}  // namespace

class GdnChunkedVsRecurrent : public ::testing::TestWithParam<int> {};

TEST_P(GdnChunkedVsRecurrent, AgreeWithinTolerance) {
  const int64_t T = GetParam(), Dk = 16, Dv = 24;
  std::mt19937 g(1234 + static_cast<unsigned>(T));
  auto q = randn(static_cast<size_t>(T * Dk), g), k = randn(static_cast<size_t>(T * Dk), g), v = randn(static_cast<size_t>(T * Dv), g);
  for (int64_t t = 0; t < T; ++t) {
    mere::ops::l2_normalize(q.data() + t * Dk, Dk, 1e-6f);
    mere::ops::l2_normalize(k.data() + t * Dk, Dk, 1e-6f);
  }
  std::vector<float> gate(static_cast<size_t>(T)), beta(static_cast<size_t>(T));
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  for (int64_t t = 0; t < T; ++t) {
    gate[static_cast<size_t>(t)] = -2.0f * u(g);
    beta[static_cast<size_t>(t)] = u(g);
  }
  auto S0 = randn(static_cast<size_t>(Dv * Dk), g, 0.3f);
  std::vector<float> Sr = S0, Sc = S0, orr(static_cast<size_t>(T * Dv)), oc(static_cast<size_t>(T * Dv), NAN);
  for (int64_t t = 0; t < T; ++t)
    mere::ops::gdn_step(Sr.data(), q.data() + t * Dk, k.data() + t * Dk, v.data() + t * Dv, gate[static_cast<size_t>(t)],
                        beta[static_cast<size_t>(t)], Dk, Dv, orr.data() + t * Dv);
  mere::ops::gdn_chunked(Sc.data(), q.data(), k.data(), v.data(), gate.data(), beta.data(), T, Dk, Dv, 32, oc.data());
  auto rel = [](const std::vector<float>& a, const std::vector<float>& b) {
    double num = 0, den = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      if (std::isnan(b[i])) return 1e30;
      num += (a[i] - b[i]) * (a[i] - b[i]);
      den += a[i] * a[i];
    }
    return std::sqrt(num / den);
  };
  EXPECT_LT(rel(orr, oc), 1e-5) << "outputs, T=" << T;
  EXPECT_LT(rel(Sr, Sc), 1e-5) << "state, T=" << T;
}

INSTANTIATE_TEST_SUITE_P(Sizes, GdnChunkedVsRecurrent, ::testing::Values(1, 7, 31, 32, 33, 64, 65, 130));

TEST(Ops, RmsNormMatchesDouble) {
  std::mt19937 g(7);
  for (int64_t n : {1, 7, 64, 257}) {
    auto x = randn(static_cast<size_t>(n), g), w = randn(static_cast<size_t>(n), g);
    std::vector<float> y(static_cast<size_t>(n));
    mere::ops::rms_norm(x.data(), w.data(), 1, n, 1e-6f, y.data());
    double ss = 0;
    for (auto v : x) ss += static_cast<double>(v) * v;
    const double r = 1.0 / std::sqrt(ss / static_cast<double>(n) + 1e-6);
    for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(y[static_cast<size_t>(i)], x[static_cast<size_t>(i)] * r * w[static_cast<size_t>(i)], 1e-5);
  }
}

TEST(Ops, AttentionMatchesDouble) {
  std::mt19937 g(9);
  const int64_t nh = 4, nkv = 2, hd = 8;
  for (int64_t len : {1, 5, 33}) {
    auto q = randn(static_cast<size_t>(nh * hd), g), k = randn(static_cast<size_t>(len * nkv * hd), g),
         v = randn(static_cast<size_t>(len * nkv * hd), g);
    std::vector<float> o(static_cast<size_t>(nh * hd));
    mere::ops::attention(q.data(), k.data(), v.data(), len, nh, nkv, hd, 0.35f, o.data());
    for (int64_t h = 0; h < nh; ++h) {
      const int64_t kh = h / (nh / nkv);
      std::vector<double> p(static_cast<size_t>(len));
      double mx = -1e300, sum = 0;
      for (int64_t j = 0; j < len; ++j) {
        double s = 0;
        for (int64_t d = 0; d < hd; ++d) s += static_cast<double>(q[static_cast<size_t>(h * hd + d)]) * k[static_cast<size_t>((j * nkv + kh) * hd + d)];
        p[static_cast<size_t>(j)] = s * 0.35;
        mx = std::max(mx, p[static_cast<size_t>(j)]);
      }
      for (auto& x : p) sum += (x = std::exp(x - mx));
      for (int64_t d = 0; d < hd; ++d) {
        double acc = 0;
        for (int64_t j = 0; j < len; ++j) acc += p[static_cast<size_t>(j)] / sum * v[static_cast<size_t>((j * nkv + kh) * hd + d)];
        EXPECT_NEAR(o[static_cast<size_t>(h * hd + d)], acc, 1e-5);
      }
    }
  }
}

TEST(Ops, RopeRotatesPairsHalfApart) {
  std::vector<float> x = {1, 0, 0, 0, 0, 1, 0, 0, 9};  // hd 9 would be odd; use first 8 dims rotary 4
  std::vector<float> h(x.begin(), x.begin() + 8);
  mere::ops::rope(h.data(), 1, 8, 4, 3, 10000.0);
  // pair (0, 2): angle 3 * 1 = 3
  EXPECT_NEAR(h[0], std::cos(3.0f), 1e-6);
  EXPECT_NEAR(h[2], std::sin(3.0f), 1e-6);
  EXPECT_EQ(h[5], 1.0f);  // beyond rotary_dim: untouched
}
