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
#include "sim/cost/memory_bound_cost.hpp"
#include "src/model/tensor_layout.hpp"
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
  build_plan_costs(
      pl, o, stage_groups(grid, pl.cluster.gpus_per_node, 0, scratch, cp_a2a_size(pl.parallel)),
      true, c);
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

// The executor's cross-entropy at tensor parallel 1: one kernel over two passes of the logits
// from compute capability 9 on (a row fits a cluster's registers: at most 131072 logits), two
// kernels over three passes before it; Megatron-LM's fused kernel as before.
TEST(LayerCosts, ExecutorCrossEntropyInOneKernelFromHopperOn) {
  auto xent_ns = [](const char* cluster, int64_t vocab, Implementation impl) {
    Plan pl = plan(gpt(2, 2048, 16, 2048, vocab), load_cluster(cluster), 1, 1, 1, 1, 1);
    pl.training.implementation = impl;
    const PlanCosts c = costs_of(pl);
    for (const CostItem& it : c.output.fwd.items)
      if (std::strcmp(it.name, "cross_entropy") == 0) return it.ns;
    return int64_t{-1};
  };
  const Implementation mplan = Implementation::kMplan;
  const int64_t h200 = xent_ns("dgx-h200", 128000, mplan),
                a100 = xent_ns("dgx-a100-80g", 128000, mplan);
  ASSERT_GT(h200, 0);
  ASSERT_GT(a100, 0);
  // The fused kernel's two passes against the two kernels' three (at each GPU's rates).
  Plan h = plan(gpt(2, 2048, 16, 2048, 128000), load_cluster("dgx-h200"), 1, 1, 1, 1, 1);
  h.training.implementation = mplan;
  h.cluster.gpu.compute_capability = 8.0;
  for (auto& set : h.cluster.implementations)
    if (set) set->compute_capability = 8.0;
  const PlanCosts unfused = costs_of(h);
  int64_t two_kernels = -1;
  for (const CostItem& it : unfused.output.fwd.items)
    if (std::strcmp(it.name, "cross_entropy") == 0) two_kernels = it.ns;
  EXPECT_NEAR(static_cast<double>(h200), static_cast<double>(two_kernels) * 2 / 3,
              0.02 * static_cast<double>(two_kernels));
  // A row too wide for the clusters: the two kernels.
  EXPECT_GT(xent_ns("dgx-h200", 140000, mplan), h200);
}

