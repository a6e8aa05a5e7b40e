// Memory-bound time: bytes / (HBM bandwidth × efficiency); the bytes each kernel kind moves, by
// hand; a kind's measured curve in place of the single efficiency and the pass count.
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

TEST(MemoryBoundCost, BytesPerKernelKind) {
  // 8192 rows of 2048 bf16: rc·e = 32 MiB = 33554432 B.
  const double rc_e = 8192.0 * 2048 * 2;
  EXPECT_DOUBLE_EQ(mem_kernel_bytes(MemKernel::kCopy, 8192, 2048, 2), 2 * rc_e);
  EXPECT_DOUBLE_EQ(mem_kernel_bytes(MemKernel::kAdd, 8192, 2048, 2), 3 * rc_e);
  EXPECT_DOUBLE_EQ(mem_kernel_bytes(MemKernel::kLayerNormForward, 8192, 2048, 2),
                   2 * rc_e + 8 * 8192);
  EXPECT_DOUBLE_EQ(mem_kernel_bytes(MemKernel::kLayerNormBackward, 8192, 2048, 2),
                   4 * rc_e + 8 * 8192);
  EXPECT_DOUBLE_EQ(mem_kernel_bytes(MemKernel::kRmsNormBackward, 8192, 2048, 2),
                   4 * rc_e + 4 * 8192);
  EXPECT_DOUBLE_EQ(mem_kernel_bytes(MemKernel::kSwigluBackward, 8192, 2048, 2), 5 * rc_e);
  EXPECT_DOUBLE_EQ(mem_kernel_bytes(MemKernel::kEmbeddingBackward, 8192, 2048, 2),
                   rc_e + 8.0 * 8192 * 2048);
  EXPECT_DOUBLE_EQ(mem_kernel_bytes(MemKernel::kCrossEntropy, 8192, 32000, 2),
                   4.0 * 8192 * 32000 * 2 + 16 * 8192);
  // Per parameter: AdamW 30 B (the executor's bench counts 38.3 GB for 1.278 B parameters).
  EXPECT_DOUBLE_EQ(mem_kernel_bytes(MemKernel::kAdamW, 1e9, 1, 2), 30e9);
  EXPECT_DOUBLE_EQ(mem_kernel_bytes(MemKernel::kGradNorm, 1e9, 1, 2), 4e9);
  EXPECT_DOUBLE_EQ(mem_kernel_bytes(MemKernel::kFill, 1e9, 1, 2), 4e9);
}

TEST(MemoryBoundCost, KindCurveReplacesTheSingleEfficiency) {
  GpuSpec g = testing::round_gpu();
  g.memory_bound_efficiency = 0.8;
  // Without a curve for the kind: the legacy bytes at 0.8: 1e9 B -> 312.5 us.
  EXPECT_FALSE(has_kind_rate(g, MemKernel::kLayerNormForward));
  EXPECT_EQ(mem_kernel_time_ns(g, MemKernel::kLayerNormForward, 5e8, 1e9), 312500);
  // With one (0.25 at 1e6 B, 0.5 at 1e8 B and beyond): its own bytes at its own rate.
  g.memory_bound_kinds[static_cast<size_t>(MemKernel::kLayerNormForward)] = {{1e6, 0.25},
                                                                             {1e8, 0.5}};
  EXPECT_TRUE(has_kind_rate(g, MemKernel::kLayerNormForward));
  EXPECT_EQ(mem_kernel_time_ns(g, MemKernel::kLayerNormForward, 5e8, 1e9), 250000);  // 5e8 / 2e12
  EXPECT_EQ(mem_kernel_time_ns(g, MemKernel::kLayerNormForward, 1e7, 0), 6667);  // 1e7 / (4e12/3)
  // Per-kernel floor: a tiny kernel's time back to back, once per kernel launched.
  g.kernel_min_us = 10;  // recorded only
  g.kernel_overhead_us = 8;
  EXPECT_EQ(mem_kernel_time_ns(g, MemKernel::kLayerNormForward, 1e7, 0), 8000);
  EXPECT_EQ(mem_kernel_time_ns(g, MemKernel::kLayerNormForward, 1e7, 0, 3), 24000);
  EXPECT_EQ(mem_kernel_time_ns(g, MemKernel::kLayerNormForward, 5e8, 0, 3), 250000);
  EXPECT_EQ(mem_kernel_time_ns(g, MemKernel::kLayerNormForward, 0, 0), 0);
}

// A row-wise kind measured at several widths takes the curve of the width nearest its own, in
// octaves; width 0 (or a kind measured at one width) takes the kind's curve.
TEST(MemoryBoundCost, RowWiseKindsTakeTheNearestWidthsCurve) {
  GpuSpec g = testing::round_gpu();
  const auto k = MemKernel::kRmsNormForward;
  g.memory_bound_kinds[static_cast<size_t>(k)] = {{1e6, 0.4}};
  g.memory_bound_widths[static_cast<size_t>(k)] = {{2048, {{1e6, 0.6}}}, {4096, {{1e6, 0.4}}}};
  const double hbm = g.hbm_bandwidth_gbps * 1e9;
  auto ns_at = [&](double frac) { return std::llround(1e8 / (hbm * frac) * 1e9); };
  EXPECT_EQ(mem_kernel_time_ns(g, k, 1e8, 0, 1, 2048), ns_at(0.6));
  EXPECT_EQ(mem_kernel_time_ns(g, k, 1e8, 0, 1, 1536), ns_at(0.6));  // 0.42 octaves from 2048
  EXPECT_EQ(mem_kernel_time_ns(g, k, 1e8, 0, 1, 2800), ns_at(0.6));  // 0.45 from 2048, 0.55 ...
  EXPECT_EQ(mem_kernel_time_ns(g, k, 1e8, 0, 1, 3000), ns_at(0.4));  // ... 0.55 from 2048
  EXPECT_EQ(mem_kernel_time_ns(g, k, 1e8, 0, 1, 16384), ns_at(0.4));
  EXPECT_EQ(mem_kernel_time_ns(g, k, 1e8, 0, 1, 0), ns_at(0.4));
  EXPECT_EQ(mem_kernel_time_ns(g, MemKernel::kRmsNormBackward, 1e8, 1e8, 1, 2048),
            mem_kernel_time_ns(g, MemKernel::kRmsNormBackward, 1e8, 1e8, 1, 0));
}

}  // namespace
}  // namespace mplan::cost
