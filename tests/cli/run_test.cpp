// `mplan run` end to end, through the built binary as a single MPI rank (singleton MPI, CPU
// backend): exit codes, the one-line errors, the text report and the JSON document's shape.
// Multi-rank runs are tested under mpirun (tests/exec, label mpi).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/cli/cli_runner.hpp"

namespace {

using mplan::cli_test::Result;
using mplan::cli_test::shipped_plan;
using mplan::cli_test::slurp;
using mplan::cli_test::temp_path;
using mplan::cli_test::write_temp;

// Runs `mplan ARGS`; stdout and stderr come together in Result::out.
Result run(const std::string& args) {
  mplan::cli_test::RunOptions options;
  options.merge_stderr = true;
  return mplan::cli_test::run(args, options);
}

const std::string kTinyGpt = shipped_plan("tiny-gpt");

TEST(RunCommand, TrainsTheTinyPlanAndWritesJson) {
  std::string json = temp_path("run_test.json");
  Result r = run("run " + kTinyGpt + " --backend cpu --iters 3 --warmup 1 --json " + json);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("iter 1/3 (warmup)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("iter 3/3"), std::string::npos);
  EXPECT_NE(r.out.find("median iteration (2 after 1 warmup, slowest rank)"), std::string::npos);
  EXPECT_NE(r.out.find("time breakdown of the last iteration per pipeline stage"),
            std::string::npos);
  EXPECT_NE(r.out.find("peak memory per rank"), std::string::npos);
  std::ifstream f(json);
  nlohmann::json j = nlohmann::json::parse(f);
  EXPECT_EQ(j["schema_version"], 2);
  EXPECT_EQ(j["backend"], "cpu");
  EXPECT_EQ(j["world_size"], 1);
  ASSERT_EQ(j["iterations"].size(), 3u);
  EXPECT_EQ(j["iterations"][0]["warmup"], true);
  EXPECT_EQ(j["iterations"][1]["warmup"], false);
  // Random tokens and small initial weights: the first loss is close to ln(vocab) = ln 256.
  EXPECT_NEAR(j["iterations"][0]["loss"].get<double>(), std::log(256.0), 0.1);
  for (const auto& it : j["iterations"]) {
    EXPECT_GT(it["ms"].get<double>(), 0);
    EXPECT_GT(it["tokens_per_s"].get<double>(), 0);
  }
  EXPECT_GT(j["summary"]["median_ms"].get<double>(), 0);
  ASSERT_EQ(j["memory"]["ranks"].size(), 1u);
  EXPECT_GT(j["memory"]["ranks"][0]["executor_peak_bytes"].get<int64_t>(), 0);
  // The measured breakdown of the one stage adds up to its traced iteration.
  ASSERT_EQ(j["breakdown"].size(), 1u);
  const auto& m = j["breakdown"][0]["measured"];
  EXPECT_GT(m["compute_s"].get<double>(), 0);
  EXPECT_NEAR(m["total_s"].get<double>(), m["iteration_s"].get<double>(),
              1e-9 + 1e-6 * m["iteration_s"].get<double>());
  // Megatron's FLOPs for the tiny plan (ffn = 4h, so the closed form applies):
  // 72·B·s·L·h²·(1 + s/(12h) + V/(12·L·h)) = 72·8·32·2·64²·(1 + 32/768 + 256/1536) = 182,452,224.
  EXPECT_EQ(j["model_flops_per_iteration"].get<double>(), 182452224.0);
}

TEST(RunCommand, SameSeedSameLosses) {
  Result a = run("run " + kTinyGpt + " --backend cpu --iters 2 --warmup 0 --seed 7");
  Result b = run("run " + kTinyGpt + " --backend cpu --iters 2 --warmup 0 --seed 7");
  ASSERT_EQ(a.code, 0) << a.out;
  auto losses = [](const std::string& s) {
    std::string out;
    for (size_t at = s.find("loss "); at != std::string::npos; at = s.find("loss ", at + 1))
      out += s.substr(at, 12);
    return out;
  };
  EXPECT_EQ(losses(a.out), losses(b.out));
}

TEST(RunCommand, RefusesAPlanForAnotherWorldSize) {
  Result r = run("run " + shipped_plan("tiny-gpt-tp2-sp") + " --backend cpu");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("plan: needs 2 ranks"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("iter "), std::string::npos);
}

TEST(RunCommand, PipelinePlansNeedTheirRanks) {
  std::string text = slurp(kTinyGpt);
  size_t at = text.find("\"pp\": 1");
  ASSERT_NE(at, std::string::npos);
  text.replace(at, 7, "\"pp\": 2");
  std::string path = write_temp("run_pp2.json", text);
  Result r = run("run " + path + " --backend cpu");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("mplan: error: plan: needs 2 ranks (tp x cp x pp x dp = 1 x 1 x 2 x 1)"),
            std::string::npos)
      << r.out;
}

// The tiny plan on a copy of the dgx-h100 cluster whose GPUs have `gib` of memory.
std::string tiny_on_small_gpus(double gib) {
  nlohmann::json plan = nlohmann::json::parse(slurp(kTinyGpt));
  nlohmann::json cluster = nlohmann::json::parse(
      slurp(std::string(MPLAN_SOURCE_DIR) + "/configs/clusters/dgx-h100.json"));
  cluster["gpu"]["memory_gib"] = gib;
  plan["cluster"] = cluster;
  return write_temp("run_small_gpus.json", plan.dump());
}

TEST(RunCommand, RefusesAPlanPredictedNotToFitUnlessForced) {
  const std::string path = tiny_on_small_gpus(0.001);
  Result r = run("run " + path + " --backend cpu --iters 2 --warmup 0");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("mplan: error: plan: predicted peak memory of pipeline stage 0 is "),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("--force runs anyway"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("iter "), std::string::npos);
  r = run("run " + path + " --backend cpu --iters 2 --warmup 0 --force");
  EXPECT_EQ(r.code, 0) << r.out;
}

TEST(RunCommand, TraceHasTheSimulatorsNamesAndTheBreakdownItsPrediction) {
  const std::string path = tiny_on_small_gpus(80);
  const std::string trace = temp_path("run_trace.json"), json = temp_path("run_trace_run.json");
  Result r = run("run " + path + " --backend cpu --iters 2 --warmup 1 --trace " + trace +
                 " --json " + json);
  ASSERT_EQ(r.code, 0) << r.out;
  nlohmann::json t = nlohmann::json::parse(slurp(trace));
  EXPECT_EQ(t["schema_version"], 1);
  int forwards = 0, backwards = 0, optimizer = 0;
  for (const auto& e : t["traceEvents"]) {
    if (e["ph"] != "X") continue;
    forwards += e["name"] == "forward";
    backwards += e["name"] == "backward";
    optimizer += e["name"] == "optimizer";
  }
  EXPECT_EQ(forwards, 4);  // the last iteration's 4 micro-batches
  EXPECT_EQ(backwards, 4);
  EXPECT_EQ(optimizer, 1);
  nlohmann::json j = nlohmann::json::parse(slurp(json));
  ASSERT_TRUE(j["breakdown"][0].contains("predicted")) << j["breakdown"].dump();
  EXPECT_GT(j["breakdown"][0]["predicted"]["compute_s"].get<double>(), 0);
  EXPECT_GT(j["prediction"]["iteration_time_s"].get<double>(), 0);
  EXPECT_NE(r.out.find("predicted"), std::string::npos);
}

TEST(RunCommand, RejectsBadOptions) {
  Result r = run("run " + kTinyGpt + " --iters 3 --warmup 3");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("--warmup: must be in [0, --iters)"), std::string::npos) << r.out;
  r = run("run " + kTinyGpt + " --backend tpu");
  EXPECT_EQ(r.code, 2);
  r = run("run " + kTinyGpt + " --backend cpu --json /nonexistent-dir/x.json");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("--json: cannot write"), std::string::npos) << r.out;
}

TEST(RunCommand, CudaBackendIsRefusedClearlyWhenUnavailable) {
  Result r = run("run " + kTinyGpt + " --backend cuda --iters 1 --warmup 0");
  if (r.code == 0) GTEST_SKIP() << "a GPU build with a visible GPU: cuda ran";
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("mplan: error: --backend cuda: "), std::string::npos) << r.out;
}

TEST(RunCommand, HelpListsEveryOption) {
  Result r = run("run --help");
  EXPECT_EQ(r.code, 0);
  for (const char* opt : {"--iters", "--warmup", "--seed", "--json", "--trace", "--backend",
                          "--force", "--watchdog", "Examples:"})
    EXPECT_NE(r.out.find(opt), std::string::npos) << opt;
}

}  // namespace
