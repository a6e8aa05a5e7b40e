// Tests of the stack rules: Megatron-LM refuses zb-h1 and gpipe, mplan's executor what its
// check_executable refuses (cp, ep, MoE, fp16, bf16 main gradients, optimizer state other than
// fp32), and each stack runs the plain 1F1B plan.
#include "sim/sweep/stack_rules.hpp"

#include <gtest/gtest.h>

namespace mplan::sweep {
namespace {

Plan reference(Implementation impl) {
  Plan p = load_plan(std::string(MPLAN_SOURCE_DIR) + "/configs/plans/gpt3-1.3b-pp4.json");
  p.training.implementation = impl;
  return p;
}

TEST(StackRules, EveryStackRunsOneFOneB) {
  for (Implementation i : kImplementations)
    EXPECT_EQ(stack_violation(reference(i)), std::nullopt) << to_string(i);
}

TEST(StackRules, MegatronRunsNeitherZeroBubbleNorGpipe) {
  for (Implementation i : {Implementation::kMegatronTe, Implementation::kMegatronLocal}) {
    Plan p = reference(i);
    p.parallel.schedule = ScheduleKind::kZbH1;
    const auto v = stack_violation(p);
    ASSERT_TRUE(v.has_value());
    EXPECT_EQ(v->field, "parallel.schedule");
    EXPECT_EQ(v->message, std::string("Megatron-LM does not run the zb-h1 schedule "
                                      "(training.implementation ") +
                              to_string(i) + ")");
    p.parallel.schedule = ScheduleKind::kGpipe;
    EXPECT_TRUE(stack_violation(p).has_value());
  }
  Plan m = reference(Implementation::kMplan);
  m.parallel.schedule = ScheduleKind::kZbH1;
  EXPECT_EQ(stack_violation(m), std::nullopt);  // the executor runs every schedule
}

TEST(StackRules, TheExecutorRefusesWhatItCannotRun) {
  Plan cp = reference(Implementation::kMplan);
  cp.parallel.cp = 2;
  EXPECT_EQ(stack_violation(cp)->field, "parallel.cp");
  Plan ep = reference(Implementation::kMplan);
  ep.parallel.ep = 2;
  EXPECT_EQ(stack_violation(ep)->field, "parallel.ep");
  Plan fp16 = reference(Implementation::kMplan);
  fp16.training.precision = Precision::kFp16;
  EXPECT_EQ(stack_violation(fp16)->field, "training.precision");
  Plan moe = reference(Implementation::kMplan);
  moe.model.moe = MoeSpec{};
  EXPECT_EQ(stack_violation(moe)->field, "model.moe");
  Plan bf16_grads = reference(Implementation::kMplan);
  bf16_grads.training.grads_in_fp32 = false;
  EXPECT_EQ(stack_violation(bf16_grads)->field, "training.grads_in_fp32");
  Plan moments = reference(Implementation::kMplan);
  moments.training.optimizer_precision = {true, OptimStateDtype::kFp32, OptimStateDtype::kBf16,
                                          OptimStateDtype::kBf16};
  EXPECT_EQ(stack_violation(moments)->field, "training.exp_avg_dtype");
  moments.training.optimizer_precision.exp_avg_dtype = OptimStateDtype::kFp32;
  EXPECT_EQ(stack_violation(moments)->field, "training.exp_avg_sq_dtype");
  // Megatron-LM runs all of them.
  for (Plan p : {cp, ep, fp16, moe, bf16_grads, moments}) {
    p.training.implementation = Implementation::kMegatronTe;
    EXPECT_EQ(stack_violation(p), std::nullopt);
  }
}

// tp_comm_overlap runs on Transformer Engine's userbuffers: Megatron-LM with Transformer Engine
// only. Megatron-FSDP: Megatron-LM with or without Transformer Engine, not mplan's executor.
TEST(StackRules, UserbufferOverlapNeedsTransformerEngine) {
  for (Implementation i : kImplementations) {
    Plan p = reference(i);
    p.parallel.tp = 2;
    p.parallel.sequence_parallel = true;
    p.parallel.tp_comm_overlap = true;
    const auto v = stack_violation(p);
    EXPECT_EQ(v.has_value(), i != Implementation::kMegatronTe) << to_string(i);
    if (v) {
      EXPECT_EQ(v->field, "parallel.tp_comm_overlap");
    }
    EXPECT_EQ(stack_overlaps_tp_comm(i), i == Implementation::kMegatronTe);
    EXPECT_EQ(stack_runs_megatron_fsdp(i), i != Implementation::kMplan);
  }
}

}  // namespace
}  // namespace mplan::sweep
