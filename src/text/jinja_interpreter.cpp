// Jinja tree-walking interpreter and the jinja::Template entry point. Scoping follows
// @huggingface/jinja: the template body and `if` share a scope, `for` and macro calls open child
// scopes, macros see the scope they are called from. Failures carry the line of the innermost
// node that saw them and surface as mere::Error "[jinja] <name>:<line>: ...".
#include <cmath>

#include "core/error.h"
#include "text/jinja.h"
#include "text/jinja_ast.h"
#include "text/jinja_builtins.h"
#include "text/jinja_lexer.h"
#include "text/jinja_parser.h"
#include "text/jinja_strings.h"

namespace mere::jinja {
namespace {

struct Scope {
  std::shared_ptr<Scope> parent;
  Object vars;
};
using ScopePtr = std::shared_ptr<Scope>;

ScopePtr child(const ScopePtr& parent) {
  auto s = std::make_shared<Scope>();
  s->parent = parent;
  return s;
}

enum class Flow { Normal, Break, Continue };
constexpr int kMaxCallDepth = 200;

int64_t py_floordiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}
int64_t py_mod(int64_t a, int64_t b) {
  int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

bool numeric(const Value& v) { return v.is_number() || v.is_bool(); }

// Everything except `and`/`or` (short-circuited by the caller).
Value binary_op(BinOp op, const Value& l, const Value& r) {
  switch (op) {
    case BinOp::Eq: return Value::boolean(loose_equal(l, r));
    case BinOp::Ne: return Value::boolean(!loose_equal(l, r));
    default: break;
  }
  const bool membership = op == BinOp::In || op == BinOp::NotIn;
  if (membership && r.is_undefined()) return Value::boolean(op == BinOp::NotIn);
  if (op == BinOp::Concat) {
    auto str = [](const Value& v) { return v.is_none() ? std::string("None") : raw_string(v); };
    return Value::string(str(l) + str(r));
  }
  if ((l.is_undefined() || r.is_undefined() || l.is_none() || r.is_none()) && !(membership && r.is_array()))
    raise(cat("unsupported operand types for '", binop_name(op), "': ", l.type_name(), " and ", r.type_name()));
  if (numeric(l) && numeric(r)) {
    const bool ints = !l.is_float() && !r.is_float();
    double a = l.as_double(), b = r.as_double();
    if (ints) {
      int64_t x = l.is_bool() ? l.as_bool() : l.as_int(), y = r.is_bool() ? r.as_bool() : r.as_int(), z = 0;
      switch (op) {
        case BinOp::Add:
          if (!__builtin_add_overflow(x, y, &z)) return Value::integer(z);
          break;
        case BinOp::Sub:
          if (!__builtin_sub_overflow(x, y, &z)) return Value::integer(z);
          break;
        case BinOp::Mul:
          if (!__builtin_mul_overflow(x, y, &z)) return Value::integer(z);
          break;
        case BinOp::FloorDiv:
          if (y == 0) raise("integer division by zero");
          if (!(x == INT64_MIN && y == -1)) return Value::integer(py_floordiv(x, y));
          break;
        case BinOp::Mod:
          if (y == 0) raise("integer modulo by zero");
          if (y == -1) return Value::integer(0);
          return Value::integer(py_mod(x, y));
        case BinOp::Pow:
          if (y >= 0) {
            int64_t acc = 1;
            bool overflow = false;
            for (int64_t k = 0; k < y && !overflow; ++k) overflow = __builtin_mul_overflow(acc, x, &acc);
            if (!overflow) return Value::integer(acc);
          }
          break;
        default: break;
      }
    }
    switch (op) {
      case BinOp::Add: return Value::number(a + b);
      case BinOp::Sub: return Value::number(a - b);
      case BinOp::Mul: return Value::number(a * b);
      case BinOp::Div:
        if (b == 0) raise("division by zero");
        return Value::number(a / b);
      case BinOp::FloorDiv:
        if (b == 0) raise("division by zero");
        return Value::number(std::floor(a / b));
      case BinOp::Mod: {
        if (b == 0) raise("modulo by zero");
        double m = std::fmod(a, b);
        if (m != 0 && ((m < 0) != (b < 0))) m += b;
        return Value::number(m);
      }
      case BinOp::Pow: {
        if (a == 0 && b < 0) raise("0.0 cannot be raised to a negative power");
        double p = std::pow(a, b);
        if (!std::isfinite(p)) raise("exponentiation result is not a finite real number");
        return Value::number(p);
      }
      case BinOp::Lt: return Value::boolean(a < b);
      case BinOp::Gt: return Value::boolean(a > b);
      case BinOp::Le: return Value::boolean(a <= b);
      case BinOp::Ge: return Value::boolean(a >= b);
      default: break;
    }
  }
  if (l.is_array() && r.is_array() && op == BinOp::Add) {
    Array out = l.as_array();
    out.insert(out.end(), r.as_array().begin(), r.as_array().end());
    return Value::array(std::move(out));
  }
  if (r.is_array() && membership) {
    bool found = false;
    for (const Value& x : r.as_array()) found = found || strict_equal(l, x);
    return Value::boolean(found == (op == BinOp::In));
  }
  if ((l.is_string() || r.is_string()) && op == BinOp::Add && !l.is_array() && !r.is_array() &&
      !l.is_mapping_like() && !r.is_mapping_like())
    return Value::string(raw_string(l) + raw_string(r));
  if (l.is_string() && r.is_string()) {
    const std::string &a = l.as_string(), &b = r.as_string();
    switch (op) {
      case BinOp::In: return Value::boolean(b.find(a) != std::string::npos);
      case BinOp::NotIn: return Value::boolean(b.find(a) == std::string::npos);
      case BinOp::Lt: return Value::boolean(a < b);
      case BinOp::Gt: return Value::boolean(a > b);
      case BinOp::Le: return Value::boolean(a <= b);
      case BinOp::Ge: return Value::boolean(a >= b);
      default: break;
    }
  }
  if (l.is_string() && r.is_object() && membership)
    return Value::boolean((r.as_object().find(l.as_string()) != nullptr) == (op == BinOp::In));
  if (op == BinOp::Mul && (l.is_string() || l.is_array()) && r.is_int()) {  // Python repetition
    int64_t n = r.as_int();
    if (n > 100000) raise("repetition count too large");
    if (l.is_string()) {
      std::string out;
      for (int64_t k = 0; k < n; ++k) out += l.as_string();
      return Value::string(std::move(out));
    }
    Array out;
    for (int64_t k = 0; k < n; ++k) out.insert(out.end(), l.as_array().begin(), l.as_array().end());
    return Value::array(std::move(out));
  }
  raise(cat("unsupported operand types for '", binop_name(op), "': ", l.type_name(), " and ", r.type_name()));
}

// obj[key] / obj.key: dict keys first, then built-in members; negative list/string indices.
Value get_item(const Value& obj, const Value& key) {
  if (obj.is_mapping_like()) {
    if (!key.is_string()) return Value();
    if (const Value* v = obj.as_object().find(key.as_string())) return *v;
    return obj.is_object() ? member(obj, key.as_string()) : Value();
  }
  if (obj.is_array() || obj.is_string()) {
    if (key.is_int()) {
      if (obj.is_array()) {
        const Array& a = obj.as_array();
        int64_t n = static_cast<int64_t>(a.size()), i = key.as_int();
        if (i < 0) i += n;
        return (i >= 0 && i < n) ? a[static_cast<size_t>(i)] : Value();
      }
      auto cps = utf8_decode(obj.as_string());
      int64_t n = static_cast<int64_t>(cps.size()), i = key.as_int();
      if (i < 0) i += n;
      if (i < 0 || i >= n) return Value();
      std::string out;
      utf8_append(out, cps[static_cast<size_t>(i)]);
      return Value::string(std::move(out));
    }
  }
  if (key.is_string()) return member(obj, key.as_string());
  return Value();
}

class Interpreter {
 public:
  std::string run(const Program& program, const ScopePtr& globals) {
    std::string out;
    if (exec(program.body, globals, out) != Flow::Normal) raise("'break' or 'continue' outside a loop");
    return out;
  }

 private:
  ScopePtr call_scope_;  // scope of the call expression being evaluated (macros run in a child of it)
  int depth_ = 0;

  static Value lookup(const ScopePtr& s, std::string_view name) {
    for (const Scope* p = s.get(); p; p = p->parent.get())
      if (const Value* v = p->vars.find(name)) return *v;
    return Value();
  }

  Flow exec(const Body& body, const ScopePtr& scope, std::string& out) {
    for (const auto& s : body) {
      Flow f;
      try {
        f = exec_one(*s, scope, out);
      } catch (Failure& e) {
        if (!e.line) e.line = s->line;
        throw;
      }
      if (f != Flow::Normal) return f;
    }
    return Flow::Normal;
  }

  std::string render_block(const Body& body, const ScopePtr& scope) {
    std::string out;
    if (exec(body, scope, out) != Flow::Normal) raise("'break' or 'continue' outside a loop");
    return out;
  }

  Flow exec_one(const Stmt& s, const ScopePtr& scope, std::string& out) {
    switch (s.kind) {
      case Stmt::Kind::Text: out += s.text; return Flow::Normal;
      case Stmt::Kind::Output: {
        Value v = eval(*s.expr, scope);
        if (!v.is_none() && !v.is_undefined()) out += display(v);
        return Flow::Normal;
      }
      case Stmt::Kind::Set: {
        Value v;
        if (s.expr) {
          v = eval(*s.expr, scope);
        } else {
          v = Value::string(render_block(s.body, scope));
          if (s.filter) v = apply_filter_chain(*s.filter, v, scope);
        }
        assign(*s.target, v, scope);
        return Flow::Normal;
      }
      case Stmt::Kind::If: return exec(eval(*s.expr, scope).truthy() ? s.body : s.alt, scope, out);
      case Stmt::Kind::For: exec_for(s, scope, out); return Flow::Normal;
      case Stmt::Kind::Macro: {
        const Stmt* node = &s;
        scope->vars.set(s.text, Value::function(s.text, [this, node](CallArgs& args) {
                          ScopePtr sc = child(call_scope_);
                          bind_params(node->params, args, sc);
                          return Value::string(render_block(node->body, sc));
                        }));
        return Flow::Normal;
      }
      case Stmt::Kind::CallBlock: {
        const Stmt* node = &s;
        std::weak_ptr<Scope> weak = scope;
        Value caller = Value::function("caller", [this, node, weak](CallArgs& args) {
          ScopePtr captured = weak.lock();
          if (!captured) raise("caller() used outside its {% call %} block");
          ScopePtr sc = child(captured);
          bind_params(node->params, args, sc);
          return Value::string(render_block(node->body, sc));
        });
        Value v = eval_call(*s.expr, scope, caller);
        if (!v.is_none() && !v.is_undefined()) out += display(v);
        return Flow::Normal;
      }
      case Stmt::Kind::FilterBlock: {
        Value v = apply_filter_chain(*s.expr, Value::string(render_block(s.body, scope)), scope);
        if (!v.is_none() && !v.is_undefined()) out += display(v);
        return Flow::Normal;
      }
      case Stmt::Kind::Break: return Flow::Break;
      case Stmt::Kind::Continue: return Flow::Continue;
    }
    return Flow::Normal;
  }

  // A Filter node chain whose innermost operand is missing: applies the chain to `base`.
  Value apply_filter_chain(const Expr& f, const Value& base, const ScopePtr& scope) {
    Value operand = f.a ? apply_filter_chain(*f.a, base, scope) : base;
    CallArgs args = eval_args(f.args, scope);
    return apply_filter(f.name, operand, args);
  }

  void assign(const Expr& target, const Value& v, const ScopePtr& scope) {
    if (target.kind == Expr::Kind::Name) {
      scope->vars.set(target.name, v);
    } else if (target.kind == Expr::Kind::Tuple) {
      if (!v.is_array()) raise(cat("cannot unpack a ", v.type_name(), " in 'set'"));
      const Array& a = v.as_array();
      if (a.size() != target.items.size())
        raise(cat("cannot unpack in 'set': expected ", target.items.size(), " values, got ", a.size()));
      for (size_t i = 0; i < a.size(); ++i) scope->vars.set(target.items[i]->name, a[i]);
    } else {
      Value obj = eval(*target.a, scope);
      if (!obj.is_namespace())
        raise(cat("cannot assign attribute '", target.name, "' on a ", obj.type_name(), ": expected a namespace()"));
      obj.as_object().set(target.name, v);
    }
  }

  void bind_loop_var(const Expr& target, const Value& item, const ScopePtr& scope) {
    if (target.kind == Expr::Kind::Name) {
      scope->vars.set(target.name, item);
      return;
    }
    if (!item.is_array()) raise(cat("cannot unpack a ", item.type_name(), " into the loop variables"));
    const Array& a = item.as_array();
    if (a.size() != target.items.size())
      raise(cat("cannot unpack into the loop variables: expected ", target.items.size(), " values, got ", a.size()));
    for (size_t i = 0; i < a.size(); ++i) scope->vars.set(target.items[i]->name, a[i]);
  }

  void exec_for(const Stmt& s, const ScopePtr& scope, std::string& out) {
    ScopePtr sc = child(scope);
    Value iterable = eval(*s.expr, sc);
    Array source;
    if (iterable.is_array()) {
      source = iterable.as_array();
    } else if (iterable.is_mapping_like()) {
      for (const auto& kv : iterable.as_object().items) source.push_back(Value::string(kv.first));
    } else if (iterable.is_string()) {
      for (char32_t c : utf8_decode(iterable.as_string())) {
        std::string ch;
        utf8_append(ch, c);
        source.push_back(Value::string(std::move(ch)));
      }
    } else if (!iterable.is_undefined()) {
      raise(cat("cannot iterate over a ", iterable.type_name()));
    }
    Array items;
    if (s.cond) {
      for (const Value& v : source) {
        ScopePtr tmp = child(sc);
        bind_loop_var(*s.target, v, tmp);
        if (eval(*s.cond, tmp).truthy()) items.push_back(v);
      }
    } else {
      items = std::move(source);
    }
    const int64_t n = static_cast<int64_t>(items.size());
    bool iterated = false;
    for (int64_t i = 0; i < n; ++i) {
      Object loop;
      loop.items.reserve(12);
      loop.items.emplace_back("index", Value::integer(i + 1));
      loop.items.emplace_back("index0", Value::integer(i));
      loop.items.emplace_back("revindex", Value::integer(n - i));
      loop.items.emplace_back("revindex0", Value::integer(n - i - 1));
      loop.items.emplace_back("first", Value::boolean(i == 0));
      loop.items.emplace_back("last", Value::boolean(i == n - 1));
      loop.items.emplace_back("length", Value::integer(n));
      loop.items.emplace_back("previtem", i > 0 ? items[static_cast<size_t>(i - 1)] : Value());
      loop.items.emplace_back("nextitem", i + 1 < n ? items[static_cast<size_t>(i + 1)] : Value());
      loop.items.emplace_back("depth", Value::integer(1));
      loop.items.emplace_back("depth0", Value::integer(0));
      loop.items.emplace_back("cycle", Value::function("cycle", [i](CallArgs& a) {
                                if (a.pos.empty()) raise("loop.cycle() needs at least one argument");
                                return a.pos[static_cast<size_t>(i) % a.pos.size()];
                              }));
      sc->vars.set("loop", Value::object(std::move(loop)));
      bind_loop_var(*s.target, items[static_cast<size_t>(i)], sc);
      Flow f = exec(s.body, sc, out);
      if (f == Flow::Break) break;
      if (f == Flow::Normal) iterated = true;
    }
    // Like Jinja2 and @huggingface/jinja: the else block runs unless some iteration ran to its end
    // (so also after a `break` in the first iteration or `continue` in every one).
    if (!iterated && exec(s.alt, sc, out) != Flow::Normal) raise("'break' or 'continue' outside a loop");
  }

  void bind_params(const std::vector<Param>& params, CallArgs& args, const ScopePtr& sc) {
    std::vector<bool> used(args.kw.size(), false);
    std::vector<const Param*> pending;
    for (size_t i = 0; i < params.size(); ++i) {
      const Param& p = params[i];
      Value v;
      bool have = false;
      if (i < args.pos.size()) {
        v = args.pos[i];
        have = true;
      } else {
        for (size_t k = 0; k < args.kw.size(); ++k)
          if (!used[k] && args.kw[k].first == p.name) {
            v = args.kw[k].second;
            used[k] = have = true;
            break;
          }
      }
      if (!have && p.default_value) pending.push_back(&p);
      sc->vars.set(p.name, v);
    }
    Array varargs;
    for (size_t i = params.size(); i < args.pos.size(); ++i) varargs.push_back(args.pos[i]);
    Object kwargs;
    for (size_t k = 0; k < args.kw.size(); ++k)
      if (!used[k]) kwargs.set(args.kw[k].first, args.kw[k].second);
    if (!sc->vars.find("varargs")) sc->vars.set("varargs", Value::array(std::move(varargs)));
    if (!sc->vars.find("kwargs")) sc->vars.set("kwargs", Value::object(std::move(kwargs)));
    if (!args.caller.is_undefined()) sc->vars.set("caller", args.caller);
    for (const Param* p : pending) sc->vars.set(p->name, eval(*p->default_value, sc));
  }

  CallArgs eval_args(const std::vector<Arg>& args, const ScopePtr& scope) {
    CallArgs out;
    for (const Arg& a : args) {
      if (a.kind == Arg::Kind::Positional) {
        out.pos.push_back(eval(*a.value, scope));
      } else if (a.kind == Arg::Kind::Spread) {
        Value v = eval(*a.value, scope);
        if (!v.is_array()) raise(cat("cannot unpack a ", v.type_name(), " with '*'"));
        out.pos.insert(out.pos.end(), v.as_array().begin(), v.as_array().end());
      }
    }
    auto add = [&](const std::string& k, Value v) {
      if (out.kwarg(k)) raise(cat("got multiple values for keyword argument '", k, "'"));
      out.kw.emplace_back(k, std::move(v));
    };
    for (const Arg& a : args) {
      if (a.kind == Arg::Kind::Keyword) {
        add(a.name, eval(*a.value, scope));
      } else if (a.kind == Arg::Kind::KwSpread) {
        Value v = eval(*a.value, scope);
        if (!v.is_object()) raise(cat("argument after ** must be a mapping, not a ", v.type_name()));
        for (const auto& kv : v.as_object().items) add(kv.first, kv.second);
      }
    }
    return out;
  }

  Value eval_call(const Expr& e, const ScopePtr& scope, const Value& caller = Value()) {
    const Expr& callee = *e.a;
    Value fn;
    if (callee.kind == Expr::Kind::Member && !callee.flag && !callee.b) {
      Value obj = eval(*callee.a, scope);
      fn = get_item(obj, Value::string(callee.name));
      if (fn.is_undefined()) raise(cat("unknown method '", callee.name, "' for a ", obj.type_name()));
      if (!fn.is_function()) raise(cat("'", callee.name, "' is not callable (it is a ", fn.type_name(), ")"));
    } else {
      fn = eval(callee, scope);
      if (!fn.is_function()) {
        if (callee.kind == Expr::Kind::Name)
          raise(fn.is_undefined() ? cat("unknown function '", callee.name, "'")
                                  : cat("'", callee.name, "' is not callable (it is a ", fn.type_name(), ")"));
        raise(cat("cannot call a ", fn.type_name()));
      }
    }
    CallArgs args = eval_args(e.args, scope);
    args.caller = caller;
    if (depth_ >= kMaxCallDepth) raise(cat("call depth limit (", kMaxCallDepth, ") exceeded"));
    struct Guard {
      Interpreter* self;
      ScopePtr saved;
      ~Guard() {
        self->call_scope_ = std::move(saved);
        --self->depth_;
      }
    } guard{this, call_scope_};
    ++depth_;
    call_scope_ = scope;
    return fn.as_function().call(args);
  }

  Value eval_slice(const Value& obj, const Expr& s, const ScopePtr& scope) {
    auto index = [&](const ExprPtr& p) -> std::optional<int64_t> {
      if (!p) return std::nullopt;
      Value v = eval(*p, scope);
      if (v.is_undefined() || v.is_none()) return std::nullopt;
      if (!v.is_int()) raise(cat("slice indices must be integers, got a ", v.type_name()));
      return v.as_int();
    };
    auto start_o = index(s.a), stop_o = index(s.b), step_o = index(s.c);
    int64_t step = step_o.value_or(1);
    if (step == 0) raise("slice step cannot be zero");
    std::vector<char32_t> cps;
    int64_t n;
    if (obj.is_array()) {
      n = static_cast<int64_t>(obj.as_array().size());
    } else if (obj.is_string()) {
      cps = utf8_decode(obj.as_string());
      n = static_cast<int64_t>(cps.size());
    } else {
      raise(cat("cannot slice a ", obj.type_name()));
    }
    int64_t start, stop;
    if (step > 0) {
      start = start_o.value_or(0);
      start = start < 0 ? std::max<int64_t>(n + start, 0) : std::min(start, n);
      stop = stop_o.value_or(n);
      stop = stop < 0 ? std::max<int64_t>(n + stop, 0) : std::min(stop, n);
    } else {
      start = start_o.value_or(n - 1);
      start = start < 0 ? std::max<int64_t>(n + start, -1) : std::min(start, n - 1);
      stop = stop_o.value_or(-1);
      stop = stop < -1 ? std::max<int64_t>(n + stop, -1) : std::min(stop, n - 1);
    }
    const int64_t dir = step > 0 ? 1 : -1;
    if (obj.is_array()) {
      Array out;
      for (int64_t i = start; dir * i < dir * stop; i += step) out.push_back(obj.as_array()[static_cast<size_t>(i)]);
      return Value::array(std::move(out));
    }
    std::string out;
    for (int64_t i = start; dir * i < dir * stop; i += step) utf8_append(out, cps[static_cast<size_t>(i)]);
    return Value::string(std::move(out));
  }

  Value eval(const Expr& e, const ScopePtr& scope) {
    try {
      return eval_inner(e, scope);
    } catch (Failure& f) {
      if (!f.line) f.line = e.line;
      throw;
    }
  }

  Value eval_inner(const Expr& e, const ScopePtr& scope) {
    switch (e.kind) {
      case Expr::Kind::Literal: return e.literal;
      case Expr::Kind::Name: return lookup(scope, e.name);
      case Expr::Kind::List:
      case Expr::Kind::Tuple: {
        Array a;
        a.reserve(e.items.size());
        for (const auto& it : e.items) a.push_back(eval(*it, scope));
        return Value::array(std::move(a));
      }
      case Expr::Kind::Dict: {
        Object o;
        for (size_t i = 0; i + 1 < e.items.size(); i += 2) {
          Value k = eval(*e.items[i], scope);
          if (!k.is_string()) raise(cat("dict literal keys must be strings, got a ", k.type_name()));
          o.set(k.as_string(), eval(*e.items[i + 1], scope));
        }
        return Value::object(std::move(o));
      }
      case Expr::Kind::Member: {
        Value obj = eval(*e.a, scope);
        if (e.flag && e.b->kind == Expr::Kind::Slice) return eval_slice(obj, *e.b, scope);
        if (!e.flag && !e.b) return get_item(obj, Value::string(e.name));
        return get_item(obj, eval(*e.b, scope));
      }
      case Expr::Kind::Slice: raise("a slice is only valid inside []");
      case Expr::Kind::Call: return eval_call(e, scope);
      case Expr::Kind::Unary: {
        Value v = eval(*e.a, scope);
        if (e.name == "not") return Value::boolean(!v.truthy());
        const bool neg = e.name == "-";
        if (v.is_float()) return Value::number(neg ? -v.as_float() : v.as_float());
        if (v.is_int() || v.is_bool()) {
          int64_t x = v.is_bool() ? v.as_bool() : v.as_int();
          return Value::integer(neg ? -x : x);
        }
        raise(cat("bad operand type for unary '", e.name, "': ", v.type_name()));
      }
      case Expr::Kind::Binary: {
        Value l = eval(*e.a, scope);
        if (e.op == BinOp::And) return l.truthy() ? eval(*e.b, scope) : l;
        if (e.op == BinOp::Or) return l.truthy() ? l : eval(*e.b, scope);
        return binary_op(e.op, l, eval(*e.b, scope));
      }
      case Expr::Kind::Filter: {
        Value operand = eval(*e.a, scope);
        CallArgs args = eval_args(e.args, scope);
        return apply_filter(e.name, operand, args);
      }
      case Expr::Kind::Test: {
        Value operand = eval(*e.a, scope);
        CallArgs args = eval_args(e.args, scope);
        return Value::boolean(apply_test(e.name, operand, args) != e.flag);
      }
      case Expr::Kind::Select: return eval(*e.b, scope).truthy() ? eval(*e.a, scope) : Value();
      case Expr::Kind::Conditional: return eval(*e.a, scope).truthy() ? eval(*e.b, scope) : eval(*e.c, scope);
    }
    return Value();
  }
};

}  // namespace

Template::Template(std::string_view source, std::string name) : name_(std::move(name)) {
  program_ = std::make_shared<Program>(parse(tokenize(source, name_), name_));
}

std::string Template::render(const Json& context) const {
  if (!context.is_object())
    fail("jinja", cat(name_, ": context: expected a JSON object, got ", Json::type_name(context.type())));
  NamespaceTracker tracker;  // declared first: destroyed last, after every scope
  auto globals = std::make_shared<Scope>();
  install_globals(globals->vars);
  for (const auto& [k, v] : context.as_object()) globals->vars.set(k, Value::from_json(v));
  Interpreter interpreter;
  try {
    return interpreter.run(*program_, globals);
  } catch (const Failure& f) {
    fail("jinja", cat(name_, ":", f.line, ": ", f.what()));
  }
}

}  // namespace mere::jinja
