// Built-in members and globals of the Jinja interpreter: str methods (HF's set — upper, lower,
// strip, title, capitalize, startswith, endswith, split, replace, length — plus Python's rsplit,
// find, count, join, format, is*, ...), dict methods (get, items, keys, values, dictsort), list
// `length`, and the globals namespace(), range(), raise_exception(), strftime_now(), dict().
#include <ctime>

#include "core/error.h"
#include "text/jinja_builtins.h"
#include "text/jinja_strings.h"

namespace mere::jinja {
namespace {

std::string str_arg(const CallArgs& a, size_t i, std::string_view method, std::string_view name) {
  const Value* v = a.get(i, name);
  if (!v || !v->is_string()) raise(cat("str.", method, "(): argument '", name, "' must be a string"));
  return v->as_string();
}

int64_t int_arg(const CallArgs& a, size_t i, std::string_view name, int64_t def) {
  const Value* v = a.get(i, name);
  if (!v || v->is_none()) return def;
  if (!v->is_int()) raise(cat("argument '", name, "' must be an integer, got a ", v->type_name()));
  return v->as_int();
}

Value string_list(const std::vector<std::string>& parts) {
  Array out;
  out.reserve(parts.size());
  for (const auto& p : parts) out.push_back(Value::string(p));
  return Value::array(std::move(out));
}

// str.split / str.rsplit. sep == nullopt: runs of whitespace, no empty strings.
std::vector<std::string> split(const std::string& s, const std::optional<std::string>& sep, int64_t maxsplit,
                               bool from_right) {
  std::vector<std::string> out;
  if (sep) {
    if (sep->empty()) raise("str.split(): empty separator");
    if (!from_right) {
      size_t pos = 0;
      while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
        size_t hit = s.find(*sep, pos);
        if (hit == std::string::npos) break;
        out.push_back(s.substr(pos, hit - pos));
        pos = hit + sep->size();
      }
      out.push_back(s.substr(pos));
      return out;
    }
    size_t end = s.size();
    while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
      if (end < sep->size()) break;
      size_t hit = s.rfind(*sep, end - sep->size());
      if (hit == std::string::npos) break;
      out.insert(out.begin(), s.substr(hit + sep->size(), end - hit - sep->size()));
      end = hit;
    }
    out.insert(out.begin(), s.substr(0, end));
    return out;
  }
  auto cps = utf8_decode(s);
  const size_t n = cps.size();
  if (!from_right) {
    size_t i = 0;
    while (true) {
      while (i < n && is_js_space(cps[i])) ++i;
      if (i >= n) break;
      if (maxsplit >= 0 && static_cast<int64_t>(out.size()) >= maxsplit) {
        out.push_back(utf8_encode(cps, i));
        break;
      }
      size_t j = i;
      while (j < n && !is_js_space(cps[j])) ++j;
      out.push_back(utf8_encode(cps, i, j));
      i = j;
    }
    return out;
  }
  size_t e = n;
  while (true) {
    while (e > 0 && is_js_space(cps[e - 1])) --e;
    if (e == 0) break;
    if (maxsplit >= 0 && static_cast<int64_t>(out.size()) >= maxsplit) {
      out.insert(out.begin(), utf8_encode(cps, 0, e));
      break;
    }
    size_t b = e;
    while (b > 0 && !is_js_space(cps[b - 1])) --b;
    out.insert(out.begin(), utf8_encode(cps, b, e));
    e = b;
  }
  return out;
}

bool affix_match(const std::string& s, const Value& affix, bool prefix, std::string_view method) {
  auto one = [&](const Value& a) {
    if (!a.is_string()) raise(cat("str.", method, "(): expected a string or a list of strings"));
    const std::string& x = a.as_string();
    if (x.size() > s.size()) return false;
    return prefix ? s.compare(0, x.size(), x) == 0 : s.compare(s.size() - x.size(), x.size(), x) == 0;
  };
  if (affix.is_array()) {
    for (const Value& a : affix.as_array())
      if (one(a)) return true;
    return false;
  }
  return one(affix);
}

