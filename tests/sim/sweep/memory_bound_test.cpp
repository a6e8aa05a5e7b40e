// Tests of the memory lower bound against hand-computed bytes for the reference workload
// (gpt3-1.3b: 24 layers, h 2048, vocabulary 32000, learned positions 2048, biases, tied).
#include "sim/sweep/memory_bound.hpp"

#include <gtest/gtest.h>

#include "src/common/units.hpp"

namespace mplan::sweep {
namespace {

Plan reference_plan() {
  Plan p;
  p.model = load_model("gpt3-1.3b");
  p.cluster = load_cluster("h200x4");  // runtime overhead 2 GiB
  p.parallel.global_batch_size = 4;
  return p;
}

// Parameters: per layer 12h^2 + 13h (QKV 3h^2 + 3h, projection h^2 + h, FC1 4h^2 + 4h,
// FC2 4h^2 + h, two LayerNorms 4h) = 50358272; word embedding 32000 h = 65536000 (32000 is a
// multiple of 128); positions 2048 h = 4194304; final LayerNorm 2h = 4096.
constexpr int64_t kLayer = 12 * 2048 * 2048 + 13 * 2048;
constexpr int64_t kParams = 24 * kLayer + 65536000 + 4194304 + 4096;
// Activations per layer and micro-batch of one sequence, flash attention, no dropout, tp 1
// (Korthikanti Table 2's 34 sbh without the two sbh dropout masks): 32 sbh bytes, s = h = 2048.
constexpr int64_t kSbh = int64_t{2048} * 2048;
constexpr int64_t kOverhead = 2 * kGiB;

TEST(MemoryBound, OneGpuHoldsEverything) {
  static_assert(kParams == 1278332928);
  const Plan p = reference_plan();
  EXPECT_EQ(memory_lower_bound(p), 18 * kParams + kOverhead + 24 * 32 * kSbh);
}

TEST(MemoryBound, DistributedOptimizerShardsOverDpTimesCp) {
  Plan p = reference_plan();
  p.parallel.dp = 2;
  p.parallel.cp = 2;
  p.parallel.distributed_optimizer = true;
  // 6 + 12/4 bytes per parameter; activations of s/cp tokens.
  EXPECT_EQ(memory_lower_bound(p), 9 * kParams + kOverhead + 24 * 32 * kSbh / 2);
}

TEST(MemoryBound, FullRecomputeKeepsLayerInputsOnly) {
  Plan p = reference_plan();
  p.parallel.recompute = Recompute::kFull;
  EXPECT_EQ(memory_lower_bound(p), 18 * kParams + kOverhead + 24 * 2 * kSbh);
}

TEST(MemoryBound, HeaviestPipelineStageAndSmallestChunk) {
  Plan p = reference_plan();
  p.parallel.pp = 2;
  p.parallel.vpp = 3;
  p.parallel.schedule = ScheduleKind::kInterleaved;
  // Stage 0: 12 layers + word and position embeddings; stage 1: 12 layers + final norm + its
  // copy of the tied output weight. Stage 0 is heavier. One chunk = 4 layers. M = 4 micro-batches;
  // Megatron's interleaved warm-up on rank 0: min(2 (pp - 1) + (vpp - 1) pp, vpp M) = 6 chunk
  // forwards, + 1 before the first backward = 7 chunks alive (rank 1: 4 + 1 = 5).
  const int64_t stage0 = 12 * kLayer + 65536000 + 4194304;
  const int64_t stage1 = 12 * kLayer + 4096 + 65536000;
  ASSERT_GT(stage0, stage1);
  EXPECT_EQ(memory_lower_bound(p), 18 * stage0 + kOverhead + 7 * 4 * 32 * kSbh);
  // 1F1B: rank 0 warms up pp - 1 = 1 forward, + 1: two micro-batches of its 12 layers.
  p.parallel.vpp = 1;
  p.parallel.schedule = ScheduleKind::k1F1B;
  EXPECT_EQ(memory_lower_bound(p), 18 * stage0 + kOverhead + 2 * 12 * 32 * kSbh);
  // Fewer micro-batches than the warm-up: all of them (M = 1).
  p.parallel.global_batch_size = 1;
  EXPECT_EQ(memory_lower_bound(p), 18 * stage0 + kOverhead + 1 * 12 * 32 * kSbh);
}

TEST(MemoryBound, TensorAndSequenceParallel) {
  Plan p = reference_plan();
  p.parallel.tp = 2;
  p.parallel.etp = 2;
  p.parallel.sequence_parallel = true;
  // Shard: weights (12h^2) and column-parallel biases (QKV 3h, FC1 4h) / 2; row-parallel biases
  // (2h) and norms (4h) whole; vocabulary / 2; positions whole. Activations: 32 sbh / t.
  const int64_t layer_shard = (12 * 2048 * 2048 + 7 * 2048) / 2 + 6 * 2048;
  const int64_t shard = 24 * layer_shard + 65536000 / 2 + 4194304 + 4096;
  EXPECT_EQ(memory_lower_bound(p), 18 * shard + kOverhead + 24 * 32 * kSbh / 2);
}

}  // namespace
}  // namespace mplan::sweep
