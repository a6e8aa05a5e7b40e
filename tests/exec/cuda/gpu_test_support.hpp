// Helpers of the gpu-label tests: skip (never fail) where no CUDA device is visible, as in CI,
// and a fixture with a CudaBackend on device 0, a CpuBackend and an OpChecker whose results are
// all printed (each line names the worst element) and must all pass.
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <memory>

#include "exec/cpu/cpu_backend.hpp"
#include "exec/cuda/cuda_backend.hpp"
#include "exec/cuda/tools/op_checks.hpp"

#define MPLAN_REQUIRE_GPU()                                                              \
  do {                                                                                   \
    if (::mplan::exec::cuda_device_count() == 0)                                         \
      GTEST_SKIP() << "no CUDA device visible: GPU test skipped (it runs on GPU hosts)"; \
  } while (0)

namespace mplan::exec::cuda::testing {

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
