// GEMM cost. Sources: the roofline model (Williams, Waterman, Patterson, "Roofline", CACM 52(4),
// 2009): time is the larger of the compute and the memory bound; the shape-dependent efficiency
// is measured (cuBLAS on H200: shared/anchors/README.md) and kept as a curve in the profile.
#include "sim/cost/gemm_cost.hpp"

#include <algorithm>

#include "sim/cost/memory_bound_cost.hpp"
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

int64_t gemm_time_ns(const GpuSpec& gpu, const GemmShape& g) {
  MPLAN_CHECK(g.m >= 0 && g.n >= 0 && g.k >= 0 && g.batch >= 0, "GEMM ", g.m, "x", g.n, "x", g.k,
              " batch ", g.batch);
  const double flops = gemm_flops(g);
  if (flops == 0) return 0;
  const double compute_ns =
      flops / (gpu.peak_bf16_tflops * kTFLOP * gemm_efficiency(gpu, flops)) * 1e9;
  const double memory_ns = memory_bound_seconds(gpu, gemm_bytes(g)) * 1e9;
  return to_ns(std::max(compute_ns, memory_ns));
}

}  // namespace mplan::cost
