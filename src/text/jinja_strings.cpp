// String helpers for the Jinja interpreter: UTF-8, JS whitespace/case rules, JS number formatting
// and JSON.stringify escaping (see jinja_strings.h). Everything here is pure and allocation-light.
#include "text/jinja_strings.h"

#include <charconv>
#include <cmath>
#include <cstdio>

namespace mere::jinja {

std::vector<char32_t> utf8_decode(std::string_view s) {
  std::vector<char32_t> out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      out.push_back(c);
      ++i;
      continue;
    }
    size_t len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 0;
    if (len == 0 || c >= 0xF8 || i + len > s.size()) {
      out.push_back(0xFFFD);
      ++i;
      continue;
    }
    char32_t cp = c & (0xFF >> (len + 1));
    bool ok = true;
    for (size_t k = 1; k < len; ++k) {
      unsigned char cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xC0) != 0x80) ok = false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    if (!ok) {
      out.push_back(0xFFFD);
      ++i;
      continue;
    }
    out.push_back(cp);
    i += len;
  }
  return out;
}

void utf8_append(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::string utf8_encode(const std::vector<char32_t>& cps, size_t begin, size_t end) {
  std::string out;
  end = std::min(end, cps.size());
  for (size_t i = begin; i < end; ++i) utf8_append(out, cps[i]);
  return out;
}

size_t utf8_length(std::string_view s) {
  size_t n = 0;
  for (unsigned char c : s)
    if ((c & 0xC0) != 0x80) ++n;
  return n;
}

bool is_js_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) ||
         c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000 || c == 0xFEFF;
}

namespace {

template <class Pred>
std::string strip_if(std::string_view s, bool left, bool right, Pred pred) {
  auto cps = utf8_decode(s);
  size_t b = 0, e = cps.size();
  if (left)
    while (b < e && pred(cps[b])) ++b;
  if (right)
    while (e > b && pred(cps[e - 1])) --e;
  if (b == 0 && e == cps.size()) return std::string(s);
  return utf8_encode(cps, b, e);
}

char32_t upper_cp(char32_t c) {
  if (c < 0x80) return (c >= 'a' && c <= 'z') ? c - 32 : c;
  if ((c >= 0xE0 && c <= 0xFE && c != 0xF7)) return c - 32;
  if (c == 0xFF) return 0x178;
  if (c == 0xB5) return 0x39C;
  if (c >= 0x100 && c <= 0x17F) {
    if (c == 0x131) return 'I';
    if (c == 0x17F) return 'S';
    bool odd_lower = (c <= 0x137) || (c >= 0x14A && c <= 0x177);
    bool even_lower = (c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E);
    if (odd_lower && (c & 1)) return c - 1;
    if (even_lower && !(c & 1)) return c - 1;
    return c;
  }
  if (c >= 0x3B1 && c <= 0x3C9) return c == 0x3C2 ? 0x3A3 : c - 32;
  if (c == 0x3AC) return 0x386;
  if (c >= 0x3AD && c <= 0x3AF) return c - 37;
  if (c == 0x3CC) return 0x38C;
  if (c == 0x3CD || c == 0x3CE) return c - 63;
  if (c >= 0x430 && c <= 0x44F) return c - 32;
  if (c >= 0x450 && c <= 0x45F) return c - 80;
  if (((c >= 0x460 && c <= 0x481) || (c >= 0x48A && c <= 0x4BF)) && (c & 1)) return c - 1;
  if (c >= 0xFF41 && c <= 0xFF5A) return c - 32;
  return c;
}

char32_t lower_cp(char32_t c) {
  if (c < 0x80) return (c >= 'A' && c <= 'Z') ? c + 32 : c;
  if ((c >= 0xC0 && c <= 0xDE && c != 0xD7)) return c + 32;
  if (c == 0x178) return 0xFF;
  if (c >= 0x100 && c <= 0x17F) {
    if (c == 0x130) return 'i';
    bool even_upper = (c <= 0x137) || (c >= 0x14A && c <= 0x177);
    bool odd_upper = (c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E);
    if (even_upper && !(c & 1)) return c + 1;
    if (odd_upper && (c & 1)) return c + 1;
    return c;
  }
  if (c >= 0x391 && c <= 0x3A9 && c != 0x3A2) return c + 32;
  if (c == 0x386) return 0x3AC;
  if (c >= 0x388 && c <= 0x38A) return c + 37;
  if (c == 0x38C) return 0x3CC;
  if (c == 0x38E || c == 0x38F) return c + 63;
  if (c >= 0x410 && c <= 0x42F) return c + 32;
  if (c >= 0x400 && c <= 0x40F) return c + 80;
  if (((c >= 0x460 && c <= 0x481) || (c >= 0x48A && c <= 0x4BF)) && !(c & 1)) return c + 1;
  if (c >= 0xFF21 && c <= 0xFF3A) return c + 32;
  return c;
}

bool is_ascii_word(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

}  // namespace

std::string js_trim(std::string_view s, bool left, bool right) {
  return strip_if(s, left, right, is_js_space);
}

std::string strip_chars(std::string_view s, std::string_view chars, bool left, bool right) {
  auto set = utf8_decode(chars);
  return strip_if(s, left, right, [&](char32_t c) {
    for (char32_t x : set)
      if (x == c) return true;
    return false;
  });
}

std::string to_upper(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : utf8_decode(s)) {
    if (c == 0xDF) {  // sharp s upper-cases to "SS"
      out += "SS";
      continue;
    }
    utf8_append(out, upper_cp(c));
  }
  return out;
}

