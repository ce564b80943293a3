// String helpers for the Jinja interpreter: UTF-8 code points, the whitespace and case rules of
// JavaScript (what @huggingface/jinja, the reference, applies), JS number formatting, and the
// JSON.stringify escaping that the `tojson` filter must reproduce byte for byte.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace mere::jinja {

// Decodes UTF-8 into code points; invalid bytes become U+FFFD.
std::vector<char32_t> utf8_decode(std::string_view s);
void utf8_append(std::string& out, char32_t cp);
std::string utf8_encode(const std::vector<char32_t>& cps, size_t begin = 0, size_t end = SIZE_MAX);
size_t utf8_length(std::string_view s);  // code points

// JavaScript's \s set (String.prototype.trim, /\s/).
bool is_js_space(char32_t cp);
std::string js_trim(std::string_view s, bool left = true, bool right = true);
// Python str.strip(chars): strips any code point contained in chars from the chosen ends.
std::string strip_chars(std::string_view s, std::string_view chars, bool left, bool right);

// Case mapping covering ASCII, Latin-1, Latin Extended-A, Greek, Cyrillic and fullwidth Latin.
std::string to_upper(std::string_view s);
std::string to_lower(std::string_view s);
std::string js_title(std::string_view s);       // @huggingface/jinja: /\b\w/ -> upper, rest kept
std::string js_capitalize(std::string_view s);  // first code point upper, rest kept

// Number.prototype.toString (shortest round trip, JS exponent rules).
std::string js_number_to_string(double d);
// How a float prints in template output: integral values get ".0" ("1.0", "-0.0").
std::string float_display(double d);

// JSON.stringify(string), optionally with @huggingface/jinja's ensure_ascii post-pass
// (every UTF-16 unit >= 0x7f becomes \uXXXX, lowercase hex).
void js_json_string(std::string& out, std::string_view s, bool ensure_ascii);

// HTML escaping as markupsafe does it (& < > " ').
std::string html_escape(std::string_view s);

// str.replace(old, new, count) with Python semantics (count < 0: all; empty old inserts between
// code points).
std::string py_replace(std::string_view s, std::string_view from, std::string_view to, int64_t count);

}  // namespace mere::jinja
