// Conversion of modelled times (double seconds or nanoseconds) to the engine's integer
// nanoseconds. Invariant: results are >= 0 and rounded to the nearest nanosecond.
#pragma once

#include <cmath>
#include <cstdint>

#include "src/common/error.hpp"

namespace mplan::cost {

inline int64_t to_ns(double ns) {
  MPLAN_CHECK(std::isfinite(ns) && ns >= 0, "modelled time ", ns, " ns");
  return static_cast<int64_t>(std::llround(ns));
}

}  // namespace mplan::cost
