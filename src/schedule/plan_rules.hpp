// The schedule rules of a plan, run by validate(plan) (src/plan/validate.cpp): the layout must
// give every virtual stage a layer, and pp, vpp, the micro-batch count (global batch /
// (micro batch x dp)) and the group size must make a schedule Megatron-LM accepts.
#pragma once

#include <optional>
#include <vector>

#include "src/plan/plan.hpp"
#include "src/plan/validate.hpp"
#include "src/schedule/schedule.hpp"

namespace mplan {

// The schedule a plan runs; nullopt when the batch does not divide into micro-batches.
std::optional<ScheduleSpec> schedule_spec_of(const Plan& plan);

// Appends the broken schedule rules of `plan` to `out` (field names as in the plan file).
void append_schedule_violations(const Plan& plan, std::vector<Violation>& out);

}  // namespace mplan
