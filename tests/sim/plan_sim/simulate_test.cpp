// simulate() end to end, against closed forms worked out by hand:
// - 1F1B makespan (m + p - 1)(f + b) through the full lowering (Narayanan et al., SC'21, §2.2),
//   on a GPU whose GEMM and attention times are FLOPs at a flat rate;
// - activation bytes at the peak = Korthikanti et al. 2022, Table 2, times the micro-batches the
//   schedule keeps in flight (1F1B: p - stage), plus Megatron's first/last-stage extras;
// - a free pipeline layout's parameters and activations per stage, by hand;
// - weights + grads + optimizer = 18 bytes per parameter, 6 + 12/dp with the distributed optimizer
//   (Megatron-LM docs/user-guide/features/dist_optimizer.md);
// - one rank per stage and the full grid give the same iteration time and memory;
// - determinism (also across threads); a hand-broken schedule reports instead of hanging;
// - the cluster effects of docs/cost-model.md: tensor parallelism spanning nodes, weak scaling,
//   and the implementation's efficiency set.
#include "sim/plan_sim/simulate.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <sstream>
#include <thread>

#include "src/common/error.hpp"
#include "src/model/model_stats.hpp"
#include "src/plan/validate.hpp"
#include "src/schedule/schedule.hpp"
#include "tests/sim/plan_sim/test_plans.hpp"

