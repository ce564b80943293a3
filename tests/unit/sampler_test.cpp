// Sampler: parameter validation, greedy, and statistical agreement of the sampled frequencies with
// the processed distribution computed independently here (double precision, full sort) from the
// definitions in docs/sampling.md. Also the speculative helpers: acceptance probability
// min(1, p/q), and that draft-from-q + accept-or-residual reproduces p exactly in distribution.
#include "runtime/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <numeric>
#include <set>

#include "core/error.h"

namespace mere {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
const std::vector<float> kLogits = {1.0f, 2.5f, -0.5f, 0.3f, 2.0f, -1.2f, 1.7f, 0.0f};

// ---- the reference: every step straight from its definition, in double, over a full sort ----
std::vector<double> reference(const std::vector<float>& logits, const std::vector<TokenId>& prompt,
                              const std::vector<TokenId>& generated, const SamplingParams& sp,
                              size_t limit = 0) {
  const size_t v = logits.size(), n = limit ? std::min(limit, v) : v;
  std::vector<double> l(logits.begin(), logits.begin() + static_cast<std::ptrdiff_t>(n));
  std::set<TokenId> seen(prompt.begin(), prompt.end());
  seen.insert(generated.begin(), generated.end());
  std::map<TokenId, int> count;
  for (TokenId t : generated) ++count[t];
  for (TokenId t : seen)
    if (static_cast<size_t>(t) < n) l[t] = l[t] > 0 ? l[t] / sp.repetition_penalty : l[t] * sp.repetition_penalty;
  for (auto [t, c] : count)
    if (static_cast<size_t>(t) < n) l[t] -= sp.frequency_penalty * c + sp.presence_penalty;
  std::vector<double> p(v, 0.0);
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return l[a] > l[b]; });
  if (sp.temperature == 0) {
    p[order[0]] = 1;
    return p;
  }
  double sum = 0;
  for (size_t i = 0; i < n; ++i) sum += p[i] = std::exp((l[i] - l[order[0]]) / sp.temperature);
  auto renorm = [&] {
    double s = 0;
    for (double x : p) s += x;
    for (double& x : p) x /= s;
  };
  renorm();
  if (sp.top_k > 0)
    for (size_t r = static_cast<size_t>(sp.top_k); r < n; ++r) p[order[r]] = 0;
  renorm();
  if (sp.top_p < 1) {
    double cum = 0;
    size_t r = 0;
    for (; r < n && cum < sp.top_p; ++r) cum += p[order[r]];
    for (; r < n; ++r) p[order[r]] = 0;
  }
  renorm();
  const double top = p[order[0]];
  for (double& x : p)
    if (x < sp.min_p * top) x = 0;
  renorm();
  return p;
}

std::vector<double> dense(const TokenDistribution& d, size_t v) {
  std::vector<double> out(v, 0.0);
  for (size_t i = 0; i < d.size(); ++i) out[static_cast<size_t>(d.ids[i])] = d.probs[i];
  return out;
}

// Chi-square goodness of fit at significance 1e-6 (critical value by Wilson-Hilferty, which is
// conservative for small df); categories with expected probability 0 must never occur.
void expect_frequencies(const std::vector<int>& counts, const std::vector<double>& expected, int n) {
  ASSERT_EQ(counts.size(), expected.size());
  double chi2 = 0;
  int df = -1;
  for (size_t i = 0; i < counts.size(); ++i) {
    if (expected[i] <= 0) {
      EXPECT_EQ(counts[i], 0) << "token " << i << " has probability 0 but was drawn";
      continue;
    }
    const double e = expected[i] * n;
    chi2 += (counts[i] - e) * (counts[i] - e) / e;
    ++df;
  }
  if (df == 0) return;  // a single category: the zero checks above are the whole test
  const double z = 4.753424;  // P(Z > z) = 1e-6
  const double k = 2.0 / (9.0 * df);
  const double critical = df * std::pow(1 - k + z * std::sqrt(k), 3);
  EXPECT_LT(chi2, critical) << "df " << df;
}

