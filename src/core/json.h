// JSON value, parser and serialiser. Objects keep insertion order (chat templates' tojson and
// tokenizer.json rely on it). The parser bounds depth and reports line:column on malformed input.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mere {

struct JsonDumpOptions {
  int indent = -1;                 // < 0: single line
  std::string item_sep = ",";      // Python json.dumps default is ", "
  std::string key_sep = ":";       // Python json.dumps default is ": "
  bool ensure_ascii = false;       // escape non-ASCII as \uXXXX (surrogate pairs above the BMP)
  bool sort_keys = false;
};

class Json {
 public:
  enum class Type { Null, Bool, Number, String, Array, Object };
  using Array = std::vector<Json>;
  using Object = std::vector<std::pair<std::string, Json>>;

  Json() = default;
  Json(std::nullptr_t) {}
  Json(bool b) : type_(Type::Bool), b_(b) {}
  Json(int v) : Json(static_cast<long long>(v)) {}
  Json(unsigned v) : Json(static_cast<long long>(v)) {}
  Json(long v) : Json(static_cast<long long>(v)) {}
  Json(long long v) : type_(Type::Number), is_int_(true), i_(v), d_(static_cast<double>(v)) {}
  Json(unsigned long v) : Json(static_cast<long long>(v)) {}
  Json(unsigned long long v) : Json(static_cast<long long>(v)) {}
  Json(double v) : type_(Type::Number), d_(v) {}
  Json(float v) : Json(static_cast<double>(v)) {}
  Json(std::string s) : type_(Type::String), s_(std::move(s)) {}
  Json(std::string_view s) : type_(Type::String), s_(s) {}
  Json(const char* s) : type_(Type::String), s_(s) {}
  Json(Array a) : type_(Type::Array), a_(std::move(a)) {}
  Json(Object o) : type_(Type::Object), o_(std::move(o)) {}

  static Json array() { return Json(Array{}); }
  static Json object() { return Json(Object{}); }

  Type type() const { return type_; }
  bool is_null() const { return type_ == Type::Null; }
  bool is_bool() const { return type_ == Type::Bool; }
  bool is_number() const { return type_ == Type::Number; }
  bool is_integer() const { return type_ == Type::Number && is_int_; }  // written without . or e
  bool is_string() const { return type_ == Type::String; }
  bool is_array() const { return type_ == Type::Array; }
  bool is_object() const { return type_ == Type::Object; }
  static const char* type_name(Type t);

  // Accessors throw mere::Error naming the expected and actual type.
  bool as_bool() const;
  double as_number() const;
  int64_t as_int() const;  // integral numbers only (1.0 is accepted, 1.5 is not)
  const std::string& as_string() const;
  const Array& as_array() const;
  Array& as_array();
  const Object& as_object() const;
  Object& as_object();

  const Json* find(std::string_view key) const;  // nullptr when absent or not an object
  Json* find(std::string_view key);
  const Json& at(std::string_view key) const;    // throws when absent
  const Json& at(size_t index) const;            // throws when out of range
  Json& operator[](std::string_view key);        // object: inserts null when missing
  void push_back(Json v);
  size_t size() const;  // array/object element count, string length; 0 otherwise
  bool contains(std::string_view key) const { return find(key) != nullptr; }

  // Typed lookups with defaults (throw when present with the wrong type).
  int64_t get_int(std::string_view key, int64_t def) const;
  double get_number(std::string_view key, double def) const;
  bool get_bool(std::string_view key, bool def) const;
  std::string get_string(std::string_view key, const std::string& def) const;

  std::string dump(const JsonDumpOptions& opt = {}) const;
  bool operator==(const Json& other) const;

  // Throws mere::Error "[source:line:col] ..." on malformed input. max_depth bounds nesting.
  static Json parse(std::string_view text, std::string_view source = "json", int max_depth = 512);
  static Json parse_file(const std::string& path);

 private:
  Type type_ = Type::Null;
  bool b_ = false;
  bool is_int_ = false;
  int64_t i_ = 0;
  double d_ = 0;
  std::string s_;
  Array a_;
  Object o_;
};

// Appends s as a JSON string literal (with quotes) to out.
void json_escape(std::string& out, std::string_view s, bool ensure_ascii = false);

}  // namespace mere
