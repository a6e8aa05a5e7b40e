// Gradient buckets as Megatron-LM's _ParamAndGradBuffer builds them: one buffer per model chunk,
// parameters laid out in reverse order (the order their gradients become final in backward), a
// bucket closed once it holds at least bucket_size elements, the tied embedding's shared copy in
// a bucket of its own with the distributed optimizer, and bucket ends padded so that the
// data-parallel ranks get equal shards. The one owner of this rule: the executor lays out its
// gradient buffers with it and the simulator costs its reductions with it.
// Invariant: buckets cover the items in order, each item in exactly one bucket; offsets grow.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "src/parallel/parallel_config.hpp"

namespace mplan {

// Megatron's default bucket size: max(40 M, 1 M x data-parallel size) elements, where the
// data-parallel size is dp x cp (the group gradients are reduced over).
int64_t default_grad_bucket_elems(const ParallelConfig& p);

// The bucket size of model chunk `chunk` on pipeline rank `pp_rank` (distributed_data_parallel.py):
// the default on the first chunk of the first stage when gradients are reduced during the
// backward (overlap_grad_reduce); 0 — one bucket for the whole chunk — everywhere else.
int64_t grad_bucket_elems(const ParallelConfig& p, int64_t pp_rank, int64_t chunk);

// One item of a chunk's buffer (a parameter, or a group of them), in backward order.
struct BucketItem {
  int64_t numel = 0;
  bool own_bucket = false;  // the shared embedding with the distributed optimizer
};

struct BucketSpan {
  int64_t offset = 0;                     // first element in the chunk's buffer
  int64_t numel = 0;                      // elements, padding included (a multiple of pad_to)
  int32_t first_item = 0, last_item = 0;  // items [first, last], backward order
};

struct BucketLayout {
  std::vector<int64_t> item_offset;  // per item, in the chunk's buffer
  std::vector<BucketSpan> buckets;   // in backward order (the order they complete)
  int64_t total = 0;                 // elements of the chunk's buffer
};

// Lays out `items` (backward order) from offset 0: each item starts at a multiple of `align`,
// a bucket closes when (its end - its start) >= bucket_elems (> 0) or after an own_bucket item,
// and every bucket's end is padded to a multiple of `pad_to` (1: none).
BucketLayout layout_grad_buckets(std::span<const BucketItem> items, int64_t bucket_elems,
                                 int64_t align, int64_t pad_to);
// The same into `out`, whose vectors keep their capacity (no allocation on a repeated shape).
void layout_grad_buckets(std::span<const BucketItem> items, int64_t bucket_elems, int64_t align,
                         int64_t pad_to, BucketLayout& out);

// Megatron's bucket padding with the distributed optimizer: lcm(dp x cp, 128) elements, so that
// every data-parallel shard of a bucket starts 256-byte aligned; 1 without it.
int64_t grad_bucket_pad(const ParallelConfig& p);

}  // namespace mplan
