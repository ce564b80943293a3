// Token sampling: request parameters, logits processing and the draws made from the result.
// process_logits turns one row of logits into the final probability distribution (penalties,
// temperature, top-k, top-p, min-p; see docs/sampling.md), and everything that draws a token —
// plain sampling and speculative accept/residual (mtp.md §7) — draws from such distributions with
// the request's Rng, one uniform per decision, by inverse CDF over token ids in ascending order.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "runtime/rng.h"

namespace mere {

using TokenId = int32_t;

// What one request asks of sampling and stopping. Defaults are the built-in ones (no truncation,
// no penalties, temperature 1); GenerationConfig::resolve layers the model's and the request's on top.
struct SamplingParams {
  float temperature = 1.0f;          // >= 0; 0 selects greedy argmax
  int top_k = 0;                     // >= 0; 0 = off
  float top_p = 1.0f;                // (0, 1]; 1 = off
  float min_p = 0.0f;                // [0, 1]; 0 = off; relative to the most likely token
  float repetition_penalty = 1.0f;   // > 0; 1 = off; HF-style over prompt + generated tokens
  float presence_penalty = 0.0f;     // [-2, 2]; OpenAI-style over generated tokens only
  float frequency_penalty = 0.0f;    // [-2, 2]; OpenAI-style over generated tokens only
  std::optional<uint64_t> seed;      // none: drawn from std::random_device (Rng::from_request)
  std::optional<int64_t> max_tokens; // >= 1; none: until a stop or the context ends
  std::vector<std::string> stop;     // stop strings (non-empty), cut from the output
  std::vector<TokenId> stop_token_ids;  // >= 0; stop regardless of ignore_eos
  bool ignore_eos = false;           // keep generating past the model's EOS ids

  bool greedy() const { return temperature == 0.0f; }
  bool has_penalties() const {
    return repetition_penalty != 1.0f || presence_penalty != 0.0f || frequency_penalty != 0.0f;
  }
  // Throws mere::Error "[where] field: expected ..., got ..." for the first invalid field.
  void validate(std::string_view where = "sampling") const;
};

// The tokens penalties look at: repetition over both, presence/frequency over `generated` only.
struct TokenHistory {
  std::span<const TokenId> prompt;
  std::span<const TokenId> generated;
};

// A processed distribution: the tokens that survived, ids strictly ascending, probabilities > 0
// summing to 1 (up to float rounding). Tokens not listed have probability 0.
struct TokenDistribution {
  std::vector<TokenId> ids;
  std::vector<float> probs;

  size_t size() const { return ids.size(); }
  float prob(TokenId id) const;  // binary search; 0 when absent
  void clear() {
    ids.clear();
    probs.clear();
  }
};

// Per-request sampler. Holds the parameters and scratch buffers so the per-token path does not
// allocate after the first call. Not thread-safe; one per sequence.
class Sampler {
 public:
  // vocab_limit: ids >= vocab_limit are padding rows and get probability 0 (0 = no limit).
  explicit Sampler(SamplingParams params, size_t vocab_limit = 0);

  const SamplingParams& params() const { return params_; }
  size_t vocab_limit() const { return vocab_limit_; }

  // logits: [V] f32, V > every id in history. Order: penalties, temperature, top-k, top-p, min-p.
  // Temperature 0 gives a one-hot distribution at the greedy token.
  void process_logits(std::span<const float> logits, const TokenHistory& history,
                      TokenDistribution& out);
  TokenDistribution process_logits(std::span<const float> logits, const TokenHistory& history);

  // One token. Temperature 0: argmax of the penalised logits (lowest id on ties), no rng draw.
  // Otherwise exactly one rng draw: sample_from(process_logits(...), rng).
  TokenId sample(std::span<const float> logits, const TokenHistory& history, Rng& rng);

 private:
  struct Scan {
    std::span<const float> logits;  // [n] penalised (work_) or the input itself
    TokenId best;                   // argmax, lowest id on ties
    size_t finite;                  // entries > -inf
  };
  Scan penalise(std::span<const float> logits, const TokenHistory& history, size_t n);
  void select_top_k(std::span<const float> logits, size_t k);
  std::pair<float, TokenId> top_p_cutoff(size_t n);

  SamplingParams params_;
  size_t vocab_limit_ = 0;
  std::vector<float> work_;                  // [n] penalised logits
  std::vector<float> weights_;               // [n] exp((l - max) / T)
  std::vector<uint32_t> counts_;             // [n] generated-token counts (zero between calls)
  std::vector<uint8_t> seen_;                // [n] token in prompt or generated (zero between calls)
  std::vector<std::pair<float, TokenId>> cand_;  // (logit or weight, id) while filtering
  std::vector<double> bucket_mass_;          // top-p: mass per weight bucket
  TokenDistribution dist_;
};

// Convenience: a temporary Sampler.
TokenDistribution process_logits(std::span<const float> logits, const TokenHistory& history,
                                 const SamplingParams& params, size_t vocab_limit = 0);

// Inverse-CDF draw with one uniform u = rng.uniform_double(): the first id (ascending) whose
// cumulative weight exceeds u * total. Weights need not be normalised; total must be > 0.
TokenId sample_from(const TokenDistribution& dist, Rng& rng);
TokenId sample_from(std::span<const float> probs, Rng& rng);  // dense [V]; returns an index

// Speculative decoding (mtp.md §7). p: target distribution, q: draft distribution, both from
// process_logits with the same parameters. Accepts `draft` with probability min(1, p(d)/q(d));
// always one rng draw.
bool accept_draft(const TokenDistribution& p, const TokenDistribution& q, TokenId draft, Rng& rng);
// After a rejection: a draw from normalise(max(p - q, 0)), or from p when that mass is <= 1e-6.
// One rng draw. Drafting d ~ q, accepting, else residual_sample yields exactly p.
TokenId residual_sample(const TokenDistribution& p, const TokenDistribution& q, Rng& rng);

}  // namespace mere
