// Time of a (batched) GEMM on one GPU: FLOPs over the GPU's achieved rate, where the achieved
// fraction of peak comes from the hardware profile's efficiency curve over the GEMM's FLOPs,
// refined by the profile's measured shapes of the same pass, with a memory-roofline floor for
// skinny shapes, the profile's least kernel time, and its per-kernel overhead added.
// Invariant: time >= max(compute, memory) bound; a measured shape takes its measured time.
#pragma once

#include <cstdint>

#include "src/plan/cluster_spec.hpp"

namespace mplan::cost {

// C (m, n) = A (m, k) · B (k, n), `batch` independent products, `bytes_per_element` per operand;
// `pass`: which pass of a linear layer (selects the measured shapes that apply).
struct GemmShape {
  int64_t m = 0;
  int64_t n = 0;
  int64_t k = 0;
  int64_t batch = 1;
  int64_t bytes_per_element = 2;  // bf16
  GemmPass pass = GemmPass::kForward;
};

// 2·m·n·k·batch: one multiply and one add per inner-product term.
double gemm_flops(const GemmShape& g);
// Bytes read and written once: (m·k + k·n + m·n)·batch·bytes_per_element.
double gemm_bytes(const GemmShape& g);
// Achieved fraction of peak for a GEMM of `flops` FLOPs (the profile's gemm_efficiency curve).
double gemm_efficiency(const GpuSpec& gpu, double flops);
// The same for a shape: the curve, refined by the nearest measured shape of the same pass
// (sim/cost/shape_table; batched GEMMs take the curve alone).
double gemm_efficiency(const GpuSpec& gpu, const GemmShape& g);
// max(flops / (peak · efficiency(shape)), bytes / (HBM bandwidth · memory_bound_efficiency),
// kernel_min_us) + kernel_overhead_us; a measured shape has no memory floor (it was measured).
// An input gradient with the GeLU-backward epilogue (kInputGradDGelu) in a profile that measured
// none: the plain input gradient's time plus the epilogue's read of m·n elements, memory-bound.
int64_t gemm_time_ns(const GpuSpec& gpu, const GemmShape& g);

}  // namespace mplan::cost
