// Stop-string matching over streamed text. pending_ keeps the longest suffix of the text seen so
// far that is a proper prefix of some stop string, so any later match must start inside pending_:
// each push only searches pending_ + the new text. Costs O(|chunk| * |stops|) plus stop-length².
#include "runtime/stop_matcher.h"

#include <algorithm>
#include <utility>

#include "core/error.h"

namespace mere {

namespace {

// Length of an incomplete UTF-8 sequence at the end of s (0 when s ends on a boundary).
size_t incomplete_utf8_tail(std::string_view s) {
  for (size_t i = 1; i <= std::min<size_t>(3, s.size()); ++i) {
    const auto b = static_cast<unsigned char>(s[s.size() - i]);
    if ((b & 0xC0) == 0x80) continue;  // continuation byte: keep looking for the lead
    if (b < 0xC0) return 0;            // ASCII (or stray continuation run): nothing to wait for
    const size_t need = b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : 2;
    return need > i ? i : 0;
  }
  return 0;
}

}  // namespace

StopMatcher::StopMatcher(std::vector<std::string> stop_strings, std::vector<TokenId> stop_token_ids)
    : stops_(std::move(stop_strings)), stop_ids_(std::move(stop_token_ids)) {
  for (size_t i = 0; i < stops_.size(); ++i)
    MERE_CHECK(!stops_[i].empty(), "stop", "stop[", i, "]: expected a non-empty string, got \"\"");
  std::sort(stop_ids_.begin(), stop_ids_.end());
  stop_ids_.erase(std::unique(stop_ids_.begin(), stop_ids_.end()), stop_ids_.end());
}

StopMatcher StopMatcher::from_params(const SamplingParams& params, std::span<const TokenId> eos_ids) {
  std::vector<TokenId> ids = params.stop_token_ids;
  if (!params.ignore_eos) ids.insert(ids.end(), eos_ids.begin(), eos_ids.end());
  return StopMatcher(params.stop, std::move(ids));
}

bool StopMatcher::is_stop_token(TokenId id) const {
  return std::binary_search(stop_ids_.begin(), stop_ids_.end(), id);
}

std::string StopMatcher::push(std::string_view text) {
  if (stopped_) return {};
  pending_.append(text);

  // The occurrence that ends first; on equal ends the one that starts first (the longer).
  size_t best_start = std::string::npos, best_end = std::string::npos, best = 0;
  for (size_t i = 0; i < stops_.size(); ++i) {
    const size_t pos = pending_.find(stops_[i]);
    if (pos == std::string::npos) continue;
    const size_t end = pos + stops_[i].size();
    if (end < best_end || (end == best_end && pos < best_start)) {
      best_start = pos;
      best_end = end;
      best = i;
    }
  }
  if (best_start != std::string::npos) {
    std::string out = pending_.substr(0, best_start);
    matched_ = stops_[best];
    stopped_ = true;
    pending_.clear();
    return out;
  }

  // Hold back the longest suffix that is a proper prefix of a stop string.
  size_t hold = incomplete_utf8_tail(pending_);
  for (const auto& s : stops_) {
    for (size_t len = std::min(s.size() - 1, pending_.size()); len > hold; --len)
      if (std::string_view(pending_).substr(pending_.size() - len) ==
          std::string_view(s).substr(0, len)) {
        hold = len;
        break;
      }
  }
  std::string out = pending_.substr(0, pending_.size() - hold);
  pending_.erase(0, pending_.size() - hold);
  return out;
}

std::string StopMatcher::flush() {
  std::string out;
  out.swap(pending_);
  return out;
}

}  // namespace mere
