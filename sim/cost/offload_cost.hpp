// Optimizer CPU offloading (Megatron-LM's --optimizer-cpu-offload: HybridDeviceOptimizer,
// megatron/core/optimizer/cpu_offloading/hybrid_optimizer.py): the optimizer state of
// --optimizer-offload-fraction f of the parameters a GPU's optimizer owns lives in host memory,
// and its Adam step runs on the host. Invariant: f = 0 (or offloading off) changes nothing.
#pragma once

#include <cstdint>

#include "src/plan/cluster_spec.hpp"
#include "src/plan/training_config.hpp"

namespace mplan::cost {

// The fraction of the optimizer state on the host: optimizer_offload_fraction when
// optimizer_cpu_offload, else 0.
double optimizer_offload_fraction(const TrainingConfig& t);

// One step of the offloaded optimizer, for `owned_params` parameters whose optimizer this GPU
// runs, and `gpu_step_ns` the step on the GPU with nothing offloaded:
//   gpu:  (1 - f) · gpu_step_ns (the GPU optimizer over the rest);
//   d2h:  f · P · 4 bytes (fp32 main gradients) over the GPU's host link;
//   host: Adam on the host over f · P parameters, memory-bound: the state read and written
//         (2 · the state's bytes per parameter) and the gradient read (4), at the node's host
//         memory bandwidth shared by its GPUs;
//   h2d:  f · P · 4 bytes (the updated fp32 parameters) back over the host link.
// The four run one after the other (no --overlap-cpu-optimizer-d2h-h2d).
struct OffloadedOptimizerStep {
  int64_t gpu_ns = 0, d2h_ns = 0, host_ns = 0, h2d_ns = 0;
  int64_t total_ns() const { return gpu_ns + d2h_ns + host_ns + h2d_ns; }
};
OffloadedOptimizerStep offloaded_optimizer_step(const TrainingConfig& t, const ClusterSpec& c,
                                                int64_t owned_params, int64_t gpu_step_ns);

}  // namespace mplan::cost
