// The timing pass: hand-timed small cases, the closed forms of the papers over a grid of
// layouts and costs, and the peak number of activations in flight.
#include "src/schedule/timeline.hpp"

#include <gtest/gtest.h>

#include <algorithm>

#include "src/common/error.hpp"
#include "tests/src/schedule/schedule_test_util.hpp"

namespace mplan {
namespace {

using test::make;

// Start times of the compute actions of one rank, in order.
std::vector<double> compute_starts(const Schedule& s, const Timeline& t, int64_t r) {
  std::vector<double> out;
  for (int64_t i = s.rank_begin[r]; i < s.rank_begin[r + 1]; ++i)
    if (is_compute(s.actions[i].kind)) out.push_back(t.start[i]);
  return out;
}

TEST(Timeline, OneFOneBPp2M2ByHand) {
  // F 1, B 2. Rank 0: F0 0-1, F1 1-2, waits for B0's gradient (rank 1: F0 1-2, B0 2-4),
  // B0 4-6, waits for B1's (rank 1: F1 4-5, B1 5-7), B1 7-9.
  const Schedule s = make(ScheduleKind::k1F1B, 2, 2);
  const Timeline t = time_schedule(s, {1, 2, 0});
  EXPECT_EQ(compute_starts(s, t, 0), (std::vector<double>{0, 1, 4, 7}));
  EXPECT_EQ(compute_starts(s, t, 1), (std::vector<double>{1, 2, 4, 5}));
  EXPECT_EQ(t.makespan, 9);
  EXPECT_EQ(t.busy, (std::vector<double>{6, 6}));
  EXPECT_DOUBLE_EQ(t.bubble_fraction, 1.0 / 3.0);  // (pp-1)/(m+pp-1)
}

TEST(Timeline, IssueExamplePp4M8) {
  // (m + pp - 1)(f + b) = 11 * 3 = 33; bubble 3/11.
  const Timeline t = time_schedule(make(ScheduleKind::k1F1B, 4, 8), {1, 2, 0});
  EXPECT_EQ(t.makespan, 33);
  EXPECT_DOUBLE_EQ(t.bubble_fraction, 3.0 / 11.0);
  // Interleaved, vpp 2, per-chunk costs: (vpp m + pp - 1) * 3 = 19 * 3 = 57; bubble 3/19.
  const Timeline ti = time_schedule(make(ScheduleKind::kInterleaved, 4, 8, 2), {1, 2, 0});
  EXPECT_EQ(ti.makespan, 57);
  EXPECT_DOUBLE_EQ(ti.bubble_fraction, 3.0 / 19.0);
  // ZB-H1, F = B = W = 1: m (3) + (pp - 1)(1) = 27; bubble 3/27, a third of 1F1B's 9/33.
  const Timeline tz = time_schedule(make(ScheduleKind::kZbH1, 4, 8), {1, 1, 1});
  EXPECT_EQ(tz.makespan, 27);
  EXPECT_DOUBLE_EQ(tz.bubble_fraction, 1.0 / 9.0);
}

TEST(Timeline, ClosedFormsGpipeAnd1F1B) {
  for (ScheduleKind k : {ScheduleKind::kGpipe, ScheduleKind::k1F1B})
    for (int64_t pp : {1, 2, 3, 4, 8})
      for (int64_t m : {int64_t{1}, int64_t{2}, pp, 2 * pp, 4 * pp, pp + 1})
        for (auto [f, b] : {std::pair{1.0, 2.0}, {1.0, 1.0}, {2.0, 3.0}, {3.0, 1.0}}) {
          const Timeline t = time_schedule(make(k, pp, m), {f, b, 0});
          const double want = static_cast<double>(m + pp - 1) * (f + b);
          EXPECT_DOUBLE_EQ(t.makespan, want) << to_string(k) << " pp " << pp << " m " << m;
          EXPECT_NEAR(t.bubble_fraction, static_cast<double>(pp - 1) / (m + pp - 1), 1e-12);
        }
}

TEST(Timeline, ClosedFormInterleaved) {
  for (int64_t pp : {2, 3, 4, 8})
    for (int64_t vpp : {2, 3, 4})
      for (int64_t g = pp; g <= 2 * pp + 1; ++g)
        for (int64_t m : {g, 2 * g, 3 * g + pp, 4 * pp}) {
          if (m < g || (m % g != 0 && m % g < pp)) continue;
          for (auto [f, b] : {std::pair{1.0, 2.0}, {2.0, 3.0}, {3.0, 1.0}}) {
            const Timeline t =
                time_schedule(make(ScheduleKind::kInterleaved, pp, m, vpp, g), {f, b, 0});
            EXPECT_DOUBLE_EQ(t.makespan, static_cast<double>(vpp * m + pp - 1) * (f + b))
                << "pp " << pp << " vpp " << vpp << " m " << m << " g " << g;
            EXPECT_NEAR(t.bubble_fraction,
                        static_cast<double>(pp - 1) / static_cast<double>(vpp * m + pp - 1), 1e-12);
          }
        }
}

TEST(Timeline, ClosedFormZbH1) {
  // Qi et al.: bubble (pp - 1)(T_F + T_B - T_W), for m >= pp and T_W <= min(T_F, T_B).
  for (int64_t pp : {2, 3, 4, 8})
    for (int64_t m : {pp, pp + 1, 2 * pp, 4 * pp})
      for (double f : {1.0, 2.0, 3.0})
        for (double b : {1.0, 2.0, 3.0})
          for (double w : {0.5, 1.0, 2.0}) {
            if (w > std::min(f, b)) continue;
            const Timeline t = time_schedule(make(ScheduleKind::kZbH1, pp, m), {f, b, w});
            const double bubble = static_cast<double>(pp - 1) * (f + b - w);
            EXPECT_DOUBLE_EQ(t.makespan, static_cast<double>(m) * (f + b + w) + bubble)
                << "pp " << pp << " m " << m << " f " << f << " b " << b << " w " << w;
          }
}

TEST(Timeline, WeightCostJoinsTheBackwardWhenNotSplit) {
  // 1F1B with weight 1: B costs b + w = 3, as with backward 3.
  const Schedule s = make(ScheduleKind::k1F1B, 4, 8);
  EXPECT_EQ(time_schedule(s, {1, 2, 1}).makespan, time_schedule(s, {1, 3, 0}).makespan);
  EXPECT_EQ(action_cost(s, {1, 2, 1}, compute_action(ActionKind::kBackward, 0, 0)), 3);
  const Schedule z = make(ScheduleKind::kZbH1, 4, 8);
  EXPECT_EQ(action_cost(z, {1, 2, 1}, compute_action(ActionKind::kBackward, 0, 0)), 2);
  EXPECT_EQ(action_cost(z, {1, 2, 1}, compute_action(ActionKind::kWeightGrad, 0, 0)), 1);
  EXPECT_EQ(action_cost(z, {1, 2, 1}, p2p_action(ActionKind::kSendForward, 0, 0, 1, true)), 0);
}

TEST(Timeline, DeadlockIsAnInternalError) {
  ScheduleSpec spec;
  spec.pp = 2;
  spec.microbatches = 1;
  const Schedule bad = schedule_from_ranks(
      spec, false,
      {{compute_action(ActionKind::kForward, 0, 0),
        p2p_action(ActionKind::kSendForward, 0, 0, 1, true),
        p2p_action(ActionKind::kRecvBackward, 0, 0, 1, true),
        compute_action(ActionKind::kBackward, 0, 0)},
       {p2p_action(ActionKind::kSendBackward, 0, 0, 0, true),
        p2p_action(ActionKind::kRecvForward, 0, 0, 0, true),
        compute_action(ActionKind::kForward, 0, 0), compute_action(ActionKind::kBackward, 0, 0)}});
  EXPECT_THROW(time_schedule(bad, {}), InternalError);
}

TEST(PeakInflight, PerSchedule) {
  // 1F1B: rank r holds min(pp - r, m); GPipe: m everywhere.
  EXPECT_EQ(peak_inflight(make(ScheduleKind::k1F1B, 4, 8)), (std::vector<int64_t>{4, 3, 2, 1}));
  EXPECT_EQ(peak_inflight(make(ScheduleKind::k1F1B, 4, 2)), (std::vector<int64_t>{2, 2, 2, 1}));
  EXPECT_EQ(peak_inflight(make(ScheduleKind::kGpipe, 3, 5)), (std::vector<int64_t>{5, 5, 5}));
  // Interleaved: warm-up + 1 (micro-batch, chunk) pairs, at most vpp m.
  EXPECT_EQ(peak_inflight(make(ScheduleKind::kInterleaved, 4, 8, 2)),
            (std::vector<int64_t>{11, 9, 7, 5}));
  EXPECT_EQ(peak_inflight(make(ScheduleKind::kInterleaved, 4, 4, 4)),
            (std::vector<int64_t>{16, 16, 15, 13}));
  // ZB-H1: every rank min(pp, m), the first rank's 1F1B peak (alive until W ends).
  for (int64_t pp : {2, 4, 8})
    for (int64_t m : {int64_t{1}, pp - 1, pp, 3 * pp}) {
      if (m < 1) continue;
      const auto zb = peak_inflight(make(ScheduleKind::kZbH1, pp, m));
      const auto base = peak_inflight(make(ScheduleKind::k1F1B, pp, m));
      EXPECT_EQ(zb, std::vector<int64_t>(pp, std::min(pp, m))) << "pp " << pp << " m " << m;
      EXPECT_LE(*std::max_element(zb.begin(), zb.end()),
                *std::max_element(base.begin(), base.end()));
    }
}

TEST(PeakInflight, ForwardOnlyHoldsOneAtATime) {
  // Evaluation keeps nothing from a forward: one (micro-batch, chunk) alive at a time.
  EXPECT_EQ(peak_inflight(test::make_forward_only(ScheduleKind::k1F1B, 4, 8)),
            (std::vector<int64_t>{1, 1, 1, 1}));
  EXPECT_EQ(peak_inflight(test::make_forward_only(ScheduleKind::kInterleaved, 2, 4, 2)),
            (std::vector<int64_t>{1, 1}));
}

}  // namespace
}  // namespace mplan
