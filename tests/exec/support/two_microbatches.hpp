// One step's passes over two micro-batches on one stage (one chunk): F0 F1 B0 B1, and W0 W1 when
// the backward is split; shared by the CPU and GPU StageModel tests.
#pragma once

#include <cmath>
#include <cstdint>

#include "exec/model/stage_model.hpp"
#include "exec/parallel/grad_sync.hpp"

namespace mplan::exec::testing {

// tok (2, s, b) i32: micro-batch k's inputs, the other one's its targets; the losses summed into
// `loss` (zeroed first); `split`: the model's StageSpec::split_backward. With `stale`, the step
// starts with begin_grads() and every parameter's gradient filled with NaN (begin_grads fills
// nothing: each gradient's first write must overwrite it; the gaps between parameters stay zero, as
// ParamLayout says).
inline void two_microbatch_step(StageModel& model, Backend& be, GradSync& sync, Tensor tok,
                                Tensor loss, float grad_scale, bool split, bool stale) {
  const int64_t T = model.dims().tokens();
  auto mb = [&](int64_t k) { return tok.flat_slice(k * T, T); };
  if (stale) {
    model.begin_grads();
    for (size_t i = 0; i < model.params().specs.size(); ++i)
      be.fill(model.grad(static_cast<int>(i)), std::nanf(""));
  }
  be.fill(loss, 0.0f);
  sync.begin_step();
  for (int64_t k : {0, 1}) model.forward(0, k, mb(k), mb(1 - k), grad_scale, loss, nullptr);
  for (int64_t k : {0, 1}) model.backward(0, k, mb(k), split || k == 0 ? nullptr : &sync);
  if (split)
    for (int64_t k : {0, 1}) model.weight_grad(0, k, mb(k), k == 0 ? nullptr : &sync);
  model.settle_grads();
  sync.finish();
}

}  // namespace mplan::exec::testing