// Binomial proportion within 5 standard errors (two-sided ~6e-7).
void expect_proportion(int hits, int n, double prob) {
  const double se = std::sqrt(prob * (1 - prob) / n);
  EXPECT_NEAR(static_cast<double>(hits) / n, prob, 5 * se + 1e-12);
}

struct Case {
  const char* name;
  SamplingParams params;
  std::vector<TokenId> prompt, generated;
  size_t limit = 0;
};

SamplingParams make(float t, int k = 0, float p = 1, float min_p = 0) {
  SamplingParams sp;
  sp.temperature = t;
  sp.top_k = k;
  sp.top_p = p;
  sp.min_p = min_p;
  return sp;
}

std::vector<Case> cases() {
  std::vector<Case> c;
  c.push_back({"temperature", make(0.7f), {}, {}});
  c.push_back({"hot", make(1.3f), {}, {}});
  c.push_back({"top_k", make(1.3f, 3), {}, {}});
  c.push_back({"top_p", make(1.0f, 0, 0.7f), {}, {}});
  c.push_back({"top_p_wide", make(1.0f, 0, 0.92f), {}, {}});
  c.push_back({"min_p", make(1.0f, 0, 1, 0.3f), {}, {}});
  SamplingParams pen = make(1.0f);
  pen.repetition_penalty = 1.5f;
  pen.presence_penalty = 0.4f;
  pen.frequency_penalty = 0.3f;
  c.push_back({"penalties", pen, {0, 2, 2, 7}, {1, 1, 5, 4, 1}});
  SamplingParams all = make(0.8f, 5, 0.9f, 0.1f);
  all.repetition_penalty = 1.2f;
  all.frequency_penalty = -0.2f;
  c.push_back({"combined", all, {3}, {6, 6}});
  SamplingParams masked = make(1.0f);
  masked.repetition_penalty = 1.3f;  // history ids beyond the limit are ignored, not an error
  c.push_back({"masked", masked, {7}, {6, 2}, 5});
  return c;
}

// ---- validation and errors ----

TEST(SamplingParams, DefaultsAreValid) { EXPECT_NO_THROW(SamplingParams{}.validate()); }

TEST(SamplingParams, RejectsOutOfRangeWithFieldName) {
  auto expect_bad = [](auto mutate, const char* field) {
    SamplingParams p;
    mutate(p);
    try {
      p.validate();
      ADD_FAILURE() << field << " accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("expected"), std::string::npos) << e.what();
    }
  };
  expect_bad([](SamplingParams& p) { p.temperature = -0.1f; }, "temperature");
  expect_bad([](SamplingParams& p) { p.temperature = std::nanf(""); }, "temperature");
  expect_bad([](SamplingParams& p) { p.top_k = -1; }, "top_k");
  expect_bad([](SamplingParams& p) { p.top_p = 0; }, "top_p");
  expect_bad([](SamplingParams& p) { p.top_p = 1.01f; }, "top_p");
  expect_bad([](SamplingParams& p) { p.min_p = -0.01f; }, "min_p");
  expect_bad([](SamplingParams& p) { p.min_p = 1.5f; }, "min_p");
  expect_bad([](SamplingParams& p) { p.repetition_penalty = 0; }, "repetition_penalty");
  expect_bad([](SamplingParams& p) { p.presence_penalty = 2.5f; }, "presence_penalty");
  expect_bad([](SamplingParams& p) { p.frequency_penalty = -3; }, "frequency_penalty");
  expect_bad([](SamplingParams& p) { p.max_tokens = 0; }, "max_tokens");
  expect_bad([](SamplingParams& p) { p.stop = {"ok", ""}; }, "stop[1]");
  expect_bad([](SamplingParams& p) { p.stop_token_ids = {-4}; }, "stop_token_ids[0]");
  try {
    SamplingParams p;
    p.temperature = -1;
    p.validate("request");
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "[request] temperature: expected a finite value >= 0, got -1");
  }
  SamplingParams bad;
  bad.top_p = 2;
  EXPECT_THROW(Sampler{bad}, Error);
}

