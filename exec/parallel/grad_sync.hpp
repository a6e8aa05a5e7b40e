// DpGradSync: data-parallel gradient reduction as Megatron's DDP does it with
// --overlap-grad-reduce: the f32 gradient buffer (one contiguous buffer) is cut into buckets
// walking the parameters in reverse order (a bucket closes once it holds >= bucket_elems), and
// in the last micro-batch of a step each bucket is all-reduced on Stream::kComm as soon as the
// backward pass has made all of its gradients final, overlapping the rest of the backward.
// Invariant: every member of the dp group launches the same buckets in the same order.
// Averaging (Megatron: scale by 1/dp, then sum) is folded into the loss-gradient scale.
#pragma once

#include <cstdint>
#include <vector>

#include "exec/backend.hpp"
#include "exec/comm.hpp"
#include "exec/model/gpt_params.hpp"

namespace mplan::exec {

struct GradBucket {
  int64_t offset = 0;  // elements of the flat gradient buffer [offset, offset + numel)
  int64_t numel = 0;
  std::vector<int> params;  // indices into GptParams::specs, in reverse order
};

// Megatron's default bucket size: max(40 M, 1 M · dp) parameters.
int64_t default_bucket_elems(int64_t dp);

// The buckets of `params` (reverse order, closed at >= bucket_elems; <= 0: one bucket).
std::vector<GradBucket> make_grad_buckets(const GptParams& params, int64_t bucket_elems);

class DpGradSync {
 public:
  DpGradSync(const GptParams& params, Tensor grads, Backend& backend, Comm& dp,
             int64_t bucket_elems);

  // Starts a backward pass; with `reduce` its buckets are reduced as they become final.
  void begin_backward(bool reduce);
  // The gradient of parameter `param` will not change any more in this backward pass.
  void mark_final(int param);
  // The compute stream waits for every reduction launched (call after the last backward).
  void finish();

  const std::vector<GradBucket>& buckets() const { return buckets_; }
  int64_t reductions_launched() const { return launched_total_; }

 private:
  Tensor grads_;
  Backend& backend_;
  Comm& dp_;
  std::vector<GradBucket> buckets_;
  std::vector<int> bucket_of_param_;
  std::vector<int> pending_;  // per bucket: params not final yet
  bool reduce_ = false;
  bool launched_any_ = false;
  int64_t launched_total_ = 0;
};

}  // namespace mplan::exec
