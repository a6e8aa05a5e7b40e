// Tests of `mplan simulate` run as a program: the text report, the JSON shape the issue fixes
// (iteration_time_s, tokens_per_s, model_tflops_per_gpu, mfu, breakdown, memory.per_stage...),
// --hardware replacing the cluster, --trace writing a Chrome trace, --full-grid giving the same
// time, and exit 2 with every broken rule for an invalid plan or a bad flag value.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/cli/cli_runner.hpp"

namespace {

using ::testing::HasSubstr;
using Json = nlohmann::ordered_json;

using mplan::cli_test::Result;
using mplan::cli_test::run;
using mplan::cli_test::shipped_plan;
using mplan::cli_test::slurp;
using mplan::cli_test::temp_path;
using mplan::cli_test::write_temp;

const std::string kDp4 = shipped_plan("gpt3-1.3b-dp4");

Json pipeline_plan() {
  return Json::parse(R"({"schema_version": 1, "model": "gpt3-1.3b", "cluster": "h200x4",
    "parallel": {"tp": 2, "pp": 2, "dp": 1, "micro_batch_size": 4, "global_batch_size": 64}})");
}

TEST(SimulateCli, TextReport) {
  Result r = run("simulate " + kDp4);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("gpt3-1.3b on 4 GPUs of h200x4"));
  EXPECT_THAT(r.out, HasSubstr("4 micro-batches of 4"));
  for (const char* s : {"iteration time", "tokens/s", "model TFLOP/s per GPU",
                        "Megatron-LM's num_floating_point_operations", "MFU", "time breakdown",
                        "tensor-parallel comm", "pipeline bubble", "optimizer",
                        "peak memory per pipeline stage", "activations", "fits"})
    EXPECT_THAT(r.out, HasSubstr(s));
}

