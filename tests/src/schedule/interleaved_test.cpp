// Interleaved 1F1B against Megatron-LM: get_schedule_table, the warm-up count of
// get_pp_rank_microbatches, and the forward/backward chunk of each virtual micro-batch
// (convert_schedule_table_to_order in megatron/core/transformer/cuda_graphs.py and the examples
// in its docstrings), plus every p2p call of one small case worked through by hand.
#include <gtest/gtest.h>

#include "src/common/error.hpp"

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "src/schedule/schedule.hpp"
#include "src/schedule/validate.hpp"
#include "tests/src/schedule/schedule_test_util.hpp"

namespace mplan {
namespace {

using test::compute_order;
using test::full_order;

Schedule interleaved(int64_t pp, int64_t vpp, int64_t m, int64_t group = 0) {
  return test::make(ScheduleKind::kInterleaved, pp, m, vpp, group);
}

// Megatron's table and order, transcribed: forwards of the first w virtual micro-batches, then
// F(k) B(k - w) pairs, then the last w backwards; B of virtual micro-batch k is on chunk
// vpp - 1 - table[k].chunk.
std::string megatron_order(int64_t pp, int64_t vpp, int64_t m, int64_t g, int64_t r) {
  std::vector<std::pair<int64_t, int64_t>> table;
  for (int64_t lo = 0; lo < m; lo += g) {
    const int64_t hi = lo + g >= m ? m : lo + g;
    for (int64_t c = 0; c < vpp; ++c)
      for (int64_t mb = lo; mb < hi; ++mb) table.push_back({mb, c});
  }
  const int64_t total = m * vpp;
  const int64_t w = std::min((pp - r - 1) * 2 + (vpp - 1) * g, total);
  auto f = [&](int64_t k) { return cat("F", table[k].first, ".", table[k].second); };
  auto b = [&](int64_t k) { return cat("B", table[k].first, ".", vpp - 1 - table[k].second); };
  std::vector<std::string> order;
  for (int64_t k = 0; k < w; ++k) order.push_back(f(k));
  for (int64_t k = w; k < total; ++k) order.push_back(f(k)), order.push_back(b(k - w));
  for (int64_t k = total - w; k < total; ++k) order.push_back(b(k));
  std::string s;
  for (const auto& x : order) s += cat(s.empty() ? "" : " ", x);
  return s;
}

// Our compute order in Megatron's integer notation: F on chunk c is c + 1, B on chunk c is -(c+1).
std::vector<int> as_megatron_order(const Schedule& s, int64_t r) {
  std::vector<int> out;
  for (const Action& a : s.rank(r)) {
    if (a.kind == ActionKind::kForward) out.push_back(a.chunk + 1);
    if (a.kind == ActionKind::kBackward) out.push_back(-(a.chunk + 1));
  }
  return out;
}

TEST(Interleaved, MegatronDocstringPp2Group3M5Vpp2) {
  // convert_schedule_table_to_order's docstring: table for PP2 N3 M5 VP2 is
  // micro-batch 0 1 2 0 1 2 3 4 3 4, chunk 0 0 0 1 1 1 0 0 1 1; with 5 warm-up steps (rank 0:
  // 2 (2 - 0 - 1) + (2 - 1) 3 = 5) the order is the one below.
  const Schedule s = interleaved(2, 2, 5, 3);
  EXPECT_EQ(s.warmup, (std::vector<int64_t>{5, 3}));
  EXPECT_EQ(as_megatron_order(s, 0), (std::vector<int>{1,  1, 1,  2, 2,  2,  -2, 1,  -2, 1,
                                                       -2, 2, -1, 2, -1, -1, -2, -2, -1, -1}));
  EXPECT_EQ(compute_order(s, 0),
            "F0.0 F1.0 F2.0 F0.1 F1.1 F2.1 B0.1 F3.0 B1.1 F4.0 B2.1 F3.1 B0.0 F4.1 B1.0 B2.0 "
            "B3.1 B4.1 B3.0 B4.0");
}

TEST(Interleaved, Pp2Vpp2M4) {
  const Schedule s = interleaved(2, 2, 4);
  EXPECT_EQ(s.warmup, (std::vector<int64_t>{4, 2}));
  EXPECT_EQ(compute_order(s, 0),
            "F0.0 F1.0 F0.1 F1.1 F2.0 B0.1 F3.0 B1.1 F2.1 B0.0 F3.1 B1.0 B2.1 B3.1 B2.0 B3.0");
  EXPECT_EQ(compute_order(s, 1),
            "F0.0 F1.0 F0.1 B0.1 F1.1 B1.1 F2.0 B0.0 F3.0 B1.0 F2.1 B2.1 F3.1 B3.1 B2.0 B3.0");
}

TEST(Interleaved, Pp4Vpp2M8Rank0) {
  const Schedule s = interleaved(4, 2, 8);
  EXPECT_EQ(s.warmup, (std::vector<int64_t>{10, 8, 6, 4}));
  EXPECT_EQ(compute_order(s, 0),
            "F0.0 F1.0 F2.0 F3.0 F0.1 F1.1 F2.1 F3.1 F4.0 F5.0 F6.0 B0.1 F7.0 B1.1 F4.1 B2.1 "
            "F5.1 B3.1 F6.1 B0.0 F7.1 B1.0 B2.0 B3.0 B4.1 B5.1 B6.1 B7.1 B4.0 B5.0 B6.0 B7.0");
}

// Every p2p call of pp 2, vpp 2, m 2, by hand from the non-overlapped path: rank 0 has all 4
// virtual micro-batches in warm-up (so recv_backward before the cool-down); rank 1 has 2.
// recv_tensor_from_previous_stage decides each receive; groups list send-forward,
// recv-forward, send-backward, recv-backward in that order (here prev == next).
TEST(Interleaved, P2pPlacementPp2Vpp2M2) {
  const Schedule s = interleaved(2, 2, 2);
  EXPECT_EQ(full_order(s, 0),
            "F0.0 [sf0.0>1] F1.0 [sf1.0>1 rf0.1<1] F0.1 [sf0.1>1 rf1.1<1] F1.1 [sf1.1>1] "
            "[rb0.1<1] B0.1 [sb0.1>1 rb1.1<1] B1.1 [sb1.1>1 rb0.0<1] B0.0 [rb1.0<1] B1.0");
  EXPECT_EQ(full_order(s, 1),
            "[rf0.0<0] F0.0 [sf0.0>0 rf1.0<0] F1.0 [sf1.0>0 rf0.1<0] F0.1 B0.1 "
            "[rf1.1<0 sb0.1>0] F1.1 B1.1 [sb1.1>0 rb0.0<0] B0.0 [sb0.0>0 rb1.0<0] B1.0 "
            "[sb1.0>0]");
  EXPECT_FALSE(validate(s).has_value());
}

TEST(Interleaved, OrdersForTheGrid) {
  struct Case {
    int64_t pp, m, g;
  };
  std::vector<Case> cases;
  for (int64_t pp : {2, 4, 8})
    for (int64_t m : {pp, 2 * pp, 4 * pp}) cases.push_back({pp, m, 0});
  // Micro-batch counts not divisible by pp, allowed with a group size whose remainder >= pp.
  cases.push_back({2, 5, 3});
  cases.push_back({4, 9, 5});
  cases.push_back({4, 14, 5});
  cases.push_back({8, 17, 9});
  for (const Case& c : cases)
    for (int64_t vpp : {2, 3, 4}) {
      const Schedule s = interleaved(c.pp, vpp, c.m, c.g);
      const int64_t g = c.g > 0 ? c.g : c.pp;
      for (int64_t r = 0; r < c.pp; ++r)
        EXPECT_EQ(compute_order(s, r), megatron_order(c.pp, vpp, c.m, g, r))
            << "pp " << c.pp << " vpp " << vpp << " m " << c.m << " g " << g << " rank " << r;
      const auto v = validate(s);
      EXPECT_FALSE(v.has_value()) << "pp " << c.pp << " vpp " << vpp << " m " << c.m << ": "
                                  << (v ? to_string(*v) : "");
    }
}

// The invariants of Megatron's test_get_pipeline_parallel_order, on its valid cases.
TEST(Interleaved, MegatronOrderInvariants) {
  const std::vector<std::pair<int64_t, int64_t>> pp_group = {{2, 2}, {2, 4}, {4, 4},
                                                             {4, 5}, {8, 9}, {8, 11}};
  for (auto [pp, g] : pp_group)
    for (int64_t m : {8, 32})
      for (int64_t vpp : {2, 4, 8}) {
        if (g > m || (m % g != 0 && m % g < pp)) continue;  // Megatron rejects these
        const Schedule s = interleaved(pp, vpp, m, g);
        for (int64_t r = 0; r < pp; ++r) {
          const std::vector<int> order = as_megatron_order(s, r);
          ASSERT_EQ(static_cast<int64_t>(order.size()), m * vpp * 2);
          EXPECT_EQ(*std::max_element(order.begin(), order.end()), vpp);
          std::map<int, int> count;
          for (int o : order) {
            ++count[o];
            if (o < 0) {
              EXPECT_GE(count[-o], count[o]);  // a chunk's B never outruns its F
            }
          }
          for (auto [o, n] : count) EXPECT_EQ(count[-o], n);
        }
      }
}

TEST(Interleaved, ActionCount) {
  // 2 vpp m passes per rank; at each of the pp vpp - 1 virtual-stage boundaries, 4 transfers per
  // micro-batch.
  for (int64_t pp : {2, 3, 4})
    for (int64_t vpp : {2, 3}) {
      const int64_t m = 2 * pp;
      const Schedule s = interleaved(pp, vpp, m);
      EXPECT_EQ(static_cast<int64_t>(s.actions.size()), 2 * pp * vpp * m + 4 * (pp * vpp - 1) * m);
    }
}

TEST(Interleaved, ForwardOnlyIsTheAllWarmupLoopByHand) {
  // forward_backward_pipelining_with_interleaving(forward_only=True): the warm-up count is every
  // virtual micro-batch; each forward is followed by send_forward_recv_forward, whose receive
  // follows recv_tensor_from_previous_stage and stops after the last one. pp 2, vpp 2, m 2 by
  // hand: rank 0's is training's warm-up; rank 1 (last) sends nothing from its last chunk.
  const Schedule s = test::make_forward_only(ScheduleKind::kInterleaved, 2, 2, 2);
  EXPECT_EQ(full_order(s, 0),
            "F0.0 [sf0.0>1] F1.0 [sf1.0>1 rf0.1<1] F0.1 [sf0.1>1 rf1.1<1] F1.1 [sf1.1>1]");
  EXPECT_EQ(full_order(s, 1),
            "[rf0.0<0] F0.0 [sf0.0>0 rf1.0<0] F1.0 [sf1.0>0 rf0.1<0] F0.1 [rf1.1<0] F1.1");
  EXPECT_EQ(s.warmup, (std::vector<int64_t>{4, 4}));
  EXPECT_FALSE(validate(s).has_value());
}

TEST(Interleaved, ForwardOnlyKeepsTheTrainingForwardOrder) {
  // The forwards run in the schedule table's order on every rank, as in training; every grid
  // point validates.
  for (int64_t pp : {2, 3, 4})
    for (int64_t vpp : {2, 3})
      for (int64_t m : {pp, 2 * pp, 2 * pp + pp}) {
        const Schedule fo = test::make_forward_only(ScheduleKind::kInterleaved, pp, m, vpp);
        const Schedule train = interleaved(pp, vpp, m);
        const auto v = validate(fo);
        EXPECT_FALSE(v.has_value())
            << "pp " << pp << " vpp " << vpp << " m " << m << ": " << (v ? to_string(*v) : "");
        for (int64_t r = 0; r < pp; ++r) {
          std::string want;
          for (const Action& a : train.rank(r))
            if (a.kind == ActionKind::kForward)
              want += cat(want.empty() ? "" : " ", "F", a.microbatch, ".", a.chunk);
          EXPECT_EQ(compute_order(fo, r), want);
        }
      }
}

}  // namespace
}  // namespace mplan
