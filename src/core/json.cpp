// JSON parser/serialiser implementation: recursive descent with a depth bound, UTF-8 validation of
// \u escapes (surrogate pairs), numbers kept as int64 when written as integers.
#include "core/json.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "core/error.h"

namespace mere {

const char* Json::type_name(Type t) {
  switch (t) {
    case Type::Null: return "null";
    case Type::Bool: return "bool";
    case Type::Number: return "number";
    case Type::String: return "string";
    case Type::Array: return "array";
    case Type::Object: return "object";
  }
  return "?";
}

namespace {
[[noreturn]] void type_error(Json::Type want, Json::Type got) {
  fail("json", cat("wrong type: expected ", Json::type_name(want), ", got ", Json::type_name(got)));
}
}  // namespace

bool Json::as_bool() const {
  if (type_ != Type::Bool) type_error(Type::Bool, type_);
  return b_;
}
double Json::as_number() const {
  if (type_ != Type::Number) type_error(Type::Number, type_);
  return d_;
}
int64_t Json::as_int() const {
  if (type_ != Type::Number) type_error(Type::Number, type_);
  if (is_int_) return i_;
  if (!std::isfinite(d_) || d_ != std::floor(d_) || std::fabs(d_) > 9.007199254740992e15)
    fail("json", cat("expected an integer, got ", d_));
  return static_cast<int64_t>(d_);
}
const std::string& Json::as_string() const {
  if (type_ != Type::String) type_error(Type::String, type_);
  return s_;
}
const Json::Array& Json::as_array() const {
  if (type_ != Type::Array) type_error(Type::Array, type_);
  return a_;
}
Json::Array& Json::as_array() {
  if (type_ != Type::Array) type_error(Type::Array, type_);
  return a_;
}
const Json::Object& Json::as_object() const {
  if (type_ != Type::Object) type_error(Type::Object, type_);
  return o_;
}
Json::Object& Json::as_object() {
  if (type_ != Type::Object) type_error(Type::Object, type_);
  return o_;
}

// Duplicate keys: the last one wins, as in Python's json module.
const Json* Json::find(std::string_view key) const {
  if (type_ != Type::Object) return nullptr;
  for (auto it = o_.rbegin(); it != o_.rend(); ++it)
    if (it->first == key) return &it->second;
  return nullptr;
}
Json* Json::find(std::string_view key) {
  if (type_ != Type::Object) return nullptr;
  for (auto it = o_.rbegin(); it != o_.rend(); ++it)
    if (it->first == key) return &it->second;
  return nullptr;
}
const Json& Json::at(std::string_view key) const {
  const Json* v = find(key);
  if (!v) {
    if (type_ != Type::Object) type_error(Type::Object, type_);
    fail("json", cat("missing key \"", key, "\""));
  }
  return *v;
}
const Json& Json::at(size_t index) const {
  const Array& a = as_array();
  if (index >= a.size()) fail("json", cat("index ", index, " out of range (size ", a.size(), ")"));
  return a[index];
}
Json& Json::operator[](std::string_view key) {
  if (type_ == Type::Null) type_ = Type::Object;
  if (type_ != Type::Object) type_error(Type::Object, type_);
  for (auto& kv : o_)
    if (kv.first == key) return kv.second;
  o_.emplace_back(std::string(key), Json());
  return o_.back().second;
}
void Json::push_back(Json v) {
  if (type_ == Type::Null) type_ = Type::Array;
  if (type_ != Type::Array) type_error(Type::Array, type_);
  a_.push_back(std::move(v));
}
size_t Json::size() const {
  switch (type_) {
    case Type::Array: return a_.size();
    case Type::Object: return o_.size();
    case Type::String: return s_.size();
    default: return 0;
  }
}

int64_t Json::get_int(std::string_view key, int64_t def) const {
  const Json* v = find(key);
  if (!v || v->is_null()) return def;
  try {
    return v->as_int();
  } catch (const Error& e) {
    fail("json", cat("key \"", key, "\": ", e.what()));
  }
}
double Json::get_number(std::string_view key, double def) const {
  const Json* v = find(key);
  if (!v || v->is_null()) return def;
  if (!v->is_number()) fail("json", cat("key \"", key, "\": expected number, got ", type_name(v->type())));
  return v->as_number();
}
bool Json::get_bool(std::string_view key, bool def) const {
  const Json* v = find(key);
  if (!v || v->is_null()) return def;
  if (!v->is_bool()) fail("json", cat("key \"", key, "\": expected bool, got ", type_name(v->type())));
  return v->as_bool();
}
std::string Json::get_string(std::string_view key, const std::string& def) const {
  const Json* v = find(key);
  if (!v || v->is_null()) return def;
  if (!v->is_string()) fail("json", cat("key \"", key, "\": expected string, got ", type_name(v->type())));
  return v->as_string();
}

bool Json::operator==(const Json& o) const {
  if (type_ != o.type_) return false;
  switch (type_) {
    case Type::Null: return true;
    case Type::Bool: return b_ == o.b_;
    case Type::Number: return (is_int_ && o.is_int_) ? i_ == o.i_ : d_ == o.d_;
    case Type::String: return s_ == o.s_;
    case Type::Array: return a_ == o.a_;
    case Type::Object: return o_ == o.o_;
  }
  return false;
}

// ---------------------------------------------------------------- serialiser
void json_escape(std::string& out, std::string_view s, bool ensure_ascii) {
  out.push_back('"');
  for (size_t i = 0; i < s.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    switch (c) {
      case '"': out += "\\\""; continue;
      case '\\': out += "\\\\"; continue;
      case '\n': out += "\\n"; continue;
      case '\r': out += "\\r"; continue;
      case '\t': out += "\\t"; continue;
      case '\b': out += "\\b"; continue;
      case '\f': out += "\\f"; continue;
      default: break;
    }
    if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
      continue;
    }
    if (c < 0x80 || !ensure_ascii) {
      out.push_back(static_cast<char>(c));
      continue;
    }
    // Decode one UTF-8 sequence; invalid bytes become U+FFFD.
    uint32_t cp = 0xFFFD;
    size_t len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    if (len > 1 && i + len <= s.size()) {
      cp = c & (0xFF >> (len + 1));
      bool ok = true;
      for (size_t k = 1; k < len; ++k) {
        unsigned char cc = static_cast<unsigned char>(s[i + k]);
        if ((cc & 0xC0) != 0x80) ok = false;
        cp = (cp << 6) | (cc & 0x3F);
      }
      if (ok) i += len - 1;
      else cp = 0xFFFD;
    }
    char buf[16];
    if (cp >= 0x10000) {
      uint32_t v = cp - 0x10000;
      std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x", 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF));
    } else {
      std::snprintf(buf, sizeof buf, "\\u%04x", cp);
    }
    out += buf;
  }
  out.push_back('"');
}

