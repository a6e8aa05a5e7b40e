// Per-kernel fixed costs of a hardware profile: a kernel takes at least kernel_min_us (a tiny
// kernel issued back to back), plus kernel_overhead_us for each kernel it launches (what running
// in a stream of different kernels adds to a kernel timed in a loop of itself; `mplan calibrate`
// measures both), and at least host_overhead_us (the host's time to issue it). Invariant: with
// all three at 0 (every profile without them) the work time is kept.
#pragma once

#include <algorithm>

#include "src/plan/cluster_spec.hpp"

namespace mplan::cost {

// max(work_ns, kernel_min, host_overhead) + kernels · kernel_overhead, in ns (kernels <= 0:
// the work time alone). The host floor is per kernel: exact for a stretch of short kernels, an
// over-estimate where short kernels follow long ones the host ran ahead of.
inline double kernel_ns(const GpuSpec& gpu, double work_ns, int kernels) {
  if (kernels <= 0) return work_ns;
  const double floor_ns = std::max(gpu.kernel_min_us, gpu.host_overhead_us) * 1e3;
  return std::max(work_ns, floor_ns) + kernels * gpu.kernel_overhead_us * 1e3;
}

}  // namespace mplan::cost
