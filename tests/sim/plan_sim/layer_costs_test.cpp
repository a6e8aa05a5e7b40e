// Layer costs: items add up to their pass; the tensor-parallel collectives Megatron-LM issues per
// layer (2 all-reduces forward, or 2 all-gathers + 2 reduce-scatters with sequence parallelism)
// at the collective cost of the (s/cp, b, h) activation; backward = input-gradient pass +
// weight-gradient pass less the communication the weight GEMMs hide; the context-parallel ring
// exposure; MoE all-to-alls; the effect of dropout and kernel fusion.
#include "sim/plan_sim/layer_costs.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "sim/cost/collective_cost.hpp"
#include "tests/sim/plan_sim/test_plans.hpp"

namespace mplan::sim {
namespace {

using testing::gpt;
using testing::plan;

int64_t items_sum(const Pass& p) {
  int64_t t = 0;
  for (const CostItem& it : p.items) t += it.ns;
  return t;
}
int count(const Pass& p, const char* name) {
  return static_cast<int>(std::count_if(p.items.begin(), p.items.end(), [&](const CostItem& i) {
    return std::strcmp(i.name, name) == 0;
  }));
}

PlanCosts costs_of(const Plan& pl, const SimOptions& o = {}) {
  std::vector<int64_t> scratch;
  RankGrid grid(pl.parallel);
  PlanCosts c;
  build_plan_costs(pl, o, stage_groups(grid, pl.cluster.gpus_per_node, 0, scratch), true, c);
  return c;
}

Plan a100_plan(int64_t tp, bool sp) {
  Plan pl = plan(gpt(4, 4096, 32, 2048, 51200), load_cluster("dgx-a100-80g"), tp, 1, 1, 2, 2);
  pl.parallel.sequence_parallel = sp;
  return pl;
}

TEST(LayerCosts, ItemsAddUpToEveryPass) {
  for (bool sp : {false, true}) {
    Plan pl = a100_plan(4, sp);
    pl.model.moe = MoeSpec{8, 2, 4096, 2048, 2};
    pl.parallel.ep = 2;
    pl.parallel.dp = 2;
    pl.parallel.global_batch_size = 4;
    const PlanCosts c = costs_of(pl);
    for (const LayerCosts* l : {&c.dense, &c.moe})
      for (const Pass* p : {&l->fwd, &l->bwd, &l->bwd_input, &l->bwd_weight, &l->attn_fwd})
        EXPECT_EQ(items_sum(*p), p->cost.total_ns());
    for (const ExtraCosts* x : {&c.embedding, &c.output})
      for (const Pass* p : {&x->fwd, &x->bwd, &x->bwd_input, &x->bwd_weight})
        EXPECT_EQ(items_sum(*p), p->cost.total_ns());
  }
}

TEST(LayerCosts, TensorParallelCollectivesPerLayer) {
  const Plan pl = a100_plan(4, false);
  const PlanCosts c = costs_of(pl);
  // Megatron: forward all-reduce after the projection and after FC2 of the (s, b, h) output.
  const cost::GroupPlacement tp{4, 1, 4};
  const double x = 2.0 * 2048 * 2 * 4096;  // bf16 (s, b, h)
  const int64_t ar = cost::collective_time_ns(pl.cluster, cost::CollectiveKind::kAllReduce, x, tp);
  EXPECT_EQ(count(c.dense.fwd, "tp_all_reduce"), 2);
  EXPECT_EQ(c.dense.fwd.cost[Cat::kTp], 2 * ar);
  // Backward: the column-parallel input-gradient all-reduces of QKV and FC1 (split: exposed).
  EXPECT_EQ(count(c.dense.bwd_input, "tp_all_reduce"), 2);
  EXPECT_EQ(c.dense.bwd_input.cost[Cat::kTp], 2 * ar);
  EXPECT_EQ(c.dense.bwd_weight.cost[Cat::kTp], 0);
  // Whole backward: hidden behind the weight-gradient GEMMs as far as they last.
  EXPECT_LE(c.dense.bwd.cost[Cat::kTp], 2 * ar);
  EXPECT_EQ(c.dense.bwd.cost.total_ns() + (2 * ar - c.dense.bwd.cost[Cat::kTp]),
            c.dense.bwd_input.cost.total_ns() + c.dense.bwd_weight.cost.total_ns());

  const Plan sp = a100_plan(4, true);
  const PlanCosts s = costs_of(sp);
  const int64_t ag = cost::collective_time_ns(sp.cluster, cost::CollectiveKind::kAllGather, x, tp);
  const int64_t rs =
      cost::collective_time_ns(sp.cluster, cost::CollectiveKind::kReduceScatter, x, tp);
  EXPECT_EQ(count(s.dense.fwd, "tp_all_gather"), 2);
  EXPECT_EQ(count(s.dense.fwd, "tp_reduce_scatter"), 2);
  EXPECT_EQ(count(s.dense.fwd, "tp_all_reduce"), 0);
  EXPECT_EQ(s.dense.fwd.cost[Cat::kTp], 2 * ag + 2 * rs);
  // Backward, split: row-parallel output-gradient all-gathers and column-parallel input-gradient
  // reduce-scatters in B; the column-parallel inputs gathered again for W.
  EXPECT_EQ(s.dense.bwd_input.cost[Cat::kTp], 2 * ag + 2 * rs);
  EXPECT_EQ(s.dense.bwd_weight.cost[Cat::kTp], 2 * ag);
}

TEST(LayerCosts, NoCommunicationWithoutParallelism) {
  const PlanCosts c = costs_of(a100_plan(1, false));
  for (const Pass* p : {&c.dense.fwd, &c.dense.bwd, &c.output.fwd, &c.embedding.fwd})
    EXPECT_EQ(p->cost.total_ns(), p->cost[Cat::kCompute]);
  EXPECT_EQ(c.dense.bwd.cost.total_ns(),
            c.dense.bwd_input.cost.total_ns() + c.dense.bwd_weight.cost.total_ns());
}

TEST(LayerCosts, ContextParallelRingExposure) {
  // A slow link: the K/V transfer of each ring step outlasts the step's attention.
  Plan pl = plan(gpt(2, 4096, 32, 8192, 51200), testing::toy_cluster(), 1, 1, 1, 1, 1);
  pl.parallel.cp = 2;
  pl.cluster.intra_node.latency_us = 10000;  // 10 ms per transfer
  const PlanCosts c = costs_of(pl);
  // One transfer for cp = 2; its step: causal flash attention over 4096 x 4096 positions,
  // 4·b·a·s_q·s_k·d / 2 FLOPs at 25 % of 1 PFLOP/s.
  const double step_flops = 4.0 * 32 * 4096 * 4096 * 128 / 2;
  const int64_t step = std::llround(step_flops / (1000.0 * 1e12 * 0.25) * 1e9);
  const double kv = 2.0 * 4096 * 2 * 4096;  // K and V of 4096 positions, bf16
  const int64_t send = cost::p2p_time_ns(pl.cluster, kv, true);
  EXPECT_EQ(c.dense.fwd.cost[Cat::kCp], send - step);
  EXPECT_EQ(count(c.dense.fwd, "attention"), 1);
  EXPECT_EQ(c.dense.attn_fwd.cost.total_ns(), 2 * step + (send - step));
}

TEST(LayerCosts, MoeAllToAllsAndExpertGemms) {
  Plan pl = a100_plan(1, false);
  pl.model.moe = MoeSpec{8, 2, 4096, 0, 1};
  pl.parallel.ep = 4;
  pl.parallel.dp = 4;
  pl.parallel.global_batch_size = 8;
  const PlanCosts c = costs_of(pl);
  EXPECT_EQ(count(c.moe.fwd, "ep_all_to_all"), 2);
  EXPECT_EQ(count(c.moe.bwd, "ep_all_to_all"), 2);
  // Dispatch: each GPU sends its tokens' k copies: 2048·2 tokens x 2 copies x h, bf16, times the
  // busiest GPU's share under uniform routing of 8192 copies over 4 GPUs:
  // 1 + sqrt(2 ln 4 · 3/4 / 8192) = 1.01593 (moe_routing_test).
  const double imbalance = 1 + std::sqrt(2 * std::log(4.0) * 0.75 / 8192);
  EXPECT_NEAR(imbalance, 1.01593, 1e-5);
  const double bytes = 2048.0 * 2 * 2 * 4096 * 2 * imbalance;
  const int64_t a2a =
      cost::collective_time_ns(pl.cluster, cost::CollectiveKind::kAllToAll, bytes, {4, 1, 4});
  EXPECT_EQ(c.moe.fwd.cost[Cat::kEp], 2 * a2a);
  // Two of eight experts per GPU; each expert's parameters whole (etp 1).
  EXPECT_EQ(c.moe.expert_params, 2 * (4096 * 4096 * 2 + 4096 + 4096));
  EXPECT_EQ(c.dense.fwd.cost.total_ns(), 0);  // layer_freq 1: no dense layer
}

TEST(LayerCosts, DropoutAndFusionSwitches) {
  Plan pl = a100_plan(2, false);
  pl.training.attention_backend = AttentionBackend::kUnfused;
  SimOptions plain;
  const PlanCosts base = costs_of(pl, plain);
  SimOptions no_dropout;
  no_dropout.dropout = false;
  const PlanCosts nd = costs_of(pl, no_dropout);
  // Without dropout no masks are kept: Table 2's sbh (two masks) + 3as²b/t of dropped scores.
  const int64_t sbh = 2048LL * 2 * 4096;
  EXPECT_EQ(base.dense.act_bytes - nd.dense.act_bytes, 2 * sbh + 3LL * 32 * 2048 * 2048 * 2 / 2);
  EXPECT_LT(nd.dense.fwd.cost.total_ns(), base.dense.fwd.cost.total_ns());
  SimOptions unfused;
  unfused.fused_kernels = false;
  const PlanCosts uf = costs_of(pl, unfused);
  EXPECT_GT(uf.dense.fwd.cost.total_ns(), base.dense.fwd.cost.total_ns());
  EXPECT_GT(uf.dense.bwd.cost.total_ns(), base.dense.bwd.cost.total_ns());
  EXPECT_EQ(count(uf.dense.bwd, "grad_accumulate"), 1);
  EXPECT_EQ(count(base.dense.bwd, "grad_accumulate"), 0);
}

TEST(LayerCosts, OptimizerBytes) {
  Plan pl = a100_plan(1, false);
  // 38 bytes per updated parameter + 4 (fp32 main grad zeroed) per held one.
  EXPECT_DOUBLE_EQ(optimizer_bytes(pl, 100, 400), 38.0 * 100 + 4.0 * 400);
  pl.training.precision = Precision::kFp32;
  EXPECT_DOUBLE_EQ(optimizer_bytes(pl, 100, 100), 32.0 * 100 + 4.0 * 100);
}

}  // namespace
}  // namespace mplan::sim

