// ScheduleBuilder: flat storage with rank offsets, p2p groups in canonical order.
#include "src/schedule/schedule_builder.hpp"

#include <gtest/gtest.h>

#include "src/common/error.hpp"

namespace mplan {
namespace {

TEST(ScheduleBuilder, GroupsInCanonicalOrder) {
  ScheduleSpec spec;
  spec.pp = 2;
  spec.microbatches = 1;
  ScheduleBuilder b(spec, false, 4);
  b.begin_rank(0);
  b.compute(ActionKind::kForward, 0, 0);
  b.p2p(ActionKind::kRecvBackward, 0, 0, 1);
  b.p2p(ActionKind::kSendForward, 0, 0, 1);
  b.end_group();
  b.end_group();  // empty: nothing written
  b.compute(ActionKind::kBackward, 0, 0);
  b.begin_rank(1);
  b.p2p(ActionKind::kSendBackward, 0, 0, 0);
  b.p2p(ActionKind::kRecvForward, 0, 0, 0);
  b.end_group();
  const Schedule s = b.finish();
  ASSERT_EQ(s.rank_begin, (std::vector<int64_t>{0, 4, 6}));
  EXPECT_EQ(s.actions[1].kind, ActionKind::kSendForward);
  EXPECT_FALSE(s.actions[1].ends_group);
  EXPECT_EQ(s.actions[2].kind, ActionKind::kRecvBackward);
  EXPECT_TRUE(s.actions[2].ends_group);
  EXPECT_EQ(s.actions[4].kind, ActionKind::kRecvForward);
  EXPECT_EQ(s.actions[5].kind, ActionKind::kSendBackward);
  EXPECT_TRUE(s.actions[5].ends_group);
  EXPECT_EQ(s.rank(1).size(), 2u);
  EXPECT_EQ(s.warmup, (std::vector<int64_t>{1, 0}));
}

TEST(ScheduleBuilder, MisuseIsAnInternalError) {
  ScheduleSpec spec;
  spec.pp = 1;
  ScheduleBuilder b(spec, false, 4);
  EXPECT_THROW(b.begin_rank(1), InternalError);
  b.begin_rank(0);
  b.p2p(ActionKind::kSendForward, 0, 0, 1);
  EXPECT_THROW(b.p2p(ActionKind::kSendForward, 0, 0, 1), InternalError);
  EXPECT_THROW(b.compute(ActionKind::kForward, 0, 0), InternalError);
}

}  // namespace
}  // namespace mplan