TEST(Sampler, RejectsBadLogitsAndHistory) {
  Sampler s(make(1.0f));
  Rng rng(1);
  std::vector<float> nan = kLogits;
  nan[3] = std::nanf("");
  EXPECT_THROW(s.sample(nan, {}, rng), Error);
  std::vector<float> inf = kLogits;
  inf[2] = std::numeric_limits<float>::infinity();
  EXPECT_THROW(s.sample(inf, {}, rng), Error);
  std::vector<float> all_masked(8, kNegInf);
  EXPECT_THROW(s.sample(all_masked, {}, rng), Error);
  EXPECT_THROW(s.sample(std::span<const float>(), {}, rng), Error);
  EXPECT_THROW(Sampler(make(0.0f)).sample(all_masked, {}, rng), Error);

  SamplingParams pen = make(1.0f);
  pen.repetition_penalty = 1.1f;
  Sampler sp(pen);
  const std::vector<TokenId> out_of_range = {8}, negative = {-1};
  EXPECT_THROW(sp.sample(kLogits, {out_of_range, {}}, rng), Error);
  EXPECT_THROW(sp.sample(kLogits, {{}, negative}, rng), Error);
  EXPECT_THROW(sample_from(TokenDistribution{}, rng), Error);
  const std::vector<float> negative_w = {0.5f, -0.1f};
  EXPECT_THROW(sample_from(std::span<const float>(negative_w), rng), Error);
  const std::vector<float> zero_w = {0.0f, 0.0f};
  EXPECT_THROW(sample_from(std::span<const float>(zero_w), rng), Error);
}

// ---- greedy ----

TEST(Sampler, GreedyTiesPickLowestIdAndDrawNothing) {
  Sampler s(make(0.0f));
  Rng rng(5);
  const Rng before = rng;
  const std::vector<float> tie = {1.0f, 3.0f, kNegInf, 3.0f, 2.0f};
  EXPECT_EQ(s.sample(tie, {}, rng), 1);
  EXPECT_EQ(s.sample(kLogits, {}, rng), 1);
  EXPECT_TRUE(rng == before);
  const TokenDistribution d = s.process_logits(tie, {});
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d.ids[0], 1);
  EXPECT_EQ(d.probs[0], 1.0f);
}

TEST(Sampler, GreedyAppliesPenaltiesAndMask) {
  SamplingParams p = make(0.0f);
  p.repetition_penalty = 1.2f;
  Sampler s(p);
  Rng rng(1);
  const std::vector<TokenId> gen0 = {0};
  const std::vector<float> pos = {2.0f, 1.9f}, neg = {-1.0f, -1.1f};
  EXPECT_EQ(s.sample(pos, {{}, gen0}, rng), 1);  // 2.0 / 1.2 < 1.9
  EXPECT_EQ(s.sample(neg, {gen0, {}}, rng), 1);  // -1.0 * 1.2 < -1.1 (prompt counts too)
  EXPECT_EQ(s.sample(pos, {}, rng), 0);          // scratch was reset: no penalty now
  Sampler masked(make(0.0f), 5);
  EXPECT_EQ(masked.sample(std::vector<float>{0, 1, 2, 3, 4, 9, 9, 9}, {}, rng), 4);
}

// ---- processed distribution against the reference ----

TEST(Sampler, ProcessLogitsMatchesReference) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    Sampler s(c.params, c.limit);
    const TokenDistribution d = s.process_logits(kLogits, {c.prompt, c.generated});
    EXPECT_TRUE(std::is_sorted(d.ids.begin(), d.ids.end()));
    const std::vector<double> got = dense(d, kLogits.size());
    const std::vector<double> want = reference(kLogits, c.prompt, c.generated, c.params, c.limit);
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_NEAR(got[i], want[i], 2e-6) << "token " << i;
      EXPECT_EQ(got[i] > 0, want[i] > 0) << "support differs at token " << i;
    }
  }
}

