// Tests of `mplan compare A.json B.json` run as a program: both plans side by side (figures,
// breakdown, memory per stage, groups with their placement), the largest differences named, the
// JSON form, and exit 2 naming the plan that breaks a rule.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "tests/cli/cli_runner.hpp"

namespace {

using ::testing::HasSubstr;
using Json = nlohmann::ordered_json;

using mplan::cli_test::Result;
using mplan::cli_test::run;
using mplan::cli_test::shipped_plan;
using mplan::cli_test::write_temp;

TEST(CompareCli, TwoPlansSideBySide) {
  Result r = run("compare " + shipped_plan("gpt3-1.3b-dp4") + " " + shipped_plan("gpt3-1.3b-pp4"));
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* s :
       {"A: ", "B: ", "iteration time", "tokens/s", "pipeline bubble", "time breakdown",
        "data-parallel comm", "peak memory per pipeline stage", "communication per group",
        "4 GPUs in 1 node", "x faster per iteration", "the largest differences (B - A):"})
    EXPECT_THAT(r.out, HasSubstr(s));
}

TEST(CompareCli, UnevenGroupsShowTheirSpread) {
  // tp 4 · pp 8 · dp 3 on 8-GPU nodes: the data-parallel group is 2 + 1 GPUs on 2 nodes.
  const Json p = Json::parse(R"({"schema_version": 1, "model": "gpt3-175b", "cluster": "dgx-h100",
    "parallel": {"tp": 4, "pp": 8, "dp": 3, "micro_batch_size": 1, "global_batch_size": 96,
                 "recompute": "full"}})");
  const std::string a = write_temp("cmp_a.json", p.dump(2));
  Result r = run("compare " + a + " " + a);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("3 GPUs on 2 nodes (1 to 2 per node)"));
  EXPECT_THAT(r.out, HasSubstr("A and B take the same time per iteration"));
}

TEST(CompareCli, JsonCarriesBothResultsAndGroups) {
  Result r = run("compare " + shipped_plan("gpt3-1.3b-dp4") + " " + shipped_plan("gpt3-1.3b-tp4") +
                 " --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const Json j = Json::parse(r.out);
  for (const char* side : {"a", "b"}) {
    EXPECT_TRUE(j[side].contains("breakdown")) << side;
    EXPECT_TRUE(j[side]["memory"].contains("per_stage")) << side;
    EXPECT_TRUE(j[side]["groups"].contains("dp_cp")) << side;
  }
  EXPECT_EQ(j["b"]["groups"]["tp"]["size"], 4);
  EXPECT_EQ(j["a"]["groups"]["dp_cp"]["size"], 4);
}

TEST(CompareCli, InvalidPlanExitsTwoNamingIt) {
  Json p = Json::parse(R"({"schema_version": 1, "model": "gpt3-1.3b", "cluster": "h200x4",
    "parallel": {"tp": 3, "dp": 1, "micro_batch_size": 1, "global_batch_size": 8}})");
  const std::string bad = write_temp("cmp_bad.json", p.dump(2));
  Result r = run("compare " + shipped_plan("gpt3-1.3b-dp4") + " " + bad);
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr(bad + " (B): "));
  EXPECT_THAT(r.err, HasSubstr("parallel.tp"));
  EXPECT_EQ(run("compare " + shipped_plan("gpt3-1.3b-dp4")).code, 2);  // B is required
}

}  // namespace
