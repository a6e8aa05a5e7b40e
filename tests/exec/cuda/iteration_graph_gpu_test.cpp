// Iteration graphs on one GPU (gpu label; skips without a device): `mplan run` with the
// iteration recorded as a CUDA graph and replayed gives bit for bit the losses, gradient norms
// and final weights of iterations run directly, and its measured breakdown comes from the
// replayed iteration's marks.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "src/common/json_reader.hpp"
#include "tests/exec/cuda/gpu_test_support.hpp"

namespace mplan::exec {
namespace {

using cuda::testing::run_plan;
using cuda::testing::slurp;

TEST(IterationGraphGpu, ReplaysAreBitwiseTheDirectIterations) {
  MPLAN_REQUIRE_GPU();
  const std::string dir = ::testing::TempDir() + "mplan_iteration_graph_gpu/";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  // A learning-rate warmup and decay: the replays must take each iteration's own rate.
  const std::string flags =
      "--backend cuda --train-iters 6 --lr 3e-3 --min-lr 3e-4 --lr-decay-style cosine "
      "--lr-warmup-iters 2 --save-interval 6 ";
  for (const char* plan : {"tiny-gpt.json", "tiny-llama.json"}) {
    SCOPED_TRACE(plan);
    const std::string d = dir + plan + "-direct", g = dir + plan + "-graph";
    ASSERT_EQ(run_plan(plan, flags + "--save " + d + " --json " + d + ".json", d + ".log",
                       "MPLAN_CUDA_GRAPH=0"),
              0)
        << slurp(d + ".log");
    ASSERT_EQ(run_plan(plan, flags + "--save " + g + " --json " + g + ".json", g + ".log"), 0)
        << slurp(g + ".log");
    const std::string glog = slurp(g + ".log");
    // Iteration 1 runs directly, iteration 2 is recorded, 3 to 6 are replays.
    const size_t at = glog.find("iteration graphs: iteration 2 recorded");
    EXPECT_NE(at, std::string::npos) << glog;
    EXPECT_EQ(glog.find("iteration graphs", at + 1), std::string::npos) << glog;
    EXPECT_EQ(slurp(d + ".log").find("iteration graphs"), std::string::npos);
    const Json a = Json::parse(slurp(d + ".json")), b = Json::parse(slurp(g + ".json"));
    ASSERT_EQ(a["iterations"].size(), 6u);
    ASSERT_EQ(b["iterations"].size(), 6u);
    for (size_t k = 0; k < 6; ++k) {
      EXPECT_EQ(a["iterations"][k]["loss"], b["iterations"][k]["loss"]) << "iteration " << k + 1;
      EXPECT_EQ(a["iterations"][k]["grad_norm"], b["iterations"][k]["grad_norm"])
          << "iteration " << k + 1;
      EXPECT_EQ(a["iterations"][k]["lr"], b["iterations"][k]["lr"]) << "iteration " << k + 1;
    }
    EXPECT_NE(a["iterations"][0]["loss"], a["iterations"][5]["loss"]);  // training moved
    // The last iteration (a replay) was traced: its passes took time.
    const Json& m = b["breakdown"][0]["measured"];
    EXPECT_GT(m["compute_s"].get<double>(), 0.0);
    EXPECT_GT(m["optimizer_s"].get<double>(), 0.0);
    // The checkpoints of the last iteration: the same weights and optimizer state.
    for (const auto& f : std::filesystem::recursive_directory_iterator(d)) {
      if (!f.is_regular_file()) continue;
      const std::filesystem::path rel = std::filesystem::relative(f.path(), d);
      if (rel.extension() == ".json") continue;  // run metadata (paths, times)
      EXPECT_EQ(slurp(f.path().string()), slurp((std::filesystem::path(g) / rel).string())) << rel;
    }
  }
}

}  // namespace
}  // namespace mplan::exec