TEST(Sampler, PresenceAndFrequencyIgnorePromptTokens) {
  SamplingParams p = make(1.0f);
  p.presence_penalty = 1.5f;
  p.frequency_penalty = 0.7f;
  const std::vector<TokenId> prompt = {1, 1, 4, 6};
  const TokenDistribution with_prompt = process_logits(kLogits, {prompt, {}}, p);
  const TokenDistribution without = process_logits(kLogits, {}, make(1.0f));
  EXPECT_EQ(with_prompt.ids, without.ids);
  EXPECT_EQ(with_prompt.probs, without.probs);
  // Generated: the logit of token 1 drops by 2*0.7 + 1.5, so its odds against token 0 shrink by e^-2.9.
  const std::vector<TokenId> gen = {1, 1};
  const TokenDistribution g = process_logits(kLogits, {{}, gen}, p);
  EXPECT_NEAR(std::log(g.prob(1) / g.prob(0)), (2.5 - 2.9) - 1.0, 1e-5);
}

TEST(Sampler, TopPKeepsAtLeastOne) {
  const std::vector<float> tie = {3.0f, 1.0f, 3.0f, 0.5f};
  for (float top_p : {1e-6f, 0.01f}) {
    const TokenDistribution d = process_logits(tie, {}, make(1.0f, 0, top_p));
    ASSERT_EQ(d.size(), 1u);
    EXPECT_EQ(d.ids[0], 0);  // equal weights rank the lower id first
    EXPECT_EQ(d.probs[0], 1.0f);
  }
  Sampler s(make(2.0f, 0, 1e-6f));
  Rng rng(3);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(s.sample(kLogits, {}, rng), 1);
  const TokenDistribution k1 = process_logits(tie, {}, make(1.0f, 1));
  ASSERT_EQ(k1.size(), 1u);
  EXPECT_EQ(k1.ids[0], 0);
}

TEST(Sampler, MinPIsRelativeToTheMaximum) {
  // At temperature 1, p_i / p_max = exp(l_i - l_max): min_p = exp(-1.0) keeps tokens within one nat.
  const TokenDistribution d = process_logits(kLogits, {}, make(1.0f, 0, 1, std::exp(-1.0f)));
  EXPECT_EQ(d.ids, (std::vector<TokenId>{1, 4, 6}));  // 2.5, 2.0, 1.7; token 0 (1.0) is 1.5 nats down
  const TokenDistribution one = process_logits(kLogits, {}, make(1.0f, 0, 1, 1.0f));
  EXPECT_EQ(one.ids, (std::vector<TokenId>{1}));
}

TEST(Sampler, WeightsFollowExp) {
  // Two tokens at temperature 1: p1 / p0 = e^(l1 - l0). Checks the vectorized exp over its range
  // (relative error of the ratio, normalisation included, within 1e-6) and the flush below e^-87.
  Rng rng(8);
  double worst = 0;
  for (int i = 0; i < 2000; ++i) {
    const float x = -80.0f * rng.uniform_float();
    const std::vector<float> l = {0.0f, x};
    const TokenDistribution d = process_logits(l, {}, make(1.0f));
    ASSERT_EQ(d.size(), 2u);
    const double ratio = static_cast<double>(d.probs[1]) / d.probs[0];
    worst = std::max(worst, std::fabs(ratio / std::exp(static_cast<double>(x)) - 1));
  }
  EXPECT_LT(worst, 1e-6);
  const std::vector<float> far = {0.0f, -95.0f, kNegInf};
  EXPECT_EQ(process_logits(far, {}, make(1.0f)).ids, std::vector<TokenId>{0});
  // Temperature scales the logit gap: (l1 - l0) / T.
  const std::vector<float> two = {1.0f, 2.0f};
  const TokenDistribution t = process_logits(two, {}, make(0.25f));
  EXPECT_NEAR(t.probs[1] / t.probs[0], std::exp(4.0), std::exp(4.0) * 1e-6);
}

