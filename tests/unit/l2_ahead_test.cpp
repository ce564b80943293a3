// The L2 prefetch shares of the CUDA decode hints (src/backend/cuda/l2_ahead.h l2_share, which
// l2_ahead() and the MoE kernels' prefetch_share run on the device): simulated on the host for many
// spans, alignments and block counts, every prefetched byte lies inside its span, the shares never
// overlap, every range is 16-byte aligned, and what is left out is at most 15 bytes at each share end.
#include <gtest/gtest.h>

#include <cstdint>

#include "backend/cuda/l2_ahead.h"

namespace {

using mere::cuda::L2Share;
using mere::cuda::l2_share;

void check_shares(uint64_t p, uint64_t bytes, uint64_t nb) {
  SCOPED_TRACE(::testing::Message() << "p " << p << ", bytes " << bytes << ", nb " << nb);
  uint64_t covered = 0, prev_hi = p;
  for (uint64_t b = 0; b < nb; ++b) {
    const L2Share s = l2_share(p, bytes, b, nb);
    const uint64_t s0 = p + bytes * b / nb, s1 = p + bytes * (b + 1) / nb;  // the exact share
    if (s.hi <= s.lo) {
      EXPECT_LT(s1 - s0, 31u) << "an empty rounded share must come from a share of under 31 bytes";
      continue;
    }
    EXPECT_EQ(s.lo % 16, 0u);
    EXPECT_EQ(s.hi % 16, 0u);
    EXPECT_GE(s.lo, s0);
    EXPECT_LE(s.hi, s1);
    EXPECT_LT(s.lo - s0, 16u);
    EXPECT_LT(s1 - s.hi, 16u);
    EXPECT_GE(s.lo, prev_hi) << "shares overlap";
    prev_hi = s.hi;
    covered += s.hi - s.lo;
  }
  EXPECT_LE(covered, bytes);
  EXPECT_GE(covered + 30 * nb, bytes) << "more than 30 bytes a share left out";
}

TEST(L2Ahead, SharesStayInsideTheirSpanAligned) {
  const uint64_t bases[] = {0x7f0000000000ull, 0x7f0000000008ull, 0x7f000000000eull, 0x7f0000001001ull};
  // the engine's spans: 35B-A3B out_proj codes (4.2 MB) and scales, the next in_proj, 27B gate/up,
  // small and odd sizes
  const uint64_t sizes[] = {0, 1, 15, 16, 17, 100, 4096, 65536, 131072, 4194304, 4194304 + 30, 14155776, 44564480};
  const uint64_t blocks[] = {1, 2, 7, 16, 24, 32, 33, 128, 256, 288, 512, 768};
  for (uint64_t p : bases)
    for (uint64_t n : sizes)
      for (uint64_t nb : blocks) check_shares(p, n, nb);
}

TEST(L2Ahead, OneShareIsTheWholeAlignedSpan) {
  const L2Share s = l2_share(0x1000, 4096, 0, 1);
  EXPECT_EQ(s.lo, 0x1000u);
  EXPECT_EQ(s.hi, 0x2000u);
  const L2Share t = l2_share(0x1004, 40, 0, 1);  // [0x1004, 0x102c): the aligned part is [0x1010, 0x1020)
  EXPECT_EQ(t.lo, 0x1010u);
  EXPECT_EQ(t.hi, 0x1020u);
}

}  // namespace
