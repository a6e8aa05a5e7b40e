// GradSync: launch bookkeeping of the data-parallel bucket reductions.
#include "exec/parallel/grad_sync.hpp"

#include "src/common/error.hpp"

namespace mplan::exec {

ShardRange bucket_shard(const GradBucket& b, int dp_rank, int dp_size) {
  MPLAN_CHECK(dp_size >= 1 && b.numel % dp_size == 0, "bucket of ", b.numel,
              " elements does not split over dp ", dp_size);
  const int64_t shard = b.numel / dp_size;
  return {b.offset + dp_rank * shard, b.offset + (dp_rank + 1) * shard};
}

GradSync::GradSync(const ParamLayout& params, Tensor grads, Backend& backend, Comm& dp,
                   bool overlap, bool distributed, Tracer* tracer)
    : params_(params),
      grads_(grads),
      be_(backend),
      dp_(dp),
      overlap_(overlap),
      distributed_(distributed),
      tracer_(tracer) {
  MPLAN_CHECK(grads.dtype == DType::kF32 && grads.numel() == params.total_elems,
              "gradient buffer must be f32 of ", params.total_elems, " elements");
  bucket_of_param_.assign(params.specs.size(), -1);
  for (size_t b = 0; b < params.buckets.size(); ++b)
    for (int p : params.buckets[b].params)
      bucket_of_param_[static_cast<size_t>(p)] = static_cast<int>(b);
  for (size_t p = 0; p < bucket_of_param_.size(); ++p)
    MPLAN_CHECK(bucket_of_param_[p] >= 0, "parameter ", p, " is in no bucket");
  pending_.assign(params.buckets.size(), 0);
  done_.assign(params.buckets.size(), false);
  gathered_.assign(params.buckets.size(), Event{});
  gather_pending_.assign(params.buckets.size(), false);
}

void GradSync::begin_step() {
  final_.assign(params_.specs.size(), false);
  for (size_t b = 0; b < params_.buckets.size(); ++b) {
    pending_[b] = static_cast<int>(params_.buckets[b].params.size());
    done_[b] = false;
  }
}

void GradSync::reduce(size_t b, Stream s) {
  const GradBucket& bucket = params_.buckets[b];
  done_[b] = true;
  if (dp_.size() == 1) return;
  Tensor all = grads_.flat_slice(bucket.offset, bucket.numel);
  TraceSpan span;
  span.name = "grad_reduce";
  span.kind = s == Stream::kComm ? SpanKind::kDpComm : SpanKind::kDpExposed;
  span.stream = s == Stream::kComm ? TraceStream::kDp : TraceStream::kCompute;
  span.chunk = bucket.chunk;
  span.bytes = static_cast<int64_t>(all.bytes());
  if (tracer_) span.begin = tracer_->mark(s);
  if (distributed_) {
    const ShardRange r = bucket_shard(bucket, dp_.rank(), dp_.size());
    dp_.reduce_scatter(all, grads_.flat_slice(r.begin, r.end - r.begin), s);
  } else {
    dp_.all_reduce(all, ReduceOp::kSum, s);
  }
  if (tracer_) {
    span.end = tracer_->mark(s);
    tracer_->add(std::move(span));
  }
  launched_any_ = launched_any_ || s == Stream::kComm;
  ++launched_total_;
}

void GradSync::mark_final(int param) {
  const int b = bucket_of_param_.at(static_cast<size_t>(param));
  MPLAN_CHECK(final_.size() == params_.specs.size() && !final_[static_cast<size_t>(param)],
              "parameter ", param, " marked final twice (or before begin_step)");
  final_[static_cast<size_t>(param)] = true;
  int& left = pending_[static_cast<size_t>(b)];
  if (--left > 0 || !overlap_) return;
  be_.wait(Stream::kComm, be_.record(Stream::kCompute));
  reduce(static_cast<size_t>(b), Stream::kComm);
}

void GradSync::finish() {
  for (size_t b = 0; b < pending_.size(); ++b)
    MPLAN_CHECK(pending_[b] == 0, "bucket ", b, " has ", pending_[b], " parameters not final");
  for (size_t b = 0; b < done_.size(); ++b)
    if (!done_[b]) reduce(b, Stream::kCompute);
  if (!launched_any_) return;
  TraceSpan span;
  span.name = "dp_wait";
  span.kind = SpanKind::kDpExposed;
  if (tracer_) span.begin = tracer_->mark(Stream::kCompute);
  be_.wait(Stream::kCompute, be_.record(Stream::kComm));
  if (tracer_) {
    span.end = tracer_->mark(Stream::kCompute);
    tracer_->add(std::move(span));
  }
  launched_any_ = false;
}

}  // namespace mplan::exec

namespace mplan::exec {

void GradSync::gather_params(Tensor weights, bool overlap) {
  MPLAN_CHECK(distributed_, "parameter gathers belong to the distributed optimizer");
  if (dp_.size() == 1) return;
  const Stream s = overlap ? Stream::kComm : Stream::kCompute;
  if (overlap) be_.wait(Stream::kComm, be_.record(Stream::kCompute));  // after the update
  // Forward order: chunk 0 first; in a chunk the last bucket (its first layers) first.
  for (const ChunkParams& c : params_.chunks) {
    for (int b = c.bucket_end - 1; b >= c.bucket_begin; --b) {
      const GradBucket& bucket = params_.buckets[static_cast<size_t>(b)];
      const ShardRange r = bucket_shard(bucket, dp_.rank(), dp_.size());
      Tensor all = weights.flat_slice(bucket.offset, bucket.numel);
      TraceSpan span;
      span.name = "param_gather";
      span.kind = overlap ? SpanKind::kDpComm : SpanKind::kDpExposed;
      span.stream = overlap ? TraceStream::kDp : TraceStream::kCompute;
      span.chunk = bucket.chunk;
      span.bytes = static_cast<int64_t>(all.bytes());
      if (tracer_) span.begin = tracer_->mark(s);
      dp_.all_gather(weights.flat_slice(r.begin, r.end - r.begin), all, s);
      if (tracer_) {
        span.end = tracer_->mark(s);
        tracer_->add(std::move(span));
      }
      if (overlap) {
        gathered_[static_cast<size_t>(b)] = be_.record(Stream::kComm);
        gather_pending_[static_cast<size_t>(b)] = true;
      }
    }
  }
}

void GradSync::wait_param(int param) {
  const size_t b = static_cast<size_t>(bucket_of_param_.at(static_cast<size_t>(param)));
  if (!gather_pending_[b]) return;
  gather_pending_[b] = false;
  TraceSpan span;
  span.name = "param_wait";
  span.kind = SpanKind::kDpExposed;
  span.chunk = params_.buckets[b].chunk;
  if (tracer_) span.begin = tracer_->mark(Stream::kCompute);
  be_.wait(Stream::kCompute, gathered_[b]);
  if (tracer_) {
    span.end = tracer_->mark(Stream::kCompute);
    tracer_->add(std::move(span));
  }
}

}  // namespace mplan::exec
