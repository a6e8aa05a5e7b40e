// EventQueue: pops in (time, push order); equal times come out in push order.
#include "sim/des/event_queue.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

namespace mplan::des {
namespace {

TEST(EventQueue, EqualTimesPopInPushOrder) {
  EventQueue q;
  q.push(5, 10);
  q.push(3, 11);
  q.push(5, 12);
  q.push(3, 13);
  q.push(5, 14);
  std::vector<int32_t> got;
  while (!q.empty()) got.push_back(q.pop().op());
  EXPECT_EQ(got, (std::vector<int32_t>{11, 13, 10, 12, 14}));
}

TEST(EventQueue, MatchesAStableSortUnderInterleavedPushAndPop) {
  // Reference: the pending events kept in a list, smallest (time, seq) removed each pop.
  std::mt19937 rng(7);
  EventQueue q;
  struct Ref {
    int64_t t;
    uint64_t seq;
    int32_t op;
  };
  std::vector<Ref> ref;
  uint64_t seq = 0;
  int32_t next_op = 0;
  for (int step = 0; step < 5000; ++step) {
    if (ref.empty() || rng() % 3 != 0) {
      int64_t t = static_cast<int64_t>(rng() % 20);  // many ties
      q.push(t, next_op);
      ref.push_back({t, seq++, next_op++});
    } else {
      auto it = std::min_element(ref.begin(), ref.end(), [](const Ref& a, const Ref& b) {
        return a.t < b.t || (a.t == b.t && a.seq < b.seq);
      });
      Event e = q.pop();
      ASSERT_EQ(e.time_ns, it->t);
      ASSERT_EQ(e.op(), it->op);
      ref.erase(it);
    }
  }
  EXPECT_EQ(q.size(), ref.size());
}

TEST(EventQueue, PopFromEmptyIsAnInternalError) {
  EventQueue q;
  EXPECT_THROW(q.pop(), InternalError);
}

}  // namespace
}  // namespace mplan::des
