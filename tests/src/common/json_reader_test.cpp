// Tests of the strict JSON reader: exact types, ranges, missing and unknown keys, and that every
// message starts with the full field path.
#include "src/common/json_reader.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "src/common/error.hpp"

namespace mplan {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(JsonReader, ParseErrorNamesTheDocument) {
  EXPECT_THAT(error_of([] { parse_json("{\"a\": }", "plan.json"); }),
              StartsWith("plan.json: invalid JSON: parse error"));
  EXPECT_EQ(parse_json("{\"a\": 1}", "x")["a"].get<int>(), 1);
}

TEST(JsonReader, TopLevelMustBeAnObject) {
  Json j = Json::array();
  EXPECT_EQ(error_of([&] { JsonObject o(j, ""); }), "document: must be a JSON object, got []");
  Json n = 3;
  EXPECT_EQ(error_of([&] { JsonObject o(n, "parallel"); }),
            "parallel: must be a JSON object, got 3");
}

TEST(JsonReader, IntegersAreExact) {
  Json j = parse_json(R"({"a": 2, "b": 2.0, "c": "2", "d": -1, "e": 18446744073709551615,
                          "f": true})",
                      "t");
  JsonObject o(j, "parallel");
  EXPECT_EQ(o.get_int("a", 1), 2);
  EXPECT_EQ(error_of([&] { o.get_int("b", 1); }), "parallel.b: must be an integer, got 2.0");
  EXPECT_EQ(error_of([&] { o.get_int("c", 1); }), "parallel.c: must be an integer, got \"2\"");
  EXPECT_EQ(error_of([&] { o.get_int("d", 1); }), "parallel.d: must be >= 1, got -1");
  EXPECT_THAT(error_of([&] { o.get_int("e", 1); }), HasSubstr("parallel.e: integer out of range"));
  EXPECT_EQ(error_of([&] { o.get_int("f", 1); }), "parallel.f: must be an integer, got true");
}

TEST(JsonReader, DefaultsApplyOnlyWhenAbsentOrNull) {
  Json j = parse_json(R"({"a": null, "b": 0})", "t");
  JsonObject o(j, "p");
  EXPECT_EQ(o.get_int("a", 7, 1), 7);
  EXPECT_EQ(o.get_int("missing", 7, 1), 7);
  EXPECT_EQ(error_of([&] { o.get_int("b", 7, 1); }), "p.b: must be >= 1, got 0");
  EXPECT_FALSE(o.get_optional_int("a", 1).has_value());
  EXPECT_EQ(o.get_optional_int("b", 0), 0);
  EXPECT_FALSE(o.has("a"));
  EXPECT_TRUE(o.has("b"));
}

TEST(JsonReader, MissingRequiredFieldIsNamed) {
  Json j = parse_json("{}", "t");
  JsonObject o(j, "model");
  EXPECT_EQ(error_of([&] { o.get_int("num_layers", 1); }), "model.num_layers: missing (required)");
  EXPECT_EQ(error_of([&] { o.get_string("name"); }), "model.name: missing (required)");
  JsonObject top(j, "");
  EXPECT_EQ(error_of([&] { top.get_object("parallel"); }), "parallel: missing (required)");
}

TEST(JsonReader, NumbersBoolsStringsEnums) {
  Json j =
      parse_json(R"({"x": 1, "y": 0.5, "s": "hi", "b": true, "e": "swiglu", "bad": "relu"})", "t");
  JsonObject o(j, "m");
  EXPECT_EQ(o.get_number("x"), 1.0);  // an integer is a number
  EXPECT_EQ(o.get_number("y", 0.0), 0.5);
  EXPECT_EQ(error_of([&] { o.get_number("y", 1.0); }), "m.y: must be >= 1, got 0.5");
  EXPECT_EQ(error_of([&] { o.get_number("s"); }), "m.s: must be a number, got \"hi\"");
  EXPECT_EQ(error_of([&] { o.get_bool("x"); }), "m.x: must be true or false, got 1");
  EXPECT_TRUE(o.get_bool("b"));
  EXPECT_EQ(error_of([&] { o.get_string("x"); }), "m.x: must be a string, got 1");
  EXPECT_EQ(o.get_enum("e", {"gelu", "swiglu"}), "swiglu");
  EXPECT_EQ(error_of([&] {
              o.get_enum("bad", {"gelu", "swiglu"});
            }),
            "m.bad: must be one of gelu, swiglu; got \"relu\"");
  EXPECT_EQ(o.get_enum("absent", {"gelu", "swiglu"}, "gelu"), "gelu");
}

TEST(JsonReader, UnknownKeysAreReportedWithTheKnownOnes) {
  Json j = parse_json(R"({"tp": 2, "tpp": 4, "note": "x"})", "t");
  JsonObject o(j, "parallel");
  o.get_int("tp", 1);
  o.allow("note");
  EXPECT_EQ(error_of([&] { o.finish(); }), "parallel.tpp: unknown key (known keys here: note, tp)");
}

TEST(JsonReader, NestedObjectsCarryTheirPath) {
  Json j = parse_json(R"({"moe": {"num_experts": 0}})", "t");
  JsonObject o(j, "model");
  JsonObject moe = o.get_object("moe");
  EXPECT_EQ(moe.path(), "model.moe");
  EXPECT_EQ(error_of([&] { moe.get_int("num_experts", 1); }),
            "model.moe.num_experts: must be >= 1, got 0");
}

TEST(JsonReader, ExcerptsAreShort) {
  EXPECT_EQ(json_excerpt(Json("abc")), "\"abc\"");
  std::string long_text(100, 'x');
  EXPECT_EQ(json_excerpt(Json(long_text)).size(), 40u);
}

}  // namespace
}  // namespace mplan
