// Refinement of a curve's efficiency by measured shapes: a kernel whose shape was measured takes
// the measured efficiency; one near a measured shape (within one octave in every dimension)
// moves its curve value towards the measured one by the same ratio, linearly less with the
// distance; farther away the curve alone holds. Invariant: at distance 0 the result is exactly the
// measured efficiency, at distance >= 1 exactly the curve's value.
#pragma once

#include <array>
#include <cstdint>

namespace mplan::cost {

// A shape as three positive sizes (e.g. m, n, k), compared in log2.
using ShapeKey = std::array<double, 3>;

// Chebyshev distance in log2: max over dimensions of |log2 a_i − log2 b_i|.
double shape_distance(const ShapeKey& a, const ShapeKey& b);

// The efficiency of a kernel whose curve value is `curve_here`, refined by the nearest measured
// shape at `distance` that ran at `measured` where the curve gives `curve_there`:
// curve_here · (1 + w·(measured / curve_there − 1)), w = max(0, 1 − distance).
double refined_efficiency(double curve_here, double measured, double curve_there, double distance);

}  // namespace mplan::cost
