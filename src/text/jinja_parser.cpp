// Jinja parser (see jinja_parser.h): a recursive-descent port of @huggingface/jinja's parser plus
// test arguments (`is divisibleby 3`, `is sameas(x)`) and filtered block sets, with line-numbered
// errors for syntax problems and for statements the interpreter does not implement.
#include "text/jinja_parser.h"

#include <cstdlib>

#include "core/error.h"

namespace mere::jinja {

const char* binop_name(BinOp op) {
  switch (op) {
    case BinOp::Or: return "or";
    case BinOp::And: return "and";
    case BinOp::Eq: return "==";
    case BinOp::Ne: return "!=";
    case BinOp::Lt: return "<";
    case BinOp::Gt: return ">";
    case BinOp::Le: return "<=";
    case BinOp::Ge: return ">=";
    case BinOp::In: return "in";
    case BinOp::NotIn: return "not in";
    case BinOp::Add: return "+";
    case BinOp::Sub: return "-";
    case BinOp::Concat: return "~";
    case BinOp::Mul: return "*";
    case BinOp::Div: return "/";
    case BinOp::FloorDiv: return "//";
    case BinOp::Mod: return "%";
    case BinOp::Pow: return "**";
  }
  return "?";
}

namespace {

BinOp binop_of(const std::string& s) {
  static const std::pair<const char*, BinOp> ops[] = {
      {"or", BinOp::Or},   {"and", BinOp::And}, {"==", BinOp::Eq},      {"!=", BinOp::Ne}, {"<", BinOp::Lt},
      {">", BinOp::Gt},    {"<=", BinOp::Le},   {">=", BinOp::Ge},      {"in", BinOp::In}, {"not in", BinOp::NotIn},
      {"+", BinOp::Add},   {"-", BinOp::Sub},   {"~", BinOp::Concat},   {"*", BinOp::Mul}, {"/", BinOp::Div},
      {"//", BinOp::FloorDiv}, {"%", BinOp::Mod}, {"**", BinOp::Pow},
  };
  for (const auto& [n, op] : ops)
    if (s == n) return op;
  return BinOp::Add;
}

ExprPtr make(Expr::Kind k, int line) {
  auto e = std::make_unique<Expr>();
  e->kind = k;
  e->line = line;
  return e;
}

StmtPtr make_stmt(Stmt::Kind k, int line) {
  auto s = std::make_unique<Stmt>();
  s->kind = k;
  s->line = line;
  return s;
}

class Parser {
 public:
  Parser(const std::vector<Token>& t, std::string_view name) : t_(t), name_(name) {}

  Program run() {
    Program p;
    while (cur_ < t_.size())
      if (auto s = parse_any()) p.body.push_back(std::move(s));
    return p;
  }

 private:
  const std::vector<Token>& t_;
  std::string_view name_;
  size_t cur_ = 0;
  int depth_ = 0;  // nesting of expressions and blocks, bounded to keep recursion off the stack limit

  struct DepthGuard {
    Parser* p;
    explicit DepthGuard(Parser* parser) : p(parser) {
      if (++p->depth_ > 200) p->error("nesting too deep (more than 200 levels)");
    }
    ~DepthGuard() { --p->depth_; }
  };

