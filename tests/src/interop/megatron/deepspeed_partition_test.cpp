// Closed-form tests of DeepSpeed's partition_uniform and partition_balanced. Every expected
// boundary list is worked out by hand from deepspeed/runtime/utils.py, the working in a comment.
#include "src/interop/megatron/deepspeed_partition.hpp"

#include <gtest/gtest.h>

namespace mplan {
namespace {

using V = std::vector<int64_t>;

TEST(MegatronDeepSpeedPartition, Uniform) {
  // 10 over 4: chunk 2, residual 2; boundary p is 2p + min(p, 2): 0 3 6 8 10.
  EXPECT_EQ(partition_uniform(10, 4), (V{0, 3, 6, 8, 10}));
  // 12 over 4: chunk 3, no residual.
  EXPECT_EQ(partition_uniform(12, 4), (V{0, 3, 6, 9, 12}));
  // No more items than parts: min(p, 3), the last parts empty.
  EXPECT_EQ(partition_uniform(3, 5), (V{0, 1, 2, 3, 3, 3}));
  // BLOOM's 77 specs over 12: chunk 6, residual 5; 6p + min(p, 5).
  EXPECT_EQ(partition_uniform(77, 12), (V{0, 7, 14, 21, 28, 35, 41, 47, 53, 59, 65, 71, 77}));
}

TEST(MegatronDeepSpeedPartition, BalancedEvenWeights) {
  // [1 1 1 1] over 2: at (4, 2) the split points k = 1, 2, 3 cost |1-3|, 0, |3-1|; k = 2.
  EXPECT_EQ(partition_balanced({1, 1, 1, 1}, 2), (V{0, 2, 4}));
}

TEST(MegatronDeepSpeedPartition, BalancedTiesGoToTheLastSplitPoint) {
  // [1 0 1] over 2: k = 1 gives [1][0 1], k = 2 gives [1 0][1], both of spread 0; DeepSpeed's
  // ">=" keeps the later one.
  EXPECT_EQ(partition_balanced({1, 0, 1}, 2), (V{0, 2, 3}));
}

TEST(MegatronDeepSpeedPartition, BalancedFollowsTheDynamicProgram) {
  // [3 1 1 1 2] over 3, prefix sums 0 3 4 5 6 8. Two parts (max, min, spread):
  //   (2,2): k=1 [3][1] -> (3,1,2).
  //   (3,2): k=1 [3][2] -> (3,2,1); k=2 [4][1] -> (4,1,3). Keeps k=1.
  //   (4,2): k=1 [3][3] -> (3,3,0); k=2 -> (4,2,2); k=3 -> (5,1,4). Keeps k=1.
  // Three parts at (5,3): k=2 from (3,1) + [4] -> spread 3; k=3 from (3,2) + [3] -> 1;
  //   k=4 from (3,3) + [2] -> 1, a tie won by the later k = 4. Back: (4,2) -> 1, (1,1) -> 0.
  EXPECT_EQ(partition_balanced({3, 1, 1, 1, 2}, 3), (V{0, 1, 4, 5}));
}

TEST(MegatronDeepSpeedPartition, BalancedWithNoMoreItemsThanPartsIsUniform) {
  EXPECT_EQ(partition_balanced({5, 5}, 3), (V{0, 1, 2, 2}));
}

TEST(MegatronDeepSpeedPartition, BalancedZeroWeightsAtTheEndsStayOnTheEndStages) {
  // [0 1 1 0] over 2: k=1 [0][1 1 0] spread 2, k=2 [0 1][1 0] spread 0, k=3 spread 2.
  EXPECT_EQ(partition_balanced({0, 1, 1, 0}, 2), (V{0, 2, 4}));
}

}  // namespace
}  // namespace mplan