namespace {
void format_double(std::string& out, double d) {
  if (!std::isfinite(d)) {  // JSON has no NaN/Infinity; Python writes these names, so do we
    out += std::isnan(d) ? "NaN" : (d > 0 ? "Infinity" : "-Infinity");
    return;
  }
  if (d == std::floor(d) && std::fabs(d) < 1e16) {  // integral doubles print like Python floats: 1.0
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.1f", d);
    out += buf;
    return;
  }
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, d);  // shortest round-trip form
  out.append(buf, r.ptr);
}

void dump_impl(const Json& v, std::string& out, const JsonDumpOptions& opt, int level) {
  auto newline = [&](int lvl) {
    if (opt.indent < 0) return;
    out.push_back('\n');
    out.append(static_cast<size_t>(lvl * opt.indent), ' ');
  };
  switch (v.type()) {
    case Json::Type::Null: out += "null"; break;
    case Json::Type::Bool: out += v.as_bool() ? "true" : "false"; break;
    case Json::Type::Number:
      if (v.is_integer()) out += std::to_string(v.as_int());
      else format_double(out, v.as_number());
      break;
    case Json::Type::String: json_escape(out, v.as_string(), opt.ensure_ascii); break;
    case Json::Type::Array: {
      const auto& a = v.as_array();
      out.push_back('[');
      for (size_t i = 0; i < a.size(); ++i) {
        if (i) out += opt.indent >= 0 ? "," : opt.item_sep;
        newline(level + 1);
        dump_impl(a[i], out, opt, level + 1);
      }
      if (!a.empty()) newline(level);
      out.push_back(']');
      break;
    }
    case Json::Type::Object: {
      const auto& o = v.as_object();
      std::vector<const std::pair<std::string, Json>*> items;
      items.reserve(o.size());
      for (const auto& kv : o) items.push_back(&kv);
      if (opt.sort_keys)
        std::stable_sort(items.begin(), items.end(), [](auto* a, auto* b) { return a->first < b->first; });
      out.push_back('{');
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) out += opt.indent >= 0 ? "," : opt.item_sep;
        newline(level + 1);
        json_escape(out, items[i]->first, opt.ensure_ascii);
        out += (opt.indent >= 0 && opt.key_sep == ":") ? ": " : opt.key_sep;  // Python's indent default
        dump_impl(items[i]->second, out, opt, level + 1);
      }
      if (!items.empty()) newline(level);
      out.push_back('}');
      break;
    }
  }
}