  int line() const {
    if (t_.empty()) return 1;
    return t_[std::min(cur_, t_.size() - 1)].line;
  }
  [[noreturn]] void error(const std::string& what, int at_line = 0) const {
    fail("jinja", cat(name_, ":", at_line ? at_line : line(), ": ", what));
  }
  std::string describe(size_t i) const {
    if (i >= t_.size()) return "end of template";
    const Token& tk = t_[i];
    if (tk.type == Tok::Identifier || tk.type == Tok::Number) return cat(tok_name(tk.type), " '", tk.value, "'");
    if (tk.type == Tok::String) return "string literal";
    if (tk.type == Tok::Text) return "text";
    return tok_name(tk.type);
  }
  bool is(Tok type, size_t k = 0) const { return cur_ + k < t_.size() && t_[cur_ + k].type == type; }
  bool is_ident(std::string_view v, size_t k = 0) const { return is(Tok::Identifier, k) && t_[cur_ + k].value == v; }
  bool is_statement(std::initializer_list<std::string_view> names) const {
    if (!is(Tok::OpenStatement) || !is(Tok::Identifier, 1)) return false;
    for (auto n : names)
      if (t_[cur_ + 1].value == n) return true;
    return false;
  }
  const Token& expect(Tok type, std::string_view what) {
    if (!is(type)) error(cat("expected ", what, ", got ", describe(cur_)));
    return t_[cur_++];
  }
  void expect_ident(std::string_view v) {
    if (!is_ident(v)) error(cat("expected '", v, "', got ", describe(cur_)));
    ++cur_;
  }
  // Parses statements until one of `ends` opens; fails at end of input naming the open block.
  Body parse_until(std::initializer_list<std::string_view> ends, std::string_view block, int open_line) {
    Body body;
    while (!is_statement(ends)) {
      if (cur_ >= t_.size())
        error(cat("unexpected end of template: expected {% end", block, " %} to close the '", block,
                  "' opened on line ", open_line));
      if (auto s = parse_any()) body.push_back(std::move(s));
    }
    return body;
  }
  void expect_end(std::string_view end) {
    expect(Tok::OpenStatement, "'{%'");
    expect_ident(end);
    expect(Tok::CloseStatement, "'%}'");
  }

  StmtPtr parse_any() {
    const Token& tk = t_[cur_];
    switch (tk.type) {
      case Tok::Comment: ++cur_; return nullptr;
      case Tok::Text: {
        auto s = make_stmt(Stmt::Kind::Text, tk.line);
        s->text = tk.value;
        ++cur_;
        return s;
      }
      case Tok::OpenStatement: return parse_statement();
      case Tok::OpenExpression: {
        auto s = make_stmt(Stmt::Kind::Output, tk.line);
        ++cur_;
        s->expr = parse_expression();
        expect(Tok::CloseExpression, "'}}'");
        return s;
      }
      default: error(cat("unexpected ", describe(cur_)));
    }
  }

  StmtPtr parse_statement() {
    DepthGuard guard(this);
    int open_line = line();
    expect(Tok::OpenStatement, "'{%'");
    if (!is(Tok::Identifier)) error(cat("expected a statement name, got ", describe(cur_)));
    std::string name = t_[cur_++].value;
    if (name == "set") return parse_set(open_line);
    if (name == "if") {
      auto s = parse_if(open_line);
      expect_end("endif");
      return s;
    }
    if (name == "for") {
      auto s = parse_for(open_line);
      expect_end("endfor");
      return s;
    }
    if (name == "macro") {
      auto s = make_stmt(Stmt::Kind::Macro, open_line);
      if (!is(Tok::Identifier)) error(cat("expected a macro name, got ", describe(cur_)));
      s->text = t_[cur_++].value;
      s->params = parse_params();
      expect(Tok::CloseStatement, "'%}'");
      s->body = parse_until({"endmacro"}, "macro", open_line);
      expect_end("endmacro");
      return s;
    }
    if (name == "call") {
      auto s = make_stmt(Stmt::Kind::CallBlock, open_line);
      if (is(Tok::OpenParen)) s->params = parse_params();
      s->expr = parse_call_member();
      if (s->expr->kind != Expr::Kind::Call) error("expected a macro call after 'call'");
      expect(Tok::CloseStatement, "'%}'");
      s->body = parse_until({"endcall"}, "call", open_line);
      expect_end("endcall");
      return s;
    }
    if (name == "filter") {
      auto s = make_stmt(Stmt::Kind::FilterBlock, open_line);
      s->expr = parse_filter_tail(nullptr, open_line);
      expect(Tok::CloseStatement, "'%}'");
      s->body = parse_until({"endfilter"}, "filter", open_line);
      expect_end("endfilter");
      return s;
    }
    if (name == "break" || name == "continue") {
      expect(Tok::CloseStatement, "'%}'");
      return make_stmt(name == "break" ? Stmt::Kind::Break : Stmt::Kind::Continue, open_line);
    }
    static const char* unsupported[] = {"include", "import", "from",    "extends", "block",      "raw",
                                        "with",    "do",     "autoescape", "trans", "pluralize", "generation"};
    for (const char* u : unsupported)
      if (name == u) error(cat("unsupported statement '", name, "'"), open_line);
    error(cat("unknown statement '", name, "'"), open_line);
  }

