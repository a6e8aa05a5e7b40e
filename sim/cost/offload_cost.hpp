// Optimizer CPU offloading (Megatron-LM's --optimizer-cpu-offload: HybridDeviceOptimizer,
// megatron/core/optimizer/cpu_offloading/hybrid_optimizer.py): the optimizer state of
// --optimizer-offload-fraction f of the parameters a GPU's optimizer owns lives in host memory,
// and its Adam step runs on the host. Invariant: f = 0 (or offloading off) changes nothing.
#pragma once

#include <algorithm>
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
// The four run one after the other; with --overlap-cpu-optimizer-d2h-h2d (hybrid_optimizer.py:
// one host optimizer per parameter, the copies on their own streams, each parameter's host step
// after its copy arrives, its copy back after its step) the copies, the host's Adam and the GPU
// optimizer run as a pipeline over many parameters, bounded by its slowest stage:
// max(gpu, d2h, host, h2d) (the fill and drain of one parameter neglected).
struct OffloadedOptimizerStep {
  int64_t gpu_ns = 0, d2h_ns = 0, host_ns = 0, h2d_ns = 0;
  bool overlapped = false;  // --overlap-cpu-optimizer-d2h-h2d
  int64_t total_ns() const {
    if (overlapped) return std::max({gpu_ns, d2h_ns, host_ns, h2d_ns});
    return gpu_ns + d2h_ns + host_ns + h2d_ns;
  }
};
OffloadedOptimizerStep offloaded_optimizer_step(const TrainingConfig& t, const ClusterSpec& c,
                                                int64_t owned_params, int64_t gpu_step_ns);

// Activation offloading (Transformer Engine's CPU offload context under
// --cpu-offloading-num-layers; Megatron's fine-grained offloading): `bytes` of one layer copied to
// the host after its forward, and back before its backward, on copy streams beside the compute.
// A copy runs at the slower of the GPU's host link and its share of the node's host memory
// bandwidth; the time of `hide_ns` of compute beside it hides it, the rest is exposed:
// max(0, bytes / rate - hide_ns).
double host_copy_bytes_per_ns(const ClusterSpec& c);
int64_t exposed_host_copy_ns(const ClusterSpec& c, double bytes, int64_t hide_ns);

}  // namespace mplan::cost
