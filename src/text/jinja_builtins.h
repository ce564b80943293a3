// Built-in filters, tests, methods (str/dict/list members) and global functions of the Jinja
// interpreter. Filters and tests live in jinja_filters.cpp, methods and globals in
// jinja_methods.cpp; unknown names fail with a message naming them.
#pragma once
#include <string_view>

#include "text/jinja_value.h"

namespace mere::jinja {

// `operand | name(args)`; fails "unknown filter 'name'" for filters that do not exist.
Value apply_filter(std::string_view name, const Value& operand, CallArgs& args);
// `operand is name(args)`; fails "unknown test 'name'".
bool apply_test(std::string_view name, const Value& operand, const CallArgs& args);
bool has_test(std::string_view name);

// `object.name` for built-in members: string/list/dict methods (bound) and the `length`
// property. Undefined when there is no such member.
Value member(const Value& object, std::string_view name);

// namespace, range, raise_exception, strftime_now, dict, true/false/none (+ title-case forms).
void install_globals(Object& scope);

}  // namespace mere::jinja
