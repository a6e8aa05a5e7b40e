// Tests of full recomputation's groups: Megatron's "uniform" and "block" methods worked out by hand
// for a chunk of 5 layers, and the partition property of "uniform" over many shapes.
#include "src/model/recompute_group.hpp"

#include <gtest/gtest.h>

#include "src/common/error.hpp"

namespace mplan {
namespace {

ParallelConfig full(RecomputeMethod method, int64_t layers) {
  ParallelConfig p;
  p.recompute = Recompute::kFull;
  p.recompute_method = method;
  p.recompute_num_layers = layers;
  return p;
}

TEST(RecomputeGroup, UniformGroupsFromTheChunksFirstLayer) {
  // 5 layers in groups of 2: [0, 1] [2, 3] [4].
  const ParallelConfig p = full(RecomputeMethod::kUniform, 2);
  const RecomputeGroup want[] = {{0, 1}, {0, 1}, {2, 3}, {2, 3}, {4, 4}};
  for (int64_t l = 0; l < 5; ++l) EXPECT_EQ(full_recompute_group(p, 5, l), want[l]) << l;
  EXPECT_EQ(full_recompute_group(p, 5, 4)->size(), 1);
  // A group larger than the chunk takes the whole chunk.
  EXPECT_EQ(full_recompute_group(full(RecomputeMethod::kUniform, 8), 3, 2), (RecomputeGroup{0, 2}));
}

TEST(RecomputeGroup, BlockCheckpointsTheFirstLayersOneByOne) {
  const ParallelConfig p = full(RecomputeMethod::kBlock, 3);
  for (int64_t l = 0; l < 3; ++l) EXPECT_EQ(full_recompute_group(p, 5, l), (RecomputeGroup{l, l}));
  EXPECT_FALSE(full_recompute_group(p, 5, 3));
  EXPECT_FALSE(full_recompute_group(p, 5, 4));
}

TEST(RecomputeGroup, OnlyFullRecomputationHasGroups) {
  ParallelConfig p = full(RecomputeMethod::kUniform, 1);
  p.recompute = Recompute::kSelective;
  EXPECT_FALSE(full_recompute_group(p, 4, 0));
  p.recompute = Recompute::kNone;
  EXPECT_FALSE(full_recompute_group(p, 4, 3));
  EXPECT_THROW(full_recompute_group(full(RecomputeMethod::kUniform, 1), 4, 4), InternalError);
}

TEST(RecomputeGroup, UniformGroupsPartitionTheChunk) {
  for (int64_t n = 1; n <= 12; ++n)
    for (int64_t g = 1; g <= 13; ++g) {
      const ParallelConfig p = full(RecomputeMethod::kUniform, g);
      int64_t next = 0;  // the first layer of the next group
      for (int64_t l = 0; l < n; ++l) {
        const RecomputeGroup r = *full_recompute_group(p, n, l);
        if (l == r.first) {
          EXPECT_EQ(r.first, next) << n << " " << g;
          EXPECT_LE(r.size(), g);
          next = r.last + 1;
        }
        EXPECT_TRUE(r.first <= l && l <= r.last);
      }
      EXPECT_EQ(next, n);
    }
}

}  // namespace
}  // namespace mplan
