// Time of the attention core (softmax(Q·K^T / sqrt(d))·V, without the QKV and output
// projections, which are GEMMs) on one GPU, forward and backward, for a flash-style fused kernel
// or for the materialized form (two batched GEMMs around a memory-bound softmax on s_q × s_k
// scores). Flash efficiencies come from the profile's curves over FLOPs, refined by its measured
// attention shapes over (batch·heads, sequence, head dim) — the head count and head dim change the
// rate at equal FLOPs. Invariant: backward FLOPs are 2.5 × forward (flash) or 2 × forward
// (materialized).
#pragma once

#include <cstdint>

#include "src/plan/cluster_spec.hpp"

namespace mplan::cost {

// Shapes as seen by one GPU: heads already divided by tp, sequence by cp where that applies.
struct AttentionShape {
  int64_t batch = 1;     // b
  int64_t heads = 1;     // query heads on this GPU
  int64_t kv_heads = 1;  // key/value heads (query groups) on this GPU
  int64_t seq_q = 0;     // query positions
  int64_t seq_k = 0;     // key positions
  int64_t head_dim = 0;  // d
  bool causal = true;
  int64_t bytes_per_element = 2;
};

// Forward FLOPs: 4·b·heads·s_q·s_k·d (Q·K^T and P·V), halved when causal.
double attention_forward_flops(const AttentionShape& a);

// Flash-style (one fused kernel; scores never leave on-chip memory). `kernels`: how many kernels
// the implementation launches for the call (the profile's per-kernel overhead applies to each).
int64_t flash_attention_forward_ns(const GpuSpec& gpu, const AttentionShape& a, int kernels = 1);
int64_t flash_attention_backward_ns(const GpuSpec& gpu, const AttentionShape& a, int kernels = 1);
// The achieved fraction of peak of a flash call (forward, or backward over its own FLOPs).
double flash_attention_efficiency(const GpuSpec& gpu, const AttentionShape& a, bool backward);

// Materialized scores (Megatron's local/unfused attention): batched GEMMs Q·K^T and P·V, plus
// the memory-bound passes over the b·heads·s_q·s_k scores; `softmax_bytes_per_score` is the
// traffic per score element of the softmax (and scale, mask, dropout) kernels in that direction:
// 4 for one fused read+write in bf16, more for unfused or fp32 kernels.
struct MaterializedSoftmax {
  double forward_bytes_per_score = 4;   // read scores, write probabilities (bf16, fused)
  double backward_bytes_per_score = 6;  // read probabilities and their grad, write score grad
};
int64_t materialized_attention_forward_ns(const GpuSpec& gpu, const AttentionShape& a,
                                          const MaterializedSoftmax& sm = {});
int64_t materialized_attention_backward_ns(const GpuSpec& gpu, const AttentionShape& a,
                                           const MaterializedSoftmax& sm = {});

}  // namespace mplan::cost
