// MTP speculative decoding (mtp.md §3, §7): the head drafts a chain, the target verifies it in one
// pass of width d+1, the longest agreeing prefix is accepted (greedy) or accepted by rejection
// sampling (sampled), and the caches roll back to the accepted prefix by truncation and GatedDeltaNet
// replay. Greedy output is bitwise the output without MTP.
#pragma once
#include <functional>
#include <span>
#include <vector>

#include "model/qwen35.h"
#include "runtime/generator.h"
#include "runtime/mtp_policy.h"
#include "runtime/sampler.h"

namespace mere {

struct SpeculativeRequest {
  std::span<const int32_t> prompt;
  const SamplingParams* params = nullptr;
  std::span<const TokenId> eos_ids;
  int64_t budget = 0;         // tokens to generate at most
  int64_t context_limit = 0;  // prompt + generated at most
};

// Continues a request whose prompt has been prefilled into `mem`. prompt_hidden: [P, H] post-final-
// norm hiddens of the prompt; logits: [V] target logits after the prompt. Appends to `generated`,
// calls on_token for each emitted token (false stops), fills st.accel and st.finish_reason.
void decode_speculative(const Qwen35Model& model, const ResolvedSpeculation& rs, const SpeculationOptions& opt,
                        const SpeculativeRequest& req, SequenceMemory& mem, std::vector<float>& prompt_hidden,
                        std::vector<float>& logits, Sampler& sampler, Rng& rng, std::vector<int32_t>& generated,
                        const std::function<bool(int32_t)>& on_token, GenerationStats& st);

}  // namespace mere
