// GradSync: data-parallel gradient reduction as Megatron's DDP does it. The buckets come from the
// rank's ParamLayout (src/parallel/grad_buckets: reverse parameter order per model chunk). With
// overlap_grad_reduce, each bucket is reduced on Stream::kComm as soon as the last pass of the
// step that touches its parameters has made all of them final, overlapping the rest of the
// backward; without it, every bucket is reduced in line by finish(). All-reduce for the plain
// optimizer; reduce-scatter into this rank's shard of the bucket for the distributed optimizer
// (Megatron's in-place reduce_scatter_tensor on the bucket's grad_data).
// Invariant: every member of the dp group launches the same buckets in the same order.
// Averaging (Megatron: scale by 1/dp, then sum) is folded into the loss-gradient scale.
#pragma once

#include <cstdint>
#include <vector>

#include "exec/backend.hpp"
#include "exec/comm.hpp"
#include "exec/model/param_layout.hpp"
#include "exec/tracer.hpp"

namespace mplan::exec {

// This rank's shard of a bucket with the distributed optimizer: elements
// [offset + r·numel/dp, offset + (r+1)·numel/dp) of the flat buffers.
struct ShardRange {
  int64_t begin = 0, end = 0;
};
ShardRange bucket_shard(const GradBucket& b, int dp_rank, int dp_size);

class GradSync {
 public:
  GradSync(const ParamLayout& params, Tensor grads, Backend& backend, Comm& dp, bool overlap,
           bool distributed, Tracer* tracer);

  // Starts a step: no parameter is final yet.
  void begin_step();
  // The gradient of parameter `param` will not change any more in this step.
  void mark_final(int param);
  // Reduces what overlap did not (every bucket without overlap), then makes the compute stream
  // wait for every reduction (call after the last pass of the step).
  void finish();

  // Distributed optimizer, after the step: every bucket's act-dtype parameters all-gathered from
  // their owners (each rank updated its shard), in the order the forward needs them. With
  // `overlap` on the comm stream — each layer's forward then waits for its buckets (wait_param),
  // Megatron's overlap_param_gather — else in line on the compute stream.
  void gather_params(Tensor weights, bool overlap);
  // The compute stream waits for the gather of `param`'s bucket (once per gather).
  void wait_param(int param);

  const std::vector<GradBucket>& buckets() const { return params_.buckets; }
  bool distributed() const { return distributed_; }
  int64_t reductions_launched() const { return launched_total_; }

 private:
  void reduce(size_t bucket, Stream s);

  const ParamLayout& params_;
  Tensor grads_;
  Backend& be_;
  Comm& dp_;
  bool overlap_, distributed_;
  Tracer* tracer_;
  std::vector<int> bucket_of_param_;
  std::vector<int> pending_;          // per bucket: params not final yet
  std::vector<bool> final_;           // per parameter: marked final this step
  std::vector<bool> done_;            // per bucket: reduced this step
  std::vector<Event> gathered_;       // per bucket: end of its parameter gather
  std::vector<bool> gather_pending_;  // per bucket: the compute stream has not waited for it
  bool launched_any_ = false;
  int64_t launched_total_ = 0;
};

}  // namespace mplan::exec
