// SyntheticTokenSource: fill_batch over it equals SyntheticData::fill for every rank of a layout,
// so the synthetic data path can move behind the TokenSource interface unchanged.
#include "exec/data/synthetic_token_source.hpp"

#include <gtest/gtest.h>

#include "exec/runner/synthetic_data.hpp"

namespace mplan::exec {
namespace {

TEST(SyntheticTokenSource, EqualsSyntheticData) {
  SyntheticTokenSource src(3, 50, 5);
  EXPECT_EQ(src.sample_tokens(), 6);
  for (int64_t dp : {1, 2}) {
    for (int64_t rank = 0; rank < dp; ++rank) {
      SyntheticData d;
      d.seed = 3;
      d.vocab = 50;
      d.seq = 5;
      d.micro_batch = 2;
      d.num_microbatches = 8 / (2 * dp);
      d.dp = dp;
      d.dp_rank = rank;
      std::vector<int32_t> in_a, tgt_a, in_b, tgt_b;
      d.fill(3, in_a, tgt_a);
      fill_batch(src, 3 * 8, 2, d.num_microbatches, dp, rank, in_b, tgt_b);
      EXPECT_EQ(in_a, in_b);
      EXPECT_EQ(tgt_a, tgt_b);
    }
  }
}

}  // namespace
}  // namespace mplan::exec
