// Closed forms of makespan and bubble fraction, checked against numbers worked out by hand.
#include "src/schedule/closed_form.hpp"

#include <gtest/gtest.h>

#include "tests/src/schedule/schedule_test_util.hpp"

namespace mplan {
namespace {

using test::spec;

TEST(ClosedForm, Values) {
  // 1F1B / GPipe pp 4, m 8, f 1, b 2: 11 * 3 = 33, bubble 3/11.
  EXPECT_EQ(*closed_form_makespan(spec(ScheduleKind::k1F1B, 4, 8), {1, 2, 0}), 33);
  EXPECT_EQ(*closed_form_makespan(spec(ScheduleKind::kGpipe, 4, 8), {1, 2, 0}), 33);
  EXPECT_DOUBLE_EQ(*closed_form_bubble_fraction(spec(ScheduleKind::k1F1B, 4, 8), {1, 2, 0}),
                   3.0 / 11.0);
  // Weight adds to the backward: 11 * 4 = 44.
  EXPECT_EQ(*closed_form_makespan(spec(ScheduleKind::k1F1B, 4, 8), {1, 2, 1}), 44);
  // Interleaved pp 4, vpp 2, m 8: (16 + 3) * 3 = 57, bubble 3/19.
  EXPECT_EQ(*closed_form_makespan(spec(ScheduleKind::kInterleaved, 4, 8, 2), {1, 2, 0}), 57);
  EXPECT_DOUBLE_EQ(
      *closed_form_bubble_fraction(spec(ScheduleKind::kInterleaved, 4, 8, 2), {1, 2, 0}),
      3.0 / 19.0);
  // ZB-H1 pp 4, m 8, f = b = w = 1: 24 + 3 = 27 (1F1B with b = 2: 33); f 3, b 2, w 1: 48 + 12.
  EXPECT_EQ(*closed_form_makespan(spec(ScheduleKind::kZbH1, 4, 8), {1, 1, 1}), 27);
  EXPECT_EQ(*closed_form_makespan(spec(ScheduleKind::kZbH1, 4, 8), {3, 2, 1}), 60);
  EXPECT_DOUBLE_EQ(*closed_form_bubble_fraction(spec(ScheduleKind::kZbH1, 4, 8), {1, 1, 1}),
                   3.0 / 27.0);
}

TEST(ClosedForm, NoneOutsideItsConditions) {
  EXPECT_FALSE(closed_form_makespan(spec(ScheduleKind::kZbH1, 4, 3), {1, 1, 1}));  // m < pp
  EXPECT_FALSE(closed_form_makespan(spec(ScheduleKind::kZbH1, 4, 8), {1, 1, 2}));  // w > f
  EXPECT_FALSE(closed_form_makespan(spec(ScheduleKind::kInterleaved, 4, 6, 2), {1, 2, 0}));
  EXPECT_FALSE(closed_form_bubble_fraction(spec(ScheduleKind::k1F1B, 0, 8), {1, 2, 0}));
}

}  // namespace
}  // namespace mplan
