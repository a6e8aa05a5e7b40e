// What each software stack can run, for the sweep's --stack: Megatron-LM (megatron-te,
// megatron-local) has no zb-h1 or gpipe schedule; mplan's executor refuses what
// exec/runner/trainer.cpp's check_executable refuses (context or expert parallelism, fp16, bf16
// main gradients, optimizer state other than fp32, fp8 / fp4, multi-latent attention,
// multi-token prediction, sliding windows, Megatron-FSDP, partial distributed optimizers, a
// mixture-of-experts model, a pipeline chunk without a layer), under the same field (tied by
// tests/exec/runner/trainer_test.cpp). Invariant: a plan the stack runs gives no violation; each
// refusal names the field and the stack.
#pragma once

#include <optional>

#include "src/plan/plan.hpp"
#include "src/plan/validate.hpp"

namespace mplan::sweep {

// The first reason the plan's training.implementation cannot run `plan`, or nothing.
std::optional<Violation> stack_violation(const Plan& plan);

}  // namespace mplan::sweep
