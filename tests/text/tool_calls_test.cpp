// Tool-call parsing of generated text: Qwen's JSON form and the Qwen3-Coder/Qwen3.5 XML form,
// several calls, content around calls, JSON-or-string parameter values (schema-aware), arguments
// given as JSON strings, unterminated calls, and malformed blocks kept as content.
#include <gtest/gtest.h>

#include <string>

#include "core/json.h"
#include "text/tool_calls.h"

namespace mere {
namespace {

TEST(ToolCalls, JsonForm) {
  ToolCallParse r = parse_tool_calls(
      "I'll check the weather.\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 3}}\n"
      "</tool_call>");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].name, "get_weather");
  EXPECT_EQ(r.calls[0].arguments_json(), R"({"city":"Paris","days":3})");
  EXPECT_EQ(r.content, "I'll check the weather.");
  EXPECT_TRUE(r.errors.empty());
}

TEST(ToolCalls, JsonFormWithStringArgumentsAndMultipleCalls) {
  ToolCallParse r = parse_tool_calls(
      "<tool_call>\n{\"name\": \"a\", \"arguments\": \"{\\\"x\\\": [1, 2]}\"}\n</tool_call>\n"
      "<tool_call>\n{\"name\": \"b\", \"arguments\": {}}\n</tool_call>");
  ASSERT_EQ(r.calls.size(), 2u);
  EXPECT_EQ(r.calls[0].arguments_json(), R"({"x":[1,2]})");
  EXPECT_EQ(r.calls[1].name, "b");
  EXPECT_EQ(r.content, "");
}

TEST(ToolCalls, XmlForm) {
  std::string text =
      "Let me look.\n\n<tool_call>\n<function=search>\n<parameter=query>\nbest \"pizza\" in 東京\n</parameter>\n"
      "<parameter=limit>\n5\n</parameter>\n<parameter=filters>\n{\"tags\": [\"a\"], \"open\": true}\n</parameter>\n"
      "<parameter=note>\nline one\nline two\n</parameter>\n</function>\n</tool_call>";
  ToolCallParse r = parse_tool_calls(text);
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].name, "search");
  EXPECT_EQ(r.calls[0].arguments.dump(),
            R"({"query":"best \"pizza\" in 東京","limit":5,"filters":{"tags":["a"],"open":true},"note":"line one\nline two"})");
  EXPECT_EQ(r.content, "Let me look.");
}

TEST(ToolCalls, XmlValuesFollowTheSchemaWhenGiven) {
  Json tools = Json::parse(R"([{"type":"function","function":{"name":"f","parameters":{"type":"object",
      "properties":{"code":{"type":"string"},"n":{"type":"integer"}}}}}])");
  std::string text = "<tool_call>\n<function=f>\n<parameter=code>\n123\n</parameter>\n<parameter=n>\n123\n</parameter>\n</function>\n</tool_call>";
  EXPECT_EQ(parse_tool_calls(text, tools).calls[0].arguments.dump(), R"({"code":"123","n":123})");
  EXPECT_EQ(parse_tool_calls(text).calls[0].arguments.dump(), R"({"code":123,"n":123})");
}

TEST(ToolCalls, SeveralXmlCallsAndBareFunctionBlocks) {
  std::string text =
      "<tool_call>\n<function=a>\n<parameter=x>\n1\n</parameter>\n</function>\n</tool_call>\n"
      "<tool_call>\n<function=b>\n</function>\n</tool_call>\n"
      "<function=c>\n<parameter=y>\nnull\n</parameter>\n</function>";
  ToolCallParse r = parse_tool_calls(text);
  ASSERT_EQ(r.calls.size(), 3u);
  EXPECT_EQ(r.calls[0].arguments.dump(), R"({"x":1})");
  EXPECT_EQ(r.calls[1].name, "b");
  EXPECT_EQ(r.calls[1].arguments.dump(), "{}");
  EXPECT_EQ(r.calls[2].arguments.dump(), R"({"y":null})");
}

TEST(ToolCalls, UnterminatedCallAtTheEnd) {
  ToolCallParse r = parse_tool_calls("ok <tool_call>\n<function=f>\n<parameter=p>\nv");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].arguments.dump(), R"({"p":"v"})");
  EXPECT_EQ(r.content, "ok");
}

TEST(ToolCalls, MalformedBlocksStayInContent) {
  std::string text = "before <tool_call>\n{\"name\": broken}\n</tool_call> after";
  ToolCallParse r = parse_tool_calls(text);
  EXPECT_TRUE(r.calls.empty());
  EXPECT_EQ(r.content, text);
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_NE(r.errors[0].find("[tool_calls] offset 7"), std::string::npos) << r.errors[0];
}

TEST(ToolCalls, NoCalls) {
  ToolCallParse r = parse_tool_calls("  plain answer\n");
  EXPECT_TRUE(r.calls.empty());
  EXPECT_EQ(r.content, "  plain answer\n");
  EXPECT_FALSE(has_tool_call_start("plain"));
  EXPECT_TRUE(has_tool_call_start("x <tool_call>"));
}

}  // namespace
}  // namespace mere
