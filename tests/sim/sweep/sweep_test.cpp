// Tests of run_sweep(): counts by rule on a case worked out by hand, identical results for every
// thread count, the ranking order and its tie-breaks, pruning that changes nothing (with the real
// simulator), and the memory lower bound below every simulated peak.
#include "sim/sweep/sweep.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <stdexcept>

#include "sim/sweep/candidate_space.hpp"
#include "sim/sweep/memory_bound.hpp"
#include "sim/sweep/sweep_advice.hpp"
#include "src/common/error.hpp"
#include "src/plan/validate.hpp"
#include "tests/sim/sweep/sweep_test_util.hpp"

namespace mplan::sweep {
namespace {

using ::testing::HasSubstr;

SweepOptions fake_options(int threads) {
  SweepOptions o;
  o.threads = threads;
  o.simulate = testing::fake_simulate;
  return o;
}

bool same_figures(const Figures& a, const Figures& b) {
  return a.iteration_time_s == b.iteration_time_s && a.tokens_per_s == b.tokens_per_s &&
         a.model_tflops_per_gpu == b.model_tflops_per_gpu && a.mfu == b.mfu &&
         a.bubble_fraction == b.bubble_fraction && a.peak_bytes == b.peak_bytes &&
         a.capacity_bytes == b.capacity_bytes && a.fits == b.fits &&
         a.breakdown.compute_s == b.breakdown.compute_s;
}

// Everything but wall time and thread count.
void expect_same_result(const SweepResult& a, const SweepResult& b) {
  EXPECT_EQ(a.candidates, b.candidates);
  EXPECT_EQ(a.invalid, b.invalid);
  EXPECT_EQ(a.out_of_memory, b.out_of_memory);
  EXPECT_EQ(a.out_of_memory_pruned, b.out_of_memory_pruned);
  EXPECT_EQ(a.simulated, b.simulated);
  EXPECT_EQ(a.fits, b.fits);
  EXPECT_EQ(a.least_known_peak_bytes, b.least_known_peak_bytes);
  EXPECT_EQ(a.skipped, b.skipped);
  ASSERT_EQ(a.invalid_by_rule.size(), b.invalid_by_rule.size());
  for (size_t i = 0; i < a.invalid_by_rule.size(); ++i) {
    EXPECT_EQ(a.invalid_by_rule[i].rule, b.invalid_by_rule[i].rule);
    EXPECT_EQ(a.invalid_by_rule[i].example, b.invalid_by_rule[i].example);
    EXPECT_EQ(a.invalid_by_rule[i].count, b.invalid_by_rule[i].count);
  }
  ASSERT_EQ(a.evaluated.size(), b.evaluated.size());
  for (size_t i = 0; i < a.evaluated.size(); ++i) {
    EXPECT_EQ(a.evaluated[i].index, b.evaluated[i].index);
    EXPECT_TRUE(a.evaluated[i].candidate == b.evaluated[i].candidate);
    EXPECT_TRUE(same_figures(a.evaluated[i].figures, b.evaluated[i].figures)) << i;
  }
  EXPECT_EQ(a.ranking, b.ranking);
}

int64_t count_of(const SweepResult& r, const std::string& rule_part) {
  int64_t n = 0;
  for (const RuleCount& c : r.invalid_by_rule)
    if (c.rule.find(rule_part) != std::string::npos) n += c.count;
  return n;
}

TEST(Sweep, TinyModelCountsByRule) {
  // The 384 candidates of candidate_space_test; rejected, by their first broken rule:
  //  - tp 4 (6 heads): the whole tp4 layout, 4 micro-batch sizes x sp 2 x recompute 3 = 24;
  //  - interleaved with M = 1 < pp 2 micro-batches: pp2 dp2 b4 (3 x 2), tp1 cp2 pp2 b8 (3 x 2),
  //    tp2 pp2 b8 (sp 2 x 3) = 18;
  //  - the zb-h1 schedule, which Megatron-LM (the request's default stack) does not run: every
  //    pp 2 and pp 4 layout's zb-h1 candidates that break no other rule = 78.
  //  (The cp exchanges, activation offloading, userbuffer overlap and Megatron-FSDP pinned to the
  //  plan defaults: the space of
  //  CandidateSpace.TinyModelOnFourGpusCountedByHand.)
  SweepRequest req = testing::tiny_request();
  req.fixed = parse_fixed_axes(
      "cp_comm_type=p2p,offload_layers=0,offload_modules=none,tp_comm_overlap=off,fsdp=off");
  const SweepResult r = run_sweep(req, fake_options(2));
  EXPECT_EQ(r.candidates, 384);
  EXPECT_EQ(r.invalid, 120);
  ASSERT_EQ(r.invalid_by_rule.size(), 3u);  // most frequent first
  EXPECT_EQ(r.invalid_by_rule[0].count, 78);
  EXPECT_EQ(r.invalid_by_rule[0].rule,  // no number in it: the rule is the example
            "parallel.schedule: Megatron-LM does not run the zb-h1 schedule "
            "(training.implementation megatron-te)");
  EXPECT_EQ(r.invalid_by_rule[0].example, r.invalid_by_rule[0].rule);
  EXPECT_EQ(r.invalid_by_rule[1].count, 24);
  EXPECT_EQ(r.invalid_by_rule[1].rule,
            "parallel.tp: num_attention_heads (#) must be a multiple of "
            "tensor_model_parallel_size (#).");
  EXPECT_EQ(r.invalid_by_rule[1].example,
            "parallel.tp: num_attention_heads (6) must be a multiple of "
            "tensor_model_parallel_size (4).");
  EXPECT_EQ(r.invalid_by_rule[2].count, 18);
  EXPECT_THAT(r.invalid_by_rule[2].rule, HasSubstr("should range in [PP=# , M=#]"));
  // The first in enumeration order: tp1 cp1 pp2 dp2 with b 4.
  EXPECT_THAT(r.invalid_by_rule[2].example, HasSubstr("[PP=2 , M=1]"));
  EXPECT_EQ(count_of(r, "parallel."), 120);
  // Everything else is simulated (no pruning: the tiny model fits anywhere).
  EXPECT_EQ(r.out_of_memory_pruned, 0);
  EXPECT_EQ(r.simulated, 264);
  EXPECT_EQ(r.fits, 264);
  // For mplan's executor zb-h1 is fine; cp is not: tp1 cp2 and cp4 layouts are rejected instead.
  SweepRequest m = req;
  m.base.training.implementation = Implementation::kMplan;
  const SweepResult x = run_sweep(m, fake_options(2));
  EXPECT_EQ(count_of(x, "zb-h1"), 0);
  EXPECT_GT(count_of(x, "context parallelism"), 0);
  EXPECT_EQ(static_cast<int64_t>(r.ranking.size()), r.fits);
  // Every simulated candidate is valid, in enumeration order.
  for (size_t i = 1; i < r.evaluated.size(); ++i)
    EXPECT_LT(r.evaluated[i - 1].index, r.evaluated[i].index);
}

TEST(Sweep, IdenticalWhateverTheThreadCount) {
  const SweepRequest req = testing::tiny_request();
  const SweepResult one = run_sweep(req, fake_options(1));
  EXPECT_EQ(one.threads, 1);
  for (int t : {2, 3, 5, 8, 64}) {
    SCOPED_TRACE(t);
    expect_same_result(one, run_sweep(req, fake_options(t)));
  }
}

TEST(Sweep, RankingOrderAndTieBreaks) {
  SweepRequest req = testing::tiny_request();
  const SweepResult r = run_sweep(req, fake_options(2));
  ASSERT_GT(r.ranking.size(), 2u);
  for (size_t i = 1; i < r.ranking.size(); ++i) {
    const Evaluated& a = r.evaluated[static_cast<size_t>(r.ranking[i - 1])];
    const Evaluated& b = r.evaluated[static_cast<size_t>(r.ranking[i])];
    ASSERT_TRUE(ranks_before(a, b, Objective::kThroughput)) << i;
    ASSERT_GE(a.figures.tokens_per_s, b.figures.tokens_per_s);
  }
  // The fake time ignores sp and dist-opt: equal tokens/s, and sp's lower peak ranks first.
  const Evaluated& best = r.best();
  EXPECT_TRUE(best.candidate.sequence_parallel || best.candidate.tp == 1);
  // Fake time 1 + pp/M + 0.1 tp: the best has tp 1, pp 1 (no pp/M term... is 1/M with M = 8/dp
  // smallest at dp 1): tp 1, pp 1, dp 1 is cp 4 with b 1 (M 8): 1 + 1/8 + 0.1 = 1.225 s.
  EXPECT_EQ(best.candidate.tp, 1);
  EXPECT_EQ(best.candidate.pp, 1);
  EXPECT_EQ(best.candidate.cp, 4);
  EXPECT_EQ(best.candidate.micro_batch_size, 1);
  EXPECT_DOUBLE_EQ(best.figures.iteration_time_s, 1.225);

  // Exact ties (same tokens/s, same peak) fall back to enumeration order.
  Evaluated x, y;
  x.index = 5;
  y.index = 7;
  x.figures.tokens_per_s = y.figures.tokens_per_s = 10;
  x.figures.peak_bytes = y.figures.peak_bytes = 100;
  EXPECT_TRUE(ranks_before(x, y, Objective::kThroughput));
  EXPECT_FALSE(ranks_before(y, x, Objective::kThroughput));
  y.figures.peak_bytes = 90;
  EXPECT_TRUE(ranks_before(y, x, Objective::kThroughput));
  y.figures.tokens_per_s = 9;
  EXPECT_TRUE(ranks_before(x, y, Objective::kThroughput));
  EXPECT_TRUE(ranks_before(y, x, Objective::kMemory));
}

TEST(Sweep, MemoryObjectiveRanksLeastPeakFirst) {
  SweepRequest req = testing::tiny_request();
  req.objective = Objective::kMemory;
  const SweepResult r = run_sweep(req, fake_options(2));
  for (size_t i = 1; i < r.ranking.size(); ++i)
    ASSERT_LE(r.evaluated[static_cast<size_t>(r.ranking[i - 1])].figures.peak_bytes,
              r.evaluated[static_cast<size_t>(r.ranking[i])].figures.peak_bytes);
}

TEST(Sweep, OutOfMemoryIsCountedNotRanked) {
  SweepRequest req = testing::tiny_request();
  // Capacity between the peaks: the fake peak grows by 1 GiB per micro-batch in flight.
  req.base.cluster.gpu.memory_gib = req.base.cluster.gpu.runtime_overhead_gib + 1.5;
  const SweepResult r = run_sweep(req, fake_options(2));
  EXPECT_GT(r.out_of_memory, 0);
  EXPECT_GT(r.fits, 0);
  EXPECT_EQ(r.invalid + r.out_of_memory + r.fits, r.candidates);
  for (int64_t i : r.ranking) EXPECT_TRUE(r.evaluated[static_cast<size_t>(i)].figures.fits);
}

TEST(Sweep, SimulatorErrorsReachTheCaller) {
  SweepOptions o = fake_options(3);
  o.simulate = [](const Plan&) -> sim::SimulationResult { throw std::runtime_error("boom"); };
  EXPECT_THROW(run_sweep(testing::tiny_request(), o), std::runtime_error);
}

TEST(Sweep, ProgressReachesTheTotal) {
  SweepOptions o = fake_options(2);
  int64_t last = -1, total_seen = 0;
  bool monotonic = true;
  o.progress = [&](int64_t done, int64_t total) {
    monotonic = monotonic && done >= last;
    last = done;
    total_seen = total;
  };
  const SweepResult r = run_sweep(testing::tiny_request(), o);
  EXPECT_TRUE(monotonic);
  EXPECT_EQ(last, r.candidates);
  EXPECT_EQ(total_seen, r.candidates);
}

// ---- With the real simulator --------------------------------------------------------------

// gpt3-1.3b on the 4-GPU node, with GPU memory cut so that some plans fit and some do not.
SweepRequest squeezed_request(double memory_gib) {
  SweepRequest r;
  r.base.model = load_model("gpt3-1.3b");
  r.base.cluster = load_cluster("h200x4");
  r.base.cluster.gpu.memory_gib = memory_gib;
  r.gpus = 4;
  r.global_batch_size = 64;
  return r;
}

TEST(SweepWithSimulator, PruningDoesNotChangeTheResult) {
  for (double gib : {12.0, 20.0, 30.0}) {
    SCOPED_TRACE(gib);
    const SweepRequest req = squeezed_request(gib);
    SweepOptions pruned, full;
    pruned.threads = full.threads = 2;
    full.prune = false;
    const SweepResult a = run_sweep(req, pruned);
    const SweepResult b = run_sweep(req, full);
    EXPECT_EQ(b.out_of_memory_pruned, 0);
    EXPECT_EQ(a.out_of_memory, b.out_of_memory);
    EXPECT_EQ(a.fits, b.fits);
    EXPECT_EQ(a.invalid, b.invalid);
    // The same plans in the same order with the same figures.
    ASSERT_EQ(a.ranking.size(), b.ranking.size());
    for (size_t i = 0; i < a.ranking.size(); ++i) {
      const Evaluated& x = a.evaluated[static_cast<size_t>(a.ranking[i])];
      const Evaluated& y = b.evaluated[static_cast<size_t>(b.ranking[i])];
      ASSERT_EQ(x.index, y.index) << "rank " << i + 1;
      ASSERT_TRUE(same_figures(x.figures, y.figures)) << "rank " << i + 1;
    }
    if (gib == 12.0) {
      EXPECT_GT(a.out_of_memory_pruned, 0);  // the bound does prune here
    }
  }
}

// Skipping what cannot reach the top K leaves the top K (and best) as simulating everything does.
void expect_same_top(const SweepResult& a, const SweepResult& b, int64_t k) {
  ASSERT_GE(static_cast<int64_t>(a.ranking.size()), std::min<int64_t>(k, b.fits));
  for (int64_t i = 0; i < k && i < b.fits; ++i) {
    const Evaluated& x = a.evaluated[static_cast<size_t>(a.ranking[i])];
    const Evaluated& y = b.evaluated[static_cast<size_t>(b.ranking[i])];
    ASSERT_EQ(x.index, y.index) << "rank " << i + 1;
    ASSERT_TRUE(same_figures(x.figures, y.figures)) << "rank " << i + 1;
  }
}

TEST(SweepWithSimulator, SkippingBelowTheTopKDoesNotChangeTheTopK) {
  for (Objective objective : {Objective::kThroughput, Objective::kMemory}) {
    SweepRequest req = squeezed_request(30);
    req.objective = objective;
    SweepOptions full;
    full.threads = 2;
    full.prune = false;
    const SweepResult b = run_sweep(req, full);  // every candidate simulated
    for (int64_t k : {1, 5, 40}) {
      SCOPED_TRACE(cat(to_string(objective), " top ", k));
      SweepOptions top;
      top.threads = 2;
      top.top_k = k;
      const SweepResult a = run_sweep(req, top);
      expect_same_top(a, b, k);
      EXPECT_EQ(a.invalid, b.invalid);
      EXPECT_EQ(a.invalid + a.out_of_memory_pruned + a.skipped + a.simulated, a.candidates);
      if (k == 1) {
        EXPECT_GT(a.skipped, 0);
      }
    }
  }
}

TEST(SweepWithSimulator, SkippingIsTheSameWhateverTheThreadCount) {
  SweepRequest req = squeezed_request(30);
  SweepOptions o;
  o.top_k = 3;
  o.threads = 1;
  const SweepResult one = run_sweep(req, o);
  EXPECT_GT(one.skipped, 0);
  for (int t : {2, 3, 7}) {
    SCOPED_TRACE(t);
    o.threads = t;
    const SweepResult r = run_sweep(req, o);
    expect_same_result(one, r);
    EXPECT_EQ(one.skipped, r.skipped);
  }
}

TEST(SweepWithSimulator, LowerBoundIsBelowEverySimulatedPeak) {
  for (const SweepRequest& req : {squeezed_request(80), testing::tiny_request()}) {
    SCOPED_TRACE(req.base.model.name);
    Plan plan = req.base;
    int64_t checked = 0;
    int64_t offloaded = 0;
    for (const Candidate& c : enumerate_candidates(space_inputs(req))) {
      apply_candidate(c, req.global_batch_size, plan);
      if (!validate(plan).empty()) continue;
      offloaded += c.offload_layers > 0 || c.offload_modules != 0;
      const int64_t peak = sim::simulate(plan).peak_bytes;
      ASSERT_LE(memory_lower_bound(plan), peak) << layout_label(c) << " mbs " << c.micro_batch_size;
      ++checked;
    }
    EXPECT_GT(checked, 100);
    EXPECT_GT(offloaded, 10);  // the activation-offloading candidates are among them
  }
}

TEST(SweepWithSimulator, HeadroomLowersWhatFits) {
  SweepRequest req = squeezed_request(40);
  SweepOptions o;  // no top K: every candidate not proved out of memory is simulated
  o.threads = 2;
  const SweepResult all = run_sweep(req, o);
  req.memory_headroom = 0.25;
  const SweepResult kept = run_sweep(req, o);
  EXPECT_EQ(kept.gpu_memory_bytes, all.gpu_memory_bytes);
  EXPECT_EQ(kept.capacity_bytes,
            static_cast<int64_t>(0.75 * static_cast<double>(all.capacity_bytes)));
  ASSERT_GT(kept.fits, 0);
  EXPECT_LT(kept.fits, all.fits);
  for (int64_t i : kept.ranking)
    EXPECT_LE(kept.evaluated[static_cast<size_t>(i)].figures.peak_bytes, kept.capacity_bytes);
}

TEST(SweepWithSimulator, CandidatesWhoseCostsAreRefusedAreInvalidNotFatal) {
  SweepRequest req = squeezed_request(80);
  req.base.cluster.gpu.peak_bf16_tflops = 0.01;  // a GEMM would take days
  req.base.cluster.gpu.gemm_efficiency = {{1, 1e-4}};
  SweepOptions o;
  o.threads = 2;
  const SweepResult r = run_sweep(req, o);
  EXPECT_EQ(r.invalid, r.candidates);
  EXPECT_EQ(r.fits, 0);
  bool refused = false;
  for (const RuleCount& rule : r.invalid_by_rule)
    refused = refused || rule.example.find("one modelled operation takes") != std::string::npos;
  EXPECT_TRUE(refused);
}

TEST(SweepWithSimulator, TimeLimitStopsWithAMessage) {
  SweepRequest req = squeezed_request(80);
  SweepOptions o;
  o.threads = 1;
  o.time_limit_s = 1e-9;  // passed before the first block
  try {
    run_sweep(req, o);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("--time-limit: the sweep stopped after"));
    EXPECT_THAT(e.what(), HasSubstr("--fix"));
  }
}

// The cp exchange is searched: gpt3-1.3b over cp 8 in one DGX H100 node, where the all-to-all
// (heads split over the ranks) beats the p2p ring; the sweep picks it.
TEST(SweepWithSimulator, PicksTheFastestCpExchange) {
  SweepRequest req;
  req.base.model = load_model("gpt3-1.3b");
  req.base.cluster = load_cluster("dgx-h100");
  req.gpus = 8;
  req.global_batch_size = 64;
  req.fixed = parse_fixed_axes("tp=1,cp=8,mbs=16,recompute=none,offload_modules=none");
  SweepOptions o;
  o.threads = 2;
  o.prune = false;
  const SweepResult r = run_sweep(req, o);
  ASSERT_GT(r.fits, 0);
  std::set<CpCommType> seen;
  double best_p2p = 0;
  for (const Evaluated& e : r.evaluated) {
    seen.insert(e.candidate.cp_comm_type);
    if (e.candidate.cp_comm_type == CpCommType::kP2p && e.figures.fits)
      best_p2p = std::max(best_p2p, e.figures.tokens_per_s);
  }
  EXPECT_EQ(seen, (std::set<CpCommType>{CpCommType::kP2p, CpCommType::kAllGather, CpCommType::kA2a,
                                        CpCommType::kA2aP2p}));
  EXPECT_EQ(r.best().candidate.cp_comm_type, CpCommType::kA2a);
  EXPECT_GT(r.best().figures.tokens_per_s, best_p2p);
}

// With the interleaved schedule, overlapping the pipeline transfers is never slower in the
// simulator (which is why the sweep does not search "off": candidate_space.hpp).
TEST(SweepWithSimulator, OverlappedPipelineTransfersAreNeverSlower) {
  SweepRequest req = squeezed_request(80);
  req.fixed = parse_fixed_axes("schedule=interleaved,recompute=selective,offload_modules=none");
  Plan plan = req.base;
  int64_t checked = 0;
  for (const Candidate& c : enumerate_candidates(space_inputs(req))) {
    ASSERT_TRUE(c.overlap_p2p_comm);
    apply_candidate(c, req.global_batch_size, plan);
    if (!validate(plan).empty()) continue;
    const double on = sim::simulate(plan).iteration_time_s;
    plan.parallel.overlap_p2p_comm = false;
    const double off = sim::simulate(plan).iteration_time_s;
    EXPECT_LE(on, off * (1 + 1e-12)) << layout_label(c) << " mbs " << c.micro_batch_size;
    ++checked;
  }
  EXPECT_GT(checked, 20);
}

// Activation offloading is searched as a memory saver: with GPU memory between the least peak
// of any offloading plan and that of any plan without, the sweep's plans all offload.
TEST(SweepWithSimulator, OffloadingWhereNothingElseFits) {
  SweepRequest req = squeezed_request(80);
  req.fixed = parse_fixed_axes("tp=1,pp=1,mbs=4,recompute=none");
  req.objective = Objective::kMemory;
  SweepOptions o;
  o.threads = 2;
  SweepRequest plain = req;
  plain.fixed = parse_fixed_axes(
      "tp=1,pp=1,mbs=4,recompute=none,offload_layers=0,"
      "offload_modules=none");
  const int64_t least_plain = run_sweep(plain, o).best().figures.peak_bytes;
  const SweepResult with = run_sweep(req, o);
  const int64_t least = with.best().figures.peak_bytes;
  ASSERT_LT(least, least_plain);
  req.objective = Objective::kThroughput;
  req.base.cluster.gpu.memory_gib = static_cast<double>(least + least_plain) / 2 / (1 << 30);
  const SweepResult r = run_sweep(req, o);
  ASSERT_GT(r.fits, 0);
  for (int64_t i : r.ranking) {
    const Candidate& c = r.evaluated[static_cast<size_t>(i)].candidate;
    EXPECT_TRUE(c.offload_layers > 0 || c.offload_modules != 0) << layout_label(c);
  }
}

// Every GPU count 1 .. 1024 of 8-GPU nodes, the cheapest presets at their default batch: a count
// no cluster can host is a user error naming --gpus, every other sweep ends without an internal
// error, and each valid plan it ranks simulates. Groups that straddle nodes unevenly (96 GPUs as
// tp 4 · pp 8 · dp 3) are among them. Every axis that shapes the rank grid is searched (tp, cp,
// ep, pp, vpp, dp, the schedule, sequence parallel); those that do not (micro-batch size,
// recomputation, data-parallel sharding, the tensor-parallel overlap) are pinned, which keeps each
// count's sweep about 100 times smaller, but for 96 and 1024 GPUs, which sweep the whole space
// except Megatron-FSDP and the tensor-parallel overlap (a third of it; other sweep tests search
// them). gpt3-1.3b sweeps every count; llama3-8b (grouped-query attention) the counts to 128 and
// every multiple of 64 beyond, 1024 included: 37 sweeps instead of 135 (its CI time was the
// suite's longest, 112 s), every count's rank-grid arithmetic still swept with gpt3-1.3b.
// One test per preset, so that ctest runs them side by side.
class EveryGpuCount : public ::testing::TestWithParam<const char*> {};

TEST_P(EveryGpuCount, UpTo1024) {
  {
    const std::string name = GetParam();
    SweepRequest req;
    req.base.model = load_model(name);
    req.base.cluster = load_cluster("dgx-h100");
    req.global_batch_size = name == "gpt3-1.3b" ? 64 : 128;
    const FixedAxes pinned =
        parse_fixed_axes("mbs=1,recompute=selective,dist_opt=on,fsdp=off,tp_comm_overlap=off");
    SweepOptions o;
    o.threads = 2;
    o.top_k = 1;
    const bool every_count = name == "gpt3-1.3b";
    int64_t swept = 0;
    for (int64_t n = 1; n <= 1024; ++n) {
      SCOPED_TRACE(::testing::Message() << name << " on " << n << " GPUs");
      req.gpus = n;
      if (n > 8 && n % 8 != 0) {
        EXPECT_THROW(check_request(req), Error);
        continue;
      }
      if (!every_count && n > 128 && n % 64 != 0) continue;
      req.fixed = n == 96 || n == 1024 ? parse_fixed_axes("fsdp=off,tp_comm_overlap=off") : pinned;
      check_request(req);
      const SweepResult r = run_sweep(req, o);
      EXPECT_EQ(r.invalid + r.out_of_memory_pruned + r.skipped + r.simulated, r.candidates);
      if (r.fits > 0) {
        EXPECT_TRUE(r.best().figures.fits);
      }
      ++swept;
    }
    EXPECT_EQ(swept, every_count ? 8 + 127 : 8 + 15 + 14);
  }
}

INSTANTIATE_TEST_SUITE_P(SweepWithSimulator, EveryGpuCount,
                         ::testing::Values("gpt3-1.3b", "llama3-8b"), [](const auto& info) {
                           std::string n = info.param;
                           std::replace(n.begin(), n.end(), '-', '_');
                           std::replace(n.begin(), n.end(), '.', '_');
                           return n;
                         });

}  // namespace
}  // namespace mplan::sweep
