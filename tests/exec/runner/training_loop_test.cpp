// TrainingLoop under mpirun (ctest runs this binary with -np 1, 2, 4 and 8; a test whose layout
// needs another world size skips itself), on a corpus the test writes as .bin/.idx:
// - the loss falls (on one and two ranks: every layout matches the single-rank run below);
// - learning rates through the loop are Megatron's, by hand for a cosine schedule, and by
//   consumed samples under batch-size ramp-up;
// - every layout (pipelines with each schedule, tensor and sequence parallelism, data
//   parallelism, the distributed optimizer) gives the single-rank run's training and evaluation
//   losses (f32: relative 1e-5, summation order only);
// - save and resume are bitwise the continuous run in pipeline and distributed-optimizer layouts
//   (losses, weights, and the checkpoint files written at the end; four steps, resumed after two);
// - a checkpoint saved at tp 2 · pp 2 resumes at tp 1 · dp 4 with the losses of carrying on at
//   tp 2 · pp 2 (f32: relative 1e-5 over four more steps — the layouts sum in different orders;
//   9e-8 measured at the fourth).
#include "exec/runner/training_loop.hpp"

#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <filesystem>
#include <numbers>
#include <string>
#include <vector>

#include "exec/mpi/mpi_comm.hpp"
#include "tests/exec/runner/loop_test_util.hpp"
#include "tests/exec/support/self_comm.hpp"

namespace mplan::exec {
namespace {

namespace fs = std::filesystem;
using testing::data_plan;
using testing::Layout;
using testing::loop_options;
using testing::LoopRun;
using testing::run_loop;

int world_size() {
  int n = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}
int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

// A directory every rank names the same (rank 0's), holding the corpus; removed at the end.
class SharedDir {
 public:
  SharedDir() {
    char name[512] = {};
    if (world_rank() == 0) {
      const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
      const std::string p =
          (fs::path(::testing::TempDir()) / cat("mplan_loop_", ::getpid(), "_", info->name()))
              .string();
      fs::remove_all(p);
      fs::create_directories(p);
      testing::write_corpus(p + "/corpus");
      std::snprintf(name, sizeof name, "%s", p.c_str());
    }
    MPI_Bcast(name, sizeof name, MPI_CHAR, 0, MPI_COMM_WORLD);
    path_ = name;
  }
  ~SharedDir() {
    MPI_Barrier(MPI_COMM_WORLD);
    if (world_rank() == 0) fs::remove_all(path_);
  }
  std::string operator/(const std::string& n) const { return path_ + "/" + n; }