// ---- sampling frequencies against the reference ----

TEST(Sampler, FrequenciesMatchProcessedDistribution) {
  const int n = 40000;
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    Sampler s(c.params, c.limit);
    Rng rng(1000 + c.params.top_k);
    std::vector<int> counts(kLogits.size(), 0);
    for (int i = 0; i < n; ++i) ++counts[static_cast<size_t>(s.sample(kLogits, {c.prompt, c.generated}, rng))];
    expect_frequencies(counts, reference(kLogits, c.prompt, c.generated, c.params, c.limit), n);
  }
}

TEST(Sampler, FixedSeedReproduces) {
  SamplingParams p = make(0.9f, 6, 0.95f, 0.02f);
  p.repetition_penalty = 1.1f;
  auto run = [&](uint64_t seed) {
    Sampler s(p);
    Rng rng(seed), logit_rng(99);
    std::vector<TokenId> out;
    std::vector<float> logits(64);
    for (int step = 0; step < 200; ++step) {
      for (float& l : logits) l = 6.0f * logit_rng.uniform_float();
      out.push_back(s.sample(logits, {{}, out}, rng));
    }
    return out;
  };
  EXPECT_EQ(run(7), run(7));
  EXPECT_NE(run(7), run(8));
}

TEST(Sampler, SampleFromDenseAndSparseAgree) {
  const TokenDistribution d = process_logits(kLogits, {}, make(1.0f, 0, 0.92f));
  std::vector<float> dense_p(kLogits.size(), 0.0f);
  for (size_t i = 0; i < d.size(); ++i) dense_p[static_cast<size_t>(d.ids[i])] = d.probs[i];
  Rng a(11), b(11);
  for (int i = 0; i < 2000; ++i) EXPECT_EQ(sample_from(d, a), sample_from(std::span<const float>(dense_p), b));
  // One draw per call, exactly.
  Rng c(12), c_ref(12);
  sample_from(d, c);
  c_ref.next_u64();
  EXPECT_TRUE(c == c_ref);
}

TEST(Sampler, InverseCdfAcrossBlocks) {
  // Mass spread over several 512-entry blocks, with zero weights in between.
  std::vector<float> w(3000, 0.0f);
  w[5] = 0.2f;
  w[511] = 0.05f;
  w[512] = 0.05f;
  w[1500] = 0.3f;
  w[2999] = 0.4f;
  const int n = 30000;
  Rng rng(57);
  std::vector<int> counts(w.size(), 0);
  for (int i = 0; i < n; ++i) ++counts[static_cast<size_t>(sample_from(std::span<const float>(w), rng))];
  std::vector<double> want(w.begin(), w.end());
  expect_frequencies(counts, want, n);
}

// ---- full Qwen3.5 vocabulary: the fast paths agree with a full sort ----

std::vector<float> big_logits(uint64_t seed, float scale) {
  std::vector<float> l(248320);
  Rng rng(seed);
  for (float& x : l) x = scale * rng.uniform_float();
  return l;
}

std::vector<size_t> ranked(const std::vector<float>& l, size_t n) {
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return l[a] > l[b]; });
  return order;
}

