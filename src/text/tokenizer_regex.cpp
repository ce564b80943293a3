// Backtracking regex matcher for pre-tokenizer patterns. The pattern is parsed into a small AST and
// compiled into a graph of nodes in continuation style (each node knows what follows it), so the
// matcher recurses only at choice points; quantified single-character atoms loop in place.
#include "text/tokenizer_regex.h"

#include <array>
#include <cctype>
#include <bitset>

#include "core/error.h"
#include "text/unicode.h"

namespace mere::text {

namespace {

using unicode::Category;

constexpr int kMaxDepth = 4000;  // choice points active at once (only nested group repeats grow it)

struct CharSet {
  bool negated = false;
  std::bitset<256> records;  // property records (category / White_Space) in the set
  std::vector<std::pair<char32_t, char32_t>> ranges;
  std::array<bool, 128> ascii{};  // final answer (negation applied) for ASCII

  bool test_slow(char32_t c) const {
    bool in = records.test(unicode::record_index(c));
    if (!in)
      for (const auto& r : ranges)
        if (c >= r.first && c <= r.second) {
          in = true;
          break;
        }
    return in != negated;
  }
  void finish() {
    for (char32_t c = 0; c < 128; ++c) ascii[c] = test_slow(c);
  }
  bool test(char32_t c) const { return c < 128 ? ascii[c] : test_slow(c); }
};

enum class AssertKind : uint8_t { Bol, Eol, Begin, End, EndNl, WordB, NotWordB };

struct Ast {
  enum Kind : uint8_t { Empty, Set, Concat, Alt, Repeat, Look, Atomic, Assert } kind = Empty;
  int set = -1;
  std::vector<Ast> kids;
  int min = 0, max = -1;  // Repeat; max < 0: unbounded
  bool greedy = true, possessive = false, negative = false;
  AssertKind assert_kind = AssertKind::Bol;
};

enum class Op : uint8_t { Set, RepeatSet, Alt, Loop, LoopTail, Look, Atomic, SubEnd, Assert, Match };

struct Node {
  Op op = Op::Match;
  bool greedy = true, negative = false;
  AssertKind assert_kind = AssertKind::Bol;
  int next = -1, set = -1, body = -1, loop = -1;  // loop: loop slot (Loop) / Loop node (LoopTail)
  int min = 0, max = -1;
  std::vector<int> alts;
};

// ------------------------------------------------------------------ parser

class Parser {
 public:
  Parser(std::string_view pattern, std::vector<CharSet>& sets) : pat_(pattern), sets_(sets) {}

  Ast parse() {
    Ast a = parse_alt(false);
    if (pos_ < pat_.size()) error("unbalanced ')'", "");
    return a;
  }

 private:
  std::string_view pat_;
  std::vector<CharSet>& sets_;
  size_t pos_ = 0;

  [[noreturn]] void error(std::string_view what, std::string_view got) const {
    fail("regex", cat(what, got.empty() ? "" : ": got ", got, " at offset ", pos_, " in pattern \"", pat_, "\""));
  }
  [[noreturn]] void unsupported(std::string_view construct) const {
    fail("regex", cat("unsupported construct ", construct, " at offset ", pos_, " in pattern \"", pat_,
                      "\": expected literals, classes, \\p{L|M|N|...}, \\s \\d \\w, quantifiers, groups, "
                      "(?i:...), lookahead or atomic groups"));
  }
  bool eof() const { return pos_ >= pat_.size(); }
  char peek() const { return eof() ? '\0' : pat_[pos_]; }
  bool lookahead(std::string_view s) const { return pat_.substr(pos_, s.size()) == s; }

  char32_t next_cp() {
    auto* p = reinterpret_cast<const unsigned char*>(pat_.data()) + pos_;
    auto* end = reinterpret_cast<const unsigned char*>(pat_.data()) + pat_.size();
    unicode::Utf8Step st = unicode::utf8_step(p, end);
    if (!st.valid) error("invalid UTF-8 in pattern", "");
    pos_ += st.len;
    return st.cp;
  }

