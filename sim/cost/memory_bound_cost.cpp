// Memory-bound op cost. Source: the memory side of the roofline model (Williams et al., CACM
// 2009); the achieved fraction of HBM bandwidth is the profile's memory_bound_efficiency, or the
// kind's measured curve (memory_bound_kinds; `mplan calibrate` counts bytes with
// mem_kernel_bytes, so a measured size gives back its measured time).
#include "sim/cost/memory_bound_cost.hpp"

#include <cmath>

#include "sim/cost/kernel_overhead.hpp"
#include "sim/cost/time_ns.hpp"
#include "src/common/error.hpp"
#include "src/common/units.hpp"

namespace mplan::cost {

double memory_bound_seconds(const GpuSpec& gpu, double bytes) {
  MPLAN_CHECK(bytes >= 0, "bytes ", bytes);
  MPLAN_CHECK(gpu.hbm_bandwidth_gbps > 0 && gpu.memory_bound_efficiency > 0, "GPU '", gpu.name,
              "' has no HBM bandwidth");
  return bytes / (gpu.hbm_bandwidth_gbps * kGB * gpu.memory_bound_efficiency);
}

int64_t memory_bound_time_ns(const GpuSpec& gpu, double bytes) {
  return to_ns(memory_bound_seconds(gpu, bytes) * 1e9);
}

double mem_kernel_bytes(MemKernel k, double rows, double cols, int64_t e) {
  MPLAN_CHECK(rows >= 0 && cols >= 0 && e > 0, "mem_kernel_bytes(", to_string(k), ", ", rows, ", ",
              cols, ", ", e, ")");
  const double rc = rows * cols, ee = static_cast<double>(e);
  switch (k) {
    case MemKernel::kCopy:
      return 2 * rc * ee;
    case MemKernel::kAdd:
      return 3 * rc * ee;
    case MemKernel::kLayerNormForward:
      return 2 * rc * ee + 8 * rows;
    case MemKernel::kLayerNormBackward:
      return 4 * rc * ee + 8 * rows;
    case MemKernel::kRmsNormForward:
      return 2 * rc * ee + 4 * rows;
    case MemKernel::kRmsNormBackward:
      return 4 * rc * ee + 4 * rows;
    case MemKernel::kGeluForward:
      return 2 * rc * ee;
    case MemKernel::kGeluBackward:
      return 3 * rc * ee;
    case MemKernel::kSwigluForward:
      return 3 * rc * ee;
    case MemKernel::kSwigluBackward:
      return 5 * rc * ee;
    case MemKernel::kBiasGrad:
    case MemKernel::kPositionEmbeddingBackward:
      return rc * ee;
    case MemKernel::kRope:
      return 2 * rc * ee;
    case MemKernel::kEmbeddingForward:
      return 2 * rc * ee + 4 * rows;
    case MemKernel::kEmbeddingBackward:
      return rc * ee + 8 * rc;
    case MemKernel::kCrossEntropy:
      return 4 * rc * ee + 16 * rows;
    case MemKernel::kAdamW:
      return 30 * rows;
    case MemKernel::kGradNorm:
    case MemKernel::kFill:
      return 4 * rows;
  }
  return 0;
}

bool has_kind_rate(const GpuSpec& gpu, MemKernel k) {
  return !gpu.memory_bound_kinds[static_cast<size_t>(k)].empty();
}

namespace {

// The kind's curve, or, measured at several widths, the one of the width nearest `width`.
const Curve& kind_curve(const GpuSpec& gpu, MemKernel k, double width) {
  const auto& by_width = gpu.memory_bound_widths[static_cast<size_t>(k)];
  if (width <= 0 || by_width.empty()) return gpu.memory_bound_kinds[static_cast<size_t>(k)];
  const Curve* best = nullptr;
  double best_d = 0;
  for (const auto& [w, c] : by_width) {
    const double d = std::abs(std::log2(static_cast<double>(w) / width));
    if (best == nullptr || d < best_d) best = &c, best_d = d;
  }
  return *best;
}

}  // namespace

int64_t mem_kernel_time_ns(const GpuSpec& gpu, MemKernel k, double bytes, double legacy_bytes,
                           int kernels, double width) {
  MPLAN_CHECK(bytes >= 0 && legacy_bytes >= 0, "bytes ", bytes, " legacy ", legacy_bytes);
  const Curve& c = kind_curve(gpu, k, width);
  double work_ns = 0;
  if (c.empty()) {
    if (legacy_bytes == 0) return 0;
    work_ns = memory_bound_seconds(gpu, legacy_bytes) * 1e9;
  } else {
    if (bytes == 0) return 0;
    work_ns = bytes / (gpu.hbm_bandwidth_gbps * kGB * curve_at(c, bytes, 1.0)) * 1e9;
  }
  return to_ns(kernel_ns(gpu, work_ns, kernels));
}

}  // namespace mplan::cost
