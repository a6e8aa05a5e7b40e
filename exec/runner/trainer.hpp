// Trainer: one rank's training loop for a plan with pp = 1: GptModel + DpGradSync + Optimizer over
// synthetic data. An iteration runs the plan's micro-batches (global / (micro · dp)), accumulating
// gradients; the last micro-batch's backward reduces them over DP on the comm stream. The host
// waits once per iteration, to read the loss and the gradient norm together (clipping needs it).
// Loss scaling is Megatron's: mean over the tokens of a micro-batch, / micro-batches, / dp.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "exec/backend.hpp"
#include "exec/comm.hpp"
#include "exec/model/gpt_model.hpp"
#include "exec/parallel/optimizer.hpp"
#include "exec/runner/synthetic_data.hpp"
#include "src/plan/plan.hpp"

namespace mplan::exec {

// Throws mplan::Error (naming the field) when the executor cannot run `plan`: pp > 1 ("pipeline
// execution is not supported yet (pp = N)"), cp, ep, vpp, recompute, the distributed optimizer,
// fp16, or a model that is not a GPT of the reference kind.
void check_executable(const Plan& plan);

// The activation dtype of a plan's precision (bf16 -> bf16, fp32 -> f32).
DType act_dtype_of(const Plan& plan);

struct TrainerOptions {
  DType act = DType::kBF16;
  uint64_t seed = 1234;      // weights and data
  int64_t bucket_elems = 0;  // data-parallel bucket size in parameters; 0: Megatron's default
};

struct StepResult {
  double loss = 0;       // mean per-token loss of the global batch
  double grad_norm = 0;  // global L2 norm of the gradient, before clipping
  float clip_coefficient = 1;
};

class Trainer {
 public:
  // `world` must hold groups "tp" and "dp" of this rank (sizes as the plan says).
  Trainer(const Plan& plan, Backend& backend, CommWorld& world, const TrainerOptions& options);
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  // One iteration. Without `apply_update` the gradients are computed (and reduced) but the
  // weights stay as they were: what tests compare across layouts.
  StepResult step(bool apply_update = true);

  int64_t iterations_done() const { return iteration_; }
  int64_t num_microbatches() const { return num_micro_; }
  GptModel& model() { return *model_; }
  Optimizer& optimizer() { return *optimizer_; }
  const SyntheticData& data() const { return data_; }

 private:
  Backend& be_;
  Comm& tp_;
  Comm& dp_;
  int64_t num_micro_ = 1;
  int64_t iteration_ = 0;  // iterations started (data index)
  int64_t updates_ = 0;    // optimizer steps taken
  SyntheticData data_;
  std::unique_ptr<GptModel> model_;
  std::unique_ptr<Optimizer> optimizer_;
  Tensor inputs_, targets_;  // (M, s, b) i32: one iteration's micro-batches
  Tensor scalars_;           // (2) f32: [0] sum of token losses, [1] sum of squared grads
  std::vector<int32_t> host_inputs_, host_targets_;
};

}  // namespace mplan::exec
