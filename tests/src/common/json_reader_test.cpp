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
  EXPECT_EQ(o.get_int("a", {1, 10}), 2);
  EXPECT_EQ(error_of([&] { o.get_int("b", {1, 10}); }), "parallel.b: must be an integer, got 2.0");
  EXPECT_EQ(error_of([&] {
              o.get_int("c", {1, 10});
            }),
            "parallel.c: must be an integer, got \"2\"");
  EXPECT_EQ(error_of([&] { o.get_int("d", {1, 10}); }), "parallel.d: must be >= 1, got -1");
  EXPECT_THAT(error_of([&] {
                o.get_int("e", {1, 10});
              }),
              HasSubstr("parallel.e: integer out of range"));
  EXPECT_EQ(error_of([&] { o.get_int("f", {1, 10}); }), "parallel.f: must be an integer, got true");
}

TEST(JsonReader, DefaultsApplyOnlyWhenAbsentOrNull) {
  Json j = parse_json(R"({"a": null, "b": 0})", "t");
  JsonObject o(j, "p");
  EXPECT_EQ(o.get_int("a", 7, {1, 10}), 7);
  EXPECT_EQ(o.get_int("missing", 7, {1, 10}), 7);
  EXPECT_EQ(error_of([&] { o.get_int("b", 7, {1, 10}); }), "p.b: must be >= 1, got 0");
  EXPECT_FALSE(o.get_optional_int("a", {1, 10}).has_value());
  EXPECT_EQ(o.get_optional_int("b", {0, 10}), 0);
  EXPECT_FALSE(o.has("a"));
  EXPECT_TRUE(o.has("b"));
}

TEST(JsonReader, MissingRequiredFieldIsNamed) {
  Json j = parse_json("{}", "t");
  JsonObject o(j, "model");
  EXPECT_EQ(error_of([&] {
              o.get_int("num_layers", {1, 10});
            }),
            "model.num_layers: missing (required)");
  EXPECT_EQ(error_of([&] { o.get_string("name"); }), "model.name: missing (required)");
  JsonObject top(j, "");
  EXPECT_EQ(error_of([&] { top.get_object("parallel"); }), "parallel: missing (required)");
}

TEST(JsonReader, NumbersBoolsStringsEnums) {
  Json j =
      parse_json(R"({"x": 1, "y": 0.5, "s": "hi", "b": true, "e": "swiglu", "bad": "relu"})", "t");
  JsonObject o(j, "m");
  EXPECT_EQ(o.get_number("x", {0.0, 10.0}), 1.0);  // an integer is a number
  EXPECT_EQ(o.get_number("y", {0.0, 10.0}), 0.5);
  EXPECT_EQ(error_of([&] { o.get_number("y", {1.0, 10.0}); }), "m.y: must be >= 1, got 0.5");
  EXPECT_EQ(error_of([&] { o.get_number("s", {0.0, 10.0}); }), "m.s: must be a number, got \"hi\"");
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
  o.get_int("tp", {1, 10});
  o.allow("note");
  EXPECT_EQ(error_of([&] { o.finish(); }), "parallel.tpp: unknown key (known keys here: note, tp)");
}

TEST(JsonReader, NestedObjectsCarryTheirPath) {
  Json j = parse_json(R"({"moe": {"num_experts": 0}})", "t");
  JsonObject o(j, "model");
  JsonObject moe = o.get_object("moe");
  EXPECT_EQ(moe.path(), "model.moe");
  EXPECT_EQ(error_of([&] {
              moe.get_int("num_experts", {1, 10});
            }),
            "model.moe.num_experts: must be >= 1, got 0");
}

TEST(JsonReader, RangesHaveAnUpperEnd) {
  Json j = parse_json(R"({"tp": 2000, "lat": 1e29, "ok": 8})", "t");
  JsonObject o(j, "parallel");
  EXPECT_EQ(error_of([&] {
              o.get_int("tp", {1, 1024});
            }),
            "parallel.tp: must be <= 1024, got 2000");
  EXPECT_EQ(error_of([&] {
              o.get_number("lat", {0.0, 1e6});
            }),
            "parallel.lat: must be <= 1e+06, got 1e+29");
  EXPECT_EQ(o.get_int("ok", {1, 8}), 8);
  EXPECT_EQ(check_int_range(5, {1, 5}, "--gpus"), 5);
  EXPECT_EQ(error_of([] { check_int_range(0, {1, 5}, "--gpus"); }), "--gpus: must be >= 1, got 0");
  EXPECT_THAT(error_of([] {
                check_number_range(1.0 / 0.0, {0.0, 1.0}, "--x");
              }),
              StartsWith("--x: must be finite"));
}

