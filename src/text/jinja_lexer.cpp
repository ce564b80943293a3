// Jinja lexer (see jinja_lexer.h). The preprocessing reproduces @huggingface/jinja's regex passes
// exactly (trim_blocks/lstrip_blocks as HF sets them) while carrying a per-byte line map so that
// errors point at the line of the original template.
#include "text/jinja_lexer.h"

#include "core/error.h"
#include "text/jinja_strings.h"

namespace mere::jinja {

const char* tok_name(Tok t) {
  switch (t) {
    case Tok::Text: return "text";
    case Tok::Number: return "number";
    case Tok::String: return "string";
    case Tok::Identifier: return "identifier";
    case Tok::Equals: return "'='";
    case Tok::OpenParen: return "'('";
    case Tok::CloseParen: return "')'";
    case Tok::OpenStatement: return "'{%'";
    case Tok::CloseStatement: return "'%}'";
    case Tok::OpenExpression: return "'{{'";
    case Tok::CloseExpression: return "'}}'";
    case Tok::OpenSquare: return "'['";
    case Tok::CloseSquare: return "']'";
    case Tok::OpenCurly: return "'{'";
    case Tok::CloseCurly: return "'}'";
    case Tok::Comma: return "','";
    case Tok::Dot: return "'.'";
    case Tok::Colon: return "':'";
    case Tok::Pipe: return "'|'";
    case Tok::Additive: return "additive operator";
    case Tok::Multiplicative: return "multiplicative operator";
    case Tok::Power: return "'**'";
    case Tok::Comparison: return "comparison operator";
    case Tok::Unary: return "unary operator";
    case Tok::Comment: return "comment";
  }
  return "?";
}

namespace {

// Text plus the original line of every byte.
struct Src {
  std::string s;
  std::vector<int> line;
  void push(char c, int l) {
    s.push_back(c);
    line.push_back(l);
  }
  void append(const Src& o, size_t b, size_t e) {
    s.append(o.s, b, e - b);
    line.insert(line.end(), o.line.begin() + static_cast<long>(b), o.line.begin() + static_cast<long>(e));
  }
};

bool is_line_terminator_end(const std::string& s, size_t i) {  // does a line terminator end at i?
  if (i == 0) return true;
  char p = s[i - 1];
  if (p == '\n' || p == '\r') return true;
  return i >= 3 && static_cast<unsigned char>(s[i - 3]) == 0xE2 && static_cast<unsigned char>(s[i - 2]) == 0x80 &&
         (static_cast<unsigned char>(p) == 0xA8 || static_cast<unsigned char>(p) == 0xA9);
}

// Byte length of the JS whitespace character at i (0 when there is none).
size_t space_len(std::string_view s, size_t i) {
  if (i >= s.size()) return 0;
  unsigned char c = static_cast<unsigned char>(s[i]);
  if (c < 0x80) return ((c >= 0x09 && c <= 0x0D) || c == 0x20) ? 1 : 0;
  size_t len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
  if (i + len > s.size()) return 0;
  auto cps = utf8_decode(s.substr(i, len));
  return (cps.size() == 1 && is_js_space(cps[0])) ? len : 0;
}

Src preprocess(std::string_view source) {
  Src in;
  int line = 1;
  for (char c : source) {
    in.push(c, line);
    if (c == '\n') ++line;
  }
  if (!in.s.empty() && in.s.back() == '\n') {
    in.s.pop_back();
    in.line.pop_back();
  }
  // lstrip_blocks: /^[ \t]*({[#%-])/gm -> "$1"
  Src a;
  for (size_t i = 0; i < in.s.size();) {
    if (is_line_terminator_end(in.s, i)) {
      size_t j = i;
      while (j < in.s.size() && (in.s[j] == ' ' || in.s[j] == '\t')) ++j;
      if (j + 1 < in.s.size() && in.s[j] == '{' && (in.s[j + 1] == '#' || in.s[j + 1] == '%' || in.s[j + 1] == '-')) {
        a.append(in, j, j + 2);
        i = j + 2;
        continue;
      }
    }
    a.push(in.s[i], in.line[i]);
    ++i;
  }
  // trim_blocks: /([#%-]})\n/g -> "$1"
  Src b;
  for (size_t i = 0; i < a.s.size();) {
    char c = a.s[i];
    if ((c == '#' || c == '%' || c == '-') && i + 2 < a.s.size() && a.s[i + 1] == '}' && a.s[i + 2] == '\n') {
      b.append(a, i, i + 2);
      i += 3;
      continue;
    }
    b.push(c, a.line[i]);
    ++i;
  }
  if (b.s.find("generation") == std::string::npos) return b;
  // /(\s*){%(-?)\s*(?:end)?generation\s*(-?)%}(\s*)/gs -> (lstrip ? "" : before) + (rstrip ? "" : after)
  Src c;
  size_t copied = 0;  // b.s[copied..] not yet copied
  for (size_t i = 0; i + 1 < b.s.size(); ++i) {
    if (b.s[i] != '{' || b.s[i + 1] != '%') continue;
    size_t j = i + 2;
    bool lstrip = j < b.s.size() && b.s[j] == '-';
    if (lstrip) ++j;
    while (size_t n = space_len(b.s, j)) j += n;
    if (b.s.compare(j, 3, "end") == 0) j += 3;
    if (b.s.compare(j, 10, "generation") != 0) continue;
    j += 10;
    while (size_t n = space_len(b.s, j)) j += n;
    bool rstrip = j < b.s.size() && b.s[j] == '-';
    if (rstrip) ++j;
    if (b.s.compare(j, 2, "%}") != 0) continue;
    j += 2;
    // Leading whitespace run (not reaching into what an earlier match consumed).
    size_t ws_begin = i;
    while (ws_begin > copied) {
      size_t k = ws_begin - 1;
      while (k > copied && (static_cast<unsigned char>(b.s[k]) & 0xC0) == 0x80) --k;
      if (space_len(b.s, k) != ws_begin - k) break;
      ws_begin = k;
    }
    size_t ws_end = j;
    while (size_t n = space_len(b.s, ws_end)) ws_end += n;
    c.append(b, copied, ws_begin);
    if (!lstrip) c.append(b, ws_begin, i);
    if (!rstrip) c.append(b, j, ws_end);
    copied = ws_end;
    i = ws_end - 1;
  }
  c.append(b, copied, b.s.size());
  return c;
}

class Lexer {
 public:
  Lexer(Src src, std::string_view name) : src_(std::move(src)), s_(src_.s), name_(name) {}