  int add_set(CharSet s) {
    s.finish();
    sets_.push_back(std::move(s));
    return static_cast<int>(sets_.size()) - 1;
  }
  static void add_categories(CharSet& s, uint32_t mask, bool negate) {
    for (int r = 0; r < unicode::record_count(); ++r) {
      bool in = mask >> static_cast<int>(unicode::record_category(static_cast<uint8_t>(r))) & 1;
      if (in != negate) s.records.set(r);
    }
  }
  static void add_white(CharSet& s, bool negate) {
    for (int r = 0; r < unicode::record_count(); ++r)
      if (unicode::record_white_space(static_cast<uint8_t>(r)) != negate) s.records.set(r);
  }
  static uint32_t bits(std::initializer_list<Category> cs) {
    uint32_t m = 0;
    for (auto c : cs) m |= 1u << static_cast<int>(c);
    return m;
  }
  static uint32_t range_bits(Category a, Category b) {
    uint32_t m = 0;
    for (int i = static_cast<int>(a); i <= static_cast<int>(b); ++i) m |= 1u << i;
    return m;
  }
  static uint32_t word_bits() {
    return range_bits(Category::Lu, Category::Nd) | bits({Category::Nl, Category::Pc});
  }

  // Adds the class item for an escape like \s \d \w \p{L}; returns false when c is not one.
  bool add_class_escape(CharSet& s, char c) {
    switch (c) {
      case 's': add_white(s, false); return true;
      case 'S': add_white(s, true); return true;
      case 'd': add_categories(s, bits({Category::Nd}), false); return true;
      case 'D': add_categories(s, bits({Category::Nd}), true); return true;
      case 'w': add_categories(s, word_bits(), false); return true;
      case 'W': add_categories(s, word_bits(), true); return true;
      case 'h':
        s.ranges.push_back({'0', '9'});
        s.ranges.push_back({'a', 'f'});
        s.ranges.push_back({'A', 'F'});
        return true;
      case 'p':
      case 'P': add_property(s, c == 'P'); return true;
      default: return false;
    }
  }

  void add_property(CharSet& s, bool negate) {
    if (peek() != '{') error("expected '{' after \\p", std::string(1, peek()));
    size_t close = pat_.find('}', pos_);
    if (close == std::string_view::npos) error("unterminated \\p{", "");
    std::string raw(pat_.substr(pos_ + 1, close - pos_ - 1));
    pos_ = close + 1;
    std::string name;
    for (char ch : raw) {
      if (ch == '^' && name.empty()) {
        negate = !negate;
        continue;
      }
      if (ch == '_' || ch == ' ' || ch == '-') continue;
      name.push_back(static_cast<char>(ch >= 'A' && ch <= 'Z' ? ch - 'A' + 'a' : ch));
    }
    struct Named {
      const char* a;
      const char* b;
      uint32_t mask;
    };
    const Named table[] = {
        {"l", "letter", range_bits(Category::Lu, Category::Lo)},
        {"lc", "casedletter", bits({Category::Lu, Category::Ll, Category::Lt})},
        {"lu", "uppercaseletter", bits({Category::Lu})},
        {"ll", "lowercaseletter", bits({Category::Ll})},
        {"lt", "titlecaseletter", bits({Category::Lt})},
        {"lm", "modifierletter", bits({Category::Lm})},
        {"lo", "otherletter", bits({Category::Lo})},
        {"m", "mark", range_bits(Category::Mn, Category::Me)},
        {"mn", "nonspacingmark", bits({Category::Mn})},
        {"mc", "spacingmark", bits({Category::Mc})},
        {"me", "enclosingmark", bits({Category::Me})},
        {"n", "number", range_bits(Category::Nd, Category::No)},
        {"nd", "decimalnumber", bits({Category::Nd})},
        {"nl", "letternumber", bits({Category::Nl})},
        {"no", "othernumber", bits({Category::No})},
        {"p", "punctuation", range_bits(Category::Pc, Category::Po)},
        {"pc", "connectorpunctuation", bits({Category::Pc})},
        {"pd", "dashpunctuation", bits({Category::Pd})},
        {"ps", "openpunctuation", bits({Category::Ps})},
        {"pe", "closepunctuation", bits({Category::Pe})},
        {"pi", "initialpunctuation", bits({Category::Pi})},
        {"pf", "finalpunctuation", bits({Category::Pf})},
        {"po", "otherpunctuation", bits({Category::Po})},
        {"s", "symbol", range_bits(Category::Sm, Category::So)},
        {"sm", "mathsymbol", bits({Category::Sm})},
        {"sc", "currencysymbol", bits({Category::Sc})},
        {"sk", "modifiersymbol", bits({Category::Sk})},
        {"so", "othersymbol", bits({Category::So})},
        {"z", "separator", range_bits(Category::Zs, Category::Zp)},
        {"zs", "spaceseparator", bits({Category::Zs})},
        {"zl", "lineseparator", bits({Category::Zl})},
        {"zp", "paragraphseparator", bits({Category::Zp})},
        {"c", "other", bits({Category::Cn, Category::Cc, Category::Cf, Category::Cs, Category::Co})},
        {"cc", "control", bits({Category::Cc})},
        {"cf", "format", bits({Category::Cf})},
        {"cs", "surrogate", bits({Category::Cs})},
        {"co", "privateuse", bits({Category::Co})},
        {"cn", "unassigned", bits({Category::Cn})},
        {"any", "any", ~0u},
        {"assigned", "assigned", ~bits({Category::Cn})},
    };
    for (const auto& t : table)
      if (name == t.a || name == t.b) {
        add_categories(s, t.mask, negate);
        return;
      }
    if (name == "whitespace" || name == "space") {
      add_white(s, negate);
      return;
    }
    unsupported(cat("Unicode property \\p{", raw, "} (only general categories, Any, Assigned, White_Space)"));
  }

