// measure_breakdown(): a hand-made iteration timeline cut into the simulator's categories — a
// pass less the TP collectives inside it is compute, a p2p group is its fastest same-size group's
// transfer plus bubble, gaps are bubble, exposed data-parallel work and the optimizer count as
// such, overlapped data-parallel work not at all — adding up to the iteration.
#include "exec/runner/measured_breakdown.hpp"

#include <gtest/gtest.h>

namespace mplan::exec {
namespace {

TEST(MeasuredBreakdown, CutsTheTimelineAsTheSimulatorDoes) {
  std::vector<TraceSpan> s(9);
  auto span = [&](size_t i, const char* name, SpanKind k) -> TraceSpan& {
    s[i].name = name;
    s[i].kind = k;
    return s[i];
  };
  span(0, "forward", SpanKind::kPass);
  span(1, "L0 tp_all_reduce", SpanKind::kTp);
  span(2, "send_fwd", SpanKind::kP2p).bytes = 100;  // a group of two: send and recv
  span(3, "recv_bwd", SpanKind::kP2p).bytes = 100;
  span(4, "backward", SpanKind::kPass);
  span(5, "recv_bwd", SpanKind::kP2p).bytes = 300;  // a group of another size
  span(6, "grad_reduce", SpanKind::kDpComm);        // overlapped on the comm stream
  span(7, "dp_wait", SpanKind::kDpExposed);
  span(8, "optimizer", SpanKind::kOptimizer);
  // ns:  forward [0, 100) with a TP all-reduce [40, 60); group [100, 130); gap to 140;
  //      backward [140, 300); group [300, 320) (the only one of its size: all transfer);
  //      grad_reduce [200, 330) overlapped; dp_wait [320, 335); optimizer [335, 350).
  const std::vector<Tracer::Timed> t{{&s[0], 0, 100},   {&s[1], 40, 60},   {&s[2], 100, 130},
                                     {&s[3], 100, 130}, {&s[4], 140, 300}, {&s[5], 300, 320},
                                     {&s[6], 200, 330}, {&s[7], 320, 335}, {&s[8], 335, 350}};
  const MeasuredBreakdown b = measure_breakdown(t);
  EXPECT_DOUBLE_EQ(b.compute_s, (80 + 160) * 1e-9);
  EXPECT_DOUBLE_EQ(b.tp_comm_s, 20 * 1e-9);
  EXPECT_DOUBLE_EQ(b.pp_comm_s, (30 + 20) * 1e-9);  // each group the fastest of its size
  EXPECT_DOUBLE_EQ(b.bubble_s, 10 * 1e-9);          // the gap
  EXPECT_DOUBLE_EQ(b.dp_comm_s, 15 * 1e-9);
  EXPECT_DOUBLE_EQ(b.optimizer_s, 15 * 1e-9);
  EXPECT_DOUBLE_EQ(b.total_s, 350 * 1e-9);
  EXPECT_NEAR(b.compute_s + b.tp_comm_s + b.pp_comm_s + b.dp_comm_s + b.bubble_s + b.optimizer_s,
              b.total_s, 1e-15);
}

TEST(MeasuredBreakdown, AGroupSlowerThanItsFastestTwinIsWaiting) {
  std::vector<TraceSpan> s(2);
  s[0].name = s[1].name = "recv_fwd";
  s[0].kind = s[1].kind = SpanKind::kP2p;
  s[0].bytes = s[1].bytes = 64;
  // Two groups of one receive each: 10 ns (the transfer) and 50 ns (40 of them waiting).
  const std::vector<Tracer::Timed> t{{&s[0], 0, 10}, {&s[1], 10, 60}};
  const MeasuredBreakdown b = measure_breakdown(t);
  EXPECT_DOUBLE_EQ(b.pp_comm_s, 20 * 1e-9);
  EXPECT_DOUBLE_EQ(b.bubble_s, 40 * 1e-9);
  EXPECT_DOUBLE_EQ(measure_breakdown({}).total_s, 0);
}

}  // namespace
}  // namespace mplan::exec