  StmtPtr parse_set(int open_line) {
    auto s = make_stmt(Stmt::Kind::Set, open_line);
    s->target = parse_expression_sequence(false);
    if (is(Tok::Equals)) {
      ++cur_;
      s->expr = parse_expression_sequence(false);
    } else {
      if (s->target->kind == Expr::Kind::Filter) {  // {% set x | filter %}...{% endset %}
        ExprPtr f = std::move(s->target);
        ExprPtr* inner = &f;
        while ((*inner)->a && (*inner)->a->kind == Expr::Kind::Filter) inner = &(*inner)->a;
        s->target = std::move((*inner)->a);
        s->filter = std::move(f);
      }
      expect(Tok::CloseStatement, "'%}' or '='");
      s->body = parse_until({"endset"}, "set", open_line);
      expect(Tok::OpenStatement, "'{%'");
      expect_ident("endset");
    }
    expect(Tok::CloseStatement, "'%}'");
    const Expr& t = *s->target;
    bool ok = t.kind == Expr::Kind::Name || (t.kind == Expr::Kind::Member && !t.flag);
    if (t.kind == Expr::Kind::Tuple) {
      ok = true;
      for (const auto& it : t.items) ok = ok && it->kind == Expr::Kind::Name;
    }
    if (!ok) error("invalid assignment target in 'set': expected a name, names or namespace.attribute", open_line);
    return s;
  }

  StmtPtr parse_if(int open_line) {
    auto s = make_stmt(Stmt::Kind::If, open_line);
    s->expr = parse_expression();
    expect(Tok::CloseStatement, "'%}'");
    s->body = parse_until({"elif", "else", "endif"}, "if", open_line);
    if (is_statement({"elif"})) {
      int l = line();
      cur_ += 2;
      s->alt.push_back(parse_if(l));
    } else if (is_statement({"else"})) {
      cur_ += 2;
      expect(Tok::CloseStatement, "'%}'");
      s->alt = parse_until({"endif"}, "if", open_line);
    }
    return s;
  }

  StmtPtr parse_for(int open_line) {
    auto s = make_stmt(Stmt::Kind::For, open_line);
    s->target = parse_expression_sequence(true);
    bool ok = s->target->kind == Expr::Kind::Name;
    if (s->target->kind == Expr::Kind::Tuple) {
      ok = true;
      for (const auto& it : s->target->items) ok = ok && it->kind == Expr::Kind::Name;
    }
    if (!ok) error("expected a name or names for the loop variable");
    expect_ident("in");
    s->expr = parse_expression();
    if (s->expr->kind == Expr::Kind::Select) {  // for x in xs if cond
      s->cond = std::move(s->expr->b);
      s->expr = std::move(s->expr->a);
    }
    if (is_ident("recursive")) error("unsupported loop modifier 'recursive'");
    expect(Tok::CloseStatement, "'%}'");
    s->body = parse_until({"endfor", "else"}, "for", open_line);
    if (is_statement({"else"})) {
      cur_ += 2;
      expect(Tok::CloseStatement, "'%}'");
      s->alt = parse_until({"endfor"}, "for", open_line);
    }
    return s;
  }

