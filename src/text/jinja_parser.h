// Jinja parser: tokens -> syntax tree, with @huggingface/jinja's grammar and operator precedence
// (ternary < or < and < not < comparison/in < + - ~ < * / // % < ** < is-tests < filters < unary
// sign < member/call). Unsupported statements fail naming the statement and its line.
#pragma once
#include <string_view>
#include <vector>

#include "text/jinja_ast.h"
#include "text/jinja_lexer.h"

namespace mere::jinja {

// Throws mere::Error "[jinja] <name>:<line>: ..." on a syntax error or unsupported construct.
Program parse(const std::vector<Token>& tokens, std::string_view name);

}  // namespace mere::jinja
