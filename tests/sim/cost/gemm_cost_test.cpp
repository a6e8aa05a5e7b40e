// GEMM time: FLOPs over peak × efficiency(FLOPs), floored by the memory roofline. Expected values
// worked out by hand with the round GPU (1e15 FLOP/s, 4e12 B/s, efficiency 0.2 + 0.05·(log2 F -
// 30)).
#include "sim/cost/gemm_cost.hpp"

#include <gtest/gtest.h>

#include "src/common/error.hpp"
#include "tests/sim/cost/test_gpus.hpp"

namespace mplan::cost {
namespace {

TEST(GemmCost, FlopsAndBytes) {
  EXPECT_DOUBLE_EQ(gemm_flops({4096, 4096, 4096}), 137438953472.0);  // 2 · 4096^3
  EXPECT_DOUBLE_EQ(gemm_bytes({4096, 4096, 4096}), 100663296.0);     // 3 · 4096^2 · 2
  EXPECT_DOUBLE_EQ(gemm_flops({2, 3, 5, 7}), 420.0);
  EXPECT_DOUBLE_EQ(gemm_bytes({2, 3, 5, 7, 4}), (10 + 15 + 6) * 7 * 4.0);
}

TEST(GemmCost, ComputeBoundUsesTheEfficiencyCurve) {
  const GpuSpec g = testing::round_gpu();
  // 4096^3: F = 2^37 -> efficiency 0.2 + 0.05 · 7 = 0.55; 2^37 / (1e15 · 0.55) s = 249889.006 ns.
  EXPECT_EQ(gemm_time_ns(g, {4096, 4096, 4096}), 249889);
  EXPECT_DOUBLE_EQ(gemm_efficiency(g, std::ldexp(1.0, 37)), 0.55);
  // Above the last point the curve is flat: 16384^3, F = 2^43 -> 0.7; 2^43 / 7e14 s.
  EXPECT_EQ(gemm_time_ns(g, {16384, 16384, 16384}), 12565847);  // 12565847.17 ns
}

// The power limit: a GEMM faster alone than the sustained rate slows halfway toward it (weight
// 0.5); slower GEMMs keep their rate.
TEST(GemmCost, LargeGemmsSlowTowardTheSustainedRate) {
  GpuSpec g = testing::round_gpu();
  g.sustained_gemm_efficiency = 0.6;
  // 16384^3 at 0.7 alone -> 0.7 - 0.5 · (0.7 - 0.6) = 0.65; 2^43 / 6.5e14 s = 13532450.8 ns.
  EXPECT_EQ(gemm_time_ns(g, {16384, 16384, 16384}), 13532451);
  // 4096^3 at 0.55 < 0.6: unchanged.
  EXPECT_EQ(gemm_time_ns(g, {4096, 4096, 4096}), 249889);
  // Weight 1: the sustained rate itself; 2^43 / 6e14 s = 14660155.0 ns.
  g.sustained_gemm_weight = 1;
  EXPECT_EQ(gemm_time_ns(g, {16384, 16384, 16384}), 14660155);
}

TEST(GemmCost, BatchedGemmTakesTheEfficiencyOfItsTotalFlops) {
  const GpuSpec g = testing::round_gpu();
  // 8 × 512^3: F = 2^31 -> 0.25; 2^31 / 2.5e14 s = 8589.93 ns (memory: 12.6 MB / 4e12 = 3.1 us).
  EXPECT_EQ(gemm_time_ns(g, {512, 512, 512, 8}), 8590);
}

TEST(GemmCost, SkinnyGemmIsMemoryBound) {
  const GpuSpec g = testing::round_gpu();
  // 1 × 8192 × 8192: F = 2^27 (below the curve: 0.2) -> 0.67 us of compute; bytes
  // (8192 + 8192^2 + 8192) · 2 = 134250496 over 4e12 B/s = 33562.6 ns.
  EXPECT_EQ(gemm_time_ns(g, {1, 8192, 8192}), 33563);
}

TEST(GemmCost, EmptyGemmTakesNoTime) {
  EXPECT_EQ(gemm_time_ns(testing::round_gpu(), {0, 8192, 8192}), 0);
}

TEST(GemmCost, ProfileWithoutCurveIsAUserError) {
  GpuSpec g = testing::round_gpu();
  g.gemm_efficiency.clear();
  try {
    gemm_time_ns(g, {64, 64, 64});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cluster.gpu.gemm_efficiency: missing"),
              std::string::npos);
  }
}

TEST(GemmCost, MeasuredShapesOfThePassReplaceTheCurveAndFadeIntoIt) {
  GpuSpec g = testing::round_gpu();
  // 4096^3 forward ran at 0.66 (the curve says 0.55 at F = 2^37: ratio 1.2).
  g.gemm_shapes = {{4096, 4096, 4096, GemmPass::kForward, 0.66}};
  // The measured shape: 2^37 / (1e15 · 0.66) s = 208240.84 ns, no memory floor.
  EXPECT_EQ(gemm_time_ns(g, {4096, 4096, 4096}), 208241);
  EXPECT_DOUBLE_EQ(gemm_efficiency(g, GemmShape{4096, 4096, 4096}), 0.66);
  // Half an octave off in m (m = 4096·√2 ≈ 5793): curve 0.2 + 0.05·(37.5 − 30) = 0.575 moved by
  // half the ratio: 0.575 · 1.1 = 0.6325.
  EXPECT_NEAR(gemm_efficiency(g, GemmShape{5793, 4096, 4096}), 0.575 * 1.1, 1e-4);
  // One octave off, or another pass: the curve alone.
  EXPECT_DOUBLE_EQ(gemm_efficiency(g, GemmShape{8192, 4096, 4096}), 0.6);
  EXPECT_DOUBLE_EQ(gemm_efficiency(g, GemmShape{4096, 4096, 4096, 1, 2, GemmPass::kWeightGrad}),
                   0.55);
  EXPECT_EQ(gemm_time_ns(g, {4096, 4096, 4096, 1, 2, GemmPass::kWeightGrad}), 249889);
  // A batched GEMM takes the curve of its total FLOPs.
  EXPECT_EQ(gemm_time_ns(g, {512, 512, 512, 8}), 8590);
}

TEST(GemmCost, GeluBackwardEpilogueIsMeasuredOrThePlainInputGradientAndTheAuxRead) {
  GpuSpec g = testing::round_gpu();
  const GemmShape dgelu{4096, 4096, 4096, 1, 2, GemmPass::kInputGradDGelu};
  // Not measured: 4096^3 at the curve's 0.55 (249889 ns), plus the read of 4096 · 4096 bf16
  // pre-activations at 4e12 B/s (8388.6 ns).
  EXPECT_EQ(gemm_time_ns(g, dgelu), 249889 + 8389);
  // A measured plain input gradient refines the plain part alone.
  g.gemm_shapes = {{4096, 4096, 4096, GemmPass::kInputGrad, 0.66}};
  EXPECT_EQ(gemm_time_ns(g, dgelu), 208241 + 8389);
  // Measured with its epilogue: that shape's rate, nothing added (2^37 / (1e15 · 0.5) s).
  g.gemm_shapes.push_back({4096, 4096, 4096, GemmPass::kInputGradDGelu, 0.5});
  EXPECT_EQ(gemm_time_ns(g, dgelu), 274878);
}

TEST(GemmCost, AKernelInAStreamTakesAtLeastATinyKernelsTime) {
  GpuSpec g = testing::round_gpu();
  g.kernel_overhead_us = 2;
  // 4096^3: 249889 ns of work, above the floor: unchanged (a shape timed in a loop of itself
  // already includes what a kernel costs back to back).
  EXPECT_EQ(gemm_time_ns(g, {4096, 4096, 4096}), 249889);
  // A tiny GEMM (64^3: 2^19 FLOPs, 2.6 ns of work) takes a tiny kernel's time back to back.
  EXPECT_EQ(gemm_time_ns(g, {64, 64, 64}), 2000);
  // A kernel alone and the host's issue time are recorded, not charged: the host runs ahead.
  g.kernel_min_us = 5;
  g.host_overhead_us = 6;
  EXPECT_EQ(gemm_time_ns(g, {64, 64, 64}), 2000);
  EXPECT_EQ(gemm_time_ns(g, {4096, 4096, 4096}), 249889);
  EXPECT_EQ(gemm_time_ns(g, {0, 64, 64}), 0);  // no kernel runs
}

TEST(GemmCost, H200x4ProfileReproducesTheAnchors) {
  // shared/anchors/README.md: cuBLAS bf16 GEMM on H200, 204-242 TFLOP/s at 1024^3, 788 on random
  // data at 8192^3.
  const GpuSpec g = load_cluster("h200x4").gpu;
  auto tflops = [&](int64_t n) {
    return gemm_flops({n, n, n}) / static_cast<double>(gemm_time_ns(g, {n, n, n})) * 1e-3;
  };
  EXPECT_GE(tflops(1024), 204);
  EXPECT_LE(tflops(1024), 242);
  EXPECT_NEAR(tflops(8192), 788, 8);
}

TEST(GemmCost, LargerMicroBatchRunsNearerThePlateau) {
  // The micro-batch effect: a linear layer's GEMM has m = s·b rows. On the h200x4 curve the
  // reference GPT's QKV (n 6144, k 2048, s 2048) at b 1 is 5.2e10 FLOPs (efficiency by
  // the curve's log-linear segment 0.63 -> 0.73: 0.688), at b 4 2.1e11 (0.794): per token, b 4
  // is 0.794 / 0.688 = 1.15 x faster.
  const GpuSpec g = load_cluster("h200x4").gpu;
  const int64_t t1 = gemm_time_ns(g, {2048, 6144, 2048});
  const int64_t t4 = gemm_time_ns(g, {4 * 2048, 6144, 2048});
  EXPECT_LT(t4, 4 * t1);
  EXPECT_NEAR(4.0 * static_cast<double>(t1) / static_cast<double>(t4),
              gemm_efficiency(g, gemm_flops({8192, 6144, 2048})) /
                  gemm_efficiency(g, gemm_flops({2048, 6144, 2048})),
              1e-4);
  EXPECT_NEAR(gemm_efficiency(g, gemm_flops({2048, 6144, 2048})), 0.688, 0.001);
  EXPECT_NEAR(gemm_efficiency(g, gemm_flops({8192, 6144, 2048})), 0.794, 0.001);
  // At the plateau (GPT-3 175B's FC1 per GPU at tp 8: n 6144, k 12288) the micro-batch no longer
  // matters for the GEMM itself.
  EXPECT_NEAR(4.0 * static_cast<double>(gemm_time_ns(g, {2048, 6144, 12288})),
              static_cast<double>(gemm_time_ns(g, {8192, 6144, 12288})), 4);
}

}  // namespace
}  // namespace mplan::cost
