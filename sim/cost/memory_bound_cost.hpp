// Time of a memory-bound op (norms, elementwise, softmax, optimizer update, casts): the bytes it
// reads and writes over the HBM bandwidth times the achieved fraction in the hardware profile.
// Invariant: linear in bytes; zero bytes take zero time.
#pragma once

#include <cstdint>

#include "src/plan/cluster_spec.hpp"

namespace mplan::cost {

// bytes / (hbm_bandwidth_gbps · 1e9 · memory_bound_efficiency), in seconds.
double memory_bound_seconds(const GpuSpec& gpu, double bytes);
int64_t memory_bound_time_ns(const GpuSpec& gpu, double bytes);

}  // namespace mplan::cost
