// Engine semantics on hand-built programs: in-order streams, waits, rendezvous (send/recv and
// collectives), the rendezvous cost callback, memory peaks over the timeline, and determinism.
// Every expected time below is worked out by hand from the ops' durations.
#include "sim/des/engine.hpp"

#include <gtest/gtest.h>

#include "src/common/error.hpp"

#include "sim/des/synthetic_pipeline.hpp"

namespace mplan::des {
namespace {

TEST(Engine, EmptyProgramCompletesAtZero) {
  Program p(2, 2);
  SimResult r = simulate(p);
  EXPECT_TRUE(r.completed);
  EXPECT_EQ(r.makespan_ns, 0);
}

TEST(Engine, StreamRunsItsOpsOneAfterAnotherInOrder) {
  Program p(1, 2);
  OpId a = p.add_op(0, 0, 10);
  OpId b = p.add_op(0, 0, 0);
  OpId c = p.add_op(0, 0, 5);
  OpId d = p.add_op(0, 1, 7);  // another stream: runs concurrently from t=0
  SimResult r = simulate(p);
  ASSERT_TRUE(r.completed);
  EXPECT_EQ(r.ops[a].start_ns, 0);
  EXPECT_EQ(r.ops[a].end_ns, 10);
  EXPECT_EQ(r.ops[b].start_ns, 10);
  EXPECT_EQ(r.ops[b].end_ns, 10);
  EXPECT_EQ(r.ops[c].start_ns, 10);
  EXPECT_EQ(r.ops[c].end_ns, 15);
  EXPECT_EQ(r.ops[d].start_ns, 0);
  EXPECT_EQ(r.ops[d].end_ns, 7);
  EXPECT_EQ(r.makespan_ns, 15);
  EXPECT_EQ(r.rank_end_ns[0], 15);
}

TEST(Engine, WaitHoldsAnOpAndEverythingBehindItInItsStream) {
  Program p(2, 2);
  OpId a = p.add_op(0, 0, 30);  // rank 0 compute
  OpId b = p.add_op(0, 1, 5);   // rank 0 comm: waits on a
  OpId c = p.add_op(0, 1, 5);   // behind b in the same stream
  OpId d = p.add_op(1, 0, 4);   // rank 1: waits on b (cross-rank event)
  p.add_wait(b, a);
  p.add_wait(d, b);
  SimResult r = simulate(p);
  ASSERT_TRUE(r.completed);
  EXPECT_EQ(r.ops[b].ready_ns, 30);
  EXPECT_EQ(r.ops[b].start_ns, 30);
  EXPECT_EQ(r.ops[c].start_ns, 35);
  EXPECT_EQ(r.ops[d].start_ns, 35);
  EXPECT_EQ(r.ops[d].end_ns, 39);
  EXPECT_EQ(r.rank_end_ns[0], 40);
  EXPECT_EQ(r.rank_end_ns[1], 39);
}

TEST(Engine, OpWaitingOnSeveralOpsStartsAfterTheLast) {
  Program p(1, 3);
  OpId a = p.add_op(0, 0, 12);
  OpId b = p.add_op(0, 1, 20);
  OpId c = p.add_op(0, 2, 1);
  p.add_wait(c, a);
  p.add_wait(c, b);
  SimResult r = simulate(p);
  EXPECT_EQ(r.ops[c].start_ns, 20);
}

TEST(Engine, SendAndRecvStartTogetherWhenBothHaveArrived) {
  Program p(2, 2);
  OpId busy0 = p.add_op(0, 0, 10);
  OpId busy1 = p.add_op(1, 0, 30);
  RendezvousId rv = p.add_rendezvous(2, 8);
  OpId send = p.add_send(0, 0, rv);  // reaches the head at t=10
  OpId recv = p.add_recv(1, 0, rv);  // reaches the head at t=30
  OpId after = p.add_op(0, 0, 1);    // behind the send on rank 0
  SimResult r = simulate(p);
  ASSERT_TRUE(r.completed);
  EXPECT_EQ(r.ops[busy0].end_ns, 10);
  EXPECT_EQ(r.ops[busy1].end_ns, 30);
  EXPECT_EQ(r.ops[send].ready_ns, 10);
  EXPECT_EQ(r.ops[send].start_ns, 30);
  EXPECT_EQ(r.ops[recv].ready_ns, 30);
  EXPECT_EQ(r.ops[recv].start_ns, 30);
  EXPECT_EQ(r.ops[send].end_ns, 38);
  EXPECT_EQ(r.ops[recv].end_ns, 38);
  EXPECT_EQ(r.ops[after].start_ns, 38);  // the stream is held while the send waits and runs
}

TEST(Engine, RendezvousMemberWithAWaitArrivesOnlyWhenTheWaitIsSatisfied) {
  Program p(2, 2);
  OpId compute = p.add_op(0, 0, 25);
  RendezvousId rv = p.add_rendezvous(2, 5);
  OpId send = p.add_send(0, 1, rv);  // on a comm stream, idle, but waits on compute
  OpId recv = p.add_recv(1, 1, rv);  // ready at t=0
  p.add_wait(send, compute);
  SimResult r = simulate(p);
  EXPECT_EQ(r.ops[send].ready_ns, 25);
  EXPECT_EQ(r.ops[recv].ready_ns, 0);
  EXPECT_EQ(r.ops[recv].start_ns, 25);
  EXPECT_EQ(r.ops[recv].end_ns, 30);
}

TEST(Engine, CollectiveStartsWhenTheLastMemberArrives) {
  Program p(4, 1);
  RendezvousId rv = p.add_rendezvous(4, 100);
  OpId m[4];
  for (int32_t r = 0; r < 4; ++r) {
    p.add_op(r, 0, 10 * (r + 1));  // ranks arrive at 10, 20, 30, 40
    m[r] = p.join(r, 0, rv, OpKind::kCollective);
  }
  SimResult res = simulate(p);
  ASSERT_TRUE(res.completed);
  for (int32_t r = 0; r < 4; ++r) {
    EXPECT_EQ(res.ops[m[r]].ready_ns, 10 * (r + 1));
    EXPECT_EQ(res.ops[m[r]].start_ns, 40);
    EXPECT_EQ(res.ops[m[r]].end_ns, 140);
  }
}

int64_t cost_from_ctx(void* ctx, const Program& p, RendezvousId rv, int64_t now) {
  auto* calls = static_cast<int*>(ctx);
  ++*calls;
  // A cost that depends on the group and the start time: 1000 per member + now / 10.
  return 1000 * p.rendezvous()[rv].expected_members + now / 10;
}

TEST(Engine, CallbackGivesTheDurationOfARendezvousWhenItStarts) {
  Program p(3, 1);
  RendezvousId rv = p.add_rendezvous(3, kDurationFromCallback);
  p.add_op(2, 0, 500);
  OpId m0 = p.join(0, 0, rv, OpKind::kCollective);
  p.join(1, 0, rv, OpKind::kCollective);
  p.join(2, 0, rv, OpKind::kCollective);
  int calls = 0;
  RunOptions opt;
  opt.cost_fn = cost_from_ctx;
  opt.cost_ctx = &calls;
  SimResult r = simulate(p, opt);
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(r.ops[m0].start_ns, 500);
  EXPECT_EQ(r.ops[m0].end_ns, 500 + 3000 + 50);
  // Without a callback this is a broken invariant, not a silent default.
  EXPECT_THROW(simulate(p), InternalError);
}

TEST(Engine, IncompleteRendezvousIsAnInternalError) {
  Program p(2, 1);
  RendezvousId rv = p.add_rendezvous(2, 1);
  p.add_send(0, 0, rv);
  EXPECT_THROW(simulate(p), InternalError);
}

TEST(Engine, PeakMemoryFollowsTheTimeline) {
  // Rank 0: weights 100 (initial), then A allocates 50 for [0, 10), B allocates 70 at 10 and
  // frees it at 30; C on another stream holds 40 during [5, 20). Totals: 150 on [0,5), 190 on
  // [5,10), then A frees 50 and B takes 70 at t=10 -> 210 on [10,20), 170 on [20,30), 100 after.
  Program p(1, 2);
  p.set_initial_memory(0, 0, 100);
  OpId a = p.add_op(0, 0, 10);
  OpId b = p.add_op(0, 0, 20);
  OpId idle = p.add_op(0, 1, 5);
  OpId c = p.add_op(0, 1, 15);
  (void)idle;
  p.add_memory(a, MemWhen::kAtStart, 1, 50);
  p.add_memory(a, MemWhen::kAtEnd, 1, -50);
  p.add_memory(b, MemWhen::kAtStart, 1, 70);
  p.add_memory(b, MemWhen::kAtEnd, 1, -70);
  p.add_memory(c, MemWhen::kAtStart, 2, 40);
  p.add_memory(c, MemWhen::kAtEnd, 2, -40);
  RunOptions opt;
  opt.record_memory_timeline = true;
  SimResult r = simulate(p, opt);
  const RankMemory& m = r.memory[0];
  EXPECT_EQ(m.peak_bytes, 210);
  EXPECT_EQ(m.peak_time_ns, 10);
  EXPECT_EQ(m.at_peak[0], 100);
  EXPECT_EQ(m.at_peak[1], 70);
  EXPECT_EQ(m.at_peak[2], 40);
  EXPECT_EQ(m.final_bytes[0], 100);
  EXPECT_EQ(m.final_bytes[1], 0);
  EXPECT_EQ(m.final_bytes[2], 0);
  // Every change, in time order: +50@0, +40@5, -50@10, +70@10, -40@20, -70@30.
  ASSERT_EQ(m.timeline.size(), 6u);
  EXPECT_EQ(m.timeline[2].time_ns, 10);
  EXPECT_EQ(m.timeline[2].bytes, 140);  // the free at t=10 comes before the allocation at t=10
  EXPECT_EQ(m.timeline[3].bytes, 210);
  EXPECT_EQ(m.timeline[5].bytes, 100);
}

TEST(Engine, FreesAtAnInstantComeBeforeAllocationsAtThatInstant) {
  // Two ranks' worth of pattern on one rank: X frees 80 at t=10 on stream 0 while Y, on stream 1,
  // waits for an op that also ends at t=10 and allocates 80 when it starts. Had Y's allocation
  // come first, the peak would be 160.
  Program p(1, 3);
  OpId x = p.add_op(0, 0, 10);
  OpId gate = p.add_op(0, 2, 10);
  OpId y = p.add_op(0, 1, 5);
  p.add_wait(y, gate);
  p.add_memory(x, MemWhen::kAtStart, 0, 80);
  p.add_memory(x, MemWhen::kAtEnd, 0, -80);
  p.add_memory(y, MemWhen::kAtStart, 0, 80);
  p.add_memory(y, MemWhen::kAtEnd, 0, -80);
  SimResult r = simulate(p);
  EXPECT_EQ(r.ops[y].start_ns, 10);
  EXPECT_EQ(r.memory[0].peak_bytes, 80);
  EXPECT_EQ(r.memory[0].peak_time_ns, 0);
}

TEST(Engine, RunsAreDeterministicAndEngineReuseGivesTheSameResult) {
  SyntheticPipeline s;
  s.stages = 4;
  s.microbatches = 6;
  s.layers_per_stage = 2;
  s.forward_ns = 7;
  s.backward_ns = 13;
  s.p2p_ns = 3;
  s.tp_collective_ns = 2;
  s.dp_reduce_ns = 11;
  s.optimizer_ns = 5;
  s.activation_bytes = 1000;
  Program p;
  build_synthetic_1f1b(s, p);
  Engine e;
  SimResult r1, r2;
  e.run(p, r1);
  Program other(1, 1);
  other.add_op(0, 0, 99);
  SimResult scratch;
  e.run(other, scratch);  // a different program in between
  e.run(p, r2);
  ASSERT_TRUE(r1.completed);
  ASSERT_EQ(r1.ops.size(), r2.ops.size());
  for (size_t i = 0; i < r1.ops.size(); ++i) {
    EXPECT_EQ(r1.ops[i].ready_ns, r2.ops[i].ready_ns) << i;
    EXPECT_EQ(r1.ops[i].start_ns, r2.ops[i].start_ns) << i;
    EXPECT_EQ(r1.ops[i].end_ns, r2.ops[i].end_ns) << i;
  }
  EXPECT_EQ(r1.makespan_ns, r2.makespan_ns);
  EXPECT_EQ(scratch.makespan_ns, 99);
}

TEST(Engine, FusedChainsGiveTheSameTimesAndMemoryAsOneEventPerOp) {
  SyntheticPipeline s;
  s.stages = 4;
  s.microbatches = 9;
  s.layers_per_stage = 3;
  s.forward_ns = 101;
  s.backward_ns = 203;
  s.p2p_ns = 17;
  s.tp_collective_ns = 5;
  s.dp_reduce_ns = 300;
  s.optimizer_ns = 50;
  s.activation_bytes = 1 << 20;
  Program p;
  build_synthetic_1f1b(s, p);
  RunOptions fused, plain;
  plain.fuse_chains = false;
  SimResult a = simulate(p, fused), b = simulate(p, plain);
  ASSERT_TRUE(a.completed && b.completed);
  EXPECT_EQ(a.makespan_ns, b.makespan_ns);
  for (size_t i = 0; i < a.ops.size(); ++i) {
    EXPECT_EQ(a.ops[i].ready_ns, b.ops[i].ready_ns) << i;
    EXPECT_EQ(a.ops[i].start_ns, b.ops[i].start_ns) << i;
    EXPECT_EQ(a.ops[i].end_ns, b.ops[i].end_ns) << i;
  }
  for (int32_t r = 0; r < s.stages; ++r) {
    EXPECT_EQ(a.memory[r].peak_bytes, b.memory[r].peak_bytes);
    EXPECT_EQ(a.memory[r].peak_time_ns, b.memory[r].peak_time_ns);
    EXPECT_EQ(a.rank_end_ns[r], b.rank_end_ns[r]);
  }
}

}  // namespace
}  // namespace mplan::des
