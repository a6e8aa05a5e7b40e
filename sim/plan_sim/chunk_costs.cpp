// Chunk costs: the chunk's units in backward order with the recomputation Megatron-LM's
// TransformerBlock does (transformer_block.py _checkpointed_forward: "uniform" checkpoints the
// input of every group of recompute_num_layers layers and recomputes the group before its
// backward; "block" checkpoints the first recompute_num_layers layers of the chunk one by one;
// selective recomputes the --recompute-modules of every layer), and the gradient buckets Megatron
// builds (param_and_grad_buffer.py: parameters in reverse order, a bucket closes once it holds at
// least bucket_size elements), here at layer granularity.
#include "sim/plan_sim/chunk_costs.hpp"

#include <algorithm>
#include <optional>

#include "src/common/error.hpp"
#include "src/model/layer_range.hpp"
#include "src/model/recompute_group.hpp"
#include "src/parallel/grad_buckets.hpp"

namespace mplan::sim {

namespace {

const LayerCosts& layer_of(const PlanCosts& c, const Plan& plan, int64_t layer) {
  return layer_costs_of(c, plan, layer);
}

}  // namespace

void append_stage_chunks(const Plan& plan, const PlanCosts& costs, int64_t stage,
                         ChunkTable& table) {
  const ModelSpec& m = plan.model;
  const ParallelConfig& p = plan.parallel;
  table.vpp = p.vpp;
  const bool full = p.recompute == Recompute::kFull;
  const bool selective = p.recompute == Recompute::kSelective;
  for (int64_t c = 0; c < p.vpp; ++c) {
    const LayerRange range = chunk_layers(m.num_layers, p, stage, c);
    ChunkCosts ch;
    ch.stage = stage;
    ch.chunk = c;
    ch.first_layer = range.first;
    ch.num_layers = range.count;
    ch.has_embedding = stage == 0 && c == 0;
    ch.has_output = stage == p.pp - 1 && c == p.vpp - 1;
    ch.unit_begin = static_cast<int32_t>(table.units.size());

    auto add_unit = [&](ChunkUnit u) {
      ch.fwd += u.fwd;
      ch.bwd += u.bwd;
      ch.bwd_input += u.bwd_input;
      ch.bwd_weight += u.bwd_weight;
      ch.dense_params += u.dense_params;
      ch.expert_params += u.expert_params;
      table.units.push_back(u);
    };
    if (ch.has_output) {
      const ExtraCosts& x = costs.output;
      ChunkUnit u;
      u.kind = ChunkUnit::kOutput;
      u.fwd = x.fwd.cost;
      u.bwd = x.bwd.cost;
      u.bwd_input = x.bwd_input.cost;
      u.bwd_weight = x.bwd_weight.cost;
      u.dense_params = x.params;          // final norm and output weight (src/model/tensor_layout)
      u.expert_params = x.expert_params;  // multi-token prediction's experts
      add_unit(u);
      ch.act_bytes += x.act_bytes;
      ch.weight_input_bytes += x.weight_input_bytes;
      ch.weight_dy_bytes += x.weight_dy_bytes;
      ch.ws_fwd_bytes = std::max(ch.ws_fwd_bytes, x.ws_fwd_bytes);
      ch.ws_bwd_bytes = std::max(ch.ws_bwd_bytes, x.ws_bwd_bytes);
    }
    for (int64_t l = range.first + range.count - 1; l >= range.first; --l) {
      const int64_t local = l - range.first;  // position in the chunk
      const LayerCosts& lc = layer_of(costs, plan, l);
      ChunkUnit u;
      u.kind = ChunkUnit::kLayer;
      u.moe = m.is_moe_layer(l);
      u.layer = static_cast<int32_t>(l);
      u.fwd = lc.fwd.cost;
      u.dense_params = lc.dense_params;
      u.expert_params = lc.expert_params;
      ch.lp_gemm_params += lc.lp_gemm_params;
      PassCost recompute;
      bool recomputed_layer = false;  // this layer's activations are recomputed (full)
      if (selective) {
        u.recompute_attention = true;
        recompute = lc.recompute_fwd.cost;
        ch.recompute_bytes = std::max(ch.recompute_bytes, lc.act_full_bytes - lc.act_bytes);
      } else if (const std::optional<RecomputeGroup> g =
                     full ? full_recompute_group(p, range.count, local) : std::nullopt) {
        // Full recomputation (src/model/recompute_group): the group keeps its input and runs
        // again when the backward reaches its last layer.
        recomputed_layer = true;
        if (local == g->last) {
          u.recompute_first = static_cast<int32_t>(range.first + g->first);
          u.recompute_count = static_cast<int32_t>(g->size());
          int64_t bytes = 0;
          for (int64_t k = g->first; k <= g->last; ++k) {
            const LayerCosts& rk = layer_of(costs, plan, range.first + k);
            recompute += rk.fwd.cost;
            bytes += rk.act_full_bytes;
            if (m.is_moe_layer(range.first + k)) ++u.recompute_moe;
          }
          ch.recompute_bytes = std::max(ch.recompute_bytes, bytes);
        }
        if (local == g->first) ch.act_bytes += lc.ckpt_bytes;  // the group's input
      }
      if (!recomputed_layer) ch.act_bytes += full ? lc.act_full_bytes : lc.act_bytes;
      u.bwd = recompute + lc.bwd.cost;
      u.bwd_input = recompute + lc.bwd_input.cost;
      // Activation offloading: every layer (fine-grained) or the first cpu_offloading_num_layers
      // (Transformer Engine's offload context); its offloaded bytes leave the kept activations
      // and are on the GPU only during its forward (until the copy) and its backward.
      u.offloaded = lc.offload_bytes > 0 && !full &&
                    (plan.training.fine_grained_activation_offloading ||
                     l < plan.training.cpu_offloading_num_layers);
      if (u.offloaded) {
        u.fwd += lc.offload_fwd.cost;
        u.bwd += lc.offload_bwd.cost;
        u.bwd_input += lc.offload_bwd.cost;
        ch.act_bytes -= lc.offload_bytes;
        ch.ws_fwd_bytes = std::max(ch.ws_fwd_bytes, lc.ws_fwd_bytes + lc.offload_bytes);
        ch.ws_bwd_bytes = std::max(ch.ws_bwd_bytes, lc.ws_bwd_bytes + lc.offload_bytes);
      }
      u.bwd_weight = lc.bwd_weight.cost;
      ch.weight_input_bytes += lc.weight_input_bytes;
      ch.weight_dy_bytes += lc.weight_dy_bytes;
      ch.ws_fwd_bytes = std::max(ch.ws_fwd_bytes, lc.ws_fwd_bytes);
      ch.ws_bwd_bytes = std::max(ch.ws_bwd_bytes, lc.ws_bwd_bytes);
      add_unit(u);
    }
    if (ch.has_embedding) {
      const ExtraCosts& x = costs.embedding;
      ChunkUnit u;
      u.kind = ChunkUnit::kEmbedding;
      u.fwd = x.fwd.cost;
      u.bwd = x.bwd.cost;
      u.bwd_input = x.bwd_input.cost;
      u.bwd_weight = x.bwd_weight.cost;
      u.dense_params = x.params;
      add_unit(u);
      ch.act_bytes += x.act_bytes;
      ch.weight_dy_bytes += x.weight_dy_bytes;
      ch.ws_fwd_bytes = std::max(ch.ws_fwd_bytes, x.ws_fwd_bytes);
      ch.ws_bwd_bytes = std::max(ch.ws_bwd_bytes, x.ws_bwd_bytes);
    }
    ch.unit_end = static_cast<int32_t>(table.units.size());
    ch.weight_input_bytes = std::min(ch.weight_input_bytes, ch.act_bytes);

    // Buckets, in the order their gradients complete (src/parallel/grad_buckets: Megatron's rule
    // at layer granularity; dense and expert gradients live in separate buffers).
    ch.bucket_begin = static_cast<int32_t>(table.buckets.size());
    const int64_t limit = grad_bucket_elems(p, stage, c);
    const int32_t last = ch.unit_end - ch.unit_begin - 1;
    for (bool expert : {false, true}) {
      std::vector<BucketItem>& items = table.bucket_items;
      items.clear();
      bool any = false;
      for (int32_t u = ch.unit_begin; u < ch.unit_end; ++u) {
        const int64_t n = expert ? table.units[u].expert_params : table.units[u].dense_params;
        items.push_back({n, false});
        any = any || n > 0;
      }
      if (!any) continue;
      layout_grad_buckets(items, limit, 1, 1, table.bucket_layout);
      for (const BucketSpan& b : table.bucket_layout.buckets)
        table.buckets.push_back({expert, b.numel, b.last_item});
    }
    // Completion order: by the unit that completes each bucket (dense before expert on ties).
    std::stable_sort(
        table.buckets.begin() + ch.bucket_begin, table.buckets.end(),
        [](const GradBucket& a, const GradBucket& b) { return a.last_unit < b.last_unit; });
    ch.bucket_end = static_cast<int32_t>(table.buckets.size());
    int32_t split_points = 0;
    for (int32_t b = ch.bucket_begin; b < ch.bucket_end; ++b)
      if (table.buckets[b].last_unit != last) ++split_points;
    ch.bucketed = split_points > 0;
    table.chunks.push_back(ch);
  }
}

}  // namespace mplan::sim