// Python str.format: {} {0} {name} and {{ }} escapes; format specs are not supported.
std::string py_format(const std::string& fmt, const CallArgs& a) {
  auto py_str = [](const Value& v) {
    if (v.is_bool()) return std::string(v.as_bool() ? "True" : "False");
    if (v.is_none()) return std::string("None");
    return display(v);
  };
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < fmt.size(); ++i) {
    char c = fmt[i];
    if (c == '}' && i + 1 < fmt.size() && fmt[i + 1] == '}') {
      out.push_back('}');
      ++i;
      continue;
    }
    if (c != '{') {
      out.push_back(c);
      continue;
    }
    if (i + 1 < fmt.size() && fmt[i + 1] == '{') {
      out.push_back('{');
      ++i;
      continue;
    }
    size_t close = fmt.find('}', i);
    if (close == std::string::npos) raise("str.format(): single '{' in format string");
    std::string field = fmt.substr(i + 1, close - i - 1);
    if (field.find_first_of(":!") != std::string::npos) raise("str.format(): format specs are not supported");
    const Value* v = nullptr;
    if (field.empty()) {
      v = auto_index < a.pos.size() ? &a.pos[auto_index] : nullptr;
      ++auto_index;
    } else if (field.find_first_not_of("0123456789") == std::string::npos && field.size() < 9) {
      size_t k = std::stoul(field);
      v = k < a.pos.size() ? &a.pos[k] : nullptr;
    } else {
      v = a.kwarg(field);
    }
    if (!v) raise(cat("str.format(): no argument for field '{", field, "}'"));
    out += py_str(*v);
    i = close;
  }
  return out;
}

template <class Pred>
bool all_cps(const std::string& s, Pred p) {
  auto cps = utf8_decode(s);
  if (cps.empty()) return false;
  for (char32_t c : cps)
    if (!p(c)) return false;
  return true;
}
bool is_alpha_cp(char32_t c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= 0xC0 && !is_js_space(c) && c != 0xD7 && c != 0xF7);
}
bool is_digit_cp(char32_t c) { return c >= '0' && c <= '9'; }

size_t cp_index(const std::string& s, size_t byte_pos) { return utf8_length(std::string_view(s).substr(0, byte_pos)); }