  std::vector<Token> run() {
    while (pos_ < s_.size()) step();
    return std::move(tokens_);
  }

 private:
  Src src_;
  const std::string& s_;
  std::string_view name_;
  size_t pos_ = 0;
  int curly_ = 0;
  std::vector<Token> tokens_;

  [[noreturn]] void error(const std::string& what) const {
    int line = src_.line.empty() ? 1 : src_.line[std::min(pos_, src_.line.size() - 1)];
    fail("jinja", cat(name_, ":", line, ": ", what));
  }
  int line_at(size_t p) const { return src_.line.empty() ? 1 : src_.line[std::min(p, src_.line.size() - 1)]; }
  bool at(std::string_view lit) const { return s_.compare(pos_, lit.size(), lit) == 0; }
  Tok last() const { return tokens_.back().type; }
  void push(Tok t, std::string v, size_t start) { tokens_.push_back(Token{t, std::move(v), line_at(start)}); }

  void strip_trailing_whitespace() {
    if (tokens_.empty() || last() != Tok::Text) return;
    tokens_.back().value = js_trim(tokens_.back().value, false, true);
    if (tokens_.back().value.empty()) tokens_.pop_back();
  }
  void skip_whitespace() {
    while (size_t n = space_len(s_, pos_)) pos_ += n;
  }
  static bool is_digit(char c) { return c >= '0' && c <= '9'; }
  static bool is_word(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || is_digit(c) || c == '_';
  }
  std::string digits() {
    size_t b = pos_;
    while (pos_ < s_.size() && is_digit(s_[pos_])) ++pos_;
    return s_.substr(b, pos_ - b);
  }