namespace mplan::sim {
namespace {

using testing::gpt;
using testing::plan;
using testing::toy_cluster;

// Time of `flops` at efficiency `eff` of the toy GPU, rounded as the cost model rounds.
int64_t toy_ns(double flops, double eff) {
  return std::llround(flops / (1000.0 * 1e12 * eff) * 1e9);
}

void expect_valid(const Plan& p) {
  const auto v = validate(p);
  ASSERT_TRUE(v.empty()) << to_string(v.front());
}

TEST(Simulate, OneFOneBMakespanThroughTheLowering) {
  // h 4096, 32 heads, s 1024, b 1: T = 1024 tokens. 8 layers on pp 4, m 8 micro-batches.
  const int64_t h = 4096, T = 1024, s = 1024, p = 4, m = 8, per_stage = 2, V = 128;
  ModelSpec model = gpt(p * per_stage, h, 32, s, V);
  model.tied_embeddings = false;
  Plan pl = plan(model, toy_cluster(), 1, p, 1, 1, m);
  expect_valid(pl);
  const double gh = 2.0 * T * h;  // 2·T·h: FLOPs per output column of a (T x h) input
  // Forward: QKV (3h), projection (h), FC1 (4h), FC2 (4h in, h out); causal flash attention
  // 4·b·a·s²·d / 2 = 2·s²·h.
  const double attn = 2.0 * s * s * h;
  const int64_t f_layer = toy_ns(gh * 3 * h, 0.5) + toy_ns(attn, 0.25) + toy_ns(gh * h, 0.5) +
                          2 * toy_ns(gh * 4 * h, 0.5);
  // Backward: every GEMM twice (input and weight gradient), attention 2.5 x its forward FLOPs.
  const int64_t b_layer =
      2 * (toy_ns(gh * 3 * h, 0.5) + toy_ns(gh * h, 0.5) + 2 * toy_ns(gh * 4 * h, 0.5)) +
      toy_ns(2.5 * attn, 0.25);
  const int64_t f = per_stage * f_layer, b = per_stage * b_layer;
  // The last stage also runs the logits GEMM (T x V x h) forward and twice backward.
  const int64_t extra = toy_ns(2.0 * T * V * h, 0.5) * 3;
  const SimulationResult r = simulate(pl);
  const int64_t closed = (m + p - 1) * (f + b);
  const int64_t got = std::llround(r.iteration_time_s * 1e9);
  EXPECT_GE(got, closed + extra);
  EXPECT_LE(got, closed + m * extra);
  EXPECT_LT(static_cast<double>(m * extra) / closed, 1e-3);  // the bound is tight
  // The busiest stage idles (p - 1)(f + b): bubble (p - 1) / (m + p - 1) of the step.
  EXPECT_NEAR(r.bubble_fraction, static_cast<double>(p - 1) / (m + p - 1), 2e-3);
  // The busiest stage is the last one: m forwards and backwards with the logits GEMMs.
  EXPECT_EQ(r.critical_stage, p - 1);
  EXPECT_NEAR(r.breakdown.compute_s, 1e-9 * m * (f + b + extra), 1e-12);
}

TEST(Simulate, GpipeHoldsEveryMicrobatchAndHasTheSameMakespan) {
  const int64_t h = 2048, s = 1024, p = 2, m = 4;
  ModelSpec model = gpt(2 * p, h, 16, s, 128);
  model.tied_embeddings = false;
  Plan pl = plan(model, toy_cluster(), 1, p, 1, 1, m);
  const SimulationResult one = simulate(pl);
  pl.parallel.schedule = ScheduleKind::kGpipe;
  const SimulationResult gp = simulate(pl);
  EXPECT_NEAR(gp.iteration_time_s, one.iteration_time_s, 1e-3 * one.iteration_time_s);
  // GPipe keeps all m micro-batches on stage 1, 1F1B one.
  EXPECT_NEAR(static_cast<double>(gp.per_stage[1].activations_bytes),
              static_cast<double>(m * one.per_stage[1].activations_bytes), 1.0);
}

// sbh(10 + 24/t + 5as/(ht)) per layer: Korthikanti et al. 2022, Table 2, tensor parallel.
TEST(Simulate, ActivationsAtThePeakAreKorthikantiTable2) {
  const int64_t s = 2048, b = 1, h = 1024, a = 16, t = 2, L = 2, V = 256;
  Plan pl = plan(gpt(L, h, a, s, V), toy_cluster(), t, 1, 1, b, b);
  pl.training.attention_backend = AttentionBackend::kUnfused;
  expect_valid(pl);
  const SimulationResult r = simulate(pl);
  const int64_t sbh = s * b * h;
  const int64_t layer = sbh * (10 + 24 / t) + 5 * a * s * s * b / t;  // 5as/(ht) · sbh
  const int64_t embedding = 8 * s * b + sbh;                          // token ids, dropout mask
  const int64_t output = 4 * sbh + 4 * s * b * V / t;                 // norm/GEMM inputs, logits
  ASSERT_EQ(r.per_stage.size(), 1u);
  EXPECT_EQ(r.per_stage[0].activations_bytes, L * layer + embedding + output);
}

// 34 sbh / t with sequence parallelism and selective recompute (Table 2, last row).
TEST(Simulate, ActivationsWithSequenceParallelAndSelectiveRecompute) {
  const int64_t s = 2048, b = 2, h = 1024, a = 16, t = 4, L = 3, V = 512;
  Plan pl = plan(gpt(L, h, a, s, V), toy_cluster(), t, 1, 1, b, b);
  pl.parallel.sequence_parallel = true;
  pl.parallel.recompute = Recompute::kSelective;
  expect_valid(pl);
  const SimulationResult r = simulate(pl);
  const int64_t sbh = s * b * h;
  EXPECT_EQ(r.per_stage[0].activations_bytes,
            L * 34 * sbh / t + (8 * s * b + sbh) / t + 4 * sbh / t + 4 * s * b * V / t);
}

// --optimizer-cpu-offload: the GPU keeps (1 - f) of the optimizer state, and the step takes
// offloaded_optimizer_step's time (sim/cost/offload_cost_test.cpp works it out).
TEST(Simulate, OptimizerCpuOffloadMovesStateAndStepToTheHost) {
  Plan pl = plan(gpt(2, 1024, 8, 1024, 128), toy_cluster(), 1, 1, 1, 1, 1);
  pl.training.optimizer_precision.use_precision_aware_optimizer = true;
  const SimulationResult on_gpu = simulate(pl);
  pl.training.optimizer_cpu_offload = true;
  pl.training.optimizer_offload_fraction = 0.5;
  expect_valid(pl);
  const SimulationResult half = simulate(pl);
  EXPECT_NEAR(static_cast<double>(half.per_stage[0].optimizer_bytes),
              0.5 * static_cast<double>(on_gpu.per_stage[0].optimizer_bytes), 1.0);
  EXPECT_GT(half.breakdown.optimizer_s, on_gpu.breakdown.optimizer_s);
  pl.training.optimizer_offload_fraction = 1.0;
  EXPECT_EQ(simulate(pl).per_stage[0].optimizer_bytes, 0);
}

// --cpu-offloading-num-layers N: the first N layers' activations leave the GPU between their
// forward and backward, and each such layer's forward and backward take the copies' exposed time
// (layer_costs_test works it out); pp 1, one micro-batch: the times add up.
TEST(Simulate, CpuOffloadingMovesTheFirstLayersActivationsToTheHost) {
  const int64_t s = 1024, b = 1, h = 1024, a = 8, L = 3, V = 128;
  Plan pl = plan(gpt(L, h, a, s, V), toy_cluster(), 1, 1, 1, b, b);
  pl.cluster.host_link_gbps = 0.5;  // slow enough that the copies show
  const SimulationResult r0 = simulate(pl);
  pl.training.cpu_offloading_num_layers = 1;
  expect_valid(pl);
  const SimulationResult r1 = simulate(pl);
  pl.training.cpu_offloading_num_layers = 2;
  const SimulationResult r2 = simulate(pl);
  const int64_t layer = r0.per_stage[0].activations_bytes - r1.per_stage[0].activations_bytes;
  EXPECT_GT(layer, 0);
  EXPECT_EQ(r1.per_stage[0].activations_bytes - r2.per_stage[0].activations_bytes, layer);
  const double per_layer = r1.iteration_time_s - r0.iteration_time_s;
  EXPECT_GT(per_layer, 0);
  EXPECT_NEAR(r2.iteration_time_s - r1.iteration_time_s, per_layer, 1e-9);
}

// overlap_p2p_comm: the interleaved schedule's transfers run beside the passes of the other
// direction; no effect on 1F1B (Megatron turns it off there).
TEST(Simulate, OverlapP2pCommHidesInterleavedTransfers) {
  // Llama 3 8B on two DGX H100 nodes, tp 2 x pp 4 x dp 2: pipeline neighbours 1 and 2 sit on
  // different nodes.
  Plan pl = plan(load_model("llama3-8b"), load_cluster("dgx-h100"), 2, 4, 2, 1, 64);
  pl.parallel.sequence_parallel = true;
  const double one_f_one_b = simulate(pl).iteration_time_s;
  pl.parallel.overlap_p2p_comm = true;
  EXPECT_EQ(simulate(pl).iteration_time_s, one_f_one_b);
  pl.parallel.vpp = 2;
  pl.parallel.schedule = ScheduleKind::kInterleaved;
  pl.parallel.overlap_p2p_comm = false;
  expect_valid(pl);
  const SimulationResult blocking = simulate(pl);
  pl.parallel.overlap_p2p_comm = true;
  expect_valid(pl);
  const SimulationResult overlapped = simulate(pl);
  EXPECT_LT(overlapped.iteration_time_s, blocking.iteration_time_s);
  pl.parallel.overlap_p2p_comm_warmup_flush = true;
  expect_valid(pl);
  EXPECT_LT(simulate(pl).iteration_time_s, overlapped.iteration_time_s);
}

// Full recompute keeps 2sbh per layer (Table 2); during a backward one layer is recomputed.
TEST(Simulate, FullRecomputeKeepsTheLayerInputs) {
  const int64_t s = 1024, b = 1, h = 1024, a = 8, L = 4, V = 128;
  Plan pl = plan(gpt(L, h, a, s, V), toy_cluster(), 1, 1, 1, b, b);
  pl.parallel.recompute = Recompute::kFull;
  pl.parallel.recompute_num_layers = 1;
  const SimulationResult full = simulate(pl);
  pl.parallel.recompute = Recompute::kNone;
  const SimulationResult none = simulate(pl);
  const int64_t sbh = s * b * h;
  const int64_t extras = (8 * s * b + sbh) + 4 * sbh + 4 * s * b * V;
  const int64_t layer = none.per_stage[0].activations_bytes - extras;  // all L layers, no recompute
  EXPECT_EQ(layer % L, 0);
  // At the peak: L checkpoints of 2sbh, plus one layer being recomputed.
  EXPECT_EQ(full.per_stage[0].activations_bytes, L * 2 * sbh + extras + layer / L);
  // The recomputed forward costs one more forward: backward + forward = 3 passes -> 4.
  EXPECT_GT(full.iteration_time_s, none.iteration_time_s * 1.2);
}

TEST(Simulate, InFlightActivationsFollowTheSchedule) {
  // 1F1B, pp 4, m 8: stage 1 keeps p - 1 = 3 micro-batches; Table 2 per layer, no extras there.
  const int64_t s = 1024, b = 1, h = 1024, a = 8, t = 1, p = 4, per_stage = 2, m = 8;
  Plan pl = plan(gpt(p * per_stage, h, a, s, 128), toy_cluster(), t, p, 1, b, m);
  pl.training.attention_backend = AttentionBackend::kUnfused;
  const SimulationResult r = simulate(pl);
  const int64_t layer = s * b * h * 34 + 5 * a * s * s * b;
  for (int64_t st = 1; st < p - 1; ++st)
    EXPECT_EQ(r.per_stage[st].activations_bytes, (p - st) * per_stage * layer) << "stage " << st;
}

// A free layout (3 + 2 + 2 + 1 layers) gives each stage its own parameters and activations: a
// layer holds 12h^2 + 13h parameters (qkv, proj, fc1, fc2 with biases, two LayerNorms), the first
// stage adds the word and position embeddings, the last the final LayerNorm and its copy of the
// tied output weight; under 1F1B stage st keeps p - st micro-batches of its layers.
TEST(Simulate, LayoutGivesEachStageItsParametersAndActivations) {
  const int64_t s = 1024, b = 1, h = 1024, a = 8, p = 4, m = 8, V = 128;
  Plan pl = plan(gpt(8, h, a, s, V), toy_cluster(), 1, p, 1, b, m);
  pl.training.attention_backend = AttentionBackend::kUnfused;
  pl.parallel.pipeline_model_parallel_layout =
      parse_pipeline_layout("Et*3|t*2|t*2|tL", "parallel.pipeline_model_parallel_layout");
  expect_valid(pl);
  const SimulationResult r = simulate(pl);
  ASSERT_EQ(r.per_stage.size(), 4u);
  const int64_t layer_params = 12 * h * h + 13 * h;
  const int64_t want_params[4] = {3 * layer_params + V * h + s * h, 2 * layer_params,
                                  2 * layer_params, layer_params + 2 * h + V * h};
  const int64_t layer_acts = s * b * h * 34 + 5 * a * s * s * b;  // Korthikanti Table 2
  for (int64_t st = 0; st < p; ++st)
    EXPECT_EQ(r.per_stage[st].weights_bytes, 2 * want_params[st]) << "stage " << st;
  EXPECT_EQ(r.per_stage[1].activations_bytes, (p - 1) * 2 * layer_acts);
  EXPECT_EQ(r.per_stage[2].activations_bytes, (p - 2) * 2 * layer_acts);
  // The same split as decoder_first/last (3 and 1) simulates identically.
  Plan fl = pl;
  fl.parallel.pipeline_model_parallel_layout.reset();
  fl.parallel.decoder_first_pipeline_num_layers = 3;
  fl.parallel.decoder_last_pipeline_num_layers = 1;
  expect_valid(fl);
  const SimulationResult f = simulate(fl);
  EXPECT_EQ(f.iteration_time_s, r.iteration_time_s);
  for (int64_t st = 0; st < p; ++st)
    EXPECT_EQ(f.per_stage[st].peak_bytes, r.per_stage[st].peak_bytes) << "stage " << st;
}

// Empty chunks (a standalone embedding and loss stage, Megatron's "E|t*4|t*4|L" at pp 2): the
// first chunk holds only the embedding, the last only the output layer; the stage parameters
// follow.
TEST(Simulate, LayoutWithEmptyChunks) {
  const int64_t s = 512, h = 512, a = 8, V = 256;
  Plan pl = plan(gpt(8, h, a, s, V), toy_cluster(), 1, 2, 1, 1, 8);
  pl.parallel.pipeline_model_parallel_layout =
      parse_pipeline_layout("E|t*4|t*4|L", "parallel.pipeline_model_parallel_layout");
  pl.parallel.vpp = 2;
  pl.parallel.schedule = ScheduleKind::kInterleaved;
  expect_valid(pl);
  const SimulationResult r = simulate(pl);
  const int64_t layer_params = 12 * h * h + 13 * h;
  EXPECT_EQ(r.per_stage[0].weights_bytes, 2 * (4 * layer_params + V * h + s * h));
  EXPECT_EQ(r.per_stage[1].weights_bytes, 2 * (4 * layer_params + 2 * h + V * h));
  EXPECT_GT(r.iteration_time_s, 0);
}

TEST(Simulate, ModelStateIs18BytesPerParameter) {
  ModelSpec m = gpt(8, 1024, 16, 1024, 1000);
  Plan pl = plan(m, toy_cluster(), 2, 2, 4, 1, 16);
  expect_valid(pl);
  const SimulationResult r = simulate(pl);
  for (int64_t st = 0; st < 2; ++st) {
    const int64_t params = rank_params(m, pl.parallel, st).total();
    const StageMemory& sm = r.per_stage[st];
    EXPECT_EQ(sm.weights_bytes, 2 * params);
    EXPECT_EQ(sm.weights_bytes + sm.grads_bytes + sm.optimizer_bytes, 18 * params);
  }
  pl.parallel.distributed_optimizer = true;
  const SimulationResult d = simulate(pl);
  for (int64_t st = 0; st < 2; ++st) {
    const int64_t params = rank_params(m, pl.parallel, st).total();
    const StageMemory& sm = d.per_stage[st];
    EXPECT_EQ(sm.weights_bytes + sm.grads_bytes, 6 * params);
    EXPECT_EQ(sm.optimizer_bytes, std::llround(12.0 / 4 * static_cast<double>(params)));
  }
}

// Megatron-FSDP: ZeRO-3 keeps 18/d bytes per parameter (bf16 weights 2, fp32 grads 4, Adam 12,
// all sharded) plus two gathered layers and one layer's gradient as buffers; ZeRO-2 2 + 16/d.
// Every pass gathers its chunk's parameters and every backward reduce-scatters its gradients.
TEST(Simulate, MegatronFsdpShardsTheModelState) {
  ModelSpec m = gpt(4, 1024, 16, 1024, 1000);
  Plan pl = plan(m, toy_cluster(), 1, 1, 8, 1, 32);
  pl.parallel.distributed_optimizer = true;
  expect_valid(pl);
  const SimulationResult dist = simulate(pl);
  pl.parallel.use_megatron_fsdp = true;
  pl.parallel.data_parallel_sharding_strategy = DpSharding::kOptimGradsParams;
  expect_valid(pl);
  const SimulationResult z3 = simulate(pl);
  const int64_t params = rank_params(m, pl.parallel, 0).total();
  const StageMemory& s3 = z3.per_stage[0];
  EXPECT_EQ(s3.weights_bytes, std::llround(2.0 * static_cast<double>(params) / 8));
  EXPECT_EQ(s3.grads_bytes, std::llround(4.0 * static_cast<double>(params) / 8));
  EXPECT_EQ(s3.optimizer_bytes, std::llround(12.0 * static_cast<double>(params) / 8));
  const int64_t layer = 12 * 1024 * 1024 + 13 * 1024;
  EXPECT_EQ(s3.other_bytes - dist.per_stage[0].other_bytes, 2 * 2 * layer + 4 * layer);
  // 4 micro-batches: a gather before each forward and backward, a reduce-scatter after each
  // backward (12 ops) in place of the buckets' reduce-scatters and gathers.
  EXPECT_GT(z3.num_ops, dist.num_ops);
  EXPECT_GE(z3.iteration_time_s, dist.iteration_time_s);
  pl.parallel.data_parallel_sharding_strategy = DpSharding::kOptimGrads;
  const SimulationResult z2 = simulate(pl);
  const StageMemory& s2 = z2.per_stage[0];
  EXPECT_EQ(s2.weights_bytes, 2 * params);
  EXPECT_EQ(s2.grads_bytes + s2.optimizer_bytes,
            std::llround(4.0 * static_cast<double>(params) / 8) +
                std::llround(12.0 * static_cast<double>(params) / 8));
}

TEST(Simulate, PeakIsTheSumOfItsPartsAndFitsIsAgainstCapacity) {
  Plan pl = plan(gpt(8, 1024, 16, 1024, 1000), toy_cluster(), 2, 2, 2, 1, 8);
  pl.cluster.gpu.runtime_overhead_gib = 1.5;
  const SimulationResult r = simulate(pl);
  EXPECT_EQ(r.runtime_overhead_bytes, 3 * (int64_t{1} << 29));
  int64_t peak = 0;
  for (const StageMemory& s : r.per_stage) {
    EXPECT_EQ(s.peak_bytes, s.weights_bytes + s.grads_bytes + s.optimizer_bytes +
                                s.activations_bytes + s.other_bytes);
    EXPECT_GE(s.other_bytes, r.runtime_overhead_bytes);
    peak = std::max(peak, s.peak_bytes);
  }
  EXPECT_EQ(r.peak_bytes, peak);
  EXPECT_EQ(r.capacity_bytes, 80 * (int64_t{1} << 30));
  EXPECT_TRUE(r.fits);
  pl.cluster.gpu.memory_gib = 0.001;
  EXPECT_FALSE(simulate(pl).fits);
}

// A cluster with communication that costs something, and 4 GPUs per node so that groups span
// nodes.
ClusterSpec real_cluster() {
  ClusterSpec c = load_cluster("dgx-a100-80g");
  c.gpus_per_node = 4;
  c.nics_per_node = 4;
  return c;
}

struct GridCase {
  const char* name;
  Plan plan;
};

std::vector<GridCase> grid_cases() {
  std::vector<GridCase> cases;
  const ModelSpec m = gpt(8, 1024, 16, 1024, 1000);
  Plan a = plan(m, real_cluster(), 2, 2, 2, 1, 8);
  cases.push_back({"tp2_pp2_dp2", a});
  Plan b = plan(m, real_cluster(), 2, 2, 2, 1, 8);
  b.parallel.vpp = 2;
  b.parallel.schedule = ScheduleKind::kInterleaved;
  b.parallel.sequence_parallel = true;
  b.parallel.recompute = Recompute::kSelective;
  b.parallel.distributed_optimizer = true;
  cases.push_back({"interleaved_sp_distopt", b});
  Plan c = plan(m, real_cluster(), 1, 2, 4, 1, 8);
  c.parallel.overlap_grad_reduce = false;
  c.parallel.cp = 1;
  cases.push_back({"dp4_no_overlap", c});
  Plan d = plan(m, real_cluster(), 1, 2, 2, 1, 8);
  d.parallel.cp = 2;
  d.parallel.schedule = ScheduleKind::kZbH1;
  cases.push_back({"cp2_zbh1", d});
  ModelSpec moe = m;
  moe.moe = MoeSpec{4, 2, 2048, 0, 1};
  moe.tied_embeddings = false;
  Plan e = plan(moe, real_cluster(), 1, 2, 4, 1, 8);
  e.parallel.ep = 2;
  e.parallel.etp = 1;
  cases.push_back({"moe_ep2", e});
  return cases;
}

TEST(Simulate, FullGridEqualsOneRankPerStage) {
  for (const GridCase& gc : grid_cases()) {
    SCOPED_TRACE(gc.name);
    expect_valid(gc.plan);
    SimOptions full;
    full.full_grid = true;
    const SimulationResult a = simulate(gc.plan);
    const SimulationResult b = simulate(gc.plan, full);
    EXPECT_EQ(a.num_engine_ranks, gc.plan.parallel.pp);
    EXPECT_EQ(b.num_engine_ranks, gc.plan.world_size());
    EXPECT_EQ(a.iteration_time_s, b.iteration_time_s);
    ASSERT_EQ(a.per_stage.size(), b.per_stage.size());
    for (size_t s = 0; s < a.per_stage.size(); ++s) {
      EXPECT_EQ(a.per_stage[s].peak_bytes, b.per_stage[s].peak_bytes);
      EXPECT_EQ(a.per_stage[s].activations_bytes, b.per_stage[s].activations_bytes);
    }
    EXPECT_EQ(a.breakdown.compute_s, b.breakdown.compute_s);
    EXPECT_EQ(a.breakdown.dp_comm_s, b.breakdown.dp_comm_s);
  }
}

// Random valid plans (seeded): MoE or dense, GQA, SwiGLU, RoPE, tp/cp/pp/dp/ep/etp, interleaving,
// zero bubble, recompute forms, distributed optimizer, overlap switches, both attention backends.
TEST(Simulate, FullGridEqualsOneRankPerStageOnRandomPlans) {
  std::mt19937 rng(2026);
  auto pick = [&](std::vector<int64_t> v) { return v[rng() % v.size()]; };
  int simulated = 0;
  for (int it = 0; it < 400; ++it) {
    ModelSpec m = gpt(pick({4, 8, 12}), pick({512, 1024}), 8, pick({512, 1024}), 1000);
    m.num_query_groups = pick({8, 4, 2});
    m.tied_embeddings = rng() % 2;
    m.activation = rng() % 2 ? Activation::kGelu : Activation::kSwiglu;
    m.position_embedding = rng() % 2 ? PositionEmbedding::kRope : PositionEmbedding::kLearned;
    if (rng() % 3 == 0) m.moe = MoeSpec{pick({4, 8}), 2, 1024, pick({0, 512}), pick({1, 2})};
    Plan p =
        plan(m, real_cluster(), pick({1, 2}), pick({1, 2, 4}), pick({1, 2, 4}), pick({1, 2}), 1);
    ParallelConfig& q = p.parallel;
    q.cp = pick({1, 1, 2});
    q.ep = m.moe ? pick({1, 2}) : 1;
    q.etp = pick({1, q.tp});
    q.vpp = q.pp > 1 ? pick({1, 1, 2}) : 1;
    q.schedule =
        q.vpp > 1 ? ScheduleKind::kInterleaved : static_cast<ScheduleKind>(pick({0, 1, 1, 3}));
    q.sequence_parallel = q.tp > 1 && rng() % 2;
    q.recompute = static_cast<Recompute>(pick({0, 1, 2}));
    q.recompute_method = static_cast<RecomputeMethod>(pick({0, 1}));
    q.recompute_num_layers = pick({1, 2});
    q.distributed_optimizer = rng() % 2;
    q.overlap_grad_reduce = rng() % 2;
    q.overlap_param_gather = q.distributed_optimizer && q.overlap_grad_reduce && rng() % 2;
    q.global_batch_size = q.micro_batch_size * q.dp * pick({1, 2, 4, 8});
    p.training.attention_backend =
        rng() % 2 ? AttentionBackend::kFlash : AttentionBackend::kUnfused;
    if (!validate(p).empty()) continue;
    ++simulated;
    SimOptions full;
    full.full_grid = true;
    const SimulationResult a = simulate(p), b = simulate(p, full);
    ASSERT_EQ(a.iteration_time_s, b.iteration_time_s) << plan_to_json(p).dump();
    ASSERT_EQ(a.peak_bytes, b.peak_bytes) << plan_to_json(p).dump();
    const TimeBreakdown& t = a.breakdown;
    EXPECT_NEAR(t.compute_s + t.tp_comm_s + t.cp_comm_s + t.ep_comm_s + t.pp_comm_s + t.dp_comm_s +
                    t.bubble_s + t.optimizer_s,
                a.iteration_time_s, 1e-12 + 1e-9 * a.iteration_time_s);
  }
  EXPECT_GT(simulated, 250);
}

TEST(Simulate, BreakdownAddsUpToTheIterationTime) {
  for (const GridCase& gc : grid_cases()) {
    SCOPED_TRACE(gc.name);
    const SimulationResult r = simulate(gc.plan);
    const TimeBreakdown& b = r.breakdown;
    const double sum = b.compute_s + b.tp_comm_s + b.cp_comm_s + b.ep_comm_s + b.pp_comm_s +
                       b.dp_comm_s + b.bubble_s + b.optimizer_s;
    EXPECT_NEAR(sum, r.iteration_time_s, 1e-12 + 1e-9 * r.iteration_time_s);
    EXPECT_GT(b.compute_s, 0);
    EXPECT_GT(b.optimizer_s, 0);
  }
}

TEST(Simulate, ThroughputAndFlops) {
  const Plan pl = grid_cases()[0].plan;
  const SimulationResult r = simulate(pl);
  EXPECT_DOUBLE_EQ(r.tokens_per_s, 8.0 * 1024 / r.iteration_time_s);
  const double flops = megatron_flops(pl.model, 8, 2);
  EXPECT_DOUBLE_EQ(r.model_flops_per_iteration, flops);
  EXPECT_NEAR(r.model_tflops_per_gpu, flops / r.iteration_time_s / 8 / 1e12, 1e-9);
  EXPECT_NEAR(r.mfu, r.model_tflops_per_gpu / 312, 1e-12);
  EXPECT_EQ(r.flops_formula, "megatron");
  EXPECT_EQ(r.num_microbatches, 4);
}

bool same(const SimulationResult& a, const SimulationResult& b) {
  if (a.iteration_time_s != b.iteration_time_s || a.peak_bytes != b.peak_bytes ||
      a.breakdown.bubble_s != b.breakdown.bubble_s || a.per_stage.size() != b.per_stage.size())
    return false;
  for (size_t s = 0; s < a.per_stage.size(); ++s)
    if (a.per_stage[s].peak_bytes != b.per_stage[s].peak_bytes ||
        a.per_stage[s].activations_bytes != b.per_stage[s].activations_bytes)
      return false;
  return true;
}

TEST(Simulate, DeterministicAndThreadSafe) {
  const std::vector<GridCase> cases = grid_cases();
  std::vector<SimulationResult> expected;
  for (const GridCase& gc : cases) expected.push_back(simulate(gc.plan));
  for (size_t i = 0; i < cases.size(); ++i) EXPECT_TRUE(same(simulate(cases[i].plan), expected[i]));
  // Four threads, each cycling through all plans (so each thread's context is reused).
  std::vector<int> mismatches(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      SimulationResult r;
      for (int round = 0; round < 5; ++round)
        for (size_t i = 0; i < cases.size(); ++i) {
          const size_t k = (i + static_cast<size_t>(t)) % cases.size();
          simulate(cases[k].plan, SimOptions{}, r);
          if (!same(r, expected[k])) ++mismatches[t];
        }
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(mismatches[t], 0) << "thread " << t;
}

TEST(Simulate, BrokenScheduleReportsADeadlockInsteadOfHanging) {
  Plan pl = plan(gpt(4, 1024, 16, 1024, 1000), toy_cluster(), 1, 2, 1, 1, 2);
  const ScheduleSpec spec{ScheduleKind::k1F1B, 2, 1, 2, 0};
  const Schedule good = make_schedule(spec);
  EXPECT_NO_THROW(simulate(pl, good));
  // Rank 0 waits for the gradient of micro-batch 0 before sending its activation: both ranks
  // then wait on a receive.
  std::vector<std::vector<Action>> ranks = rank_lists(good);
  auto& r0 = ranks[0];
  auto it = std::find_if(r0.begin(), r0.end(), [](const Action& a) {
    return a.kind == ActionKind::kRecvBackward && a.microbatch == 0;
  });
  ASSERT_NE(it, r0.end());
  Action recv = *it;
  // Its group partner (send-forward of micro-batch 1) now ends its own group.
  std::prev(it)->ends_group = true;
  r0.erase(it);
  recv.ends_group = true;
  r0.insert(r0.begin(), recv);
  const Schedule broken = schedule_from_ranks(spec, false, ranks);
  try {
    simulate(pl, broken);
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("schedule: deadlock"), std::string::npos) << what;
    EXPECT_NE(what.find("recv_bwd"), std::string::npos) << what;
  }
  // A send without its receive is reported before running.
  ranks = rank_lists(good);
  ranks[1].erase(std::find_if(ranks[1].begin(), ranks[1].end(), [](const Action& a) {
    return a.kind == ActionKind::kRecvForward && a.microbatch == 0;
  }));
  try {
    simulate(pl, schedule_from_ranks(spec, false, ranks));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("sends 2 tensors to rank 1 but rank 1 receives 1"),
              std::string::npos)
        << e.what();
  }
  // A schedule of another shape.
  EXPECT_THROW(simulate(pl, make_schedule({ScheduleKind::k1F1B, 2, 1, 4, 0})), Error);
}

TEST(Simulate, AcceptsForwardOnlySchedules) {
  // Evaluation walks a forward-only schedule (Megatron's forward_only=True, src/schedule): the
  // simulator runs it, with the forwards of training and no backward.
  Plan pl = plan(gpt(4, 1024, 16, 1024, 1000), toy_cluster(), 1, 2, 1, 1, 4);
  const SimulationResult train = simulate(pl);
  ScheduleSpec spec{ScheduleKind::k1F1B, 2, 1, 4, 0};
  spec.forward_only = true;
  const SimulationResult fo = simulate(pl, make_schedule(spec));
  EXPECT_GT(fo.breakdown.compute_s, 0);
  EXPECT_LT(fo.breakdown.compute_s, 0.5 * train.breakdown.compute_s);  // B is about 2 F
  pl.parallel.schedule = ScheduleKind::kInterleaved;
  pl.parallel.vpp = 2;
  expect_valid(pl);
  spec = {ScheduleKind::kInterleaved, 2, 2, 4, 0};
  spec.forward_only = true;
  EXPECT_NO_THROW(simulate(pl, make_schedule(spec)));
}

TEST(Simulate, TraceHasOneProcessPerRankAndKernelSegments) {
  Plan pl = grid_cases()[0].plan;
  SimOptions o;
  o.record_trace = true;
  const SimulationResult r = simulate(pl, o);
  ASSERT_NE(r.trace, nullptr);
  std::ostringstream os;
  write_trace(os, r);
  const Json j = parse_json(os.str(), "trace");
  int processes = 0, qkv = 0;
  for (const Json& e : j.at("traceEvents")) {
    if (e.at("ph") == "M" && e.at("name") == "process_name") ++processes;
    if (e.at("ph") != "X") continue;
    const std::string name = e.at("name").get<std::string>();
    if (name.size() > 4 && name.compare(name.size() - 4, 4, " qkv") == 0) ++qkv;
  }
  EXPECT_EQ(processes, 2);
  // QKV forward in every layer of every forward: 8 layers x 4 micro-batches.
  EXPECT_EQ(qkv, 8 * 4);
  // Without record_trace there is nothing to write.
  EXPECT_EQ(simulate(pl).trace, nullptr);
}

Plan preset_plan(const std::string& model, const std::string& cluster, int64_t tp, int64_t pp,
                 int64_t dp, int64_t gbs) {
  Plan p;
  p.model = load_model(model);
  p.cluster = load_cluster(cluster);
  p.parallel.tp = tp;
  p.parallel.pp = pp;
  p.parallel.dp = dp;
  p.parallel.micro_batch_size = 1;
  p.parallel.global_batch_size = gbs;
  p.parallel.sequence_parallel = true;
  p.parallel.distributed_optimizer = true;
  p.parallel.recompute = Recompute::kSelective;
  return p;
}

TEST(Simulate, TensorParallelAcrossNodesCostsMoreThanInsideOne) {
  // llama3-70b, tp 8 · pp 4 · dp 2 on 64 H100: on 8-GPU nodes each tensor-parallel group is one
  // NVLink node; on 4-GPU nodes (4 NICs each) it spans two, and its collectives move the ring
  // volume through 4 NICs of 48 GB/s instead of NVLink's 358 GB/s (collective_cost_test).
  Plan eight = preset_plan("llama3-70b", "dgx-h100", 8, 4, 2, 128);
  Plan four = eight;
  four.cluster.name = "dgx-h100-4";
  four.cluster.gpus_per_node = 4;
  four.cluster.nics_per_node = 4;
  expect_valid(eight);
  expect_valid(four);
  const SimulationResult a = simulate(eight, SimOptions{});
  const SimulationResult b = simulate(four, SimOptions{});
  EXPECT_EQ(a.breakdown.compute_s, b.breakdown.compute_s);
  EXPECT_GT(b.breakdown.tp_comm_s, 1.5 * a.breakdown.tp_comm_s);
  EXPECT_GT(b.iteration_time_s, 1.1 * a.iteration_time_s);
}

TEST(Simulate, WeakScalingCostsSomething) {
  // GPT-3 175B, tp 8 · pp 8, 32 sequences per data-parallel replica: dp 2 (128 GPUs) against
  // dp 32 (2048 GPUs). The compute per GPU is the same; the last gradient bucket's
  // reduce-scatter and the first parameter all-gather cannot hide, and their ring over 32 nodes
  // moves f(32) = 1.94 against f(2) = 1 of each bucket through every GPU's NIC.
  Plan small = preset_plan("gpt3-175b", "dgx-a100-80g", 8, 8, 2, 64);
  Plan large = preset_plan("gpt3-175b", "dgx-a100-80g", 8, 8, 32, 1024);
  expect_valid(small);
  expect_valid(large);
  const SimulationResult a = simulate(small, SimOptions{});
  const SimulationResult b = simulate(large, SimOptions{});
  EXPECT_EQ(a.breakdown.compute_s, b.breakdown.compute_s);
  EXPECT_GT(b.breakdown.dp_comm_s, 1.5 * a.breakdown.dp_comm_s);
  EXPECT_GT(b.iteration_time_s, 1.01 * a.iteration_time_s);
}

TEST(Simulate, TheImplementationPicksItsEfficiencySet) {
  // A profile whose megatron-local set runs GEMMs at half the base curve: the same plan,
  // predicted for megatron-local, takes longer; megatron-te keeps the base GPU.
  Plan te = preset_plan("gpt3-1.3b", "h200x4", 1, 1, 4, 64);
  te.parallel.recompute = Recompute::kNone;
  te.parallel.sequence_parallel = false;
  GpuSpec slow = te.cluster.gpu;
  for (CurvePoint& p : slow.gemm_efficiency) p.y /= 2;
  slow.runtime_overhead_gib = 5;
  te.cluster.implementations[static_cast<size_t>(Implementation::kMegatronLocal)] = slow;
  Plan local = te;
  local.training.implementation = Implementation::kMegatronLocal;
  const SimulationResult a = simulate(te, SimOptions{});
  const SimulationResult b = simulate(local, SimOptions{});
  EXPECT_GT(b.breakdown.compute_s, 1.5 * a.breakdown.compute_s);
  EXPECT_EQ(b.runtime_overhead_bytes - a.runtime_overhead_bytes,
            3 * (int64_t{1} << 30));  // 5 GiB against the base's 2
}

}  // namespace
}  // namespace mplan::sim