  // Escaped literal (after the backslash has been consumed and it is not a class escape).
  char32_t escape_literal(char c) {
    switch (c) {
      case 'n': return '\n';
      case 'r': return '\r';
      case 't': return '\t';
      case 'f': return '\f';
      case 'v': return '\v';
      case 'a': return 0x07;
      case 'e': return 0x1B;
      case '0': return 0;
      case 'x': {
        size_t digits = 2;
        bool braced = peek() == '{';
        if (braced) {
          ++pos_;
          digits = 8;
        }
        char32_t v = 0;
        size_t n = 0;
        while (n < digits && !eof() && std::isxdigit(static_cast<unsigned char>(peek()))) {
          char h = pat_[pos_++];
          v = v * 16 + static_cast<char32_t>(std::isdigit(static_cast<unsigned char>(h)) ? h - '0' : (h | 0x20) - 'a' + 10);
          ++n;
        }
        if (n == 0) error("expected hex digits after \\x", std::string(1, peek()));
        if (braced) {
          if (peek() != '}') error("expected '}' closing \\x{", std::string(1, peek()));
          ++pos_;
        }
        if (v > 0x10FFFF) error("code point out of range", "");
        return v;
      }
      case 'u': {
        char32_t v = 0;
        for (int i = 0; i < 4; ++i) {
          if (eof() || !std::isxdigit(static_cast<unsigned char>(peek()))) error("expected 4 hex digits after \\u", "");
          char h = pat_[pos_++];
          v = v * 16 + static_cast<char32_t>(std::isdigit(static_cast<unsigned char>(h)) ? h - '0' : (h | 0x20) - 'a' + 10);
        }
        return v;
      }
      default: break;
    }
    if ((c >= '1' && c <= '9') || c == 'k' || c == 'g') unsupported(cat("backreference/subroutine \\", c));
    if (std::isalnum(static_cast<unsigned char>(c))) unsupported(cat("escape \\", c));
    return static_cast<char32_t>(static_cast<unsigned char>(c));
  }

  static void add_char(CharSet& s, char32_t c, bool icase) {
    if (icase) {
      for (char32_t v : unicode::case_variants(c)) s.ranges.push_back({v, v});
    } else {
      s.ranges.push_back({c, c});
    }
  }
  static void add_range(CharSet& s, char32_t a, char32_t b, bool icase) {
    s.ranges.push_back({a, b});
    if (icase && b - a <= 2048)
      for (char32_t c = a; c <= b; ++c)
        for (char32_t v : unicode::case_variants(c))
          if (v < a || v > b) s.ranges.push_back({v, v});
  }

