// MoE routing imbalance by hand: 1 for one GPU, 1 + sqrt(2·ln r·(1 − 1/r)/mean) otherwise.
#include "sim/cost/moe_routing.hpp"

#include <gtest/gtest.h>

#include <cmath>

namespace mplan::cost {
namespace {

TEST(MoeRouting, BusiestGpuOverTheMean) {
  EXPECT_DOUBLE_EQ(routing_imbalance(4096, 1), 1.0);
  EXPECT_DOUBLE_EQ(routing_imbalance(0, 8), 1.0);
  // 8 GPUs, 16384 copies each on average: 1 + sqrt(2 · ln 8 · 7/8 / 16384) = 1.01490.
  EXPECT_NEAR(routing_imbalance(16384, 8), 1.0149, 1e-4);
  // 2 GPUs, 100 copies: 1 + sqrt(2 · ln 2 · 0.5 / 100) = 1.08326.
  EXPECT_NEAR(routing_imbalance(100, 2), 1.0 + std::sqrt(std::log(2.0) / 100), 1e-12);
  // Fewer tokens per GPU, more imbalance.
  EXPECT_GT(routing_imbalance(1000, 8), routing_imbalance(100000, 8));
}

}  // namespace
}  // namespace mplan::cost
