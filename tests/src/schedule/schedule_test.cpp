// ScheduleSpec checks (Megatron's interleaved rules in its wording), warm-up counts, dispatch,
// and the per-rank list conversions.
#include "src/schedule/schedule.hpp"

#include <gtest/gtest.h>

#include "src/common/error.hpp"
#include "tests/src/schedule/schedule_test_util.hpp"

namespace mplan {
namespace {

using test::spec;

void expect_problem(const ScheduleSpec& s, SpecField field, const std::string& rule) {
  const auto p = check_spec(s);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->field, field);
  EXPECT_EQ(p->rule, rule);
}

constexpr auto kI = ScheduleKind::kInterleaved;

TEST(ScheduleSpec, Ranges) {
  expect_problem(spec(ScheduleKind::k1F1B, 0, 4), SpecField::kPp, "must be >= 1, got 0");
  expect_problem(spec(ScheduleKind::k1F1B, 2, 0), SpecField::kMicrobatches, "must be >= 1, got 0");
  expect_problem(spec(ScheduleKind::k1F1B, 2, 4, 0), SpecField::kVpp, "must be >= 1, got 0");
  expect_problem(spec(kI, 2, 4, 2, -1), SpecField::kGroupSize, "must be >= 0 (0 means pp), got -1");
  expect_problem(spec(ScheduleKind::k1F1B, 1 << 13, 1 << 13), SpecField::kMicrobatches,
                 "pp x vpp x microbatches (8192 x 1 x 8192) exceeds the limit of 33554432 "
                 "compute steps");
  EXPECT_FALSE(check_spec(spec(ScheduleKind::k1F1B, 8, 3)).has_value());  // m < pp is fine
  EXPECT_FALSE(check_spec(spec(ScheduleKind::kGpipe, 1, 1)).has_value());
}

TEST(ScheduleSpec, InterleavedRulesInMegatronWording) {
  expect_problem(spec(kI, 4, 8, 1), SpecField::kVpp,
                 "the interleaved schedule needs vpp > 1 (with vpp 1 Megatron runs the "
                 "non-interleaved 1F1B schedule)");
  expect_problem(spec(kI, 1, 8, 2), SpecField::kVpp,
                 "vpp (2) > 1 needs pp > 1 (Megatron: When interleaved schedule is used, "
                 "pipeline-model-parallel size should be greater than 1)");
  // schedules.py: microbatch_group_size_per_vp_stage must lie in [pp, M].
  expect_problem(spec(kI, 4, 2, 2), SpecField::kMicrobatches,
                 "The number of contiguous micro-batches in a virtual pipeline stage should "
                 "range in [PP=4 , M=2]");
  expect_problem(spec(kI, 4, 8, 2, 3), SpecField::kGroupSize,
                 "The number of contiguous micro-batches in a virtual pipeline stage should "
                 "range in [PP=4 , M=8]");
  expect_problem(spec(kI, 4, 8, 2, 9), SpecField::kGroupSize,
                 "The number of contiguous micro-batches in a virtual pipeline stage should "
                 "range in [PP=4 , M=8]");
  // M % N must be 0 or >= pp: 6 % 4 = 2.
  expect_problem(spec(kI, 4, 6, 2), SpecField::kMicrobatches,
                 "The remainder of M (the total micro-batches) divided by N (number of "
                 "contiguous micro-batches in a virtual pipeline stage) should be 0, or larger "
                 "than or equal to the pipeline-parallel size, but it is 2. Otherwise, it "
                 "introduces dependency bubbles in the pipeline and reduces throughput.");
  EXPECT_FALSE(check_spec(spec(kI, 4, 9, 2, 5)).has_value());  // 9 % 5 = 4 >= 4
  EXPECT_FALSE(check_spec(spec(kI, 2, 2, 4)).has_value());
}

TEST(ScheduleSpec, NonInterleavedRules) {
  expect_problem(spec(ScheduleKind::kZbH1, 4, 8, 2), SpecField::kVpp,
                 "vpp (2) > 1 needs the interleaved schedule (Megatron runs it whenever vpp > "
                 "1); zb-h1 has one model chunk per rank");
  expect_problem(spec(ScheduleKind::k1F1B, 4, 8, 1, 4), SpecField::kGroupSize,
                 "applies to the interleaved schedule only (Megatron's "
                 "microbatch_group_size_per_vp_stage); the schedule is 1f1b");
}

TEST(Schedule, MakeScheduleNamesTheField) {
  try {
    make_schedule(spec(kI, 4, 6, 2));
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("microbatches: The remainder of M", 0), 0u) << e.what();
  }
}

TEST(Schedule, WarmupCounts) {
  // 1f1b / zb-h1: min(pp - r - 1, m); gpipe: m; interleaved: min(2 (pp-r-1) + (vpp-1) g, vpp m).
  EXPECT_EQ(make_schedule(spec(ScheduleKind::k1F1B, 4, 8)).warmup,
            (std::vector<int64_t>{3, 2, 1, 0}));
  EXPECT_EQ(make_schedule(spec(ScheduleKind::k1F1B, 4, 2)).warmup,
            (std::vector<int64_t>{2, 2, 1, 0}));
  EXPECT_EQ(make_schedule(spec(ScheduleKind::kGpipe, 3, 5)).warmup,
            (std::vector<int64_t>{5, 5, 5}));
  EXPECT_EQ(make_schedule(spec(kI, 4, 8, 3)).warmup, (std::vector<int64_t>{14, 12, 10, 8}));
  EXPECT_EQ(make_schedule(spec(kI, 4, 4, 4)).warmup, (std::vector<int64_t>{16, 16, 14, 12}));
  EXPECT_EQ(make_schedule(spec(kI, 4, 9, 2, 5)).warmup, (std::vector<int64_t>{11, 9, 7, 5}));
}

TEST(Schedule, ResolvesGroupSize) {
  EXPECT_EQ(make_schedule(spec(kI, 4, 8, 2)).spec.group_size, 4);
  EXPECT_EQ(make_schedule(spec(ScheduleKind::k1F1B, 4, 8)).spec.group_size, 0);
}

TEST(Schedule, RankListsRoundTrip) {
  const Schedule s = make_schedule(spec(kI, 2, 4, 2));
  const auto lists = rank_lists(s);
  ASSERT_EQ(lists.size(), 2u);
  EXPECT_EQ(lists[1].size(), s.rank(1).size());
  const Schedule t = schedule_from_ranks(s.spec, s.split_backward, lists);
  EXPECT_EQ(t.actions, s.actions);
  EXPECT_EQ(t.rank_begin, s.rank_begin);
  EXPECT_EQ(t.warmup, s.warmup);
  EXPECT_THROW(schedule_from_ranks(s.spec, false, {lists[0]}), InternalError);
}

TEST(Schedule, VirtualStages) {
  const ScheduleSpec s = spec(kI, 4, 8, 3);
  EXPECT_EQ(virtual_stage(s, 1, 2), 9);
  EXPECT_EQ(num_virtual_stages(s), 12);
}

}  // namespace
}  // namespace mplan