TEST(Sampler, FullVocabTopKTopPMinPAndMask) {
  const size_t real = 248077;  // ids >= this are padding rows
  std::vector<float> l = big_logits(21, 12.0f);
  l[248100] = 100.0f;  // a padding row that would win if it were not masked
  const std::vector<size_t> order = ranked(l, real);

  const TokenDistribution k = process_logits(l, {}, make(0.8f, 20), real);
  std::vector<TokenId> want(order.begin(), order.begin() + 20);
  std::sort(want.begin(), want.end());
  EXPECT_EQ(k.ids, want);

  // A flat distribution: the 0.9 nucleus holds tens of thousands of tokens, so the prefix sort
  // has to grow several times. Compare its size with a full-sort reference (±1 for rounding at
  // the boundary) and check it is exactly a rank prefix.
  const float t = 1.0f;
  const TokenDistribution p = process_logits(l, {}, make(t, 0, 0.9f), real);
  std::vector<double> w(real);
  double total = 0;
  for (size_t i = 0; i < real; ++i) total += w[i] = std::exp((l[i] - l[order[0]]) / t);
  double cum = 0;
  size_t m = 0;
  while (cum < 0.9 * total) cum += w[order[m++]];
  EXPECT_GT(m, 10000u);
  EXPECT_LE(std::max(p.size(), m) - std::min(p.size(), m), 1u);
  std::vector<TokenId> prefix(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(p.size()));
  std::sort(prefix.begin(), prefix.end());
  EXPECT_EQ(p.ids, prefix);
  EXPECT_LT(p.ids.back(), static_cast<TokenId>(real));

  // Large k takes the nth_element path; top-p then runs over the k survivors.
  const TokenDistribution k2 = process_logits(l, {}, make(1.0f, 3000, 0.5f), real);
  std::vector<double> wk(3000);
  double tk = 0;
  for (size_t r = 0; r < 3000; ++r) tk += wk[r] = std::exp(double(l[order[r]]) - l[order[0]]);
  double ck = 0;
  size_t mk = 0;
  while (ck < 0.5 * tk) ck += wk[mk++];
  EXPECT_LE(std::max(k2.size(), mk) - std::min(k2.size(), mk), 1u);
  std::vector<TokenId> kprefix(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k2.size()));
  std::sort(kprefix.begin(), kprefix.end());
  EXPECT_EQ(k2.ids, kprefix);

  // min-p: tokens whose logit is within T*ln(1/min_p) of the max.
  const TokenDistribution mp = process_logits(l, {}, make(0.5f, 0, 1, 0.05f), real);
  const double cut = l[order[0]] + 0.5 * std::log(0.05);
  size_t expect_n = 0;
  for (size_t i = 0; i < real; ++i) expect_n += l[i] >= cut + 1e-4;
  size_t near = 0;
  for (size_t i = 0; i < real; ++i) near += std::fabs(l[i] - cut) <= 1e-4;
  EXPECT_GE(mp.size(), expect_n);
  EXPECT_LE(mp.size(), expect_n + near);
  double sum = 0;
  for (float x : mp.probs) sum += x;
  EXPECT_NEAR(sum, 1.0, 1e-5);
}

TEST(Sampler, FullVocabSpeed) {
  // Not a benchmark (sanitized, -O1): reports the per-token cost so regressions are visible.
  std::vector<float> l = big_logits(5, 20.0f);
  const std::vector<TokenId> prompt(2000, 17), gen(500, 99);
  struct Config {
    const char* name;
    SamplingParams p;
  };
  SamplingParams qwen = make(0.6f, 20, 0.95f);
  qwen.presence_penalty = 1.5f;
  const Config configs[] = {{"greedy", make(0.0f)}, {"qwen_thinking", qwen},
                            {"top_p_only", make(1.0f, 0, 0.95f)}, {"plain", make(1.0f)}};
  for (const auto& c : configs) {
    Sampler s(c.p, 248077);
    Rng rng(1);
    const int reps = 5;
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < reps; ++i) s.sample(l, {prompt, gen}, rng);
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / reps;
    std::printf("[ sampler ] %-14s %.2f ms/token\n", c.name, ms);
  }
}

// ---- speculative decoding ----

struct SpecPair {
  TokenDistribution p, q;
};

SpecPair spec_pair() {
  // Same processing for both (mtp.md §7); different logits, so the supports differ: token 2 is
  // only in p's support, token 7 only in q's.
  SamplingParams sp = make(0.9f, 5);
  const std::vector<float> target = {1.0f, 2.5f, 1.9f, 0.3f, 2.0f, -1.2f, 1.7f, 0.0f};
  const std::vector<float> draft = {1.4f, 1.5f, -0.5f, 0.3f, 2.6f, -1.2f, 1.0f, 1.2f};
  return {process_logits(target, {}, sp), process_logits(draft, {}, sp)};
}

