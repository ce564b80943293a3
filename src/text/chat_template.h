// mere::ChatTemplate: a model's Jinja chat template (chat_template.jinja, or tokenizer_config.json's
// `chat_template` string / named list, or chat_template.json) rendered the way transformers'
// apply_chat_template calls it: messages, tools, documents, add_generation_prompt,
// enable_thinking, the special-token strings and any extra keyword arguments.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/json.h"

namespace mere {

namespace jinja {
class Template;
}

struct ChatRenderOptions {
  Json tools;                           // JSON array of tool definitions; null: template sees tools = none
  bool add_generation_prompt = true;
  std::optional<bool> enable_thinking;  // nullopt: the variable is left undefined (template default)
  Json extra = Json::object();          // more template variables (documents, add_vision_id, ...)
  // Replace tool_calls[].function.arguments given as JSON strings (the OpenAI wire form) by the
  // parsed object before rendering. Templates that iterate arguments|items need objects.
  bool parse_tool_arguments = false;
  std::string template_name;  // pick a named template; empty: "tool_use" when tools are given, else "default"
};

class ChatTemplate {
 public:
  // Throws mere::Error when the directory has no chat template or the template does not parse.
  static ChatTemplate from_model_dir(const std::string& dir);
  // A single template; special_tokens maps names (bos_token, eos_token, ...) to strings.
  static ChatTemplate from_source(const std::string& source, Json special_tokens = Json::object(),
                                  const std::string& name = "chat_template");

  // messages: JSON array of {role, content (string, null or list of parts), reasoning_content?,
  // tool_calls?, ...}. Throws mere::Error on malformed messages or template errors.
  std::string render(const Json& messages, const ChatRenderOptions& opt = {}) const;

  const Json& special_tokens() const { return special_tokens_; }
  std::vector<std::string> template_names() const;
  const std::string& source(const std::string& template_name = "") const;

 private:
  struct Named {
    std::string name;
    std::string source;
    std::shared_ptr<const jinja::Template> tmpl;
  };
  std::vector<Named> templates_;
  Json special_tokens_ = Json::object();
  const Named& pick(const ChatRenderOptions& opt) const;
};

// Checks the shape of a messages array and returns it with tool-call arguments parsed when asked.
Json normalize_chat_messages(const Json& messages, bool parse_tool_arguments);

}  // namespace mere
