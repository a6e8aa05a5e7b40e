// NumpyRandomState: the permutations numpy.random.RandomState gives (values printed by numpy
// 1.24: RandomState(1234).shuffle(arange(10)), then .shuffle(arange(7)) on the same state), and
// random_interval's 32- and 64-bit masked draws.
#include "exec/data/numpy_random.hpp"

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

namespace mplan::exec {
namespace {

TEST(NumpyRandomState, ShufflesAsNumpy) {
  NumpyRandomState rng(1234);
  std::vector<int32_t> a(10), b(7);
  std::iota(a.begin(), a.end(), 0);
  std::iota(b.begin(), b.end(), 0);
  rng.shuffle(std::span<int32_t>(a));
  rng.shuffle(std::span<int32_t>(b));
  EXPECT_EQ(a, (std::vector<int32_t>{7, 2, 9, 1, 0, 8, 4, 5, 6, 3}));
  EXPECT_EQ(b, (std::vector<int32_t>{6, 4, 0, 5, 3, 2, 1}));
}

TEST(NumpyRandomState, ShuffleOfOneOrNoneDrawsNothing) {
  NumpyRandomState a(7), b(7);
  std::vector<int64_t> one{5};
  a.shuffle(std::span<int64_t>(one));
  a.shuffle(std::span<int64_t>());
  EXPECT_EQ(one, std::vector<int64_t>{5});
  EXPECT_EQ(a.next_uint32(), b.next_uint32());
}

TEST(NumpyRandomState, IntervalMasksAndRejects) {
  // max = 5: mask 7, values above 5 are drawn again.
  NumpyRandomState rng(3), raw(3);
  for (int i = 0; i < 100; ++i) {
    uint32_t expect;
    while ((expect = raw.next_uint32() & 7u) > 5u) {
    }
    EXPECT_EQ(rng.random_interval(5), expect);
  }
  // max > 2^32 - 1: 64-bit draws of two 32-bit outputs (high first).
  const uint64_t max = (uint64_t{1} << 40) + 3;
  uint64_t expect;
  while ((expect = raw.next_uint64() & ((uint64_t{1} << 41) - 1)) > max) {
  }
  EXPECT_EQ(rng.random_interval(max), expect);
  EXPECT_EQ(rng.random_interval(0), 0u);
}

}  // namespace
}  // namespace mplan::exec
