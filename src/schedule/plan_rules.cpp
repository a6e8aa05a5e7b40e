// Schedule rules of a plan, in the plan's field names; rules validate() already reports (vpp > 1
// without pp > 1) are left to it.
#include "src/schedule/plan_rules.hpp"

#include "src/common/error.hpp"

namespace mplan {

std::optional<ScheduleSpec> schedule_spec_of(const Plan& plan) {
  const ParallelConfig& p = plan.parallel;
  const int64_t per_step = p.micro_batch_size * p.dp;
  if (per_step <= 0 || p.global_batch_size <= 0 || p.global_batch_size % per_step != 0)
    return std::nullopt;
  ScheduleSpec s;
  s.kind = p.schedule;
  s.pp = p.pp;
  s.vpp = p.vpp;
  s.microbatches = p.global_batch_size / per_step;
  s.group_size =
      p.schedule == ScheduleKind::kInterleaved ? p.microbatch_group_size_per_vp_stage : 0;
  return s;
}

void append_schedule_violations(const Plan& plan, std::vector<Violation>& out) {
  const ParallelConfig& p = plan.parallel;
  if (p.pp * p.vpp > plan.model.num_layers)
    out.push_back(
        {"parallel.pp", cat("pp x vpp (", p.pp, " x ", p.vpp, " = ", p.pp * p.vpp,
                            ") virtual pipeline stages exceed num_layers (", plan.model.num_layers,
                            "): every stage needs at least one layer")});
  if (p.vpp > 1 && p.pp == 1) return;  // reported by validate() as parallel.vpp
  const std::optional<ScheduleSpec> spec = schedule_spec_of(plan);
  if (!spec) return;  // reported by validate() as parallel.global_batch_size
  const std::optional<SpecProblem> problem = check_spec(*spec);
  if (!problem) return;
  switch (problem->field) {
    case SpecField::kSchedule:
      out.push_back({"parallel.schedule", problem->rule});
      break;
    case SpecField::kPp:
      out.push_back({"parallel.pp", problem->rule});
      break;
    case SpecField::kVpp:
      out.push_back({"parallel.vpp", problem->rule});
      break;
    case SpecField::kGroupSize:
      out.push_back({"parallel.microbatch_group_size_per_vp_stage", problem->rule});
      break;
    case SpecField::kMicrobatches:
      out.push_back({"parallel.global_batch_size",
                     cat("M = global_batch_size / (micro_batch_size x dp) = ", spec->microbatches,
                         " micro-batches: ", problem->rule)});
      break;
  }
}

}  // namespace mplan
