// Stack rules. Megatron-LM's schedules: 1F1B and its interleaved form
// (megatron/core/pipeline_parallel/schedules.py); zero-bubble and GPipe orders are mplan's own.
// The executor's refusals mirror exec/runner/trainer.cpp's check_executable and
// exec/model/gpt_dims.cpp (kept in step by tests/sim/sweep/stack_rules_test.cpp); the rotary
// dimension's rule is validate()'s, for every stack.
#include "sim/sweep/stack_rules.hpp"

#include "src/common/error.hpp"
#include "src/model/layer_range.hpp"

namespace mplan::sweep {

bool stack_overlaps_p2p(Implementation impl) { return impl != Implementation::kMplan; }

bool stack_offloads_activations(Implementation impl) { return impl != Implementation::kMplan; }

bool stack_overlaps_tp_comm(Implementation impl) { return impl == Implementation::kMegatronTe; }

bool stack_runs_megatron_fsdp(Implementation impl) { return impl != Implementation::kMplan; }

std::optional<Violation> stack_violation(const Plan& plan) {
  const ParallelConfig& p = plan.parallel;
  const Implementation impl = plan.training.implementation;
  const std::string who = cat(" (training.implementation ", to_string(impl), ")");
  if (p.tp_comm_overlap && !stack_overlaps_tp_comm(impl))
    return Violation{"parallel.tp_comm_overlap",
                     cat("tensor-parallel communication overlap runs on Transformer Engine's "
                         "userbuffers (megatron-te)",
                         who)};
  if (impl != Implementation::kMplan) {
    if (p.schedule == ScheduleKind::kZbH1 || p.schedule == ScheduleKind::kGpipe)
      return Violation{"parallel.schedule", cat("Megatron-LM does not run the ",
                                                to_string(p.schedule), " schedule", who)};
    return std::nullopt;
  }
  if (p.cp != 1)
    return Violation{"parallel.cp", cat("mplan's executor has no context parallelism", who)};
  if (p.ep != 1)
    return Violation{"parallel.ep", cat("mplan's executor has no expert parallelism", who)};
  if (plan.model.moe)
    return Violation{"model.moe", cat("mplan's executor runs dense models only", who)};
  if (plan.training.precision == Precision::kFp16)
    return Violation{"training.precision", cat("mplan's executor has no fp16 training", who)};
  if (plan.training.precision != Precision::kFp32 && !plan.training.grads_in_fp32)
    return Violation{"training.grads_in_fp32",
                     cat("mplan's executor has no bf16 main gradients", who)};
  const OptimizerPrecision& op = plan.training.optimizer_precision;
  for (const auto& [field, dtype] : {std::pair{"main_params_dtype", op.main_params_dtype},
                                     std::pair{"exp_avg_dtype", op.exp_avg_dtype},
                                     std::pair{"exp_avg_sq_dtype", op.exp_avg_sq_dtype}})
    if (dtype != OptimStateDtype::kFp32)
      return Violation{cat("training.", field),
                       cat("mplan's executor keeps optimizer state in fp32", who)};
  if (plan.training.fp8_format != Fp8Format::kNone)
    return Violation{"training.fp8_format", cat("mplan's executor has no fp8 GEMMs", who)};
  if (plan.training.fp4_format != Fp4Format::kNone)
    return Violation{"training.fp4_format", cat("mplan's executor has no fp4 GEMMs", who)};
  if (plan.model.mla)
    return Violation{"model.mla", cat("mplan's executor has no multi-latent attention", who)};
  if (plan.model.mtp_num_layers > 0)
    return Violation{"model.mtp_num_layers",
                     cat("mplan's executor has no multi-token prediction", who)};
  if (plan.model.window_size)
    return Violation{"model.window_size",
                     cat("mplan's executor has no sliding-window attention", who)};
  if (p.use_megatron_fsdp)
    return Violation{"parallel.use_megatron_fsdp",
                     cat("mplan's executor has no Megatron-FSDP", who)};
  if (p.num_distributed_optimizer_instances != 1)
    return Violation{"parallel.num_distributed_optimizer_instances",
                     cat("mplan's executor has no partial distributed optimizer", who)};
  if (p.recompute == Recompute::kSelective && p.recompute_modules != kRecomputeCoreAttn)
    return Violation{"parallel.recompute_modules",
                     cat("mplan's executor recomputes the attention core alone (core_attn)", who)};
  if (plan.training.optimizer_cpu_offload)
    return Violation{"training.optimizer_cpu_offload",
                     cat("mplan's executor runs the optimizer on the GPU", who)};
  if (p.overlap_p2p_comm && p.schedule == ScheduleKind::kInterleaved && !stack_overlaps_p2p(impl))
    return Violation{"parallel.overlap_p2p_comm",
                     cat("mplan's executor blocks on pipeline sends and receives", who)};
  if (plan.training.cpu_offloading_num_layers > 0 && !stack_offloads_activations(impl))
    return Violation{"training.cpu_offloading_num_layers",
                     cat("mplan's executor keeps activations on the GPU", who)};
  if (plan.training.fine_grained_activation_offloading && !stack_offloads_activations(impl))
    return Violation{"training.fine_grained_activation_offloading",
                     cat("mplan's executor keeps activations on the GPU", who)};
  for (int64_t s = 0; s < p.pp; ++s)
    for (int64_t c = 0; c < p.vpp; ++c)
      if (chunk_layers(plan.model.num_layers, p, s, c).count < 1)
        return Violation{"parallel",
                         cat("mplan's executor needs a transformer layer in every pipeline "
                             "chunk",
                             who)};
  return std::nullopt;
}

}  // namespace mplan::sweep
