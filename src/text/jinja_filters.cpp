// Built-in Jinja filters. Output matches @huggingface/jinja 0.5.11 for every filter it has (tojson
// separators/escaping, title/capitalize, int/float parsing, sort order, unique); filters it lacks
// (round, batch, sum, min/max, wordcount, select/reject, map by filter name, ...) follow Python
// Jinja2. Undefined operands are treated as empty where Jinja2 does so.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/error.h"
#include "text/jinja_builtins.h"
#include "text/jinja_strings.h"

namespace mere::jinja {
namespace {

// Text form used when a string filter gets another type (Python str(), HF printing).
std::string as_text(const Value& v) {
  if (v.is_none()) return "None";
  return display(v);
}

Array chars_of(const std::string& s) {
  Array out;
  for (char32_t c : utf8_decode(s)) {
    std::string ch;
    utf8_append(ch, c);
    out.push_back(Value::string(std::move(ch)));
  }
  return out;
}

Array as_list(const Value& v, std::string_view filter) {
  if (v.is_array()) return v.as_array();
  if (v.is_string()) return chars_of(v.as_string());
  if (v.is_mapping_like()) {
    Array keys;
    for (const auto& kv : v.as_object().items) keys.push_back(Value::string(kv.first));
    return keys;
  }
  if (v.is_undefined()) return {};
  raise(cat("filter '", filter, "': expected a list, got a ", v.type_name()));
}

bool flag(const CallArgs& a, size_t i, std::string_view name, bool def) {
  const Value* v = a.get(i, name);
  return v ? v->truthy() : def;
}

std::optional<std::string> opt_string(const CallArgs& a, size_t i, std::string_view name) {
  const Value* v = a.get(i, name);
  if (!v || v->is_none() || v->is_undefined()) return std::nullopt;
  if (v->is_int()) return std::to_string(v->as_int());
  if (!v->is_string()) raise(cat("argument '", name, "': expected a string, got a ", v->type_name()));
  return v->as_string();
}

Value keyed(const Value& item, const std::optional<std::string>& attribute) {
  return attribute ? attribute_path(item, *attribute) : item;
}

// JavaScript parseInt(s, 10) / parseFloat(s); nullopt for NaN.
std::optional<double> js_parse_number(const std::string& s, bool integer) {
  auto cps = utf8_decode(s);
  size_t i = 0;
  while (i < cps.size() && is_js_space(cps[i])) ++i;
  std::string t = utf8_encode(cps, i);
  size_t p = 0;
  if (p < t.size() && (t[p] == '+' || t[p] == '-')) ++p;
  auto digits = [&]() {
    size_t b = p;
    while (p < t.size() && t[p] >= '0' && t[p] <= '9') ++p;
    return p - b;
  };
  if (!integer && t.compare(p, 8, "Infinity") == 0) return t[0] == '-' ? -INFINITY : INFINITY;
  size_t int_digits = digits();
  if (integer) {
    if (!int_digits) return std::nullopt;
    return std::strtod(t.substr(0, p).c_str(), nullptr);
  }
  size_t frac_digits = 0;
  if (p < t.size() && t[p] == '.') {
    size_t save = p++;
    frac_digits = digits();
    if (!int_digits && !frac_digits) p = save;
  }
  if (!int_digits && !frac_digits) return std::nullopt;
  if (p < t.size() && (t[p] == 'e' || t[p] == 'E')) {
    size_t save = p++;
    if (p < t.size() && (t[p] == '+' || t[p] == '-')) ++p;
    if (!digits()) p = save;
  }
  return std::strtod(t.substr(0, p).c_str(), nullptr);
}

Value int_value(double d) {
  if (std::fabs(d) < 9.2e18) return Value::integer(static_cast<int64_t>(d));
  return Value::number(d);
}

Value f_tojson(const Value& v, CallArgs& a) {
  JsonStyle st;
  if (const Value* ind = a.get(0, "indent")) {
    if (ind->is_int()) st.indent = static_cast<int>(std::clamp<int64_t>(ind->as_int(), -1, 64));
    else if (!ind->is_none()) raise("tojson: indent must be an integer");
  }
  st.ensure_ascii = flag(a, 99, "ensure_ascii", false);
  st.sort_keys = flag(a, 99, "sort_keys", false);
  if (const Value* sep = a.kwarg("separators"); sep && !sep->is_none()) {
    if (!sep->is_array() || sep->as_array().size() != 2 || !sep->as_array()[0].is_string() ||
        !sep->as_array()[1].is_string())
      raise("tojson: separators must be a pair of strings");
    st.separators = std::make_pair(sep->as_array()[0].as_string(), sep->as_array()[1].as_string());
  }
  return Value::string(to_json(v, st));
}

Value f_default(const Value& v, CallArgs& a) {
  Value def = a.get_or(0, "default_value", Value::string(""));
  if (v.is_undefined() || (flag(a, 1, "boolean", false) && !v.truthy())) return def;
  return v;
}

Value f_length(const Value& v, CallArgs&) {
  if (v.is_array()) return Value::integer(static_cast<int64_t>(v.as_array().size()));
  if (v.is_mapping_like()) return Value::integer(static_cast<int64_t>(v.as_object().items.size()));
  if (v.is_string()) return Value::integer(static_cast<int64_t>(utf8_length(v.as_string())));
  if (v.is_undefined()) return Value::integer(0);
  raise(cat("filter 'length': expected a list, dict or string, got a ", v.type_name()));
}

Value f_upper(const Value& v, CallArgs&) { return Value::string(to_upper(as_text(v))); }
Value f_lower(const Value& v, CallArgs&) { return Value::string(to_lower(as_text(v))); }
Value f_title(const Value& v, CallArgs&) { return Value::string(js_title(as_text(v))); }
Value f_capitalize(const Value& v, CallArgs&) { return Value::string(js_capitalize(as_text(v))); }
Value f_trim(const Value& v, CallArgs& a) {
  auto chars = opt_string(a, 0, "chars");
  return Value::string(chars ? strip_chars(as_text(v), *chars, true, true) : js_trim(as_text(v)));
}
Value f_safe(const Value& v, CallArgs&) { return v; }
Value f_escape(const Value& v, CallArgs&) { return Value::string(html_escape(as_text(v))); }

Value f_replace(const Value& v, CallArgs& a) {
  const Value *from = a.get(0, "old"), *to = a.get(1, "new");
  if (!from || !to || !from->is_string() || !to->is_string()) raise("filter 'replace': expected two string arguments");
  Value count = a.get_or(2, "count", Value::none());
  if (!count.is_int() && !count.is_none()) raise("filter 'replace': count must be an integer");
  return Value::string(py_replace(as_text(v), from->as_string(), to->as_string(), count.is_int() ? count.as_int() : -1));
}

Value f_join(const Value& v, CallArgs& a) {
  std::string sep = opt_string(a, 0, "d").value_or("");
  auto attribute = opt_string(a, 1, "attribute");
  std::string out;
  Array items = as_list(v, "join");
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += sep;
    out += raw_string(keyed(items[i], attribute));
  }
  return Value::string(std::move(out));
}

Value f_first(const Value& v, CallArgs&) {
  Array items = as_list(v, "first");
  return items.empty() ? Value() : items.front();
}
Value f_last(const Value& v, CallArgs&) {
  Array items = as_list(v, "last");
  return items.empty() ? Value() : items.back();
}
Value f_list(const Value& v, CallArgs&) { return Value::array(as_list(v, "list")); }
Value f_string(const Value& v, CallArgs&) { return v.is_string() ? v : Value::string(as_text(v)); }
Value f_bool(const Value& v, CallArgs&) { return Value::boolean(v.truthy()); }

Value f_int(const Value& v, CallArgs& a) {
  Value def = a.get_or(0, "default", Value::integer(0));
  if (v.is_string()) {
    auto d = js_parse_number(v.as_string(), true);
    return d ? int_value(*d) : def;
  }
  if (v.is_int()) return v;
  if (v.is_float()) return std::isfinite(v.as_float()) ? int_value(std::floor(v.as_float())) : def;
  if (v.is_bool()) return Value::integer(v.as_bool() ? 1 : 0);
  if (v.is_undefined() || v.is_none()) return def;
  raise(cat("filter 'int': cannot convert a ", v.type_name()));
}

Value f_float(const Value& v, CallArgs& a) {
  Value def = a.get_or(0, "default", Value::number(0.0));
  if (v.is_string()) {
    auto d = js_parse_number(v.as_string(), false);
    return d ? Value::number(*d) : def;
  }
  if (v.is_number() || v.is_bool()) return Value::number(v.as_double());
  if (v.is_undefined() || v.is_none()) return def;
  raise(cat("filter 'float': cannot convert a ", v.type_name()));
}

Value f_abs(const Value& v, CallArgs&) {
  if (v.is_int()) return Value::integer(v.as_int() < 0 ? -v.as_int() : v.as_int());
  if (v.is_bool()) return Value::integer(v.as_bool());
  if (v.is_float()) return Value::number(std::fabs(v.as_float()));
  raise(cat("filter 'abs': expected a number, got a ", v.type_name()));
}

Value f_round(const Value& v, CallArgs& a) {
  if (!v.is_number() && !v.is_bool()) raise(cat("filter 'round': expected a number, got a ", v.type_name()));
  Value p = a.get_or(0, "precision", Value::integer(0));
  if (!p.is_int()) raise("filter 'round': precision must be an integer");
  int64_t precision = p.as_int();
  std::string method = opt_string(a, 1, "method").value_or("common");
  double x = v.as_double(), scale = std::pow(10.0, static_cast<double>(precision));
  if (method == "ceil") return Value::number(std::ceil(x * scale) / scale);
  if (method == "floor") return Value::number(std::floor(x * scale) / scale);
  if (method != "common") raise("filter 'round': method must be 'common', 'ceil' or 'floor'");
  if (!v.is_float() && precision >= 0) return Value::integer(v.is_bool() ? v.as_bool() : v.as_int());  // round(int) is an int
  if (precision <= 0)  // Python round(): half to even (the default FP rounding mode)
    return Value::number(std::nearbyint(x * scale) / scale);
  char buf[512];  // printf rounds the exact binary value, as Python's round(x, n) does
  std::snprintf(buf, sizeof buf, "%.*f", static_cast<int>(std::min<int64_t>(precision, 300)), x);
  return Value::number(std::strtod(buf, nullptr));
}

Value f_items(const Value& v, CallArgs&) {
  if (v.is_undefined()) return Value::array();
  if (!v.is_mapping_like()) raise(cat("filter 'items': expected a dict, got a ", v.type_name()));
  Array out;
  for (const auto& [k, x] : v.as_object().items) out.push_back(Value::array({Value::string(k), x}));
  return Value::array(std::move(out));
}

Value f_dictsort(const Value& v, CallArgs& a) {
  if (!v.is_mapping_like()) raise(cat("filter 'dictsort': expected a dict, got a ", v.type_name()));
  bool case_sensitive = flag(a, 0, "case_sensitive", false);
  std::string by = opt_string(a, 1, "by").value_or("key");
  if (by != "key" && by != "value") raise("filter 'dictsort': by must be 'key' or 'value'");
  bool reverse = flag(a, 2, "reverse", false);
  Array items;
  for (const auto& [k, x] : v.as_object().items) items.push_back(Value::array({Value::string(k), x}));
  size_t idx = by == "key" ? 0 : 1;
  std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
    int c = compare(x.as_array()[idx], y.as_array()[idx], case_sensitive);
    return reverse ? c > 0 : c < 0;
  });
  return Value::array(std::move(items));
}

