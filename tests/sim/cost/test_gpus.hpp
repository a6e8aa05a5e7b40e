// A hand-made GPU for the cost tests: round rates and efficiency curves with points at powers of
// two, so every expected time can be worked out by hand.
#pragma once

#include <cmath>

#include "src/plan/cluster_spec.hpp"

namespace mplan::cost::testing {

inline GpuSpec round_gpu() {
  GpuSpec g;
  g.name = "round";
  g.memory_gib = 80;
  g.peak_bf16_tflops = 1000;    // 1e15 FLOP/s
  g.hbm_bandwidth_gbps = 4000;  // 4e12 B/s
  g.memory_bound_efficiency = 1.0;
  // 0.2 at 2^30 FLOPs, 0.7 at 2^40, linear in log2 between: 0.2 + 0.05 · (log2(F) - 30).
  g.gemm_efficiency = {{std::ldexp(1.0, 30), 0.2}, {std::ldexp(1.0, 40), 0.7}};
  // 0.1 at 2^30, 0.6 at 2^40; backward flat 0.5.
  g.attention_efficiency = {{std::ldexp(1.0, 30), 0.1}, {std::ldexp(1.0, 40), 0.6}};
  g.attention_backward_efficiency = {{std::ldexp(1.0, 30), 0.5}};
  return g;
}

}  // namespace mplan::cost::testing
