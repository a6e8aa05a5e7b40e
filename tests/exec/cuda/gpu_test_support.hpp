// Helpers of the gpu-label tests: skip (never fail) where no CUDA device is visible, as in CI,
// a fixture with a CudaBackend on device 0, a CpuBackend and an OpChecker whose results are
// all printed (each line names the worst element) and must all pass, and `mplan run` as a
// command (tests that define MPLAN_BIN and MPLAN_SOURCE_DIR).
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "exec/cpu/cpu_backend.hpp"
#include "exec/cuda/cuda_backend.hpp"
#include "exec/cuda/tools/op_checks.hpp"

#define MPLAN_REQUIRE_GPU()                                                              \
  do {                                                                                   \
    if (::mplan::exec::cuda_device_count() == 0)                                         \
      GTEST_SKIP() << "no CUDA device visible: GPU test skipped (it runs on GPU hosts)"; \
  } while (0)

namespace mplan::exec::cuda::testing {

// A file's whole text ("" where it cannot be read).
inline std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

#if defined(MPLAN_BIN) && defined(MPLAN_SOURCE_DIR)
// Runs `ENV mplan run configs/plans/PLAN FLAGS`, its output to `log`; returns the exit status.
inline int run_plan(const std::string& plan, const std::string& flags, const std::string& log,
                    const std::string& env = "") {
  const std::string cmd = env + " " + std::string(MPLAN_BIN) + " run " + MPLAN_SOURCE_DIR +
                          "/configs/plans/" + plan + " " + flags + " > " + log + " 2>&1";
  return std::system(cmd.c_str());
}
#endif

class GpuOpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    MPLAN_REQUIRE_GPU();
    gpu_ = std::make_unique<CudaBackend>(0);
    checker_ = std::make_unique<OpChecker>(*gpu_, cpu_, seed_++);
  }
  // Prints every result of the checks run so far and expects each to pass.
  void expect_all_pass() {
    for (const CheckResult& r : checker_->results()) {
      std::printf("  %s\n", r.describe().c_str());
      EXPECT_TRUE(r.pass) << r.describe();
    }
    checker_->clear();
  }
  CudaBackend& gpu() { return *gpu_; }
  OpChecker& check() { return *checker_; }

  std::unique_ptr<CudaBackend> gpu_;
  CpuBackend cpu_;
  std::unique_ptr<OpChecker> checker_;
  static inline uint64_t seed_ = 20261120;
};

}  // namespace mplan::exec::cuda::testing
