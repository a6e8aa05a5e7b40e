// Shape refinement by hand: the distance is the largest octave between two shapes' sizes; a
// measured shape gives back its efficiency, half an octave away half of its ratio to the curve
// applies, one octave away none.
#include "sim/cost/shape_table.hpp"

#include <gtest/gtest.h>

#include <cmath>

namespace mplan::cost {
namespace {

TEST(ShapeTable, DistanceIsTheLargestOctaveBetweenSizes) {
  EXPECT_DOUBLE_EQ(shape_distance({8192, 2048, 2048}, {8192, 2048, 2048}), 0);
  EXPECT_DOUBLE_EQ(shape_distance({8192, 2048, 2048}, {16384, 2048, 1024}), 1);
  EXPECT_DOUBLE_EQ(shape_distance({4, 4, 4}, {4, 64, 8}), 4);
  EXPECT_NEAR(shape_distance({1000, 1, 1}, {1000 * std::sqrt(2.0), 1, 1}), 0.5, 1e-12);
}

TEST(ShapeTable, RefinementFadesOverOneOctave) {
  // The curve says 0.6 here and 0.5 at the measured shape, which ran at 0.75 (ratio 1.5).
  EXPECT_DOUBLE_EQ(refined_efficiency(0.5, 0.75, 0.5, 0), 0.75);  // the measured shape itself
  EXPECT_DOUBLE_EQ(refined_efficiency(0.6, 0.75, 0.5, 0.5), 0.6 * 1.25);
  EXPECT_DOUBLE_EQ(refined_efficiency(0.6, 0.75, 0.5, 1.0), 0.6);
  EXPECT_DOUBLE_EQ(refined_efficiency(0.6, 0.75, 0.5, 3.0), 0.6);
  // A slower measured shape pulls the curve down the same way: ratio 0.8, a quarter octave off.
  EXPECT_DOUBLE_EQ(refined_efficiency(0.5, 0.4, 0.5, 0.25), 0.5 * (1 - 0.75 * 0.2));
}

}  // namespace
}  // namespace mplan::cost