  Ast set_ast(CharSet s) {
    Ast a;
    a.kind = Ast::Set;
    a.set = add_set(std::move(s));
    return a;
  }

  Ast parse_class(bool icase) {
    ++pos_;  // '['
    CharSet s;
    if (peek() == '^') {
      s.negated = true;
      ++pos_;
    }
    bool first = true;
    for (;;) {
      if (eof()) error("unterminated character class", "");
      char c = peek();
      if (c == ']' && !first) {
        ++pos_;
        break;
      }
      first = false;
      if (c == '[') unsupported(lookahead("[:") ? "POSIX bracket [:...:]" : "nested character class [[...]]");
      if (lookahead("&&")) unsupported("class intersection &&");
      char32_t lo;
      if (c == '\\') {
        ++pos_;
        if (eof()) error("trailing backslash", "");
        char e = pat_[pos_++];
        if (add_class_escape(s, e)) continue;
        if (e == 'b') {
          lo = 0x08;
        } else {
          lo = escape_literal(e);
        }
      } else {
        lo = next_cp();
      }
      if (peek() == '-' && pos_ + 1 < pat_.size() && pat_[pos_ + 1] != ']') {
        ++pos_;
        char32_t hi;
        if (peek() == '\\') {
          ++pos_;
          if (eof()) error("trailing backslash", "");
          char e = pat_[pos_++];
          if (e == 's' || e == 'S' || e == 'd' || e == 'D' || e == 'w' || e == 'W' || e == 'p' || e == 'P' || e == 'h')
            error("class escape cannot end a range", cat("\\", e));
          hi = escape_literal(e);
        } else {
          if (peek() == '[') unsupported("nested character class [[...]]");
          hi = next_cp();
        }
        if (hi < lo) error("character class range out of order", "");
        add_range(s, lo, hi, icase);
      } else {
        add_char(s, lo, icase);
      }
    }
    return set_ast(std::move(s));
  }

  Ast parse_group(bool icase) {
    size_t start = pos_;
    ++pos_;  // '('
    Ast a;
    if (peek() != '?') {
      a = parse_alt(icase);  // capturing group: captures are not needed
    } else {
      ++pos_;
      char c = peek();
      if (c == ':') {
        ++pos_;
        a = parse_alt(icase);
      } else if (c == '=' || c == '!') {
        ++pos_;
        a.kind = Ast::Look;
        a.negative = c == '!';
        a.kids.push_back(parse_alt(icase));
      } else if (c == '>') {
        ++pos_;
        a.kind = Ast::Atomic;
        a.kids.push_back(parse_alt(icase));
      } else if (lookahead("<=") || lookahead("<!")) {
        pos_ = start;
        unsupported("lookbehind (?<=...) / (?<!...)");
      } else if (c == '<' || c == 'P' || c == '\'') {
        // named capturing group (?<name>...) / (?P<name>...) / (?'name'...)
        if (c == 'P') ++pos_;
        char close = peek() == '\'' ? '\'' : '>';
        size_t e = pat_.find(close, pos_ + 1);
        if (e == std::string_view::npos) error("unterminated group name", "");
        pos_ = e + 1;
        a = parse_alt(icase);
      } else if (c == '#') {
        size_t e = pat_.find(')', pos_);
        if (e == std::string_view::npos) error("unterminated comment group", "");
        pos_ = e + 1;
        return Ast{};
      } else {
        // Option flags: (?i) (?-i) (?i:...) (?i-x:...); only i is supported (x/m change syntax).
        bool on = true, new_icase = icase;
        while (!eof() && peek() != ':' && peek() != ')') {
          char f = pat_[pos_++];
          if (f == '-') {
            on = false;
          } else if (f == 'i') {
            new_icase = on;
          } else {
            pos_ = start;
            unsupported(cat("option flag '", f, "' in (?", f, "...)"));
          }
        }
        if (eof()) error("unterminated group", "");
        if (peek() == ')') {
          // (?i) alone: applies to the rest of the enclosing group; the caller handles it.
          ++pos_;
          Ast flag;
          flag.kind = Ast::Empty;
          flag.min = new_icase ? 1 : 0;
          flag.max = -2;  // marker: option switch
          return flag;
        }
        ++pos_;  // ':'
        a = parse_alt(new_icase);
      }
    }
    if (peek() != ')') error("expected ')'", eof() ? "end of pattern" : std::string(1, peek()));
    ++pos_;
    return a;
  }

