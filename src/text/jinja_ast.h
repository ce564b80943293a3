// Jinja syntax tree: expressions (literals, names, member/slice access, calls, operators, filters,
// tests, conditional expressions) and statements (text, output, set, if, for, macro, call,
// filter, break, continue). Every node keeps its template line for error messages.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "text/jinja_value.h"

namespace mere::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

enum class BinOp { Or, And, Eq, Ne, Lt, Gt, Le, Ge, In, NotIn, Add, Sub, Concat, Mul, Div, FloorDiv, Mod, Pow };
const char* binop_name(BinOp op);

struct Arg {
  enum class Kind { Positional, Keyword, Spread, KwSpread } kind = Kind::Positional;
  std::string name;  // Keyword
  ExprPtr value;
};

struct Expr {
  enum class Kind {
    Literal,     // literal
    Name,        // name
    List,        // items
    Tuple,       // items
    Dict,        // items: key0, value0, key1, value1, ...
    Member,      // a[b] (computed) or a.name / a.<int literal in b>
    Slice,       // a:b:c (any may be null); only as the property of a computed Member
    Call,        // a(args)
    Unary,       // name ("not", "-", "+") applied to a
    Binary,      // a op b
    Filter,      // a | name(args)
    Test,        // a is [not] name(args)
    Select,      // a if b      (no else: undefined when b is false)
    Conditional  // b if a else c
  };
  Kind kind;
  int line = 0;
  Value literal;
  std::string name;
  BinOp op = BinOp::Add;
  bool flag = false;  // Member: computed; Test: negated
  ExprPtr a, b, c;
  std::vector<ExprPtr> items;
  std::vector<Arg> args;
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct Param {
  std::string name;
  ExprPtr default_value;  // may be null
};

struct Stmt {
  enum class Kind { Text, Output, Set, If, For, Macro, CallBlock, FilterBlock, Break, Continue };
  Kind kind;
  int line = 0;
  std::string text;  // Text: the text; Macro: its name
  ExprPtr expr;      // Output/Set value/If test/For iterable/CallBlock call/FilterBlock filter
  ExprPtr target;    // Set target (Name, Tuple of Names or Member); For loop variable(s)
  ExprPtr cond;      // For: inline `if` filter of the iterable
  ExprPtr filter;    // Set block: `{% set x | filter %}`
  Body body, alt;    // If: then/else; For: body/else; blocks: body
  std::vector<Param> params;  // Macro parameters; CallBlock caller parameters
};

struct Program {
  Body body;
};

}  // namespace mere::jinja
