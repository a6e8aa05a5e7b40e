// fp8 / fp4 rules across fields. Sources: Transformer Engine transformer_engine/pytorch/fp8.py
// (the support checks), Megatron-LM megatron/core/transformer/transformer_config.py
// (first_last_layers_bf16 ranges) and megatron/training/arguments.py (--fp8-param-gather needs
// the distributed optimizer).
#include "src/plan/precision_rules.hpp"

#include "src/common/error.hpp"
#include "src/plan/low_precision.hpp"

namespace mplan {

namespace {

// The recipe a plan asks for, as Transformer Engine names its support check, and the compute
// capability that check requires.
struct RecipeNeed {
  const char* field;
  const char* what;
  double min_cc;
};

RecipeNeed recipe_need(const TrainingConfig& t) {
  if (gemm_precision(t) == GemmPrecision::kFp4)
    return {"training.fp4_format", "NVFP4 (fp4_recipe nvfp4)", kBlackwellComputeCapability};
  switch (t.fp8_recipe) {
    case Fp8Recipe::kMxfp8:
      return {"training.fp8_recipe", "MXFP8 (fp8_recipe mxfp8)", kBlackwellComputeCapability};
    case Fp8Recipe::kBlockwise:
      return {"training.fp8_recipe", "blockwise FP8 (fp8_recipe blockwise)",
              kBlockwiseMinComputeCapability};
    case Fp8Recipe::kTensorwise:
    case Fp8Recipe::kDelayed:
      break;
  }
  return {"training.fp8_format", "FP8", kFp8MinComputeCapability};
}

}  // namespace

void append_precision_violations(const Plan& plan, std::vector<Violation>& out) {
  const TrainingConfig& t = plan.training;
  if (!low_precision(t)) return;
  const GpuSpec& gpu = plan.cluster.gpu;
  const RecipeNeed need = recipe_need(t);
  if (gpu.compute_capability <= 0) {
    out.push_back({"cluster.gpu.compute_capability",
                   cat("not given for GPU '", gpu.name, "'; ", need.what,
                       " needs compute capability ", need.min_cc, " or later")});
  } else if (gpu.compute_capability < need.min_cc) {
    out.push_back(
        {need.field, cat(need.what, " needs compute capability ", need.min_cc, " or later (",
                         need.min_cc >= kBlackwellComputeCapability ? "Blackwell" : "Ada / Hopper",
                         "); GPU '", gpu.name, "' has ", gpu.compute_capability)});
  }
  const ParallelConfig& p = plan.parallel;
  if (t.fp8_param_gather && !p.distributed_optimizer)
    out.push_back({"training.fp8_param_gather",
                   "--fp8-param-gather only supported with distributed optimizer, torch fsdp2, "
                   "megatron fsdp, or inference mode (set parallel.distributed_optimizer)"});
  if (t.fp4_param_gather && !p.distributed_optimizer)
    out.push_back({"training.fp4_param_gather",
                   "--fp4-param-gather needs the distributed optimizer (it keeps the fp32 main "
                   "weights the FP4 ones are cast from; set parallel.distributed_optimizer)"});
  if (t.first_last_layers_bf16) {
    const int64_t max_per_stage = plan.model.num_layers / p.pp;
    for (auto [field, name, n] :
         {std::tuple{"training.num_layers_at_start_in_bf16", "num_layers_at_start_in_bf16",
                     t.num_layers_at_start_in_bf16},
          std::tuple{"training.num_layers_at_end_in_bf16", "num_layers_at_end_in_bf16",
                     t.num_layers_at_end_in_bf16}})
      if (n > max_per_stage)
        out.push_back({field, cat(name, " (", n,
                                  ") must be between 0 and number of layers per pipeline stage (",
                                  max_per_stage, ").")});
  }
}

}  // namespace mplan