  Ast parse_atom(bool icase) {
    char c = peek();
    switch (c) {
      case '(': return parse_group(icase);
      case '[': return parse_class(icase);
      case '.': {
        ++pos_;
        CharSet s;
        s.negated = true;
        s.ranges.push_back({'\n', '\n'});
        return set_ast(std::move(s));
      }
      case '^':
      case '$': {
        ++pos_;
        Ast a;
        a.kind = Ast::Assert;
        a.assert_kind = c == '^' ? AssertKind::Bol : AssertKind::Eol;
        return a;
      }
      case '*':
      case '+':
      case '?':
        error("quantifier without a target", std::string(1, c));
      case '{':
        if (pos_ + 1 < pat_.size() && (std::isdigit(static_cast<unsigned char>(pat_[pos_ + 1])) || pat_[pos_ + 1] == ','))
          error("quantifier without a target", "{");
        break;
      case '\\': {
        ++pos_;
        if (eof()) error("trailing backslash", "");
        char e = pat_[pos_++];
        Ast a;
        a.kind = Ast::Assert;
        switch (e) {
          case 'A': a.assert_kind = AssertKind::Begin; return a;
          case 'z': a.assert_kind = AssertKind::End; return a;
          case 'Z': a.assert_kind = AssertKind::EndNl; return a;
          case 'b': a.assert_kind = AssertKind::WordB; return a;
          case 'B': a.assert_kind = AssertKind::NotWordB; return a;
          case 'G': unsupported("\\G");
          case 'K': unsupported("\\K");
          case 'R': unsupported("\\R");
          case 'X': unsupported("\\X");
          default: break;
        }
        CharSet s;
        if (add_class_escape(s, e)) return set_ast(std::move(s));
        add_char(s, escape_literal(e), icase);
        return set_ast(std::move(s));
      }
      default: break;
    }
    CharSet s;
    add_char(s, next_cp(), icase);
    return set_ast(std::move(s));
  }

  bool parse_int(int* v) {
    if (eof() || !std::isdigit(static_cast<unsigned char>(peek()))) return false;
    long n = 0;
    while (!eof() && std::isdigit(static_cast<unsigned char>(peek()))) {
      n = n * 10 + (pat_[pos_++] - '0');
      if (n > 100000) error("repeat count too large", "");
    }
    *v = static_cast<int>(n);
    return true;
  }

  // Parses a quantifier after an atom if there is one; returns false otherwise.
  bool parse_quantifier(int* min, int* max, bool* greedy, bool* possessive) {
    char c = peek();
    *greedy = true;
    *possessive = false;
    bool braces = false;
    if (c == '*') {
      *min = 0, *max = -1;
    } else if (c == '+') {
      *min = 1, *max = -1;
    } else if (c == '?') {
      *min = 0, *max = 1;
    } else if (c == '{') {
      size_t save = pos_;
      ++pos_;
      int lo = 0, hi = -1;
      bool has_lo = parse_int(&lo);
      if (peek() == ',') {
        ++pos_;
        if (!parse_int(&hi)) hi = -1;
      } else {
        hi = lo;
      }
      if (peek() != '}' || (!has_lo && hi < 0)) {  // not a quantifier: literal '{' (Oniguruma)
        pos_ = save;
        return false;
      }
      if (hi >= 0 && hi < lo) error("repeat range out of order", "");
      *min = lo, *max = hi;
      braces = true;
    } else {
      return false;
    }
    ++pos_;
    if (peek() == '?') {
      *greedy = false;
      ++pos_;
    } else if (peek() == '+' && !braces) {
      *possessive = true;
      ++pos_;
    }
    return true;
  }

