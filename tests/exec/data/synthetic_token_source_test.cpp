// SyntheticTokenSource: the benchmark tokens. Token p of sample i is counter_uniform(seed, i, p,
// vocab) — pinned here by values of that function, so the synthetic data (and every loss and
// benchmark figure measured on it) stays what it was when it moved behind TokenSource — and
// fill_batch over it follows Megatron's sample order: with global batch 8 and micro-batch 2, dp 1
// runs samples 0..7 as 4 micro-batches, dp 2 rank r runs samples {4k + 2r, 4k + 2r + 1} in
// micro-batch k. Targets are the inputs shifted by one.
#include "exec/data/synthetic_token_source.hpp"

#include <gtest/gtest.h>

#include "exec/model/init_rng.hpp"

namespace mplan::exec {
namespace {

std::vector<int32_t> tokens(const TokenSource& src, int64_t i) {
  std::vector<int32_t> out(static_cast<size_t>(src.sample_tokens()));
  src.sample(i, out);
  return out;
}

TEST(SyntheticTokenSource, TheCounterBasedTokens) {
  SyntheticTokenSource src(3, 50, 5);
  EXPECT_EQ(src.sample_tokens(), 6);
  // Values of counter_uniform(3, i, p, 50), computed when the synthetic data moved here.
  EXPECT_EQ(tokens(src, 0), (std::vector<int32_t>{36, 26, 47, 38, 41, 33}));
  EXPECT_EQ(tokens(src, 1), (std::vector<int32_t>{32, 19, 49, 9, 46, 48}));
  EXPECT_EQ(tokens(src, 17), (std::vector<int32_t>{27, 36, 1, 35, 45, 34}));
  SyntheticTokenSource tiny(1234, 256, 3);  // the tiny plan's seed and vocabulary
  EXPECT_EQ(tokens(tiny, 7), (std::vector<int32_t>{113, 129, 108, 156}));
  for (int64_t i = 0; i < 40; ++i)
    for (int64_t p = 0; p < 6; ++p)
      EXPECT_EQ(tokens(src, i)[static_cast<size_t>(p)],
                static_cast<int32_t>(
                    counter_uniform(3, static_cast<uint64_t>(i), static_cast<uint64_t>(p), 50)));
}

// Tokens of sample j of micro-batch k in a (M, s, b) buffer (s = 5, b = 2).
std::vector<int32_t> sample(const std::vector<int32_t>& buf, int64_t k, int64_t j) {
  std::vector<int32_t> out;
  for (int64_t p = 0; p < 5; ++p) out.push_back(buf[static_cast<size_t>((k * 5 + p) * 2 + j)]);
  return out;
}

TEST(SyntheticTokenSource, DataParallelRanksSplitTheSameGlobalBatch) {
  SyntheticTokenSource src(3, 50, 5);
  std::vector<int32_t> in1, tg1;
  fill_batch(src, 8, 2, 4, 1, 0, in1, tg1);  // the second iteration of global batch 8
  ASSERT_EQ(in1.size(), 4u * 5 * 2);
  for (int64_t r = 0; r < 2; ++r) {
    std::vector<int32_t> in2, tg2;
    fill_batch(src, 8, 2, 2, 2, r, in2, tg2);
    ASSERT_EQ(in2.size(), 2u * 5 * 2);
    for (int64_t k = 0; k < 2; ++k)
      for (int64_t j = 0; j < 2; ++j) {
        // Global sample 8 + 4k + 2r + j = dp-1 micro-batch 2k + r, position j.
        EXPECT_EQ(sample(in2, k, j), sample(in1, 2 * k + r, j));
        EXPECT_EQ(sample(tg2, k, j), sample(tg1, 2 * k + r, j));
      }
  }
  // Sample 8 + 3 is micro-batch 1, position 1; targets are the inputs shifted by one.
  const std::vector<int32_t> s11 = tokens(src, 11);
  for (int64_t p = 0; p < 5; ++p) {
    EXPECT_EQ(in1[static_cast<size_t>((1 * 5 + p) * 2 + 1)], s11[static_cast<size_t>(p)]);
    EXPECT_EQ(tg1[static_cast<size_t>((1 * 5 + p) * 2 + 1)], s11[static_cast<size_t>(p + 1)]);
  }
  for (int32_t t : in1) {
    EXPECT_GE(t, 0);
    EXPECT_LT(t, 50);
  }
}

}  // namespace
}  // namespace mplan::exec
