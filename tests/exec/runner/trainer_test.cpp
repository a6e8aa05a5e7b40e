// Trainer under mpirun: the parallel-invariance matrix of the executor. For the tiny GPT, every
// layout (tp, dp, sp) in {(1,1,off), (2,1,off), (2,1,on), (1,2,off), (2,2,on), (4,1,on)} gives the
// losses, gradient norms and EVERY gradient of (1,1,off) -- computed on each rank alone over
// MPI_COMM_SELF -- and the same loss curve over several AdamW steps. A layout runs when the world
// size is tp·dp (ctest runs this binary with -np 1, 2 and 4).
// Stated tolerances, relative to the largest element of each reference tensor:
//   f32 activations: 2e-5 (gradients), 1e-5 (losses, first gradient norm), 1e-4 (gradient norms
//   after AdamW steps, which amplify last-bit differences of near-zero gradients): summation
//   order only.
//   bf16 activations: 5e-2 (gradients), 5e-3 (losses), 2e-2 (norms): bf16 rounding of activations
//   whose partial sums are split differently across ranks.
#include "exec/runner/trainer.hpp"

#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>

#include "exec/cpu/cpu_backend.hpp"
#include "exec/mpi/mpi_comm.hpp"
#include "exec/parallel/tp_dp_groups.hpp"
#include "src/common/embedded_configs.hpp"
#include "src/plan/validate.hpp"
#include "tests/exec/support/test_tensors.hpp"

