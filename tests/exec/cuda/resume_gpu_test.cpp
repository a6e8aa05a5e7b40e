// `mplan run --backend cuda` saved and resumed on one GPU (gpu label; skips without a device):
// eight iterations as two segments of four, the second loading the first's checkpoint, give
// bit for bit the losses and learning rates of the same eight iterations in one call.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "src/common/json_reader.hpp"
#include "tests/exec/cuda/gpu_test_support.hpp"

namespace mplan::exec {
namespace {

using cuda::testing::slurp;

// Runs `mplan run tiny-gpt.json FLAGS`, returning the exit code; the output goes to `log`.
int run(const std::string& flags, const std::string& log) {
  return cuda::testing::run_plan("tiny-gpt.json", flags, log);
}

TEST(ResumeGpu, TwoSegmentsAreBitwiseTheContinuousRun) {
  MPLAN_REQUIRE_GPU();
  const std::string dir = ::testing::TempDir() + "mplan_resume_gpu/";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string flags =
      "--backend cuda --train-iters 8 --lr 3e-3 --min-lr 3e-4 --lr-decay-style cosine "
      "--lr-warmup-iters 2 --save-interval 4 ";
  const std::string seg = flags + "--save " + dir + "ck --load " + dir + "ck ";
  ASSERT_EQ(run(seg + "--iters 4 --json " + dir + "a.json", dir + "a.log"), 0)
      << slurp(dir + "a.log");
  ASSERT_EQ(run(seg + "--json " + dir + "b.json", dir + "b.log"), 0) << slurp(dir + "b.log");
  ASSERT_EQ(run(flags + "--save " + dir + "whole --json " + dir + "w.json", dir + "w.log"), 0)
      << slurp(dir + "w.log");
  const Json a = Json::parse(slurp(dir + "a.json")), b = Json::parse(slurp(dir + "b.json"));
  const Json w = Json::parse(slurp(dir + "w.json"));
  ASSERT_EQ(a["iterations"].size(), 4u);
  ASSERT_EQ(b["iterations"].size(), 4u);
  ASSERT_EQ(w["iterations"].size(), 8u);
  for (int k = 0; k < 8; ++k) {
    const Json& part = k < 4 ? a["iterations"][k] : b["iterations"][k - 4];
    EXPECT_EQ(part["loss"], w["iterations"][k]["loss"]) << "iteration " << k + 1;
    EXPECT_EQ(part["lr"], w["iterations"][k]["lr"]) << "iteration " << k + 1;
  }
  // Training moved: the checks above compare something.
  EXPECT_NE(w["iterations"][0]["loss"], w["iterations"][7]["loss"]);
}

}  // namespace
}  // namespace mplan::exec
