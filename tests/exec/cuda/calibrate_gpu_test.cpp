// `mplan calibrate --quick` on one GPU (gpu label; skips without a device): it exits 0 within a
// few minutes and writes a profile whose measured fields have the parser's forms, with the raw
// numbers under "calibration" and the NCCL part reported as skipped on one rank.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "src/common/json_reader.hpp"
#include "tests/exec/cuda/gpu_test_support.hpp"

namespace mplan::exec {
namespace {

TEST(CalibrateGpu, QuickWritesAProfile) {
  MPLAN_REQUIRE_GPU();
  const std::string out = ::testing::TempDir() + "mplan_calibrate_quick.json";
  const std::string log = ::testing::TempDir() + "mplan_calibrate_quick.log";
  const std::string cmd =
      std::string(MPLAN_BIN) + " calibrate --quick --out " + out + " > " + log + " 2>&1";
  const int rc = std::system(cmd.c_str());
  std::ifstream lf(log);
  std::stringstream ls;
  ls << lf.rdbuf();
  std::printf("%s\n", ls.str().c_str());
  ASSERT_EQ(rc, 0) << ls.str();
  std::ifstream f(out);
  std::stringstream ss;
  ss << f.rdbuf();
  const Json p = Json::parse(ss.str());
  const Json& g = p.at("gpu");
  ASSERT_GE(g.at("gemm_efficiency").size(), 3u);
  for (const Json& pt : g["gemm_efficiency"]) {
    EXPECT_GT(pt[1].get<double>(), 0.0);
    EXPECT_LT(pt[1].get<double>(), 1.0);
  }
  EXPECT_GE(g.at("gemm_shapes").size(), 30u);
  EXPECT_EQ(g["gemm_shapes"][0].size(), 5u);
  EXPECT_GE(g.at("attention_shapes").size(), 4u);
  EXPECT_EQ(g["attention_shapes"][0].size(), 6u);
  for (const char* k : {"copy", "layernorm_backward", "swiglu_forward", "adamw", "cross_entropy"})
    EXPECT_TRUE(g.at("memory_bound_kinds").contains(k)) << k;
  EXPECT_GT(g.at("kernel_overhead_us").get<double>(), 0.0);
  EXPECT_GT(g.at("host_overhead_us").get<double>(), 0.0);
  const Json& c = p.at("calibration");
  EXPECT_TRUE(c.contains("nccl_skipped"));
  EXPECT_FALSE(c.at("driver").get<std::string>().empty());
  EXPECT_GE(c.at("sustained").at("tflops_per_second").size(), 2u);
}

}  // namespace
}  // namespace mplan::exec
