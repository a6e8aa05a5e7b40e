// Schedule rules of a plan, as validate(plan) reports them.
#include "src/plan/plan_rules.hpp"

#include <gtest/gtest.h>

#include <algorithm>

namespace mplan {
namespace {

// gpt3-1.3b has 24 layers; h200x4 is one node of 4 GPUs.
Plan plan_with(const std::string& parallel) {
  return plan_from_json(parse_json(
      R"({"schema_version": 1, "model": "gpt3-1.3b", "cluster": "h200x4", "parallel": )" +
          parallel + "}",
      "test plan"));
}

bool has(const std::vector<Violation>& all, const Violation& v) {
  return std::find(all.begin(), all.end(), v) != all.end();
}

TEST(PlanRules, SpecOfPlan) {
  const Plan p =
      plan_with(R"({"pp": 4, "vpp": 2, "dp": 1, "micro_batch_size": 2, "global_batch_size": 32})");
  const auto s = schedule_spec_of(p);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->kind, ScheduleKind::kInterleaved);  // the plan's default with vpp > 1
  EXPECT_EQ(s->microbatches, 16);
  EXPECT_EQ(s->pp, 4);
  EXPECT_EQ(s->vpp, 2);
  // An iteration of a ramp-up: the same schedule over fewer micro-batches.
  ScheduleSpec ramp = *s;
  ramp.microbatches = 8;
  EXPECT_EQ(schedule_spec_of(p, 8), ramp);
  EXPECT_FALSE(
      schedule_spec_of(
          plan_with(R"({"pp": 2, "dp": 2, "micro_batch_size": 3, "global_batch_size": 32})"))
          .has_value());
}

TEST(PlanRules, ValidPlanHasNoScheduleViolations) {
  std::vector<Violation> out;
  append_schedule_violations(
      plan_with(R"({"pp": 4, "vpp": 2, "dp": 1, "micro_batch_size": 1, "global_batch_size": 8})"),
      out);
  EXPECT_TRUE(out.empty());
  EXPECT_TRUE(validate(plan_with(R"({"pp": 4, "vpp": 2, "dp": 1, "micro_batch_size": 1,
                                      "global_batch_size": 8})"))
                  .empty());
}

TEST(PlanRules, MoreStagesThanLayers) {
  const auto v = validate(
      plan_with(R"({"pp": 4, "vpp": 8, "dp": 1, "micro_batch_size": 1, "global_batch_size": 32})"));
  EXPECT_TRUE(has(v, {"parallel.pp",
                      "pp x vpp (4 x 8 = 32) virtual pipeline stages exceed num_layers (24): "
                      "every stage needs at least one layer"}));
}

TEST(PlanRules, InterleavedMicrobatchCount) {
  // M = 6 / (1 x 1) = 6 with pp 4: remainder 2 < pp.
  const auto v = validate(
      plan_with(R"({"pp": 4, "vpp": 2, "dp": 1, "micro_batch_size": 1, "global_batch_size": 6})"));
  EXPECT_TRUE(has(v, {"parallel.global_batch_size",
                      "M = global_batch_size / (micro_batch_size x dp) = 6 micro-batches: The "
                      "remainder of M (the total micro-batches) divided by N (number of "
                      "contiguous micro-batches in a virtual pipeline stage) should be 0, or "
                      "larger than or equal to the pipeline-parallel size, but it is 2. "
                      "Otherwise, it introduces dependency bubbles in the pipeline and reduces "
                      "throughput."}))
      << v.size();
  const auto g = validate(plan_with(R"({"pp": 4, "vpp": 2, "dp": 1, "micro_batch_size": 1,
      "global_batch_size": 8, "microbatch_group_size_per_vp_stage": 3})"));
  EXPECT_TRUE(has(g, {"parallel.microbatch_group_size_per_vp_stage",
                      "The number of contiguous micro-batches in a virtual pipeline stage should "
                      "range in [PP=4 , M=8]"}));
}

TEST(PlanRules, ScheduleNeedsMatchingVpp) {
  const auto v = validate(plan_with(R"({"pp": 4, "vpp": 2, "dp": 1, "schedule": "zb-h1",
      "micro_batch_size": 1, "global_batch_size": 8})"));
  EXPECT_TRUE(has(v, {"parallel.vpp",
                      "vpp (2) > 1 needs the interleaved schedule (Megatron runs it whenever vpp "
                      "> 1); zb-h1 has one model chunk per rank"}));
  const auto w = validate(plan_with(R"({"pp": 4, "dp": 1, "schedule": "interleaved",
      "micro_batch_size": 1, "global_batch_size": 8})"));
  EXPECT_TRUE(has(w, {"parallel.vpp",
                      "the interleaved schedule needs vpp > 1 (with vpp 1 Megatron runs the "
                      "non-interleaved 1F1B schedule)"}));
}

TEST(PlanRules, NoDuplicateOfExistingRules) {
  // vpp > 1 with pp 1 is validate()'s own parallel.vpp rule, reported once.
  const auto v = validate(
      plan_with(R"({"pp": 1, "vpp": 2, "dp": 4, "micro_batch_size": 1, "global_batch_size": 8})"));
  EXPECT_EQ(std::count_if(v.begin(), v.end(),
                          [](const Violation& x) { return x.field == "parallel.vpp"; }),
            1);
}

}  // namespace
}  // namespace mplan
