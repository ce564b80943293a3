// Parsing tool calls out of generated text: Qwen's JSON form
// `<tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>` and the Qwen3-Coder / Qwen3.5 XML
// form `<tool_call>\n<function=NAME>\n<parameter=ARG>\nVALUE\n</parameter>\n</function>\n</tool_call>`.
// Returns the calls and the text without them.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "core/json.h"

namespace mere {

struct ToolCall {
  std::string name;
  Json arguments = Json::object();  // normally an object
  std::string arguments_json() const;  // compact JSON (what OpenAI's `arguments` string carries)
};

struct ToolCallParse {
  std::string content;          // text outside the recognised calls, whitespace-trimmed when calls were found
  std::vector<ToolCall> calls;  // in order of appearance
  std::vector<std::string> errors;  // blocks that looked like calls but did not parse (kept in content)
};

// tools (optional JSON array of {type, function: {name, parameters}}): XML parameter values whose
// schema type is "string" stay strings; other values are parsed as JSON when they parse, else kept
// as strings. An unterminated last <tool_call> (generation cut short) is parsed up to the end.
ToolCallParse parse_tool_calls(std::string_view text, const Json& tools = Json());

// True when text contains the start of a tool call (useful to hold back streamed content).
bool has_tool_call_start(std::string_view text);

}  // namespace mere
