// Reasoning extraction around <think>...</think>: prompts that already opened <think> (Qwen3.5
// default), outputs that open it themselves, unterminated reasoning, no reasoning at all, and the
// streaming splitter agreeing with the whole-text split for every way of chunking the text.
#include <gtest/gtest.h>

#include <string>

#include "text/reasoning.h"

namespace mere {
namespace {

TEST(Reasoning, PromptOpensReasoning) {
  EXPECT_TRUE(prompt_opens_reasoning("<|im_start|>assistant\n<think>\n"));
  EXPECT_FALSE(prompt_opens_reasoning("<|im_start|>assistant\n<think>\n\n</think>\n\n"));
  EXPECT_FALSE(prompt_opens_reasoning("<|im_start|>assistant\n"));
  EXPECT_TRUE(prompt_opens_reasoning("<think>\na\n</think>\n\nb<|im_end|>\n<|im_start|>assistant\n<think>\n"));
}

TEST(Reasoning, StartedInsideThink) {
  ReasoningSplit r = split_reasoning("Let me think.\nStep 2.\n</think>\n\nThe answer is 4.", true);
  EXPECT_TRUE(r.has_reasoning);
  EXPECT_TRUE(r.reasoning_complete);
  EXPECT_EQ(r.reasoning, "Let me think.\nStep 2.");
  EXPECT_EQ(r.content, "The answer is 4.");
}

TEST(Reasoning, OutputOpensThink) {
  ReasoningSplit r = split_reasoning("\n<think>\nhmm\n</think>\n\nYes.", false);
  EXPECT_TRUE(r.has_reasoning);
  EXPECT_EQ(r.reasoning, "hmm");
  EXPECT_EQ(r.content, "Yes.");
}

TEST(Reasoning, RepeatedOpeningTagIsDropped) {
  ReasoningSplit r = split_reasoning("<think>\nx\n</think>\n\ny", true);
  EXPECT_EQ(r.reasoning, "x");
  EXPECT_EQ(r.content, "y");
}

TEST(Reasoning, CloseWithoutOpenMeansTheTemplateOpenedIt) {
  ReasoningSplit r = split_reasoning("plan\n</think>\n\nanswer", false);
  EXPECT_TRUE(r.has_reasoning);
  EXPECT_EQ(r.reasoning, "plan");
  EXPECT_EQ(r.content, "answer");
}

TEST(Reasoning, Unterminated) {
  ReasoningSplit r = split_reasoning("still thinking\n", true);
  EXPECT_TRUE(r.has_reasoning);
  EXPECT_FALSE(r.reasoning_complete);
  EXPECT_EQ(r.reasoning, "still thinking");
  EXPECT_EQ(r.content, "");
}

TEST(Reasoning, EmptyThinkAndNoThink) {
  ReasoningSplit r = split_reasoning("<think>\n\n</think>\n\nHi", false);
  EXPECT_TRUE(r.has_reasoning);
  EXPECT_EQ(r.reasoning, "");
  EXPECT_EQ(r.content, "Hi");
  ReasoningSplit plain = split_reasoning("  Just an answer\n", false);
  EXPECT_FALSE(plain.has_reasoning);
  EXPECT_EQ(plain.content, "  Just an answer\n");
}

// Every split of the text into three chunks gives the same result as the whole-text split.
void expect_stream_matches(const std::string& text, bool started) {
  ReasoningSplit whole = split_reasoning(text, started);
  for (size_t i = 0; i <= text.size(); ++i) {
    for (size_t j = i; j <= text.size(); j += 3) {
      ReasoningStream s(started);
      std::string reasoning, content;
      for (auto piece : {text.substr(0, i), text.substr(i, j - i), text.substr(j)}) {
        auto d = s.push(piece);
        reasoning += d.reasoning;
        content += d.content;
      }
      auto d = s.finish();
      reasoning += d.reasoning;
      content += d.content;
      ASSERT_EQ(reasoning, whole.reasoning) << "text=" << text << " cuts " << i << "," << j;
      ASSERT_EQ(content, whole.content) << "text=" << text << " cuts " << i << "," << j;
    }
  }
}

TEST(ReasoningStream, MatchesWholeTextSplit) {
  expect_stream_matches("\nStep one.\n\nStep two.\n</think>\n\nAnswer </thin k> done.\n", true);
  expect_stream_matches("<think>\nplan\n</think>\n\nok", true);
  expect_stream_matches("\n\n<think>\nplan a\n\n</think>\n\n\nok\n", false);
  expect_stream_matches("no reasoning <think> here", false);
  expect_stream_matches("unterminated\n\nreasoning\n", true);
  expect_stream_matches("  \n", false);
  expect_stream_matches("", true);
}

TEST(ReasoningStream, EmitsReasoningBeforeTheCloseTagArrives) {
  ReasoningStream s(true);
  auto d1 = s.push("\nthinking hard");
  EXPECT_EQ(d1.reasoning, "thinking hard");
  auto d2 = s.push("\n</thi");
  EXPECT_EQ(d2.reasoning, "");  // newline and partial tag held back
  EXPECT_TRUE(s.in_reasoning());
  auto d3 = s.push("nk>\n\nHello");
  EXPECT_EQ(d3.reasoning, "");
  EXPECT_EQ(d3.content, "Hello");
  EXPECT_FALSE(s.in_reasoning());
}

}  // namespace
}  // namespace mere