namespace mplan::sim {
namespace {

// Zero-bubble W keeps, per dense layer, the inputs of the four weight GEMMs and their output
// gradients — as the executor's weight slot holds them: bf16 QKV gradient (s·b·3h/t), projection
// and FC2 output gradients (s·b·h/r each), FC1's (s·b·4h/t); the head keeps dL/dlogits, the
// embedding its gathered output gradient.
TEST(LayerCosts, ZeroBubbleWeightGradientBytes) {
  for (bool sp : {false, true}) {
    const Plan pl = a100_plan(4, sp);
    const PlanCosts c = costs_of(pl);
    const int64_t s = 2048, b = 2, h = 4096, t = 4, r = sp ? 4 : 1, e = 2, V = 51200;
    EXPECT_EQ(c.dense.weight_dy_bytes,
              e * s * b * 3 * h / t + 2 * e * s * b * h / r + e * s * b * 4 * h / t);
    EXPECT_EQ(c.output.weight_dy_bytes, e * s * b * V / t);
    EXPECT_EQ(c.embedding.weight_dy_bytes, e * s * b * h);
  }
}

int64_t item_ns(const Pass& p, const char* name) {
  for (const CostItem& i : p.items)
    if (std::strcmp(i.name, name) == 0) return i.ns;
  return -1;
}

TEST(LayerCosts, OverlapSlowdownSlowsTheGemmsBesideACollective) {
  // Megatron's fused backward overlaps FC1's weight-gradient GEMM with the input gradient's
  // reduce-scatter (sp, tp 4): with overlap_slowdown 0.2 the GEMM takes 0.2 · min(GEMM, comm)
  // longer; the split (zero-bubble) form, where nothing overlaps it, keeps its time.
  Plan pl = a100_plan(4, true);
  const PlanCosts base = costs_of(pl);
  pl.cluster.gpu.overlap_slowdown = 0.2;
  const PlanCosts slow = costs_of(pl);
  const int64_t wgrad = item_ns(base.dense.bwd, "fc1_wgrad");
  ASSERT_GT(wgrad, 0);
  const double x_bytes = 2048.0 * 2 * 4096 * 2;  // s · b · h, bf16: the gathered activation
  const int64_t comm = cost::collective_time_ns(pl.cluster, cost::CollectiveKind::kReduceScatter,
                                                x_bytes, {4, 1, 4});
  EXPECT_EQ(item_ns(slow.dense.bwd, "fc1_wgrad"),
            wgrad + std::llround(0.2 * static_cast<double>(std::min(wgrad, comm))));
  EXPECT_EQ(item_ns(slow.dense.bwd_weight, "fc1_wgrad"),
            item_ns(base.dense.bwd_weight, "fc1_wgrad"));
  // Per-kernel overhead: every GEMM item grows by it (2 us here).
  pl.cluster.gpu.overlap_slowdown = 0;
  pl.cluster.gpu.kernel_overhead_us = 2;
  const PlanCosts over = costs_of(pl);
  EXPECT_EQ(item_ns(over.dense.bwd_weight, "fc1_wgrad"),
            item_ns(base.dense.bwd_weight, "fc1_wgrad") + 2000);
}

}  // namespace
}  // namespace mplan::sim