  Ast parse_seq(bool icase) {
    Ast seq;
    seq.kind = Ast::Concat;
    while (!eof() && peek() != '|' && peek() != ')') {
      Ast atom = parse_atom(icase);
      if (atom.kind == Ast::Empty && atom.max == -2) {
        // (?i) / (?-i): the rest of the group, alternatives included, is parsed with the new option.
        seq.kids.push_back(parse_alt(atom.min == 1));
        break;
      }
      int min, max;
      bool greedy, possessive;
      while (parse_quantifier(&min, &max, &greedy, &possessive)) {
        if (atom.kind == Ast::Assert || atom.kind == Ast::Look) error("quantifier after an assertion", "");
        Ast r;
        r.kind = Ast::Repeat;
        r.min = min, r.max = max, r.greedy = greedy, r.possessive = possessive;
        r.kids.push_back(std::move(atom));
        atom = std::move(r);
      }
      seq.kids.push_back(std::move(atom));
    }
    if (seq.kids.size() == 1) return std::move(seq.kids[0]);
    return seq;
  }

  Ast parse_alt(bool icase) {
    Ast first = parse_seq(icase);
    if (peek() != '|') return first;
    Ast alt;
    alt.kind = Ast::Alt;
    alt.kids.push_back(std::move(first));
    while (peek() == '|') {
      ++pos_;
      alt.kids.push_back(parse_seq(icase));
    }
    return alt;
  }
};

}  // namespace

// ------------------------------------------------------------------ compiled program + matcher

struct Regex::Impl {
  std::string pattern;
  std::vector<CharSet> sets;
  std::vector<Node> nodes;
  int start = -1;
  int loops = 0;

  int add(Node n) {
    nodes.push_back(std::move(n));
    return static_cast<int>(nodes.size()) - 1;
  }

  int emit(const Ast& a, int next) {
    switch (a.kind) {
      case Ast::Empty: return next;
      case Ast::Set: {
        Node n;
        n.op = Op::Set;
        n.set = a.set;
        n.next = next;
        return add(std::move(n));
      }
      case Ast::Concat:
        for (size_t i = a.kids.size(); i-- > 0;) next = emit(a.kids[i], next);
        return next;
      case Ast::Alt: {
        Node n;
        n.op = Op::Alt;
        for (const auto& k : a.kids) n.alts.push_back(emit(k, next));
        return add(std::move(n));
      }
      case Ast::Assert: {
        Node n;
        n.op = Op::Assert;
        n.assert_kind = a.assert_kind;
        n.next = next;
        return add(std::move(n));
      }
      case Ast::Look:
      case Ast::Atomic: {
        Node end;
        end.op = Op::SubEnd;
        int body = emit(a.kids[0], add(std::move(end)));
        Node n;
        n.op = a.kind == Ast::Look ? Op::Look : Op::Atomic;
        n.negative = a.negative;
        n.body = body;
        n.next = next;
        return add(std::move(n));
      }
      case Ast::Repeat: {
        if (a.possessive) {
          Ast inner = a;
          inner.possessive = false;
          Ast atomic;
          atomic.kind = Ast::Atomic;
          atomic.kids.push_back(std::move(inner));
          return emit(atomic, next);
        }
        const Ast& kid = a.kids[0];
        if (a.max == 0) return next;
        if (kid.kind == Ast::Set) {
          Node n;
          n.op = Op::RepeatSet;
          n.set = kid.set;
          n.min = a.min, n.max = a.max, n.greedy = a.greedy;
          n.next = next;
          return add(std::move(n));
        }
        Node loop;
        loop.op = Op::Loop;
        loop.loop = loops++;
        loop.min = a.min, loop.max = a.max, loop.greedy = a.greedy;
        loop.next = next;
        int li = add(std::move(loop));
        Node tail;
        tail.op = Op::LoopTail;
        tail.loop = li;
        int ti = add(std::move(tail));
        int body = emit(kid, ti);
        nodes[li].body = body;
        return li;
      }
    }
    return next;
  }

