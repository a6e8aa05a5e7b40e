// Model state under data-parallel sharding: what one rank keeps of the weights, gradients and
// optimizer state with the distributed optimizer (ZeRO-1) or Megatron-FSDP's sharding strategies
// (optim = ZeRO-1, optim_grads = ZeRO-2, optim_grads_params = ZeRO-3), each sharded over the
// dp·cp / num_distributed_optimizer_instances ranks of one optimizer instance.
// Invariant: with nothing sharded this is model_state_bytes(..., distributed_optimizer false).
#pragma once

#include <cstdint>

#include "sim/cost/model_state_memory.hpp"
#include "src/parallel/parallel_config.hpp"

namespace mplan::cost {

// bytes_per_parameter with the precision-aware optimizer's dtypes: bf16 training with fp32
// gradients and bf16 moments keeps 2 + 4 + (4 + 2 + 2) = 14 bytes per parameter unsharded.
BytesPerParameter state_bytes_per_parameter(const TrainingConfig& t);

// HBM bytes per updated parameter the optimizer step moves less than with fp32 state (0 without
// the precision-aware optimizer): bf16 moments save 2 × 2 + 2 × 2 = 8 of Adam's 38.
double optimizer_step_bytes_saved(const TrainingConfig& t);

// Which parts of the model state a rank keeps 1/shards of.
struct DpShardedParts {
  bool weights = false, grads = false, optimizer = false;
};
DpShardedParts dp_sharded_parts(const ParallelConfig& p);

// The ranks one optimizer instance shards over: `replicas` (dp·cp for dense parameters, the
// expert data-parallel size for experts) / num_distributed_optimizer_instances, at least 1.
int64_t dp_shard_ranks(const ParallelConfig& p, int64_t replicas);

// Bytes per parameter on one rank: bf16 with fp32 gradients and d shard ranks gives 18 (DDP,
// no_shard), 6 + 12/d (distributed optimizer, optim), 2 + 16/d (optim_grads), 18/d
// (optim_grads_params).
double sharded_bytes_per_parameter(const TrainingConfig& t, const ParallelConfig& p, int64_t d);

// The model state of a rank holding `params` dense parameters replicated over `dp` ranks (dp·cp)
// and `expert_params` over `expert_dp` ranks.
ModelStateBytes sharded_model_state_bytes(const TrainingConfig& t, const ParallelConfig& p,
                                          int64_t params, int64_t dp, int64_t expert_params,
                                          int64_t expert_dp);

// Megatron-FSDP's communication buffers while a step runs, for units (transformer layers) of at
// most `unit_params` parameters on this rank: with sharded parameters the all-gathered weights of
// the unit in use and of the prefetched one (two units; fsdp_double_buffer keeps both for the
// step), with sharded gradients the unsharded gradient of one unit being reduce-scattered.
// 0 without FSDP.
int64_t fsdp_buffer_bytes(const TrainingConfig& t, const ParallelConfig& p, int64_t unit_params);

}  // namespace mplan::cost