 private:
  std::string path_;
};

TrainingData shared_data(const Plan& p) {
  return make_training_data_rank0_first(p, p.training.train_iters, world_rank(), [](bool ok) {
    int mine = ok ? 0 : 1, failed = 0;
    MPI_Allreduce(&mine, &failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    return failed == 0;
  });
}

// The layouts of a world size.
std::vector<Layout> layouts(int world) {
  using S = ScheduleKind;
  switch (world) {
    case 1:
      return {Layout{}};
    case 2:
      return {{.pp = 2},
              {.dp = 2},
              {.tp = 2, .sp = true},
              {.pp = 2, .vpp = 2, .schedule = S::kInterleaved},
              {.pp = 2, .schedule = S::kZbH1}};
    case 4:
      return {{.tp = 2, .pp = 2, .sp = true},
              {.dp = 4, .distributed_optimizer = true},
              {.pp = 2, .dp = 2, .schedule = S::kGpipe, .distributed_optimizer = true},
              {.pp = 4, .vpp = 2, .schedule = S::kInterleaved}};
    case 8:
      return {{.tp = 2,
               .pp = 2,
               .dp = 2,
               .sp = true,
               .vpp = 2,
               .schedule = S::kInterleaved,
               .distributed_optimizer = true}};
    default:
      return {};
  }
}

// Rank 0's values of v on every rank.
void broadcast(std::vector<double>& v) {
  auto n = static_cast<int64_t>(v.size());
  MPI_Bcast(&n, 1, MPI_INT64_T, 0, MPI_COMM_WORLD);
  v.resize(static_cast<size_t>(n));
  MPI_Bcast(v.data(), static_cast<int>(n), MPI_DOUBLE, 0, MPI_COMM_WORLD);
}

// The single-rank run with global batch `global_batch`, run by rank 0 alone (the other ranks wait
// rather than run it again on the same cores): its losses, learning rates and evaluations (their
// prefix on rank 0 only; samples and loss everywhere).
LoopRun single_rank_run(const std::string& corpus, int64_t global_batch, int64_t iterations,
                        const TrainingData& data) {
  LoopRun ref;
  if (world_rank() == 0) {
    CpuBackend ref_be;
    testing::SelfCommWorld self(ref_be);
    Plan ref_p = data_plan(Layout{}, corpus, 8);
    ref_p.parallel.global_batch_size = global_batch;
    ref = run_loop(ref_p, ref_be, self, loop_options(ref_p, iterations), data);
  }
  broadcast(ref.losses);
  broadcast(ref.lrs);
  std::vector<double> eval_loss, eval_samples;
  for (const EvalRecord& e : ref.evals) {
    eval_loss.push_back(e.loss);
    eval_samples.push_back(static_cast<double>(e.samples));
  }
  broadcast(eval_loss);
  broadcast(eval_samples);
  ref.evals.resize(eval_loss.size());
  for (size_t k = 0; k < eval_loss.size(); ++k) {
    ref.evals[k].loss = eval_loss[k];
    ref.evals[k].samples = static_cast<int64_t>(eval_samples[k]);
  }
  return ref;
}

TEST(TrainingLoop, EveryLayoutGivesTheSingleRankLossesAndEvaluations) {
  const int world = world_size();
  SharedDir dir;
  for (const Layout& l : layouts(world)) {
    SCOPED_TRACE(testing::layout_name(l));
    const Plan p = data_plan(l, dir / "corpus", 8);
    const TrainingData data = shared_data(p);
    // The same global batch on one rank.
    const LoopRun ref = single_rank_run(dir / "corpus", p.parallel.global_batch_size, 4, data);
    MpiCommWorld comm(trainer_groups(p.parallel, world_rank()));
    CpuBackend be;
    const LoopRun got = run_loop(p, be, comm, loop_options(p, 4), data);
    ASSERT_EQ(got.losses.size(), 4u);
    for (size_t k = 0; k < 4; ++k)
      EXPECT_NEAR(got.losses[k], ref.losses[k], 1e-5 * ref.losses[k]) << "iteration " << k + 1;
    EXPECT_EQ(got.lrs, ref.lrs);
    ASSERT_EQ(got.evals.size(), 1u);  // at iteration 4
    ASSERT_EQ(ref.evals.size(), 1u);
    EXPECT_EQ(got.evals[0].prefix, "iteration 4");
    EXPECT_EQ(got.evals[0].samples, 2 * p.parallel.global_batch_size);
    EXPECT_EQ(got.evals[0].samples, ref.evals[0].samples);
    EXPECT_NEAR(got.evals[0].loss, ref.evals[0].loss, 1e-5 * ref.evals[0].loss);
    EXPECT_LT(got.evals[0].loss, got.losses.front());  // it learned
  }
}

TEST(TrainingLoop, LossFalls) {
  if (world_size() > 2) GTEST_SKIP() << "one and two ranks";
  SharedDir dir;
  Layout l;
  l.dp = world_size();
  Plan p = data_plan(l, dir / "corpus", 16);
  p.training.eval_iters = 0;
  const TrainingData data = shared_data(p);
  MpiCommWorld comm(trainer_groups(p.parallel, world_rank()));
  CpuBackend be;
  const LoopRun r = run_loop(p, be, comm, loop_options(p), data);
  ASSERT_EQ(r.losses.size(), 16u);
  EXPECT_NEAR(r.losses.front(), std::log(256.0), 0.3);  // uniform over the vocabulary at first
  EXPECT_LT(r.losses.back(), r.losses.front() - 0.5);
  EXPECT_TRUE(r.evals.empty());
}

TEST(TrainingLoop, LearningRatesAreMegatronsSchedule) {
  if (world_size() != 1) GTEST_SKIP() << "one rank";
  SharedDir dir;
  // Cosine from 1e-3 to 1e-4 over 10 iterations of 8 samples (80 samples), warmup 2 iterations
  // (16 samples) from 0. The update of iteration k (0-based) uses lr at k·8 consumed samples:
  //   k = 0: 0;   k = 1: 1e-3 · 8/16 = 5e-4;   k = 2: the end of warmup, 1e-3;
  //   k = 3: r = (24 - 16)/(80 - 16) = 1/8, 1e-4 + 9e-4 · (cos(pi/8) + 1)/2 = 9.657457896e-4;
  //   k = 9: r = 7/8, 1e-4 + 9e-4 · (1 - cos(pi/8))/2 = 1.342542104e-4.
  Plan p = data_plan(Layout{}, dir / "corpus", 10);
  p.training.lr = 1e-3;
  p.training.min_lr = 1e-4;
  p.training.eval_iters = 0;
  const TrainingData data = shared_data(p);
  CpuBackend be;
  testing::SelfCommWorld self(be);
  const LoopRun r = run_loop(p, be, self, loop_options(p), data);
  ASSERT_EQ(r.lrs.size(), 10u);
  EXPECT_EQ(r.lrs[0], 0.0);
  EXPECT_NEAR(r.lrs[1], 5e-4, 1e-15);
  EXPECT_NEAR(r.lrs[2], 1e-3, 1e-15);
  EXPECT_NEAR(r.lrs[3], 9.657457896e-4, 1e-12);
  EXPECT_NEAR(r.lrs[9], 1.342542104e-4, 1e-12);
  // Batch-size ramp-up: from 2 samples up by 2 every 8/3 samples to 8; the learning rate follows
  // the samples consumed (linear decay from 1e-3 to 0 over 80 samples, no warmup).
  p.training.rampup_batch_size = RampupBatchSize{2, 2, 8};
  p.training.lr_decay_style = LrDecayStyle::kLinear;
  p.training.min_lr = 0;
  p.training.lr_warmup_iters = 0;
  require_valid(p);
  const LoopRun ramp = run_loop(p, be, self, loop_options(p), data);
  MicrobatchCalculator calc({8, 2, 1, p.training.rampup_batch_size, false});
  int64_t consumed = 0;
  for (size_t k = 0; k < ramp.lrs.size(); ++k) {
    EXPECT_NEAR(ramp.lrs[k], 1e-3 * (1.0 - static_cast<double>(consumed) / 80.0), 1e-15)
        << "iteration " << k;
    consumed += calc.at(consumed).running_global_batch_size;
  }
  EXPECT_EQ(ramp.lrs[1], 1e-3 * (1.0 - 2.0 / 80.0));  // after the first batch of 2 samples
}

TEST(TrainingLoop, SaveAndResumeAreBitwiseInPipelineAndDistributedOptimizerLayouts) {
  const int world = world_size();
  if (world == 1) GTEST_SKIP() << "checkpoint_test covers one rank";
  SharedDir dir;
  int n = 0;
  for (const Layout& l : layouts(world)) {
    if (l.pp == 1 && !l.distributed_optimizer) continue;
    SCOPED_TRACE(testing::layout_name(l));
    const Plan p = data_plan(l, dir / "corpus", 4);
    const TrainingData data = shared_data(p);
    MpiCommWorld comm(trainer_groups(p.parallel, world_rank()));
    CpuBackend be;
    const std::string whole = dir / cat("whole", n), parts = dir / cat("parts", n);
    ++n;
    LoopOptions o = loop_options(p);
    o.save = whole;
    o.save_interval = 2;
    const LoopRun ref = run_loop(p, be, comm, o, data);
    o.save = parts;
    o.max_iterations = 2;
    const LoopRun first = run_loop(p, be, comm, o, data);
    o.max_iterations = -1;
    o.load = find_checkpoint(parts, p, world_rank() == 0);
    ASSERT_TRUE(o.load.has_value());
    const LoopRun second = run_loop(p, be, comm, o, data);
    std::vector<double> losses = first.losses;
    losses.insert(losses.end(), second.losses.begin(), second.losses.end());
    EXPECT_EQ(losses, ref.losses);
    EXPECT_EQ(second.weights, ref.weights);
    MPI_Barrier(MPI_COMM_WORLD);
    if (world_rank() == 0) {
      for (const char* file : {"model.safetensors", "optimizer.safetensors"}) {
        EXPECT_TRUE(test::slurp(whole + "/iter_0000004/" + file) ==
                    test::slurp(parts + "/iter_0000004/" + file))
            << file;
      }
    }
  }
}

TEST(TrainingLoop, ACheckpointOfTp2Pp2ResumesAtTp1Dp4) {
  if (world_size() != 4) GTEST_SKIP() << "four ranks";
  SharedDir dir;
  const Plan a = data_plan({.tp = 2, .pp = 2, .sp = true}, dir / "corpus", 8);
  Plan b = data_plan({.dp = 4}, dir / "corpus", 8);
  b.parallel.global_batch_size = a.parallel.global_batch_size;  // 8: one micro-batch per rank
  require_valid(b);
  const TrainingData data = shared_data(a);
  CpuBackend be;
  LoopOptions o = loop_options(a, 4);
  o.save = dir / "ckpt";
  o.save_interval = 4;
  LoopRun carried_on;
  {
    MpiCommWorld comm(trainer_groups(a.parallel, world_rank()));
    run_loop(a, be, comm, o, data);
    o.max_iterations = -1;
    o.save = dir / "ckpt_a";
    o.load = find_checkpoint(dir / "ckpt", a, world_rank() == 0);
    ASSERT_TRUE(o.load.has_value());
    carried_on = run_loop(a, be, comm, o, data);
  }
  MpiCommWorld comm(trainer_groups(b.parallel, world_rank()));
  LoopOptions ob = loop_options(b);
  ob.load = find_checkpoint(dir / "ckpt", b, world_rank() == 0);
  ASSERT_TRUE(ob.load.has_value());
  EXPECT_EQ(ob.load->saved_layout, "tp 2, pp 2, dp 1");
  const LoopRun resumed = run_loop(b, be, comm, ob, data);
  ASSERT_EQ(resumed.losses.size(), 4u);
  for (size_t k = 0; k < 4; ++k)
    EXPECT_NEAR(resumed.losses[k], carried_on.losses[k], 1e-5 * carried_on.losses[k])
        << "iteration " << k + 5;
  EXPECT_EQ(resumed.lrs, carried_on.lrs);
  ASSERT_EQ(resumed.evals.size(), carried_on.evals.size());
  for (size_t k = 0; k < resumed.evals.size(); ++k)
    EXPECT_NEAR(resumed.evals[k].loss, carried_on.evals[k].loss, 1e-5 * carried_on.evals[k].loss)
        << resumed.evals[k].prefix;
}

}  // namespace
}  // namespace mplan::exec