// The executor's optimizer step on a profile with its kernels' rates: the gradient norm and
// AdamW, and a fill only of the gradients that adding kernels write first (its weight-gradient
// GEMMs overwrite on their first write): no gradient-buffer fill of the held parameters.
TEST(LayerCosts, ExecutorZeroesOnlyGradientsFirstWrittenByAddingKernels) {
  Plan pl = plan(gpt(2, 2048, 16, 2048, 128000), load_cluster("h200-calibrated"), 1, 1, 1, 1, 1);
  pl.training.implementation = Implementation::kMplan;
  const GpuSpec& gpu = pl.cluster.gpu_for(pl.training.implementation);
  ASSERT_TRUE(cost::has_kind_rate(gpu, MemKernel::kFill));
  const int64_t n = 1'000'000'000, e = 256'000'000;
  const int64_t none = optimizer_time_ns(pl, n, n, 0), some = optimizer_time_ns(pl, n, n, e);
  EXPECT_EQ(some - none,
            cost::mem_kernel_time_ns(gpu, MemKernel::kFill,
                                     cost::mem_kernel_bytes(MemKernel::kFill, e, 1, 2), 0));
  EXPECT_EQ(none,
            cost::mem_kernel_time_ns(gpu, MemKernel::kGradNorm,
                                     cost::mem_kernel_bytes(MemKernel::kGradNorm, n, 1, 2), 0) +
                cost::mem_kernel_time_ns(gpu, MemKernel::kAdamW,
                                         cost::mem_kernel_bytes(MemKernel::kAdamW, n, 1, 2), 0));
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

// cp_comm_type on the toy GPT of ContextParallelRingExposure (s 8192, h 4096, 32 heads of 128,
// cp 2 on one node): 4096 positions of Q (2·4096·4096 bytes) and of K with V (twice that) here.
TEST(LayerCosts, ContextParallelAllGatherAndA2a) {
  Plan pl = plan(gpt(2, 4096, 32, 8192, 51200), testing::toy_cluster(), 1, 1, 1, 1, 1);
  pl.parallel.cp = 2;
  pl.cluster.intra_node.latency_us = 10;  // collectives take time on the toy cluster
  const double q = 2.0 * 4096 * 4096, kv = 2 * q;
  const cost::GroupPlacement cp2{2, 1, 2};
  const double step_flops = 4.0 * 32 * 4096 * 4096 * 128 / 2;  // one ring step (causal half)
  const int64_t step = std::llround(step_flops / (1000.0 * 1e12 * 0.25) * 1e9);
  // all_gather: the whole K and V gathered before the two steps' work, not overlapped; gathered
  // again in the backward and dK, dV reduce-scattered. The gathered K, V are workspace.
  pl.parallel.cp_comm_type = CpCommType::kAllGather;
  PlanCosts c = costs_of(pl);
  const int64_t ag =
      cost::collective_time_ns(pl.cluster, cost::CollectiveKind::kAllGather, 2 * kv, cp2);
  const int64_t rs =
      cost::collective_time_ns(pl.cluster, cost::CollectiveKind::kReduceScatter, 2 * kv, cp2);
  EXPECT_GT(ag, 0);
  EXPECT_EQ(c.dense.fwd.cost[Cat::kCp], ag);
  EXPECT_EQ(c.dense.bwd.cost[Cat::kCp], ag + rs);
  EXPECT_EQ(c.dense.attn_fwd.cost.total_ns(), 2 * step + ag);
  EXPECT_EQ(c.dense.ws_fwd_bytes, std::llround(2 * kv));
  // a2a (Ulysses): Q, K, V all-to-all'd before, the output after; the core runs once over the
  // whole causal sequence with 16 heads: 4·16·8192²·128 / 2 FLOPs, the two ring steps' work.
  pl.parallel.cp_comm_type = CpCommType::kA2a;
  c = costs_of(pl);
  auto a2a = [&](double bytes) {
    return cost::collective_time_ns(pl.cluster, cost::CollectiveKind::kAllToAll, bytes, cp2);
  };
  const int64_t core =
      std::llround(4.0 * 16 * 8192 * 8192 * 128 / 2 / (1000.0 * 1e12 * 0.25) * 1e9);
  EXPECT_EQ(core, 2 * step);
  EXPECT_EQ(c.dense.fwd.cost[Cat::kCp], a2a(q + kv) + a2a(q));
  EXPECT_EQ(c.dense.bwd.cost[Cat::kCp], a2a(q) + a2a(q + kv));
  EXPECT_EQ(c.dense.attn_fwd.cost.total_ns(), core + a2a(q + kv) + a2a(q));
  EXPECT_EQ(c.dense.ws_fwd_bytes, 0);
}

TEST(LayerCosts, ContextParallelA2aP2pRingsOverTheSecondGroup) {
  // cp 4 as [2, 2]: all-to-all over pairs, then a ring of 2 whose steps cover 4096 x 4096
  // positions with 16 heads; K and V of those 4096 positions and 16 heads: 2·4096·2·2048 bytes.
  Plan pl = plan(gpt(2, 4096, 32, 8192, 51200), testing::toy_cluster(), 1, 1, 1, 1, 1);
  pl.parallel.cp = 4;
  pl.parallel.cp_comm_type = CpCommType::kA2aP2p;
  pl.parallel.hierarchical_context_parallel_sizes = {2, 2};
  pl.cluster.intra_node.latency_us = 10000;  // the ring transfer outlasts its step
  const PlanCosts c = costs_of(pl);
  const double q = 2.0 * 2048 * 4096, kv = 2 * q;  // this GPU's 2048 positions
  const cost::GroupPlacement pair{2, 1, 2};
  auto a2a = [&](double bytes) {
    return cost::collective_time_ns(pl.cluster, cost::CollectiveKind::kAllToAll, bytes, pair);
  };
  const int64_t step =
      std::llround(4.0 * 16 * 4096 * 4096 * 128 / 2 / (1000.0 * 1e12 * 0.25) * 1e9);
  const int64_t send = cost::p2p_time_ns(pl.cluster, 2.0 * 4096 * 2 * 2048, true);
  EXPECT_EQ(2.0 * 4096 * 2 * 2048, kv);
  EXPECT_GT(send, step);
  EXPECT_EQ(c.dense.fwd.cost[Cat::kCp], a2a(q + kv) + a2a(q) + (send - step));
  EXPECT_EQ(c.dense.attn_fwd.cost.total_ns(), 2 * step + a2a(q + kv) + a2a(q) + (send - step));
}

// Activation offloading: cpu_offloading offloads everything the layer keeps, fine-grained the
// inputs of the named modules; each copy costs what the layer's own pass does not hide at the
// host link's 0.5 B/ns.
TEST(LayerCosts, ActivationOffloadingCopies) {
  Plan pl = plan(gpt(2, 1024, 8, 1024, 128), testing::toy_cluster(), 1, 1, 1, 1, 1);
  pl.cluster.host_link_gbps = 0.5;
  PlanCosts c = costs_of(pl);
  EXPECT_EQ(c.dense.offload_bytes, 0);
  pl.training.cpu_offloading_num_layers = 1;
  c = costs_of(pl);
  const LayerCosts& l = c.dense;
  EXPECT_EQ(l.offload_bytes, l.act_bytes);
  const double copy_ns = static_cast<double>(l.act_bytes) / 0.5;
  EXPECT_EQ(l.offload_fwd.cost.total_ns(), std::llround(copy_ns) - l.fwd.cost.total_ns());
  EXPECT_EQ(l.offload_bwd.cost.total_ns(), std::llround(copy_ns) - l.bwd.cost.total_ns());
  // Fine-grained core_attn (megatron-te: flash attention): Q, K and V, 3 · 2 · s·b·h bytes.
  pl.training.cpu_offloading_num_layers = 0;
  pl.training.fine_grained_activation_offloading = true;
  pl.training.offload_modules = kOffloadCoreAttn;
  c = costs_of(pl);
  EXPECT_EQ(c.dense.offload_bytes, 3 * 2 * 1024 * 1024);
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

// The forward items of `p` from the one after `first` (by name) to the one before the last.
std::vector<std::pair<std::string, int64_t>> items_after(const Pass& p, const char* first) {
  std::vector<std::pair<std::string, int64_t>> out;
  size_t i = 0;
  while (i < p.items.size() && std::strcmp(p.items[i].name, first) != 0) ++i;
  for (++i; i + 1 < p.items.size(); ++i) out.emplace_back(p.items[i].name, p.items[i].ns);
  return out;
}
std::vector<std::pair<std::string, int64_t>> items_of(const Pass& p) {
  std::vector<std::pair<std::string, int64_t>> out;
  for (const CostItem& i : p.items) out.emplace_back(i.name, i.ns);
  return out;
}

TEST(LayerCosts, TpCommOverlapPipelinesTheCollectivesWithTheGemms) {
  // Sequence parallel, tp 4, Transformer Engine: each all-gather before QKV and FC1 and each
  // reduce-scatter after the projection and FC2 runs in t steps beside the GEMM's t chunks, so
  // max(A, B) + min(A, B)/t - GEMM of it stays exposed (the profile's overlap slowdown on the
  // GEMM included).
  Plan pl = a100_plan(4, true);
  const PlanCosts plain = costs_of(pl);
  pl.parallel.tp_comm_overlap = true;
  const PlanCosts over = costs_of(pl);
  const GpuSpec& gpu = pl.cluster.gpu_for(pl.training.implementation);
  auto slowed = [&](int64_t g, int64_t comm) {
    return gpu.overlap_slowdown <= 0
               ? g
               : g + std::llround(gpu.overlap_slowdown * static_cast<double>(std::min(g, comm)));
  };
  for (const char* gemm : {"qkv", "fc1", "proj", "fc2"}) {
    const Pass& f = plain.dense.fwd;
    const bool ag = std::strcmp(gemm, "qkv") == 0 || std::strcmp(gemm, "fc1") == 0;
    // The collective beside this GEMM: the item before it (all-gather) or after it.
    size_t i = 0;
    while (std::strcmp(f.items[i].name, gemm) != 0) ++i;
    const int64_t comm = f.items[ag ? i - 1 : i + 1].ns, g0 = f.items[i].ns;
    const int64_t g = slowed(g0, comm);
    const int64_t exposed =
        std::max(g, comm) + std::llround(static_cast<double>(std::min(g, comm)) / 4.0) - g;
    const Pass& o = over.dense.fwd;
    EXPECT_EQ(o.items[i].ns, g) << gemm;
    EXPECT_EQ(o.items[ag ? i - 1 : i + 1].ns, exposed) << gemm;
    EXPECT_LT(exposed, comm) << gemm;
  }
  EXPECT_LT(over.dense.fwd.cost.total_ns(), plain.dense.fwd.cost.total_ns());
  // Without sequence parallelism (Megatron refuses it) nothing changes.
  Plan no_sp = a100_plan(4, false);
  const int64_t before = costs_of(no_sp).dense.fwd.cost.total_ns();
  no_sp.parallel.tp_comm_overlap = true;
  EXPECT_EQ(costs_of(no_sp).dense.fwd.cost.total_ns(), before);
}

TEST(LayerCosts, SelectiveRecomputeRunsTheRecomputeModulesAgain) {
  Plan pl = a100_plan(4, true);
  pl.training.implementation = Implementation::kMegatronLocal;  // every norm a module
  pl.parallel.recompute = Recompute::kSelective;
  PlanCosts c = costs_of(pl);
  // Megatron's default, core_attn: the attention core's forward.
  EXPECT_EQ(items_of(c.dense.recompute_fwd), items_of(c.dense.attn_fwd));
  // mlp: the forward's MLP items between the pre-MLP norm and the residual add (all-gather, FC1,
  // GeLU, FC2, reduce-scatter), each as long as in the forward.
  pl.parallel.recompute_modules = kRecomputeMlp;
  c = costs_of(pl);
  const auto mlp = items_after(c.dense.fwd, "pre_mlp_norm");
  ASSERT_GE(mlp.size(), 3u);
  EXPECT_EQ(items_of(c.dense.recompute_fwd), mlp);
  // layernorm: the two norms.
  pl.parallel.recompute_modules = kRecomputeLayernorm;
  c = costs_of(pl);
  EXPECT_EQ(items_of(c.dense.recompute_fwd),
            (std::vector<std::pair<std::string, int64_t>>{
                {"input_norm", item_ns(c.dense.fwd, "input_norm")},
                {"pre_mlp_norm", item_ns(c.dense.fwd, "pre_mlp_norm")}}));
  // Transformer Engine fuses the norms into the linears: layernorm recomputes nothing in a dense
  // layer, and mlp runs the fused pre-MLP norm with it.
  pl.training.implementation = Implementation::kMegatronTe;
  c = costs_of(pl);
  EXPECT_TRUE(c.dense.recompute_fwd.items.empty());
  pl.parallel.recompute_modules = kRecomputeCoreAttn | kRecomputeMlp;
  c = costs_of(pl);
  EXPECT_EQ(
      c.dense.recompute_fwd.cost.total_ns(),
      c.dense.attn_fwd.cost.total_ns() + item_ns(c.dense.fwd, "pre_mlp_norm") + [&] {
        int64_t t = 0;
        for (const auto& [n, ns] : items_after(c.dense.fwd, "pre_mlp_norm")) t += ns;
        return t;
      }());
  // Without selective granularity nothing is recomputed module by module.
  pl.parallel.recompute = Recompute::kNone;
  c = costs_of(pl);
  EXPECT_EQ(c.dense.recompute_fwd.cost.total_ns(), 0);
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
  // The per-kernel floor: a GEMM item shorter than it takes it (here a floor of 10 s).
  pl.cluster.gpu.overlap_slowdown = 0;
  pl.cluster.gpu.kernel_overhead_us = 1e7;
  const PlanCosts over = costs_of(pl);
  EXPECT_EQ(item_ns(over.dense.bwd_weight, "fc1_wgrad"), 10'000'000'000);
}

// The toy GPU (flat 50 % GEMM efficiency at 1000 TFLOP/s bf16) with fp8 at 2000 TFLOP/s and an
// HBM of 1 TB/s, so the quantization kernels take a time worked out by hand.
Plan fp8_toy_plan(Fp8Recipe recipe) {
  ClusterSpec c = testing::toy_cluster();
  c.gpu.peak_fp8_tflops = 2000;
  c.gpu.compute_capability = 9.0;
  c.gpu.hbm_bandwidth_gbps = 1000;
  Plan pl = plan(gpt(4, 4096, 32, 2048, 51200), c, 1, 1, 1, 2, 2);
  pl.training.fp8_format = Fp8Format::kHybrid;
  pl.training.fp8_recipe = recipe;
  return pl;
}

TEST(LayerCosts, Fp8GemmsAtTheFp8PeakAndTheirQuantization) {
  const Plan pl = fp8_toy_plan(Fp8Recipe::kDelayed);
  Plan bf = pl;
  bf.training.fp8_format = Fp8Format::kNone;
  const PlanCosts c8 = costs_of(pl), c16 = costs_of(bf);
  // FC1 of the 4h GeLU MLP: 2 · (s·b) · 4h · h = 2 · 4096 · 16384 · 4096 FLOPs at 50 % of
  // 2 PFLOP/s = 549.8 us in fp8 (1099.5 us in bf16); the same for every transformer GEMM.
  const double fc1_flops = 2.0 * 4096 * 16384 * 4096;
  EXPECT_NEAR(static_cast<double>(item_ns(c8.dense.fwd, "fc1")), fc1_flops / (2e15 * 0.5) * 1e9, 1);
  EXPECT_NEAR(static_cast<double>(item_ns(c16.dense.fwd, "fc1")), fc1_flops / (1e15 * 0.5) * 1e9,
              1);
  for (const char* g : {"qkv", "proj", "fc2"})
    EXPECT_NEAR(2.0 * static_cast<double>(item_ns(c8.dense.fwd, g)),
                static_cast<double>(item_ns(c16.dense.fwd, g)), 2)
        << g;
  // The attention core and the output layer stay in bf16.
  EXPECT_EQ(item_ns(c8.dense.fwd, "attention"), item_ns(c16.dense.fwd, "attention"));
  EXPECT_EQ(item_ns(c8.output.fwd, "logits"), item_ns(c16.output.fwd, "logits"));
  // Quantized per micro-batch, forward: the inputs of QKV (T·h), projection (T·h), FC1 (T·h),
  // FC2 (T·4h) = 7·T·h elements with T = 4096 tokens, h = 4096; delayed scaling reads 2 bytes and
  // writes two 1-byte copies: 4 bytes each, at 1 TB/s.
  const double t_h = 4096.0 * 4096;
  EXPECT_NEAR(static_cast<double>(item_ns(c8.dense.fwd, "quantize")), 4 * 7 * t_h / 1e12 * 1e9, 1);
  // Backward: the output gradients of QKV (3·T·h), projection (T·h), FC1 (4·T·h), FC2 (T·h).
  EXPECT_NEAR(static_cast<double>(item_ns(c8.dense.bwd_input, "quantize_bwd")),
              4 * 9 * t_h / 1e12 * 1e9, 1);
  EXPECT_EQ(count(c16.dense.fwd, "quantize"), 0);
  // Activations: 34 sbh in bf16 (flash, dropout), 29 sbh in fp8 (QKV, FC1, FC2 inputs in 1 byte,
  // the projection's quantized input beside the context).
  const int64_t sbh = 2048LL * 2 * 4096;
  EXPECT_EQ(c16.dense.act_bytes, 34 * sbh);
  EXPECT_EQ(c8.dense.act_bytes, 29 * sbh);
  // The GEMM weights of a layer: QKV 3h², projection h², FC1 and FC2 4h² each.
  EXPECT_EQ(c8.dense.lp_gemm_params, 12LL * 4096 * 4096);
  EXPECT_EQ(c16.dense.lp_gemm_params, 0);
}

TEST(LayerCosts, TensorwiseReadsTheInputTwice) {
  const PlanCosts t = costs_of(fp8_toy_plan(Fp8Recipe::kTensorwise));
  const double t_h = 4096.0 * 4096;
  EXPECT_NEAR(static_cast<double>(item_ns(t.dense.fwd, "quantize")), 6 * 7 * t_h / 1e12 * 1e9, 1);
}

TEST(LayerCosts, FirstAndLastLayersKeptInBf16) {
  Plan pl = fp8_toy_plan(Fp8Recipe::kTensorwise);
  pl.training.first_last_layers_bf16 = true;  // one at each end of 4 layers
  const PlanCosts c = costs_of(pl);
  ASSERT_TRUE(c.has_bf16_layers);
  EXPECT_EQ(&layer_costs_of(c, pl, 0), &c.dense_bf16);
  EXPECT_EQ(&layer_costs_of(c, pl, 1), &c.dense);
  EXPECT_EQ(&layer_costs_of(c, pl, 2), &c.dense);
  EXPECT_EQ(&layer_costs_of(c, pl, 3), &c.dense_bf16);
  EXPECT_EQ(count(c.dense_bf16.fwd, "quantize"), 0);
  EXPECT_EQ(count(c.dense.fwd, "quantize"), 1);
  EXPECT_GT(c.dense_bf16.fwd.cost.total_ns(), c.dense.fwd.cost.total_ns());
}

TEST(LayerCosts, Fp8InputAllGathersUnderSequenceParallelism) {
  // With sequence parallelism the column-parallel inputs are quantized before the all-gather:
  // the gather carries 1 byte per element instead of 2.
  Plan bf = a100_plan(4, true);
  bf.cluster = load_cluster("dgx-h100");
  Plan f8 = bf;
  f8.training.fp8_format = Fp8Format::kE4m3;
  const cost::GroupPlacement tp{4, 1, 4};
  const double x = 2048.0 * 2 * 4096;  // (s, b, h) elements
  const int64_t ag16 =
      cost::collective_time_ns(bf.cluster, cost::CollectiveKind::kAllGather, 2 * x, tp);
  const int64_t ag8 = cost::collective_time_ns(bf.cluster, cost::CollectiveKind::kAllGather, x, tp);
  const int64_t rs =
      cost::collective_time_ns(bf.cluster, cost::CollectiveKind::kReduceScatter, 2 * x, tp);
  EXPECT_EQ(costs_of(bf).dense.fwd.cost[Cat::kTp], 2 * ag16 + 2 * rs);
  EXPECT_EQ(costs_of(f8).dense.fwd.cost[Cat::kTp], 2 * ag8 + 2 * rs);
}

}  // namespace
}  // namespace mplan::sim

namespace mplan::sim {
namespace {

// A small MLA model on the toy GPU (flat 50 % of 1 PFLOP/s, free memory traffic): 2 layers,
// h 1024, 8 heads, q_r 256, k_r 128, d_n 64, d_r 32, d_v 64; tp 2, micro-batch 1, s 1024.
Plan mla_plan(int64_t q_lora) {
  ModelSpec m = gpt(2, 1024, 8, 1024, 1024);
  m.mla = MlaSpec{q_lora, 128, 64, 32, 64};
  return plan(m, testing::toy_cluster(), 2, 1, 1, 1, 1);
}

TEST(LayerCosts, MlaProjectionsAsMegatronRunsThem) {
  const PlanCosts c = costs_of(mla_plan(256));
  const double T = 1024, eff = 0.5e15;
  auto t = [&](double m, double n, double k) { return 2 * m * n * k / eff * 1e9; };
  // Down projections duplicated on each tp rank; up projections split by heads (4 of 8 here):
  // q_up to 4 x (64 + 32), kv_up to 4 x (64 + 64); the projection from 4 x 64.
  EXPECT_NEAR(static_cast<double>(item_ns(c.dense.fwd, "q_down")), t(T, 256, 1024), 1);
  EXPECT_NEAR(static_cast<double>(item_ns(c.dense.fwd, "kv_down")), t(T, 128 + 32, 1024), 1);
  EXPECT_NEAR(static_cast<double>(item_ns(c.dense.fwd, "q_up")), t(T, 4 * 96, 256), 1);
  EXPECT_NEAR(static_cast<double>(item_ns(c.dense.fwd, "kv_up")), t(T, 4 * 128, 128), 1);
  EXPECT_NEAR(static_cast<double>(item_ns(c.dense.fwd, "proj")), t(T, 1024, 4 * 64), 1);
  EXPECT_EQ(count(c.dense.fwd, "qkv"), 0);
  EXPECT_EQ(count(c.dense.bwd_weight, "q_down_wgrad"), 1);
  // Without q compression: one column-parallel linear_q_proj from h.
  const PlanCosts n = costs_of(mla_plan(0));
  EXPECT_NEAR(static_cast<double>(item_ns(n.dense.fwd, "q_proj")), t(T, 4 * 96, 1024), 1);
  EXPECT_EQ(count(n.dense.fwd, "q_down"), 0);
  // The GEMM weights the layer holds on this GPU (fp8 would quantize): duplicated down
  // projections whole, the rest halved.
  const LayerShard s = layer_shard(mla_plan(256).model, mla_plan(256).parallel, false);
  EXPECT_EQ(s.gemm_dense, 256 * 1024 + 4 * 96 * 256 + 160 * 1024 + 4 * 128 * 128 + 1024 * 4 * 64 +
                              2 * 4096 * 1024 / 2);
}

TEST(LayerCosts, SlidingWindowAttentionCostsItsShareOfScores) {
  Plan full = plan(gpt(4, 4096, 32, 8192, 51200), load_cluster("dgx-h100"), 1, 1, 1, 1, 1);
  Plan swa = full;
  swa.model.window_size = std::array<int64_t, 2>{1023, 0};  // 1024 positions
  const PlanCosts f = costs_of(full), w = costs_of(swa);
  // 8192 x 1024 - 1024·1023/2 scores of 8192·8193/2: 23.7 %; the smaller call runs at a lower
  // efficiency, so the time lies between that share and the whole.
  const double share = (8192.0 * 1024 - 1024.0 * 1023 / 2) / (8192.0 * 8193 / 2);
  const double ratio = static_cast<double>(item_ns(w.dense.fwd, "attention")) /
                       static_cast<double>(item_ns(f.dense.fwd, "attention"));
  EXPECT_GT(ratio, share);
  EXPECT_LT(ratio, 0.5);
  EXPECT_FALSE(w.has_full_attention_layers);
  // Every second layer full (window_attn_skip_freq 2): layers 1 and 3 take the full costs.
  swa.model.window_attn_skip_freq = 2;
  const PlanCosts k = costs_of(swa);
  ASSERT_TRUE(k.has_full_attention_layers);
  EXPECT_EQ(&layer_costs_of(k, swa, 0), &k.dense);
  EXPECT_EQ(&layer_costs_of(k, swa, 1), &k.dense_full);
  EXPECT_EQ(item_ns(k.dense_full.fwd, "attention"), item_ns(f.dense.fwd, "attention"));
}

TEST(LayerCosts, MoeGroupedGemmDispatcherAndOverlap) {
  Plan pl = a100_plan(1, false);
  pl.model.moe = MoeSpec{8, 2, 4096, 0, 1};
  pl.parallel.ep = 2;
  pl.parallel.dp = 2;
  pl.parallel.global_batch_size = 4;
  const PlanCosts g = costs_of(pl);
  // One GEMM per local expert (4 here) instead of one grouped GEMM: each of a quarter of the
  // FLOPs, at that size's efficiency.
  Plan seq = pl;
  seq.model.moe->moe_grouped_gemm = false;
  const PlanCosts s = costs_of(seq);
  EXPECT_GE(item_ns(s.moe.fwd, "expert_fc1"), item_ns(g.moe.fwd, "expert_fc1"));
  // The flex dispatcher (DeepEP) fuses the permutation into its kernels.
  Plan flex = pl;
  flex.model.moe->moe_token_dispatcher_type = MoeDispatcher::kFlex;
  const PlanCosts x = costs_of(flex);
  EXPECT_GT(item_ns(g.moe.fwd, "permute"), 0);
  EXPECT_EQ(count(x.moe.fwd, "permute"), 0);  // a zero-time item is not recorded
  // Overlapping the expert-parallel all-to-alls hides them behind the experts' computation.
  Plan ov = pl;
  ov.model.moe->overlap_moe_expert_parallel_comm = true;
  const PlanCosts o = costs_of(ov);
  EXPECT_LT(o.moe.fwd.cost[Cat::kEp], g.moe.fwd.cost[Cat::kEp]);
}

TEST(LayerCosts, MultiTokenPredictionOnTheLastStage) {
  Plan pl = a100_plan(1, false);
  const PlanCosts base = costs_of(pl);
  pl.model.mtp_num_layers = 1;
  const PlanCosts c = costs_of(pl);
  // One MTP block: a layer, eh_proj, the head again.
  EXPECT_EQ(c.output.fwd.cost.total_ns(),
            2 * base.output.fwd.cost.total_ns() + c.dense.fwd.cost.total_ns() +
                item_ns(c.output.fwd, "mtp_eh_proj") + 2 * item_ns(c.output.fwd, "mtp_norms"));
  EXPECT_EQ(c.output.params - base.output.params,
            3 * 2 * 4096 + 2 * 4096 * 4096 + c.dense.dense_params);
}

}  // namespace
}  // namespace mplan::sim
