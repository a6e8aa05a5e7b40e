// 1F1B and ZB-H1 orders against hand derivations from Megatron-LM's
// forward_backward_pipelining_without_interleaving and the ZB-H1 authors' patch to it.
#include <gtest/gtest.h>

#include "src/common/error.hpp"

#include <algorithm>
#include <string>

#include "src/schedule/schedule.hpp"
#include "src/schedule/validate.hpp"
#include "tests/src/schedule/schedule_test_util.hpp"

namespace mplan {
namespace {

using test::compute_order;
using test::full_order;
using test::make;

// Megatron: warm-up of min(pp - r - 1, m) forwards, then (F, B) pairs, then the rest of the Bs.
std::string megatron_1f1b_order(int64_t pp, int64_t m, int64_t r) {
  const int64_t w = std::min(pp - r - 1, m);
  std::string s;
  auto add = [&](const std::string& x) { s += cat(s.empty() ? "" : " ", x); };
  for (int64_t i = 0; i < w; ++i) add(cat("F", i));
  for (int64_t i = 0; i < m - w; ++i) {
    add(cat("F", w + i));
    add(cat("B", i));
  }
  for (int64_t i = m - w; i < m; ++i) add(cat("B", i));
  return s;
}

TEST(OneFOneB, IssueExampleRank0) {
  EXPECT_EQ(compute_order(make(ScheduleKind::k1F1B, 4, 8), 0),
            "F0 F1 F2 F3 B0 F4 B1 F5 B2 F6 B3 F7 B4 B5 B6 B7");
}

TEST(OneFOneB, AllRanksPp4M8) {
  const Schedule s = make(ScheduleKind::k1F1B, 4, 8);
  EXPECT_EQ(compute_order(s, 1), "F0 F1 F2 B0 F3 B1 F4 B2 F5 B3 F6 B4 F7 B5 B6 B7");
  EXPECT_EQ(compute_order(s, 2), "F0 F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 F6 B5 F7 B6 B7");
  EXPECT_EQ(compute_order(s, 3), "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 F6 B6 F7 B7");
  EXPECT_EQ(s.warmup, (std::vector<int64_t>{3, 2, 1, 0}));
}

TEST(OneFOneB, FewerMicrobatchesThanStages) {
  // m < pp: rank 0's warm-up is cut to m, so it runs all forwards, then all backwards.
  const Schedule s = make(ScheduleKind::k1F1B, 4, 2);
  EXPECT_EQ(compute_order(s, 0), "F0 F1 B0 B1");
  EXPECT_EQ(compute_order(s, 2), "F0 F1 B0 B1");
  EXPECT_EQ(compute_order(s, 3), "F0 B0 F1 B1");
  EXPECT_EQ(s.warmup, (std::vector<int64_t>{2, 2, 1, 0}));
}

TEST(OneFOneB, OrdersForTheGrid) {
  for (int64_t pp : {2, 4, 8})
    for (int64_t m : {pp, 2 * pp, 4 * pp, pp + 1, 2 * pp + 3}) {
      const Schedule s = make(ScheduleKind::k1F1B, pp, m);
      for (int64_t r = 0; r < pp; ++r)
        EXPECT_EQ(compute_order(s, r), megatron_1f1b_order(pp, m, r))
            << "pp " << pp << " m " << m << " rank " << r;
      EXPECT_FALSE(validate(s).has_value()) << "pp " << pp << " m " << m;
    }
}

// Every action of pp 3, m 3, worked through Megatron's loop by hand: recv_forward before each
// warm-up F, send_forward after; one recv_forward before the steady phase;
// send_forward_recv_backward after each steady F; send_backward_recv_forward after each steady B
// (send_backward after the last); recv_backward / send_backward around each cool-down B.
TEST(OneFOneB, P2pPlacementPp3M3) {
  const Schedule s = make(ScheduleKind::k1F1B, 3, 3);
  EXPECT_EQ(full_order(s, 0), "F0 [sf0>1] F1 [sf1>1] F2 [sf2>1 rb0<1] B0 [rb1<1] B1 [rb2<1] B2");
  EXPECT_EQ(full_order(s, 1),
            "[rf0<0] F0 [sf0>2] [rf1<0] F1 [sf1>2 rb0<2] B0 [rf2<0 sb0>0] F2 [sf2>2 rb1<2] B1 "
            "[sb1>0] [rb2<2] B2 [sb2>0]");
  EXPECT_EQ(full_order(s, 2), "[rf0<1] F0 B0 [rf1<1 sb0>1] F1 B1 [rf2<1 sb1>1] F2 B2 [sb2>1]");
}

TEST(OneFOneB, SingleStageHasNoP2p) {
  const Schedule s = make(ScheduleKind::k1F1B, 1, 3);
  EXPECT_EQ(full_order(s, 0), "F0 B0 F1 B1 F2 B2");
}

TEST(OneFOneB, ActionCount) {
  // 2 pp m passes; at each of the pp-1 stage boundaries, 4 transfers per micro-batch.
  for (int64_t pp : {1, 2, 5, 8})
    for (int64_t m : {1, 3, 16}) {
      const Schedule s = make(ScheduleKind::k1F1B, pp, m);
      EXPECT_EQ(static_cast<int64_t>(s.actions.size()), 2 * pp * m + 4 * (pp - 1) * m);
      EXPECT_FALSE(s.split_backward);
    }
}

// ZB-H1, pp 4, m 8, by hand from the patch: rank r > 0 splits B/W for steady steps i < r, the
// last steady step and the cool-down; deferred Ws run oldest first after the last steady
// send_backward (i >= r), after each cool-down send_backward, and at the end.
TEST(ZbH1, OrdersPp4M8) {
  const Schedule s = make(ScheduleKind::kZbH1, 4, 8);
  EXPECT_TRUE(s.split_backward);
  EXPECT_EQ(compute_order(s, 0),
            "F0 F1 F2 F3 B0 W0 F4 B1 W1 F5 B2 W2 F6 B3 W3 F7 B4 W4 B5 W5 B6 W6 B7 W7");
  EXPECT_EQ(compute_order(s, 1),
            "F0 F1 F2 B0 F3 B1 W1 F4 B2 W2 F5 B3 W3 F6 B4 W4 F7 B5 W0 B6 W5 B7 W6 W7");
  EXPECT_EQ(compute_order(s, 2),
            "F0 F1 B0 F2 B1 F3 B2 W2 F4 B3 W3 F5 B4 W4 F6 B5 W5 F7 B6 W0 B7 W1 W6 W7");
  EXPECT_EQ(compute_order(s, 3),
            "F0 B0 F1 B1 F2 B2 F3 B3 W3 F4 B4 W4 F5 B5 W5 F6 B6 W6 F7 B7 W0 W1 W2 W7");
  EXPECT_EQ(s.warmup, (std::vector<int64_t>{3, 2, 1, 0}));
}

TEST(ZbH1, FewMicrobatches) {
  const Schedule s = make(ScheduleKind::kZbH1, 4, 3);
  EXPECT_EQ(compute_order(s, 0), "F0 F1 F2 B0 W0 B1 W1 B2 W2");
  EXPECT_EQ(compute_order(s, 1), "F0 F1 F2 B0 B1 W0 B2 W1 W2");
  EXPECT_EQ(compute_order(s, 2), "F0 F1 B0 F2 B1 B2 W0 W1 W2");
  EXPECT_EQ(compute_order(s, 3), "F0 B0 F1 B1 F2 B2 W0 W1 W2");
}

TEST(ZbH1, CoolDownWWaitsForRank) {
  // pp 8, m 2: on rank 5 (w = 2, no steady step) m - w + i >= 5 never holds in the cool-down, so
  // both Ws run at the end; rank 1 runs W0 after its last cool-down send_backward.
  const Schedule s = make(ScheduleKind::kZbH1, 8, 2);
  EXPECT_EQ(compute_order(s, 5), "F0 F1 B0 B1 W0 W1");
  EXPECT_EQ(compute_order(s, 0), "F0 F1 B0 W0 B1 W1");
  EXPECT_EQ(full_order(s, 1),
            "[rf0<0] F0 [sf0>2] [rf1<0] F1 [sf1>2] [rb0<2] B0 [sb0>0] "
            "[rb1<2] B1 [sb1>0] W0 W1");
}

TEST(ZbH1, SameP2pAs1F1B) {
  // The W passes are local: without them, ZB-H1 is 1F1B action for action.
  for (int64_t pp : {2, 3, 4, 8})
    for (int64_t m : {int64_t{1}, pp - 1, pp, 2 * pp + 1}) {
      if (m < 1) continue;
      const Schedule zb = make(ScheduleKind::kZbH1, pp, m);
      const Schedule ref = make(ScheduleKind::k1F1B, pp, m);
      std::vector<Action> without_w;
      for (const Action& a : zb.actions)
        if (a.kind != ActionKind::kWeightGrad) without_w.push_back(a);
      EXPECT_EQ(without_w, ref.actions) << "pp " << pp << " m " << m;
      EXPECT_FALSE(validate(zb).has_value()) << "pp " << pp << " m " << m;
    }
}

TEST(ForwardOnly, NonInterleavedIsMegatronsAllWarmupLoop) {
  // forward_backward_pipelining_without_interleaving(forward_only=True): every micro-batch is a
  // warm-up step — recv_forward, forward, send_forward — and nothing follows. GPipe and ZB-H1 run
  // the same order (Megatron has one non-interleaved function).
  for (ScheduleKind k : {ScheduleKind::k1F1B, ScheduleKind::kGpipe, ScheduleKind::kZbH1}) {
    const Schedule s = test::make_forward_only(k, 3, 2);
    EXPECT_TRUE(s.spec.forward_only);
    EXPECT_FALSE(s.split_backward);
    EXPECT_EQ(full_order(s, 0), "F0 [sf0>1] F1 [sf1>1]") << to_string(k);
    EXPECT_EQ(full_order(s, 1), "[rf0<0] F0 [sf0>2] [rf1<0] F1 [sf1>2]") << to_string(k);
    EXPECT_EQ(full_order(s, 2), "[rf0<1] F0 [rf1<1] F1") << to_string(k);
    EXPECT_EQ(s.warmup, (std::vector<int64_t>{2, 2, 2}));
    EXPECT_FALSE(validate(s).has_value()) << to_string(*validate(s));
  }
  // One stage: the forwards alone.
  EXPECT_EQ(full_order(test::make_forward_only(ScheduleKind::k1F1B, 1, 3), 0), "F0 F1 F2");
}

TEST(ForwardOnly, IsTheTrainingScheduleWithoutItsBackward) {
  // Every rank's forwards in micro-batch order, and exactly the forward transfers of training.
  for (int64_t pp : {1, 2, 4, 8})
    for (int64_t m : {int64_t{1}, pp, 2 * pp + 1}) {
      const Schedule fo = test::make_forward_only(ScheduleKind::k1F1B, pp, m);
      const Schedule train = make(ScheduleKind::k1F1B, pp, m);
      EXPECT_FALSE(validate(fo).has_value()) << "pp " << pp << " m " << m;
      for (int64_t r = 0; r < pp; ++r) {
        std::string want;
        for (int64_t i = 0; i < m; ++i) want += cat(i ? " " : "", "F", i);
        EXPECT_EQ(compute_order(fo, r), want);
        int64_t fwd_transfers = 0, train_fwd_transfers = 0;
        for (const Action& a : fo.rank(r)) fwd_transfers += is_p2p(a.kind);
        for (const Action& a : train.rank(r))
          train_fwd_transfers +=
              a.kind == ActionKind::kSendForward || a.kind == ActionKind::kRecvForward;
        EXPECT_EQ(fwd_transfers, train_fwd_transfers) << "pp " << pp << " m " << m << " r " << r;
      }
    }
}

}  // namespace
}  // namespace mplan
