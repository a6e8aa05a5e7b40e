// validate(schedule): every generated schedule passes; hand-broken ones are caught with the
// first violation named (missing backward, swapped send/receive, wrong tensor, wrong peer, ...).
#include "src/schedule/validate.hpp"

#include <gtest/gtest.h>

#include "src/common/error.hpp"
#include "tests/src/schedule/schedule_test_util.hpp"

#include <algorithm>

namespace mplan {
namespace {

using K = ActionKind;
using test::make;

// Position of the first action on `rank` matching kind / micro-batch / chunk.
size_t find(const std::vector<Action>& list, K kind, int mb, int chunk = 0) {
  auto it = std::find_if(list.begin(), list.end(), [&](const Action& a) {
    return a.kind == kind && a.microbatch == mb && a.chunk == chunk;
  });
  EXPECT_NE(it, list.end());
  return static_cast<size_t>(it - list.begin());
}

std::string violation(const Schedule& s) {
  const auto v = validate(s);
  return v ? to_string(*v) : "valid";
}

TEST(ValidateSchedule, EveryGeneratedScheduleIsValid) {
  for (int64_t pp : {1, 2, 3, 4, 8})
    for (int64_t m : {int64_t{1}, int64_t{2}, pp, 2 * pp + 1, 4 * pp}) {
      for (ScheduleKind k : {ScheduleKind::kGpipe, ScheduleKind::k1F1B, ScheduleKind::kZbH1})
        EXPECT_EQ(violation(make(k, pp, m)), "valid") << to_string(k) << " pp " << pp << " m " << m;
      if (pp == 1) continue;
      for (int64_t vpp : {2, 3, 4})
        for (int64_t g = pp; g <= m; ++g)
          if (m % g == 0 || m % g >= pp) {
            EXPECT_EQ(violation(make(ScheduleKind::kInterleaved, pp, m, vpp, g)), "valid")
                << "pp " << pp << " m " << m << " vpp " << vpp << " g " << g;
          }
    }
}

TEST(ValidateSchedule, MissingBackward) {
  const Schedule ok = make(ScheduleKind::k1F1B, 4, 8);
  auto ranks = rank_lists(ok);
  // On the first rank nothing else refers to B3: the end-of-rank check reports it.
  ranks[0].erase(ranks[0].begin() + static_cast<long>(find(ranks[0], K::kBackward, 3)));
  EXPECT_EQ(violation(schedule_from_ranks(ok.spec, false, ranks)),
            "rank 0: B (micro-batch 3, chunk 0) is missing");
  // On rank 2 the send of B3's gradient comes first (its group is [rf5 sb3]).
  ranks = rank_lists(ok);
  const size_t b3 = find(ranks[2], K::kBackward, 3);
  ranks[2].erase(ranks[2].begin() + static_cast<long>(b3));
  EXPECT_EQ(violation(schedule_from_ranks(ok.spec, false, ranks)),
            cat("rank 2, action ", b3 + 1,
                ": send-backward (micro-batch 3, chunk 0) to rank 1 comes before its B"));
}

TEST(ValidateSchedule, SwappedSendAndReceiveDeadlock) {
  // 1F1B, pp 2, m 2. Rank 0: F0 [sf0] F1 [sf1 rb0] B0 [rb1] B1;
  //                  rank 1: [rf0] F0 B0 [rf1 sb0] F1 B1 [sb1].
  // Split both two-way groups so that each rank sends before it receives: rank 0 [sf1] [rb0],
  // rank 1 [sb0] [rf1]. Each blocking send then waits for a receive its peer never posts.
  const Schedule ok = make(ScheduleKind::k1F1B, 2, 2);
  auto ranks = rank_lists(ok);
  ASSERT_EQ(ranks[0][3].kind, K::kSendForward);
  ranks[0][3].ends_group = true;  // [sf1] [rb0]
  ASSERT_EQ(ranks[1][3].kind, K::kRecvForward);
  ASSERT_EQ(ranks[1][4].kind, K::kSendBackward);
  std::swap(ranks[1][3], ranks[1][4]);  // [sb0] [rf1]
  ranks[1][3].ends_group = true;
  ranks[1][4].ends_group = true;
  EXPECT_EQ(violation(schedule_from_ranks(ok.spec, false, ranks)),
            "rank 0, action 3: deadlock: these blocking p2p groups can never complete: rank 0 "
            "waits in send-forward (micro-batch 1, chunk 0) to rank 1 (action 3) for rank 1 to "
            "reach recv-forward (micro-batch 1, chunk 0) from rank 0 (action 4); rank 1 waits "
            "in send-backward (micro-batch 0, chunk 0) to rank 0 (action 3) for rank 0 to reach "
            "recv-backward (micro-batch 0, chunk 0) from rank 1 (action 4)");
  // In one group each (as generated), the same transfers complete.
  EXPECT_EQ(violation(ok), "valid");
}

TEST(ValidateSchedule, SwappedSendsDeliverTheWrongTensor) {
  // GPipe pp 2: rank 0 sends F1's output before F0's; rank 1 receives F0's input first.
  const Schedule ok = make(ScheduleKind::kGpipe, 2, 2);
  auto ranks = rank_lists(ok);  // rank 0: F0 [sf0] F1 [sf1] ...
  std::swap(ranks[0][1], ranks[0][3]);
  std::swap(ranks[0][1], ranks[0][2]);  // F0 F1 [sf1] [sf0] ...
  EXPECT_EQ(violation(schedule_from_ranks(ok.spec, false, ranks)),
            "rank 0, action 2: send-forward (micro-batch 1, chunk 0) to rank 1 is send 1 from "
            "rank 0 to rank 1; it meets receive 1 there, recv-forward (micro-batch 0, chunk 0) "
            "from rank 0 (rank 1, action 0), which expects another tensor");
}

TEST(ValidateSchedule, MissingReceive) {
  const Schedule ok = make(ScheduleKind::kGpipe, 2, 2);
  auto ranks = rank_lists(ok);           // rank 1: [rf0] F0 [rf1] F1 B0 [sb0] B1 [sb1]
  ranks[1].erase(ranks[1].begin() + 2);  // drop [rf1]; F1 then lacks its input
  EXPECT_EQ(violation(schedule_from_ranks(ok.spec, false, ranks)),
            "rank 1, action 2: F (micro-batch 1, chunk 0) comes before its recv-forward");
}

TEST(ValidateSchedule, StructuralErrors) {
  const Schedule ok = make(ScheduleKind::k1F1B, 3, 2);
  auto broken = [&](auto edit) {
    auto ranks = rank_lists(ok);
    edit(ranks);
    return violation(schedule_from_ranks(ok.spec, false, ranks));
  };
  // Rank 1: [rf0<0] F0 [sf0>2] [rf1<0] F1 [sf1>2 rb0<2] B0 ...
  EXPECT_EQ(broken([](auto& r) { r[1][2].peer = 0; }),
            "rank 1, action 2: send-forward (micro-batch 0, chunk 0) to rank 0: the neighbouring "
            "virtual stage is on rank 2");
  EXPECT_EQ(broken([](auto& r) {
              r[0].insert(r[0].begin(), p2p_action(K::kRecvForward, 0, 0, 2, true));
            }),
            "rank 0, action 0: recv-forward (micro-batch 0, chunk 0) from rank 2: virtual stage "
            "0 has no neighbour in that direction");
  // Rank 1 ends with [sb1>0] (action 11).
  EXPECT_EQ(broken([](auto& r) { r[1][11].ends_group = false; }),
            "rank 1, action 11: send-backward (micro-batch 1, chunk 0) to rank 0: p2p group not "
            "closed (ends_group unset)");
  EXPECT_EQ(broken([](auto& r) { r[2].push_back(compute_action(K::kWeightGrad, 0, 0)); }),
            "rank 2, action 8: W (micro-batch 0, chunk 0): W in a schedule that does not split "
            "backward");
  EXPECT_EQ(broken([](auto& r) { r[0].push_back(compute_action(K::kForward, 1, 0)); }),
            "rank 0, action 8: F (micro-batch 1, chunk 0) appears twice");
  EXPECT_EQ(broken([](auto& r) { r[0][0].microbatch = 7; }),
            "rank 0, action 0: F (micro-batch 7, chunk 0): micro-batch outside 0..1");
}

TEST(ValidateSchedule, ForwardOnlySchedulesHaveNoBackward) {
  for (int64_t pp : {1, 2, 4})
    for (ScheduleKind k : {ScheduleKind::kGpipe, ScheduleKind::k1F1B, ScheduleKind::kZbH1})
      EXPECT_EQ(violation(test::make_forward_only(k, pp, 3)), "valid");
  // A backward, or a backward transfer, in a forward-only schedule.
  const Schedule fo = test::make_forward_only(ScheduleKind::k1F1B, 2, 2);
  auto ranks = rank_lists(fo);
  ranks[1].push_back(compute_action(K::kBackward, 0, 0));
  EXPECT_EQ(violation(schedule_from_ranks(fo.spec, false, ranks)),
            "rank 1, action 4: B (micro-batch 0, chunk 0) in a forward-only schedule");
  // A forward left out is missing, as in training.
  ranks = rank_lists(fo);
  ranks[0].erase(ranks[0].begin() + static_cast<long>(find(ranks[0], K::kForward, 1)));
  EXPECT_EQ(violation(schedule_from_ranks(fo.spec, false, ranks)),
            "rank 0, action 2: send-forward (micro-batch 1, chunk 0) to rank 1 comes before its F");
  // A split backward makes no sense without a backward.
  EXPECT_EQ(violation(schedule_from_ranks(fo.spec, true, rank_lists(fo))),
            "a forward-only schedule has no backward to split");
}

}  // namespace
}  // namespace mplan