TEST(SimulateCli, JsonShape) {
  Result r = run("simulate " + write_temp("pp.json", pipeline_plan().dump(2)) + " --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const Json j = Json::parse(r.out);
  EXPECT_EQ(j["schema_version"], 1);
  for (const char* k : {"iteration_time_s", "tokens_per_s", "model_tflops_per_gpu", "mfu"}) {
    ASSERT_TRUE(j[k].is_number()) << k;
    EXPECT_GT(j[k].get<double>(), 0) << k;
  }
  EXPECT_EQ(j["flops_formula"], "megatron");
  // tokens/s = 64 sequences x 2048 tokens / iteration time.
  EXPECT_NEAR(j["tokens_per_s"].get<double>(), 64.0 * 2048 / j["iteration_time_s"].get<double>(),
              1e-6 * j["tokens_per_s"].get<double>());
  double sum = 0;
  for (const char* k : {"compute_s", "tp_comm_s", "cp_comm_s", "ep_comm_s", "pp_comm_s",
                        "dp_comm_s", "bubble_s", "optimizer_s"}) {
    ASSERT_TRUE(j["breakdown"][k].is_number()) << k;
    sum += j["breakdown"][k].get<double>();
  }
  EXPECT_NEAR(sum, j["iteration_time_s"].get<double>(), 1e-9);
  const Json& m = j["memory"];
  ASSERT_EQ(m["per_stage"].size(), 2u);
  int64_t peak = 0;
  for (size_t s = 0; s < 2; ++s) {
    const Json& st = m["per_stage"][s];
    EXPECT_EQ(st["pp_rank"], s);
    int64_t parts = 0;
    for (const char* k :
         {"weights_bytes", "grads_bytes", "optimizer_bytes", "activations_bytes", "other_bytes"})
      parts += st[k].get<int64_t>();
    EXPECT_EQ(st["peak_bytes"].get<int64_t>(), parts);
    peak = std::max(peak, st["peak_bytes"].get<int64_t>());
  }
  EXPECT_EQ(m["peak_bytes"], peak);
  EXPECT_EQ(m["capacity_bytes"].get<int64_t>(), static_cast<int64_t>(140.4 * (1 << 30) + 0.5));
  EXPECT_EQ(m["fits"], true);
}

TEST(SimulateCli, FullGridGivesTheSameTime) {
  const std::string path = write_temp("grid.json", pipeline_plan().dump(2));
  Result a = run("simulate " + path + " --json");
  Result b = run("simulate " + path + " --json --full-grid");
  ASSERT_EQ(a.code, 0) << a.err;
  ASSERT_EQ(b.code, 0) << b.err;
  EXPECT_EQ(Json::parse(a.out)["iteration_time_s"], Json::parse(b.out)["iteration_time_s"]);
  EXPECT_EQ(Json::parse(b.out)["simulation"]["engine_ranks"], 4);
}

TEST(SimulateCli, HardwareReplacesTheCluster) {
  Result h200 = run("simulate " + kDp4 + " --json");
  Result a100 = run("simulate " + kDp4 + " --json --hardware dgx-a100-80g");
  ASSERT_EQ(a100.code, 0) << a100.err;
  const Json a = Json::parse(a100.out), h = Json::parse(h200.out);
  EXPECT_EQ(a["hardware"], "dgx-a100-80g");
  EXPECT_GT(a["iteration_time_s"].get<double>(), 2 * h["iteration_time_s"].get<double>());
  EXPECT_EQ(a["memory"]["capacity_bytes"].get<int64_t>(), int64_t{80} << 30);
  Result bad = run("simulate " + kDp4 + " --hardware dgx-z9000");
  EXPECT_EQ(bad.code, 2);
  EXPECT_THAT(bad.err, HasSubstr("--hardware"));
}

// Processes and complete events of a trace file.
std::pair<int, int> trace_counts(const std::string& path) {
  const Json t = Json::parse(slurp(path));
  int processes = 0, complete = 0;
  for (const Json& e : t["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "process_name") ++processes;
    if (e["ph"] == "X") ++complete;
  }
  return {processes, complete};
}

TEST(SimulateCli, TraceIsChromeTraceJson) {
  const std::string trace = temp_path("trace.json"), ops = temp_path("trace_ops.json");
  const std::string plan = write_temp("t.json", pipeline_plan().dump(2));
  Result r = run("simulate " + plan + " --trace " + trace);
  ASSERT_EQ(r.code, 0) << r.err;
  const auto [processes, summary] = trace_counts(trace);
  EXPECT_EQ(processes, 2);  // one per pipeline stage
  // Summary: one event per op: 16 micro-batches x 2 stages x (F, B), their transfers, buckets.
  EXPECT_GT(summary, 64);
  r = run("simulate " + plan + " --trace " + ops + " --trace-level ops");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto [processes_ops, all] = trace_counts(ops);
  EXPECT_EQ(processes_ops, 2);
  EXPECT_GT(all, 3 * summary);  // every GEMM and collective inside the passes
  EXPECT_LT(slurp(trace).size() * 3, slurp(ops).size());
  std::remove(trace.c_str());
  std::remove(ops.c_str());
  EXPECT_THAT(run("simulate " + plan + " --trace " + trace + " --trace-level kernels").err,
              HasSubstr("--trace-level: must be summary or ops"));
  Result bad = run("simulate " + kDp4 + " --trace /nonexistent-dir/t.json");
  EXPECT_EQ(bad.code, 2);
  EXPECT_THAT(bad.err, HasSubstr("--trace: cannot write"));
}

TEST(SimulateCli, InvalidPlanListsEveryViolation) {
  Json p = pipeline_plan();
  p["parallel"]["tp"] = 3;                  // 16 heads
  p["parallel"]["global_batch_size"] = 30;  // not a multiple of 4 x dp
  const std::string path = write_temp("bad.json", p.dump(2));
  Result r = run("simulate " + path);
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("broken rules:"));
  EXPECT_THAT(r.err, HasSubstr("parallel.tp"));
  EXPECT_THAT(r.err, HasSubstr("parallel.global_batch_size"));
  EXPECT_TRUE(r.out.empty());
  Result missing = run("simulate /nonexistent/plan.json");
  EXPECT_EQ(missing.code, 2);
}

TEST(SimulateCli, PlanThatDoesNotFitExitsOneUnlessAllowed) {
  const Json p = Json::parse(R"({"schema_version": 1, "model": "gpt3-175b", "cluster": "dgx-h100",
    "parallel": {"tp": 4, "pp": 8, "dp": 3, "micro_batch_size": 1, "global_batch_size": 96}})");
  const std::string path = write_temp("oom.json", p.dump(2));  // dp groups straddle nodes
  Result r = run("simulate " + path);
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.out, HasSubstr("DOES NOT FIT"));
  EXPECT_THAT(r.err, HasSubstr("does not fit: peak"));
  EXPECT_THAT(r.err, HasSubstr("--allow-oom"));
  Result a = run("simulate " + path + " --allow-oom");
  EXPECT_EQ(a.code, 0) << a.err;
  EXPECT_THAT(a.out, HasSubstr("DOES NOT FIT"));
  std::remove(path.c_str());
}