Value f_sort(const Value& v, CallArgs& a) {
  Array items = as_list(v, "sort");
  bool reverse = flag(a, 0, "reverse", false), case_sensitive = flag(a, 1, "case_sensitive", false);
  auto attribute = opt_string(a, 2, "attribute");
  std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
    int c = compare(keyed(x, attribute), keyed(y, attribute), case_sensitive);
    return reverse ? c > 0 : c < 0;
  });
  return Value::array(std::move(items));
}

Value f_unique(const Value& v, CallArgs& a) {
  auto attribute = opt_string(a, 1, "attribute");
  Array out, keys;
  for (const Value& x : as_list(v, "unique")) {
    Value k = keyed(x, attribute);
    bool seen = false;
    for (const Value& y : keys) seen = seen || strict_equal(k, y);
    if (seen) continue;
    keys.push_back(k);
    out.push_back(x);
  }
  return Value::array(std::move(out));
}

Value f_reverse(const Value& v, CallArgs&) {
  if (v.is_string()) {
    auto cps = utf8_decode(v.as_string());
    std::reverse(cps.begin(), cps.end());
    return Value::string(utf8_encode(cps));
  }
  Array items = as_list(v, "reverse");
  std::reverse(items.begin(), items.end());
  return Value::array(std::move(items));
}

