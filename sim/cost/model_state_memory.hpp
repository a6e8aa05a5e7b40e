// Memory of the model state per GPU: parameters, gradients and optimizer state (Adam), with
// Megatron-LM's accounting: bf16 parameters with fp32 main gradients take 18 bytes per parameter,
// or 6 + 12/d with the distributed optimizer (d = data-parallel size), the optimizer state
// (fp32 master weights, Adam m and v) being what the distributed optimizer shards.
// Invariant: weights + grads + optimizer == parameters × bytes_per_parameter(...).
#pragma once

#include <cstdint>

#include "src/plan/training_config.hpp"

namespace mplan::cost {

struct ModelStateBytes {
  int64_t weights = 0;
  int64_t grads = 0;
  int64_t optimizer = 0;
  int64_t total() const { return weights + grads + optimizer; }
};

// Per parameter: {weights, grads, optimizer-state} bytes before any sharding, for a precision.
// bf16/fp16 parameters: 2 (weights) + 4 or 2 (main grads in fp32, or in the parameter type) +
// 4 master + 8 Adam (+ 4 for an fp32 copy of 16-bit grads); fp32: 4 + 4 + 8.
struct BytesPerParameter {
  double weights = 0;
  double grads = 0;
  double optimizer = 0;
  double total() const { return weights + grads + optimizer; }
};
BytesPerParameter bytes_per_parameter(const TrainingConfig& t);

// Bytes per parameter on a GPU with the optimizer state sharded over `dp` ranks when
// `distributed_optimizer` (Megatron: 18, or 6 + 12/dp, for bf16 with fp32 grads).
double bytes_per_parameter(const TrainingConfig& t, bool distributed_optimizer, int64_t dp);

// Model state of a GPU that holds `params` parameters replicated over `dp` data-parallel ranks
// and `expert_params` expert parameters replicated over `expert_dp` ranks.
ModelStateBytes model_state_bytes(const TrainingConfig& t, bool distributed_optimizer,
                                  int64_t params, int64_t dp, int64_t expert_params = 0,
                                  int64_t expert_dp = 1);

}  // namespace mplan::cost
