// Jinja runtime values: construction from JSON, truthiness, printing, JSON serialisation (tojson)
// and equality/ordering, all following @huggingface/jinja 0.5.11 (see docs/chat-template.md for
// the few places where Python Jinja2 semantics were chosen instead).
#include "text/jinja_value.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "text/jinja_strings.h"

namespace mere::jinja {

void raise(const std::string& what) { throw Failure(what); }

Value Value::object() { return Value(Type::Object, std::make_shared<Object>()); }
Value Value::object(Object o) { return Value(Type::Object, std::make_shared<Object>(std::move(o))); }
Value Value::namespace_(Object o) {
  auto p = std::make_shared<Object>(std::move(o));
  NamespaceTracker::record(p);
  return Value(Type::Namespace, std::move(p));
}

namespace {
thread_local NamespaceTracker* current_tracker = nullptr;
}

NamespaceTracker::NamespaceTracker() : previous_(current_tracker) { current_tracker = this; }

NamespaceTracker::~NamespaceTracker() {
  current_tracker = previous_;
  std::vector<Value> doomed;  // destroyed after the loop, outside the objects being cleared
  for (auto& w : live_)
    if (auto p = w.lock())
      for (auto& kv : p->items) doomed.push_back(std::move(kv.second));
  for (auto& w : live_)
    if (auto p = w.lock()) p->items.clear();
}

void NamespaceTracker::record(const std::shared_ptr<Object>& ns) {
  if (current_tracker) current_tracker->live_.push_back(ns);
}
Value Value::function(std::string name, std::function<Value(CallArgs&)> fn) {
  return Value(Type::Function, std::make_shared<Function>(Function{std::move(name), std::move(fn)}));
}

Value Value::from_json(const Json& j) {
  switch (j.type()) {
    case Json::Type::Null: return none();
    case Json::Type::Bool: return boolean(j.as_bool());
    case Json::Type::Number: {
      if (j.is_integer()) return integer(j.as_int());
      // JSON.parse gives a plain number; @huggingface/jinja makes integral ones integers.
      double d = j.as_number();
      if (std::isfinite(d) && d == std::trunc(d) && std::fabs(d) < 9.2e18) return integer(static_cast<int64_t>(d));
      return number(d);
    }
    case Json::Type::String: return string(j.as_string());
    case Json::Type::Array: {
      Array a;
      a.reserve(j.size());
      for (const auto& x : j.as_array()) a.push_back(from_json(x));
      return array(std::move(a));
    }
    case Json::Type::Object: {
      Object o;
      o.items.reserve(j.size());
      for (const auto& [k, v] : j.as_object()) o.set(k, from_json(v));
      return object(std::move(o));
    }
  }
  return Value();
}

double Value::as_double() const {
  switch (type_) {
    case Type::Int: return static_cast<double>(as_int());
    case Type::Float: return as_float();
    case Type::Bool: return as_bool() ? 1 : 0;
    default: raise(cat("expected a number, got ", type_name()));
  }
}

const void* Value::identity() const {
  if (auto p = std::get_if<std::shared_ptr<Array>>(&v_)) return p->get();
  if (auto p = std::get_if<std::shared_ptr<Object>>(&v_)) return p->get();
  if (auto p = std::get_if<std::shared_ptr<Function>>(&v_)) return p->get();
  return nullptr;
}

bool Value::truthy() const {
  switch (type_) {
    case Type::Undefined:
    case Type::None: return false;
    case Type::Bool: return as_bool();
    case Type::Int: return as_int() != 0;
    case Type::Float: return as_float() != 0 && !std::isnan(as_float());
    case Type::String: return !as_string().empty();
    case Type::Array: return !as_array().empty();
    case Type::Object: return !as_object().items.empty();
    case Type::Namespace:
    case Type::Function: return true;
  }
  return false;
}

const char* Value::type_name() const {
  switch (type_) {
    case Type::Undefined: return "undefined";
    case Type::None: return "none";
    case Type::Bool: return "boolean";
    case Type::Int: return "integer";
    case Type::Float: return "float";
    case Type::String: return "string";
    case Type::Array: return "list";
    case Type::Object: return "dict";
    case Type::Namespace: return "namespace";
    case Type::Function: return "function";
  }
  return "?";
}

const Value* Object::find(std::string_view key) const {
  for (const auto& kv : items)
    if (kv.first == key) return &kv.second;
  return nullptr;
}
Value* Object::find(std::string_view key) {
  for (auto& kv : items)
    if (kv.first == key) return &kv.second;
  return nullptr;
}
void Object::set(std::string key, Value v) {
  if (Value* p = find(key)) *p = std::move(v);
  else items.emplace_back(std::move(key), std::move(v));
}

const Value* CallArgs::kwarg(std::string_view name) const {
  for (const auto& kv : kw)
    if (kv.first == name) return &kv.second;
  return nullptr;
}
const Value* CallArgs::get(size_t i, std::string_view name) const {
  if (i < pos.size()) return &pos[i];
  return kwarg(name);
}
Value CallArgs::get_or(size_t i, std::string_view name, Value def) const {
  const Value* v = get(i, name);
  return v ? *v : def;
}

// ------------------------------------------------------------------ printing

std::string display(const Value& v) {
  switch (v.type()) {
    case Value::Type::Undefined:
    case Value::Type::None: return "";
    case Value::Type::Bool: return v.as_bool() ? "true" : "false";
    case Value::Type::Int: return std::to_string(v.as_int());
    case Value::Type::Float: return float_display(v.as_float());
    case Value::Type::String: return v.as_string();
    case Value::Type::Array:
    case Value::Type::Object:
    case Value::Type::Namespace: {
      JsonStyle s;
      s.undefined_as_null = false;
      return to_json(v, s);
    }
    case Value::Type::Function: return "<function " + v.as_function().name + ">";
  }
  return "";
}

std::string raw_string(const Value& v) {
  if (v.is_float()) return js_number_to_string(v.as_float());
  return display(v);
}

namespace {

void json_impl(std::string& out, const Value& v, const JsonStyle& st, int depth) {
  if (depth > 512) raise("value nested too deeply to serialise (does it contain itself?)");
  const bool pretty = st.indent > 0;
  std::string item_sep = st.separators ? st.separators->first : (pretty ? "," : ", ");
  std::string key_sep = st.separators ? st.separators->second : ": ";
  auto pad = [&](int d) {
    out.push_back('\n');
    out.append(static_cast<size_t>(st.indent) * static_cast<size_t>(d), ' ');
  };
  switch (v.type()) {
    case Value::Type::Undefined: out += st.undefined_as_null ? "null" : "undefined"; return;
    case Value::Type::None: out += "null"; return;
    case Value::Type::Bool: out += v.as_bool() ? "true" : "false"; return;
    case Value::Type::Int: out += std::to_string(v.as_int()); return;
    case Value::Type::Float:
      out += std::isfinite(v.as_float()) ? js_number_to_string(v.as_float()) : "null";
      return;
    case Value::Type::String: js_json_string(out, v.as_string(), st.ensure_ascii); return;
    case Value::Type::Array: {
      const Array& a = v.as_array();
      out.push_back('[');
      for (size_t i = 0; i < a.size(); ++i) {
        if (i) out += item_sep;
        if (pretty) pad(depth + 1);
        json_impl(out, a[i], st, depth + 1);
      }
      if (pretty && !a.empty()) pad(depth);
      out.push_back(']');
      return;
    }
    case Value::Type::Object:
    case Value::Type::Namespace: {
      const Object& o = v.as_object();
      std::vector<const std::pair<std::string, Value>*> entries;
      for (const auto& kv : o.items) entries.push_back(&kv);
      if (st.sort_keys)
        std::stable_sort(entries.begin(), entries.end(), [](auto* a, auto* b) { return a->first < b->first; });
      out.push_back('{');
      for (size_t i = 0; i < entries.size(); ++i) {
        if (i) out += item_sep;
        if (pretty) pad(depth + 1);
        js_json_string(out, entries[i]->first, st.ensure_ascii);
        out += key_sep;
        json_impl(out, entries[i]->second, st, depth + 1);
      }
      if (pretty && !entries.empty()) pad(depth);
      out.push_back('}');
      return;
    }
    case Value::Type::Function: raise("tojson: cannot serialise a function");
  }
}

}  // namespace

std::string to_json(const Value& v, const JsonStyle& style) {
  std::string out;
  json_impl(out, v, style, 0);
  return out;
}

// ------------------------------------------------------------------ equality and ordering

namespace {

bool is_primitive_number_like(const Value& v) { return v.is_number() || v.is_bool(); }

// JavaScript ToNumber for strings: trimmed, empty -> 0, otherwise a full numeric literal.
double js_string_to_number(const std::string& s) {
  std::string t = js_trim(s);
  if (t.empty()) return 0;
  if (t == "Infinity" || t == "+Infinity") return INFINITY;
  if (t == "-Infinity") return -INFINITY;
  char* end = nullptr;
  double d = std::strtod(t.c_str(), &end);
  if (end != t.c_str() + t.size() || t.find_first_of("nNiIpP") != std::string::npos) return NAN;
  return d;
}

}  // namespace

namespace {
bool loose_equal_impl(const Value& a, const Value& b, int depth);
}

bool loose_equal(const Value& a, const Value& b) { return loose_equal_impl(a, b, 0); }

namespace {
bool loose_equal_impl(const Value& a, const Value& b, int depth) {
  using T = Value::Type;
  if (depth > 512) raise("values nested too deeply to compare");
  bool a_nil = a.is_none() || a.is_undefined(), b_nil = b.is_none() || b.is_undefined();
  if (a_nil || b_nil) return a_nil && b_nil;
  if (a.is_string() && b.is_string()) return a.as_string() == b.as_string();
  if (is_primitive_number_like(a) && is_primitive_number_like(b)) return a.as_double() == b.as_double();
  if (a.is_string() && is_primitive_number_like(b)) return js_string_to_number(a.as_string()) == b.as_double();
  if (b.is_string() && is_primitive_number_like(a)) return js_string_to_number(b.as_string()) == a.as_double();
  if (a.type() != b.type()) return false;
  switch (a.type()) {
    case T::Array: {
      const Array &x = a.as_array(), &y = b.as_array();
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i)
        if (!loose_equal_impl(x[i], y[i], depth + 1)) return false;
      return true;
    }
    case T::Object:
    case T::Namespace: {
      const Object &x = a.as_object(), &y = b.as_object();
      if (x.items.size() != y.items.size()) return false;
      for (const auto& [k, v] : x.items) {
        const Value* w = y.find(k);
        if (!w || !loose_equal_impl(v, *w, depth + 1)) return false;
      }
      return true;
    }
    default: return a.identity() == b.identity();
  }
}
}  // namespace

