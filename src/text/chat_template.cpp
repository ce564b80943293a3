// mere::ChatTemplate (see chat_template.h): locating the template in a model directory, picking a
// named template, validating messages and building the render context transformers would build.
#include "text/chat_template.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "text/jinja.h"

namespace mere {
namespace {

constexpr const char* kWhere = "chat_template";

std::string read_text(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  if (!f) fail(kWhere, cat(p.string(), ": cannot open file"));
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// tokenizer_config.json stores special tokens as strings or AddedToken objects {"content": ...}.
Json special_tokens_from_config(const Json& config) {
  Json out = Json::object();
  for (const char* key : {"bos_token", "eos_token", "unk_token", "pad_token"}) {
    const Json* v = config.find(key);
    if (!v) continue;
    if (v->is_string()) out[key] = *v;
    else if (v->is_object() && v->contains("content") && v->at("content").is_string()) out[key] = v->at("content");
  }
  return out;
}

}  // namespace

Json normalize_chat_messages(const Json& messages, bool parse_tool_arguments) {
  if (!messages.is_array())
    fail(kWhere, cat("messages: expected a JSON array, got ", Json::type_name(messages.type())));
  Json out = messages;
  for (size_t i = 0; i < out.size(); ++i) {
    Json& m = out.as_array()[i];
    std::string where = cat("messages[", i, "]");
    if (!m.is_object()) fail(kWhere, cat(where, ": expected an object, got ", Json::type_name(m.type())));
    const Json* role = m.find("role");
    if (!role || !role->is_string())
      fail(kWhere, cat(where, ".role: expected a string, got ", role ? Json::type_name(role->type()) : "nothing"));
    if (const Json* c = m.find("content"); c && !c->is_string() && !c->is_null() && !c->is_array())
      fail(kWhere, cat(where, ".content: expected a string, null or a list of parts, got ", Json::type_name(c->type())));
    Json* calls = m.find("tool_calls");
    if (!calls || calls->is_null()) continue;
    if (!calls->is_array())
      fail(kWhere, cat(where, ".tool_calls: expected an array, got ", Json::type_name(calls->type())));
    for (size_t k = 0; k < calls->size(); ++k) {
      Json& call = calls->as_array()[k];
      std::string cw = cat(where, ".tool_calls[", k, "]");
      if (!call.is_object()) fail(kWhere, cat(cw, ": expected an object, got ", Json::type_name(call.type())));
      Json* fn = call.find("function");
      Json* target = (fn && fn->is_object()) ? fn : &call;
      const Json* name = target->find("name");
      if (!name || !name->is_string()) fail(kWhere, cat(cw, ".function.name: expected a string"));
      Json* args = target->find("arguments");
      if (parse_tool_arguments && args && args->is_string()) {
        Json parsed;
        try {
          parsed = Json::parse(args->as_string(), cw + ".function.arguments");
        } catch (const Error&) {
          continue;  // not JSON: the template gets the string as sent
        }
        if (parsed.is_object()) *args = std::move(parsed);
      }
    }
  }
  return out;
}

ChatTemplate ChatTemplate::from_source(const std::string& source, Json special_tokens, const std::string& name) {
  ChatTemplate t;
  t.templates_.push_back(Named{"default", source, std::make_shared<jinja::Template>(source, name)});
  t.special_tokens_ = std::move(special_tokens);
  return t;
}

ChatTemplate ChatTemplate::from_model_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  fs::path root(dir);
  if (!fs::is_directory(root)) fail(kWhere, cat(dir, ": expected a model directory"));
  ChatTemplate t;
  Json config = Json::object();
  fs::path config_path = root / "tokenizer_config.json";
  if (fs::exists(config_path)) {
    config = Json::parse_file(config_path.string());
    if (!config.is_object()) fail(kWhere, cat(config_path.string(), ": expected a JSON object"));
    t.special_tokens_ = special_tokens_from_config(config);
  }
  auto add = [&](const std::string& name, const std::string& source, const std::string& origin) {
    t.templates_.push_back(Named{name, source, std::make_shared<jinja::Template>(source, origin)});
  };
  fs::path jinja_path = root / "chat_template.jinja";
  if (fs::exists(jinja_path)) {
    add("default", read_text(jinja_path), jinja_path.string());
    return t;
  }
  const Json* ct = config.find("chat_template");
  if (!ct || ct->is_null()) {
    fs::path processor = root / "chat_template.json";
    if (fs::exists(processor)) {
      Json p = Json::parse_file(processor.string());
      if (p.is_object() && p.contains("chat_template") && p.at("chat_template").is_string()) {
        add("default", p.at("chat_template").as_string(), processor.string());
        return t;
      }
    }
    fail(kWhere, cat(dir, ": no chat template: expected chat_template.jinja, a chat_template in "
                          "tokenizer_config.json or chat_template.json"));
  }
  std::string origin = config_path.string() + " chat_template";
  if (ct->is_string()) {
    add("default", ct->as_string(), origin);
  } else if (ct->is_array()) {
    for (size_t i = 0; i < ct->size(); ++i) {
      const Json& e = ct->at(i);
      if (!e.is_object() || !e.contains("name") || !e.contains("template") || !e.at("name").is_string() ||
          !e.at("template").is_string())
        fail(kWhere, cat(origin, "[", i, "]: expected {\"name\": string, \"template\": string}"));
      add(e.at("name").as_string(), e.at("template").as_string(), cat(origin, "[", e.at("name").as_string(), "]"));
    }
    if (t.templates_.empty()) fail(kWhere, cat(origin, ": expected at least one template, got an empty list"));
  } else {
    fail(kWhere, cat(origin, ": expected a string or a list of {name, template}, got ", Json::type_name(ct->type())));
  }
  return t;
}

std::vector<std::string> ChatTemplate::template_names() const {
  std::vector<std::string> out;
  for (const auto& n : templates_) out.push_back(n.name);
  return out;
}

const ChatTemplate::Named& ChatTemplate::pick(const ChatRenderOptions& opt) const {
  MERE_CHECK(!templates_.empty(), kWhere, "no template loaded");
  auto find = [&](const std::string& name) -> const Named* {
    for (const auto& n : templates_)
      if (n.name == name) return &n;
    return nullptr;
  };
  if (!opt.template_name.empty()) {
    if (const Named* n = find(opt.template_name)) return *n;
    fail(kWhere, cat("no template named \"", opt.template_name, "\""));
  }
  if (templates_.size() == 1) return templates_[0];
  bool has_tools = opt.tools.is_array() && opt.tools.size() > 0;
  if (has_tools)
    if (const Named* n = find("tool_use")) return *n;
  if (const Named* n = find("default")) return *n;
  fail(kWhere, "several named templates but none called \"default\": pass a template name");
}

const std::string& ChatTemplate::source(const std::string& template_name) const {
  ChatRenderOptions opt;
  opt.template_name = template_name;
  return pick(opt).source;
}

std::string ChatTemplate::render(const Json& messages, const ChatRenderOptions& opt) const {
  const Named& t = pick(opt);
  if (!opt.tools.is_null() && !opt.tools.is_array())
    fail(kWhere, cat("tools: expected a JSON array, got ", Json::type_name(opt.tools.type())));
  if (!opt.extra.is_object()) fail(kWhere, cat("extra: expected a JSON object, got ", Json::type_name(opt.extra.type())));
  Json ctx = Json::object();
  for (const auto& [k, v] : special_tokens_.as_object()) ctx[k] = v;
  ctx["messages"] = normalize_chat_messages(messages, opt.parse_tool_arguments);
  ctx["tools"] = opt.tools;
  ctx["documents"] = nullptr;
  ctx["add_generation_prompt"] = opt.add_generation_prompt;
  if (opt.enable_thinking) ctx["enable_thinking"] = *opt.enable_thinking;
  for (const auto& [k, v] : opt.extra.as_object()) ctx[k] = v;
  return t.tmpl->render(ctx);
}

}  // namespace mere
