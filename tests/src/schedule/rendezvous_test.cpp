// Send/receive matching by position and the blocking-group progress engine.
#include "src/schedule/rendezvous.hpp"

#include <gtest/gtest.h>

namespace mplan {
namespace {

using K = ActionKind;

Action F(int mb) { return compute_action(K::kForward, mb, 0); }
Action B(int mb) { return compute_action(K::kBackward, mb, 0); }
Action P(K k, int mb, int peer, bool end = true) { return p2p_action(k, mb, 0, peer, end); }

ScheduleSpec two_stages(int64_t m) {
  ScheduleSpec s;
  s.pp = 2;
  s.microbatches = m;
  return s;
}

TEST(Rendezvous, MatchesKthSendWithKthReceive) {
  // rank 0: F0 [sf0] F1 [sf1] [rb0] B0 [rb1] B1; rank 1: [rf0] F0 [rf1] F1 B0 [sb0] B1 [sb1].
  const Schedule s =
      schedule_from_ranks(two_stages(2), false,
                          {{F(0), P(K::kSendForward, 0, 1), F(1), P(K::kSendForward, 1, 1),
                            P(K::kRecvBackward, 0, 1), B(0), P(K::kRecvBackward, 1, 1), B(1)},
                           {P(K::kRecvForward, 0, 0), F(0), P(K::kRecvForward, 1, 0), F(1), B(0),
                            P(K::kSendBackward, 0, 0), B(1), P(K::kSendBackward, 1, 0)}});
  const std::vector<int64_t> partner = match_p2p(s);
  // Flat indices: rank 0 is 0..7, rank 1 is 8..15.
  EXPECT_EQ(partner[1], 8);  // sf0 <-> rf0
  EXPECT_EQ(partner[8], 1);
  EXPECT_EQ(partner[3], 10);  // sf1 <-> rf1
  EXPECT_EQ(partner[4], 13);  // rb0 <-> sb0
  EXPECT_EQ(partner[6], 15);  // rb1 <-> sb1
  EXPECT_EQ(partner[0], -1);  // compute

  // Costs F 1, B 2, by hand: rank 0 F0 0..1, sf0 meets rf0 (posted at 0) at 1, F1 1..2;
  // rank 1 F0 1..2, rf1 and sf1 both posted at 2; rank 1 F1 2..3, B0 3..5, sb0 at 5 meets rb0
  // (posted at 2); rank 0 B0 5..7; rank 1 B1 5..7, sb1 at 7; rank 0 B1 7..9.
  const RendezvousRun run =
      run_rendezvous(s, partner, [](const Action& a) { return a.kind == K::kForward ? 1.0 : 2.0; });
  ASSERT_TRUE(run.completed);
  EXPECT_EQ(run.end[2], 2.0);    // rank 0 F1
  EXPECT_EQ(run.start[3], 2.0);  // sf1 posted
  EXPECT_EQ(run.end[3], 2.0);    // and met at once
  EXPECT_EQ(run.start[4], 2.0);  // rb0 posted at 2 ...
  EXPECT_EQ(run.end[4], 5.0);    // ... completes when rank 1 posts sb0
  EXPECT_EQ(run.start[13], 5.0);
  EXPECT_EQ(run.end[15], 7.0);
  EXPECT_EQ(run.start[7], 7.0);  // rank 0 B1
  EXPECT_EQ(run.end[7], 9.0);
}

TEST(Rendezvous, ReportsWhereRanksWaitForever) {
  const Schedule s =
      schedule_from_ranks(two_stages(1), false,
                          {{F(0), P(K::kSendForward, 0, 1), P(K::kRecvBackward, 0, 1), B(0)},
                           {P(K::kRecvForward, 0, 0), F(0), B(0), P(K::kSendBackward, 0, 0)}});
  const RendezvousRun ok = run_rendezvous(s, match_p2p(s), [](const Action&) { return 1.0; });
  EXPECT_TRUE(ok.completed);

  // Both ranks send first, each send in its own group: neither receive is ever posted.
  const Schedule bad =
      schedule_from_ranks(two_stages(1), false,
                          {{F(0), P(K::kSendForward, 0, 1), P(K::kRecvBackward, 0, 1), B(0)},
                           {P(K::kSendBackward, 0, 0), P(K::kRecvForward, 0, 0), F(0), B(0)}});
  const RendezvousRun run = run_rendezvous(bad, match_p2p(bad), [](const Action&) { return 1.0; });
  EXPECT_FALSE(run.completed);
  EXPECT_EQ(run.stuck, (std::vector<int64_t>{1, 4}));
}

}  // namespace
}  // namespace mplan