bool strict_equal(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) return a.as_double() == b.as_double();
  if (a.type() != b.type()) return false;
  switch (a.type()) {
    case Value::Type::Undefined:
    case Value::Type::None: return true;
    case Value::Type::Bool: return a.as_bool() == b.as_bool();
    case Value::Type::String: return a.as_string() == b.as_string();
    default: return a.identity() == b.identity();
  }
}

int compare(const Value& a, const Value& b, bool case_sensitive) {
  if (a.is_none() && b.is_none()) return 0;
  if (a.is_undefined() && b.is_undefined()) return 0;
  if (is_primitive_number_like(a) && is_primitive_number_like(b)) {
    double x = a.as_double(), y = b.as_double();
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (a.is_string() && b.is_string()) {
    if (case_sensitive) return a.as_string().compare(b.as_string()) < 0 ? -1 : a.as_string() == b.as_string() ? 0 : 1;
    std::string x = to_lower(a.as_string()), y = to_lower(b.as_string());
    return x < y ? -1 : x > y ? 1 : 0;
  }
  raise(cat("cannot compare ", a.type_name(), " with ", b.type_name()));
}

Value attribute_path(const Value& v, std::string_view path) {
  Value cur = v;
  size_t start = 0;
  while (true) {
    size_t dot = path.find('.', start);
    std::string_view part = path.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start);
    if (cur.is_mapping_like()) {
      const Value* f = cur.as_object().find(part);
      if (!f) return Value();
      cur = *f;
    } else if (cur.is_array()) {
      int64_t idx = -1;
      if (!part.empty() && part.find_first_not_of("0123456789") == std::string_view::npos && part.size() < 18)
        idx = std::stoll(std::string(part));
      if (idx < 0 || idx >= static_cast<int64_t>(cur.as_array().size())) return Value();
      cur = cur.as_array()[static_cast<size_t>(idx)];
    } else {
      return Value();
    }
    if (dot == std::string_view::npos) return cur;
    start = dot + 1;
  }
}

}  // namespace mere::jinja
