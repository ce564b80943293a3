// Runtime values of the Jinja interpreter: a tagged variant (undefined, none, bool, int, float,
// string, list, dict, namespace, function) with reference semantics for lists/dicts, conversion
// from mere::Json, and the stringification/equality/ordering rules of @huggingface/jinja.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "core/json.h"

namespace mere::jinja {

class Value;
struct Object;
struct Function;
struct CallArgs;
using Array = std::vector<Value>;

// Thrown by filters, tests, methods and the evaluator; the template prefixes name and line.
class Failure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
  int line = 0;  // set by the innermost syntax node that sees the failure
};
[[noreturn]] void raise(const std::string& what);

class Value {
 public:
  enum class Type { Undefined, None, Bool, Int, Float, String, Array, Object, Namespace, Function };

  Value() = default;  // undefined
  static Value none() { return Value(Type::None); }
  static Value boolean(bool b) { return Value(Type::Bool, b); }
  static Value integer(int64_t i) { return Value(Type::Int, i); }
  static Value number(double d) { return Value(Type::Float, d); }
  static Value string(std::string s) { return Value(Type::String, std::move(s)); }
  static Value array(Array a = {}) { return Value(Type::Array, std::make_shared<Array>(std::move(a))); }
  static Value object();
  static Value object(Object o);
  static Value namespace_(Object o);
  static Value function(std::string name, std::function<Value(CallArgs&)> fn);
  static Value from_json(const Json& j);

  Type type() const { return type_; }
  bool is_undefined() const { return type_ == Type::Undefined; }
  bool is_none() const { return type_ == Type::None; }
  bool is_bool() const { return type_ == Type::Bool; }
  bool is_int() const { return type_ == Type::Int; }
  bool is_float() const { return type_ == Type::Float; }
  bool is_number() const { return is_int() || is_float(); }
  bool is_string() const { return type_ == Type::String; }
  bool is_array() const { return type_ == Type::Array; }
  bool is_object() const { return type_ == Type::Object; }
  bool is_namespace() const { return type_ == Type::Namespace; }
  bool is_mapping_like() const { return is_object() || is_namespace(); }
  bool is_function() const { return type_ == Type::Function; }

  bool as_bool() const { return std::get<bool>(v_); }
  int64_t as_int() const { return std::get<int64_t>(v_); }
  double as_float() const { return std::get<double>(v_); }
  double as_double() const;  // int, float or bool as a number
  const std::string& as_string() const { return std::get<std::string>(v_); }
  const Array& as_array() const { return *std::get<std::shared_ptr<Array>>(v_); }
  Object& as_object() const { return *std::get<std::shared_ptr<Object>>(v_); }  // dict or namespace
  const Function& as_function() const { return *std::get<std::shared_ptr<Function>>(v_); }
  const void* identity() const;  // list/dict/function storage address (JS === on objects)

  bool truthy() const;
  const char* type_name() const;  // "undefined", "none", "boolean", "integer", "float", "string", ...

 private:
  using Storage = std::variant<std::monostate, bool, int64_t, double, std::string, std::shared_ptr<Array>,
                               std::shared_ptr<Object>, std::shared_ptr<Function>>;
  explicit Value(Type t) : type_(t) {}
  template <class T>
  Value(Type t, T&& v) : type_(t), v_(std::forward<T>(v)) {}
  Type type_ = Type::Undefined;
  Storage v_;
};

// Ordered dict (insertion order kept; assigning an existing key keeps its position).
struct Object {
  std::vector<std::pair<std::string, Value>> items;
  const Value* find(std::string_view key) const;
  Value* find(std::string_view key);
  void set(std::string key, Value v);
};

// Namespaces are the only mutable containers, so the only way to build a reference cycle
// ({% set ns.me = ns %}). While a NamespaceTracker is alive on this thread, namespaces created
// are recorded and emptied when it is destroyed (at the end of a render), which breaks cycles.
class NamespaceTracker {
 public:
  NamespaceTracker();
  ~NamespaceTracker();
  NamespaceTracker(const NamespaceTracker&) = delete;
  NamespaceTracker& operator=(const NamespaceTracker&) = delete;
  static void record(const std::shared_ptr<Object>& ns);

 private:
  std::vector<std::weak_ptr<Object>> live_;
  NamespaceTracker* previous_;
};

// Arguments of a call: positional, keyword (in call order) and the {% call %} body, if any.
struct CallArgs {
  std::vector<Value> pos;
  std::vector<std::pair<std::string, Value>> kw;
  Value caller;
  const Value* kwarg(std::string_view name) const;
  // Positional i, else keyword `name`, else nullptr.
  const Value* get(size_t i, std::string_view name) const;
  Value get_or(size_t i, std::string_view name, Value def) const;
};

struct Function {
  std::string name;
  std::function<Value(CallArgs&)> call;
};

// What {{ v }} prints (@huggingface/jinja toString): ints in decimal, floats with ".0" when
// integral, booleans as true/false, lists/dicts as JSON with ", "/": " separators.
std::string display(const Value& v);
// JavaScript's value.toString(), used by `+`/`~` concatenation and join: like display() except
// that integral floats print without ".0"; none/undefined give "".
std::string raw_string(const Value& v);

struct JsonStyle {
  int indent = 0;  // <= 0: single line (@huggingface/jinja treats indent=0 as no indent)
  std::optional<std::pair<std::string, std::string>> separators;  // (item, key)
  bool ensure_ascii = false;
  bool sort_keys = false;
  bool undefined_as_null = true;  // false: undefined prints as `undefined` (display of lists)
};
std::string to_json(const Value& v, const JsonStyle& style = {});

bool loose_equal(const Value& a, const Value& b);   // `==` (JS == on primitives, deep on containers)
bool strict_equal(const Value& a, const Value& b);  // `in` membership, unique (JS ===)
// Ordering for sort/dictsort/min/max: numbers (and booleans) with numbers, strings with strings
// (optionally case-insensitive), none with none; anything else fails.
int compare(const Value& a, const Value& b, bool case_sensitive);
// Dotted attribute path lookup used by map/sort/selectattr: "a.b", "items.0".
Value attribute_path(const Value& v, std::string_view path);

}  // namespace mere::jinja