  struct Ctx {
    const unsigned char* begin = nullptr;
    const unsigned char* end = nullptr;
    const unsigned char* match_end = nullptr;
    const unsigned char* sub_end = nullptr;
    std::vector<int> loop_count;
    std::vector<const unsigned char*> loop_pos;
    int depth = 0;
  };

  static bool word_at(const unsigned char* p, const Ctx& c) {
    if (p >= c.end) return false;
    char32_t cp;
    unicode::utf8_decode_valid(p, &cp);
    return unicode::is_word(cp);
  }
  static bool word_before(const unsigned char* p, const Ctx& c) {
    if (p <= c.begin) return false;
    const unsigned char* q = p - 1;
    while (q > c.begin && (*q & 0xC0) == 0x80) --q;
    return word_at(q, c);
  }

  bool check_assert(AssertKind k, const unsigned char* p, const Ctx& c) const {
    switch (k) {
      case AssertKind::Bol: return p == c.begin || p[-1] == '\n';
      case AssertKind::Eol: return p == c.end || *p == '\n';
      case AssertKind::Begin: return p == c.begin;
      case AssertKind::End: return p == c.end;
      case AssertKind::EndNl: return p == c.end || (p + 1 == c.end && *p == '\n');
      case AssertKind::WordB: return word_before(p, c) != word_at(p, c);
      case AssertKind::NotWordB: return word_before(p, c) == word_at(p, c);
    }
    return false;
  }

  // One character of set s at p: its length, or 0 when it does not match.
  static int one(const CharSet& s, const unsigned char* p, const unsigned char* end) {
    if (p >= end) return 0;
    if (*p < 0x80) return s.ascii[*p] ? 1 : 0;
    char32_t cp;
    int len = unicode::utf8_decode_valid(p, &cp);
    return s.test_slow(cp) ? len : 0;
  }

  struct DepthGuard {
    Ctx& c;
    explicit DepthGuard(Ctx& ctx) : c(ctx) {
      if (++c.depth > kMaxDepth) fail("regex", cat("match needs more than ", kMaxDepth, " nested backtracking points"));
    }
    ~DepthGuard() { --c.depth; }
  };

  bool run(int n, const unsigned char* p, Ctx& c) const {
    DepthGuard guard(c);
    for (;;) {
      const Node& nd = nodes[n];
      switch (nd.op) {
        case Op::Match:
          c.match_end = p;
          return true;
        case Op::SubEnd:
          c.sub_end = p;
          return true;
        case Op::Set: {
          int len = one(sets[nd.set], p, c.end);
          if (!len) return false;
          p += len;
          n = nd.next;
          continue;
        }
        case Op::Assert:
          if (!check_assert(nd.assert_kind, p, c)) return false;
          n = nd.next;
          continue;
        case Op::RepeatSet: {
          const CharSet& s = sets[nd.set];
          const unsigned char* q = p;
          long count = 0;
          if (nd.greedy) {
            int len;
            while ((nd.max < 0 || count < nd.max) && (len = one(s, q, c.end)) != 0) {
              q += len;
              ++count;
            }
            if (count < nd.min) return false;
            if (nodes[nd.next].op == Op::Match) {  // nothing after: the longest run wins
              c.match_end = q;
              return true;
            }
            for (;;) {
              if (run(nd.next, q, c)) return true;
              if (count == nd.min) return false;
              do --q;
              while ((*q & 0xC0) == 0x80);
              --count;
            }
          }
          for (; count < nd.min; ++count) {
            int len = one(s, q, c.end);
            if (!len) return false;
            q += len;
          }
          for (;;) {
            if (run(nd.next, q, c)) return true;
            if (nd.max >= 0 && count >= nd.max) return false;
            int len = one(s, q, c.end);
            if (!len) return false;
            q += len;
            ++count;
          }
        }
        case Op::Alt: {
          for (size_t i = 0; i + 1 < nd.alts.size(); ++i)
            if (run(nd.alts[i], p, c)) return true;
          n = nd.alts.back();
          continue;
        }
        case Op::Look: {
          bool found = run(nd.body, p, c);
          if (found == nd.negative) return false;
          n = nd.next;
          continue;
        }
        case Op::Atomic: {
          if (!run(nd.body, p, c)) return false;
          p = c.sub_end;
          n = nd.next;
          continue;
        }
        case Op::Loop: {
          int slot = nd.loop;
          int saved_count = c.loop_count[slot];
          const unsigned char* saved_pos = c.loop_pos[slot];
          c.loop_count[slot] = 0;
          c.loop_pos[slot] = p;
          bool r = loop_step(n, p, c);
          c.loop_count[slot] = saved_count;
          c.loop_pos[slot] = saved_pos;
          return r;
        }
        case Op::LoopTail: {
          const Node& loop = nodes[nd.loop];
          int slot = loop.loop;
          if (p == c.loop_pos[slot]) {  // empty iteration: more would match empty too, so leave
            n = loop.next;
            continue;
          }
          int saved_count = c.loop_count[slot];
          const unsigned char* saved_pos = c.loop_pos[slot];
          c.loop_count[slot] = saved_count + 1;
          c.loop_pos[slot] = p;
          bool r = loop_step(nd.loop, p, c);
          c.loop_count[slot] = saved_count;
          c.loop_pos[slot] = saved_pos;
          return r;
        }
      }
    }
  }

