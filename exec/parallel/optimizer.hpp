// Optimizer: Megatron's step for f32 master weights: global gradient L2 norm over the model-
// parallel group (tensor-parallel shards summed; parameters duplicated on every TP rank counted
// on TP rank 0 only; the tied embedding once), clipping by clip_grad / (norm + 1e-6) when that is
// below 1, then AdamW (decoupled decay, no decay on biases and norm weights) and the act-dtype
// copy. Works on the flat buffers of GptModel: one Backend::adamw call per run of parameters that
// share a decay setting, one sum_squares_accumulate per run of counted parameters.
#pragma once

#include <cstdint>
#include <vector>

#include "exec/backend.hpp"
#include "exec/comm.hpp"
#include "exec/model/gpt_params.hpp"

namespace mplan::exec {

struct OptimizerConfig {
  float lr = 1e-4f;
  float beta1 = 0.9f;
  float beta2 = 0.95f;
  float eps = 1e-8f;
  float weight_decay = 0.1f;
  float clip_grad = 1.0f;  // 0: no clipping
};

class Optimizer {
 public:
  // master (f32), weights (act), grads (f32): GptModel's flat buffers. Allocates m and v.
  Optimizer(const GptParams& params, int64_t tp_rank, Tensor master, Tensor weights, Tensor grads,
            Backend& backend, const OptimizerConfig& config);
  ~Optimizer();
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // Adds this rank's share of the squared gradient norm to out (1) f32 (no comm: the caller sums
  // it over the model-parallel group).
  void grad_sum_squares(Tensor out);
  // Clip coefficient for a global gradient norm: min(1, clip_grad / (norm + 1e-6)).
  float clip_coefficient(double grad_norm) const;
  // AdamW step number `step` (>= 1) with the gradients multiplied by grad_scale.
  void step(int64_t step, float grad_scale);

  struct Run {
    int64_t offset = 0;
    int64_t numel = 0;
    bool weight_decay = false;
  };
  const std::vector<Run>& adam_runs() const { return adam_runs_; }
  const std::vector<Run>& norm_runs() const { return norm_runs_; }

 private:
  Backend& be_;
  OptimizerConfig cfg_;
  Tensor master_, weights_, grads_, m_, v_;
  std::vector<Run> adam_runs_;
  std::vector<Run> norm_runs_;
};

}  // namespace mplan::exec
