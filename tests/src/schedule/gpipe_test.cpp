// GPipe: all forwards, then all backwards, each pass between its own receive and send.
#include <gtest/gtest.h>

#include "src/common/error.hpp"

#include "src/schedule/schedule.hpp"
#include "src/schedule/validate.hpp"
#include "tests/src/schedule/schedule_test_util.hpp"

namespace mplan {
namespace {

Schedule gpipe(int64_t pp, int64_t m) { return test::make(ScheduleKind::kGpipe, pp, m); }

TEST(Gpipe, FullOrderPp3M2) {
  const Schedule s = gpipe(3, 2);
  EXPECT_EQ(test::full_order(s, 0), "F0 [sf0>1] F1 [sf1>1] [rb0<1] B0 [rb1<1] B1");
  EXPECT_EQ(test::full_order(s, 1),
            "[rf0<0] F0 [sf0>2] [rf1<0] F1 [sf1>2] [rb0<2] B0 [sb0>0] [rb1<2] B1 [sb1>0]");
  EXPECT_EQ(test::full_order(s, 2), "[rf0<1] F0 [rf1<1] F1 B0 [sb0>1] B1 [sb1>1]");
  EXPECT_EQ(s.warmup, (std::vector<int64_t>{2, 2, 2}));
}

TEST(Gpipe, OrdersForTheGrid) {
  for (int64_t pp : {2, 4, 8})
    for (int64_t m : {pp, 2 * pp, 4 * pp, pp + 1}) {
      const Schedule s = gpipe(pp, m);
      std::string want;
      for (int64_t i = 0; i < m; ++i) want += cat(i ? " F" : "F", i);
      for (int64_t i = 0; i < m; ++i) want += cat(" B", i);
      for (int64_t r = 0; r < pp; ++r) EXPECT_EQ(test::compute_order(s, r), want);
      EXPECT_FALSE(validate(s).has_value()) << "pp " << pp << " m " << m;
    }
}

}  // namespace
}  // namespace mplan
