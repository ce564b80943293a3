// `mere.run text render-chat`: renders a conversation with the model's chat template and prints the
// prompt exactly (no newline added). --batch renders many requests (JSON lines) in one process;
// the chat-template reference test uses it to compare against @huggingface/jinja quickly.
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>

#include "cli/command.h"
#include "core/error.h"
#include "core/json.h"
#include "text/chat_template.h"

namespace mere::cli {
namespace {

constexpr const char* kWhere = "render-chat";

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) fail(kWhere, cat(path, ": cannot open file"));
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

ChatTemplate load_template(const Args& a) {
  if (a.has("template")) {
    Json special = Json::object();
    if (a.has("model")) special = ChatTemplate::from_model_dir(a.get("model")).special_tokens();
    return ChatTemplate::from_source(read_file(a.get("template")), special, a.get("template"));
  }
  if (!a.has("model")) fail(kWhere, "missing required flag --model (or --template)");
  return ChatTemplate::from_model_dir(a.get("model"));
}

// One request of a --batch file: {"messages", "tools"?, "add_generation_prompt"?, "enable_thinking"?,
// "kwargs"?, "template_name"?}.
std::string render_request(const ChatTemplate& t, const Json& req, bool parse_tool_arguments) {
  if (!req.is_object()) fail(kWhere, "batch request: expected a JSON object");
  ChatRenderOptions opt;
  opt.parse_tool_arguments = parse_tool_arguments;
  if (const Json* tools = req.find("tools")) opt.tools = *tools;
  opt.add_generation_prompt = req.get_bool("add_generation_prompt", true);
  if (const Json* th = req.find("enable_thinking"); th && !th->is_null()) opt.enable_thinking = th->as_bool();
  if (const Json* kw = req.find("kwargs")) opt.extra = *kw;
  opt.template_name = req.get_string("template_name", "");
  const Json* messages = req.find("messages");
  if (!messages) fail(kWhere, "batch request: missing \"messages\"");
  return t.render(*messages, opt);
}

int run_batch(const ChatTemplate& t, const Args& a) {
  std::string text = read_file(a.get("batch"));
  std::istringstream lines(text);
  std::string line, out;
  size_t n = 0;
  while (std::getline(lines, line)) {
    ++n;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    Json result = Json::object();
    try {
      Json req = Json::parse(line, cat(a.get("batch"), " line ", n));
      result["prompt"] = render_request(t, req, a.flag("parse-tool-arguments"));
    } catch (const Error& e) {
      result["error"] = std::string(e.what());
    }
    out += result.dump();
    out.push_back('\n');
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}

int run_render_chat(const Args& a) {
  ChatTemplate t = load_template(a);
  if (a.has("batch")) return run_batch(t, a);
  Json messages = Json::parse_file(a.require("messages-file"));
  ChatRenderOptions opt;
  if (messages.is_object()) {  // {"messages": [...], "tools": [...]} is accepted too
    if (const Json* tools = messages.find("tools")) opt.tools = *tools;
    if (!messages.contains("messages")) fail(kWhere, "--messages-file: expected an array or {\"messages\": [...]}");
    messages = Json(messages.at("messages"));
  }
  if (a.has("tools-file")) opt.tools = Json::parse_file(a.get("tools-file"));
  if (a.has("kwargs-file")) opt.extra = Json::parse_file(a.get("kwargs-file"));
  if (a.flag("no-thinking") && a.flag("thinking")) fail(kWhere, "--thinking and --no-thinking exclude each other");
  if (a.flag("no-thinking")) opt.enable_thinking = false;
  if (a.flag("thinking")) opt.enable_thinking = true;
  opt.add_generation_prompt = !a.flag("no-generation-prompt");
  opt.parse_tool_arguments = a.flag("parse-tool-arguments");
  opt.template_name = a.get("template-name", "");
  std::string prompt = t.render(messages, opt);
  std::fwrite(prompt.data(), 1, prompt.size(), stdout);
  return 0;
}

}  // namespace

MERE_COMMAND(Command{
    "text render-chat",
    "render a conversation with the model's chat template and print the prompt",
    "The prompt is printed exactly as rendered, with no newline added. enable_thinking is left\n"
    "undefined unless --thinking/--no-thinking is given; tools is none without --tools-file.\n"
    "--batch FILE renders one request per line ({\"messages\", \"tools\"?, \"add_generation_prompt\"?,\n"
    "\"enable_thinking\"?, \"kwargs\"?, \"template_name\"?}) and prints one JSON line per request:\n"
    "{\"prompt\": ...} or {\"error\": ...}.",
    {
        {"model", "DIR", "model directory (chat_template.jinja or tokenizer_config.json)", ""},
        {"template", "FILE", "use this Jinja template instead of the model's (special tokens still from --model)", ""},
        {"template-name", "NAME", "named template to use (tokenizer_config.json list form)", ""},
        {"messages-file", "FILE", "JSON array of messages (or {\"messages\": [...], \"tools\": [...]})", ""},
        {"tools-file", "FILE", "JSON array of tool definitions", ""},
        {"kwargs-file", "FILE", "JSON object of extra template variables", ""},
        {"no-thinking", "", "set enable_thinking=false", ""},
        {"thinking", "", "set enable_thinking=true", ""},
        {"no-generation-prompt", "", "do not append the assistant generation prompt", ""},
        {"parse-tool-arguments", "", "parse tool-call arguments given as JSON strings into objects", ""},
        {"batch", "FILE", "render every request of a JSON-lines file, print JSON lines", ""},
    },
    run_render_chat,
});

}  // namespace mere::cli