Value string_member(const Value& self, std::string_view name) {
  const std::string& s0 = self.as_string();
  if (name == "length") return Value::integer(static_cast<int64_t>(utf8_length(s0)));
  std::string n(name);
  auto bind = [&](auto fn) {
    std::string s = s0;
    return Value::function(n, [s, fn](CallArgs& a) { return fn(s, a); });
  };
  if (name == "upper") return bind([](const std::string& s, CallArgs&) { return Value::string(to_upper(s)); });
  if (name == "lower" || name == "casefold")
    return bind([](const std::string& s, CallArgs&) { return Value::string(to_lower(s)); });
  if (name == "title") return bind([](const std::string& s, CallArgs&) { return Value::string(js_title(s)); });
  if (name == "capitalize")
    return bind([](const std::string& s, CallArgs&) { return Value::string(js_capitalize(s)); });
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    bool left = name != "rstrip", right = name != "lstrip";
    return bind([left, right](const std::string& s, CallArgs& a) {
      const Value* chars = a.get(0, "chars");
      if (!chars || chars->is_none()) return Value::string(js_trim(s, left, right));
      if (!chars->is_string()) raise("str.strip(): chars must be a string");
      return Value::string(strip_chars(s, chars->as_string(), left, right));
    });
  }
  if (name == "startswith" || name == "endswith") {
    bool prefix = name == "startswith";
    return bind([prefix](const std::string& s, CallArgs& a) {
      if (a.pos.empty()) raise(cat(prefix ? "str.startswith" : "str.endswith", "() needs an argument"));
      return Value::boolean(affix_match(s, a.pos[0], prefix, prefix ? "startswith" : "endswith"));
    });
  }
  if (name == "split" || name == "rsplit") {
    bool right = name == "rsplit";
    return bind([right](const std::string& s, CallArgs& a) {
      std::optional<std::string> sep;
      if (const Value* v = a.get(0, "sep"); v && !v->is_none()) {
        if (!v->is_string()) raise("str.split(): sep must be a string or none");
        sep = v->as_string();
      }
      return string_list(split(s, sep, int_arg(a, 1, "maxsplit", -1), right));
    });
  }
  if (name == "splitlines")
    return bind([](const std::string& s, CallArgs& a) {
      bool keep = a.get_or(0, "keepends", Value::boolean(false)).truthy();
      std::vector<std::string> out;
      size_t b = 0;
      for (size_t i = 0; i < s.size(); ++i) {
        if (s[i] != '\n' && s[i] != '\r') continue;
        size_t e = i + ((s[i] == '\r' && i + 1 < s.size() && s[i + 1] == '\n') ? 1 : 0);
        out.push_back(s.substr(b, (keep ? e + 1 : i) - b));
        i = e;
        b = e + 1;
      }
      if (b < s.size()) out.push_back(s.substr(b));
      return string_list(out);
    });
  if (name == "replace")
    return bind([](const std::string& s, CallArgs& a) {
      std::string from = str_arg(a, 0, "replace", "old"), to = str_arg(a, 1, "replace", "new");
      return Value::string(py_replace(s, from, to, int_arg(a, 2, "count", -1)));
    });
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex") {
    bool right = name[0] == 'r', strict = name.find("index") != std::string_view::npos;
    return bind([right, strict](const std::string& s, CallArgs& a) {
      std::string sub = str_arg(a, 0, "find", "sub");
      size_t hit = right ? s.rfind(sub) : s.find(sub);
      if (hit == std::string::npos) {
        if (strict) raise("str.index(): substring not found");
        return Value::integer(-1);
      }
      return Value::integer(static_cast<int64_t>(cp_index(s, hit)));
    });
  }
  if (name == "count")
    return bind([](const std::string& s, CallArgs& a) {
      std::string sub = str_arg(a, 0, "count", "sub");
      if (sub.empty()) return Value::integer(static_cast<int64_t>(utf8_length(s)) + 1);
      int64_t n = 0;
      for (size_t p = s.find(sub); p != std::string::npos; p = s.find(sub, p + sub.size())) ++n;
      return Value::integer(n);
    });
  if (name == "join")
    return bind([](const std::string& s, CallArgs& a) {
      if (a.pos.empty() || !a.pos[0].is_array()) raise("str.join(): expected a list");
      std::string out;
      const Array& items = a.pos[0].as_array();
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) out += s;
        if (!items[i].is_string()) raise(cat("str.join(): expected strings, got a ", items[i].type_name()));
        out += items[i].as_string();
      }
      return Value::string(std::move(out));
    });
  if (name == "format") return bind([](const std::string& s, CallArgs& a) { return Value::string(py_format(s, a)); });
  if (name == "removeprefix" || name == "removesuffix") {
    bool prefix = name == "removeprefix";
    return bind([prefix](const std::string& s, CallArgs& a) {
      std::string x = str_arg(a, 0, prefix ? "removeprefix" : "removesuffix", "affix");
      if (!affix_match(s, Value::string(x), prefix, "removeprefix")) return Value::string(s);
      return Value::string(prefix ? s.substr(x.size()) : s.substr(0, s.size() - x.size()));
    });
  }
  if (name == "isdigit" || name == "isnumeric" || name == "isdecimal")
    return bind([](const std::string& s, CallArgs&) { return Value::boolean(all_cps(s, is_digit_cp)); });
  if (name == "isalpha")
    return bind([](const std::string& s, CallArgs&) { return Value::boolean(all_cps(s, is_alpha_cp)); });
  if (name == "isalnum")
    return bind([](const std::string& s, CallArgs&) {
      return Value::boolean(all_cps(s, [](char32_t c) { return is_alpha_cp(c) || is_digit_cp(c); }));
    });
  if (name == "isspace")
    return bind([](const std::string& s, CallArgs&) { return Value::boolean(all_cps(s, is_js_space)); });
  if (name == "islower" || name == "isupper") {
    bool lower = name == "islower";
    return bind([lower](const std::string& s, CallArgs&) {
      bool cased = to_upper(s) != to_lower(s);
      return Value::boolean(cased && (lower ? to_lower(s) == s : to_upper(s) == s));
    });
  }
  return Value();
}

Value dict_member(const Value& self, std::string_view name) {
  std::string n(name);
  auto bind = [&](auto fn) { return Value::function(n, [self, fn](CallArgs& a) { return fn(self, a); }); };
  if (name == "get")
    return bind([](const Value& d, CallArgs& a) {
      if (a.pos.empty() || !a.pos[0].is_string()) raise("dict.get(): the key must be a string");
      if (const Value* v = d.as_object().find(a.pos[0].as_string())) return *v;
      return a.pos.size() > 1 ? a.pos[1] : Value::none();
    });
  if (name == "items")
    return bind([](const Value& d, CallArgs& a) { return apply_filter("items", d, a); });
  if (name == "keys")
    return bind([](const Value& d, CallArgs&) {
      Array out;
      for (const auto& kv : d.as_object().items) out.push_back(Value::string(kv.first));
      return Value::array(std::move(out));
    });
  if (name == "values")
    return bind([](const Value& d, CallArgs&) {
      Array out;
      for (const auto& kv : d.as_object().items) out.push_back(kv.second);
      return Value::array(std::move(out));
    });
  if (name == "dictsort") return bind([](const Value& d, CallArgs& a) { return apply_filter("dictsort", d, a); });
  return Value();
}

