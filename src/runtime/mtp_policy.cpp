// AdaptiveDepthPolicy: mtp.md §2 verbatim, plus the measured-cost depth choice.
#include "runtime/mtp_policy.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "core/error.h"

namespace mere {

AdaptiveDepthPolicy::AdaptiveDepthPolicy(int block_size, double cost_ratio) : block_(block_size), c_(cost_ratio) {
  MERE_CHECK(block_size >= 2, "mtp-policy", "block size must be >= 2, got ", block_size);
  p_.resize(static_cast<size_t>(block_size - 1));
  for (size_t i = 0; i < p_.size(); ++i) p_[i] = 0.85 * std::pow(0.98, static_cast<double>(i));
}

int AdaptiveDepthPolicy::depth(int64_t offered) const {
  const int64_t cap = std::min<int64_t>(offered, block_ - 1);
  if (cap <= 0) return 0;
  double reach = 1.0, E = 0.0;
  int d = 0;
  while (d < cap) {
    reach *= p_[static_cast<size_t>(d)];
    const double threshold = c_ * (1.0 + E) / (1.0 + d * c_);
    if (!(reach > threshold)) break;
    E += reach;
    ++d;
  }
  return d;
}

namespace {
// cost[w] at a fractional width x, linear between the integer widths 1..n-1 (clamped)
double at_width(const std::vector<double>& cost, double x) {
  const double hi = static_cast<double>(cost.size() - 1);
  x = std::clamp(x, 1.0, hi);
  const size_t w0 = static_cast<size_t>(x), w1 = std::min(w0 + 1, cost.size() - 1);
  return cost[w0] + (cost[w1] - cost[w0]) * (x - static_cast<double>(w0));
}
}  // namespace

int AdaptiveDepthPolicy::depth_measured(int64_t offered, const std::vector<double>& verify_seconds,
                                        const std::vector<double>& head_seconds) const {
  const int64_t cap = std::min<int64_t>({offered, block_ - 1, static_cast<int64_t>(verify_seconds.size()) - 2});
  if (cap <= 0 || verify_seconds.size() < 2 || head_seconds.size() < 2 || !(verify_seconds[1] > 0)) return 0;
  double best_rate = 1.0 / verify_seconds[1];  // serial: one token per width-1 step
  int best = 0;
  double reach = 1.0, E = 0.0;
  for (int d = 1; d <= cap; ++d) {
    reach *= p_[static_cast<size_t>(d - 1)];
    E += reach;
    const double cost = verify_seconds[static_cast<size_t>(d + 1)] + at_width(head_seconds, 1.0 + E) +
                        (d - 1) * head_seconds[1];
    const double rate = (1.0 + E) / cost;
    if (rate > best_rate) {
      best_rate = rate;
      best = d;
    }
  }
  return best;
}

void AdaptiveDepthPolicy::record(int accepted, int drafted) {
  if (drafted < 1) return;
  const int n = std::min<int>(drafted, static_cast<int>(p_.size()));
  const int a = std::min(accepted, n);
  for (int i = 0; i < a; ++i) p_[static_cast<size_t>(i)] += kAlpha * (1.0 - p_[static_cast<size_t>(i)]);
  if (a < n) {
    p_[static_cast<size_t>(a)] += kAlpha * (0.0 - p_[static_cast<size_t>(a)]);
  } else if (a < block_ - 1 && p_[static_cast<size_t>(a)] < kOptimismCap) {
    p_[static_cast<size_t>(a)] += kAlpha * (kOptimismCap - p_[static_cast<size_t>(a)]);
  }
}

double parse_cost_ratio(const char* text) {
  if (!text || !*text) return 0.18;
  char* end = nullptr;
  const double c = std::strtod(text, &end);
  if (end == text || *end != '\0' || !std::isfinite(c) || !(c > 0.0) || c > 5.0) return 0.18;
  return c;
}

}  // namespace mere
