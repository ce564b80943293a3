// `mere.run text chat`: one turn with --prompt, or an interactive multi-turn REPL, through the
// model's own chat template; reasoning (<think>) and tool calls are separated from the content.
#include <cstdio>
#include <iostream>
#include <string>

#include "cli/command.h"
#include "cli/generation_output.h"
#include "cli/sampling_flags.h"
#include "core/error.h"
#include "model/generation_config.h"
#include "runtime/text_generation.h"
#include "text/chat_template.h"
#include "text/reasoning.h"
#include "text/tool_calls.h"

namespace mere::cli {
namespace {

struct ChatSession {
  const Qwen35Model& model;
  const Tokenizer& tok;
  const ChatTemplate& tmpl;
  const GenerationConfig& gc;
  SamplingParams params;
  SpeculationOptions spec;
  ChatRenderOptions render;
  int64_t context;
  bool stream, json, stats;
  Json history = Json::array();

  // Runs one user turn; returns the JSON result (reasoning, content, tool calls, stats).
  Json turn(const std::string& user) {
    Json msg = Json::object();
    msg["role"] = "user";
    msg["content"] = user;
    Json messages = history;
    messages.push_back(msg);
    const std::string prompt = tmpl.render(messages, render);
    EncodeInfo info;
    std::vector<int32_t> ids = tok.encode(prompt, EncodeOptions{}, &info);
    if (info.invalid_utf8)
      std::fprintf(stderr, "warning: the message has %zu invalid UTF-8 sequence(s); each was replaced by U+FFFD\n", info.invalid_utf8);
    const bool in_think = prompt_opens_reasoning(prompt);
    ReasoningStream rs(in_think);
    bool shown_reasoning_header = false;
    auto show = [&](const ReasoningStream::Delta& d) {
      if (!stream || json) return;
      if (!d.reasoning.empty()) {
        if (!shown_reasoning_header) std::fputs("\x1b[2m", stdout);  // dim while thinking
        shown_reasoning_header = true;
        std::fputs(d.reasoning.c_str(), stdout);
      }
      if (!d.content.empty()) {
        if (shown_reasoning_header) {
          std::fputs("\x1b[0m\n", stdout);
          shown_reasoning_header = false;
        }
        std::fputs(d.content.c_str(), stdout);
      }
      std::fflush(stdout);
    };
    TextResult r = generate_text(model, tok, gc.eos_token_ids, ids, params, context,
                                 [&](std::string_view s) { show(rs.push(s)); }, spec);
    show(rs.finish());
    if (shown_reasoning_header) std::fputs("\x1b[0m", stdout);
    ReasoningSplit split = split_reasoning(r.text, in_think);
    ToolCallParse calls = parse_tool_calls(split.content, render.tools);
    Json out = Json::object();
    out["reasoning"] = split.reasoning;
    out["content"] = calls.content;
    Json tc = Json::array();
    for (const auto& c : calls.calls) tc.push_back(Json(Json::Object{{"name", c.name}, {"arguments", c.arguments}}));
    out["tool_calls"] = tc;
    out["finish_reason"] = r.stats.finish_reason;
    out["stats"] = stats_json(r.stats);
    if (json) {
      std::printf("%s\n", out.dump().c_str());
    } else {
      if (!stream) {
        if (split.has_reasoning && !split.reasoning.empty()) std::printf("\x1b[2m%s\x1b[0m\n", split.reasoning.c_str());
        std::fputs(calls.content.c_str(), stdout);
      }
      for (const auto& c : calls.calls) std::printf("\n[tool call] %s %s", c.name.c_str(), c.arguments_json().c_str());
      std::fputs("\n", stdout);
    }
    std::fflush(stdout);
    if (stats) print_stats(r.stats);
    history.push_back(msg);
    Json reply = Json::object();
    reply["role"] = "assistant";
    reply["content"] = calls.content;
    if (split.has_reasoning) reply["reasoning_content"] = split.reasoning;
    history.push_back(reply);
    return out;
  }
};

int run_text_chat(const Args& a) {
  const std::string dir = a.require("model");
  MERE_CHECK(!(a.flag("thinking") && a.flag("no-thinking")), "cli", "--thinking and --no-thinking contradict each other");
  const Tokenizer tok = Tokenizer::from_dir(dir);
  const ChatTemplate tmpl = ChatTemplate::from_model_dir(dir);
  const GenerationConfig gc = GenerationConfig::load(dir);
  auto model = Qwen35Model::load(dir, a.get("backend", "cpu"));
  ChatSession s{*model, tok, tmpl, gc, gc.resolve(sampling_overrides(a)), speculation_options(a), {}, a.get_int("context", model->config().max_position_embeddings),
                a.flag("stream"), a.flag("json"), a.flag("stats")};
  if (a.flag("thinking")) s.render.enable_thinking = true;
  if (a.flag("no-thinking")) s.render.enable_thinking = false;
  if (a.has("system")) {
    Json sys = Json::object();
    sys["role"] = "system";
    sys["content"] = a.get("system");
    s.history.push_back(sys);
  }
  if (a.has("prompt")) {
    MERE_CHECK(!a.get("prompt").empty(), "chat", "empty prompt: give a message with --prompt");
    s.turn(a.get("prompt"));
    return 0;
  }
  std::fprintf(stderr, "mere.run chat — empty line or /exit to quit, /reset to clear the history\n");
  std::string line;
  for (;;) {
    std::fprintf(stderr, "\n> ");
    if (!std::getline(std::cin, line) || line.empty() || line == "/exit") break;
    if (line == "/reset") {
      Json keep = Json::array();
      for (const auto& m : s.history.as_array())
        if (m.at("role").as_string() == "system") keep.push_back(m);
      s.history = keep;
      continue;
    }
    try {
      s.turn(line);
    } catch (const Error& e) {
      std::fprintf(stderr, "error: %s\n", e.what());  // a bad turn does not end the session
    }
  }
  return 0;
}

Command make() {
  Command c{"text chat", "chat through the model's chat template: one turn with --prompt, else an interactive REPL", "",
            {{"model", "DIR", "model directory", ""},
             {"prompt", "TEXT", "a single user message (omit for the interactive REPL)", ""},
             {"system", "TEXT", "system prompt", ""},
             {"thinking", "", "enable_thinking=true", "the template's default"},
             {"no-thinking", "", "enable_thinking=false", ""},
             {"stream", "", "print tokens as they are generated (reasoning dimmed)", ""},
             {"stats", "", "report prompt tokens, prefill/decode tok/s and time to first token on stderr", ""},
             {"json", "", "print one JSON document per turn", ""}},
            run_text_chat};
  for (auto& f : sampling_flags()) c.flags.push_back(f);
  return c;
}
MERE_COMMAND(make());

}  // namespace
}  // namespace mere::cli