  void step() {
    if (tokens_.empty() || last() == Tok::CloseStatement || last() == Tok::CloseExpression || last() == Tok::Comment) {
      size_t b = pos_;
      while (pos_ < s_.size() &&
             !(s_[pos_] == '{' && pos_ + 1 < s_.size() && (s_[pos_ + 1] == '%' || s_[pos_ + 1] == '{' || s_[pos_ + 1] == '#')))
        ++pos_;
      if (pos_ > b) {
        push(Tok::Text, s_.substr(b, pos_ - b), b);
        return;
      }
    }
    if (at("{#")) {
      size_t b = pos_;
      pos_ += 2;
      bool strip_before = pos_ < s_.size() && s_[pos_] == '-';
      if (strip_before) ++pos_;
      size_t end = s_.find("#}", pos_);
      if (end == std::string::npos) error("unterminated comment: expected '#}'");
      std::string body = s_.substr(pos_, end - pos_);
      bool strip_after = !body.empty() && body.back() == '-';
      if (strip_after) body.pop_back();
      if (strip_before) strip_trailing_whitespace();
      push(Tok::Comment, body, b);
      pos_ = end + 2;
      if (strip_after) skip_whitespace();
      return;
    }
    if (at("{%-")) {
      strip_trailing_whitespace();
      push(Tok::OpenStatement, "{%", pos_);
      pos_ += 3;
      return;
    }
    if (at("{{-")) {
      strip_trailing_whitespace();
      push(Tok::OpenExpression, "{{", pos_);
      curly_ = 0;
      pos_ += 3;
      return;
    }
    skip_whitespace();
    if (pos_ >= s_.size()) return;
    if (at("-%}")) {
      push(Tok::CloseStatement, "%}", pos_);
      pos_ += 3;
      skip_whitespace();
      return;
    }
    if (at("-}}")) {
      push(Tok::CloseExpression, "}}", pos_);
      pos_ += 3;
      skip_whitespace();
      return;
    }
    size_t start = pos_;
    char c = s_[pos_];
    if (c == '-' || c == '+') {
      if (tokens_.empty() || last() == Tok::Text) error(cat("unexpected character '", c, "'"));
      Tok l = last();
      bool binary = l == Tok::Identifier || l == Tok::Number || l == Tok::String || l == Tok::CloseParen ||
                    l == Tok::CloseSquare;
      if (!binary) {
        ++pos_;
        std::string num = digits();
        if (!num.empty() && pos_ + 1 < s_.size() && s_[pos_] == '.' && is_digit(s_[pos_ + 1])) {
          ++pos_;
          num += "." + digits();
        }
        if (num.empty()) push(Tok::Unary, std::string(1, c), start);
        else push(Tok::Number, std::string(1, c) + num, start);
        return;
      }
    }
    static const std::pair<const char*, Tok> table[] = {
        {"{%", Tok::OpenStatement}, {"%}", Tok::CloseStatement}, {"{{", Tok::OpenExpression},
        {"}}", Tok::CloseExpression}, {"(", Tok::OpenParen},       {")", Tok::CloseParen},
        {"{", Tok::OpenCurly},        {"}", Tok::CloseCurly},       {"[", Tok::OpenSquare},
        {"]", Tok::CloseSquare},      {",", Tok::Comma},            {".", Tok::Dot},
        {":", Tok::Colon},            {"|", Tok::Pipe},             {"<=", Tok::Comparison},
        {">=", Tok::Comparison},      {"==", Tok::Comparison},      {"!=", Tok::Comparison},
        {"<", Tok::Comparison},       {">", Tok::Comparison},       {"+", Tok::Additive},
        {"-", Tok::Additive},         {"~", Tok::Additive},         {"**", Tok::Power},
        {"*", Tok::Multiplicative},   {"//", Tok::Multiplicative},  {"/", Tok::Multiplicative},
        {"%", Tok::Multiplicative},   {"=", Tok::Equals},
    };
    for (const auto& [seq, type] : table) {
      if (type == Tok::CloseExpression && curly_ > 0) continue;
      if (!at(seq)) continue;
      push(type, seq, start);
      if (type == Tok::OpenExpression) curly_ = 0;
      else if (type == Tok::OpenCurly) ++curly_;
      else if (type == Tok::CloseCurly) --curly_;
      pos_ += std::string_view(seq).size();
      return;
    }
    if (c == '\'' || c == '"') {
      ++pos_;
      push(Tok::String, string_body(c), start);
      return;
    }
    if (is_digit(c)) {
      std::string num = digits();
      if (last() != Tok::Dot && pos_ + 1 < s_.size() && s_[pos_] == '.' && is_digit(s_[pos_ + 1])) {
        ++pos_;
        num += "." + digits();
      }
      push(Tok::Number, num, start);
      return;
    }
    if (is_word(c)) {
      while (pos_ < s_.size() && is_word(s_[pos_])) ++pos_;
      push(Tok::Identifier, s_.substr(start, pos_ - start), start);
      return;
    }
    size_t len = 1;
    while (pos_ + len < s_.size() && (static_cast<unsigned char>(s_[pos_ + len]) & 0xC0) == 0x80) ++len;
    error(cat("unexpected character '", s_.substr(pos_, len), "'"));
  }

