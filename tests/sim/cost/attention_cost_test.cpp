// Attention core time, flash-style and materialized. Expected values worked out by hand with the
// round GPU (attention efficiency 0.1 + 0.05·(log2 F - 30), backward 0.5; GEMMs as in
// gemm_cost_test).
#include "sim/cost/attention_cost.hpp"

#include <gtest/gtest.h>

#include "tests/sim/cost/test_gpus.hpp"

namespace mplan::cost {
namespace {

// b 2, 16 heads, s 4096, d 128, causal: forward F = 4 · 2 · 16 · 4096^2 · 128 / 2 = 2^37.
AttentionShape shape() { return {2, 16, 16, 4096, 4096, 128, true, 2}; }

TEST(AttentionCost, ForwardFlopsAsFlashAttentionCountsThem) {
  EXPECT_DOUBLE_EQ(attention_forward_flops(shape()), std::ldexp(1.0, 37));
  AttentionShape full = shape();
  full.causal = false;
  EXPECT_DOUBLE_EQ(attention_forward_flops(full), std::ldexp(1.0, 38));
  AttentionShape gqa = shape();
  gqa.kv_heads = 4;  // GQA changes no FLOPs of the core
  EXPECT_DOUBLE_EQ(attention_forward_flops(gqa), std::ldexp(1.0, 37));
}

TEST(AttentionCost, FlashForwardAndBackward) {
  const GpuSpec g = testing::round_gpu();
  // Forward: efficiency 0.1 + 0.05 · 7 = 0.45; 2^37 / 4.5e14 s = 305419.9 ns.
  EXPECT_EQ(flash_attention_forward_ns(g, shape()), 305420);
  // Backward: 2.5 · 2^37 FLOPs at 0.5: 687194.8 ns.
  EXPECT_EQ(flash_attention_backward_ns(g, shape()), 687195);
  // Without a backward curve the forward one serves: 2.5 · 2^37 = 2^38.32 -> 0.1 + 0.05 · 8.32.
  GpuSpec one = g;
  one.attention_backward_efficiency.clear();
  const double eff = 0.1 + 0.05 * (37 + std::log2(2.5) - 30);
  EXPECT_NEAR(flash_attention_backward_ns(one, shape()),
              2.5 * std::ldexp(1.0, 37) / (1e15 * eff) * 1e9, 1.0);
}

TEST(AttentionCost, MaterializedIsTwoBatchedGemmsAndTheSoftmaxPasses) {
  const GpuSpec g = testing::round_gpu();
  // Q·K^T: 32 products of 4096 × 4096 × 128 (F = 2^37, compute 249889 ns) reading and writing
  // (2 · 4096 · 128 + 4096^2) · 32 · 2 B = 1140850688 B -> 285212.672 ns: memory-bound, timed as
  // 285213 ns (each GEMM in whole ns). P·V the same. Softmax: 2 · 16 · 4096^2 scores × 4 B = 2^31 B
  // -> 536870.912 ns. Total 2 · 285213 + 536870.912 = 1107296.912 ns.
  EXPECT_EQ(materialized_attention_forward_ns(g, shape()), 1107297);
  // Backward: four GEMMs and 6 B per score: 4 · 285213 + 805306.368 = 1946158.368 ns.
  EXPECT_EQ(materialized_attention_backward_ns(g, shape()), 1946158);
  // An unfused softmax in fp32 moving 16 B per score: 2 · 285213 + 2147483.648 ns.
  MaterializedSoftmax slow{16, 24};
  EXPECT_EQ(materialized_attention_forward_ns(g, shape(), slow), 2717910);
}

TEST(AttentionCost, MeasuredShapesSetTheRateByHeadsAndHeadDim) {
  GpuSpec g = testing::round_gpu();
  // Two calls of equal FLOPs (2^37): b 2 · 16 heads · d 128, and b 2 · 32 heads · d 64. The
  // curve times them alike; measured, the d-64 call ran at 0.3 forward and 0.25 backward.
  AttentionShape d64 = shape();
  d64.heads = d64.kv_heads = 32;
  d64.head_dim = 64;
  EXPECT_EQ(flash_attention_forward_ns(g, d64), flash_attention_forward_ns(g, shape()));
  g.attention_shapes = {{2, 32, 4096, 64, 0.3, 0.25}};
  EXPECT_EQ(flash_attention_forward_ns(g, d64), 458130);    // 2^37 / 3e14 s
  EXPECT_EQ(flash_attention_backward_ns(g, d64), 1374390);  // 2.5 · 2^37 / 2.5e14 s
  // d 128 is one octave away in head dim (and in heads): the curve alone.
  EXPECT_EQ(flash_attention_forward_ns(g, shape()), 305420);
  // Half an octave off in sequence (s = 4096·√2): the curve there, moved by half the ratio.
  AttentionShape longer = d64;
  longer.seq_q = longer.seq_k = 5793;
  const double curve_here = 0.1 + 0.05 * (std::log2(attention_forward_flops(longer)) - 30);
  const double ratio = 0.3 / 0.45;
  EXPECT_NEAR(flash_attention_efficiency(g, longer, false),
              curve_here * (1 + (1 - std::log2(5793.0 / 4096)) * (ratio - 1)), 1e-9);
  // A floor per kernel launched (the executor's backward is three kernels): far below these.
  g.kernel_overhead_us = 1;
  EXPECT_EQ(flash_attention_backward_ns(g, d64, 3), 1374390);
  EXPECT_EQ(flash_attention_forward_ns(g, d64), 458130);
  g.kernel_overhead_us = 500;
  EXPECT_EQ(flash_attention_backward_ns(g, d64, 3), 1500000);
  EXPECT_EQ(flash_attention_forward_ns(g, d64), 500000);
}

}  // namespace
}  // namespace mplan::cost
