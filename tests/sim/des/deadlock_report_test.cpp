// Deadlock reports: the engine stops with a report naming each stuck op and what it waits on.
#include "sim/des/deadlock_report.hpp"

#include <gtest/gtest.h>

#include "sim/des/engine.hpp"

namespace mplan::des {
namespace {

TEST(DeadlockReport, TwoRanksThatBothSendFirst) {
  // Each rank sends to the other, then receives, on one stream: both sends wait at their
  // rendezvous for a recv that sits behind the other rank's send.
  Program p(2, 1);
  p.set_stream_name(0, "pp");
  uint16_t send = p.intern_name("send_fwd");
  uint16_t recv = p.intern_name("recv_fwd");
  RendezvousId a_to_b = p.add_rendezvous(2, 10);
  RendezvousId b_to_a = p.add_rendezvous(2, 10);
  OpId s0 = p.add_send(0, 0, a_to_b, {send, 3, -1});
  OpId r0 = p.add_recv(0, 0, b_to_a, {recv, 3, -1});
  OpId s1 = p.add_send(1, 0, b_to_a, {send, 3, -1});
  OpId r1 = p.add_recv(1, 0, a_to_b, {recv, 3, -1});
  SimResult r = simulate(p);
  ASSERT_FALSE(r.completed);
  const DeadlockReport& d = r.deadlock;
  EXPECT_EQ(d.ops_done, 0);
  EXPECT_EQ(d.ops_total, 4);
  ASSERT_EQ(d.blocked.size(), 2u);
  EXPECT_EQ(d.blocked[0].op, s0);
  EXPECT_TRUE(d.blocked[0].at_rendezvous);
  EXPECT_EQ(d.blocked[0].waiting_for, std::vector<OpId>{r1});
  EXPECT_EQ(d.blocked[1].op, s1);
  EXPECT_EQ(d.blocked[1].waiting_for, std::vector<OpId>{r0});
  std::string text = describe(d, p);
  EXPECT_NE(text.find("deadlock at t=0 ns: 0 of 4 ops ran; 2 streams stuck"), std::string::npos)
      << text;
  EXPECT_NE(text.find("rank 0 stream 'pp' op 0 send_fwd mb 3 (send) waits at its rendezvous for "
                      "rank 1 stream 'pp' op 3 recv_fwd mb 3 (recv) [its stream is at op 2 "
                      "send_fwd]"),
            std::string::npos)
      << text;
}

TEST(DeadlockReport, WaitOnALaterOpOfTheSameStream) {
  Program p(1, 2);
  OpId first = p.add_op(0, 0, 5);
  OpId a = p.add_op(0, 1, 5);
  OpId b = p.add_op(0, 1, 5);
  p.add_wait(a, b);  // a can never start: b is behind it
  SimResult r = simulate(p);
  ASSERT_FALSE(r.completed);
  EXPECT_EQ(r.deadlock.time_ns, 5);  // `first` still ran
  EXPECT_EQ(r.deadlock.ops_done, 1);
  ASSERT_EQ(r.deadlock.blocked.size(), 1u);
  EXPECT_EQ(r.deadlock.blocked[0].op, a);
  EXPECT_FALSE(r.deadlock.blocked[0].at_rendezvous);
  EXPECT_EQ(r.deadlock.blocked[0].waiting_for, std::vector<OpId>{b});
  EXPECT_EQ(r.ops[first].end_ns, 5);
  EXPECT_NE(describe(r.deadlock, p)
                .find("rank 0 stream 'stream 1' op 1 op waits for rank 0 "
                      "stream 'stream 1' op 2 op"),
            std::string::npos)
      << describe(r.deadlock, p);
}

TEST(DeadlockReport, CollectiveMissingAMemberListsIt) {
  Program p(3, 1);
  RendezvousId rv = p.add_rendezvous(3, 1);
  RendezvousId never = p.add_rendezvous(2, 1);
  p.join(0, 0, rv, OpKind::kCollective);
  p.join(1, 0, rv, OpKind::kCollective);
  OpId stuck = p.add_send(2, 0, never);  // rank 2 is stuck before its member
  p.add_recv(2, 0, never);               // same stream: never reached
  OpId m2 = p.join(2, 0, rv, OpKind::kCollective);
  SimResult r = simulate(p);
  ASSERT_FALSE(r.completed);
  ASSERT_EQ(r.deadlock.blocked.size(), 3u);
  EXPECT_EQ(r.deadlock.blocked[0].waiting_for, std::vector<OpId>{m2});
  EXPECT_EQ(r.deadlock.blocked[2].op, stuck);
  EXPECT_EQ(r.deadlock.stream_heads[2], stuck);
}

TEST(DeadlockReport, LongReportsAreCut) {
  Program p(5, 1);
  for (int32_t r = 0; r < 5; ++r) p.add_send(r, 0, p.add_rendezvous(2, 1));
  for (int32_t r = 0; r < 5; ++r) p.add_recv(r, 0, r);  // never reached
  SimResult res = simulate(p);
  std::string text = describe(res.deadlock, p, 2);
  EXPECT_NE(text.find("... and 3 more"), std::string::npos) << text;
}

}  // namespace
}  // namespace mplan::des
