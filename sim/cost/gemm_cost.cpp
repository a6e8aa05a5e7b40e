// GEMM cost. Sources: the roofline model (Williams, Waterman, Patterson, "Roofline", CACM 52(4),
// 2009): time is the larger of the compute and the memory bound; the shape-dependent efficiency
// is measured (cuBLAS on H200: shared/anchors/README.md; `mplan calibrate` on the profile's GPU)
// and kept as a curve over FLOPs plus, optionally, the measured shapes themselves.
#include "sim/cost/gemm_cost.hpp"

#include <algorithm>

#include "sim/cost/kernel_overhead.hpp"
#include "sim/cost/memory_bound_cost.hpp"
#include "sim/cost/shape_table.hpp"
#include "sim/cost/time_ns.hpp"
#include "src/common/error.hpp"
#include "src/common/units.hpp"

namespace mplan::cost {

double gemm_flops(const GemmShape& g) {
  return 2.0 * static_cast<double>(g.m) * static_cast<double>(g.n) * static_cast<double>(g.k) *
         static_cast<double>(g.batch);
}

double gemm_bytes(const GemmShape& g) {
  const double m = static_cast<double>(g.m), n = static_cast<double>(g.n),
               k = static_cast<double>(g.k);
  return (m * k + k * n + m * n) * static_cast<double>(g.batch) *
         static_cast<double>(g.bytes_per_element);
}

double gemm_efficiency(const GpuSpec& gpu, double flops) {
  if (gpu.gemm_efficiency.empty())
    throw Error(cat("cluster.gpu.gemm_efficiency: missing in profile '", gpu.name,
                    "'; the simulator needs it to time GEMMs"));
  return curve_at(gpu.gemm_efficiency, flops, 1.0);
}

namespace {

ShapeKey key_of(int64_t m, int64_t n, int64_t k) {
  return {static_cast<double>(m), static_cast<double>(n), static_cast<double>(k)};
}

// The nearest measured shape of g's pass: index into gpu.gemm_shapes (-1: none) and distance.
std::pair<int, double> nearest(const GpuSpec& gpu, const GemmShape& g) {
  int best = -1;
  double best_d = 0;
  if (g.batch != 1 || g.m < 1 || g.n < 1 || g.k < 1) return {best, best_d};
  const ShapeKey q = key_of(g.m, g.n, g.k);
  for (size_t i = 0; i < gpu.gemm_shapes.size(); ++i) {
    const GemmPoint& p = gpu.gemm_shapes[i];
    if (p.pass != g.pass) continue;
    const double d = shape_distance(q, key_of(p.m, p.n, p.k));
    if (best < 0 || d < best_d) best = static_cast<int>(i), best_d = d;
  }
  return {best, best_d};
}

// The refined efficiency of g; `exact`: g is a measured shape.
double refined(const GpuSpec& gpu, const GemmShape& g, bool& exact) {
  const double here = gemm_efficiency(gpu, gemm_flops(g));
  const auto [i, d] = nearest(gpu, g);
  exact = i >= 0 && d == 0;
  if (i < 0 || d >= 1) return here;
  const GemmPoint& p = gpu.gemm_shapes[static_cast<size_t>(i)];
  const double there = gemm_efficiency(gpu, gemm_flops({p.m, p.n, p.k}));
  return refined_efficiency(here, p.efficiency, there, d);
}

}  // namespace

double gemm_efficiency(const GpuSpec& gpu, const GemmShape& g) {
  bool exact = false;
  return refined(gpu, g, exact);
}

int64_t gemm_time_ns(const GpuSpec& gpu, const GemmShape& g) {
  MPLAN_CHECK(g.m >= 0 && g.n >= 0 && g.k >= 0 && g.batch >= 0, "GEMM ", g.m, "x", g.n, "x", g.k,
              " batch ", g.batch);
  const double flops = gemm_flops(g);
  if (flops == 0) return 0;
  if (g.pass == GemmPass::kInputGradDGelu &&
      std::none_of(gpu.gemm_shapes.begin(), gpu.gemm_shapes.end(),
                   [](const GemmPoint& p) { return p.pass == GemmPass::kInputGradDGelu; })) {
    // Not measured with its epilogue: the plain input gradient, and the epilogue's read of the
    // pre-activation (m × n) at the memory-bound rate.
    GemmShape dx = g;
    dx.pass = GemmPass::kInputGrad;
    const double aux_bytes = static_cast<double>(g.m) * static_cast<double>(g.n) *
                             static_cast<double>(g.batch) *
                             static_cast<double>(g.bytes_per_element);
    return gemm_time_ns(gpu, dx) + to_ns(memory_bound_seconds(gpu, aux_bytes) * 1e9);
  }
  bool exact = false;
  double efficiency = refined(gpu, g, exact);
  if (gpu.sustained_gemm_efficiency > 0 && efficiency > gpu.sustained_gemm_efficiency)
    efficiency -= gpu.sustained_gemm_weight * (efficiency - gpu.sustained_gemm_efficiency);
  const double compute_ns = flops / (gpu.peak_bf16_tflops * kTFLOP * efficiency) * 1e9;
  const double memory_ns = exact ? 0 : memory_bound_seconds(gpu, gemm_bytes(g)) * 1e9;
  return to_ns(kernel_ns(gpu, std::max(compute_ns, memory_ns), 1));
}

}  // namespace mplan::cost
