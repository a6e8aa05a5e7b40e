// Optimizer: Megatron's step for f32 master weights, plain or distributed. It owns ranges of the
// rank's flat buffers — all of them, or with the distributed optimizer this data-parallel rank's
// shard of every gradient bucket (exec/parallel/grad_sync) — and keeps f32 master weights, Adam
// m and v for the owned elements only (packed one range after another). The step: global gradient
// L2 norm (tensor-parallel shards summed; parameters duplicated on every TP rank counted on TP
// rank 0 only; the tied embedding's shared copy not at all; the caller sums it over the group),
// clipping by clip_grad / (norm + 1e-6) when that is below 1, AdamW (decoupled decay, none on
// biases and norm weights) and the act-dtype copy of the owned elements.
// Invariant: one Backend::adamw call per run of owned parameters sharing a decay setting;
// alignment gaps inside a run are zero in every buffer and stay zero.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "exec/backend.hpp"
#include "exec/model/param_layout.hpp"
#include "exec/parallel/grad_sync.hpp"

namespace mplan::exec {

struct OptimizerConfig {
  float lr = 1e-4f;
  float beta1 = 0.9f;
  float beta2 = 0.95f;
  float eps = 1e-8f;
  float weight_decay = 0.1f;
  float clip_grad = 1.0f;  // 0: no clipping
};

// Writes the initial values of elements [begin, end) of parameter `spec`'s local shard.
using ParamInit =
    std::function<void(const ParamSpec& spec, int64_t begin, int64_t end, float* out)>;

class Optimizer {
 public:
  // weights (act) and grads (f32): the model's flat buffers; `owned`: sorted, disjoint ranges.
  // Allocates master, m and v over the owned elements; master from `init`.
  Optimizer(const ParamLayout& params, int64_t tp_rank, std::vector<ShardRange> owned,
            Tensor weights, Tensor grads, Backend& backend, const OptimizerConfig& config,
            const ParamInit& init);
  ~Optimizer();
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // Adds this rank's share of the squared gradient norm to out (1) f32.
  void grad_sum_squares(Tensor out);
  // Clip coefficient for a global gradient norm: min(1, clip_grad / (norm + 1e-6)).
  float clip_coefficient(double grad_norm) const;
  // AdamW step number `step` (>= 1) with the gradients multiplied by grad_scale, at the
  // configured learning rate, or at `lr` (the learning-rate schedule's value for this step).
  void step(int64_t step, float grad_scale);
  void step(int64_t step, float grad_scale, float lr);

  // A piece of the owned elements: flat buffer offset, offset in master/m/v, length.
  struct Run {
    int64_t offset = 0;
    int64_t packed = 0;
    int64_t numel = 0;
    bool weight_decay = false;
  };
  const std::vector<Run>& adam_runs() const { return adam_runs_; }
  const std::vector<Run>& norm_runs() const { return norm_runs_; }
  const std::vector<ShardRange>& owned() const { return owned_; }
  Tensor master() const { return master_; }  // (owned elements) f32, packed
  Tensor exp_avg() const { return m_; }      // Adam's m, packed like master()
  Tensor exp_avg_sq() const { return v_; }   // Adam's v, packed like master()
  int64_t owned_elems() const { return owned_elems_; }
  // The packed position of flat element `flat`, or -1 when it is not owned.
  int64_t packed_of(int64_t flat) const;

 private:
  Backend& be_;
  OptimizerConfig cfg_;
  std::vector<ShardRange> owned_;
  int64_t owned_elems_ = 0;
  Tensor weights_, grads_, master_, m_, v_;
  std::vector<Run> adam_runs_;
  std::vector<Run> norm_runs_;
};

}  // namespace mplan::exec
