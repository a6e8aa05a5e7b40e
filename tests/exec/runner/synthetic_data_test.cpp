// SyntheticData: Megatron's sample order, so data-parallel ranks split the same global batch:
// with global batch 8 and micro-batch 2, dp 1 runs samples 0..7 as 4 micro-batches, dp 2 rank r
// runs samples {4k + 2r, 4k + 2r + 1} in micro-batch k. Targets are the inputs shifted by one.
#include "exec/runner/synthetic_data.hpp"

#include <gtest/gtest.h>

namespace mplan::exec {
namespace {

SyntheticData data(int64_t dp, int64_t rank) {
  SyntheticData d;
  d.seed = 3;
  d.vocab = 50;
  d.seq = 5;
  d.micro_batch = 2;
  d.num_microbatches = 8 / (2 * dp);
  d.dp = dp;
  d.dp_rank = rank;
  return d;
}

// Tokens of sample j of micro-batch k in a (M, s, b) buffer.
std::vector<int32_t> sample(const std::vector<int32_t>& buf, int64_t k, int64_t j) {
  std::vector<int32_t> out;
  for (int64_t p = 0; p < 5; ++p) out.push_back(buf[static_cast<size_t>((k * 5 + p) * 2 + j)]);
  return out;
}

TEST(SyntheticData, DataParallelRanksSplitTheSameGlobalBatch) {
  std::vector<int32_t> in1, tg1;
  data(1, 0).fill(1, in1, tg1);
  ASSERT_EQ(in1.size(), 4u * 5 * 2);
  for (int64_t r = 0; r < 2; ++r) {
    std::vector<int32_t> in2, tg2;
    data(2, r).fill(1, in2, tg2);
    ASSERT_EQ(in2.size(), 2u * 5 * 2);
    for (int64_t k = 0; k < 2; ++k)
      for (int64_t j = 0; j < 2; ++j) {
        // Global sample 4k + 2r + j = dp-1 micro-batch 2k + r, position j.
        EXPECT_EQ(sample(in2, k, j), sample(in1, 2 * k + r, j));
        EXPECT_EQ(sample(tg2, k, j), sample(tg1, 2 * k + r, j));
      }
  }
}

TEST(SyntheticData, TargetsAreInputsShiftedByOne) {
  SyntheticData d = data(1, 0);
  std::vector<int32_t> in, tg;
  d.fill(0, in, tg);
  // Sample 3 is micro-batch 1, position 1 (iteration 0).
  for (int64_t p = 0; p < 5; ++p) {
    EXPECT_EQ(in[static_cast<size_t>((1 * 5 + p) * 2 + 1)], d.token(3, p));
    EXPECT_EQ(tg[static_cast<size_t>((1 * 5 + p) * 2 + 1)], d.token(3, p + 1));
  }
  for (int32_t t : in) {
    EXPECT_GE(t, 0);
    EXPECT_LT(t, 50);
  }
  std::vector<int32_t> next, unused;
  d.fill(1, next, unused);  // the next iteration reads new samples
  EXPECT_NE(next, in);
}

}  // namespace
}  // namespace mplan::exec