Value f_map(const Value& v, CallArgs& a) {
  Array out;
  Array items = as_list(v, "map");
  if (auto attribute = opt_string(a, 99, "attribute")) {
    const Value* def = a.kwarg("default");
    for (const Value& x : items) {
      Value r = attribute_path(x, *attribute);
      out.push_back(r.is_undefined() && def ? *def : r);
    }
    return Value::array(std::move(out));
  }
  if (a.pos.empty() || !a.pos[0].is_string()) raise("filter 'map': expected a filter name or attribute=");
  std::string name = a.pos[0].as_string();
  CallArgs rest;
  rest.pos.assign(a.pos.begin() + 1, a.pos.end());
  rest.kw = a.kw;
  for (const Value& x : items) out.push_back(apply_filter(name, x, rest));
  return Value::array(std::move(out));
}

// select/reject(test, args...) and selectattr/rejectattr(attribute, test, args...).
Value select_impl(const Value& v, CallArgs& a, bool select, bool by_attribute, std::string_view filter) {
  size_t first = by_attribute ? 1 : 0;
  std::string attribute;
  if (by_attribute) {
    if (a.pos.empty() || !a.pos[0].is_string()) raise(cat("filter '", filter, "': expected an attribute name"));
    attribute = a.pos[0].as_string();
  }
  std::string test;
  if (a.pos.size() > first) {
    if (!a.pos[first].is_string()) raise(cat("filter '", filter, "': the test name must be a string"));
    test = a.pos[first].as_string();
    if (!has_test(test)) raise(cat("unknown test '", test, "'"));
  }
  CallArgs rest;
  if (a.pos.size() > first + 1) rest.pos.assign(a.pos.begin() + static_cast<long>(first) + 1, a.pos.end());
  Array out;
  for (const Value& x : as_list(v, filter)) {
    Value subject = by_attribute ? attribute_path(x, attribute) : x;
    bool ok;
    if (by_attribute && subject.is_undefined()) ok = false;  // @huggingface/jinja: missing attribute never matches
    else ok = test.empty() ? subject.truthy() : apply_test(test, subject, rest);
    if (ok == select) out.push_back(x);
  }
  return Value::array(std::move(out));
}
Value f_select(const Value& v, CallArgs& a) { return select_impl(v, a, true, false, "select"); }
Value f_reject(const Value& v, CallArgs& a) { return select_impl(v, a, false, false, "reject"); }
Value f_selectattr(const Value& v, CallArgs& a) { return select_impl(v, a, true, true, "selectattr"); }
Value f_rejectattr(const Value& v, CallArgs& a) { return select_impl(v, a, false, true, "rejectattr"); }