Value list_member(const Value& self, std::string_view name) {
  if (name == "length") return Value::integer(static_cast<int64_t>(self.as_array().size()));
  if (name == "count" || name == "index") {
    bool index = name == "index";
    return Value::function(std::string(name), [self, index](CallArgs& a) {
      if (a.pos.empty()) raise("list.count()/index() needs an argument");
      int64_t count = 0;
      const Array& items = self.as_array();
      for (size_t i = 0; i < items.size(); ++i) {
        if (!strict_equal(items[i], a.pos[0])) continue;
        if (index) return Value::integer(static_cast<int64_t>(i));
        ++count;
      }
      if (index) raise("list.index(): value not in list");
      return Value::integer(count);
    });
  }
  return Value();
}

Value make_namespace(CallArgs& a) {
  if (a.pos.size() > 1) raise(cat("namespace() takes at most 1 positional argument, got ", a.pos.size()));
  Object o;
  if (!a.pos.empty()) {
    const Value& src = a.pos[0];
    if (src.is_mapping_like()) {
      for (const auto& kv : src.as_object().items) o.set(kv.first, kv.second);
    } else if (src.is_array()) {
      for (const Value& pair : src.as_array()) {
        if (!pair.is_array() || pair.as_array().size() != 2 || !pair.as_array()[0].is_string())
          raise("namespace(): expected a dict or a list of [key, value] pairs");
        o.set(pair.as_array()[0].as_string(), pair.as_array()[1]);
      }
    } else {
      raise(cat("namespace(): cannot build a namespace from a ", src.type_name()));
    }
  }
  for (const auto& kv : a.kw) o.set(kv.first, kv.second);
  return Value::namespace_(std::move(o));
}

Value make_range(CallArgs& a) {
  if (a.pos.empty() || a.pos.size() > 3) raise("range() takes 1 to 3 integer arguments");
  for (const Value& v : a.pos)
    if (!v.is_int()) raise(cat("range(): expected integers, got a ", v.type_name()));
  int64_t start = 0, stop, step = 1;
  if (a.pos.size() == 1) {
    stop = a.pos[0].as_int();
  } else {
    start = a.pos[0].as_int();
    stop = a.pos[1].as_int();
    if (a.pos.size() == 3) step = a.pos[2].as_int();
  }
  if (step == 0) raise("range() step must not be zero");
  Array out;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
    if (out.size() >= 10'000'000) raise("range() is too large");
    out.push_back(Value::integer(i));
  }
  return Value::array(std::move(out));
}

Value strftime_now(CallArgs& a) {
  if (a.pos.empty() || !a.pos[0].is_string()) raise("strftime_now(): expected a format string");
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[512];
  size_t n = std::strftime(buf, sizeof buf, a.pos[0].as_string().c_str(), &tm);
  return Value::string(std::string(buf, n));
}

}  // namespace

Value member(const Value& object, std::string_view name) {
  if (object.is_string()) return string_member(object, name);
  if (object.is_array()) return list_member(object, name);
  if (object.is_object()) return dict_member(object, name);
  return Value();
}

void install_globals(Object& g) {
  g.set("namespace", Value::function("namespace", make_namespace));
  g.set("range", Value::function("range", make_range));
  g.set("strftime_now", Value::function("strftime_now", strftime_now));
  g.set("raise_exception", Value::function("raise_exception", [](CallArgs& a) -> Value {
          raise(cat("raise_exception: ", a.pos.empty() ? std::string() : display(a.pos[0])));
        }));
  g.set("dict", Value::function("dict", [](CallArgs& a) {
          Object o;
          if (!a.pos.empty() && a.pos[0].is_mapping_like())
            for (const auto& kv : a.pos[0].as_object().items) o.set(kv.first, kv.second);
          for (const auto& kv : a.kw) o.set(kv.first, kv.second);
          return Value::object(std::move(o));
        }));
  for (const char* t : {"true", "True"}) g.set(t, Value::boolean(true));
  for (const char* f : {"false", "False"}) g.set(f, Value::boolean(false));
  for (const char* n : {"none", "None"}) g.set(n, Value::none());
}

}  // namespace mere::jinja
