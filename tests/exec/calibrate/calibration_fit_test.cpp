// CalibrationFit: medians, log2-binned curves, nccl-tests' bus bandwidth and the bandwidth net of
// the latency, on numbers whose answers are known in closed form.
#include "exec/calibrate/calibration_fit.hpp"

#include <gtest/gtest.h>

#include <cmath>

namespace mplan::exec::calibrate {
namespace {

TEST(CalibrationFit, Median) {
  EXPECT_DOUBLE_EQ(median({3, 1, 2}), 2);
  EXPECT_DOUBLE_EQ(median({4, 1, 3, 2}), 2.5);
  EXPECT_DOUBLE_EQ(median({}), 0);
}

TEST(CalibrationFit, BinnedMedianCurve) {
  // 1000 and 1024 share the bin 2^10; 2^20 is alone; bad samples are ignored.
  const std::vector<CurveSample> c = binned_median_curve(
      {{1048576, 0.5}, {1000, 0.1}, {1024, 0.3}, {0, 0.9}, {2048, std::nan("")}});
  ASSERT_EQ(c.size(), 2u);
  EXPECT_DOUBLE_EQ(c[0].x, 1024);
  EXPECT_DOUBLE_EQ(c[0].y, 0.2);
  EXPECT_DOUBLE_EQ(c[1].x, 1048576);
  EXPECT_DOUBLE_EQ(c[1].y, 0.5);
}

TEST(CalibrationFit, MedianByX) {
  const std::vector<CurveSample> c = median_by_x({{2e6, 0.8}, {1e6, 0.5}, {2e6, 0.6}, {2e6, 0.7}});
  ASSERT_EQ(c.size(), 2u);
  EXPECT_DOUBLE_EQ(c[0].y, 0.5);
  EXPECT_DOUBLE_EQ(c[1].y, 0.7);
}

TEST(CalibrationFit, NcclTestsBusBandwidth) {
  EXPECT_DOUBLE_EQ(bus_factor(Collective::kAllReduce, 4), 1.5);
  EXPECT_DOUBLE_EQ(bus_factor(Collective::kAllGather, 4), 0.75);
  EXPECT_DOUBLE_EQ(bus_factor(Collective::kReduceScatter, 2), 0.5);
  EXPECT_DOUBLE_EQ(bus_factor(Collective::kAllToAll, 8), 0.875);
  EXPECT_DOUBLE_EQ(bus_factor(Collective::kSendRecv, 2), 1);
  EXPECT_DOUBLE_EQ(algbw_gbps(1e9, 0.5), 2);
  EXPECT_DOUBLE_EQ(busbw_gbps(Collective::kAllReduce, 4, 1e9, 1), 1.5);
}

TEST(CalibrationFit, BandwidthNetOfLatencyGivesTheMeasuredTime) {
  // t = α + S·f/B: with S 1e9, f 1.5 (all-reduce of 4), t 10 ms and α 2 ms, B = 1.5e9/8e-3.
  const std::optional<double> b = net_bandwidth_gbps(Collective::kAllReduce, 4, 1e9, 0.01, 0.002);
  ASSERT_TRUE(b);
  EXPECT_DOUBLE_EQ(*b, 187.5);
  EXPECT_NEAR(0.002 + 1e9 * 1.5 / (*b * 1e9), 0.01, 1e-15);
  EXPECT_FALSE(net_bandwidth_gbps(Collective::kAllReduce, 4, 8, 1e-5, 1e-5));  // all latency
  EXPECT_FALSE(net_bandwidth_gbps(Collective::kAllReduce, 4, 1e6, 1e-5, 2e-5));
}

}  // namespace
}  // namespace mplan::exec::calibrate