Value f_sum(const Value& v, CallArgs& a) {
  auto attribute = opt_string(a, 0, "attribute");
  Value total = a.get_or(1, "start", Value::integer(0));
  for (const Value& x : as_list(v, "sum")) {
    Value k = keyed(x, attribute);
    if (!(k.is_number() || k.is_bool()) || !(total.is_number() || total.is_bool()))
      raise(cat("filter 'sum': cannot add a ", k.type_name()));
    if (!k.is_float() && !total.is_float()) total = Value::integer(static_cast<int64_t>(total.as_double()) + static_cast<int64_t>(k.as_double()));
    else total = Value::number(total.as_double() + k.as_double());
  }
  return total;
}

Value min_max(const Value& v, CallArgs& a, bool want_max) {
  bool case_sensitive = flag(a, 0, "case_sensitive", false);
  auto attribute = opt_string(a, 1, "attribute");
  Array items = as_list(v, want_max ? "max" : "min");
  if (items.empty()) return Value();
  size_t best = 0;
  for (size_t i = 1; i < items.size(); ++i) {
    int c = compare(keyed(items[i], attribute), keyed(items[best], attribute), case_sensitive);
    if (want_max ? c > 0 : c < 0) best = i;
  }
  return items[best];
}
Value f_min(const Value& v, CallArgs& a) { return min_max(v, a, false); }
Value f_max(const Value& v, CallArgs& a) { return min_max(v, a, true); }

