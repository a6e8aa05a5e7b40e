// Lowering: the program's ops for a small plan, counted by hand from Megatron's 1F1B schedule and
// its end of step — one compute op per F and B action, the p2p transfers as send/recv pairs, one
// gradient reduction per bucket on the data-parallel stream after the last backward, the
// distributed optimizer's parameter gathers before the first forwards, the tied-embedding and
// gradient-norm all-reduces and the optimizer; every activation allocated is freed; the full grid
// runs each pass as one rendezvous of the tensor-parallel group.
#include "sim/plan_sim/lowering.hpp"

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "sim/des/engine.hpp"
#include "src/plan/plan_rules.hpp"
#include "tests/sim/plan_sim/test_plans.hpp"

namespace mplan::sim {
namespace {

using testing::gpt;
using testing::plan;

// Ops per (rank, stream name, op name).
std::map<std::string, int> census(const des::Program& p, int32_t rank) {
  std::map<std::string, int> n;
  for (const des::Op& o : p.ops())
    if (o.rank == rank) ++n[p.stream_name(o.stream) + "/" + p.name(o)];
  return n;
}

void lower_plan(const Plan& pl, const SimOptions& o, Lowered& L) {
  const Schedule s = make_schedule(*schedule_spec_of(pl));
  const RankGrid grid(pl.parallel);
  lower(pl, s, grid, o, L);
}

TEST(Lowering, OneFOneBOpsByHand) {
  const Plan pl = plan(gpt(4, 1024, 16, 1024, 1000), testing::toy_cluster(), 1, 2, 2, 1, 8);
  Lowered L;
  lower_plan(pl, {}, L);
  const des::Program& p = L.program;
  ASSERT_EQ(p.num_ranks(), 2);
  for (int32_t r = 0; r < 2; ++r) {
    auto n = census(p, r);
    EXPECT_EQ(n["compute/forward"], 4);
    EXPECT_EQ(n["compute/backward"], 4);
    EXPECT_EQ(n["compute/embedding_ar"], 1);  // tied embedding, pp 2
    EXPECT_EQ(n["compute/grad_norm_ar"], 1);
    EXPECT_EQ(n["compute/optimizer"], 1);
    EXPECT_EQ(n["dp/grad_reduce"], 1);  // one bucket (small model)
  }
  EXPECT_EQ(census(p, 0)["pp_send_fwd/send_fwd"], 4);
  EXPECT_EQ(census(p, 0)["pp_recv_bwd/recv_bwd"], 4);
  EXPECT_EQ(census(p, 1)["pp_recv_fwd/recv_fwd"], 4);
  EXPECT_EQ(census(p, 1)["pp_send_bwd/send_bwd"], 4);
  // Rendezvous: 8 transfers, the embedding and gradient-norm all-reduces across the two stages.
  EXPECT_EQ(p.rendezvous().size(), 10u);
  // The reduction waits on the last backward.
  des::OpId reduce = des::kNone, last_bwd = des::kNone;
  for (des::OpId i = 0; i < p.num_ops(); ++i) {
    const des::Op& o = p.op(i);
    if (o.rank != 0) continue;
    if (p.name(o) == "grad_reduce") reduce = i;
    if (p.name(o) == "backward") last_bwd = i;
  }
  bool waits = false;
  for (const des::Wait& w : p.waits()) waits |= w.op == reduce && w.dep == last_bwd;
  EXPECT_TRUE(waits);
  // Everything allocated is freed; the compute stream's ops carry their durations.
  des::SimResult r = des::simulate(p);
  ASSERT_TRUE(r.completed);
  for (int32_t k = 0; k < 2; ++k) EXPECT_EQ(r.memory[k].final_bytes[kMemActivations], 0);
  for (des::OpId i = 0; i < p.num_ops(); ++i) {
    if (p.op(i).stream == kStreamCompute && p.op(i).rendezvous == des::kNone) {
      EXPECT_EQ(L.costs[L.meta[i].cost].total_ns(), p.op(i).duration_ns);
    }
  }
}

TEST(Lowering, DistributedOptimizerGathersFirst) {
  Plan pl = plan(gpt(4, 1024, 16, 1024, 1000), testing::toy_cluster(), 1, 2, 2, 1, 8);
  pl.parallel.distributed_optimizer = true;
  Lowered L;
  lower_plan(pl, {}, L);
  const des::Program& p = L.program;
  const des::OpId first = p.stream_first(p.stream_index(0, kStreamDp));
  ASSERT_NE(first, des::kNone);
  EXPECT_EQ(p.name(p.op(first)), "param_gather");
  EXPECT_EQ(p.name(p.op(p.op(first).next_in_stream)), "grad_reduce");
  // Without overlap: gathers after the optimizer, on the compute stream.
  pl.parallel.overlap_param_gather = false;
  lower_plan(pl, {}, L);
  const des::OpId last = L.program.stream_last(L.program.stream_index(0, kStreamCompute));
  EXPECT_EQ(L.program.name(L.program.op(last)), "param_gather");
}

TEST(Lowering, BucketedLastBackwardIsSplit) {
  // 12.6 M parameters per layer, 8 layers on stage 0: buckets after layers 7-4, 3-0+embedding.
  Plan pl = plan(gpt(16, 1024, 16, 1024, 32000), testing::toy_cluster(), 1, 2, 2, 1, 4);
  Lowered L;
  lower_plan(pl, {}, L);
  auto n = census(L.program, 0);
  EXPECT_EQ(n["dp/grad_reduce"], 3);
  // Two micro-batches: the second (last) backward in three pieces.
  EXPECT_EQ(n["compute/backward"], 1 + 3);
  EXPECT_EQ(census(L.program, 1)["compute/backward"], 2);
}

TEST(Lowering, FullGridRanksAndSynchronousPasses) {
  const Plan pl = plan(gpt(4, 1024, 16, 1024, 1000), testing::toy_cluster(), 2, 2, 2, 1, 8);
  SimOptions o;
  o.full_grid = true;
  Lowered L;
  lower_plan(pl, o, L);
  EXPECT_EQ(L.program.num_ranks(), 8);
  for (int32_t r = 0; r < 8; ++r) EXPECT_EQ(L.stage_of_rank[r], r / 4);  // pp outermost
  int passes = 0;
  for (const des::Op& o2 : L.program.ops())
    if (L.program.name(o2) == "forward") {
      ++passes;
      ASSERT_NE(o2.rendezvous, des::kNone);
      EXPECT_EQ(L.program.rendezvous()[o2.rendezvous].expected_members, 2);  // tp 2
    }
  EXPECT_EQ(passes, 8 * 4);  // 8 GPUs x 4 micro-batches each (8 / dp 2)
}

}  // namespace
}  // namespace mplan::sim
