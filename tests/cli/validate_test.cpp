// Tests of `mplan validate` run as a program: exit 0 with "valid" and the derived sizes, exit 2
// listing every broken rule with its field, exit 2 naming the field for a malformed file, and
// the JSON shape.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/cli/cli_runner.hpp"

namespace {

using ::testing::HasSubstr;
using Json = nlohmann::ordered_json;

using mplan::cli_test::Result;
using mplan::cli_test::run;
using mplan::cli_test::shipped_plan;
using mplan::cli_test::temp_path;
using mplan::cli_test::write_temp;

const std::string kShippedPlan = shipped_plan("gpt3-1.3b-dp4");

Json llama_plan() {
  return Json::parse(R"({"schema_version": 1, "model": "llama3-8b", "cluster": "dgx-h200",
    "parallel": {"tp": 2, "pp": 2, "dp": 4, "micro_batch_size": 1, "global_batch_size": 32}})");
}

TEST(ValidateCli, ShippedPlanIsValid) {
  Result r = run("validate " + kShippedPlan);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("valid: gpt3-1.3b on 4 GPUs (1 node of h200x4)"));
  EXPECT_THAT(r.out, HasSubstr("4 micro-batches of 4 per step"));
}

TEST(ValidateCli, ValidJsonShape) {
  Result r = run("validate " + kShippedPlan + " --json");
  ASSERT_EQ(r.code, 0) << r.err;
  Json j = Json::parse(r.out);
  EXPECT_EQ(j["valid"], true);
  EXPECT_EQ(j["violations"], Json::array());
  EXPECT_EQ(j["world_size"], 4);
  EXPECT_EQ(j["num_nodes"], 1);
  EXPECT_EQ(j["num_microbatches"], 4);
}

TEST(ValidateCli, BrokenRulesAreListedAndExitTwo) {
  Json p = llama_plan();
  p["parallel"]["tp"] = 16;  // 8 query groups
  p["parallel"]["pp"] = 1;
  p["parallel"]["dp"] = 1;
  p["parallel"]["global_batch_size"] = 30;
  p["parallel"]["micro_batch_size"] = 4;
  std::string path = write_temp("bad.json", p.dump(2));
  Result r = run("validate " + path);
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.out, HasSubstr("2 broken rules:"));
  EXPECT_THAT(r.out, HasSubstr("parallel.tp: num_query_groups (8) must be a multiple of "
                               "tensor_model_parallel_size (16)"));
  EXPECT_THAT(r.out, HasSubstr("parallel.global_batch_size: global batch size (30) is not "
                               "divisible by micro batch size (4) times data parallel size (1)"));
  Result j = run("validate " + path + " --json");
  EXPECT_EQ(j.code, 2);
  Json v = Json::parse(j.out);
  EXPECT_EQ(v["valid"], false);
  ASSERT_EQ(v["violations"].size(), 2u);
  EXPECT_EQ(v["violations"][0]["field"], "parallel.tp");
  EXPECT_TRUE(v["violations"][0]["rule"].is_string());
  EXPECT_EQ(v["violations"][1]["field"], "parallel.global_batch_size");
  EXPECT_FALSE(v.contains("num_microbatches"));
  std::remove(path.c_str());
}

TEST(ValidateCli, RecipesTheGpuCannotRunExitTwo) {
  Json p = llama_plan();
  p["training"]["fp8_format"] = "e4m3";
  p["training"]["fp8_recipe"] = "mxfp8";
  std::string path = write_temp("mxfp8.json", p.dump(2));
  Result r = run("validate " + path);
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.out, HasSubstr("training.fp8_recipe: MXFP8 (fp8_recipe mxfp8) needs compute "
                               "capability 10 or later (Blackwell)"));
  Result s = run("simulate " + path);
  EXPECT_EQ(s.code, 2);
  EXPECT_THAT(s.err, HasSubstr("training.fp8_recipe: MXFP8"));
  std::remove(path.c_str());
}

// A plan for mplan's executor (training.implementation mplan) breaks a rule where the executor
// does not run it, as `mplan run` and the sweep's --stack mplan refuse it; for Megatron-LM the
// same plan is valid.
TEST(ValidateCli, WhatTheExecutorDoesNotRunIsBrokenForTheMplanStack) {
  Json p = Json::parse(mplan::cli_test::slurp(kShippedPlan));
  p["training"]["grads_in_fp32"] = false;
  p["training"]["implementation"] = "megatron-te";
  std::string path = write_temp("bf16_grads.json", p.dump(2));
  Result megatron = run("validate " + path);
  EXPECT_EQ(megatron.code, 0) << megatron.out << megatron.err;
  p["training"]["implementation"] = "mplan";
  path = write_temp("bf16_grads.json", p.dump(2));
  Result r = run("validate " + path);
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.out, HasSubstr("1 broken rule:\n  training.grads_in_fp32: mplan's executor has "
                               "no bf16 main gradients (training.implementation mplan)"));
  Result j = run("validate " + path + " --json");
  EXPECT_EQ(j.code, 2);
  EXPECT_EQ(Json::parse(j.out)["violations"][0]["field"], "training.grads_in_fp32");
  p["training"]["grads_in_fp32"] = true;
  path = write_temp("bf16_grads.json", p.dump(2));
  EXPECT_EQ(run("validate " + path).code, 0);
  std::remove(path.c_str());
}

