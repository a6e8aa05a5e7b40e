// Attention cost. Sources: FLOPs as the FlashAttention benchmarks count them
// (Dao-AILab/flash-attention benchmarks/benchmark_flash_attention.py: forward 4·b·s²·h·d, halved
// when causal, backward 2.5 × forward; Dao, "FlashAttention-2", 2023, Section 4.1); achieved
// rate from the profile's attention_efficiency (attention_backward_efficiency) curve over the
// call's FLOPs; the materialized form
// is two batched GEMMs (gemm_cost) plus memory-bound softmax passes (roofline, memory side).
#include "sim/cost/attention_cost.hpp"

#include <algorithm>

#include "sim/cost/gemm_cost.hpp"
#include "sim/cost/memory_bound_cost.hpp"
#include "sim/cost/time_ns.hpp"
#include "src/common/error.hpp"
#include "src/common/units.hpp"

namespace mplan::cost {

namespace {

void check(const AttentionShape& a) {
  MPLAN_CHECK(a.batch >= 0 && a.heads >= 1 && a.kv_heads >= 1 && a.heads % a.kv_heads == 0 &&
                  a.seq_q >= 0 && a.seq_k >= 0 && a.head_dim >= 1,
              "attention b=", a.batch, " heads=", a.heads, " kv_heads=", a.kv_heads,
              " s_q=", a.seq_q, " s_k=", a.seq_k, " d=", a.head_dim);
}

double causal_factor(const AttentionShape& a) { return a.causal ? 0.5 : 1.0; }

// Bytes of Q, K, V and O once: the memory floor of a fused kernel.
double qkvo_bytes(const AttentionShape& a) {
  const double b = static_cast<double>(a.batch), d = static_cast<double>(a.head_dim);
  const double q = b * static_cast<double>(a.seq_q) * static_cast<double>(a.heads) * d;
  const double kv = b * static_cast<double>(a.seq_k) * static_cast<double>(a.kv_heads) * d;
  return (2 * q + 2 * kv) * static_cast<double>(a.bytes_per_element);
}

double flash_ns(const GpuSpec& gpu, double flops, double bytes, bool backward) {
  if (flops == 0) return 0;
  if (gpu.attention_efficiency.empty())
    throw Error(cat("cluster.gpu.attention_efficiency: missing in profile '", gpu.name,
                    "'; the simulator needs it to time flash attention"));
  const Curve& curve = backward && !gpu.attention_backward_efficiency.empty()
                           ? gpu.attention_backward_efficiency
                           : gpu.attention_efficiency;
  const double eff = curve_at(curve, flops, 1.0);
  const double compute_ns = flops / (gpu.peak_bf16_tflops * kTFLOP * eff) * 1e9;
  return std::max(compute_ns, memory_bound_seconds(gpu, bytes) * 1e9);
}

double scores(const AttentionShape& a) {
  return static_cast<double>(a.batch) * static_cast<double>(a.heads) *
         static_cast<double>(a.seq_q) * static_cast<double>(a.seq_k);
}

// One of the two batched GEMMs: per (batch, head), (s_q × d) · (d × s_k) or (s_q × s_k) · (s_k ×
// d).
GemmShape qk_gemm(const AttentionShape& a) {
  return {a.seq_q, a.seq_k, a.head_dim, a.batch * a.heads, a.bytes_per_element};
}
GemmShape pv_gemm(const AttentionShape& a) {
  return {a.seq_q, a.head_dim, a.seq_k, a.batch * a.heads, a.bytes_per_element};
}

}  // namespace

double attention_forward_flops(const AttentionShape& a) {
  check(a);
  return 4.0 * scores(a) * static_cast<double>(a.head_dim) * causal_factor(a);
}

int64_t flash_attention_forward_ns(const GpuSpec& gpu, const AttentionShape& a) {
  return to_ns(flash_ns(gpu, attention_forward_flops(a), qkvo_bytes(a), false));
}

int64_t flash_attention_backward_ns(const GpuSpec& gpu, const AttentionShape& a) {
  // Reads Q, K, V, O, dO and writes dQ, dK, dV: about twice the forward traffic.
  return to_ns(flash_ns(gpu, 2.5 * attention_forward_flops(a), 2 * qkvo_bytes(a), true));
}

// The materialized form computes every score: a causal mask does not save GEMM work.
int64_t materialized_attention_forward_ns(const GpuSpec& gpu, const AttentionShape& a,
                                          const MaterializedSoftmax& sm) {
  check(a);
  double ns = static_cast<double>(gemm_time_ns(gpu, qk_gemm(a)) + gemm_time_ns(gpu, pv_gemm(a)));
  ns += memory_bound_seconds(gpu, scores(a) * sm.forward_bytes_per_score) * 1e9;
  return to_ns(ns);
}

int64_t materialized_attention_backward_ns(const GpuSpec& gpu, const AttentionShape& a,
                                           const MaterializedSoftmax& sm) {
  check(a);
  // Two GEMMs per forward GEMM: gradients of both operands, each the size of the forward one.
  double ns =
      2.0 * static_cast<double>(gemm_time_ns(gpu, qk_gemm(a)) + gemm_time_ns(gpu, pv_gemm(a)));
  ns += memory_bound_seconds(gpu, scores(a) * sm.backward_bytes_per_score) * 1e9;
  return to_ns(ns);
}

}  // namespace mplan::cost
