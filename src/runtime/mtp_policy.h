// The adaptive draft-depth policy of mtp.md §2, exactly: per-position acceptance estimates
// p[i] = 0.85 * 0.98^i, learning rate 0.15, optimism capped at 0.95, and the depth rule
// reach > c(1+E)/(1+d*c). A measured-cost variant (issue 7 item 4) picks the depth that maximises
// expected committed tokens per second from measured head-step and verification costs.
#pragma once
#include <cstdint>
#include <vector>

namespace mere {

class AdaptiveDepthPolicy {
 public:
  static constexpr double kAlpha = 0.15;
  static constexpr double kOptimismCap = 0.95;

  // block_size B >= 2 (1 committed + up to B-1 drafts); cost_ratio c in (0, 5]
  AdaptiveDepthPolicy(int block_size, double cost_ratio);

  // The seed's rule. offered = min(B-1, tokens still to generate).
  int depth(int64_t offered) const;
  // Measured costs: verify_seconds[w] for a target pass of w rows and head_seconds[w] for a head pass
  // of w rows (last row's logits only), w = 1..B (index w; [0] unused). A round of depth d costs
  // verify(d+1) + head(1 + E_d) + (d - 1) head(1): one catch-up pass over the previous round's
  // confirmed rows and the new one (steady state: 1 + E_d rows, linearly interpolated between
  // widths) and d - 1 chained single-row drafts. Maximises (1 + E_d) / cost over d in [0, cap]
  // against serial's 1 / verify(1); d = 0 is serial. (Counting the catch-up rows at the single-row
  // cost, as the first version did, overcharged the head: a w-row pass computes one lm_head row.)
  int depth_measured(int64_t offered, const std::vector<double>& verify_seconds,
                     const std::vector<double>& head_seconds) const;

  // A round with `accepted` of `drafted` (>= 1) drafts accepted.
  void record(int accepted, int drafted);

  const std::vector<double>& estimates() const { return p_; }
  int block_size() const { return block_; }
  double cost_ratio() const { return c_; }

 private:
  int block_;
  double c_;
  std::vector<double> p_;  // [B-1]
};

// MERERUN_Q35_MTP_HEAD_COST_RATIO semantics: finite, 0 < c <= 5, else 0.18.
double parse_cost_ratio(const char* text);

}  // namespace mere