  bool loop_step(int li, const unsigned char* p, Ctx& c) const {
    const Node& loop = nodes[li];
    int count = c.loop_count[loop.loop];
    if (count < loop.min) return run(loop.body, p, c);
    bool can_more = loop.max < 0 || count < loop.max;
    if (loop.greedy) {
      if (can_more && run(loop.body, p, c)) return true;
      return run(loop.next, p, c);
    }
    if (run(loop.next, p, c)) return true;
    return can_more && run(loop.body, p, c);
  }

  bool match_at(const unsigned char* p, Ctx& c) const { return run(start, p, c); }
};

Regex::Regex(std::string_view pattern) : impl_(std::make_unique<Impl>()) {
  impl_->pattern = std::string(pattern);
  Parser parser(impl_->pattern, impl_->sets);
  Ast ast = parser.parse();
  Node match;
  match.op = Op::Match;
  int m = impl_->add(std::move(match));
  impl_->start = impl_->emit(ast, m);
}
Regex::~Regex() = default;
Regex::Regex(Regex&&) noexcept = default;
Regex& Regex::operator=(Regex&&) noexcept = default;

const std::string& Regex::pattern() const { return impl_->pattern; }

bool Regex::search(std::string_view text, size_t from, size_t* begin, size_t* end) const {
  auto* b = reinterpret_cast<const unsigned char*>(text.data());
  Impl::Ctx c;
  c.begin = b;
  c.end = b + text.size();
  c.loop_count.assign(impl_->loops, 0);
  c.loop_pos.assign(impl_->loops, nullptr);
  for (const unsigned char* p = b + from; p <= c.end;) {
    if (impl_->match_at(p, c)) {
      *begin = static_cast<size_t>(p - b);
      *end = static_cast<size_t>(c.match_end - b);
      return true;
    }
    if (p == c.end) break;
    do ++p;
    while (p < c.end && (*p & 0xC0) == 0x80);
  }
  return false;
}

void Regex::find_all(std::string_view text, std::vector<std::pair<size_t, size_t>>& out) const {
  size_t pos = 0;
  bool have_last = false;
  size_t last_match_end = 0;
  size_t b, e;
  while (pos <= text.size() && search(text, pos, &b, &e)) {
    if (b == e && have_last && last_match_end == e) {
      if (e >= text.size()) break;
      pos = e + 1;
      while (pos < text.size() && (static_cast<unsigned char>(text[pos]) & 0xC0) == 0x80) ++pos;
      continue;
    }
    out.emplace_back(b, e);
    have_last = true;
    last_match_end = e;
    pos = e;
    if (b == e) {
      if (e >= text.size()) break;
    }
  }
}

}  // namespace mere::text