TEST(ValidateCli, MalformedPlanNamesTheFieldAndExitsTwo) {
  Json p = llama_plan();
  p["parallel"]["tp"] = "2";
  std::string path = write_temp("type.json", p.dump(2));
  Result r = run("validate " + path);
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr(path + ": parallel.tp: must be an integer, got \"2\""));
  std::remove(path.c_str());

  Json q = llama_plan();
  q["parallel"]["pipeline_parallel"] = 2;
  path = write_temp("unknown.json", q.dump(2));
  r = run("validate " + path);
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("parallel.pipeline_parallel: unknown key"));
  std::remove(path.c_str());

  Json m = llama_plan();
  m["parallel"].erase("dp");
  path = write_temp("missing.json", m.dump(2));
  r = run("validate " + path);
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("parallel.dp: missing (required)"));
  std::remove(path.c_str());

  Json u = llama_plan();
  u["model"] = "llama9";
  path = write_temp("preset.json", u.dump(2));
  r = run("validate " + path);
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("model: unknown model preset 'llama9'"));
  std::remove(path.c_str());
}

// GPT-3 175B on 32 H100s without recompute: valid, but its peak is far above 80 GB.
Json oom_plan() {
  return Json::parse(R"({"schema_version": 1, "model": "gpt3-175b", "cluster": "dgx-h100",
    "parallel": {"tp": 4, "pp": 8, "dp": 1, "micro_batch_size": 1, "global_batch_size": 64}})");
}

TEST(ValidateCli, ReportsTheMemoryFit) {
  Result r = run("validate " + kShippedPlan);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("per GPU: fits"));
  Json j = Json::parse(run("validate " + kShippedPlan + " --json").out);
  EXPECT_EQ(j["memory"]["fits"], true);
  EXPECT_GT(j["memory"]["peak_bytes"].get<int64_t>(), 0);
  EXPECT_LE(j["memory"]["peak_bytes"].get<int64_t>(), j["memory"]["capacity_bytes"].get<int64_t>());

  const std::string path = write_temp("oom.json", oom_plan().dump(2));
  Result o = run("validate " + path);
  EXPECT_EQ(o.code, 1);  // valid, does not fit
  EXPECT_THAT(o.out, HasSubstr("valid:"));
  EXPECT_THAT(o.out, HasSubstr("DOES NOT FIT"));
  Json oj = Json::parse(run("validate " + path + " --json").out);
  EXPECT_EQ(oj["valid"], true);
  EXPECT_EQ(oj["memory"]["fits"], false);
  std::remove(path.c_str());
}

TEST(ValidateCli, ParseErrorsNameTheFileOnce) {
  const std::string path = write_temp("broken.json", R"({"schema_version": 1,)");
  Result r = run("validate " + path);
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr(path + ": invalid JSON: parse error"));
  EXPECT_EQ(r.err.find(path), r.err.rfind(path)) << r.err;
  std::remove(path.c_str());
  Result d = run("validate " + ::testing::TempDir());
  EXPECT_EQ(d.code, 2);
  EXPECT_THAT(d.err, HasSubstr("is a directory, not a file"));
  Json dup = llama_plan();
  const std::string text = R"({"schema_version": 1, "schema_version": 1, "model": "llama3-8b"})";
  const std::string dpath = write_temp("dup.json", text);
  Result u = run("validate " + dpath);
  EXPECT_EQ(u.code, 2);
  EXPECT_THAT(u.err, HasSubstr(dpath + ": schema_version: duplicate key"));
  std::remove(dpath.c_str());
}

TEST(ValidateCli, MissingFileAndStdin) {
  Result r = run("validate " + temp_path("no-such-plan.json"));
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("cannot read file"));
  Result s = run("validate - < " + kShippedPlan);
  EXPECT_EQ(s.code, 0) << s.err;
  EXPECT_THAT(s.out, HasSubstr("valid:"));
}

TEST(ValidateCli, HelpListsEveryOption) {
  Result r = run("validate --help");
  EXPECT_EQ(r.code, 0);
  EXPECT_THAT(r.out, HasSubstr("--json"));
  EXPECT_THAT(r.out, HasSubstr("Examples:"));
}

}  // namespace
