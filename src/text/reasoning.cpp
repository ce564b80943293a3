// Reasoning/answer splitting around <think>...</think> (see reasoning.h). The whole-text split and
// the streaming splitter share the same stripping rules: reasoning loses newlines at both ends,
// the answer loses leading newlines (what Qwen templates strip when re-rendering history).
#include "text/reasoning.h"

namespace mere {
namespace {

constexpr std::string_view kOpen = "<think>";
constexpr std::string_view kClose = "</think>";

std::string_view strip_newlines(std::string_view s, bool left, bool right) {
  if (left)
    while (!s.empty() && s.front() == '\n') s.remove_prefix(1);
  if (right)
    while (!s.empty() && s.back() == '\n') s.remove_suffix(1);
  return s;
}

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

// Length of the longest suffix of s that is a proper prefix of tag.
size_t partial_tag_suffix(std::string_view s, std::string_view tag) {
  for (size_t n = std::min(s.size(), tag.size() - 1); n > 0; --n)
    if (s.substr(s.size() - n) == tag.substr(0, n)) return n;
  return 0;
}

}  // namespace

bool prompt_opens_reasoning(std::string_view prompt) {
  size_t open = prompt.rfind(kOpen);
  if (open == std::string_view::npos) return false;
  size_t close = prompt.rfind(kClose);
  return close == std::string_view::npos || close < open;
}

ReasoningSplit split_reasoning(std::string_view text, bool started_in_reasoning) {
  ReasoningSplit r;
  std::string_view body = text;
  if (!started_in_reasoning) {
    size_t i = 0;
    while (i < text.size() && is_space(text[i])) ++i;
    if (text.substr(i, kOpen.size()) == kOpen) {
      body = text.substr(i + kOpen.size());
    } else if (text.find(kClose) == std::string_view::npos) {
      r.content = std::string(text);
      return r;
    }
  } else {
    size_t i = 0;  // some models repeat the opening tag the prompt already holds
    while (i < body.size() && is_space(body[i])) ++i;
    if (body.substr(i, kOpen.size()) == kOpen) body = body.substr(i + kOpen.size());
  }
  r.has_reasoning = true;
  size_t close = body.find(kClose);
  if (close == std::string_view::npos) {
    r.reasoning = std::string(strip_newlines(body, true, true));
    r.reasoning_complete = false;
    return r;
  }
  r.reasoning = std::string(strip_newlines(body.substr(0, close), true, true));
  r.content = std::string(strip_newlines(body.substr(close + kClose.size()), true, false));
  return r;
}

ReasoningStream::ReasoningStream(bool started_in_reasoning)
    : mode_(started_in_reasoning ? Mode::Reasoning : Mode::Detect), started_(started_in_reasoning) {}

ReasoningStream::Delta ReasoningStream::push(std::string_view chunk) {
  pending_.append(chunk);
  Delta d;
  drain(d, false);
  return d;
}

ReasoningStream::Delta ReasoningStream::finish() {
  Delta d;
  drain(d, true);
  return d;
}

void ReasoningStream::drain(Delta& d, bool final) {
  while (true) {
    if (mode_ == Mode::Detect) {
      size_t i = 0;
      while (i < pending_.size() && is_space(pending_[i])) ++i;
      std::string_view rest = std::string_view(pending_).substr(i);
      if (rest.substr(0, kOpen.size()) == kOpen) {
        pending_.erase(0, i + kOpen.size());
        mode_ = Mode::Reasoning;
        at_segment_start_ = true;
        continue;
      }
      if (!final && (rest.empty() || kOpen.substr(0, rest.size()) == rest)) return;  // undecided
      mode_ = Mode::Content;
      at_segment_start_ = false;  // plain answers keep their text as is
      continue;
    }
    if (mode_ == Mode::Reasoning) {
      if (at_segment_start_ && started_) {
        // A repeated <think> right at the start is dropped, like split_reasoning does.
        size_t i = 0;
        while (i < pending_.size() && is_space(pending_[i])) ++i;
        std::string_view rest = std::string_view(pending_).substr(i);
        if (rest.substr(0, kOpen.size()) == kOpen) {
          pending_.erase(0, i + kOpen.size());
          continue;
        }
        if (!final && kOpen.substr(0, rest.size()) == rest) return;  // undecided (also: only whitespace yet)
      }
      if (at_segment_start_) {
        size_t nl = 0;
        while (nl < pending_.size() && pending_[nl] == '\n') ++nl;
        pending_.erase(0, nl);
        if (pending_.empty() && !final) return;
        at_segment_start_ = false;
      }
      size_t close = pending_.find(kClose);
      if (close != std::string::npos) {
        d.reasoning += strip_newlines(std::string_view(pending_).substr(0, close), false, true);
        pending_.erase(0, close + kClose.size());
        mode_ = Mode::Content;
        at_segment_start_ = true;
        continue;
      }
      if (final) {
        d.reasoning += strip_newlines(pending_, false, true);
        pending_.clear();
        return;
      }
      // Hold back a partial "</think>" and trailing newlines (they may precede </think>).
      size_t emit = pending_.size() - partial_tag_suffix(pending_, kClose);
      while (emit > 0 && pending_[emit - 1] == '\n') --emit;
      d.reasoning.append(pending_, 0, emit);
      pending_.erase(0, emit);
      return;
    }
    // Content
    if (at_segment_start_) {
      size_t nl = 0;
      while (nl < pending_.size() && pending_[nl] == '\n') ++nl;
      pending_.erase(0, nl);
      if (pending_.empty()) return;
      at_segment_start_ = false;
    }
    d.content += pending_;
    pending_.clear();
    return;
  }
}

}  // namespace mere
