// Optimizer and activation CPU offloading. Sources: Megatron-LM
// megatron/core/optimizer/cpu_offloading (hybrid_optimizer.py: the gradients of the offloaded
// parameters copied to the host, the host's torch Adam, the parameters copied back; README.md:
// --optimizer-offload-fraction), the host link and host memory rates of the cluster profile
// (configs/clusters, each with its source).
#include "sim/cost/offload_cost.hpp"

#include <algorithm>
#include <cmath>

#include "sim/cost/dp_sharding_memory.hpp"
#include "sim/cost/time_ns.hpp"
#include "src/common/error.hpp"

namespace mplan::cost {

double optimizer_offload_fraction(const TrainingConfig& t) {
  return t.optimizer_cpu_offload ? t.optimizer_offload_fraction : 0.0;
}

OffloadedOptimizerStep offloaded_optimizer_step(const TrainingConfig& t, const ClusterSpec& c,
                                                int64_t owned_params, int64_t gpu_step_ns) {
  MPLAN_CHECK(owned_params >= 0 && gpu_step_ns >= 0, "owned ", owned_params, " step ", gpu_step_ns);
  const double f = optimizer_offload_fraction(t);
  OffloadedOptimizerStep s;
  s.gpu_ns = std::llround((1.0 - f) * static_cast<double>(gpu_step_ns));
  if (f <= 0) return s;
  const double p = f * static_cast<double>(owned_params);
  const double link_bytes_per_ns = c.host_link();  // 10^9 B/s = 1 B/ns
  const double host_bytes_per_ns = c.host_memory() / static_cast<double>(c.gpus_per_node);
  const double state = state_bytes_per_parameter(t).optimizer;
  s.d2h_ns = to_ns(4.0 * p / link_bytes_per_ns);
  s.host_ns = to_ns((2.0 * state + 4.0) * p / host_bytes_per_ns);
  s.h2d_ns = to_ns(4.0 * p / link_bytes_per_ns);
  s.overlapped = t.overlap_cpu_optimizer_d2h_h2d;
  return s;
}

double host_copy_bytes_per_ns(const ClusterSpec& c) {
  return std::min(c.host_link(), c.host_memory() / static_cast<double>(c.gpus_per_node));
}

int64_t exposed_host_copy_ns(const ClusterSpec& c, double bytes, int64_t hide_ns) {
  MPLAN_CHECK(bytes >= 0 && hide_ns >= 0, "bytes ", bytes, " hide ", hide_ns);
  return std::max<int64_t>(0, to_ns(bytes / host_copy_bytes_per_ns(c)) - hide_ns);
}

}  // namespace mplan::cost
