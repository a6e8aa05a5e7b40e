// init_rng: splitmix64 against its published first output, and the statistics of the weight
// initializer's normals and of the synthetic-token uniforms.
#include "exec/model/init_rng.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace mplan::exec {
namespace {

TEST(InitRng, Splitmix64KnownValues) {
  // The reference generator (Vigna, splitmix64.c) seeded with 0 first returns 0xe220a8397b1dcdaf.
  EXPECT_EQ(splitmix64(0), 0xe220a8397b1dcdafull);
  EXPECT_EQ(splitmix64(0x9e3779b97f4a7c15ull), 0x6e789e6aa1b965f4ull);  // its second output
}

TEST(InitRng, NormalHasZeroMeanAndUnitVariance) {
  const int n = 200000;
  double sum = 0, sq = 0, fourth = 0;
  for (int i = 0; i < n; ++i) {
    double x = init_normal(1234, 7, static_cast<uint64_t>(i));
    sum += x;
    sq += x * x;
    fourth += x * x * x * x;
  }
  double mean = sum / n, var = sq / n - mean * mean;
  EXPECT_NEAR(mean, 0.0, 0.01);       // standard error 1/sqrt(n) = 0.0022
  EXPECT_NEAR(var, 1.0, 0.015);       // standard error sqrt(2/n) = 0.0032
  EXPECT_NEAR(fourth / n, 3.0, 0.1);  // normal kurtosis
}

TEST(InitRng, CountersAreIndependentStreams) {
  EXPECT_NE(init_normal(1, 0, 0), init_normal(2, 0, 0));
  EXPECT_NE(init_normal(1, 0, 0), init_normal(1, 1, 0));
  EXPECT_NE(init_normal(1, 0, 0), init_normal(1, 0, 1));
  EXPECT_EQ(init_normal(5, 3, 9), init_normal(5, 3, 9));
}

TEST(InitRng, UniformCoversTheRangeEvenly) {
  std::vector<int> counts(10, 0);
  for (uint64_t i = 0; i < 100000; ++i) {
    uint64_t v = counter_uniform(42, 3, i, 10);
    ASSERT_LT(v, 10u);
    ++counts[v];
  }
  for (int c : counts) EXPECT_NEAR(c, 10000, 400);  // 4 standard deviations
}

}  // namespace
}  // namespace mplan::exec