std::string to_lower(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : utf8_decode(s)) utf8_append(out, lower_cp(c));
  return out;
}

std::string js_title(std::string_view s) {
  std::string out(s);
  for (size_t i = 0; i < out.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(out[i]);
    bool boundary = i == 0 || !is_ascii_word(static_cast<unsigned char>(out[i - 1]));
    if (boundary && c >= 'a' && c <= 'z') out[i] = static_cast<char>(c - 32);
  }
  return out;
}

std::string js_capitalize(std::string_view s) {
  auto cps = utf8_decode(s);
  if (cps.empty()) return "";
  std::string out;
  if (cps[0] == 0xDF) out += "SS";
  else utf8_append(out, upper_cp(cps[0]));
  out += utf8_encode(cps, 1);
  return out;
}

std::string js_number_to_string(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d > 0 ? "Infinity" : "-Infinity";
  if (d == 0) return "0";
  std::string sign = d < 0 ? "-" : "";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, std::fabs(d), std::chars_format::scientific);
  std::string sci(buf, r.ptr);  // d.ddde+XX
  size_t epos = sci.find('e');
  std::string digits;
  for (size_t i = 0; i < epos; ++i)
    if (sci[i] != '.') digits.push_back(sci[i]);
  int exp10 = std::stoi(sci.substr(epos + 1));
  int k = static_cast<int>(digits.size());
  int n = exp10 + 1;
  std::string out;
  if (k <= n && n <= 21) {
    out = digits + std::string(static_cast<size_t>(n - k), '0');
  } else if (0 < n && n <= 21) {
    out = digits.substr(0, static_cast<size_t>(n)) + "." + digits.substr(static_cast<size_t>(n));
  } else if (-6 < n && n <= 0) {
    out = "0." + std::string(static_cast<size_t>(-n), '0') + digits;
  } else {
    int e = n - 1;
    out = digits.substr(0, 1);
    if (k > 1) out += "." + digits.substr(1);
    out += e >= 0 ? "e+" : "e-";
    out += std::to_string(e >= 0 ? e : -e);
  }
  return sign + out;
}

std::string float_display(double d) {
  if (d == 0 && std::signbit(d)) return "-0.0";
  if (std::isfinite(d) && d == std::trunc(d) && std::fabs(d) < 1e21) {
    char buf[400];
    std::snprintf(buf, sizeof buf, "%.1f", d);
    return buf;
  }
  return js_number_to_string(d);
}

void js_json_string(std::string& out, std::string_view s, bool ensure_ascii) {
  out.push_back('"');
  char buf[16];
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
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
      continue;
    }
    if (!ensure_ascii || c < 0x7F) {
      out.push_back(static_cast<char>(c));
      continue;
    }
    if (c == 0x7F) {
      out += "\\u007f";
      continue;
    }
    // One UTF-8 sequence -> one or two \u escapes (UTF-16 units).
    size_t len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    auto cps = utf8_decode(s.substr(i, std::min(len, s.size() - i)));
    char32_t cp = cps.empty() ? 0xFFFD : cps[0];
    if (cps.size() != 1) {
      cp = 0xFFFD;
      len = 1;
    }
    i += len - 1;
    if (cp >= 0x10000) {
      uint32_t v = cp - 0x10000;
      std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x", 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF));
    } else {
      std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(cp));
    }
    out += buf;
  }
  out.push_back('"');
}

std::string html_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out.push_back(c);
    }
  }
  return out;
}

std::string py_replace(std::string_view s, std::string_view from, std::string_view to, int64_t count) {
  if (count == 0) return std::string(s);
  int64_t left = count < 0 ? INT64_MAX : count;
  std::string out;
  if (from.empty()) {
    auto cps = utf8_decode(s);
    for (size_t i = 0; i <= cps.size(); ++i) {
      if (left > 0) {
        out += to;
        --left;
      }
      if (i < cps.size()) utf8_append(out, cps[i]);
    }
    return out;
  }
  size_t pos = 0;
  while (left > 0) {
    size_t hit = s.find(from, pos);
    if (hit == std::string_view::npos) break;
    out.append(s.substr(pos, hit - pos));
    out += to;
    pos = hit + from.size();
    --left;
  }
  out.append(s.substr(pos));
  return out;
}

}  // namespace mere::jinja
