// A small backtracking regex engine for tokenizer pre-tokenizer patterns (Oniguruma/Ruby syntax
// as Hugging Face tokenizers uses it): literals, classes, \p{..} general categories, \s \d \w,
// ?, *, +, {n,m} (greedy, lazy, possessive), alternation, groups, (?i:...), lookahead, atomic groups.
// Unsupported constructs (lookbehind, backreferences, scripts...) fail to compile with an error
// naming them. Matching never recurses per character, so long runs cannot overflow the stack.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mere::text {

class Regex {
 public:
  // Throws mere::Error "[regex] ...: expected ..., got ... at offset N in <pattern>".
  explicit Regex(std::string_view pattern);
  ~Regex();
  Regex(Regex&&) noexcept;
  Regex& operator=(Regex&&) noexcept;

  const std::string& pattern() const;
  // Leftmost match starting at or after `from` (a char boundary of well-formed UTF-8 text).
  // Returns false when none; otherwise [*begin, *end) in bytes.
  bool search(std::string_view text, size_t from, size_t* begin, size_t* end) const;
  // All non-overlapping matches left to right (Oniguruma's find_iter: after an empty match the
  // search resumes one character later).
  void find_all(std::string_view text, std::vector<std::pair<size_t, size_t>>& out) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mere::text
