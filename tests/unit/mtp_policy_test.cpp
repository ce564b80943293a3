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
  EXPECT_EQ(p.depth_measured(100, {0, 1.0, 1.02, 1.04, 1.06}, 0.05), 3);
  // compute-bound: cost grows linearly with width and the head is not free -> serial
  EXPECT_EQ(p.depth_measured(100, {0, 1.0, 2.0, 3.0, 4.0}, 0.1), 0);
}

TEST(MtpPolicy, CostRatioValidation) {
  EXPECT_DOUBLE_EQ(mere::parse_cost_ratio(nullptr), 0.18);
  EXPECT_DOUBLE_EQ(mere::parse_cost_ratio("0.3"), 0.3);
  EXPECT_DOUBLE_EQ(mere::parse_cost_ratio("5"), 5.0);
  for (const char* bad : {"", "0", "-1", "5.01", "nan", "inf", "abc", "0.3x"}) EXPECT_DOUBLE_EQ(mere::parse_cost_ratio(bad), 0.18) << bad;
}
