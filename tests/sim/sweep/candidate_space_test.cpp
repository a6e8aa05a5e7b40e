// Tests of the search space: divisors, the uneven pipeline split (Llama 3 405B's 7 + 14 x 8 + 7),
// and candidate counts worked out by hand, layout by layout, for small cases.
#include "sim/sweep/candidate_space.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "tests/sim/sweep/sweep_test_util.hpp"

namespace mplan::sweep {
namespace {

TEST(CandidateSpace, Divisors) {
  EXPECT_EQ(divisors(1), (std::vector<int64_t>{1}));
  EXPECT_EQ(divisors(12), (std::vector<int64_t>{1, 2, 3, 4, 6, 12}));
  EXPECT_EQ(divisors(16), (std::vector<int64_t>{1, 2, 4, 8, 16}));
  EXPECT_EQ(divisors(49), (std::vector<int64_t>{1, 7, 49}));
}

TEST(CandidateSpace, UnevenSplit) {
  // Even: nothing set.
  EXPECT_EQ(uneven_split(96, 16).first, 0);
  EXPECT_EQ(uneven_split(96, 16).middle, 6);
  // Llama 3 405B: 126 layers on 16 stages = 7 + 14 x 8 + 7.
  UnevenSplit s = uneven_split(126, 16);
  EXPECT_EQ(s.first, 7);
  EXPECT_EQ(s.last, 7);
  EXPECT_EQ(s.middle, 8);
  // 126 on 4 stages: 31 + 2 x 32 + 31.
  s = uneven_split(126, 4);
  EXPECT_EQ(std::tie(s.first, s.middle, s.last), std::make_tuple(31, 32, 31));
  // Odd deficit: 5 layers on 2 stages: m 3, deficit 1, taken off the first stage.
  s = uneven_split(5, 2);
  EXPECT_EQ(std::tie(s.first, s.middle, s.last), std::make_tuple(2, 3, 3));
  // 6 layers on 4 stages: m 2, deficit 2: 1 + 2 + 2 + 1.
  s = uneven_split(6, 4);
  EXPECT_EQ(std::tie(s.first, s.middle, s.last), std::make_tuple(1, 2, 1));
  // With chunks of vpp 2: 126 on 16 stages: m 8, deficit 2 = one chunk off the first stage.
  s = uneven_split(126, 16, 2);
  EXPECT_EQ(std::tie(s.first, s.middle, s.last), std::make_tuple(6, 8, 8));
  s = uneven_split(126, 8, 2);
  EXPECT_EQ(std::tie(s.first, s.middle, s.last), std::make_tuple(14, 16, 16));
  // vpp 4: m 8, deficit 2 is no whole chunk: none.
  EXPECT_EQ(uneven_split(126, 16, 4).first, 0);
  // 6 on 4 stages in chunks of 2: m 2, deficit one chunk leaves the first stage nothing.
  EXPECT_EQ(uneven_split(6, 4, 2).first, 0);
  // 96 on 64 stages: m 2, deficit 32 leaves the first stage nothing: no split.
  s = uneven_split(96, 64);
  EXPECT_EQ(s.first, 0);
  EXPECT_EQ(s.last, 0);
}

SpaceInputs inputs(const ModelSpec& m, int64_t gpus, int64_t gpn, int64_t gbs,
                   FixedAxes fixed = {}) {
  return {&m, gpus, gpn, gbs, fixed};
}

// `f` with the context-parallel exchange, activation offloading, userbuffer overlap and
// Megatron-FSDP pinned to the plan defaults (p2p, none, off, off): the space of the other axes.
FixedAxes plain(FixedAxes f = {}) {
  f.tp_comm_overlap = false;
  f.fsdp = std::optional<DpSharding>();
  f.cp_comm_type = CpCommType::kP2p;
  f.offload_layers = 0;
  f.offload_modules = 0u;
  return f;
}

bool offloads(const Candidate& c) { return c.offload_layers > 0 || c.offload_modules != 0; }

// Counts per (tp, cp, pp, dp) layout.
std::map<std::tuple<int, int, int, int>, int> per_layout(const std::vector<Candidate>& cs) {
  std::map<std::tuple<int, int, int, int>, int> out;
  for (const Candidate& c : cs) ++out[{c.tp, c.cp, c.pp, c.dp}];
  return out;
}

TEST(CandidateSpace, TinyModelOnFourGpusCountedByHand) {
  // 6 layers, global batch 8, 4 GPUs of 4 per node. Per layout: (vpp, schedule) pairs x
  // micro-batches (b <= 8 / dp) x sp (2 when tp > 1) x recompute 3 x dist-opt (2 when dp·cp > 1).
  //   pp 1: 1f1b (1); pp 2 (3 layers per stage): 1f1b, zb-h1, interleaved vpp 3 (3);
  //   pp 4 (uneven 1 + 2 + 2 + 1, m = 2): 1f1b, zb-h1 (2); no split into chunks of 2 exists
  //   (2 + 2 + 2 + 0), so no interleaved.
  const ModelSpec m = testing::tiny_model();
  const auto cs = enumerate_candidates(inputs(m, 4, 4, 8, plain()));
  const auto counts = per_layout(cs);
  const std::map<std::tuple<int, int, int, int>, int> expected = {
      {{1, 1, 1, 4}, 1 * 2 * 1 * 3 * 2},  // b in {1, 2}
      {{1, 1, 2, 2}, 3 * 3 * 1 * 3 * 2},  // b in {1, 2, 4}
      {{1, 1, 4, 1}, 2 * 4 * 1 * 3 * 1},  // b in {1, 2, 4, 8}
      {{1, 2, 1, 2}, 1 * 3 * 1 * 3 * 2}, {{1, 2, 2, 1}, 3 * 4 * 1 * 3 * 2},
      {{1, 4, 1, 1}, 1 * 4 * 1 * 3 * 2}, {{2, 1, 1, 2}, 1 * 3 * 2 * 3 * 2},
      {{2, 1, 2, 1}, 3 * 4 * 2 * 3 * 1}, {{2, 2, 1, 1}, 1 * 4 * 2 * 3 * 2},
      {{4, 1, 1, 1}, 1 * 4 * 2 * 3 * 1},
  };
  EXPECT_EQ(counts, expected);
  EXPECT_EQ(cs.size(), 384u);  // 12 + 54 + 24 + 18 + 72 + 24 + 36 + 72 + 48 + 24
  // The uneven split is carried by every pp 4 candidate.
  for (const Candidate& c : cs) {
    if (c.pp == 4) {
      EXPECT_EQ(c.first_stage_layers, 1);
      EXPECT_EQ(c.last_stage_layers, 1);
    } else {
      EXPECT_EQ(c.first_stage_layers, 0);
    }
    EXPECT_EQ(c.ep, 1);
    EXPECT_EQ(c.etp, c.tp);  // dense: the plan default
  }
}

TEST(CandidateSpace, ReferenceWorkloadOnFourGpusCountedByHand) {
  // gpt3-1.3b (24 layers), global batch 64, 4 GPUs: b in {1, 2, 4, 8, 16} everywhere (64/dp >= 16).
  // The output layer weighs 1.20 layers (OutputLayerWeightClosedForm), so 1f1b and zb-h1 each
  // also get the split that lightens the loss stage (pp 2: 13 + 11; pp 4: 7 + 6 + 6 + 5) and,
  // at pp 4, the one that lightens both ends (5 + 7 + 7 + 5; at pp 2 it is the even split):
  //   pp 2 (12 layers per stage): (1f1b, zb-h1) x 2 splits + interleaved vpp 2, 3, 4, 6, 12 = 9;
  //   pp 4 (6 per stage): (1f1b, zb-h1) x 3 splits + vpp 2, 3, 6 = 9.
  const ModelSpec m = load_model("gpt3-1.3b");
  const auto cs = enumerate_candidates(inputs(m, 4, 4, 64, plain()));
  const auto counts = per_layout(cs);
  EXPECT_EQ(counts.at({1, 1, 1, 4}), 1 * 5 * 3 * 2);
  EXPECT_EQ(counts.at({1, 1, 2, 2}), 9 * 5 * 3 * 2);
  EXPECT_EQ(counts.at({1, 1, 4, 1}), 9 * 5 * 3 * 1);
  EXPECT_EQ(counts.at({2, 1, 2, 1}), 9 * 5 * 2 * 3 * 1);
  EXPECT_EQ(counts.at({4, 1, 1, 1}), 1 * 5 * 2 * 3 * 1);
  EXPECT_EQ(counts.size(), 10u);
  EXPECT_EQ(cs.size(), 1185u);  // 30 + 270 + 135 + 30 + 270 + 30 + 60 + 270 + 60 + 30
  std::set<std::pair<int, int>> pp4_splits;
  for (const Candidate& c : cs)
    if (c.pp == 4) pp4_splits.insert({c.first_stage_layers, c.last_stage_layers});
  EXPECT_EQ(pp4_splits, (std::set<std::pair<int, int>>{{0, 0}, {7, 5}, {5, 5}}));
}

// gpt3-1.3b: h 2048, vocabulary 32000 (a multiple of 128: no padding), s 2048. A layer: 12h^2 + 13h
// parameters (qkv 3h^2 + 3h, proj h^2 + h, fc1 4h^2 + 4h, fc2 4h^2 + h, two LayerNorms 4h), 2 FLOPs
// each per token, plus causal attention 2·s·h; the output layer 2·h·V.
TEST(CandidateSpace, OutputLayerWeightClosedForm) {
  const double h = 2048, v = 32000, s = 2048;
  const double layer = 2 * (12 * h * h + 13 * h) + 2 * s * h;
  EXPECT_NEAR(output_layer_weight(load_model("gpt3-1.3b")), 2 * h * v / layer, 1e-9);
  EXPECT_LT(output_layer_weight(load_model("gpt3-175b")), 0.5);  // 50k words, h 12288
}

TEST(CandidateSpace, BalancedSplitLightensTheLoadedEnds) {
  // 24 layers on 2 stages, the last carrying 1.89 layers more: 13 + 11 (loads 13, 12.89).
  const UnevenSplit two = balanced_split(24, 2, 1, 0.0, 1.89);
  EXPECT_EQ(two.first, 13);
  EXPECT_EQ(two.last, 11);
  // On 4 stages: middles of 6 with 7 + 5 at the ends (loads 7, 6, 6, 6.89) beat the even split
  // (6 + 1.89 on the last); with 1.89 on both ends, 5 + 7 + 7 + 5 (loads 6.89, 7, 7, 6.89).
  const UnevenSplit loss = balanced_split(24, 4, 1, 0.0, 1.89);
  EXPECT_EQ((std::tuple{loss.first, loss.middle, loss.last}), (std::tuple{7, 6, 5}));
  const UnevenSplit both = balanced_split(24, 4, 1, 1.89, 1.89);
  EXPECT_EQ((std::tuple{both.first, both.middle, both.last}), (std::tuple{5, 7, 5}));
  // Llama 3.1 405B on 16 stages (output 0.63 layers): Megatron's 7 + 14 x 8 + 7 already.
  const UnevenSplit llama = balanced_split(126, 16, 1, 0.0, 0.63);
  EXPECT_EQ((std::tuple{llama.first, llama.middle, llama.last}), (std::tuple{7, 8, 7}));
  // Whole chunks with vpp 2: every end a multiple of 2.
  const UnevenSplit chunks = balanced_split(24, 4, 2, 0.0, 1.89);
  EXPECT_EQ(chunks.first % 2, 0);
  EXPECT_EQ(chunks.last % 2, 0);
  EXPECT_EQ(chunks.middle % 2, 0);
  EXPECT_EQ(chunks.first + chunks.last + 2 * chunks.middle, 24);
  EXPECT_EQ(balanced_split(24, 1, 1, 0.0, 1.89).first, 0);  // one stage: nothing to balance
}

TEST(CandidateSpace, TensorParallelStaysInsideANode) {
  const ModelSpec m = load_model("gpt3-175b");
  const auto cs = enumerate_candidates(inputs(m, 64, 8, 1536));
  int max_tp = 0;
  for (const Candidate& c : cs) max_tp = std::max(max_tp, c.tp);
  EXPECT_EQ(max_tp, 8);
  // ... unless fixed.
  FixedAxes f;
  f.tp = 16;
  for (const Candidate& c : enumerate_candidates(inputs(m, 64, 8, 1536, f))) EXPECT_EQ(c.tp, 16);
}

TEST(CandidateSpace, OrderIsLoopOrder) {
  const ModelSpec m = testing::tiny_model();
  const auto cs = enumerate_candidates(inputs(m, 4, 4, 8, plain()));
  // First: tp 1, cp 1, pp 1, dp 4, 1f1b, b 1, no sp, recompute none, dist-opt off then on.
  EXPECT_EQ(cs[0].dp, 4);
  EXPECT_EQ(cs[0].recompute, Recompute::kNone);
  EXPECT_FALSE(cs[0].distributed_optimizer);
  EXPECT_TRUE(cs[1].distributed_optimizer);
  EXPECT_EQ(cs[2].recompute, Recompute::kSelective);
  EXPECT_EQ(cs[6].micro_batch_size, 2);
  // Last: tp 4, b 8, sp on, full recompute.
  EXPECT_EQ(cs.back().tp, 4);
  EXPECT_EQ(cs.back().micro_batch_size, 8);
  EXPECT_TRUE(cs.back().sequence_parallel);
  EXPECT_EQ(cs.back().recompute, Recompute::kFull);
  // No duplicates.
  for (size_t i = 0; i < cs.size(); ++i)
    for (size_t j = i + 1; j < cs.size(); ++j) ASSERT_FALSE(cs[i] == cs[j]) << i << " " << j;
}

TEST(CandidateSpace, FixedAxesNarrowTheSpace) {
  const ModelSpec m = testing::tiny_model();
  FixedAxes f;
  f.tp = 2;
  f.pp = 2;
  f.micro_batch_size = 2;
  f.recompute = Recompute::kNone;
  // tp 2 x pp 2 on 4 GPUs: cp 1, dp 1; 3 schedule pairs x sp 3 (off, on, on with
  // tp_comm_overlap) x dp sharding 1 x offload 3 (none, the two fine-grained module sets; no
  // cpu_offloading_num_layers at pp 2).
  EXPECT_EQ(enumerate_candidates(inputs(m, 4, 4, 8, f)).size(), 3u * 3u * 3u);
  f = plain(f);
  EXPECT_EQ(enumerate_candidates(inputs(m, 4, 4, 8, f)).size(), 3u * 2u);
  f.schedule = ScheduleKind::kInterleaved;
  auto cs = enumerate_candidates(inputs(m, 4, 4, 8, f));
  ASSERT_EQ(cs.size(), 2u);
  EXPECT_EQ(cs[0].vpp, 3);
  // A fixed vpp alone picks the interleaved schedule; with pp 1 it stays (validate rejects it).
  FixedAxes v;
  v.vpp = 2;
  v.pp = 1;
  cs = enumerate_candidates(inputs(m, 4, 4, 8, v));
  ASSERT_FALSE(cs.empty());
  for (const Candidate& c : cs) {
    EXPECT_EQ(c.vpp, 2);
    EXPECT_EQ(c.schedule, ScheduleKind::kInterleaved);
  }
  // A tp that does not divide the GPU count leaves nothing.
  FixedAxes bad;
  bad.tp = 3;
  EXPECT_TRUE(enumerate_candidates(inputs(m, 4, 4, 8, bad)).empty());
  // sp on excludes tp 1; dist-opt on excludes layouts without a data-parallel group.
  FixedAxes sp;
  sp.sequence_parallel = true;
  sp.distributed_optimizer = true;
  for (const Candidate& c : enumerate_candidates(inputs(m, 4, 4, 8, sp))) {
    EXPECT_GT(c.tp, 1);
    EXPECT_GT(c.dp * c.cp, 1);
  }
}

TEST(CandidateSpace, ExpertAxesOfAnMoeModel) {
  ModelSpec m = testing::tiny_model();
  m.moe = MoeSpec{4, 2, 96, 0, 1};
  FixedAxes f;
  f.tp = 2;
  f.cp = 1;
  f.pp = 1;
  f.micro_batch_size = 1;
  f.sequence_parallel = false;
  f.recompute = Recompute::kNone;
  f.distributed_optimizer = false;
  f = plain(f);
  // 4 GPUs, tp 2, pp 1: ep in divisors of 4 / pp up to 4 experts = 1, 2, 4; etp in {1, tp}.
  const auto cs = enumerate_candidates(inputs(m, 4, 4, 8, f));
  std::vector<std::pair<int, int>> got;
  for (const Candidate& c : cs) got.push_back({c.ep, c.etp});
  EXPECT_EQ(got,
            (std::vector<std::pair<int, int>>{{1, 1}, {1, 2}, {2, 1}, {2, 2}, {4, 1}, {4, 2}}));
}

TEST(CandidateSpace, ExchangesAndOffloadingCountedByHand) {
  // The tiny model (6 heads and query groups, 6 layers) on 4 GPUs, Transformer Engine: per layout
  // the space of TinyModelOnFourGpusCountedByHand times its cp exchanges, with the recompute
  // factor 3 grown by the offload variants at recompute none: pp 1: 1, 3 and 5 layers and two
  // module sets (3 + 5 = 8); pp > 1: the module sets (3 + 2 = 5). Exchanges: cp 2 at tp 1: p2p,
  // all_gather, a2a (6 heads over 2); cp 4 at tp 1: p2p, all_gather, a2a+p2p 2x2 (6 heads do not
  // split over 4); cp 2 at tp 2: p2p, all_gather (3 heads per tp rank do not split over 2).
  // Sequence parallelism at tp > 1: off, on, on with tp_comm_overlap (3, was 2); data-parallel
  // sharding where dp·cp > 1: off, dist-opt, FSDP optim_grads, FSDP optim_grads_params (4, was 2).
  const ModelSpec m = testing::tiny_model();
  const auto cs = enumerate_candidates(inputs(m, 4, 4, 8));
  const std::map<std::tuple<int, int, int, int>, int> expected = {
      {{1, 1, 1, 4}, 1 * 2 * 1 * 8 * 4},     {{1, 1, 2, 2}, 3 * 3 * 1 * 5 * 4},
      {{1, 1, 4, 1}, 2 * 4 * 1 * 5 * 1},     {{1, 2, 1, 2}, 3 * 1 * 3 * 1 * 8 * 4},
      {{1, 2, 2, 1}, 3 * 3 * 4 * 1 * 5 * 4}, {{1, 4, 1, 1}, 3 * 1 * 4 * 1 * 8 * 4},
      {{2, 1, 1, 2}, 1 * 3 * 3 * 8 * 4},     {{2, 1, 2, 1}, 3 * 4 * 3 * 5 * 1},
      {{2, 2, 1, 1}, 2 * 1 * 4 * 3 * 8 * 4}, {{4, 1, 1, 1}, 1 * 4 * 3 * 8 * 1},
  };
  EXPECT_EQ(per_layout(cs), expected);
  EXPECT_EQ(cs.size(), 3008u);
  std::set<std::tuple<int, int, CpCommType, int>> exchanges;  // tp, cp, type, a2a
  std::vector<Candidate> plain_ones;
  for (const Candidate& c : cs) {
    exchanges.insert({c.tp, c.cp, c.cp_comm_type, c.cp_a2a});
    // Overlap only where there is something to overlap; offloading instead of recomputation,
    // layers only at pp 1 (Megatron's rule), never both kinds.
    EXPECT_EQ(c.overlap_p2p_comm, c.schedule == ScheduleKind::kInterleaved);
    if (offloads(c)) {
      EXPECT_EQ(c.recompute, Recompute::kNone);
      EXPECT_TRUE(c.offload_layers == 0 || c.offload_modules == 0);
    }
    if (c.offload_layers > 0) {
      EXPECT_EQ(c.pp, 1);
    }
    // Userbuffer overlap only with sequence parallelism; FSDP with the distributed optimizer and
    // a dense data-parallel group.
    if (c.tp_comm_overlap) {
      EXPECT_TRUE(c.sequence_parallel);
    }
    if (c.use_megatron_fsdp) {
      EXPECT_TRUE(c.distributed_optimizer);
      EXPECT_GT(c.dp * c.cp, 1);
    }
    if (c.cp_comm_type == CpCommType::kP2p && !offloads(c) && !c.tp_comm_overlap &&
        !c.use_megatron_fsdp)
      plain_ones.push_back(c);
  }
  using T = CpCommType;
  EXPECT_EQ(exchanges, (std::set<std::tuple<int, int, CpCommType, int>>{{1, 1, T::kP2p, 0},
                                                                        {1, 2, T::kP2p, 0},
                                                                        {1, 2, T::kAllGather, 0},
                                                                        {1, 2, T::kA2a, 0},
                                                                        {1, 4, T::kP2p, 0},
                                                                        {1, 4, T::kAllGather, 0},
                                                                        {1, 4, T::kA2aP2p, 2},
                                                                        {2, 1, T::kP2p, 0},
                                                                        {2, 2, T::kP2p, 0},
                                                                        {2, 2, T::kAllGather, 0},
                                                                        {4, 1, T::kP2p, 0}}));
  // Without the new values: the space pinned to the plan defaults, in the same order (so plans
  // without the new features keep their ranking and tie-breaks).
  EXPECT_EQ(plain_ones, enumerate_candidates(inputs(m, 4, 4, 8, plain())));
  // Every candidate once.
  for (size_t i = 0; i < cs.size(); ++i)
    for (size_t j = i + 1; j < cs.size(); ++j) ASSERT_FALSE(cs[i] == cs[j]) << i << " " << j;
}

TEST(CandidateSpace, StacksThatDoNotOverlapOrOffload) {
  const ModelSpec m = testing::tiny_model();
  // mplan's executor: blocking pipeline transfers, activations on the GPU.
  SpaceInputs in = inputs(m, 4, 4, 8);
  in.implementation = Implementation::kMplan;
  for (const Candidate& c : enumerate_candidates(in)) {
    EXPECT_FALSE(c.overlap_p2p_comm);
    EXPECT_FALSE(offloads(c));
  }
  // Megatron-LM without Transformer Engine: no fine-grained offloading (validate()'s rule).
  in.implementation = Implementation::kMegatronLocal;
  int64_t layers = 0;
  for (const Candidate& c : enumerate_candidates(in)) {
    EXPECT_EQ(c.offload_modules, 0u);
    layers += c.offload_layers > 0;
  }
  EXPECT_GT(layers, 0);
  // A pinned overlap wins over the stack's.
  FixedAxes f;
  f.overlap_p2p = false;
  f.schedule = ScheduleKind::kInterleaved;
  for (const Candidate& c : enumerate_candidates(inputs(m, 4, 4, 8, f)))
    EXPECT_FALSE(c.overlap_p2p_comm);
}

TEST(CandidateSpace, UserbufferOverlapAndFsdpFollowTheStackAndTheFixes) {
  const ModelSpec m = testing::tiny_model();
  auto count = [&](const SpaceInputs& in, auto pred) {
    int64_t n = 0;
    for (const Candidate& c : enumerate_candidates(in)) n += pred(c) ? 1 : 0;
    return n;
  };
  auto overlap = [](const Candidate& c) { return c.tp_comm_overlap; };
  auto fsdp = [](const Candidate& c) { return c.use_megatron_fsdp; };
  // Megatron-LM without Transformer Engine: FSDP, no userbuffers; mplan's executor: neither.
  SpaceInputs in = inputs(m, 4, 4, 8);
  in.implementation = Implementation::kMegatronLocal;
  EXPECT_EQ(count(in, overlap), 0);
  EXPECT_GT(count(in, fsdp), 0);
  in.implementation = Implementation::kMplan;
  EXPECT_EQ(count(in, overlap), 0);
  EXPECT_EQ(count(in, fsdp), 0);
  // Pinned: tp_comm_overlap=on leaves only sp with it (tp 1 layouts drop out); fsdp=X only
  // that strategy (also no_shard and optim, outside the default list), with the distributed
  // optimizer; dist_opt=off leaves no FSDP.
  FixedAxes f = parse_fixed_axes("tp_comm_overlap=on,fsdp=optim");
  const auto pinned = enumerate_candidates(inputs(m, 4, 4, 8, f));
  ASSERT_FALSE(pinned.empty());
  for (const Candidate& c : pinned) {
    EXPECT_TRUE(c.sequence_parallel && c.tp_comm_overlap);
    EXPECT_GT(c.tp, 1);
    EXPECT_TRUE(c.use_megatron_fsdp && c.distributed_optimizer);
    EXPECT_EQ(c.fsdp_sharding, DpSharding::kOptim);
    const ParallelConfig p = to_parallel(c, 8);
    EXPECT_TRUE(p.tp_comm_overlap && p.use_megatron_fsdp && p.distributed_optimizer);
    EXPECT_EQ(p.data_parallel_sharding_strategy, DpSharding::kOptim);
    EXPECT_EQ(dp_sharding_label(c), "fsdp optim");
    EXPECT_EQ(sp_label(c), "on+tp-overlap");
  }
  EXPECT_EQ(count(inputs(m, 4, 4, 8, parse_fixed_axes("dist_opt=off")), fsdp), 0);
  // fsdp=off: the space without FSDP, in the same order.
  std::vector<Candidate> without;
  for (const Candidate& c : enumerate_candidates(inputs(m, 4, 4, 8)))
    if (!c.use_megatron_fsdp) without.push_back(c);
  EXPECT_EQ(without, enumerate_candidates(inputs(m, 4, 4, 8, parse_fixed_axes("fsdp=off"))));
}

TEST(CandidateSpace, FixedExchangeAndOffload) {
  const ModelSpec m = testing::tiny_model();
  // A pinned exchange applies to cp > 1 layouts, also where validate() will reject it (tp 2 cp
  // 2: 3 heads per tp rank); cp 1 layouts stay without one.
  FixedAxes f;
  f.cp_comm_type = CpCommType::kA2a;
  std::set<std::pair<int, int>> tp_cp;
  for (const Candidate& c : enumerate_candidates(inputs(m, 4, 4, 8, f))) {
    EXPECT_EQ(c.cp_comm_type, c.cp > 1 ? CpCommType::kA2a : CpCommType::kP2p);
    if (c.cp > 1) tp_cp.insert({c.tp, c.cp});
  }
  EXPECT_EQ(tp_cp, (std::set<std::pair<int, int>>{{1, 2}, {1, 4}, {2, 2}}));
  // cp_a2a: a2a+p2p with that all-to-all size wherever it divides cp.
  FixedAxes h;
  h.cp_a2a = 2;
  h.cp = 4;
  const auto hs = enumerate_candidates(inputs(m, 4, 4, 8, h));
  ASSERT_FALSE(hs.empty());
  for (const Candidate& c : hs) {
    EXPECT_EQ(c.cp_comm_type, CpCommType::kA2aP2p);
    EXPECT_EQ(c.cp_a2a, 2);
    EXPECT_EQ(to_parallel(c, 8).hierarchical_context_parallel_sizes, (std::vector<int64_t>{2, 2}));
  }
  // A pinned offload goes with every recompute and pipeline size (validate() judges it).
  FixedAxes o;
  o.offload_layers = 2;
  std::set<Recompute> recomputes;
  std::set<int> pps;
  for (const Candidate& c : enumerate_candidates(inputs(m, 4, 4, 8, o))) {
    EXPECT_EQ(c.offload_layers, 2);
    EXPECT_EQ(c.offload_modules, 0u);
    recomputes.insert(c.recompute);
    pps.insert(c.pp);
  }
  EXPECT_EQ(recomputes.size(), 3u);
  EXPECT_EQ(pps, (std::set<int>{1, 2, 4}));
}

}  // namespace
}  // namespace mplan::sweep
