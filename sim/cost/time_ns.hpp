// Conversion of modelled times (double seconds or nanoseconds) to the engine's integer
// nanoseconds. Invariant: results are >= 0, at most kMaxOpNs, rounded to the nearest nanosecond;
// with at most sim::kMaxSimulatedPasses passes, sums of them stay far inside int64.
#pragma once

#include <cmath>
#include <cstdint>

#include "src/common/error.hpp"

namespace mplan::cost {

// 1000 s: no kernel or collective of a real plan comes near (the largest take seconds); beyond
// it the plan's sizes or the profile's rates are outside what the simulator models.
inline constexpr double kMaxOpNs = 1e12;

inline int64_t to_ns(double ns) {
  MPLAN_CHECK(!std::isnan(ns) && ns >= 0, "modelled time ", ns, " ns");
  if (ns > kMaxOpNs)
    throw Error(cat("one modelled operation takes ", ns * 1e-9, " s, more than ", kMaxOpNs * 1e-9,
                    " s: the model's sizes are too large for the cluster's rates (check the "
                    "profile's peak_bf16_tflops, efficiencies and bandwidths)"));
  return static_cast<int64_t>(std::llround(ns));
}

}  // namespace mplan::cost
