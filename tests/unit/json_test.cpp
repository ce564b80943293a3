// JSON parser/serialiser: round trips, order preservation, errors with positions, depth bound.
#include <gtest/gtest.h>

#include "core/error.h"
#include "core/json.h"

using mere::Json;

TEST(Json, ParsesAndKeepsObjectOrder) {
  Json j = Json::parse(R"({"b": 1, "a": [true, null, 2.5, "x\u00e9\ud83d\ude00"], "c": {"z": -3}})");
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(j.as_object()[0].first, "b");
  EXPECT_EQ(j.as_object()[1].first, "a");
  EXPECT_EQ(j.at("b").as_int(), 1);
  EXPECT_TRUE(j.at("b").is_integer());
  EXPECT_FALSE(j.at("a").at(2).is_integer());
  EXPECT_EQ(j.at("a").at(3).as_string(), "x\xc3\xa9\xf0\x9f\x98\x80");
  EXPECT_EQ(j.at("c").at("z").as_int(), -3);
  EXPECT_EQ(j.dump(), R"({"b":1,"a":[true,null,2.5,"xé😀"],"c":{"z":-3}})");
}

TEST(Json, DumpOptionsMatchPython) {
  Json j = Json::parse(R"({"k": [1, "é"], "f": 1.0})");
  // aggregate init (assigning the members one by one trips GCC 12's -O3 maybe-uninitialized on SSO strings)
  const mere::JsonDumpOptions py{-1, ", ", ": ", true, false};
  EXPECT_EQ(j.dump(py), R"({"k": [1, "\u00e9"], "f": 1.0})");
  mere::JsonDumpOptions ind;
  ind.indent = 2;
  EXPECT_EQ(Json::parse("[1,{\"a\":2}]").dump(ind), "[\n  1,\n  {\n    \"a\": 2\n  }\n]");
}

TEST(Json, LargeIntegersStayExact) {
  Json j = Json::parse("[9007199254740993, 1e3, 18446744073709551616]");
  EXPECT_EQ(j.at(0).as_int(), 9007199254740993LL);
  EXPECT_EQ(j.at(1).as_int(), 1000);
  EXPECT_FALSE(j.at(2).is_integer());
}

TEST(Json, ErrorsNamePosition) {
  try {
    Json::parse("{\n  \"a\": [1, 2,,]\n}", "cfg.json");
    FAIL();
  } catch (const mere::Error& e) {
    EXPECT_NE(std::string(e.what()).find("cfg.json:2:"), std::string::npos) << e.what();
  }
  for (const char* bad : {"", "{", "[1,]", "{\"a\" 1}", "\"abc", "tru", "01x", "{\"a\":1}x", "\"\\q\"", "[1e]", "-"})
    EXPECT_THROW(Json::parse(bad), mere::Error) << bad;
}

TEST(Json, DepthIsBounded) {
  std::string deep(100000, '[');
  EXPECT_THROW(Json::parse(deep), mere::Error);
}

TEST(Json, TypeErrorsAreErrors) {
  Json j = Json::parse(R"({"a": "s"})");
  EXPECT_THROW(j.at("a").as_int(), mere::Error);
  EXPECT_THROW(j.at("missing"), mere::Error);
  EXPECT_THROW(j.get_int("a", 0), mere::Error);
  EXPECT_EQ(j.get_int("nope", 7), 7);
}
