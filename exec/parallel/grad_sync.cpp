// DpGradSync: bucket layout (Megatron's _ParamAndGradBuffer order) and launch bookkeeping.
#include "exec/parallel/grad_sync.hpp"

#include <algorithm>

#include "src/common/error.hpp"

namespace mplan::exec {

int64_t default_bucket_elems(int64_t dp) { return std::max<int64_t>(40000000, 1000000 * dp); }

std::vector<GradBucket> make_grad_buckets(const GptParams& params, int64_t bucket_elems) {
  std::vector<GradBucket> out;
  const auto& specs = params.specs;
  int64_t end = params.total_elems;  // the open bucket is [.., end)
  GradBucket cur;
  for (int i = static_cast<int>(specs.size()) - 1; i >= 0; --i) {
    const ParamSpec& s = specs[static_cast<size_t>(i)];
    cur.params.push_back(i);
    if (bucket_elems > 0 && end - s.offset >= bucket_elems) {
      cur.offset = s.offset;
      cur.numel = end - s.offset;
      out.push_back(std::move(cur));
      cur = GradBucket{};
      end = s.offset;
    }
  }
  if (!cur.params.empty()) {
    cur.offset = 0;
    cur.numel = end;
    out.push_back(std::move(cur));
  }
  return out;
}

DpGradSync::DpGradSync(const GptParams& params, Tensor grads, Backend& backend, Comm& dp,
                       int64_t bucket_elems)
    : grads_(grads), backend_(backend), dp_(dp), buckets_(make_grad_buckets(params, bucket_elems)) {
  MPLAN_CHECK(grads.dtype == DType::kF32 && grads.numel() == params.total_elems,
              "gradient buffer must be f32 of ", params.total_elems, " elements");
  bucket_of_param_.assign(params.specs.size(), -1);
  for (size_t b = 0; b < buckets_.size(); ++b)
    for (int p : buckets_[b].params) bucket_of_param_[static_cast<size_t>(p)] = static_cast<int>(b);
  pending_.assign(buckets_.size(), 0);
}

void DpGradSync::begin_backward(bool reduce) {
  reduce_ = reduce && dp_.size() > 1;
  for (size_t b = 0; b < buckets_.size(); ++b)
    pending_[b] = static_cast<int>(buckets_[b].params.size());
}

void DpGradSync::mark_final(int param) {
  int b = bucket_of_param_.at(static_cast<size_t>(param));
  int& left = pending_[static_cast<size_t>(b)];
  MPLAN_CHECK(left > 0, "parameter ", param, " marked final twice");
  if (--left > 0 || !reduce_) return;
  const GradBucket& bucket = buckets_[static_cast<size_t>(b)];
  backend_.wait(Stream::kComm, backend_.record(Stream::kCompute));
  dp_.all_reduce(grads_.flat_slice(bucket.offset, bucket.numel), ReduceOp::kSum, Stream::kComm);
  launched_any_ = true;
  ++launched_total_;
}

void DpGradSync::finish() {
  for (size_t b = 0; b < buckets_.size(); ++b)
    MPLAN_CHECK(pending_[b] == 0, "bucket ", b, " has ", pending_[b], " parameters not final");
  if (launched_any_) backend_.wait(Stream::kCompute, backend_.record(Stream::kComm));
  launched_any_ = false;
}

}  // namespace mplan::exec
