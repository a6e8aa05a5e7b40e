// `mplan run` end to end, through the built binary as a single MPI rank (singleton MPI, CPU
// backend): exit codes, the one-line errors, the text report and the JSON document's shape.
// Multi-rank runs are tested under mpirun (tests/exec, label mpi).
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

namespace {

struct Result {
  int code = -1;
  std::string out;  // stdout and stderr together
};

Result run(const std::string& args) {
  std::string cmd = std::string(MPLAN_BIN) + " " + args + " 2>&1";
  Result r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::string plan(const std::string& name) {
  return std::string(MPLAN_SOURCE_DIR) + "/configs/plans/" + name + ".json";
}

TEST(RunCommand, TrainsTheTinyPlanAndWritesJson) {
  std::string json = ::testing::TempDir() + "/mplan_run_test.json";
  Result r = run("run " + plan("tiny-gpt") + " --backend cpu --iters 3 --warmup 1 --json " + json);
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
  Result a = run("run " + plan("tiny-gpt") + " --backend cpu --iters 2 --warmup 0 --seed 7");
  Result b = run("run " + plan("tiny-gpt") + " --backend cpu --iters 2 --warmup 0 --seed 7");
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
  Result r = run("run " + plan("tiny-gpt-tp2-sp") + " --backend cpu");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("plan: needs 2 ranks"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("iter "), std::string::npos);
}

TEST(RunCommand, RefusesPipelinePlans) {
  std::string path = ::testing::TempDir() + "/mplan_run_pp2.json";
  std::ofstream(path) << R"({"schema_version": 1, "model": "tiny-gpt", "cluster": "cpu-test",
    "parallel": {"tp": 1, "pp": 2, "dp": 1, "micro_batch_size": 2, "global_batch_size": 8}})";
  Result r = run("run " + path + " --backend cpu");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(
      r.out.find("mplan: error: parallel.pp: pipeline execution is not supported yet (pp = 2)"),
      std::string::npos)
      << r.out;
}

TEST(RunCommand, RejectsBadOptions) {
  Result r = run("run " + plan("tiny-gpt") + " --iters 3 --warmup 3");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("--warmup: must be in [0, --iters)"), std::string::npos) << r.out;
  r = run("run " + plan("tiny-gpt") + " --backend tpu");
  EXPECT_EQ(r.code, 2);
  r = run("run " + plan("tiny-gpt") + " --backend cpu --json /nonexistent-dir/x.json");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("--json: cannot write"), std::string::npos) << r.out;
}

TEST(RunCommand, CudaBackendIsRefusedClearlyWhenUnavailable) {
  Result r = run("run " + plan("tiny-gpt") + " --backend cuda --iters 1 --warmup 0");
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
