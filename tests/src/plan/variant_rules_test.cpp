// Tests of the model variants' rules across fields: TransformerConfig's requirements of
// overlap_moe_expert_parallel_comm.
#include "src/plan/variant_rules.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace mplan {
namespace {

Plan moe_plan() {
  Plan p;
  p.model = load_model("mixtral-8x7b");
  p.cluster = load_cluster("dgx-h100");
  p.parallel.ep = 4;
  p.parallel.dp = 4;
  p.parallel.pp = 2;
  p.parallel.vpp = 2;
  p.parallel.schedule = ScheduleKind::kInterleaved;
  p.parallel.micro_batch_size = 1;
  p.parallel.global_batch_size = 32;
  p.model.moe->overlap_moe_expert_parallel_comm = true;
  return p;
}

std::vector<Violation> rules(const Plan& p) {
  std::vector<Violation> v;
  append_variant_violations(p, v);
  return v;
}

TEST(VariantRules, EpOverlapAsMegatronStatesIt) {
  EXPECT_TRUE(rules(moe_plan()).empty());
  Plan a = moe_plan();
  a.parallel.ep = 1;
  ASSERT_EQ(rules(a).size(), 1u);
  EXPECT_EQ(to_string(rules(a)[0]),
            "model.moe.overlap_moe_expert_parallel_comm: overlap_moe_expert_parallel_comm is only "
            "supported with expert model parallelism");
  Plan b = moe_plan();
  b.parallel.vpp = 1;
  ASSERT_EQ(rules(b).size(), 1u);
  EXPECT_THAT(rules(b)[0].message, ::testing::HasSubstr("virtual_pipeline_model_parallel_size"));
  Plan c = moe_plan();
  c.parallel.recompute = Recompute::kFull;
  ASSERT_EQ(rules(c).size(), 1u);
  EXPECT_THAT(rules(c)[0].message, ::testing::HasSubstr("disable full recomputation"));
  Plan d = moe_plan();
  d.model.moe->overlap_moe_expert_parallel_comm = false;
  d.parallel.ep = 1;
  EXPECT_TRUE(rules(d).empty());
}

}  // namespace
}  // namespace mplan
