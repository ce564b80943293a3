// Built-in Jinja tests (`x is name`, `x is name(arg)`): @huggingface/jinja's set with its type
// rules (number excludes booleans, iterable is list or string, mapping is dict) plus Jinja2's
// comparison tests (divisibleby, sameas, in, eq/ne/gt/ge/lt/le, filter, test, escaped).
#include "core/error.h"
#include "text/jinja_builtins.h"
#include "text/jinja_strings.h"

namespace mere::jinja {
namespace {

const Value& arg0(const CallArgs& a, std::string_view test) {
  if (a.pos.empty()) raise(cat("test '", test, "' needs an argument"));
  return a.pos[0];
}

bool contains(const Value& seq, const Value& x) {
  if (seq.is_array()) {
    for (const Value& y : seq.as_array())
      if (strict_equal(x, y)) return true;
    return false;
  }
  if (seq.is_string() && x.is_string()) return seq.as_string().find(x.as_string()) != std::string::npos;
  if (seq.is_mapping_like() && x.is_string()) return seq.as_object().find(x.as_string()) != nullptr;
  if (seq.is_undefined()) return false;
  raise(cat("test 'in': cannot look for a ", x.type_name(), " in a ", seq.type_name()));
}

int ordered(const Value& a, const Value& b) {
  if (a.is_string() && b.is_string()) return compare(a, b, true);
  if ((a.is_number() || a.is_bool()) && (b.is_number() || b.is_bool())) return compare(a, b, true);
  raise(cat("cannot compare a ", a.type_name(), " with a ", b.type_name()));
}

bool is_lower_string(const Value& v) { return v.is_string() && to_lower(v.as_string()) == v.as_string(); }
bool is_upper_string(const Value& v) { return v.is_string() && to_upper(v.as_string()) == v.as_string(); }

using TestFn = bool (*)(const Value&, const CallArgs&, std::string_view);

struct TestEntry {
  const char* name;
  TestFn fn;
};

const TestEntry kTests[] = {
    {"boolean", [](const Value& v, const CallArgs&, std::string_view) { return v.is_bool(); }},
    {"callable", [](const Value& v, const CallArgs&, std::string_view) { return v.is_function(); }},
    {"odd",
     [](const Value& v, const CallArgs&, std::string_view) {
       if (!v.is_int()) raise(cat("test 'odd': expected an integer, got a ", v.type_name()));
       return v.as_int() % 2 != 0;
     }},
    {"even",
     [](const Value& v, const CallArgs&, std::string_view) {
       if (!v.is_int()) raise(cat("test 'even': expected an integer, got a ", v.type_name()));
       return v.as_int() % 2 == 0;
     }},
    {"divisibleby",
     [](const Value& v, const CallArgs& a, std::string_view t) {
       const Value& n = arg0(a, t);
       if (!v.is_int() || !n.is_int() || n.as_int() == 0) raise("test 'divisibleby': expected non-zero integers");
       return v.as_int() % n.as_int() == 0;
     }},
    {"false", [](const Value& v, const CallArgs&, std::string_view) { return v.is_bool() && !v.as_bool(); }},
    {"true", [](const Value& v, const CallArgs&, std::string_view) { return v.is_bool() && v.as_bool(); }},
    {"none", [](const Value& v, const CallArgs&, std::string_view) { return v.is_none(); }},
    {"string", [](const Value& v, const CallArgs&, std::string_view) { return v.is_string(); }},
    {"number", [](const Value& v, const CallArgs&, std::string_view) { return v.is_number(); }},
    {"integer", [](const Value& v, const CallArgs&, std::string_view) { return v.is_int(); }},
    {"float", [](const Value& v, const CallArgs&, std::string_view) { return v.is_float(); }},
    {"iterable", [](const Value& v, const CallArgs&, std::string_view) { return v.is_array() || v.is_string(); }},
    {"mapping", [](const Value& v, const CallArgs&, std::string_view) { return v.is_object(); }},
    {"sequence",
     [](const Value& v, const CallArgs&, std::string_view) { return v.is_array() || v.is_object() || v.is_string(); }},
    {"lower", [](const Value& v, const CallArgs&, std::string_view) { return is_lower_string(v); }},
    {"upper", [](const Value& v, const CallArgs&, std::string_view) { return is_upper_string(v); }},
    {"defined", [](const Value& v, const CallArgs&, std::string_view) { return !v.is_undefined(); }},
    {"undefined", [](const Value& v, const CallArgs&, std::string_view) { return v.is_undefined(); }},
    {"escaped", [](const Value&, const CallArgs&, std::string_view) { return false; }},
    {"equalto", [](const Value& v, const CallArgs& a, std::string_view t) { return strict_equal(v, arg0(a, t)); }},
    {"eq", [](const Value& v, const CallArgs& a, std::string_view t) { return strict_equal(v, arg0(a, t)); }},
    {"==", [](const Value& v, const CallArgs& a, std::string_view t) { return strict_equal(v, arg0(a, t)); }},
    {"ne", [](const Value& v, const CallArgs& a, std::string_view t) { return !strict_equal(v, arg0(a, t)); }},
    {"!=", [](const Value& v, const CallArgs& a, std::string_view t) { return !strict_equal(v, arg0(a, t)); }},
    {"sameas", [](const Value& v, const CallArgs& a, std::string_view t) { return strict_equal(v, arg0(a, t)); }},
    {"in", [](const Value& v, const CallArgs& a, std::string_view t) { return contains(arg0(a, t), v); }},
    {"gt", [](const Value& v, const CallArgs& a, std::string_view t) { return ordered(v, arg0(a, t)) > 0; }},
    {"greaterthan", [](const Value& v, const CallArgs& a, std::string_view t) { return ordered(v, arg0(a, t)) > 0; }},
    {"ge", [](const Value& v, const CallArgs& a, std::string_view t) { return ordered(v, arg0(a, t)) >= 0; }},
    {"lt", [](const Value& v, const CallArgs& a, std::string_view t) { return ordered(v, arg0(a, t)) < 0; }},
    {"lessthan", [](const Value& v, const CallArgs& a, std::string_view t) { return ordered(v, arg0(a, t)) < 0; }},
    {"le", [](const Value& v, const CallArgs& a, std::string_view t) { return ordered(v, arg0(a, t)) <= 0; }},
    {"filter",
     [](const Value& v, const CallArgs& a, std::string_view) {
       if (!v.is_string()) return false;
       CallArgs probe;
       try {
         apply_filter(v.as_string(), Value::string(""), probe);
       } catch (const Failure& f) {
         return std::string_view(f.what()).rfind("unknown filter", 0) != 0;
       }
       return true;
     }},
    {"test", [](const Value& v, const CallArgs&, std::string_view) { return v.is_string() && has_test(v.as_string()); }},
};

}  // namespace

bool has_test(std::string_view name) {
  for (const auto& t : kTests)
    if (name == t.name) return true;
  return false;
}

bool apply_test(std::string_view name, const Value& operand, const CallArgs& args) {
  for (const auto& t : kTests)
    if (name == t.name) return t.fn(operand, args, name);
  raise(cat("unknown test '", name, "'"));
}

}  // namespace mere::jinja