// ---------------------------------------------------------------- parser
class Parser {
 public:
  Parser(std::string_view text, std::string_view source, int max_depth)
      : t_(text), src_(source), max_depth_(max_depth) {}

  Json parse_document() {
    skip_ws();
    Json v = value(0);
    skip_ws();
    if (p_ != t_.size()) error("unexpected trailing characters");
    return v;
  }

 private:
  std::string_view t_;
  std::string_view src_;
  int max_depth_;
  size_t p_ = 0;

  [[noreturn]] void error(std::string_view what) const {
    size_t line = 1, col = 1;
    for (size_t i = 0; i < p_ && i < t_.size(); ++i) {
      if (t_[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    throw Error(cat("[", src_, ":", line, ":", col, "] malformed JSON: ", what));
  }
  void skip_ws() {
    while (p_ < t_.size() && (t_[p_] == ' ' || t_[p_] == '\n' || t_[p_] == '\r' || t_[p_] == '\t')) ++p_;
  }
  char peek() const { return p_ < t_.size() ? t_[p_] : '\0'; }
  void expect_literal(std::string_view lit) {
    if (t_.substr(p_, lit.size()) != lit) error(cat("expected '", lit, "'"));
    p_ += lit.size();
  }

  Json value(int depth) {
    if (depth > max_depth_) error(cat("nesting deeper than ", max_depth_));
    if (p_ >= t_.size()) error("unexpected end of input");
    char c = t_[p_];
    switch (c) {
      case '{': return object(depth);
      case '[': return array(depth);
      case '"': return Json(string());
      case 't': expect_literal("true"); return Json(true);
      case 'f': expect_literal("false"); return Json(false);
      case 'n': expect_literal("null"); return Json();
      case 'N': expect_literal("NaN"); return Json(std::nan(""));
      case 'I': expect_literal("Infinity"); return Json(HUGE_VAL);
      default:
        if (c == '-' || (c >= '0' && c <= '9')) return number();
        error(cat("unexpected character '", c, "'"));
    }
  }

  Json object(int depth) {
    ++p_;  // {
    Json out = Json::object();
    auto& o = out.as_object();
    skip_ws();
    if (peek() == '}') {
      ++p_;
      return out;
    }
    for (;;) {
      skip_ws();
      if (peek() != '"') error("expected a string key");
      std::string key = string();
      skip_ws();
      if (peek() != ':') error("expected ':' after key");
      ++p_;
      skip_ws();
      o.emplace_back(std::move(key), value(depth + 1));
      skip_ws();
      if (peek() == ',') {
        ++p_;
        continue;
      }
      if (peek() == '}') {
        ++p_;
        return out;
      }
      error("expected ',' or '}' in object");
    }
  }

  Json array(int depth) {
    ++p_;  // [
    Json out = Json::array();
    auto& a = out.as_array();
    skip_ws();
    if (peek() == ']') {
      ++p_;
      return out;
    }
    for (;;) {
      skip_ws();
      a.push_back(value(depth + 1));
      skip_ws();
      if (peek() == ',') {
        ++p_;
        continue;
      }
      if (peek() == ']') {
        ++p_;
        return out;
      }
      error("expected ',' or ']' in array");
    }
  }

  uint32_t hex4() {
    if (p_ + 4 > t_.size()) error("truncated \\u escape");
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      char c = t_[p_++];
      v <<= 4;
      if (c >= '0' && c <= '9') v |= static_cast<uint32_t>(c - '0');
      else if (c >= 'a' && c <= 'f') v |= static_cast<uint32_t>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F') v |= static_cast<uint32_t>(c - 'A' + 10);
      else error("bad hex digit in \\u escape");
    }
    return v;
  }

  static void append_utf8(std::string& s, uint32_t cp) {
    if (cp < 0x80) {
      s.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      s.push_back(static_cast<char>(0xC0 | (cp >> 6)));
      s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
      s.push_back(static_cast<char>(0xE0 | (cp >> 12)));
      s.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
      s.push_back(static_cast<char>(0xF0 | (cp >> 18)));
      s.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
      s.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
  }

  std::string string() {
    ++p_;  // opening quote
    std::string s;
    for (;;) {
      if (p_ >= t_.size()) error("unterminated string");
      size_t start = p_;
      while (p_ < t_.size() && t_[p_] != '"' && t_[p_] != '\\' && static_cast<unsigned char>(t_[p_]) >= 0x20) ++p_;
      s.append(t_.data() + start, p_ - start);
      if (p_ >= t_.size()) error("unterminated string");
      char c = t_[p_];
      if (c == '"') {
        ++p_;
        return s;
      }
      if (static_cast<unsigned char>(c) < 0x20) error("control character in string");
      ++p_;  // backslash
      if (p_ >= t_.size()) error("unterminated escape");
      char e = t_[p_++];
      switch (e) {
        case '"': s.push_back('"'); break;
        case '\\': s.push_back('\\'); break;
        case '/': s.push_back('/'); break;
        case 'b': s.push_back('\b'); break;
        case 'f': s.push_back('\f'); break;
        case 'n': s.push_back('\n'); break;
        case 'r': s.push_back('\r'); break;
        case 't': s.push_back('\t'); break;
        case 'u': {
          uint32_t cp = hex4();
          if (cp >= 0xD800 && cp < 0xDC00) {
            if (p_ + 6 <= t_.size() && t_[p_] == '\\' && t_[p_ + 1] == 'u') {
              p_ += 2;
              uint32_t lo = hex4();
              if (lo >= 0xDC00 && lo < 0xE000) cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
              else {
                append_utf8(s, 0xFFFD);
                cp = lo;
              }
            } else {
              cp = 0xFFFD;
            }
          } else if (cp >= 0xDC00 && cp < 0xE000) {
            cp = 0xFFFD;
          }
          append_utf8(s, cp);
          break;
        }
        default: error(cat("bad escape '\\", e, "'"));
      }
    }
  }

  Json number() {
    size_t start = p_;
    bool integral = true;
    if (peek() == '-') ++p_;
    if (peek() == 'I') {
      expect_literal("Infinity");
      return Json(-HUGE_VAL);
    }
    if (!(peek() >= '0' && peek() <= '9')) error("bad number");
    while (peek() >= '0' && peek() <= '9') ++p_;
    if (peek() == '.') {
      integral = false;
      ++p_;
      if (!(peek() >= '0' && peek() <= '9')) error("bad number: digit expected after '.'");
      while (peek() >= '0' && peek() <= '9') ++p_;
    }
    if (peek() == 'e' || peek() == 'E') {
      integral = false;
      ++p_;
      if (peek() == '+' || peek() == '-') ++p_;
      if (!(peek() >= '0' && peek() <= '9')) error("bad number: digit expected in exponent");
      while (peek() >= '0' && peek() <= '9') ++p_;
    }
    std::string_view tok = t_.substr(start, p_ - start);
    if (integral) {
      int64_t v = 0;
      auto r = std::from_chars(tok.data(), tok.data() + tok.size(), v);
      if (r.ec == std::errc() && r.ptr == tok.data() + tok.size()) return Json(static_cast<long long>(v));
      // too large for int64: fall through to double
    }
    std::string tmp(tok);
    errno = 0;
    char* end = nullptr;
    double d = std::strtod(tmp.c_str(), &end);
    if (end != tmp.c_str() + tmp.size()) error("bad number");
    return Json(d);
  }
};
}  // namespace

std::string Json::dump(const JsonDumpOptions& opt) const {
  std::string out;
  dump_impl(*this, out, opt, 0);
  return out;
}

Json Json::parse(std::string_view text, std::string_view source, int max_depth) {
  return Parser(text, source, max_depth).parse_document();
}

Json Json::parse_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) fail(path, "cannot open file");
  std::ostringstream ss;
  ss << f.rdbuf();
  return parse(ss.str(), path);
}

}  // namespace mere