namespace mplan::exec {
namespace {

using testing::all_close;
using testing::read;

constexpr int kSteps = 4;
constexpr uint64_t kSeed = 99;
constexpr int64_t kBucketElems = 6000;  // several data-parallel buckets in the tiny model

Plan tiny_plan(int64_t tp, int64_t dp, bool sp) {
  Plan p = plan_from_json(parse_json(load_config_text("plans", "tiny-gpt", "plan"), "tiny-gpt"));
  p.parallel.tp = tp;
  p.parallel.dp = dp;
  p.parallel.sequence_parallel = sp;
  p.parallel.micro_batch_size = 2;
  p.parallel.global_batch_size = 8;  // 4 micro-batches at dp 1, 2 at dp 2
  p.training.lr = 3e-3;
  require_valid(p);
  return p;
}

struct RunResult {
  std::vector<double> losses, norms;
  std::vector<std::vector<float>> grads;  // first step, per parameter (local shard)
  int64_t reductions = 0;
  size_t buckets = 0;
};

RunResult train(const Plan& plan, CommWorld& world, DType act) {
  CpuBackend be;
  Trainer t(plan, be, world, TrainerOptions{act, kSeed, kBucketElems});
  RunResult r;
  for (int k = 0; k < kSteps; ++k) {
    StepResult s = t.step();
    r.losses.push_back(s.loss);
    r.norms.push_back(s.grad_norm);
    if (k == 0)  // the optimizer leaves the gradient buffer as the step computed it
      for (size_t i = 0; i < t.model().params().specs.size(); ++i)
        r.grads.push_back(read(be, t.model().grad(static_cast<int>(i))));
  }
  r.reductions = t.model().grad_sync().reductions_launched();
  r.buckets = t.model().grad_sync().buckets().size();
  return r;
}

RunResult reference_run(DType act) {
  MpiCommWorld self(tp_dp_group_members(1, 1, 0), MPI_COMM_SELF);
  return train(tiny_plan(1, 1, false), self, act);
}

double max_abs(const std::vector<float>& v) {
  double m = 0;
  for (float x : v) m = std::max(m, std::abs(static_cast<double>(x)));
  return m;
}

struct Layout {
  int64_t tp, dp;
  bool sp;
  DType act;
};

void PrintTo(const Layout& l, std::ostream* os) {
  *os << "tp " << l.tp << " dp " << l.dp << " sp " << l.sp << " " << to_string(l.act);
}

class TrainerInvariance : public ::testing::TestWithParam<Layout> {};

TEST_P(TrainerInvariance, LossesAndEveryGradientMatchTheSingleRankRun) {
  const Layout l = GetParam();
  int world_size = 0, me = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  if (world_size != l.tp * l.dp) GTEST_SKIP() << "needs " << l.tp * l.dp << " ranks";
  const bool bf16 = l.act == DType::kBF16;
  const double grad_tol = bf16 ? 5e-2 : 2e-5, loss_tol = bf16 ? 5e-3 : 1e-5,
               norm_tol = bf16 ? 2e-2 : 1e-5;

  RunResult ref = reference_run(l.act);
  Plan plan = tiny_plan(l.tp, l.dp, l.sp);
  MpiCommWorld world(tp_dp_group_members(l.tp, l.dp, me));
  RunResult got = train(plan, world, l.act);

  for (int k = 0; k < kSteps; ++k) {
    EXPECT_NEAR(got.losses[k], ref.losses[k], loss_tol * ref.losses[k]) << "step " << k;
    double ntol = (k == 0 || bf16) ? norm_tol : 1e-4;
    EXPECT_NEAR(got.norms[k], ref.norms[k], ntol * ref.norms[k]) << "step " << k;
  }
  // Each rank compares its shard with the matching elements of the full reference gradient.
  GptDims dims = gpt_dims(plan.model, 2, l.tp, world.group("tp").rank(), l.sp);
  GptParams params = make_gpt_params(dims);
  ASSERT_EQ(got.grads.size(), params.specs.size());
  for (size_t i = 0; i < params.specs.size(); ++i) {
    const ParamSpec& p = params.specs[i];
    SCOPED_TRACE(p.name);
    std::vector<float> want(static_cast<size_t>(p.local_numel()));
    for (int64_t j = 0; j < p.local_numel(); ++j)
      want[static_cast<size_t>(j)] = ref.grads[i][static_cast<size_t>(full_index(p, dims, j))];
    double scale = std::max(max_abs(ref.grads[i]), 1e-12);
    EXPECT_TRUE(all_close(got.grads[i], want, grad_tol, grad_tol * scale));
  }
  // Data parallelism reduced every bucket once per step, as the buckets became final.
  if (l.dp > 1) {
    EXPECT_GT(got.buckets, 2u);
    EXPECT_EQ(got.reductions, static_cast<int64_t>(got.buckets) * kSteps);
  } else {
    EXPECT_EQ(got.reductions, 0);
  }
}

std::vector<Layout> layouts() {
  std::vector<Layout> out;
  for (DType act : {DType::kF32, DType::kBF16})
    for (auto [tp, dp, sp] : std::vector<std::tuple<int64_t, int64_t, bool>>{
             {1, 1, false}, {2, 1, false}, {2, 1, true}, {1, 2, false}, {2, 2, true}, {4, 1, true}})
      out.push_back({tp, dp, sp, act});
  return out;
}

INSTANTIATE_TEST_SUITE_P(Layouts, TrainerInvariance, ::testing::ValuesIn(layouts()),
                         [](const auto& info) {
                           const Layout& l = info.param;
                           return cat("tp", l.tp, "_dp", l.dp, l.sp ? "_sp_" : "_",
                                      to_string(l.act));
                         });

TEST(Trainer, SameSeedGivesBitwiseSameLosses) {
  int world_size = 0, me = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  int64_t tp = world_size >= 2 ? 2 : 1, dp = world_size / tp;
  Plan plan = tiny_plan(tp, dp, tp > 1);
  MpiCommWorld world(tp_dp_group_members(tp, dp, me));
  RunResult a = train(plan, world, DType::kBF16), b = train(plan, world, DType::kBF16);
  EXPECT_EQ(a.losses, b.losses);
  EXPECT_EQ(a.norms, b.norms);
  EXPECT_EQ(a.grads, b.grads);
  // Training moves: the loss of the last step is not the first one.
  EXPECT_NE(a.losses.front(), a.losses.back());
}

TEST(Trainer, RefusesPlansItCannotRun) {
  Plan p = tiny_plan(1, 1, false);
  p.parallel.pp = 2;
  try {
    check_executable(p);
    ADD_FAILURE() << "pp = 2 accepted";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "parallel.pp: pipeline execution is not supported yet (pp = 2)");
  }
  p = tiny_plan(1, 1, false);
  p.model.activation = Activation::kSwiglu;
  EXPECT_THROW(check_executable(p), Error);
  p = tiny_plan(1, 1, false);
  p.training.precision = Precision::kFp16;
  EXPECT_THROW(check_executable(p), Error);
  p = tiny_plan(1, 1, false);
  p.parallel.recompute = Recompute::kFull;
  EXPECT_THROW(check_executable(p), Error);
  EXPECT_EQ(act_dtype_of(tiny_plan(1, 1, false)), DType::kBF16);
}

}  // namespace
}  // namespace mplan::exec
