// Logits processing and token draws. The per-token path is O(V) with no full sort: top-k uses
// nth_element, top-p sorts only as long a prefix as the nucleus needs (growing geometrically), and
// penalties touch only the history's tokens through dense scratch counters that are reset after use.
#include "runtime/sampler.h"

#include <algorithm>
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

// work_[0..n) = logits with penalties applied. Rejects NaN and +inf (a model bug, never sampled).
void Sampler::penalise(std::span<const float> logits, const TokenHistory& history, size_t n) {
  work_.assign(logits.begin(), logits.begin() + static_cast<std::ptrdiff_t>(n));
  for (size_t i = 0; i < n; ++i) {
    const float v = work_[i];
    MERE_CHECK(!std::isnan(v) && v != std::numeric_limits<float>::infinity(), kWhere, "logits[", i,
               "]: expected a finite value or -inf, got ", v);
  }
  if (!params_.has_penalties()) return;
  check_history(history.prompt, logits.size(), "prompt");
  check_history(history.generated, logits.size(), "generated");
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
    MERE_CHECK(v != std::numeric_limits<float>::infinity(), kWhere, "penalised logit of token ", t,
               ": expected a finite value, got +inf (repetition_penalty ", rep, " too small)");
    work_[i] = v;
    seen_[i] = 0;
    counts_[i] = 0;
  };
  for (TokenId t : history.prompt) apply(t);
  for (TokenId t : history.generated) apply(t);
}

TokenId Sampler::argmax(size_t n) const {
  size_t best = n;
  float best_v = -std::numeric_limits<float>::infinity();
  for (size_t i = 0; i < n; ++i)
    if (work_[i] > best_v) {
      best_v = work_[i];
      best = i;
    }
  MERE_CHECK(best < n, kWhere, "logits: expected at least one finite logit among the first ", n,
             " ids, got none");
  return static_cast<TokenId>(best);
}

void Sampler::process_logits(std::span<const float> logits, const TokenHistory& history,
                             TokenDistribution& out) {
  MERE_CHECK(!logits.empty(), kWhere, "logits: expected at least one row entry, got 0");
  const size_t n = vocab_limit_ ? std::min(logits.size(), vocab_limit_) : logits.size();
  penalise(logits, history, n);
  out.clear();
  const TokenId best = argmax(n);
  if (params_.greedy()) {
    out.ids.push_back(best);
    out.probs.push_back(1.0f);
    return;
  }

  // Temperature: weights exp((l - max) / T); the best token has weight exactly 1.
  const float max_logit = work_[static_cast<size_t>(best)];
  const float temp = params_.temperature;
  size_t positive = 0;
  for (size_t i = 0; i < n; ++i) {
    const float w = std::exp((work_[i] - max_logit) / temp);  // exp(-inf) = 0 for masked ids
    work_[i] = w;
    positive += w > 0;
  }
  const float min_w = params_.min_p;  // min-p relative to the max weight, which is 1

  const bool use_top_k = params_.top_k > 0 && static_cast<size_t>(params_.top_k) < positive;
  const bool use_top_p = params_.top_p < 1.0f;
  if (!use_top_k && !use_top_p) {  // only min-p: stay in id order, no candidate list
    double total = 0;
    for (size_t i = 0; i < n; ++i)
      if (work_[i] > 0 && work_[i] >= min_w) {
        out.ids.push_back(static_cast<TokenId>(i));
        out.probs.push_back(work_[i]);
        total += work_[i];
      }
    for (float& p : out.probs) p = static_cast<float>(p / total);
    return;
  }

  cand_.clear();
  for (size_t i = 0; i < n; ++i)
    if (work_[i] > 0) cand_.emplace_back(work_[i], static_cast<TokenId>(i));
  if (use_top_k) {
    const auto k = static_cast<size_t>(params_.top_k);
    std::nth_element(cand_.begin(), cand_.begin() + static_cast<std::ptrdiff_t>(k), cand_.end(),
                     ranks_before);
    cand_.resize(k);
  }
  if (use_top_p) {
    // Smallest prefix (in rank order) whose mass reaches top_p of the remaining mass.
    double total = 0;
    for (const auto& c : cand_) total += c.first;
    const double target = static_cast<double>(params_.top_p) * total;
    size_t keep = cand_.size(), sorted = 0;
    size_t chunk = cand_.size() <= 4096 ? cand_.size() : 1024;
    double cum = 0;
    while (sorted < cand_.size() && keep == cand_.size()) {
      const size_t upto = std::min(cand_.size(), sorted + chunk);
      // Everything past `sorted` ranks after the sorted prefix, so extend the prefix in place.
      std::partial_sort(cand_.begin() + static_cast<std::ptrdiff_t>(sorted),
                        cand_.begin() + static_cast<std::ptrdiff_t>(upto), cand_.end(), ranks_before);
      for (size_t i = sorted; i < upto; ++i) {
        cum += cand_[i].first;
        if (cum >= target) {
          keep = i + 1;
          break;
        }
      }
      sorted = upto;
      chunk *= 8;
    }
    cand_.resize(keep);
  }
  std::sort(cand_.begin(), cand_.end(),
            [](const auto& a, const auto& b) { return a.second < b.second; });
  double total = 0;
  for (const auto& [w, id] : cand_)
    if (w >= min_w) {
      out.ids.push_back(id);
      out.probs.push_back(w);
      total += w;
    }
  for (float& p : out.probs) p = static_cast<float>(p / total);
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
    penalise(logits, history, n);
    return argmax(n);
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
  double total = 0;
  for (float p : dist.probs) total += p;
  MERE_CHECK(total > 0 && std::isfinite(total), kWhere,
             "distribution: expected a positive finite total, got ", total);
  const double u = rng.uniform_double() * total;
  double cum = 0;
  for (size_t i = 0; i < dist.ids.size(); ++i) {
    cum += dist.probs[i];
    if (u < cum) return dist.ids[i];
  }
  size_t last = dist.ids.size() - 1;  // rounding: the last token with positive weight
  while (last > 0 && !(dist.probs[last] > 0)) --last;
  return dist.ids[last];
}

TokenId sample_from(std::span<const float> probs, Rng& rng) {
  double total = 0;
  size_t last = probs.size();
  for (size_t i = 0; i < probs.size(); ++i) {
    const float p = probs[i];
    MERE_CHECK(p >= 0 && std::isfinite(p), kWhere, "probs[", i,
               "]: expected a finite weight >= 0, got ", p);
    total += p;
    if (p > 0) last = i;
  }
  MERE_CHECK(last < probs.size(), kWhere, "probs: expected a positive total weight, got ", total);
  const double u = rng.uniform_double() * total;
  double cum = 0;
  for (size_t i = 0; i <= last; ++i) {
    cum += probs[i];
    if (u < cum) return static_cast<TokenId>(i);
  }
  return static_cast<TokenId>(last);
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
