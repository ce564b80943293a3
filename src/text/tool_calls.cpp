// Tool-call extraction from generated text (see tool_calls.h). Blocks are located by their tags;
// a block that does not parse is kept verbatim in the content and reported in `errors`.
#include "text/tool_calls.h"

#include "core/error.h"

namespace mere {
namespace {

constexpr std::string_view kOpen = "<tool_call>";
constexpr std::string_view kClose = "</tool_call>";
constexpr std::string_view kFunction = "<function=";
constexpr std::string_view kFunctionEnd = "</function>";
constexpr std::string_view kParam = "<parameter=";
constexpr std::string_view kParamEnd = "</parameter>";

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

// JSON-schema type of a tool's parameter, or "" when unknown.
std::string param_type(const Json& tools, std::string_view function, std::string_view param) {
  if (!tools.is_array()) return "";
  for (const Json& t : tools.as_array()) {
    const Json* fn = t.find("function");
    const Json& f = (fn && fn->is_object()) ? *fn : t;
    const Json* name = f.find("name");
    if (!name || !name->is_string() || name->as_string() != function) continue;
    const Json* params = f.find("parameters");
    const Json* props = params ? params->find("properties") : nullptr;
    const Json* p = props ? props->find(param) : nullptr;
    const Json* type = p ? p->find("type") : nullptr;
    if (type && type->is_string()) return type->as_string();
    return "";
  }
  return "";
}

Json convert_value(std::string_view raw, const std::string& type) {
  if (type == "string") return Json(std::string(raw));
  try {
    return Json::parse(raw, "parameter");
  } catch (const Error&) {
    return Json(std::string(raw));
  }
}

// One or more <function=NAME>...</function> blocks.
bool parse_xml(std::string_view s, const Json& tools, std::vector<ToolCall>& out, std::string& err) {
  size_t p = 0;
  bool any = false;
  while (true) {
    size_t f = s.find(kFunction, p);
    if (f == std::string_view::npos) break;
    size_t gt = s.find('>', f);
    if (gt == std::string_view::npos) {
      err = "unterminated <function= tag";
      return false;
    }
    ToolCall call;
    call.name = std::string(trim(s.substr(f + kFunction.size(), gt - f - kFunction.size())));
    if (call.name.empty()) {
      err = "empty function name";
      return false;
    }
    size_t fend = s.find(kFunctionEnd, gt);
    std::string_view body = s.substr(gt + 1, (fend == std::string_view::npos ? s.size() : fend) - gt - 1);
    size_t q = 0;
    while (true) {
      size_t ps = body.find(kParam, q);
      if (ps == std::string_view::npos) break;
      size_t pgt = body.find('>', ps);
      if (pgt == std::string_view::npos) {
        err = "unterminated <parameter= tag";
        return false;
      }
      std::string pname(trim(body.substr(ps + kParam.size(), pgt - ps - kParam.size())));
      size_t vend = body.find(kParamEnd, pgt);
      size_t next = vend == std::string_view::npos ? std::string_view::npos : vend + kParamEnd.size();
      if (vend == std::string_view::npos) {  // missing </parameter>: up to the next parameter
        vend = std::min(body.find(kParam, pgt), body.size());
        next = vend;
      }
      std::string_view value = body.substr(pgt + 1, vend - pgt - 1);
      if (!value.empty() && value.front() == '\n') value.remove_prefix(1);
      if (!value.empty() && value.back() == '\n') value.remove_suffix(1);
      call.arguments[pname] = convert_value(value, param_type(tools, call.name, pname));
      q = next;
    }
    out.push_back(std::move(call));
    any = true;
    p = fend == std::string_view::npos ? s.size() : fend + kFunctionEnd.size();
  }
  if (!any) err = "no <function=...> in tool call";
  return any;
}

bool parse_json_call(std::string_view s, std::vector<ToolCall>& out, std::string& err) {
  Json j;
  try {
    j = Json::parse(s, "tool_call");
  } catch (const Error& e) {
    err = e.what();
    return false;
  }
  if (!j.is_object() || !j.contains("name") || !j.at("name").is_string()) {
    err = "tool call JSON: expected an object with a string \"name\"";
    return false;
  }
  ToolCall call;
  call.name = j.at("name").as_string();
  const Json* args = j.find("arguments");
  if (!args) args = j.find("parameters");
  if (args && args->is_string()) {
    try {
      call.arguments = Json::parse(args->as_string(), "tool_call.arguments");
    } catch (const Error&) {
      call.arguments = *args;
    }
  } else if (args && !args->is_null()) {
    call.arguments = *args;
  }
  out.push_back(std::move(call));
  return true;
}

}  // namespace

std::string ToolCall::arguments_json() const { return arguments.dump(); }

bool has_tool_call_start(std::string_view text) {
  return text.find(kOpen) != std::string_view::npos || text.find(kFunction) != std::string_view::npos;
}

ToolCallParse parse_tool_calls(std::string_view text, const Json& tools) {
  ToolCallParse r;
  std::string content;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t a = text.find(kOpen, pos), b = text.find(kFunction, pos);
    size_t open = std::min(a, b);
    if (open == std::string_view::npos) break;
    content.append(text.substr(pos, open - pos));
    size_t next;
    std::vector<ToolCall> calls;
    std::string err;
    bool ok;
    if (open == a) {
      size_t close = text.find(kClose, open + kOpen.size());
      size_t body_end = close == std::string_view::npos ? text.size() : close;
      next = close == std::string_view::npos ? text.size() : close + kClose.size();
      std::string_view body = trim(text.substr(open + kOpen.size(), body_end - open - kOpen.size()));
      if (!body.empty() && body.front() == '{') ok = parse_json_call(body, calls, err);
      else ok = parse_xml(body, tools, calls, err);
    } else {  // a bare <function=...> block without <tool_call>
      size_t close = text.find(kFunctionEnd, open);
      next = close == std::string_view::npos ? text.size() : close + kFunctionEnd.size();
      ok = parse_xml(text.substr(open, next - open), tools, calls, err);
    }
    if (ok) {
      for (auto& c : calls) r.calls.push_back(std::move(c));
    } else {
      r.errors.push_back(cat("[tool_calls] offset ", open, ": ", err));
      content.append(text.substr(open, next - open));
    }
    pos = next;
  }
  if (pos < text.size()) content.append(text.substr(pos));
  r.content = r.calls.empty() ? content : std::string(trim(content));
  return r;
}

}  // namespace mere
