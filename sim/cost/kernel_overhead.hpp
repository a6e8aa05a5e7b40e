// Per-kernel fixed costs of a hardware profile. In a stream, a kernel takes its work time and at
// least kernel_overhead_us, the time of a tiny kernel issued back to back (`mplan calibrate`
// measures it; a kernel timed in a loop of itself already includes it, so it is a floor, not an
// addend). kernel_min_us (a tiny kernel alone between two events: a GPU that waited for the host)
// and host_overhead_us (the host's time to issue one kernel) are recorded but not charged: in the
// executor's passes the host runs ahead of the GPU — `mplan run --trace-level ops` on one H100
// measured 0.1 us between consecutive kernels over 15 000 kernels an iteration
// (reports/accuracy-1gpu.md). Invariant: with kernel_overhead_us at 0 (every profile without it)
// the work time is kept.
#pragma once

#include <algorithm>

#include "src/plan/cluster_spec.hpp"

namespace mplan::cost {

// max(work_ns, kernels · kernel_overhead), in ns (kernels <= 0: the work time alone).
inline double kernel_ns(const GpuSpec& gpu, double work_ns, int kernels) {
  if (kernels <= 0) return work_ns;
  return std::max(work_ns, kernels * gpu.kernel_overhead_us * 1e3);
}

}  // namespace mplan::cost
