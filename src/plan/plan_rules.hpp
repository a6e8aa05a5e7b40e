// The rules that lower layers own (src/parallel: the rank grid; src/schedule: the schedule),
// applied to a whole plan and reported in the plan file's field names; validate(plan) runs them.
// The layout must give every virtual stage a layer, and pp, vpp, the micro-batch count (global
// batch / (micro batch x dp)) and the group size must make a schedule Megatron-LM accepts.
#pragma once

#include <optional>
#include <vector>

#include "src/plan/plan.hpp"
#include "src/plan/validate.hpp"
#include "src/schedule/schedule.hpp"

namespace mplan {

// The schedule a plan runs; nullopt when the batch does not divide into micro-batches.
std::optional<ScheduleSpec> schedule_spec_of(const Plan& plan);

// The schedule of an iteration of `microbatches` micro-batches (a step of a batch-size ramp-up;
// the final batch is schedule_spec_of(plan)).
ScheduleSpec schedule_spec_of(const Plan& plan, int64_t microbatches);

// Appends the broken schedule rules of `plan` to `out` (field names as in the plan file).
void append_schedule_violations(const Plan& plan, std::vector<Violation>& out);

// Appends rank_grid_problems(plan.parallel) (src/parallel/rank_grid.hpp) to `out`, skipping any
// already listed there.
void check_rank_grid(const Plan& plan, std::vector<Violation>& out);

}  // namespace mplan
