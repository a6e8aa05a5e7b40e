// OptimizerPrecision: Megatron-LM's precision-aware optimizer (--use-precision-aware-optimizer
// with --main-params-dtype, --exp-avg-dtype, --exp-avg-sq-dtype): the dtypes Transformer Engine's
// FusedAdam keeps the master weights and the two Adam moments in. Invariant: without the
// precision-aware optimizer every dtype is fp32 (validate() states Megatron's rule).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "src/common/json_reader.hpp"

namespace mplan {

enum class OptimStateDtype { kFp32, kFp16, kBf16, kFp8 };
const char* to_string(OptimStateDtype d);
int64_t bytes_of(OptimStateDtype d);  // 4, 2, 2, 1

struct OptimizerPrecision {
  bool use_precision_aware_optimizer = false;
  OptimStateDtype main_params_dtype = OptimStateDtype::kFp32;  // fp32 or fp16
  OptimStateDtype exp_avg_dtype = OptimStateDtype::kFp32;      // Adam m
  OptimStateDtype exp_avg_sq_dtype = OptimStateDtype::kFp32;   // Adam v
  bool operator==(const OptimizerPrecision&) const = default;
};

// Reads the four fields from the "training" object `o` (use_precision_aware_optimizer,
// main_params_dtype, exp_avg_dtype, exp_avg_sq_dtype); writes those that differ from the defaults.
OptimizerPrecision optimizer_precision_from_json(const JsonObject& o);
void optimizer_precision_to_json(const OptimizerPrecision& p, Json& j);

// Megatron's rule (OptimizerConfig.__post_init__): a dtype other than fp32 needs the
// precision-aware optimizer. The offending field and the message, or nothing.
std::optional<std::pair<std::string, std::string>> optimizer_precision_problem(
    const OptimizerPrecision& p);

}  // namespace mplan
