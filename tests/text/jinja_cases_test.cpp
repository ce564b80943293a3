// Interpreter cases recorded from reference implementations (tests/data/chat/jinja_cases.json,
// produced by tests/npm/jinja_cases.js from @huggingface/jinja, or Python Jinja2 for constructs HF
// lacks): each case renders to the recorded output, or fails with the recorded message fragment.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "core/json.h"
#include "text/jinja.h"

namespace {

struct Case {
  std::string name, ref, tmpl, expected, error;
  mere::Json context;
};

std::vector<Case> load_cases() {
  std::vector<Case> out;
  mere::Json doc = mere::Json::parse_file(std::string(MERE_SOURCE_DIR) + "/tests/data/chat/jinja_cases.json");
  for (const auto& c : doc.at("cases").as_array()) {
    Case k;
    k.name = c.at("name").as_string();
    k.ref = c.at("ref").as_string();
    k.tmpl = c.at("template").as_string();
    k.context = c.at("context");
    k.expected = c.get_string("expected", "");
    k.error = c.get_string("error", "");
    out.push_back(std::move(k));
  }
  return out;
}

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class JinjaCases : public testing::TestWithParam<Case> {};

TEST_P(JinjaCases, MatchesReference) {
  const Case& c = GetParam();
  SCOPED_TRACE("template: " + c.tmpl);
  if (!c.error.empty()) {
    try {
      mere::jinja::Template t(c.tmpl);
      std::string out = t.render(c.context);
      FAIL() << "expected an error containing \"" << c.error << "\", rendered \"" << out << "\"";
    } catch (const mere::Error& e) {
      EXPECT_NE(std::string(e.what()).find(c.error), std::string::npos) << "message: " << e.what();
      EXPECT_EQ(std::string(e.what()).rfind("[jinja] ", 0), 0u) << "message: " << e.what();
    }
    return;
  }
  mere::jinja::Template t(c.tmpl);
  EXPECT_EQ(t.render(c.context), c.expected) << "reference: " << c.ref;
}

INSTANTIATE_TEST_SUITE_P(Recorded, JinjaCases, testing::ValuesIn(load_cases()),
                         [](const testing::TestParamInfo<Case>& info) { return info.param.name; });

}  // namespace
