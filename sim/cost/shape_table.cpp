// Shape refinement of efficiencies (the rule and its reason: docs/cost-model.md, "Measured
// shapes"). A kernel's efficiency is not a function of its FLOPs alone — tile and wave
// quantization, the operands' aspect and the epilogue move it — so measured shapes override the
// FLOP curve where they apply, and fade into it over one octave.
#include "sim/cost/shape_table.hpp"

#include <algorithm>
#include <cmath>

#include "src/common/error.hpp"

namespace mplan::cost {

double shape_distance(const ShapeKey& a, const ShapeKey& b) {
  double d = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    MPLAN_CHECK(a[i] > 0 && b[i] > 0, "shape sizes must be positive: ", a[i], ", ", b[i]);
    d = std::max(d, std::fabs(std::log2(a[i]) - std::log2(b[i])));
  }
  return d;
}

double refined_efficiency(double curve_here, double measured, double curve_there, double distance) {
  MPLAN_CHECK(curve_here > 0 && measured > 0 && curve_there > 0 && distance >= 0,
              "refined_efficiency(", curve_here, ", ", measured, ", ", curve_there, ", ", distance,
              ")");
  const double w = std::max(0.0, 1.0 - distance);
  if (w == 1.0) return measured;
  return curve_here * (1.0 + w * (measured / curve_there - 1.0));
}

}  // namespace mplan::cost