  std::vector<Param> parse_params() {
    std::vector<Param> params;
    expect(Tok::OpenParen, "'('");
    bool saw_default = false;
    while (!is(Tok::CloseParen)) {
      if (!is(Tok::Identifier)) error(cat("expected a parameter name, got ", describe(cur_)));
      Param p;
      p.name = t_[cur_++].value;
      for (const auto& q : params)
        if (q.name == p.name) error(cat("duplicate parameter name '", p.name, "'"));
      if (is(Tok::Equals)) {
        ++cur_;
        p.default_value = parse_expression();
        saw_default = true;
      } else if (saw_default) {
        error("non-default parameter follows default parameter");
      }
      params.push_back(std::move(p));
      if (is(Tok::Comma)) ++cur_;
      else if (!is(Tok::CloseParen)) error(cat("expected ',' or ')', got ", describe(cur_)));
    }
    ++cur_;
    return params;
  }

  std::vector<Arg> parse_call_args() {
    std::vector<Arg> args;
    expect(Tok::OpenParen, "'('");
    bool saw_keyword = false;
    while (!is(Tok::CloseParen)) {
      if (cur_ >= t_.size()) error("unexpected end of template in argument list");
      Arg a;
      if (is(Tok::Power)) {
        ++cur_;
        a.kind = Arg::Kind::KwSpread;
        a.value = parse_expression();
      } else if (is(Tok::Multiplicative) && t_[cur_].value == "*") {
        ++cur_;
        a.kind = Arg::Kind::Spread;
        a.value = parse_expression();
      } else if (is(Tok::Identifier) && is(Tok::Equals, 1)) {
        a.kind = Arg::Kind::Keyword;
        a.name = t_[cur_].value;
        cur_ += 2;
        a.value = parse_expression();
        saw_keyword = true;
      } else {
        a.value = parse_expression();
        if (is(Tok::Equals)) error("expected an identifier for a keyword argument");
        if (saw_keyword) error("positional argument follows keyword argument");
      }
      args.push_back(std::move(a));
      if (is(Tok::Comma)) ++cur_;
      else if (!is(Tok::CloseParen)) error(cat("expected ',' or ')', got ", describe(cur_)));
    }
    ++cur_;
    return args;
  }

  ExprPtr parse_expression_sequence(bool primary) {
    int l = line();
    ExprPtr first = primary ? parse_primary() : parse_expression();
    if (!is(Tok::Comma)) return first;
    auto tuple = make(Expr::Kind::Tuple, l);
    tuple->items.push_back(std::move(first));
    while (is(Tok::Comma)) {
      ++cur_;
      tuple->items.push_back(primary ? parse_primary() : parse_expression());
    }
    return tuple;
  }

  ExprPtr parse_expression() {
    DepthGuard guard(this);
    return parse_if_expression();
  }

  ExprPtr parse_if_expression() {
    ExprPtr a = parse_or();
    if (!is_ident("if")) return a;
    int l = line();
    ++cur_;
    ExprPtr test = parse_or();
    if (is_ident("else")) {
      ++cur_;
      auto e = make(Expr::Kind::Conditional, l);
      e->a = std::move(test);
      e->b = std::move(a);
      e->c = parse_if_expression();
      return e;
    }
    auto e = make(Expr::Kind::Select, l);
    e->a = std::move(a);
    e->b = std::move(test);
    return e;
  }

  ExprPtr binary(BinOp op, ExprPtr l, ExprPtr r, int line) {
    auto e = make(Expr::Kind::Binary, line);
    e->op = op;
    e->a = std::move(l);
    e->b = std::move(r);
    return e;
  }

  ExprPtr parse_or() {
    ExprPtr left = parse_and();
    while (is_ident("or")) {
      int l = line();
      ++cur_;
      left = binary(BinOp::Or, std::move(left), parse_and(), l);
    }
    return left;
  }

  ExprPtr parse_and() {
    ExprPtr left = parse_not();
    while (is_ident("and")) {
      int l = line();
      ++cur_;
      left = binary(BinOp::And, std::move(left), parse_not(), l);
    }
    return left;
  }

  ExprPtr parse_not() {
    if (!is_ident("not")) return parse_comparison();
    DepthGuard guard(this);
    auto e = make(Expr::Kind::Unary, line());
    ++cur_;
    e->name = "not";
    e->a = parse_not();
    return e;
  }

