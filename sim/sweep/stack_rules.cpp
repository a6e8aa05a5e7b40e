// Stack rules. Megatron-LM's schedules: 1F1B and its interleaved form
// (megatron/core/pipeline_parallel/schedules.py); zero-bubble and GPipe orders are mplan's own.
// The executor's refusals mirror exec/runner/trainer.cpp's check_executable and
// exec/model/gpt_dims.cpp (kept in step by tests/sim/sweep/stack_rules_test.cpp); the rotary
// dimension's rule is validate()'s, for every stack.
#include "sim/sweep/stack_rules.hpp"

#include "src/common/error.hpp"
#include "src/model/layer_range.hpp"

namespace mplan::sweep {

std::optional<Violation> stack_violation(const Plan& plan) {
  const ParallelConfig& p = plan.parallel;
  const Implementation impl = plan.training.implementation;
  const std::string who = cat(" (training.implementation ", to_string(impl), ")");
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
