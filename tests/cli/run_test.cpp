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
  EXPECT_NE(r.out.find("median iteration (2 after 1 warmup)"), std::string::npos);
  EXPECT_NE(r.out.find("peak memory per rank"), std::string::npos);
  std::ifstream f(json);
  nlohmann::json j = nlohmann::json::parse(f);
  EXPECT_EQ(j["schema_version"], 1);
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
  ASSERT_EQ(j["memory"].size(), 1u);
  EXPECT_GT(j["memory"][0]["executor_peak_bytes"].get<int64_t>(), 0);
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

TEST(RunCommand, RefusesPipelinePlans) {
  std::string text = slurp(kTinyGpt);
  size_t at = text.find("\"pp\": 1");
  ASSERT_NE(at, std::string::npos);
  text.replace(at, 7, "\"pp\": 2");
  std::string path = write_temp("run_pp2.json", text);
  Result r = run("run " + path + " --backend cpu");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(
      r.out.find("mplan: error: parallel.pp: pipeline execution is not supported yet (pp = 2)"),
      std::string::npos)
      << r.out;
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
  for (const char* opt : {"--iters", "--warmup", "--seed", "--json", "--backend", "Examples:"})
    EXPECT_NE(r.out.find(opt), std::string::npos) << opt;
}

}  // namespace
