// fill_batch: Megatron's pretraining sampler order and the (M, s, b) layout; two data-parallel
// ranks together read exactly the samples one rank reads, so any layout sees the same batch.
#include "exec/data/token_source.hpp"

#include <gtest/gtest.h>

#include <set>

namespace mplan::exec {
namespace {

// Sample i is [10·i, 10·i + 1, ..., 10·i + 4] (seq_length 4).
class Ramp final : public TokenSource {
 public:
  int64_t size() const override { return 1000; }
  int64_t sample_tokens() const override { return 5; }
  void sample(int64_t index, std::span<int32_t> out) const override {
    for (size_t p = 0; p < out.size(); ++p) out[p] = static_cast<int32_t>(10 * index) + int32_t(p);
  }
};

TEST(FillBatch, SamplerOrderAndLayout) {
  Ramp src;
  std::vector<int32_t> in, tgt;
  // Iteration starting at sample 16, micro-batch 2, 2 micro-batches, dp 2, rank 1:
  // micro-batch 0 takes samples 16..19 and rank 1 the pair 18, 19; micro-batch 1: 22, 23.
  fill_batch(src, 16, 2, 2, 2, 1, in, tgt);
  ASSERT_EQ(in.size(), 2u * 4u * 2u);
  auto at = [](int64_t k, int64_t p, int64_t j) { return size_t((k * 4 + p) * 2 + j); };
  EXPECT_EQ(in[at(0, 0, 0)], 180);
  EXPECT_EQ(in[at(0, 3, 1)], 193);
  EXPECT_EQ(tgt[at(0, 3, 1)], 194);
  EXPECT_EQ(in[at(1, 0, 0)], 220);
  EXPECT_EQ(tgt[at(1, 2, 1)], 233);
}

TEST(FillBatch, RanksSplitOneGlobalBatch) {
  Ramp src;
  std::vector<int32_t> in, tgt;
  std::set<int32_t> one, two;
  fill_batch(src, 0, 2, 4, 1, 0, in, tgt);  // global batch 8 on one rank
  for (int32_t t : in) one.insert(t);
  for (int64_t r = 0; r < 2; ++r) {
    fill_batch(src, 0, 2, 2, 2, r, in, tgt);  // the same 8 samples on two ranks
    for (int32_t t : in) two.insert(t);
  }
  EXPECT_EQ(one, two);
  EXPECT_EQ(one.size(), 8u * 4u);
}

}  // namespace
}  // namespace mplan::exec