TEST(SamplerSpeculative, AcceptanceProbabilityIsMinOfOneAndRatio) {
  const SpecPair s = spec_pair();
  ASSERT_GT(s.p.prob(2), 0);
  ASSERT_EQ(s.q.prob(2), 0);
  ASSERT_EQ(s.p.prob(7), 0);
  ASSERT_GT(s.q.prob(7), 0);
  const int n = 20000;
  Rng rng(31);
  for (TokenId d = 0; d < 8; ++d) {
    if (s.q.prob(d) == 0 && s.p.prob(d) == 0) continue;
    int accepted = 0;
    for (int i = 0; i < n; ++i) accepted += accept_draft(s.p, s.q, d, rng);
    const double ratio = s.q.prob(d) > 0 ? static_cast<double>(s.p.prob(d)) / s.q.prob(d) : 1.0;
    SCOPED_TRACE(d);
    if (ratio >= 1) EXPECT_EQ(accepted, n);
    else if (ratio == 0) EXPECT_EQ(accepted, 0);
    else expect_proportion(accepted, n, ratio);
  }
  Rng a(4), b(4);
  accept_draft(s.p, s.q, 1, a);
  b.next_u64();
  EXPECT_TRUE(a == b);  // always exactly one draw
}

TEST(SamplerSpeculative, ResidualIsNormalisedPositivePart) {
  const SpecPair s = spec_pair();
  std::vector<double> r(8, 0.0);
  double mass = 0;
  for (TokenId i = 0; i < 8; ++i) mass += r[i] = std::max(0.0, double(s.p.prob(i)) - s.q.prob(i));
  ASSERT_GT(mass, 0.1);
  for (double& x : r) x /= mass;
  const int n = 30000;
  Rng rng(41);
  std::vector<int> counts(8, 0);
  for (int i = 0; i < n; ++i) ++counts[static_cast<size_t>(residual_sample(s.p, s.q, rng))];
  expect_frequencies(counts, r, n);
}

TEST(SamplerSpeculative, ResidualFallsBackToPWhenQCoversP) {
  const SpecPair s = spec_pair();
  const int n = 20000;
  Rng rng(43);
  std::vector<int> counts(8, 0);
  for (int i = 0; i < n; ++i) ++counts[static_cast<size_t>(residual_sample(s.p, s.p, rng))];
  expect_frequencies(counts, dense(s.p, 8), n);
  // One-hot (greedy) p and q that disagree: the residual is p's token.
  const TokenDistribution p1{{3}, {1.0f}}, q1{{5}, {1.0f}};
  EXPECT_FALSE(accept_draft(p1, q1, 5, rng));
  EXPECT_EQ(residual_sample(p1, q1, rng), 3);
}

TEST(SamplerSpeculative, DraftAcceptOrResidualEqualsTarget) {
  // The core property of speculative sampling: d ~ q, keep d with prob min(1, p/q), else draw
  // from the residual; the emitted token is distributed exactly as p.
  const SpecPair s = spec_pair();
  const int n = 50000;
  Rng rng(2718);
  std::vector<int> counts(8, 0);
  int accepted = 0;
  for (int i = 0; i < n; ++i) {
    const TokenId d = sample_from(s.q, rng);
    TokenId out;
    if (accept_draft(s.p, s.q, d, rng)) {
      out = d;
      ++accepted;
    } else {
      out = residual_sample(s.p, s.q, rng);
    }
    ++counts[static_cast<size_t>(out)];
  }
  expect_frequencies(counts, dense(s.p, 8), n);
  double alpha = 0;  // acceptance rate = sum_x min(p(x), q(x))
  for (TokenId i = 0; i < 8; ++i) alpha += std::min(s.p.prob(i), s.q.prob(i));
  expect_proportion(accepted, n, alpha);
}

}  // namespace
}  // namespace mere
