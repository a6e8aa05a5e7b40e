// ChunkCosts: what one model chunk (the layers of one virtual stage, with the embedding on the
// first and the output layer on the last) costs per micro-batch on one GPU: forward, backward
// with its recomputation, the zero-bubble B and W passes, the activations it keeps, and — for
// the chunk whose gradients Megatron reduces in several buckets — the backward split at the
// points where each data-parallel bucket becomes complete.
// Invariant: the units of a chunk (in backward order: output layer, layers last to first,
// embedding) add up to the chunk's totals; every bucket ends at a unit boundary.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/plan_sim/layer_costs.hpp"
#include "src/parallel/grad_buckets.hpp"
#include "src/plan/plan.hpp"

namespace mplan::sim {

// One step of a chunk's backward: a layer (with what is recomputed just before its backward),
// the output layer or the embedding.
struct ChunkUnit {
  enum Kind : uint8_t { kLayer, kEmbedding, kOutput };
  Kind kind = kLayer;
  bool moe = false;
  int32_t layer = -1;           // global index for kLayer
  int32_t recompute_first = 0;  // full recompute: layers [first, first + count) run again here
  int32_t recompute_count = 0;
  bool offloaded = false;  // activation offloading moves this layer's offload_bytes to the host
  bool recompute_attention = false;  // selective recompute: this layer's recompute modules
  int32_t recompute_moe = 0;         // how many of the recomputed layers are MoE layers
  PassCost fwd, bwd, bwd_input, bwd_weight;
  int64_t dense_params = 0, expert_params = 0;
};

// A data-parallel gradient bucket: `numel` parameters of one buffer (dense: reduced over
// dp x cp; expert: over the expert data-parallel group), complete once unit `last_unit`'s
// backward has run (units in backward order).
struct GradBucket {
  bool expert = false;
  int64_t numel = 0;
  int32_t last_unit = 0;
};

struct ChunkCosts {
  int64_t stage = 0, chunk = 0;
  int64_t first_layer = 0, num_layers = 0;
  bool has_embedding = false, has_output = false;
  PassCost fwd, bwd, bwd_input, bwd_weight;  // bwd and bwd_input include the recomputation
  int64_t act_bytes = 0;           // kept per micro-batch from its forward to its backward
  int64_t recompute_bytes = 0;     // alive during the backward: what recomputation re-creates
  int64_t weight_input_bytes = 0;  // of act_bytes, what W still needs after B (zero-bubble)
  int64_t weight_dy_bytes = 0;     // zero-bubble: output gradients B keeps for W
  int64_t ws_fwd_bytes = 0, ws_bwd_bytes = 0;   // transient in one forward / backward
  int64_t dense_params = 0, expert_params = 0;  // this GPU's gradients of the chunk
  int64_t lp_gemm_params = 0;            // of which GEMM weights of fp8 / fp4 layers (LayerCosts)
  int32_t unit_begin = 0, unit_end = 0;  // into ChunkTable::units, backward order
  int32_t bucket_begin = 0, bucket_end = 0;  // into ChunkTable::buckets, in completion order
  // The backward pieces of the last micro-batch: unit ranges ending where a bucket completes.
  bool bucketed = false;  // more than one bucket: split the last backward (and first forward)
};

struct ChunkTable {
  std::vector<ChunkCosts> chunks;  // stage-major: chunks[stage * vpp + chunk]
  std::vector<ChunkUnit> units;
  std::vector<GradBucket> buckets;
  int64_t vpp = 1;
  std::vector<BucketItem> bucket_items;  // scratch
  BucketLayout bucket_layout;            // scratch
  const ChunkCosts& at(int64_t stage, int64_t chunk) const { return chunks[stage * vpp + chunk]; }
};

// Builds the chunks of stage `stage` (appending to `table`) from the layer costs `costs`.
void append_stage_chunks(const Plan& plan, const PlanCosts& costs, int64_t stage,
                         ChunkTable& table);

}  // namespace mplan::sim
