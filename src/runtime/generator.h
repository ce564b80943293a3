// Token-level generation on one sequence: prefill, then sample/decode until EOS, a stop token,
// the token budget or the caller says stop. Text-level concerns (detokenising, stop strings)
// belong to the caller's on_token callback.
#pragma once
#include <cstdint>
#include <functional>
#include <span>
#include <string>

#include "model/qwen35.h"
#include "runtime/sampler.h"

namespace mere {

struct GenerationStats {
  int64_t prompt_tokens = 0;
  int64_t generated_tokens = 0;
  double prefill_seconds = 0;  // forward over the prompt
  double decode_seconds = 0;   // from the end of prefill to the last token (first sample included)
  double ttft_seconds = 0;     // from the start of the request to the first token
  double total_seconds = 0;
  std::string finish_reason;   // "stop" (EOS, stop token or stop string), "length"
  uint64_t seed = 0;
  double prefill_tok_s() const { return prefill_seconds > 0 ? prompt_tokens / prefill_seconds : 0; }
  double decode_tok_s() const { return decode_seconds > 0 ? generated_tokens / decode_seconds : 0; }
};

class Generator {
 public:
  explicit Generator(const Qwen35Model& model) : model_(model) {}

  // prompt: [P] ids; eos_ids: the model's EOS set (ignored when params.ignore_eos);
  // context_limit: max prompt + generated tokens. on_token(id) returns false to stop ("stop").
  // EOS and stop tokens end generation and are not passed to on_token.
  GenerationStats run(std::span<const int32_t> prompt, const SamplingParams& params, std::span<const TokenId> eos_ids,
                      int64_t context_limit, const std::function<bool(int32_t)>& on_token);

 private:
  const Qwen35Model& model_;
};

}  // namespace mere
