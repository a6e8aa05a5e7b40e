// What each software stack can run, for the sweep's --stack: Megatron-LM (megatron-te,
// megatron-local) has no zb-h1 or gpipe schedule; mplan's executor refuses what
// exec/runner/trainer.cpp's check_executable refuses (context or expert parallelism, fp16, a
// mixture-of-experts model, a pipeline chunk without a layer). Invariant: a plan the stack runs
// gives no violation; each refusal names the field and the stack.
#pragma once

#include <optional>

#include "src/plan/plan.hpp"
#include "src/plan/validate.hpp"

namespace mplan::sweep {

// The first reason the plan's training.implementation cannot run `plan`, or nothing.
std::optional<Violation> stack_violation(const Plan& plan);

}  // namespace mplan::sweep
