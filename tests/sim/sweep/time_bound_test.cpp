// Tests of the iteration-time lower bound against the simulator itself: below the simulated
// iteration time and above the simulated compute time of the reported stage, for every valid
// candidate of small sweeps (dense and MoE, every schedule, recompute, micro-batch size, cp
// exchange and activation offloading).
#include "sim/sweep/time_bound.hpp"

#include <gtest/gtest.h>

#include "sim/sweep/candidate_space.hpp"
#include "src/plan/validate.hpp"
#include "tests/sim/sweep/sweep_test_util.hpp"

namespace mplan::sweep {
namespace {

void check_every_valid_candidate(const Plan& base, int64_t gpus, int64_t gbs) {
  Plan plan = base;
  TimeBoundScratch scratch;
  int64_t checked = 0;
  for (const Candidate& c :
       enumerate_candidates({&base.model, gpus, base.cluster.gpus_per_node, gbs, FixedAxes{}})) {
    apply_candidate(c, gbs, plan);  // with the cp exchanges and activation offloading
    if (!validate(plan).empty()) continue;
    const sim::SimulationResult r = sim::simulate(plan);
    const int64_t bound = iteration_time_lower_bound_ns(plan, sim::SimOptions{}, scratch);
    const double bound_s = static_cast<double>(bound) * 1e-9;
    ASSERT_LE(bound_s, r.iteration_time_s * (1 + 1e-12))
        << layout_label(c) << " " << to_string(c.schedule) << " mbs " << c.micro_batch_size;
    ASSERT_GE(bound_s, r.breakdown.compute_s * (1 - 1e-9))
        << layout_label(c) << " " << to_string(c.schedule) << " mbs " << c.micro_batch_size;
    ++checked;
  }
  EXPECT_GT(checked, 50);
}

TEST(TimeBound, BelowEverySimulatedIterationTime) {
  Plan p;
  p.model = load_model("gpt3-1.3b");
  p.cluster = load_cluster("h200x4");
  check_every_valid_candidate(p, 4, 64);
}

TEST(TimeBound, AcrossNodesAndUnevenSplits) {
  Plan p;
  p.model = load_model("llama3-8b");
  p.model.num_layers = 7;  // uneven pipeline splits
  p.model.seq_length = 1024;
  p.cluster = load_cluster("dgx-h100");
  check_every_valid_candidate(p, 16, 32);
}

TEST(TimeBound, MoeModel) {
  Plan p;
  p.model = load_model("mixtral-8x7b");
  p.model.num_layers = 4;
  p.model.seq_length = 1024;
  p.cluster = load_cluster("dgx-h100");
  check_every_valid_candidate(p, 8, 16);
}

// A deep pipeline with few micro-batches spends most of its time filling and draining: the bound
// counts that (stage s waits for s forwards before it and ends s backwards before stage 0 does),
// so it stays close to the simulated time where the busiest stage's work alone is far below it.
TEST(TimeBound, CountsThePipelinesFillAndDrain) {
  Plan p;
  p.model = load_model("gpt3-1.3b");  // 24 layers
  p.cluster = load_cluster("h200x4");
  p.parallel.pp = 4;
  p.parallel.micro_batch_size = 1;
  p.parallel.global_batch_size = 4;  // M = 4
  for (ScheduleKind k : {ScheduleKind::k1F1B, ScheduleKind::kInterleaved, ScheduleKind::kZbH1}) {
    p.parallel.schedule = k;
    p.parallel.vpp = k == ScheduleKind::kInterleaved ? 2 : 1;
    ASSERT_TRUE(validate(p).empty()) << to_string(validate(p).front());
    TimeBoundScratch scratch;
    const double bound_s =
        static_cast<double>(iteration_time_lower_bound_ns(p, sim::SimOptions{}, scratch)) * 1e-9;
    int64_t busiest_ns = 0;  // the busiest stage's work: the bound without fill and drain
    for (const StagePassTimes& t : stage_pass_times(p, sim::SimOptions{}, scratch))
      busiest_ns = std::max(busiest_ns, t.forward_ns + t.backward_ns);
    const double busiest_s = static_cast<double>(busiest_ns * 4) * 1e-9;
    const double simulated_s = sim::simulate(p).iteration_time_s;
    EXPECT_LE(bound_s, simulated_s) << to_string(k);
    EXPECT_GT(bound_s, 0.85 * simulated_s) << to_string(k);
    EXPECT_LT(busiest_s, 0.75 * simulated_s) << to_string(k);  // what the fill and drain add
  }
}

double bound_s(const Plan& p) {
  TimeBoundScratch scratch;
  return static_cast<double>(iteration_time_lower_bound_ns(p, sim::SimOptions{}, scratch)) * 1e-9;
}

// ZeRO-3 over two nodes: every pass all-gathers the model's 16 GB of bf16 weights and every
// backward reduce-scatters its 32 GB of fp32 gradients, half of it over InfiniBand: more than
// the compute of a micro-batch of 1024 tokens. The data-parallel stream runs them one at a
// time, so the bound counts them.
TEST(TimeBound, CountsMegatronFsdpCollectives) {
  Plan p;
  p.model = load_model("llama3-8b");
  p.model.seq_length = 1024;
  p.cluster = load_cluster("dgx-h100");
  p.parallel.dp = 16;
  p.parallel.micro_batch_size = 1;
  p.parallel.global_batch_size = 32;  // M = 2
  p.parallel.distributed_optimizer = true;
  const double dist_opt_bound = bound_s(p);
  p.parallel.use_megatron_fsdp = true;
  p.parallel.data_parallel_sharding_strategy = DpSharding::kOptimGradsParams;
  ASSERT_TRUE(validate(p).empty()) << to_string(validate(p).front());
  const double zero3_bound = bound_s(p);
  const double simulated_s = sim::simulate(p).iteration_time_s;
  EXPECT_LE(zero3_bound, simulated_s);
  EXPECT_GT(zero3_bound, 1.5 * dist_opt_bound);  // the collectives, not the compute, bound it
  EXPECT_GT(zero3_bound, 0.7 * simulated_s);
  // ZeRO-2 reduce-scatters only: between the two.
  p.parallel.data_parallel_sharding_strategy = DpSharding::kOptimGrads;
  const double zero2_bound = bound_s(p);
  EXPECT_LE(zero2_bound, sim::simulate(p).iteration_time_s);
  EXPECT_GT(zero2_bound, dist_opt_bound);
  EXPECT_LT(zero2_bound, zero3_bound);
}

// The sweep reuses one bound for candidates that differ only in the distributed optimizer
// (sweep.cpp's BoundCache): it changes no compute-stream pass.
TEST(TimeBound, SameWithOrWithoutTheDistributedOptimizer) {
  Plan p;
  p.model = load_model("gpt3-1.3b");
  p.cluster = load_cluster("h200x4");
  const std::vector<Candidate> cs =
      enumerate_candidates({&p.model, 4, p.cluster.gpus_per_node, 64, FixedAxes{}});
  int64_t compared = 0;
  for (const Candidate& c : cs) {
    if (!c.distributed_optimizer || c.use_megatron_fsdp) continue;
    Candidate off = c;
    off.distributed_optimizer = false;
    apply_candidate(c, 64, p);
    if (!validate(p).empty()) continue;
    const double with = bound_s(p);
    apply_candidate(off, 64, p);
    ASSERT_EQ(with, bound_s(p)) << layout_label(c);
    ++compared;
  }
  EXPECT_GT(compared, 100);
}

}  // namespace
}  // namespace mplan::sweep
