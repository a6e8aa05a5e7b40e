// Memory-bound time: bytes / (HBM bandwidth × efficiency).
#include "sim/cost/memory_bound_cost.hpp"

#include <gtest/gtest.h>

#include "tests/sim/cost/test_gpus.hpp"

namespace mplan::cost {
namespace {

TEST(MemoryBoundCost, BytesOverAchievedBandwidth) {
  GpuSpec g = testing::round_gpu();
  g.memory_bound_efficiency = 0.8;
  // 1e9 B / (4e12 B/s · 0.8) = 312.5 us.
  EXPECT_EQ(memory_bound_time_ns(g, 1e9), 312500);
  EXPECT_EQ(memory_bound_time_ns(g, 0), 0);
  EXPECT_DOUBLE_EQ(memory_bound_seconds(g, 3.2e12), 1.0);
}

}  // namespace
}  // namespace mplan::cost
