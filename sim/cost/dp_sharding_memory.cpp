// Sharded model state. Sources: Megatron-LM docs/user-guide/features/dist_optimizer.md (18 and
// 6 + 12/d bytes per parameter), megatron/core/distributed/fsdp (Megatron-FSDP's
// data_parallel_sharding_strategy: "optim" shards the optimizer state, "optim_grads" also the
// gradients, "optim_grads_params" also the parameters; units are TransformerLayers, gathered
// before and freed after use, the next one prefetched), Rajbhandari et al. 2020, "ZeRO", Fig. 1
// (ZeRO-1/2/3: (2 + 2 + K)·Ψ split as 2Ψ + 2Ψ + KΨ/Nd, 2Ψ + (2 + K)Ψ/Nd, (2 + 2 + K)Ψ/Nd), and
// parallel_state.py (num_distributed_optimizer_instances: dp·cp / n ranks per instance); the
// precision-aware optimizer's state in its dtypes (optimizer_config.py, TE FusedAdam's
// master_weight_dtype, exp_avg_dtype, exp_avg_sq_dtype).
#include "sim/cost/dp_sharding_memory.hpp"

#include <algorithm>
#include <cmath>

#include "sim/cost/offload_cost.hpp"
#include "src/common/error.hpp"

namespace mplan::cost {

BytesPerParameter state_bytes_per_parameter(const TrainingConfig& t) {
  BytesPerParameter b = bytes_per_parameter(t);
  const OptimizerPrecision& o = t.optimizer_precision;
  if (!o.use_precision_aware_optimizer) return b;
  // Transformer Engine's FusedAdam keeps the master weights (16-bit training only) and the two
  // moments in their dtypes; 16-bit main gradients still get an fp32 copy.
  const bool sixteen_bit = t.precision != Precision::kFp32;
  b.optimizer = static_cast<double>((sixteen_bit ? bytes_of(o.main_params_dtype) : 0) +
                                    bytes_of(o.exp_avg_dtype) + bytes_of(o.exp_avg_sq_dtype) +
                                    (sixteen_bit && !t.grads_in_fp32 ? 4 : 0));
  return b;
}

double optimizer_step_bytes_saved(const TrainingConfig& t) {
  const OptimizerPrecision& o = t.optimizer_precision;
  if (!o.use_precision_aware_optimizer) return 0;
  const bool sixteen_bit = t.precision != Precision::kFp32;
  const double main = sixteen_bit ? static_cast<double>(bytes_of(o.main_params_dtype)) : 4;
  const double m = static_cast<double>(bytes_of(o.exp_avg_dtype));
  const double v = static_cast<double>(bytes_of(o.exp_avg_sq_dtype));
  // Adam reads and writes master, m and v (2 × 4 bytes each in fp32); 16-bit training then reads
  // the master to write the 16-bit copy.
  return 2 * (4 - main) + 2 * (4 - m) + 2 * (4 - v) + (sixteen_bit ? 4 - main : 0);
}

DpShardedParts dp_sharded_parts(const ParallelConfig& p) {
  DpShardedParts s;
  if (!p.use_megatron_fsdp) {
    s.optimizer = p.distributed_optimizer;
    return s;
  }
  const DpSharding d = p.data_parallel_sharding_strategy;
  s.optimizer = d != DpSharding::kNoShard;
  s.grads = d == DpSharding::kOptimGrads || d == DpSharding::kOptimGradsParams;
  s.weights = d == DpSharding::kOptimGradsParams;
  return s;
}

int64_t dp_shard_ranks(const ParallelConfig& p, int64_t replicas) {
  const int64_t n = std::max<int64_t>(1, p.num_distributed_optimizer_instances);
  return std::max<int64_t>(1, replicas / n);
}

double sharded_bytes_per_parameter(const TrainingConfig& t, const ParallelConfig& p, int64_t d) {
  MPLAN_CHECK(d >= 1, "shard ranks ", d);
  const BytesPerParameter b = state_bytes_per_parameter(t);
  const DpShardedParts s = dp_sharded_parts(p);
  const double dd = static_cast<double>(d);
  return (s.weights ? b.weights / dd : b.weights) + (s.grads ? b.grads / dd : b.grads) +
         (s.optimizer ? b.optimizer / dd : b.optimizer);
}

ModelStateBytes sharded_model_state_bytes(const TrainingConfig& t, const ParallelConfig& p,
                                          int64_t params, int64_t dp, int64_t expert_params,
                                          int64_t expert_dp) {
  MPLAN_CHECK(params >= 0 && expert_params >= 0 && dp >= 1 && expert_dp >= 1, "params ", params,
              " dp ", dp, " expert params ", expert_params, " expert dp ", expert_dp);
  const BytesPerParameter b = state_bytes_per_parameter(t);
  const DpShardedParts s = dp_sharded_parts(p);
  const double pd = static_cast<double>(params), pe = static_cast<double>(expert_params);
  const double dd = static_cast<double>(dp_shard_ranks(p, dp));
  const double de = static_cast<double>(dp_shard_ranks(p, expert_dp));
  auto part = [&](double bytes, bool sharded) {
    return std::llround(sharded ? bytes * (pd / dd + pe / de) : bytes * (pd + pe));
  };
  ModelStateBytes m;
  m.weights = part(b.weights, s.weights);
  m.grads = part(b.grads, s.grads);
  // --optimizer-cpu-offload: that fraction of the optimizer state lives on the host.
  m.optimizer = std::llround(static_cast<double>(part(b.optimizer, s.optimizer)) *
                             (1.0 - optimizer_offload_fraction(t)));
  return m;
}

int64_t fsdp_buffer_bytes(const TrainingConfig& t, const ParallelConfig& p, int64_t unit_params) {
  if (!p.use_megatron_fsdp) return 0;
  const BytesPerParameter b = bytes_per_parameter(t);
  const DpShardedParts s = dp_sharded_parts(p);
  const double u = static_cast<double>(unit_params);
  return std::llround((s.weights ? 2 * b.weights * u : 0.0) + (s.grads ? b.grads * u : 0.0));
}

}  // namespace mplan::cost
