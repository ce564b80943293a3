// Splitting generated text into reasoning and answer around <think>...</think>, for whole texts and
// for streams. Handles the Qwen3.5 default where the prompt already opened <think> (the output
// starts inside the reasoning), outputs that open <think> themselves, and unterminated reasoning.
#pragma once
#include <string>
#include <string_view>

namespace mere {

struct ReasoningSplit {
  std::string reasoning;          // between the tags; newlines at both ends stripped
  std::string content;            // after </think>; leading newlines stripped
  bool has_reasoning = false;     // a reasoning section was present (possibly empty)
  bool reasoning_complete = true;  // false: generation ended before </think>
};

// True when the prompt ends inside an open <think> (its last <think> has no </think> after it).
bool prompt_opens_reasoning(std::string_view prompt);

// started_in_reasoning: the prompt ended inside <think> (see prompt_opens_reasoning). Otherwise
// reasoning is recognised when the output starts (after whitespace) with <think>, or when it
// contains </think> without an opening tag (the template opened it).
ReasoningSplit split_reasoning(std::string_view text, bool started_in_reasoning);

// Incremental version for streaming: feed chunks, get the new reasoning/content pieces. The
// concatenated deltas equal split_reasoning() of the whole text, except that a stream that did not
// start in reasoning and never opens <think> treats a later </think> as content.
class ReasoningStream {
 public:
  struct Delta {
    std::string reasoning;
    std::string content;
  };
  explicit ReasoningStream(bool started_in_reasoning);
  Delta push(std::string_view chunk);
  Delta finish();  // flushes what was held back (partial tags, trailing newlines)
  bool in_reasoning() const { return mode_ == Mode::Reasoning; }

 private:
  enum class Mode { Detect, Reasoning, Content };
  Mode mode_;
  bool started_;  // the prompt opened <think>
  std::string pending_;       // not yet emitted
  bool at_segment_start_ = true;  // strip leading newlines of the current segment
  void drain(Delta& d, bool final);
};

}  // namespace mere
