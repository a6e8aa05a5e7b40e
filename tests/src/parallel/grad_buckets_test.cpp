// Gradient buckets: Megatron's bucket size (40 M or 1 M per data-parallel rank, first chunk of
// the first stage only, with overlap), and the layout rule worked out by hand: aligned starts,
// buckets closing at the threshold, the shared embedding alone, ends padded.
#include "src/parallel/grad_buckets.hpp"

#include <gtest/gtest.h>

namespace mplan {
namespace {

TEST(GradBuckets, MegatronsBucketSize) {
  ParallelConfig p;
  p.dp = 4;
  EXPECT_EQ(default_grad_bucket_elems(p), 40000000);
  p.dp = 32;
  p.cp = 2;
  EXPECT_EQ(default_grad_bucket_elems(p), 64000000);
  p.pp = 2;
  p.vpp = 2;
  EXPECT_EQ(grad_bucket_elems(p, 0, 0), 64000000);
  EXPECT_EQ(grad_bucket_elems(p, 1, 0), 0);  // later stages: one bucket
  EXPECT_EQ(grad_bucket_elems(p, 0, 1), 0);  // later chunks: one bucket
  p.overlap_grad_reduce = false;
  EXPECT_EQ(grad_bucket_elems(p, 0, 0), 0);
  EXPECT_EQ(grad_bucket_pad(p), 1);
  p.distributed_optimizer = true;
  p.dp = 3;
  p.cp = 1;
  EXPECT_EQ(grad_bucket_pad(p), 384);
}

TEST(GradBuckets, LayoutByHand) {
  // Items (backward order) of 100, 30, 50, 200, 10 elements, starts aligned to 8, buckets of
  // >= 120: 100 @0; 30 @104 ends 134 -> close [0, 134) padded to 16: 144; 50 @144, 200 @200
  // ends 400 (256 >= 120) -> [144, 400); 10 @400 -> last [400, 416) (410 padded).
  const std::vector<BucketItem> items{{100}, {30}, {50}, {200}, {10}};
  const BucketLayout l = layout_grad_buckets(items, 120, 8, 16);
  EXPECT_EQ(l.item_offset, (std::vector<int64_t>{0, 104, 144, 200, 400}));
  ASSERT_EQ(l.buckets.size(), 3u);
  EXPECT_EQ(l.buckets[0].offset, 0);
  EXPECT_EQ(l.buckets[0].numel, 144);
  EXPECT_EQ(l.buckets[0].last_item, 1);
  EXPECT_EQ(l.buckets[1].offset, 144);
  EXPECT_EQ(l.buckets[1].numel, 256);
  EXPECT_EQ(l.buckets[1].first_item, 2);
  EXPECT_EQ(l.buckets[2].offset, 400);
  EXPECT_EQ(l.buckets[2].numel, 16);
  EXPECT_EQ(l.total, 416);
  // No threshold: one bucket.
  EXPECT_EQ(layout_grad_buckets(items, 0, 1, 1).buckets.size(), 1u);
}

TEST(GradBuckets, TheSharedEmbeddingGetsABucketOfItsOwn) {
  // 10, then the embedding 40 (own), then 5, 5: [10] [40] [5, 5].
  const std::vector<BucketItem> items{{10}, {40, true}, {5}, {5}};
  const BucketLayout l = layout_grad_buckets(items, 0, 1, 4);
  ASSERT_EQ(l.buckets.size(), 3u);
  EXPECT_EQ(l.buckets[0].last_item, 0);
  EXPECT_EQ(l.buckets[0].numel, 12);
  EXPECT_EQ(l.buckets[1].first_item, 1);
  EXPECT_EQ(l.buckets[1].last_item, 1);
  EXPECT_EQ(l.buckets[1].offset, 12);
  EXPECT_EQ(l.buckets[1].numel, 40);
  EXPECT_EQ(l.buckets[2].offset, 52);
  EXPECT_EQ(l.buckets[2].numel, 12);
}

}  // namespace
}  // namespace mplan
