// Rank-grid and schedule rules of a plan, in the plan's field names; rules validate() already
// reports (vpp > 1 without pp > 1) are left to it.
#include "src/plan/plan_rules.hpp"

#include <algorithm>

#include "src/batch/microbatch_calculator.hpp"
#include "src/common/error.hpp"
#include "src/parallel/rank_grid.hpp"

namespace mplan {

std::optional<ScheduleSpec> schedule_spec_of(const Plan& plan) {
  const ParallelConfig& p = plan.parallel;
  const std::optional<int64_t> m =
      microbatches_if_valid(p.global_batch_size, p.micro_batch_size, p.dp);
  if (!m) return std::nullopt;
  return schedule_spec_of(plan, *m);
}

ScheduleSpec schedule_spec_of(const Plan& plan, int64_t microbatches) {
  const ParallelConfig& p = plan.parallel;
  ScheduleSpec s;
  s.kind = p.schedule;
  s.pp = p.pp;
  s.vpp = p.vpp;
  s.microbatches = microbatches;
  s.group_size =
      p.schedule == ScheduleKind::kInterleaved ? p.microbatch_group_size_per_vp_stage : 0;
  return s;
}

namespace {

// The plan-file field a schedule rule concerns.
const char* field_of(const ParallelConfig& p, SpecField f) {
  switch (f) {
    case SpecField::kSchedule:
      return "parallel.schedule";
    case SpecField::kPp:
      return "parallel.pp";
    case SpecField::kVpp:
      return "parallel.vpp";
    case SpecField::kGroupSize:
      return "parallel.microbatch_group_size_per_vp_stage";
    case SpecField::kMicrobatches:
      return p.microbatch_group_size_per_vp_stage > 0
                 ? "parallel.microbatch_group_size_per_vp_stage"
                 : "parallel.global_batch_size";
  }
  return "parallel";
}

}  // namespace

void append_schedule_violations(const Plan& plan, std::vector<Violation>& out) {
  const ParallelConfig& p = plan.parallel;
  if (p.pp * p.vpp > plan.model.num_layers)
    out.push_back(
        {"parallel.pp", cat("pp x vpp (", p.pp, " x ", p.vpp, " = ", p.pp * p.vpp,
                            ") virtual pipeline stages exceed num_layers (", plan.model.num_layers,
                            "): every stage needs at least one layer")});
  if (p.vpp > 1 && p.pp == 1) return;  // reported by validate() as parallel.vpp
  std::optional<ScheduleSpec> spec = schedule_spec_of(plan);
  if (!spec) return;  // reported by validate() as parallel.global_batch_size
  auto report = [&](const ScheduleSpec& s, const std::string& suffix) {
    std::optional<SpecProblem> problem = check_spec(s);
    if (!problem) return false;
    std::string rule = problem->rule;
    if (problem->field == SpecField::kMicrobatches)
      rule = cat("M = global_batch_size / (micro_batch_size x dp) = ", s.microbatches,
                 " micro-batches: ", rule);
    out.push_back({field_of(p, problem->field), rule + suffix});
    return true;
  };
  if (report(*spec, "")) return;
  // With a batch-size ramp-up the schedule runs with fewer micro-batches first: Megatron checks
  // the schedule at every step of the ramp.
  const TrainingConfig& t = plan.training;
  if (!t.rampup_batch_size) return;
  MicrobatchSpec ms{p.global_batch_size, p.micro_batch_size, p.dp, t.rampup_batch_size, false};
  if (check_microbatch_spec(ms)) return;  // reported by validate()
  MicrobatchCalculator calc(ms);
  if (calc.first_inconsistent_step()) return;  // reported by validate()
  int64_t last_checked = -1;
  for (const RampStep& step : calc.ramp_steps()) {
    if (step.state.num_microbatches == last_checked) continue;
    last_checked = step.state.num_microbatches;
    ScheduleSpec at_step = *spec;
    at_step.microbatches = step.state.num_microbatches;
    if (report(at_step,
               cat(" (ramp-up step at ", step.state.consumed_samples, " consumed samples)")))
      return;
  }
}

void check_rank_grid(const Plan& plan, std::vector<Violation>& out) {
  for (auto& pr : rank_grid_problems(plan.parallel)) {
    Violation v{pr.field, pr.message};
    if (std::find(out.begin(), out.end(), v) == out.end()) out.push_back(std::move(v));
  }
}

}  // namespace mplan