  ExprPtr parse_comparison() {
    ExprPtr left = parse_additive();
    while (true) {
      int l = line();
      BinOp op;
      if (is_ident("not") && is_ident("in", 1)) {
        op = BinOp::NotIn;
        cur_ += 2;
      } else if (is_ident("in")) {
        op = BinOp::In;
        ++cur_;
      } else if (is(Tok::Comparison)) {
        op = binop_of(t_[cur_++].value);
      } else {
        break;
      }
      left = binary(op, std::move(left), parse_additive(), l);
    }
    return left;
  }

  ExprPtr parse_additive() {
    ExprPtr left = parse_multiplicative();
    while (is(Tok::Additive)) {
      int l = line();
      BinOp op = binop_of(t_[cur_++].value);
      left = binary(op, std::move(left), parse_multiplicative(), l);
    }
    return left;
  }

  ExprPtr parse_multiplicative() {
    ExprPtr left = parse_power();
    while (is(Tok::Multiplicative)) {
      int l = line();
      BinOp op = binop_of(t_[cur_++].value);
      left = binary(op, std::move(left), parse_power(), l);
    }
    return left;
  }

  ExprPtr parse_power() {
    ExprPtr left = parse_test();
    while (is(Tok::Power)) {
      int l = line();
      ++cur_;
      left = binary(BinOp::Pow, std::move(left), parse_test(), l);
    }
    return left;
  }

  ExprPtr parse_test() {
    ExprPtr operand = parse_filter();
    while (is_ident("is")) {
      auto e = make(Expr::Kind::Test, line());
      ++cur_;
      if (is_ident("not")) {
        e->flag = true;
        ++cur_;
      }
      if (!is(Tok::Identifier)) error(cat("expected a test name after 'is', got ", describe(cur_)));
      e->name = t_[cur_++].value;
      if (is(Tok::OpenParen)) {
        e->args = parse_call_args();
      } else if (test_argument_follows()) {
        Arg a;
        a.value = parse_call_member();
        e->args.push_back(std::move(a));
      }
      e->a = std::move(operand);
      operand = std::move(e);
    }
    return operand;
  }

  // Jinja2 allows one argument without parentheses: `x is divisibleby 3`, `x is sameas false`.
  bool test_argument_follows() const {
    if (is(Tok::Number) || is(Tok::String) || is(Tok::OpenSquare) || is(Tok::OpenCurly)) return true;
    if (!is(Tok::Identifier)) return false;
    static const char* stop[] = {"else", "or", "and", "if", "in", "not", "is"};
    for (const char* s : stop)
      if (t_[cur_].value == s) return false;
    return true;
  }

  ExprPtr parse_filter() {
    ExprPtr operand = parse_unary_sign();
    while (is(Tok::Pipe)) {
      int l = line();
      ++cur_;
      operand = parse_filter_tail(std::move(operand), l);
    }
    return operand;
  }

  ExprPtr parse_filter_tail(ExprPtr operand, int l) {
    if (!is(Tok::Identifier)) error(cat("expected a filter name, got ", describe(cur_)));
    auto e = make(Expr::Kind::Filter, l);
    e->name = t_[cur_++].value;
    if (is(Tok::OpenParen)) e->args = parse_call_args();
    e->a = std::move(operand);
    return e;
  }

  ExprPtr parse_unary_sign() {
    if ((is(Tok::Unary) || is(Tok::Additive)) && (t_[cur_].value == "-" || t_[cur_].value == "+")) {
      DepthGuard guard(this);
      auto e = make(Expr::Kind::Unary, line());
      e->name = t_[cur_++].value;
      e->a = parse_unary_sign();
      return e;
    }
    return parse_call_member();
  }

  ExprPtr parse_call_member() {
    ExprPtr e = parse_member(parse_primary());
    while (is(Tok::OpenParen)) {
      auto call = make(Expr::Kind::Call, line());
      call->args = parse_call_args();
      call->a = std::move(e);
      e = parse_member(std::move(call));
    }
    return e;
  }