  uint32_t hex(size_t len) {
    if (pos_ + len > s_.size()) error("invalid hexadecimal escape sequence");
    uint32_t v = 0;
    for (size_t k = 0; k < len; ++k) {
      char h = s_[pos_ + k];
      int d = is_digit(h) ? h - '0' : (h >= 'a' && h <= 'f') ? h - 'a' + 10 : (h >= 'A' && h <= 'F') ? h - 'A' + 10 : -1;
      if (d < 0) error(cat("invalid hexadecimal escape sequence: \\", s_.substr(pos_ - 1, len + 1)));
      v = v * 16 + static_cast<uint32_t>(d);
    }
    pos_ += len;
    return v;
  }

  std::string string_body(char quote) {
    std::string out;
    uint32_t pending_high = 0;  // UTF-16 high surrogate from a \u escape
    auto flush_high = [&]() {
      if (pending_high) utf8_append(out, 0xFFFD);
      pending_high = 0;
    };
    while (true) {
      if (pos_ >= s_.size()) error(cat("unterminated string literal: expected closing ", quote));
      char c = s_[pos_];
      if (c == quote) break;
      if (c != '\\') {
        flush_high();
        out.push_back(c);
        ++pos_;
        continue;
      }
      ++pos_;
      if (pos_ >= s_.size()) error("unterminated string literal");
      char e = s_[pos_++];
      if (e == 'x' || e == 'u') {
        uint32_t v = hex(e == 'x' ? 2 : 4);
        if (v >= 0xD800 && v < 0xDC00) {
          flush_high();
          pending_high = v;
          continue;
        }
        if (v >= 0xDC00 && v < 0xE000) {
          if (pending_high) v = 0x10000 + ((pending_high - 0xD800) << 10) + (v - 0xDC00);
          else v = 0xFFFD;
          pending_high = 0;
        }
        flush_high();
        utf8_append(out, v);
        continue;
      }
      flush_high();
      switch (e) {
        case 'n': out.push_back('\n'); break;
        case 't': out.push_back('\t'); break;
        case 'r': out.push_back('\r'); break;
        case 'b': out.push_back('\b'); break;
        case 'f': out.push_back('\f'); break;
        case 'v': out.push_back('\v'); break;
        case '\'': out.push_back('\''); break;
        case '"': out.push_back('"'); break;
        case '\\': out.push_back('\\'); break;
        default: error(cat("unsupported escape sequence '\\", e, "' in string literal"));
      }
    }
    flush_high();
    ++pos_;  // closing quote
    return out;
  }
};

}  // namespace

std::vector<Token> tokenize(std::string_view source, std::string_view name) {
  return Lexer(preprocess(source), name).run();
}

}  // namespace mere::jinja
