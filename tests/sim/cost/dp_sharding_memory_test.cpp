// Closed forms of the sharded model state: bytes per parameter of bf16 training with fp32
// gradients and Adam (2 + 4 + 12) under each sharding (Megatron-LM's dist_optimizer.md: 18 and
// 6 + 12/d; ZeRO-2 2 + 16/d; ZeRO-3 18/d, Rajbhandari et al. 2020 Fig. 1), the partial
// distributed optimizer (d = dp·cp / instances), and Megatron-FSDP's unit buffers.
#include "sim/cost/dp_sharding_memory.hpp"

#include <gtest/gtest.h>

namespace mplan::cost {
namespace {

TrainingConfig bf16() {
  TrainingConfig t;
  t.precision = Precision::kBf16;
  t.grads_in_fp32 = true;
  return t;
}

ParallelConfig fsdp(DpSharding d) {
  ParallelConfig p;
  p.distributed_optimizer = true;
  p.use_megatron_fsdp = true;
  p.data_parallel_sharding_strategy = d;
  return p;
}

TEST(DpShardingMemory, BytesPerParameterOfEveryStrategy) {
  const TrainingConfig t = bf16();
  const int64_t d = 8;
  ParallelConfig ddp;
  EXPECT_DOUBLE_EQ(sharded_bytes_per_parameter(t, ddp, d), 18.0);
  ParallelConfig dist;
  dist.distributed_optimizer = true;
  EXPECT_DOUBLE_EQ(sharded_bytes_per_parameter(t, dist, d), 6.0 + 12.0 / 8);
  EXPECT_DOUBLE_EQ(sharded_bytes_per_parameter(t, fsdp(DpSharding::kNoShard), d), 18.0);
  EXPECT_DOUBLE_EQ(sharded_bytes_per_parameter(t, fsdp(DpSharding::kOptim), d), 6.0 + 12.0 / 8);
  EXPECT_DOUBLE_EQ(sharded_bytes_per_parameter(t, fsdp(DpSharding::kOptimGrads), d),
                   2.0 + 16.0 / 8);
  EXPECT_DOUBLE_EQ(sharded_bytes_per_parameter(t, fsdp(DpSharding::kOptimGradsParams), d),
                   18.0 / 8);
}

TEST(DpShardingMemory, ModelStateSplitsIntoItsParts) {
  const TrainingConfig t = bf16();
  const int64_t params = 8'000'000, dp = 8;
  const ModelStateBytes z3 =
      sharded_model_state_bytes(t, fsdp(DpSharding::kOptimGradsParams), params, dp, 0, 1);
  EXPECT_EQ(z3.weights, 2 * params / dp);
  EXPECT_EQ(z3.grads, 4 * params / dp);
  EXPECT_EQ(z3.optimizer, 12 * params / dp);
  // Without any sharding: the same as model_state_bytes.
  ParallelConfig ddp;
  const ModelStateBytes a = sharded_model_state_bytes(t, ddp, params, dp, 1000, 2);
  const ModelStateBytes b = model_state_bytes(t, false, params, dp, 1000, 2);
  EXPECT_EQ(a.total(), b.total());
  // Experts shard over the expert data-parallel ranks.
  const ModelStateBytes e =
      sharded_model_state_bytes(t, fsdp(DpSharding::kOptimGradsParams), 0, dp, params, 2);
  EXPECT_EQ(e.total(), 18 * params / 2);
}

TEST(DpShardingMemory, PartialDistributedOptimizerShardsWithinAnInstance) {
  const TrainingConfig t = bf16();
  ParallelConfig p;
  p.distributed_optimizer = true;
  p.num_distributed_optimizer_instances = 2;
  EXPECT_EQ(dp_shard_ranks(p, 16), 8);
  const ModelStateBytes m = sharded_model_state_bytes(t, p, 1'600'000, 16, 0, 1);
  EXPECT_EQ(m.optimizer, 12 * 1'600'000 / 8);  // 12 bytes over 8 ranks, not 16
  EXPECT_EQ(m.weights + m.grads, 6 * 1'600'000);
}

TEST(DpShardingMemory, FsdpBuffersHoldTwoGatheredUnitsAndOneGradient) {
  const TrainingConfig t = bf16();
  const int64_t unit = 1'000'000;
  EXPECT_EQ(fsdp_buffer_bytes(t, fsdp(DpSharding::kOptimGradsParams), unit),
            2 * 2 * unit + 4 * unit);
  EXPECT_EQ(fsdp_buffer_bytes(t, fsdp(DpSharding::kOptimGrads), unit), 4 * unit);
  EXPECT_EQ(fsdp_buffer_bytes(t, fsdp(DpSharding::kOptim), unit), 0);
  ParallelConfig ddp;
  EXPECT_EQ(fsdp_buffer_bytes(t, ddp, unit), 0);
}

// The precision-aware optimizer with bf16 moments (Megatron-LM's --exp-avg-dtype bf16
// --exp-avg-sq-dtype bf16): fp32 master 4 + m 2 + v 2 = 8 optimizer bytes, 14 per parameter; the
// step moves 2 x 2 + 2 x 2 = 8 bytes less per parameter.
TEST(DpShardingMemory, PrecisionAwareOptimizerKeepsItsStateInItsDtypes) {
  TrainingConfig t = bf16();
  t.optimizer_precision.use_precision_aware_optimizer = true;
  t.optimizer_precision.exp_avg_dtype = OptimStateDtype::kBf16;
  t.optimizer_precision.exp_avg_sq_dtype = OptimStateDtype::kBf16;
  EXPECT_DOUBLE_EQ(state_bytes_per_parameter(t).optimizer, 8.0);
  ParallelConfig ddp;
  EXPECT_DOUBLE_EQ(sharded_bytes_per_parameter(t, ddp, 8), 14.0);
  ParallelConfig dist;
  dist.distributed_optimizer = true;
  EXPECT_DOUBLE_EQ(sharded_bytes_per_parameter(t, dist, 8), 6.0 + 8.0 / 8);
  EXPECT_DOUBLE_EQ(optimizer_step_bytes_saved(t), 8.0);
  t.optimizer_precision.main_params_dtype = OptimStateDtype::kFp16;  // + 2 x 2 + 2 less
  EXPECT_DOUBLE_EQ(state_bytes_per_parameter(t).optimizer, 6.0);
  EXPECT_DOUBLE_EQ(optimizer_step_bytes_saved(t), 14.0);
  EXPECT_DOUBLE_EQ(optimizer_step_bytes_saved(bf16()), 0.0);
}

}  // namespace
}  // namespace mplan::cost
