// Jinja lexer: HF-style preprocessing (drop one trailing newline, lstrip_blocks, trim_blocks,
// remove {% generation %} tags) followed by tokenisation with whitespace control ({%- -%} {{- -}}
// {#- -#}). Mirrors @huggingface/jinja's lexer; every token remembers its line in the source.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace mere::jinja {

enum class Tok {
  Text,
  Number,
  String,
  Identifier,
  Equals,
  OpenParen,
  CloseParen,
  OpenStatement,
  CloseStatement,
  OpenExpression,
  CloseExpression,
  OpenSquare,
  CloseSquare,
  OpenCurly,
  CloseCurly,
  Comma,
  Dot,
  Colon,
  Pipe,
  Additive,        // + - ~
  Multiplicative,  // * / // %
  Power,           // **
  Comparison,      // < > <= >= == !=
  Unary,           // + - not followed by a number
  Comment,
};

const char* tok_name(Tok t);

struct Token {
  Tok type;
  std::string value;
  int line = 0;  // 1-based line in the original template
};

// Throws mere::Error "[jinja] <name>:<line>: ..." on malformed input.
std::vector<Token> tokenize(std::string_view source, std::string_view name);

}  // namespace mere::jinja
