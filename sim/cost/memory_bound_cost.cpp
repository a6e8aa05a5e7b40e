// Memory-bound op cost. Source: the memory side of the roofline model (Williams et al., CACM
// 2009); the achieved fraction of HBM bandwidth is the profile's memory_bound_efficiency.
#include "sim/cost/memory_bound_cost.hpp"

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

}  // namespace mplan::cost
