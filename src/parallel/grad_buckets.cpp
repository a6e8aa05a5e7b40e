// Megatron-LM's bucket rule (megatron/core/distributed/param_and_grad_buffer.py,
// _ParamAndGradBuffer.__init__; distributed_data_parallel.py for the bucket size).
#include "src/parallel/grad_buckets.hpp"

#include <algorithm>
#include <numeric>

#include "src/common/error.hpp"

namespace mplan {

namespace {
int64_t round_up(int64_t v, int64_t m) { return m <= 1 ? v : (v + m - 1) / m * m; }
}  // namespace

int64_t default_grad_bucket_elems(const ParallelConfig& p) {
  return std::max<int64_t>(40000000, 1000000 * p.dp * p.cp);
}

int64_t grad_bucket_elems(const ParallelConfig& p, int64_t pp_rank, int64_t chunk) {
  if (!p.overlap_grad_reduce || pp_rank > 0 || chunk > 0) return 0;
  return default_grad_bucket_elems(p);
}

int64_t grad_bucket_pad(const ParallelConfig& p) {
  return p.distributed_optimizer ? std::lcm<int64_t>(p.dp * p.cp, 128) : 1;
}

BucketLayout layout_grad_buckets(std::span<const BucketItem> items, int64_t bucket_elems,
                                 int64_t align, int64_t pad_to) {
  BucketLayout out;
  layout_grad_buckets(items, bucket_elems, align, pad_to, out);
  return out;
}

void layout_grad_buckets(std::span<const BucketItem> items, int64_t bucket_elems, int64_t align,
                         int64_t pad_to, BucketLayout& out) {
  MPLAN_CHECK(align >= 1 && pad_to >= 1, "align ", align, " pad_to ", pad_to);
  out.item_offset.resize(items.size());
  out.buckets.clear();
  int64_t at = 0, bucket_start = 0;
  int32_t first = 0;
  auto close = [&](int32_t last, int64_t end) {
    const int64_t padded = round_up(end, pad_to);
    out.buckets.push_back({bucket_start, padded - bucket_start, first, last});
    bucket_start = padded;
    first = last + 1;
    return padded;
  };
  for (size_t i = 0; i < items.size(); ++i) {
    const BucketItem& it = items[i];
    const int32_t idx = static_cast<int32_t>(i);
    at = round_up(at, align);
    // An item that needs its own bucket first closes the bucket collecting before it.
    if (it.own_bucket && idx > first) at = round_up(close(idx - 1, at), align);
    out.item_offset[i] = at;
    const int64_t end = at + it.numel;
    if ((bucket_elems > 0 && end - bucket_start >= bucket_elems) || it.own_bucket)
      at = close(idx, end);
    else
      at = end;
  }
  if (first < static_cast<int32_t>(items.size()))
    at = close(static_cast<int32_t>(items.size()) - 1, at);
  out.total = at;
}

}  // namespace mplan