Value f_batch(const Value& v, CallArgs& a) {
  Value n = a.get_or(0, "linecount", Value());
  if (!n.is_int() || n.as_int() <= 0) raise("filter 'batch': linecount must be a positive integer");
  const Value* fill = a.get(1, "fill_with");
  Array out, cur;
  for (const Value& x : as_list(v, "batch")) {
    cur.push_back(x);
    if (static_cast<int64_t>(cur.size()) == n.as_int()) {
      out.push_back(Value::array(std::move(cur)));
      cur.clear();
    }
  }
  if (!cur.empty()) {
    if (fill && !fill->is_none())
      while (static_cast<int64_t>(cur.size()) < n.as_int()) cur.push_back(*fill);
    out.push_back(Value::array(std::move(cur)));
  }
  return Value::array(std::move(out));
}

Value f_wordcount(const Value& v, CallArgs&) {
  int64_t n = 0;
  bool in_word = false;
  for (char32_t c : utf8_decode(as_text(v))) {
    bool word = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                (c >= 0x80 && !is_js_space(c) && !(c >= 0x2010 && c <= 0x206F) && !(c >= 0x3000 && c <= 0x303F));
    if (word && !in_word) ++n;
    in_word = word;
  }
  return Value::integer(n);
}

Value f_indent(const Value& v, CallArgs& a) {
  std::string pad = "    ";
  if (const Value* w = a.get(0, "width")) {
    if (w->is_int()) pad = std::string(static_cast<size_t>(std::clamp<int64_t>(w->as_int(), 0, 1000)), ' ');
    else if (w->is_string()) pad = w->as_string();
    else raise("filter 'indent': width must be an integer or a string");
  }
  bool first = flag(a, 1, "first", false), blank = flag(a, 2, "blank", false);
  std::string s = as_text(v), out;
  size_t start = 0, line = 0;
  while (true) {
    size_t nl = s.find('\n', start);
    std::string_view piece(s.data() + start, (nl == std::string::npos ? s.size() : nl) - start);
    if (line) out.push_back('\n');
    if (!((!first && line == 0) || (!blank && piece.empty()))) out += pad;
    out += piece;
    if (nl == std::string::npos) break;
    start = nl + 1;
    ++line;
  }
  return Value::string(std::move(out));
}