TEST(JsonReader, DuplicateKeysAreRefusedWithTheirPath) {
  EXPECT_EQ(error_of([] { parse_json(R"({"parallel": {"tp": 2, "tp": 4}})", "plan.json"); }),
            "plan.json: parallel.tp: duplicate key (each key may appear once in an object)");
  EXPECT_EQ(error_of([] { parse_json(R"({"a": 1, "a": 1})", ""); }),
            "a: duplicate key (each key may appear once in an object)");
  // The same key in two objects is fine.
  EXPECT_EQ(parse_json(R"({"x": {"a": 1}, "y": {"a": 2}})", "t")["y"]["a"], 2);
}

TEST(JsonReader, NumbersBeyondDoubleAreFieldErrors) {
  EXPECT_EQ(error_of([] { parse_json(R"({"model": {"num_layers": 1e999}})", "p.json"); }),
            "p.json: model.num_layers: number out of range (1e999)");
  EXPECT_EQ(error_of([] { parse_json(R"({"c": [[1, 2], [3, -1e400]]})", "p.json"); }),
            "p.json: c[1][1]: number out of range (-1e400)");
  // Integers beyond 64 bits read as doubles; JsonObject refuses them as integers.
  Json j = parse_json(R"({"n": 123456789012345678901234567890})", "t");
  EXPECT_EQ(error_of([&] {
              JsonObject(j, "m").get_int("n", {1, 10});
            }),
            "m.n: must be an integer, got 1.2345678901234568e+29");
}

TEST(JsonReader, DepthAndSizeAreBounded) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  EXPECT_THAT(error_of([&] { parse_json(deep, "d.json"); }), StartsWith("d.json: [0][0][0]"));
  EXPECT_THAT(error_of([&] { parse_json(deep, "d.json"); }),
              HasSubstr("nested deeper than 32 levels"));
  std::string nested_ok;
  for (int i = 0; i < kMaxJsonDepth; ++i) nested_ok += "{\"a\":";
  nested_ok += "1" + std::string(kMaxJsonDepth, '}');
  EXPECT_NO_THROW(parse_json(nested_ok, "t"));
  const std::string big(kMaxJsonBytes + 1, ' ');
  EXPECT_THAT(error_of([&] { parse_json(big, "big.json"); }),
              StartsWith("big.json: larger than 1 MiB"));
  std::string many = "{";
  for (size_t i = 0; i <= kMaxJsonKeys; ++i) many += cat(i ? "," : "", "\"k", i, "\": 0");
  many += "}";
  EXPECT_THAT(error_of([&] { parse_json(many, "m.json"); }), HasSubstr("more than 1024 keys"));
}

TEST(JsonReader, SyntaxErrorsNameTheDocumentOnce) {
  const std::string e = error_of([] { parse_json("{\"a\": 1,}", "plan.json"); });
  EXPECT_THAT(e, StartsWith("plan.json: invalid JSON: parse error at line 1"));
  EXPECT_EQ(e.find("plan.json", 1), std::string::npos) << e;
  EXPECT_THAT(error_of([] { parse_json("", "empty.json"); }),
              StartsWith("empty.json: invalid JSON"));
}

TEST(JsonReader, MessagesStayOnOneLine) {
  Json j = parse_json("{\"bad\\nkey\": 1}", "t");
  JsonObject o(j, "p");
  const std::string e = error_of([&] { o.finish(); });
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  EXPECT_THAT(e, StartsWith("p.\"bad\\nkey\": unknown key"));
}

TEST(JsonReader, ExcerptsAreShort) {
  EXPECT_EQ(json_excerpt(Json("abc")), "\"abc\"");
  std::string long_text(100, 'x');
  EXPECT_EQ(json_excerpt(Json(long_text)).size(), 40u);
}

}  // namespace
}  // namespace mplan
