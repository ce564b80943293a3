// StopMatcher: stop strings across chunk boundaries (held back, released, truncated), earliest-
// ending match, UTF-8 hold-back, stop token ids with ignore_eos, and a randomized property test:
// any chunking of a text emits exactly the text before the first stop string.
#include "runtime/stop_matcher.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace mere {
namespace {

std::string feed(StopMatcher& m, const std::vector<std::string>& chunks, std::vector<std::string>* parts = nullptr) {
  std::string out;
  for (const auto& c : chunks) {
    std::string piece = m.push(c);
    if (parts) parts->push_back(piece);
    out += piece;
  }
  if (!m.stopped()) out += m.flush();
  return out;
}

TEST(StopMatcher, NoStopStringsPassesEverythingThrough) {
  StopMatcher m;
  EXPECT_EQ(m.push("hello "), "hello ");
  EXPECT_EQ(m.push("world"), "world");
  EXPECT_EQ(m.held_back(), 0u);
  EXPECT_FALSE(m.stopped());
  EXPECT_EQ(m.flush(), "");
}

TEST(StopMatcher, MatchInOneChunkTruncates) {
  StopMatcher m({"###"}, {});
  EXPECT_EQ(m.push("answer: 42### trailing"), "answer: 42");
  EXPECT_TRUE(m.stopped());
  EXPECT_EQ(m.matched(), "###");
  EXPECT_EQ(m.push("more"), "");
  EXPECT_EQ(m.flush(), "");
}

TEST(StopMatcher, MatchAcrossChunksIsHeldBackThenCut) {
  StopMatcher m({"STOP"}, {});
  std::vector<std::string> parts;
  EXPECT_EQ(feed(m, {"Hel", "lo ST", "O", "P and on"}, &parts), "Hello ");
  EXPECT_EQ(parts, (std::vector<std::string>{"Hel", "lo ", "", ""}));
  EXPECT_TRUE(m.stopped());
  EXPECT_EQ(m.matched(), "STOP");
}

TEST(StopMatcher, FalseStartIsReleased) {
  StopMatcher m({"abc"}, {});
  EXPECT_EQ(m.push("xa"), "x");
  EXPECT_EQ(m.held_back(), 1u);
  EXPECT_EQ(m.push("b"), "");
  EXPECT_EQ(m.push("d"), "abd");
  EXPECT_EQ(m.push("ab"), "");
  EXPECT_EQ(m.flush(), "ab");  // generation ended for another reason: release what was held
  EXPECT_FALSE(m.stopped());
}

TEST(StopMatcher, OverlappingPrefixesAndRepeats) {
  StopMatcher m({"aab"}, {});
  EXPECT_EQ(feed(m, {"a", "a", "a", "a", "b", "c"}), "aa");
  StopMatcher n({"abab"}, {});
  EXPECT_EQ(feed(n, {"ab", "a", "c", "ab", "ab"}), "abac");
}

TEST(StopMatcher, EarliestEndingMatchWins) {
  // "bc" completes before "abcd" does, whatever the chunking.
  for (const auto& chunks : std::vector<std::vector<std::string>>{{"abcd"}, {"a", "b", "c", "d"}}) {
    StopMatcher m({"abcd", "bc"}, {});
    EXPECT_EQ(feed(m, chunks), "a");
    EXPECT_EQ(m.matched(), "bc");
  }
  // Same end: the longer (earlier-starting) one.
  StopMatcher m({"c", "abc"}, {});
  EXPECT_EQ(feed(m, {"xxabc"}), "xx");
  EXPECT_EQ(m.matched(), "abc");
}

TEST(StopMatcher, HoldsBackIncompleteUtf8) {
  StopMatcher m;
  const std::string euro = "\xE2\x82\xAC";  // U+20AC, 3 bytes
  EXPECT_EQ(m.push("x" + euro.substr(0, 1)), "x");
  EXPECT_EQ(m.push(euro.substr(1, 1)), "");
  EXPECT_EQ(m.push(euro.substr(2, 1) + "y"), euro + "y");
  const std::string emoji = "\xF0\x9F\x98\x80";  // U+1F600, 4 bytes
  EXPECT_EQ(m.push(emoji.substr(0, 3)), "");
  EXPECT_EQ(m.push(emoji.substr(3)), emoji);
  EXPECT_EQ(m.push("\xE2\x82"), "");
  EXPECT_EQ(m.flush(), "\xE2\x82");  // a truncated sequence still comes out at the end
}

TEST(StopMatcher, StopTokenIdsAndIgnoreEos) {
  SamplingParams p;
  p.stop_token_ids = {7};
  p.stop = {"</s>"};
  const std::vector<TokenId> eos = {248046, 248044};
  StopMatcher m = StopMatcher::from_params(p, eos);
  EXPECT_TRUE(m.is_stop_token(7));
  EXPECT_TRUE(m.is_stop_token(248046));
  EXPECT_TRUE(m.is_stop_token(248044));
  EXPECT_FALSE(m.is_stop_token(8));
  EXPECT_EQ(m.stop_strings(), std::vector<std::string>{"</s>"});
  p.ignore_eos = true;
  StopMatcher ig = StopMatcher::from_params(p, eos);
  EXPECT_TRUE(ig.is_stop_token(7));  // explicit stop ids still stop
  EXPECT_FALSE(ig.is_stop_token(248046));
  EXPECT_THROW(StopMatcher({""}, {}), Error);
}

TEST(StopMatcher, AnyChunkingEmitsTextBeforeFirstStop) {
  // Small alphabet so stop strings occur often and partial matches overlap.
  const std::vector<std::string> stops = {"aba", "bb", "cab"};
  Rng rng(77);
  for (int trial = 0; trial < 2000; ++trial) {
    std::string text;
    const size_t len = rng.next_u64() % 24;
    for (size_t i = 0; i < len; ++i) text += static_cast<char>('a' + rng.next_u64() % 3);
    // Expected: the earliest end of any stop string, cut at that occurrence's start.
    size_t cut = std::string::npos;
    for (size_t end = 1; end <= text.size() && cut == std::string::npos; ++end)
      for (const auto& s : stops)
        if (end >= s.size() && text.compare(end - s.size(), s.size(), s) == 0) {
          cut = cut == std::string::npos ? end - s.size() : std::min(cut, end - s.size());
        }
    const std::string want = cut == std::string::npos ? text : text.substr(0, cut);
    std::vector<std::string> chunks;
    for (size_t i = 0; i < text.size();) {
      const size_t n = std::min<size_t>(text.size() - i, rng.next_u64() % 4);  // empty chunks too
      chunks.push_back(text.substr(i, n));
      i += n;
    }
    StopMatcher m(stops, {});
    ASSERT_EQ(feed(m, chunks), want) << "text " << text;
    EXPECT_EQ(m.stopped(), cut != std::string::npos) << "text " << text;
  }
}

}  // namespace
}  // namespace mere