// Jinja2's attr() reads an attribute, not an item: dict keys are not attributes (members are).
Value f_attr(const Value& v, CallArgs& a) {
  auto name = opt_string(a, 0, "name");
  if (!name) raise("filter 'attr': expected an attribute name");
  if (v.is_namespace()) {
    const Value* f = v.as_object().find(*name);
    return f ? *f : Value();
  }
  return member(v, *name);
}

// Python's "%s" % args (printf-style) as the `format` filter does it.
Value f_format(const Value& v, CallArgs& a) {
  std::string fmt = as_text(v), out;
  size_t next = 0;
  for (size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] != '%') {
      out.push_back(fmt[i]);
      continue;
    }
    if (++i >= fmt.size()) raise("filter 'format': incomplete format");
    if (fmt[i] == '%') {
      out.push_back('%');
      continue;
    }
    std::string spec = "%";
    while (i < fmt.size() && std::string_view("-+ #0.123456789").find(fmt[i]) != std::string_view::npos) spec += fmt[i++];
    if (i >= fmt.size()) raise("filter 'format': incomplete format");
    char conv = fmt[i];
    if (next >= a.pos.size()) raise("filter 'format': not enough arguments for format string");
    const Value& x = a.pos[next++];
    char buf[512];
    if (conv == 's' || conv == 'r') {
      out += x.is_bool() ? (x.as_bool() ? "True" : "False") : as_text(x);
    } else if (conv == 'd' || conv == 'i') {
      std::snprintf(buf, sizeof buf, (spec + "lld").c_str(), static_cast<long long>(x.as_double()));
      out += buf;
    } else if (conv == 'f' || conv == 'e' || conv == 'g') {
      std::snprintf(buf, sizeof buf, (spec + conv).c_str(), x.as_double());
      out += buf;
    } else {
      raise(cat("filter 'format': unsupported conversion '%", conv, "'"));
    }
  }
  return Value::string(std::move(out));
}

struct FilterEntry {
  const char* name;
  Value (*fn)(const Value&, CallArgs&);
};

const FilterEntry kFilters[] = {
    {"abs", f_abs},         {"attr", f_attr},           {"batch", f_batch},         {"bool", f_bool},
    {"capitalize", f_capitalize}, {"count", f_length},  {"d", f_default},           {"default", f_default},
    {"dictsort", f_dictsort}, {"e", f_escape},          {"escape", f_escape},       {"first", f_first},
    {"float", f_float},     {"forceescape", f_escape},  {"format", f_format},       {"indent", f_indent},
    {"int", f_int},         {"items", f_items},         {"join", f_join},           {"last", f_last},
    {"length", f_length},   {"list", f_list},           {"lower", f_lower},         {"map", f_map},
    {"max", f_max},         {"min", f_min},             {"reject", f_reject},       {"rejectattr", f_rejectattr},
    {"replace", f_replace}, {"reverse", f_reverse},     {"round", f_round},         {"safe", f_safe},
    {"select", f_select},   {"selectattr", f_selectattr}, {"sort", f_sort},         {"string", f_string},
    {"sum", f_sum},         {"title", f_title},         {"tojson", f_tojson},       {"trim", f_trim},
    {"unique", f_unique},   {"upper", f_upper},         {"wordcount", f_wordcount},
};

}  // namespace

Value apply_filter(std::string_view name, const Value& operand, CallArgs& args) {
  for (const auto& f : kFilters)
    if (name == f.name) return f.fn(operand, args);
  // @huggingface/jinja exposes dict methods as filters: d|keys, d|values, d|get('k').
  if (operand.is_object() && (name == "keys" || name == "values" || name == "get")) {
    Value m = member(operand, name);
    return m.as_function().call(args);
  }
  raise(cat("unknown filter '", name, "'"));
}

}  // namespace mere::jinja
