// The lower bound, from the same primitives the simulator's memory model uses: rank_params
// (src/model/model_stats), model_state_bytes and layer_activation_bytes (sim/cost), and the
// schedule's warm-up count (src/schedule): a forward's activations are allocated when it starts
// and freed when the matching backward ends; offloaded activations (offloadable_bytes) are not
// on the GPU in between.
#include "sim/sweep/memory_bound.hpp"

#include <algorithm>
#include <cmath>

#include "sim/cost/activation_memory.hpp"
#include "sim/cost/dp_sharding_memory.hpp"
#include "sim/cost/model_state_memory.hpp"
#include "src/common/error.hpp"
#include "src/common/units.hpp"
#include "src/model/layer_range.hpp"
#include "src/model/model_stats.hpp"
#include "src/plan/low_precision.hpp"
#include "src/plan/plan_rules.hpp"

namespace mplan::sweep {

int64_t memory_lower_bound(const Plan& plan) {
  const ModelSpec& m = plan.model;
  const ParallelConfig& p = plan.parallel;

  // Per layer and micro-batch, the smallest activation footprint of any simulator setting.
  cost::LayerActivationShape s;
  s.seq_length = m.seq_length;
  s.micro_batch = p.micro_batch_size;
  s.hidden = m.hidden_size;
  s.heads = m.num_attention_heads;
  s.query_groups = m.num_query_groups;
  s.head_dim = m.kv_channels;
  s.ffn_hidden = m.ffn_hidden_size;
  s.gated_mlp = m.activation == Activation::kSwiglu;
  s.tp = p.tp;
  s.cp = p.cp;
  s.sequence_parallel = p.sequence_parallel && p.tp > 1;
  s.recompute = p.recompute;
  s.flash_attention = true;
  s.attention_dropout = false;
  s.hidden_dropout = false;
  s.bytes_per_element = bytes_per_element(plan.training.precision);
  // fp8 / fp4: the quantized GEMM inputs (the smaller footprint; bf16 layers only add to it).
  if (low_precision(plan.training)) s.gemm_input_bytes = quantized_bytes_per_element(plan.training);
  const cost::LayerActivationBytes layer = cost::layer_activation_bytes(s);
  // Fine-grained activation offloading: the named modules' inputs leave the GPU; counted with the
  // norms unfused and fused, the larger (so at least what the simulator offloads).
  int64_t offloaded = 0;
  if (plan.training.fine_grained_activation_offloading) {
    const uint32_t modules = plan.training.offload_modules;
    offloaded = cost::offloadable_bytes(s).of(modules);
    s.norms_fused = !s.norms_fused;
    offloaded = std::max(offloaded, cost::offloadable_bytes(s).of(modules));
  }
  // MoE layers: only the parts that do not depend on routing. Layers below
  // cpu_offloading_num_layers keep nothing on the GPU.
  const int64_t dense_layer_bytes = std::max<int64_t>(0, layer.total() - offloaded);
  const int64_t moe_layer_bytes =
      std::max<int64_t>(0, layer.checkpoint + layer.norms + layer.attention - offloaded);
  const int64_t cpu_offloaded_layers = plan.training.cpu_offloading_num_layers;

  const int64_t dp_shards = p.dp * p.cp;
  const int64_t expert_dp = std::max<int64_t>(1, p.expert_dp());
  const int64_t overhead = static_cast<int64_t>(
      std::floor(plan.cluster.gpu_for(plan.training.implementation).runtime_overhead_gib *
                 static_cast<double>(kGiB)));

  const std::optional<ScheduleSpec> spec = schedule_spec_of(plan);
  MPLAN_CHECK(spec.has_value(), "memory_lower_bound needs a valid plan");
  int64_t bound = 0;
  for (int64_t r = 0; r < p.pp; ++r) {
    // Chunk forwards started before the first backward starts: the warm-up, then one more (the
    // first of the steady state), all of them when the warm-up covers every forward.
    const int64_t alive = std::min(warmup_microbatches(*spec, r) + 1, p.vpp * spec->microbatches);
    const StageParams rank = rank_params(m, p, r);
    const int64_t state = cost::sharded_model_state_bytes(plan.training, p, rank.non_expert,
                                                          dp_shards, rank.expert, expert_dp)
                              .total();
    int64_t least_chunk = INT64_MAX;
    for (const LayerRange& chunk : stage_chunks(m.num_layers, p, r)) {
      int64_t bytes = 0;
      for (int64_t l = chunk.first; l < chunk.first + chunk.count; ++l)
        if (l >= cpu_offloaded_layers)
          bytes += m.is_moe_layer(l) ? moe_layer_bytes : dense_layer_bytes;
      least_chunk = std::min(least_chunk, bytes);
    }
    if (least_chunk == INT64_MAX) least_chunk = 0;
    bound = std::max(bound, state + overhead + alive * least_chunk);
  }
  return bound;
}

}  // namespace mplan::sweep
