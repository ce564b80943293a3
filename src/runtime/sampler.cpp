// Logits processing and token draws. The per-token path is O(V) with no sort of the vocabulary:
// top-k uses nth_element, top-p a weighted quickselect over nth_element partitions, and penalties
// touch only the history's tokens through dense scratch counters that are reset after use.
#include "runtime/sampler.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <utility>

#include "core/error.h"

namespace mere {

namespace {

constexpr const char* kWhere = "sampler";
constexpr double kResidualMinMass = 1e-6;  // mtp.md §7: below this, resample from p

// Ranking used by top-k and top-p: larger weight first, lower id first on ties.
bool ranks_before(const std::pair<float, TokenId>& a, const std::pair<float, TokenId>& b) {
  return a.first > b.first || (a.first == b.first && a.second < b.second);
}

// e^x for x <= 0 (-inf gives 0), in plain arithmetic the compiler vectorizes (libm's expf is a
// scalar call and dominated the full-vocabulary path). Cephes expf: x = n ln2 + r, |r| <= ln2/2, a
// polynomial for e^r, scaled by 2^n through the exponent bits. Relative error below 1e-7 on
// [-87, 0] (against double exp); below about -87.3 (n < -126) the result is 0. Clamps are integer
// selects: a float compare-select would block vectorization under -ftrapping-math.
inline float exp_nonpositive(float x) {
  // For x <= 0 (and -inf) the bit patterns order like -x, so an unsigned min clamps x to >= -100.
  const uint32_t bits = std::bit_cast<uint32_t>(x), lim = std::bit_cast<uint32_t>(-100.0f);
  const float xc = std::bit_cast<float>(bits > lim ? lim : bits);
  const int n = static_cast<int>(xc * 1.44269504088896341f - 0.5f);  // nearest, as xc <= 0
  const float fn = static_cast<float>(n);
  const float r = (xc - fn * 0.693359375f) - fn * -2.12194440e-4f;  // ln2 in two parts
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const int e = n + 127 < 0 ? 0 : n + 127;  // biased exponent; 0 makes the scale 0
  return p * std::bit_cast<float>(static_cast<uint32_t>(e) << 23);
}

// dst[i] = e^((src[i] - max) / t) for src[i] <= max.
void weights_from_logits(const float* src, float* dst, size_t n, float max, float t) {
  for (size_t i = 0; i < n; ++i) dst[i] = exp_nonpositive((src[i] - max) / t);
}

void check_range(std::string_view where, std::string_view field, double v, double lo, bool lo_open,
                 double hi, std::string_view expected) {
  const bool ok = std::isfinite(v) && (lo_open ? v > lo : v >= lo) && v <= hi;
  MERE_CHECK(ok, where, field, ": expected ", expected, ", got ", v);
}

void check_history(std::span<const TokenId> tokens, size_t vocab, std::string_view which) {
  for (size_t i = 0; i < tokens.size(); ++i) {
    const TokenId t = tokens[i];
    MERE_CHECK(t >= 0 && static_cast<size_t>(t) < vocab, kWhere, which, "[", i,
               "]: expected a token id in [0, ", vocab, "), got ", t);
  }
}

// Maps float bits to an int32 that orders like the float (for non-NaN; -0 and +0 both map to 0).
inline int32_t order_key(uint32_t b) {
  const int32_t i = b == 0x80000000u ? 0 : static_cast<int32_t>(b);
  return i ^ ((i >> 31) & 0x7FFFFFFF);
}

// Sum of w[0..n) in four double lanes: vectorizable, and the order is fixed, so deterministic.
double lane_sum(const float* w, size_t n) {
  double lane[4] = {0, 0, 0, 0};
  size_t i = 0;
  for (; i + 4 <= n; i += 4)
    for (size_t j = 0; j < 4; ++j) lane[j] += w[i + j];
  for (; i < n; ++i) lane[0] += w[i];
  return (lane[0] + lane[1]) + (lane[2] + lane[3]);
}

// Inverse CDF: the first index whose cumulative weight exceeds u * total, u in [0, 1). Cumulative
// weight = sum of the preceding blocks' lane sums + the running sum inside the block, so a draw
// costs two vectorized passes and one short scalar walk instead of a serial pass over V.
size_t inverse_cdf(std::span<const float> w, double u) {
  constexpr size_t kBlock = 512;
  const size_t n = w.size();
  const double total = lane_sum(w.data(), n);
  MERE_CHECK(total > 0 && std::isfinite(total), kWhere,
             "distribution: expected a positive finite total weight, got ", total);
  const double target = u * total;
  double base = 0;
  size_t end = n;  // the block to fall back into when rounding leaves target past every sum
  for (size_t b = 0; b < n; b += kBlock) {
    const size_t len = std::min(kBlock, n - b);
    const double bs = lane_sum(w.data() + b, len);
    if (target < base + bs) {
      double cum = base;
      for (size_t i = b; i < b + len; ++i) {
        cum += w[i];
        if (target < cum) return i;
      }
      end = b + len;
      break;
    }
    base += bs;
  }
  while (end > 1 && !(w[end - 1] > 0)) --end;  // rounding: the last positive weight
  return end - 1;
}

}  // namespace

void SamplingParams::validate(std::string_view where) const {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  check_range(where, "temperature", temperature, 0, false, kInf, "a finite value >= 0");
  MERE_CHECK(top_k >= 0, where, "top_k: expected >= 0 (0 disables), got ", top_k);
  check_range(where, "top_p", top_p, 0, true, 1, "a value in (0, 1]");
  check_range(where, "min_p", min_p, 0, false, 1, "a value in [0, 1]");
  check_range(where, "repetition_penalty", repetition_penalty, 0, true, kInf,
              "a finite value > 0 (1 disables)");
  check_range(where, "presence_penalty", presence_penalty, -2, false, 2, "a value in [-2, 2]");
  check_range(where, "frequency_penalty", frequency_penalty, -2, false, 2, "a value in [-2, 2]");
  if (max_tokens) MERE_CHECK(*max_tokens >= 1, where, "max_tokens: expected >= 1, got ", *max_tokens);
  for (size_t i = 0; i < stop.size(); ++i)
    MERE_CHECK(!stop[i].empty(), where, "stop[", i, "]: expected a non-empty string, got \"\"");
  for (size_t i = 0; i < stop_token_ids.size(); ++i)
    MERE_CHECK(stop_token_ids[i] >= 0, where, "stop_token_ids[", i, "]: expected a token id >= 0, got ",
               stop_token_ids[i]);
}

float TokenDistribution::prob(TokenId id) const {
  auto it = std::lower_bound(ids.begin(), ids.end(), id);
  return it != ids.end() && *it == id ? probs[static_cast<size_t>(it - ids.begin())] : 0.0f;
}

Sampler::Sampler(SamplingParams params, size_t vocab_limit)
    : params_(std::move(params)), vocab_limit_(vocab_limit) {
  params_.validate();
}

// The effective logits [n]: the input itself, or work_ holding a penalised copy. Rejects NaN and
// +inf (a model bug, never something to sample from) and finds the argmax while it looks.
Sampler::Scan Sampler::penalise(std::span<const float> logits, const TokenHistory& history, size_t n) {
  check_history(history.prompt, logits.size(), "prompt");
  check_history(history.generated, logits.size(), "generated");
  std::span<const float> src = logits.first(n);
  if (params_.has_penalties()) {
    work_.assign(src.begin(), src.end());
    if (counts_.size() < n) {
      counts_.resize(n, 0);
      seen_.resize(n, 0);
    }
    for (TokenId t : history.prompt)
      if (static_cast<size_t>(t) < n) seen_[static_cast<size_t>(t)] = 1;
    for (TokenId t : history.generated)
      if (static_cast<size_t>(t) < n) {
        seen_[static_cast<size_t>(t)] = 1;
        ++counts_[static_cast<size_t>(t)];
      }
    const float rep = params_.repetition_penalty;
    const float pres = params_.presence_penalty;
    const float freq = params_.frequency_penalty;
    auto apply = [&](TokenId t) {
      const auto i = static_cast<size_t>(t);
      if (i >= n || !seen_[i]) return;  // padding, or already applied
      float v = work_[i];
      v = v > 0 ? v / rep : v * rep;
      if (counts_[i] > 0) v -= freq * static_cast<float>(counts_[i]) + pres;
      work_[i] = v;
      seen_[i] = 0;
      counts_[i] = 0;
    };
    for (TokenId t : history.prompt) apply(t);
    for (TokenId t : history.generated) apply(t);
    src = work_;
  }
  // One pass in integer arithmetic (vectorizes): NaN/+inf flag, finite count, max of an order key.
  constexpr uint32_t kPosInf = 0x7F800000u, kNegInf = 0xFF800000u;
  auto bits = [&](size_t i) { return std::bit_cast<uint32_t>(src[i]); };
  uint32_t bad = 0;
  size_t finite = 0;
  int32_t max_key = std::numeric_limits<int32_t>::min();
  for (size_t i = 0; i < n; ++i) {
    const uint32_t b = bits(i);
    bad |= static_cast<uint32_t>((b & 0x7FFFFFFFu) > kPosInf) | static_cast<uint32_t>(b == kPosInf);
    finite += b != kNegInf;
    const int32_t k = order_key(b);
    max_key = k > max_key ? k : max_key;
  }
  if (bad) {
    for (size_t i = 0; i < n; ++i)
      MERE_CHECK(!std::isnan(src[i]) && src[i] != std::numeric_limits<float>::infinity(), kWhere,
                 "logits[", i, "]: expected a finite value or -inf",
                 params_.has_penalties() ? " after penalties" : "", ", got ", src[i]);
  }
  MERE_CHECK(finite > 0, kWhere, "logits: expected at least one finite logit among the first ", n,
             " ids, got none");
  size_t best = 0;
  while (order_key(bits(best)) != max_key) ++best;  // the lowest id holding the max
  Scan scan{src, 0, finite};
  scan.best = static_cast<TokenId>(best);
  return scan;
}

void Sampler::process_logits(std::span<const float> logits, const TokenHistory& history,
                             TokenDistribution& out) {
  MERE_CHECK(!logits.empty(), kWhere, "logits: expected at least one row entry, got 0");
  const size_t n = vocab_limit_ ? std::min(logits.size(), vocab_limit_) : logits.size();
  const Scan scan = penalise(logits, history, n);
  if (params_.greedy()) {
    out.ids.assign(1, scan.best);
    out.probs.assign(1, 1.0f);
    return;
  }
  // Temperature: weight exp((l - max) / T), so the best token has weight exactly 1 and min-p is a
  // plain threshold on the weight (p_i / p_max = w_i).
  const float max_logit = scan.logits[static_cast<size_t>(scan.best)];
  const float temp = params_.temperature;
  const float min_w = params_.min_p;
  auto weight = [&](float l) { return exp_nonpositive((l - max_logit) / temp); };

  if (params_.top_k > 0 && static_cast<size_t>(params_.top_k) < scan.finite) {
    select_top_k(scan.logits, static_cast<size_t>(params_.top_k));  // cand_ = k (logit, id)
    for (auto& c : cand_) c.first = weight(c.first);
    if (params_.top_p < 1.0f) {
      std::sort(cand_.begin(), cand_.end(), ranks_before);
      double total = 0;
      for (const auto& c : cand_) total += c.first;
      const double target = static_cast<double>(params_.top_p) * total;
      double cum = 0;
      size_t keep = cand_.size();
      for (size_t i = 0; i < cand_.size(); ++i) {
        cum += cand_[i].first;
        if (cum >= target) {
          keep = i + 1;
          break;
        }
      }
      cand_.resize(keep);
    }
    std::sort(cand_.begin(), cand_.end(),
              [](const auto& a, const auto& b) { return a.second < b.second; });
    out.clear();
    double total = 0;
    for (const auto& [w, id] : cand_)
      if (w > 0 && w >= min_w) {
        out.ids.push_back(id);
        out.probs.push_back(w);
        total += w;
      }
    for (float& p : out.probs) p = static_cast<float>(p / total);
    return;
  }

  // No top-k: weights for the whole row, then (top-p) a cutoff in rank order, then one pass in id
  // order keeping the tokens that rank at or before the cutoff and pass min-p.
  weights_.resize(n);
  weights_from_logits(scan.logits.data(), weights_.data(), n, max_logit, temp);  // -inf -> 0
  std::pair<float, TokenId> cut{0.0f, std::numeric_limits<TokenId>::max()};  // keep all w > 0
  if (params_.top_p < 1.0f) cut = top_p_cutoff(n);
  out.ids.resize(n);  // no clear() first: shrinking or same-size resizes write nothing
  out.probs.resize(n);
  size_t kept = 0;
  for (size_t i = 0; i < n; ++i) {  // branch-free compaction: always store, advance when kept
    const float w = weights_[i];
    const bool keep = (w > 0) & (w >= min_w) &
                      ((w > cut.first) | ((w == cut.first) & (static_cast<TokenId>(i) <= cut.second)));
    out.ids[kept] = static_cast<TokenId>(i);
    out.probs[kept] = w;
    kept += keep;
  }
  out.ids.resize(kept);
  out.probs.resize(kept);
  const float inv = static_cast<float>(1.0 / lane_sum(out.probs.data(), kept));
  for (float& p : out.probs) p *= inv;
}

// cand_ = the k best (logit, id) of the finite logits, ranked by logit (ties: lower id). Small k:
// one pass with a k-heap whose front is the worst kept; large k: nth_element over all pairs.
void Sampler::select_top_k(std::span<const float> logits, size_t k) {
  cand_.clear();
  if (k > 1024) {
    for (size_t i = 0; i < logits.size(); ++i)
      if (logits[i] > -std::numeric_limits<float>::infinity())
        cand_.emplace_back(logits[i], static_cast<TokenId>(i));
    std::nth_element(cand_.begin(), cand_.begin() + static_cast<std::ptrdiff_t>(k), cand_.end(),
                     ranks_before);
    cand_.resize(k);
    return;
  }
  size_t i = 0;
  for (; i < logits.size() && cand_.size() < k; ++i)
    if (logits[i] > -std::numeric_limits<float>::infinity()) {
      cand_.emplace_back(logits[i], static_cast<TokenId>(i));
      std::push_heap(cand_.begin(), cand_.end(), ranks_before);
    }
  float worst = cand_.front().first;
  for (; i < logits.size(); ++i) {
    // Ids ascend, so a logit equal to the worst kept ranks after it: strict > is the exact test.
    if (logits[i] > worst) {
      std::pop_heap(cand_.begin(), cand_.end(), ranks_before);
      cand_.back() = {logits[i], static_cast<TokenId>(i)};
      std::push_heap(cand_.begin(), cand_.end(), ranks_before);
      worst = cand_.front().first;
    }
  }
}

// The last token (weight, id) of the nucleus: the smallest rank prefix (weight descending, ties
// lower id) whose mass reaches top_p of the total. Buckets by the top bits of the float weight
// (monotone for positive floats: 8 buckets per power of two) find the bucket where the prefix mass
// crosses the target; only that bucket is sorted.
std::pair<float, TokenId> Sampler::top_p_cutoff(size_t n) {
  constexpr int kShift = 20;                         // keep exponent + 3 mantissa bits
  constexpr size_t kBuckets = (0x3F800000u >> kShift) + 1;  // bits(1.0f) is the largest weight
  bucket_mass_.assign(kBuckets, 0.0);
  auto bucket = [](float w) {  // weights are <= 1; the min() only guards the array
    return std::min<uint32_t>(std::bit_cast<uint32_t>(w) >> kShift, kBuckets - 1);
  };
  for (size_t i = 0; i < n; ++i)
    if (weights_[i] > 0) bucket_mass_[bucket(weights_[i])] += weights_[i];
  const double total = lane_sum(weights_.data(), n);
  const double target = static_cast<double>(params_.top_p) * total;
  double above = 0;  // mass of the buckets ranked before b
  size_t b = kBuckets;
  while (b > 1 && above + bucket_mass_[b - 1] < target) above += bucket_mass_[--b];
  const uint32_t edge = static_cast<uint32_t>(b - 1);  // the crossing bucket (0 only by rounding)
  cand_.clear();
  for (size_t i = 0; i < n; ++i)
    if (weights_[i] > 0 && bucket(weights_[i]) == edge) cand_.emplace_back(weights_[i], static_cast<TokenId>(i));
  std::sort(cand_.begin(), cand_.end(), ranks_before);
  for (const auto& c : cand_) {
    above += c.first;
    if (above >= target) return c;
  }
  return cand_.empty() ? std::pair<float, TokenId>{0.0f, std::numeric_limits<TokenId>::max()}
                       : cand_.back();
}

TokenDistribution Sampler::process_logits(std::span<const float> logits,
                                          const TokenHistory& history) {
  TokenDistribution d;
  process_logits(logits, history, d);
  return d;
}

TokenId Sampler::sample(std::span<const float> logits, const TokenHistory& history, Rng& rng) {
  if (params_.greedy()) {
    MERE_CHECK(!logits.empty(), kWhere, "logits: expected at least one row entry, got 0");
    const size_t n = vocab_limit_ ? std::min(logits.size(), vocab_limit_) : logits.size();
    return penalise(logits, history, n).best;
  }
  process_logits(logits, history, dist_);
  return sample_from(dist_, rng);
}

TokenDistribution process_logits(std::span<const float> logits, const TokenHistory& history,
                                 const SamplingParams& params, size_t vocab_limit) {
  Sampler s(params, vocab_limit);
  return s.process_logits(logits, history);
}

TokenId sample_from(const TokenDistribution& dist, Rng& rng) {
  MERE_CHECK(!dist.ids.empty() && dist.ids.size() == dist.probs.size(), kWhere,
             "distribution: expected matching non-empty ids and probs, got ", dist.ids.size(),
             " ids and ", dist.probs.size(), " probs");
  return dist.ids[inverse_cdf(dist.probs, rng.uniform_double())];
}

TokenId sample_from(std::span<const float> probs, Rng& rng) {
  for (size_t i = 0; i < probs.size(); ++i)
    MERE_CHECK(probs[i] >= 0 && std::isfinite(probs[i]), kWhere, "probs[", i,
               "]: expected a finite weight >= 0, got ", probs[i]);
  return static_cast<TokenId>(inverse_cdf(probs, rng.uniform_double()));
}

bool accept_draft(const TokenDistribution& p, const TokenDistribution& q, TokenId draft, Rng& rng) {
  const double pd = p.prob(draft), qd = q.prob(draft);
  const double u = rng.uniform_double();
  return u * qd < pd;  // u < p/q without dividing; q(d) = 0 < p(d) accepts, p(d) = 0 never does
}

TokenId residual_sample(const TokenDistribution& p, const TokenDistribution& q, Rng& rng) {
  MERE_CHECK(!p.ids.empty(), kWhere, "residual_sample: expected a non-empty target p, got none");
  // The residual is positive only on p's support; walk p and look q up by merging (both ascending).
  auto for_each_residual = [&](auto&& fn) {
    size_t j = 0;
    for (size_t i = 0; i < p.ids.size(); ++i) {
      while (j < q.ids.size() && q.ids[j] < p.ids[i]) ++j;
      const double qv = j < q.ids.size() && q.ids[j] == p.ids[i] ? q.probs[j] : 0.0;
      const double r = static_cast<double>(p.probs[i]) - qv;
      if (r > 0 && fn(p.ids[i], r)) return;
    }
  };
  double mass = 0;
  TokenId last = -1;
  for_each_residual([&](TokenId id, double r) {
    mass += r;
    last = id;
    return false;
  });
  if (mass <= kResidualMinMass) return sample_from(p, rng);
  const double u = rng.uniform_double() * mass;
  double cum = 0;
  TokenId chosen = last;
  for_each_residual([&](TokenId id, double r) {
    cum += r;
    if (u < cum) {
      chosen = id;
      return true;
    }
    return false;
  });
  return chosen;
}

}  // namespace mere
