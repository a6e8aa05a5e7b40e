// The precision-aware optimizer's fields, with Megatron-LM's choices (arguments.py:
// --main-params-dtype fp32|fp16, --exp-avg-dtype / --exp-avg-sq-dtype fp32|fp16|bf16|fp8) and its
// rule (megatron/core/optimizer/optimizer_config.py: "exp_avg_dtype can only be fp32 when not
// using precision-aware optimizer").
#include "src/plan/optimizer_precision.hpp"

#include "src/common/error.hpp"

namespace mplan {

const char* to_string(OptimStateDtype d) {
  switch (d) {
    case OptimStateDtype::kFp32:
      return "fp32";
    case OptimStateDtype::kFp16:
      return "fp16";
    case OptimStateDtype::kBf16:
      return "bf16";
    case OptimStateDtype::kFp8:
      return "fp8";
  }
  return "?";
}

int64_t bytes_of(OptimStateDtype d) {
  switch (d) {
    case OptimStateDtype::kFp32:
      return 4;
    case OptimStateDtype::kFp16:
    case OptimStateDtype::kBf16:
      return 2;
    case OptimStateDtype::kFp8:
      return 1;
  }
  return 4;
}

namespace {

OptimStateDtype dtype_of(const std::string& s) {
  if (s == "fp16") return OptimStateDtype::kFp16;
  if (s == "bf16") return OptimStateDtype::kBf16;
  if (s == "fp8") return OptimStateDtype::kFp8;
  return OptimStateDtype::kFp32;
}

}  // namespace

OptimizerPrecision optimizer_precision_from_json(const JsonObject& o) {
  OptimizerPrecision p;
  p.use_precision_aware_optimizer = o.get_bool("use_precision_aware_optimizer", false);
  p.main_params_dtype = dtype_of(o.get_enum("main_params_dtype", {"fp32", "fp16"}, "fp32"));
  p.exp_avg_dtype = dtype_of(o.get_enum("exp_avg_dtype", {"fp32", "fp16", "bf16", "fp8"}, "fp32"));
  p.exp_avg_sq_dtype =
      dtype_of(o.get_enum("exp_avg_sq_dtype", {"fp32", "fp16", "bf16", "fp8"}, "fp32"));
  return p;
}

void optimizer_precision_to_json(const OptimizerPrecision& p, Json& j) {
  if (p.use_precision_aware_optimizer) j["use_precision_aware_optimizer"] = true;
  if (p.main_params_dtype != OptimStateDtype::kFp32)
    j["main_params_dtype"] = to_string(p.main_params_dtype);
  if (p.exp_avg_dtype != OptimStateDtype::kFp32) j["exp_avg_dtype"] = to_string(p.exp_avg_dtype);
  if (p.exp_avg_sq_dtype != OptimStateDtype::kFp32)
    j["exp_avg_sq_dtype"] = to_string(p.exp_avg_sq_dtype);
}

std::optional<std::pair<std::string, std::string>> optimizer_precision_problem(
    const OptimizerPrecision& p) {
  if (p.use_precision_aware_optimizer) return std::nullopt;
  const std::pair<const char*, OptimStateDtype> fields[] = {
      {"main_params_dtype", p.main_params_dtype},
      {"exp_avg_dtype", p.exp_avg_dtype},
      {"exp_avg_sq_dtype", p.exp_avg_sq_dtype}};
  for (const auto& [name, d] : fields)
    if (d != OptimStateDtype::kFp32)
      return std::pair{cat("training.", name),
                       cat(name, " can only be fp32 when not using precision-aware optimizer (got ",
                           to_string(d), "; set use_precision_aware_optimizer)")};
  return std::nullopt;
}

}  // namespace mplan
