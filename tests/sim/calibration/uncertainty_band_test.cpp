// Tests of the uncertainty band: quantiles as numpy computes them, the band's range from the
// residuals (min-max below ten runs, 10th-90th percentile from there), in-sample marked, and no
// band without residuals.
#include "sim/calibration/uncertainty_band.hpp"

#include <gtest/gtest.h>

namespace mplan::sim {
namespace {

TEST(UncertaintyBand, QuantilesInterpolateBetweenOrderStatistics) {
  // numpy.quantile([1, 2, 3, 4], 0.1) = 1.3; 0.5 -> 2.5; 1 -> 4.
  EXPECT_DOUBLE_EQ(quantile({4, 1, 3, 2}, 0.1), 1.3);
  EXPECT_DOUBLE_EQ(quantile({4, 1, 3, 2}, 0.5), 2.5);
  EXPECT_DOUBLE_EQ(quantile({4, 1, 3, 2}, 1), 4);
  EXPECT_DOUBLE_EQ(quantile({4, 1, 3, 2}, 0), 1);
  EXPECT_DOUBLE_EQ(quantile({7}, 0.9), 7);
}

ClusterSpec with_validation(std::vector<double> time_errors, bool in_sample) {
  ClusterSpec c;
  c.name = "c";
  Validation v;
  v.source = "reports/x.md";
  v.in_sample = in_sample;
  v.time_errors = std::move(time_errors);
  c.validation[static_cast<size_t>(Implementation::kMplan)] = v;
  return c;
}

TEST(UncertaintyBand, FewRunsSpanMinToMax) {
  // Predictions 10 % too fast and 5 % too slow: the measured value of a 1.0 s prediction lies
  // in [1 / 1.05, 1 / 0.9].
  const ClusterSpec c = with_validation({-0.1, 0.0, 0.05}, false);
  const UncertaintyBand b = prediction_band(c, Implementation::kMplan, false);
  ASSERT_TRUE(b.available);
  EXPECT_EQ(b.runs, 3u);
  EXPECT_FALSE(b.in_sample);
  EXPECT_DOUBLE_EQ(b.low(1.0), 1 / 1.05);
  EXPECT_DOUBLE_EQ(b.high(1.0), 1 / 0.9);
  EXPECT_EQ(b.basis(), "out-of-sample, 3 runs, min-max");
}

TEST(UncertaintyBand, TenRunsOrMoreUseTheTenthAndNinetiethPercentile) {
  // Residuals -0.09 ... 0.09 in steps of 0.02: the 10th percentile is -0.072, the 90th 0.072.
  std::vector<double> e;
  for (int i = 0; i < 10; ++i) e.push_back(-0.09 + 0.02 * i);
  const UncertaintyBand b =
      prediction_band(with_validation(e, true), Implementation::kMplan, false);
  ASSERT_TRUE(b.available);
  EXPECT_NEAR(b.error_low, -0.072, 1e-12);
  EXPECT_NEAR(b.error_high, 0.072, 1e-12);
  EXPECT_EQ(b.basis(), "in-sample, 10 runs, 10th-90th percentile");
  const Json j = band_to_json(b, 2.0);
  EXPECT_EQ(j["in_sample"], true);
  EXPECT_NEAR(j["range"][0].get<double>(), 2.0 / 1.072, 1e-12);
  EXPECT_NEAR(j["range"][1].get<double>(), 2.0 / 0.928, 1e-12);
}

TEST(UncertaintyBand, NoResidualsNoBand) {
  const ClusterSpec c = with_validation({-0.1}, false);
  const UncertaintyBand other = prediction_band(c, Implementation::kMegatronTe, false);
  EXPECT_FALSE(other.available);
  EXPECT_EQ(other.why_none, "the profile 'c' has no validation runs for megatron-te");
  const UncertaintyBand mem = prediction_band(c, Implementation::kMplan, true);
  EXPECT_FALSE(mem.available);
  EXPECT_EQ(mem.why_none, "the profile 'c' has no memory residuals for mplan");
  EXPECT_EQ(band_to_json(mem, 1.0)["available"], false);
}

TEST(UncertaintyBand, TheA100ProfileCarriesItsFitAsInSample) {
  const ClusterSpec c = load_cluster("dgx-a100-80g");
  const UncertaintyBand b = prediction_band(c, Implementation::kMegatronTe, false);
  ASSERT_TRUE(b.available);
  EXPECT_TRUE(b.in_sample);
  EXPECT_EQ(b.runs, 18u);
  EXPECT_LT(b.low(1.0), 1.0);
  EXPECT_GT(b.high(1.0), 1.0);
}

}  // namespace
}  // namespace mplan::sim
