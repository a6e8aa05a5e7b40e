// Attention cost. Sources: FLOPs as the FlashAttention benchmarks count them
// (Dao-AILab/flash-attention benchmarks/benchmark_flash_attention.py: forward 4·b·s²·h·d, halved
// when causal, backward 2.5 × forward; Dao, "FlashAttention-2", 2023, Section 4.1); achieved
// rate from the profile's attention_efficiency (attention_backward_efficiency) curve over the
// call's FLOPs; the materialized form
// is two batched GEMMs (gemm_cost) plus memory-bound softmax passes (roofline, memory side).
#include "sim/cost/attention_cost.hpp"

#include <algorithm>

#include "sim/cost/gemm_cost.hpp"
#include "sim/cost/kernel_overhead.hpp"
#include "sim/cost/memory_bound_cost.hpp"
#include "sim/cost/shape_table.hpp"
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

const Curve& flash_curve(const GpuSpec& gpu, bool backward) {
  if (gpu.attention_efficiency.empty())
    throw Error(cat("cluster.gpu.attention_efficiency: missing in profile '", gpu.name,
                    "'; the simulator needs it to time flash attention"));
  return backward && !gpu.attention_backward_efficiency.empty() ? gpu.attention_backward_efficiency
                                                                : gpu.attention_efficiency;
}

// Forward FLOPs of a measured point (causal, as calibration runs it).
double point_flops(const AttentionPoint& p) {
  return 4.0 * static_cast<double>(p.batch) * static_cast<double>(p.heads) *
         static_cast<double>(p.seq) * static_cast<double>(p.seq) * static_cast<double>(p.head_dim) *
         0.5;
}

ShapeKey attention_key(double batch_heads, double seq, double head_dim) {
  return {batch_heads, seq, head_dim};
}

double flash_efficiency(const GpuSpec& gpu, const AttentionShape& a, double fwd_flops,
                        bool backward) {
  const double flops = backward ? 2.5 * fwd_flops : fwd_flops;
  const Curve& curve = flash_curve(gpu, backward);
  const double here = curve_at(curve, flops, 1.0);
  if (gpu.attention_shapes.empty() || a.batch < 1 || a.seq_q < 1 || !a.causal || a.seq_q != a.seq_k)
    return here;
  const ShapeKey q = attention_key(static_cast<double>(a.batch * a.heads),
                                   static_cast<double>(a.seq_q), static_cast<double>(a.head_dim));
  int best = -1;
  double best_d = 0;
  for (size_t i = 0; i < gpu.attention_shapes.size(); ++i) {
    const AttentionPoint& p = gpu.attention_shapes[i];
    const double d = shape_distance(
        q, attention_key(static_cast<double>(p.batch * p.heads), static_cast<double>(p.seq),
                         static_cast<double>(p.head_dim)));
    if (best < 0 || d < best_d) best = static_cast<int>(i), best_d = d;
  }
  if (best_d >= 1) return here;
  const AttentionPoint& p = gpu.attention_shapes[static_cast<size_t>(best)];
  const double there = curve_at(curve, (backward ? 2.5 : 1.0) * point_flops(p), 1.0);
  return refined_efficiency(here, backward ? p.backward_efficiency : p.forward_efficiency, there,
                            best_d);
}

double flash_ns(const GpuSpec& gpu, const AttentionShape& a, double bytes, bool backward,
                int kernels) {
  const double fwd_flops = attention_forward_flops(a);
  if (fwd_flops == 0) return 0;
  const double flops = backward ? 2.5 * fwd_flops : fwd_flops;
  const double eff = flash_efficiency(gpu, a, fwd_flops, backward);
  const double compute_ns = flops / (gpu.peak_bf16_tflops * kTFLOP * eff) * 1e9;
  return kernel_ns(gpu, std::max(compute_ns, memory_bound_seconds(gpu, bytes) * 1e9), kernels);
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

int64_t flash_attention_forward_ns(const GpuSpec& gpu, const AttentionShape& a, int kernels) {
  return to_ns(flash_ns(gpu, a, qkvo_bytes(a), false, kernels));
}

int64_t flash_attention_backward_ns(const GpuSpec& gpu, const AttentionShape& a, int kernels) {
  // Reads Q, K, V, O, dO and writes dQ, dK, dV: about twice the forward traffic.
  return to_ns(flash_ns(gpu, a, 2 * qkvo_bytes(a), true, kernels));
}

double flash_attention_efficiency(const GpuSpec& gpu, const AttentionShape& a, bool backward) {
  return flash_efficiency(gpu, a, attention_forward_flops(a), backward);
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
