// Closed forms on the synthetic 1F1B pipeline run by the engine:
// - makespan with free communication: (m + p - 1)(f + b) per layer chunk (Narayanan et al.,
//   SC'21, Section 2.2: the 1F1B bubble is (p - 1)(t_f + t_b), the same as GPipe's);
// - bubble fraction (p - 1) / m;
// - activations in flight on stage s: min(p - s, m) micro-batches (Narayanan et al. SC'21,
//   Section 2.2.1: 1F1B limits outstanding micro-batches to the pipeline depth);
// - a small case with communication cost, timed by hand.
#include "sim/des/synthetic_pipeline.hpp"

#include <gtest/gtest.h>

#include <algorithm>

#include "sim/des/deadlock_report.hpp"
#include "sim/des/engine.hpp"

namespace mplan::des {
namespace {

struct Shape {
  int32_t p, m, layers;
};

class OneFOneB : public ::testing::TestWithParam<Shape> {};

TEST_P(OneFOneB, MakespanIsMPlusPMinusOneTimesFPlusB) {
  const Shape sh = GetParam();
  SyntheticPipeline s;
  s.stages = sh.p;
  s.microbatches = sh.m;
  s.layers_per_stage = sh.layers;
  s.forward_ns = 1000;
  s.backward_ns = 2000;
  s.activation_bytes = 64;
  Program prog;
  build_synthetic_1f1b(s, prog);
  SimResult r = simulate(prog);
  ASSERT_TRUE(r.completed) << describe(r.deadlock, prog);
  const int64_t per_mb = sh.layers * (s.forward_ns + s.backward_ns);
  EXPECT_EQ(r.makespan_ns, (sh.m + sh.p - 1) * per_mb);
  // Bubble: every stage computes m * per_mb, idle (p - 1) * per_mb of the makespan.
  double bubble = static_cast<double>(r.makespan_ns - sh.m * per_mb) / (sh.m * per_mb);
  EXPECT_DOUBLE_EQ(bubble, static_cast<double>(sh.p - 1) / sh.m);
  // Activation peak on stage st: min(p - st, m) micro-batches of `layers` layers.
  for (int32_t st = 0; st < sh.p; ++st) {
    EXPECT_EQ(r.memory[st].peak_bytes, std::min(sh.p - st, sh.m) * sh.layers * s.activation_bytes)
        << "stage " << st;
    EXPECT_EQ(r.memory[st].final_bytes[kSynActivationClass], 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, OneFOneB,
                         ::testing::Values(Shape{1, 1, 1}, Shape{1, 5, 3}, Shape{2, 4, 1},
                                           Shape{4, 8, 2}, Shape{4, 2, 1}, Shape{8, 64, 12},
                                           Shape{6, 6, 1}, Shape{3, 17, 4}));

TEST(OneFOneBWithCommunication, TwoStagesTwoMicrobatchesByHand) {
  // p = 2, m = 2, f = 10, b = 20, send/recv c = 5. Stage 0 runs F0 F1 B0 B1, stage 1 F0 B0 F1 B1.
  //   s0: F0 [0,10]; send F0 [10,15]; F1 [10,20]; send F1 [20,25]
  //   s1: F0 [15,25]; B0 [25,45]; send B0 [45,50]; F1 [45,55]; B1 [55,75]; send B1 [75,80]
  //   s0: B0 waits for B0's gradient: [50,70]; B1 [80,100]
  // Makespan 100 = (m + p - 1)(f + b) + 2 (p - 1) c.
  SyntheticPipeline s;
  s.stages = 2;
  s.microbatches = 2;
  s.forward_ns = 10;
  s.backward_ns = 20;
  s.p2p_ns = 5;
  Program prog;
  build_synthetic_1f1b(s, prog);
  SimResult r = simulate(prog);
  ASSERT_TRUE(r.completed);
  EXPECT_EQ(r.makespan_ns, 100);
  EXPECT_EQ(r.rank_end_ns[1], 80);
  // Stage 0's compute stream in order: F0, F1, B0, B1.
  OpId op = prog.stream_first(prog.stream_index(0, kSynCompute));
  const int64_t starts[] = {0, 10, 50, 80};
  for (int64_t want : starts) {
    ASSERT_NE(op, kNone);
    EXPECT_EQ(r.ops[op].start_ns, want);
    op = prog.op(op).next_in_stream;
  }
}

TEST(OneFOneBWithCommunication, TpCollectivesAddToEveryPass) {
  // Two TP collectives of g per layer and pass sit on the compute stream: the per-micro-batch
  // cost becomes L (f + b + 4 g) and the closed form still holds with free p2p.
  SyntheticPipeline s;
  s.stages = 4;
  s.microbatches = 8;
  s.layers_per_stage = 3;
  s.forward_ns = 100;
  s.backward_ns = 200;
  s.tp_collective_ns = 7;
  Program prog;
  build_synthetic_1f1b(s, prog);
  SimResult r = simulate(prog);
  ASSERT_TRUE(r.completed);
  EXPECT_EQ(r.makespan_ns, (8 + 4 - 1) * 3 * (100 + 200 + 4 * 7));
}

TEST(OneFOneBWithCommunication, DpReductionsOverlapAndTheOptimizerWaitsForThem) {
  // One stage, m = 2, L = 2, f = 10, b = 20, DP reduce d = 50 per layer, optimizer o = 5.
  // Compute: F0 l0,l1 [0,20]; B0 l1,l0 [20,60]; F1 [60,80]; B1 l1 [80,100], l0 [100,120].
  // DP: layer 1 after B1 l1: [100,150]; layer 0 after B1 l0 (120) but behind layer 1: [150,200].
  // Optimizer after compute (120) and the last reduction: [200,205].
  SyntheticPipeline s;
  s.stages = 1;
  s.microbatches = 2;
  s.layers_per_stage = 2;
  s.forward_ns = 10;
  s.backward_ns = 20;
  s.dp_reduce_ns = 50;
  s.optimizer_ns = 5;
  Program prog;
  build_synthetic_1f1b(s, prog);
  SimResult r = simulate(prog);
  ASSERT_TRUE(r.completed);
  EXPECT_EQ(r.makespan_ns, 205);
  OpId dp = prog.stream_first(prog.stream_index(0, kSynDp));
  EXPECT_EQ(r.ops[dp].start_ns, 100);
  EXPECT_EQ(r.ops[prog.op(dp).next_in_stream].start_ns, 150);
}

}  // namespace
}  // namespace mplan::des