  ExprPtr parse_member(ExprPtr object) {
    while (is(Tok::Dot) || is(Tok::OpenSquare)) {
      auto m = make(Expr::Kind::Member, line());
      bool computed = is(Tok::OpenSquare);
      ++cur_;
      m->flag = computed;
      if (computed) {
        m->b = parse_subscript();
        expect(Tok::CloseSquare, "']'");
      } else if (is(Tok::Identifier)) {
        m->name = t_[cur_++].value;
      } else if (is(Tok::Number) && t_[cur_].value.find('.') == std::string::npos) {
        auto lit = make(Expr::Kind::Literal, line());
        lit->literal = Value::integer(std::strtoll(t_[cur_++].value.c_str(), nullptr, 10));
        m->b = std::move(lit);
      } else {
        error(cat("expected an attribute name after '.', got ", describe(cur_)));
      }
      m->a = std::move(object);
      object = std::move(m);
    }
    return object;
  }

  ExprPtr parse_subscript() {
    int l = line();
    std::vector<ExprPtr> parts;
    bool slice = false;
    while (!is(Tok::CloseSquare)) {
      if (cur_ >= t_.size()) error("unexpected end of template in subscript");
      if (is(Tok::Colon)) {
        parts.push_back(nullptr);
        ++cur_;
        slice = true;
      } else {
        parts.push_back(parse_expression());
        if (is(Tok::Colon)) {
          ++cur_;
          slice = true;
        } else if (!is(Tok::CloseSquare)) {
          error(cat("expected ']' or ':', got ", describe(cur_)));
        }
      }
    }
    if (parts.empty()) error("expected a subscript inside '[]'");
    if (!slice) return std::move(parts[0]);
    if (parts.size() > 3) error("expected at most 3 parts in a slice");
    auto s = make(Expr::Kind::Slice, l);
    parts.resize(3);
    s->a = std::move(parts[0]);
    s->b = std::move(parts[1]);
    s->c = std::move(parts[2]);
    return s;
  }

  ExprPtr parse_primary() {
    if (cur_ >= t_.size()) error("unexpected end of template: expected an expression");
    const Token& tk = t_[cur_++];
    switch (tk.type) {
      case Tok::Number: {
        auto e = make(Expr::Kind::Literal, tk.line);
        if (tk.value.find('.') != std::string::npos) e->literal = Value::number(std::strtod(tk.value.c_str(), nullptr));
        else e->literal = Value::integer(std::strtoll(tk.value.c_str(), nullptr, 10));
        return e;
      }
      case Tok::String: {
        std::string v = tk.value;
        while (is(Tok::String)) v += t_[cur_++].value;
        auto e = make(Expr::Kind::Literal, tk.line);
        e->literal = Value::string(std::move(v));
        return e;
      }
      case Tok::Identifier: {
        auto e = make(Expr::Kind::Name, tk.line);
        e->name = tk.value;
        return e;
      }
      case Tok::OpenParen: {
        ExprPtr e = parse_expression_sequence(false);
        expect(Tok::CloseParen, "')'");
        return e;
      }
      case Tok::OpenSquare: {
        auto e = make(Expr::Kind::List, tk.line);
        while (!is(Tok::CloseSquare)) {
          if (cur_ >= t_.size()) error("unexpected end of template in list literal");
          e->items.push_back(parse_expression());
          if (is(Tok::Comma)) ++cur_;
        }
        ++cur_;
        return e;
      }
      case Tok::OpenCurly: {
        auto e = make(Expr::Kind::Dict, tk.line);
        while (!is(Tok::CloseCurly)) {
          if (cur_ >= t_.size()) error("unexpected end of template in dict literal");
          e->items.push_back(parse_expression());
          expect(Tok::Colon, "':' between key and value");
          e->items.push_back(parse_expression());
          if (is(Tok::Comma)) ++cur_;
        }
        ++cur_;
        return e;
      }
      default: --cur_; error(cat("unexpected ", describe(cur_), ": expected an expression"));
    }
  }
};

}  // namespace

Program parse(const std::vector<Token>& tokens, std::string_view name) { return Parser(tokens, name).run(); }

}  // namespace mere::jinja
