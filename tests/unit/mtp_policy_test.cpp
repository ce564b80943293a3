// The adaptive depth policy against the reference depths of mtp.md §2, its update rule, and the
// cost-ratio validation of MERERUN_Q35_MTP_HEAD_COST_RATIO.
#include <gtest/gtest.h>

#include <cmath>

#include "runtime/mtp_policy.h"

using mere::AdaptiveDepthPolicy;

TEST(MtpPolicy, ReferenceFirstRoundDepths) {
  EXPECT_EQ(AdaptiveDepthPolicy(8, 0.18).depth(100), 4);
  EXPECT_EQ(AdaptiveDepthPolicy(8, 0.30).depth(100), 3);
  EXPECT_EQ(AdaptiveDepthPolicy(8, 0.05).depth(100), 7);
  EXPECT_EQ(AdaptiveDepthPolicy(8, 0.8).depth(100), 1);
  EXPECT_EQ(AdaptiveDepthPolicy(4, 0.18).depth(100), 3);
  EXPECT_EQ(AdaptiveDepthPolicy(8, 0.18).depth(2), 2);  // capped by the tokens still to generate
  EXPECT_EQ(AdaptiveDepthPolicy(8, 0.18).depth(0), 0);
}

TEST(MtpPolicy, InitialEstimates) {
  AdaptiveDepthPolicy p(8, 0.18);
  ASSERT_EQ(p.estimates().size(), 7u);
  for (size_t i = 0; i < 7; ++i) EXPECT_DOUBLE_EQ(p.estimates()[i], 0.85 * std::pow(0.98, double(i)));
}

TEST(MtpPolicy, RecordRule) {
  AdaptiveDepthPolicy p(8, 0.18);
  const auto e0 = p.estimates();
  p.record(2, 4);  // positions 0,1 accepted, position 2 rejected, 3.. untouched
  EXPECT_DOUBLE_EQ(p.estimates()[0], e0[0] + 0.15 * (1 - e0[0]));
  EXPECT_DOUBLE_EQ(p.estimates()[1], e0[1] + 0.15 * (1 - e0[1]));
  EXPECT_DOUBLE_EQ(p.estimates()[2], e0[2] + 0.15 * (0 - e0[2]));
  EXPECT_DOUBLE_EQ(p.estimates()[3], e0[3]);
  AdaptiveDepthPolicy q(8, 0.18);
  q.record(3, 3);  // all accepted: optimism towards 0.95 for the first untried position
  EXPECT_DOUBLE_EQ(q.estimates()[3], e0[3] + 0.15 * (0.95 - e0[3]));
  AdaptiveDepthPolicy r(4, 0.18);
  r.record(3, 3);  // a == B-1: nothing beyond the array
  EXPECT_DOUBLE_EQ(r.estimates()[2], e0[2] + 0.15 * (1 - e0[2]));
}

TEST(MtpPolicy, TotalRejectionReachesZeroInAboutTenRounds) {
  AdaptiveDepthPolicy p(8, 0.18);
  int rounds = 0;
  for (int d = p.depth(100); d > 0 && rounds < 100; d = p.depth(100)) {
    p.record(0, d);
    ++rounds;
  }
  EXPECT_GE(rounds, 7);
  EXPECT_LE(rounds, 13);
  EXPECT_EQ(p.depth(100), 0);  // absorbing: no record happens at depth 0
}

TEST(MtpPolicy, MeasuredCostsPreferSerialWhenVerifyIsExpensive) {
  AdaptiveDepthPolicy p(4, 0.18);
  // memory-bound: a width-4 pass costs about one step -> draft deep
  EXPECT_EQ(p.depth_measured(100, {0, 1.0, 1.02, 1.04, 1.06}, {0, 0.05, 0.06, 0.07, 0.08}), 3);
  // compute-bound: cost grows linearly with width and the head is not free -> serial
  EXPECT_EQ(p.depth_measured(100, {0, 1.0, 2.0, 3.0, 4.0}, {0, 0.1, 0.2, 0.3, 0.4}), 0);
  // no head or verify costs measured yet -> serial
  EXPECT_EQ(p.depth_measured(100, {0, 1.0, 1.0, 1.0, 1.0}, {}), 0);
}

// The bundled dense model on the 2-core CPU (calibrated: verify 0.8 / 1.0 / 1.2 / 1.4 ms, head row
// 0.3 ms): charging every catch-up row a single-row head cost says serial wins at the initial
// estimates (d = 1: 1.85 / (1.0 + 0.3 + 0.85 * 0.3) = 1.19 tokens/ms against serial 1.25); a head
// pass whose cost barely grows with its rows (one lm_head row however many rows) makes depth 1 pay:
// 1.85 / (1.0 + head(1.85) = 0.3425) = 1.38 tokens/ms (d = 2: 1.36, d = 3: 1.30).
TEST(MtpPolicy, MeasuredCostsCountTheCatchUpPassAsOnePass) {
  AdaptiveDepthPolicy p(4, 0.18);
  const std::vector<double> verify = {0, 0.8e-3, 1.0e-3, 1.2e-3, 1.4e-3};
  const std::vector<double> per_row = {0, 0.3e-3, 0.6e-3, 0.9e-3, 1.2e-3}, batched = {0, 0.3e-3, 0.35e-3, 0.4e-3, 0.45e-3};
  EXPECT_EQ(p.depth_measured(100, verify, per_row), 0);
  EXPECT_EQ(p.depth_measured(100, verify, batched), 1);
  // a flat verification cost (memory-bound, a GPU) and a cheap head: the deepest draft pays
  // (d = 1, 2, 3: 2.02, 2.48, 2.74 tokens/ms)
  const std::vector<double> flat = {0, 0.8e-3, 0.8e-3, 0.8e-3, 0.8e-3}, cheap = {0, 0.1e-3, 0.12e-3, 0.14e-3, 0.16e-3};
  EXPECT_EQ(p.depth_measured(100, flat, cheap), 3);
  EXPECT_EQ(p.depth_measured(2, flat, cheap), 2);  // capped by offered
}
