// Model-state accounting. Sources: Megatron-LM docs/user-guide/features/dist_optimizer.md
// (bytes per parameter: fp16 params and grads 20 / 4 + 16/d; bf16 params, fp32 grads 18 /
// 6 + 12/d; fp32 16 / 8 + 8/d) and megatron/training/theoretical_memory_usage.py
// (num_bytes_per_parameter: 18, or 6 + 12/dp with --use-distributed-optimizer).
#include "sim/cost/model_state_memory.hpp"

#include <cmath>

#include "src/common/error.hpp"

namespace mplan::cost {

BytesPerParameter bytes_per_parameter(const TrainingConfig& t) {
  BytesPerParameter b;
  if (t.precision == Precision::kFp32) {
    b.weights = 4;
    b.grads = 4;
    b.optimizer = 8;  // Adam m and v; the parameters are the master copy
    return b;
  }
  b.weights = 2;
  b.grads = t.grads_in_fp32 ? 4 : 2;
  b.optimizer = 4 + 8 + (t.grads_in_fp32 ? 0 : 4);  // fp32 master, Adam m and v, fp32 grad copy
  return b;
}

double bytes_per_parameter(const TrainingConfig& t, bool distributed_optimizer, int64_t dp) {
  MPLAN_CHECK(dp >= 1, "dp ", dp);
  BytesPerParameter b = bytes_per_parameter(t);
  return b.weights + b.grads +
         (distributed_optimizer ? b.optimizer / static_cast<double>(dp) : b.optimizer);
}

ModelStateBytes model_state_bytes(const TrainingConfig& t, bool distributed_optimizer,
                                  int64_t params, int64_t dp, int64_t expert_params,
                                  int64_t expert_dp) {
  MPLAN_CHECK(params >= 0 && expert_params >= 0 && dp >= 1 && expert_dp >= 1, "params ", params,
              " dp ", dp, " expert params ", expert_params, " expert dp ", expert_dp);
  const BytesPerParameter b = bytes_per_parameter(t);
  const double p = static_cast<double>(params), pe = static_cast<double>(expert_params);
  ModelStateBytes m;
  m.weights = std::llround(b.weights * (p + pe));
  m.grads = std::llround(b.grads * (p + pe));
  const double opt_dense =
      distributed_optimizer ? b.optimizer / static_cast<double>(dp) : b.optimizer;
  const double opt_expert =
      distributed_optimizer ? b.optimizer / static_cast<double>(expert_dp) : b.optimizer;
  m.optimizer = std::llround(opt_dense * p + opt_expert * pe);
  return m;
}

}  // namespace mplan::cost