TEST(SimulateCli, OneTimeStyleAndTheTinyPlansSimulate) {
  Result r = run("simulate " + shipped_plan("gpt3-1.3b-pp4"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr(" ms\n"));  // below 10 s: milliseconds
  const Json big = Json::parse(R"({"schema_version": 1, "model": "gpt3-175b",
    "cluster": "dgx-a100-80g", "parallel": {"tp": 8, "pp": 16, "dp": 1, "micro_batch_size": 1,
    "global_batch_size": 512, "recompute": "full"}})");
  Result b = run("simulate " + write_temp("big.json", big.dump(2)) + " --allow-oom");
  ASSERT_EQ(b.code, 0) << b.err;
  EXPECT_THAT(b.out, ::testing::ContainsRegex("iteration time +[0-9]+\\.[0-9][0-9] s\n"));
  // Every CPU test plan (configs/plans/tiny-gpt*.json), so that `mplan run --backend cpu` on it
  // prints the prediction beside the measurement and checks the memory.
  int tiny_plans = 0;
  for (const auto& e :
       std::filesystem::directory_iterator(std::string(MPLAN_SOURCE_DIR) + "/configs/plans")) {
    const std::string name = e.path().filename().string();
    if (name.rfind("tiny-gpt", 0) != 0) continue;
    ++tiny_plans;
    Result t = run("simulate " + e.path().string());
    EXPECT_EQ(t.code, 0) << name << ": " << t.err;
  }
  EXPECT_GE(tiny_plans, 4);
}

TEST(SimulateCli, PlansTooLargeToSimulateExitTwo) {
  Json p = pipeline_plan();
  p["parallel"]["micro_batch_size"] = 1;
  p["parallel"]["global_batch_size"] = 1 << 20;  // 2^20 micro-batches x 2 stages
  Result r = run("simulate " + write_temp("huge.json", p.dump(2)));
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("passes to simulate, above the simulator's limit"));
}

TEST(SimulateCli, StackPicksTheImplementationAndItsBand) {
  // The reference plan on the A100 profile: its validation residuals are megatron-te's, fitted
  // in-sample; mplan has none there.
  Result te = run("simulate " + kDp4 + " --hardware dgx-a100-80g --stack megatron");
  ASSERT_EQ(te.code, 0) << te.err;
  EXPECT_THAT(
      te.out,
      HasSubstr("predicted for megatron-te: Megatron-LM with Transformer Engine (--stack)"));
  EXPECT_THAT(te.out, HasSubstr("(in-sample, 18 runs, 10th-90th percentile of megatron-te's"));
  Result mp = run("simulate " + kDp4 + " --hardware dgx-a100-80g --stack mplan --json");
  ASSERT_EQ(mp.code, 0) << mp.err;
  const Json j = Json::parse(mp.out);
  EXPECT_EQ(j["implementation"], "mplan");
  EXPECT_EQ(j["uncertainty"]["iteration_time_s"]["available"], false);
  EXPECT_THAT(j["uncertainty"]["iteration_time_s"]["reason"].get<std::string>(),
              HasSubstr("no validation runs for mplan"));
  Result text = run("simulate " + kDp4 + " --hardware dgx-a100-80g --stack mplan");
  EXPECT_THAT(text.out, HasSubstr("no uncertainty band (the profile 'dgx-a100-80g' has no "
                                  "validation runs for mplan)"));
  // The executor's lowering differs from Megatron's (no dropout, fused epilogues): another time.
  const Json te_json = Json::parse(
      run("simulate " + kDp4 + " --hardware dgx-a100-80g --stack megatron-te --json").out);
  EXPECT_EQ(te_json["uncertainty"]["iteration_time_s"]["in_sample"], true);
  const auto range = te_json["uncertainty"]["iteration_time_s"]["range"];
  EXPECT_LT(range[0].get<double>(), te_json["iteration_time_s"].get<double>());
  EXPECT_GT(range[1].get<double>(), te_json["iteration_time_s"].get<double>());
  EXPECT_NE(te_json["iteration_time_s"], j["iteration_time_s"]);
  // Megatron-LM's local implementation materializes the attention scores: slower than flash.
  const Json local = Json::parse(
      run("simulate " + kDp4 + " --hardware dgx-a100-80g --stack megatron-local --json").out);
  EXPECT_EQ(local["implementation"], "megatron-local");
  EXPECT_GT(local["iteration_time_s"].get<double>(), te_json["iteration_time_s"].get<double>());
  Result bad = run("simulate " + kDp4 + " --stack trt");
  EXPECT_EQ(bad.code, 2);
  EXPECT_THAT(bad.err, HasSubstr("--stack: must be one of megatron (= megatron-te), megatron-te, "
                                 "megatron-local, mplan, got \"trt\""));
}

TEST(SimulateCli, HelpListsEveryOption) {
  Result r = run("simulate --help");
  ASSERT_EQ(r.code, 0);
  for (const char* s :
       {"--hardware", "--stack", "--json", "--trace", "--trace-level", "--allow-oom", "--full-grid",
        "--no-dropout", "--no-fusion", "--scatter-gather-tensors-in-pipeline", "Examples:"})
    EXPECT_THAT(r.out, HasSubstr(s));
}

}  // namespace
