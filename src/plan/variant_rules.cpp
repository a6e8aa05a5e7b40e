// Model-variant rules across fields. Source: megatron/core/transformer/transformer_config.py
// (__post_init__: overlap_moe_expert_parallel_comm's requirements).
#include "src/plan/variant_rules.hpp"

#include "src/common/error.hpp"

namespace mplan {

void append_variant_violations(const Plan& plan, std::vector<Violation>& out) {
  const ModelSpec& m = plan.model;
  const ParallelConfig& p = plan.parallel;
  if (m.moe && m.moe->overlap_moe_expert_parallel_comm) {
    const char* f = "model.moe.overlap_moe_expert_parallel_comm";
    if (p.ep <= 1)
      out.push_back(
          {f, "overlap_moe_expert_parallel_comm is only supported with expert model parallelism"});
    if (p.pp > 1 && p.vpp <= 1)
      out.push_back({f, cat("If enabling EP A2A overlap, virtual_pipeline_model_parallel_size must "
                            "be specified when pipeline_model_parallel_size > 1 (pp ",
                            p.pp, ", vpp 1)")});
    if (p.recompute == Recompute::kFull)
      out.push_back(
          {f, "disable full recomputation when enabling overlap_moe_expert_parallel_comm"});
    if (plan.training.precision == Precision::kFp32)
      out.push_back(
          {f, "overlap_moe_expert_parallel_comm is only supported with bf16 or fp16 model"});
  }
}

}  // namespace mplan
