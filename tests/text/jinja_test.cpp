// Unit tests of the Jinja building blocks: JS number formatting and JSON escaping (tojson must
// byte-match @huggingface/jinja), UTF-8/case helpers, lexer line tracking through the trim/lstrip
// preprocessing, template reuse, and error messages naming the construct and line.
#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "core/json.h"
#include "text/jinja.h"
#include "text/jinja_lexer.h"
#include "text/jinja_strings.h"
#include "text/jinja_value.h"

namespace mere::jinja {
namespace {

std::string render(const std::string& tmpl, const char* ctx = "{}") {
  return Template(tmpl).render(Json::parse(ctx));
}

std::string error_of(const std::string& tmpl, const char* ctx = "{}") {
  try {
    Template t(tmpl, "t.jinja");
    t.render(Json::parse(ctx));
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(JinjaStrings, JsNumberToString) {
  EXPECT_EQ(js_number_to_string(0.1), "0.1");
  EXPECT_EQ(js_number_to_string(0.1 + 0.2), "0.30000000000000004");
  EXPECT_EQ(js_number_to_string(1e21), "1e+21");
  EXPECT_EQ(js_number_to_string(1e20), "100000000000000000000");
  EXPECT_EQ(js_number_to_string(1e-7), "1e-7");
  EXPECT_EQ(js_number_to_string(1.5e-7), "1.5e-7");
  EXPECT_EQ(js_number_to_string(0.000001), "0.000001");
  EXPECT_EQ(js_number_to_string(-2.5), "-2.5");
  EXPECT_EQ(js_number_to_string(123456.789), "123456.789");
  EXPECT_EQ(js_number_to_string(-0.0), "0");
  EXPECT_EQ(js_number_to_string(1.0 / 0.0), "Infinity");
}

TEST(JinjaStrings, FloatDisplay) {
  EXPECT_EQ(float_display(1.0), "1.0");
  EXPECT_EQ(float_display(-0.0), "-0.0");
  EXPECT_EQ(float_display(2.5), "2.5");
  EXPECT_EQ(float_display(1e20), "100000000000000000000.0");
  EXPECT_EQ(float_display(1e21), "1e+21");
}

TEST(JinjaStrings, JsonStringEscaping) {
  std::string out;
  js_json_string(out, "a\"b\\c\n\t\x01\x7f é 😀 \u2028", false);
  EXPECT_EQ(out, "\"a\\\"b\\\\c\\n\\t\\u0001\x7f é 😀 \u2028\"");
  out.clear();
  js_json_string(out, "\x7f é 😀", true);
  EXPECT_EQ(out, "\"\\u007f \\u00e9 \\ud83d\\ude00\"");
}

TEST(JinjaStrings, CaseAndTrim) {
  EXPECT_EQ(to_upper("straße ÿ ωσ я ā"), "STRASSE Ÿ ΩΣ Я Ā");
  EXPECT_EQ(to_lower("ÀÉÎ ΣΩ ЖЯ Ł"), "àéî σω жя ł");
  EXPECT_EQ(js_title("hello wORLD a-b c_d 3x éa"), "Hello WORLD A-B C_d 3x éA");
  EXPECT_EQ(js_trim("\u00a0\t x \u3000\n"), "x");
  EXPECT_EQ(strip_chars("xyaxy", "yx", true, false), "axy");
  EXPECT_EQ(utf8_length("aé😀"), 3u);
}

TEST(JinjaValue, FromJsonMakesIntegralNumbersIntegers) {
  Value v = Value::from_json(Json::parse("[1, 2.0, 2.5, -0.0, 1e300]"));
  const Array& a = v.as_array();
  EXPECT_TRUE(a[0].is_int());
  EXPECT_TRUE(a[1].is_int());  // JSON.parse makes 2.0 a plain 2, @huggingface/jinja an integer
  EXPECT_TRUE(a[2].is_float());
  EXPECT_TRUE(a[4].is_float());
  EXPECT_EQ(to_json(v), "[1, 2, 2.5, 0, 1e+300]");
}

TEST(JinjaLexer, TokensKeepOriginalLinesThroughPreprocessing) {
  auto toks = tokenize("a\n  {% if x %}\nb\n{{ y }}\n", "t");
  int if_line = 0, y_line = 0;
  for (const auto& t : toks) {
    if (t.type == Tok::Identifier && t.value == "if") if_line = t.line;
    if (t.type == Tok::Identifier && t.value == "y") y_line = t.line;
  }
  EXPECT_EQ(if_line, 2);
  EXPECT_EQ(y_line, 4);
}

TEST(JinjaTemplate, RendersRepeatedlyWithFreshState) {
  Template t("{% set ns = namespace(n=0) %}{% for x in xs %}{% set ns.n = ns.n + x %}{% endfor %}{{ ns.n }}");
  EXPECT_EQ(t.render(Json::parse(R"({"xs": [1, 2]})")), "3");
  EXPECT_EQ(t.render(Json::parse(R"({"xs": [5]})")), "5");
}

TEST(JinjaTemplate, ContextMustBeAnObject) {
  Template t("x");
  EXPECT_THROW(t.render(Json::parse("[1]")), Error);
}

TEST(JinjaTemplate, ContextOverridesGlobals) {
  EXPECT_EQ(render("{{ range }}", R"({"range": "mine"})"), "mine");
}

TEST(JinjaErrors, NameTheConstructAndTheLine) {
  EXPECT_EQ(error_of("a\nb\n{{ x | frob }}", R"({"x": 1})"), "[jinja] t.jinja:3: unknown filter 'frob'");
  EXPECT_EQ(error_of("{% if true %}\n{{ 1 is weird }}{% endif %}"), "[jinja] t.jinja:2: unknown test 'weird'");
  EXPECT_EQ(error_of("\n{% with a = 1 %}{% endwith %}"), "[jinja] t.jinja:2: unsupported statement 'with'");
  EXPECT_EQ(error_of("{% raw %}x{% endraw %}"), "[jinja] t.jinja:1: unsupported statement 'raw'");
  EXPECT_EQ(error_of("{{ 'a'.zfill(3) }}"), "[jinja] t.jinja:1: unknown method 'zfill' for a string");
  EXPECT_EQ(error_of("{{ lipsum() }}"), "[jinja] t.jinja:1: unknown function 'lipsum'");
  EXPECT_EQ(error_of("{% for x in xs %}\n{% endfor %}\n{% endif %}", R"({"xs": []})"),
            "[jinja] t.jinja:3: unknown statement 'endif'");
  EXPECT_EQ(error_of("{{ x.y("), "[jinja] t.jinja:1: unexpected end of template in argument list");
}

TEST(JinjaErrors, RaiseExceptionCarriesTheMessage) {
  EXPECT_EQ(error_of("{%- if messages[0].role != 'user' %}\n{{- raise_exception('Conversation roles must alternate') }}\n{%- endif %}",
                     R"({"messages": [{"role": "system"}]})"),
            "[jinja] t.jinja:2: raise_exception: Conversation roles must alternate");
}

TEST(JinjaErrors, DeepRecursionIsBounded) {
  EXPECT_NE(error_of("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}").find("call depth limit"), std::string::npos);
}

}  // namespace
}  // namespace mere::jinja
