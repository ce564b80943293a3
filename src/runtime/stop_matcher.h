// Stop conditions over a streamed generation: stop strings matched across chunk boundaries, and
// stop token ids. Text that could still turn out to be the start of a stop string (or an incomplete
// UTF-8 sequence) is held back; when a stop string completes, the output ends right before it and
// the stop string itself is not emitted (OpenAI semantics). See docs/sampling.md.
#pragma once
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/sampler.h"

namespace mere {

class StopMatcher {
 public:
  StopMatcher() = default;
  // Stop strings must be non-empty; token ids are stop tokens as given.
  StopMatcher(std::vector<std::string> stop_strings, std::vector<TokenId> stop_token_ids);
  // The request's stop strings and stop_token_ids, plus the model's eos ids unless ignore_eos.
  static StopMatcher from_params(const SamplingParams& params, std::span<const TokenId> eos_ids);

  // Appends newly decoded text and returns the part that is now safe to emit. When a stop string
  // completes, returns the text before it and stopped() turns true; later pushes return "".
  // Among stop strings, the occurrence that ends first wins (ties: the longer one), so the result
  // does not depend on how the text was chunked.
  std::string push(std::string_view text);
  // Generation ended for another reason (stop token, max_tokens, context end): the held-back text.
  std::string flush();

  // The engine checks each sampled id; a stop token's text is not decoded or emitted.
  bool is_stop_token(TokenId id) const;

  bool stopped() const { return stopped_; }
  const std::string& matched() const { return matched_; }  // the stop string found, or ""
  size_t held_back() const { return pending_.size(); }     // bytes currently withheld
  const std::vector<std::string>& stop_strings() const { return stops_; }
  const std::vector<TokenId>& stop_token_ids() const { return stop_ids_; }

 private:
  std::vector<std::string> stops_;
  std::vector<TokenId> stop_ids_;  // sorted, unique
  std::string pending_;            // withheld text
  std::string matched_;
  bool stopped_ = false;
};

}  // namespace mere
