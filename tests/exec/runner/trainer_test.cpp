// Trainer under mpirun: the parallel-invariance matrix of the executor. For the tiny GPT, every
// layout (tp, dp, sp) in {(1,1,off), (2,1,off), (2,1,on), (1,2,off), (2,2,on), (4,1,on)} gives the
// losses, gradient norms and EVERY gradient of (1,1,off) -- computed on each rank alone
// (SelfCommWorld) -- and the same loss curve over several AdamW steps. A layout runs when the world
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

#include "exec/cpu/cpu_backend.hpp"
#include "exec/mpi/mpi_comm.hpp"
#include "tests/exec/support/invariance.hpp"
#include "tests/exec/support/self_comm.hpp"

namespace mplan::exec {
namespace {

using testing::invariance_layouts;
using testing::Layout;
using testing::RunResult;
using testing::tiny_plan;

RunResult train(const Plan& plan, CommWorld& world, DType act) {
  CpuBackend be;
  return testing::train_steps(plan, be, world, act);
}

class TrainerInvariance : public ::testing::TestWithParam<Layout> {};

TEST_P(TrainerInvariance, LossesAndEveryGradientMatchTheSingleRankRun) {
  const Layout l = GetParam();
  int world_size = 0, me = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  if (world_size != l.tp * l.dp) GTEST_SKIP() << "needs " << l.tp * l.dp << " ranks";
  const bool bf16 = l.act == DType::kBF16;
  const testing::Tolerances tol = bf16 ? testing::Tolerances{5e-2, 5e-3, 2e-2, 2e-2}
                                       : testing::Tolerances{2e-5, 1e-5, 1e-5, 1e-4};
  CpuBackend ref_be;
  testing::SelfCommWorld self(ref_be);
  RunResult ref = testing::train_steps(tiny_plan(1, 1, false), ref_be, self, l.act);
  Plan plan = tiny_plan(l.tp, l.dp, l.sp);
  MpiCommWorld world(trainer_groups(plan.parallel, me));
  RunResult got = train(plan, world, l.act);
  testing::expect_invariant(l, world.group("tp").rank(), got, ref, tol);
}

INSTANTIATE_TEST_SUITE_P(Layouts, TrainerInvariance, ::testing::ValuesIn(invariance_layouts()),
                         [](const auto& info) { return testing::layout_name(info.param); });

TEST(Trainer, SameSeedGivesBitwiseSameLosses) {
  int world_size = 0, me = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  int64_t tp = world_size >= 2 ? 2 : 1, dp = world_size / tp;
  Plan plan = tiny_plan(tp, dp, tp > 1);
  MpiCommWorld world(trainer_groups(plan.parallel, me));
  RunResult a = train(plan, world, DType::kBF16), b = train(plan, world, DType::kBF16);
  EXPECT_EQ(a.losses, b.losses);
  EXPECT_EQ(a.norms, b.norms);
  EXPECT_EQ(a.grads, b.grads);
  // Training moves: the loss of the last step is not the first one.
  EXPECT_NE(a.losses.front(), a.losses.back());
}

TEST(Trainer, GroupsAreMegatrons) {
  // parallel_state's docstring, tp 2: tensor groups [g0, g1], [g2, g3]; data [g0, g2], [g1, g3].
  GroupMembers g = trainer_groups(tiny_plan(2, 2, true).parallel, 3);
  EXPECT_EQ(g.size(), 2u);
  EXPECT_EQ(g.at("tp"), (std::vector<int>{2, 3}));
  EXPECT_EQ(g.at("dp"), (std::vector<int>{1, 3}));
  EXPECT_EQ(trainer_groups(tiny_plan(4, 1, true).parallel, 2).at("tp"),
            (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(trainer_groups(tiny_plan(1, 2, false).parallel, 1).at("dp"), (std::vector<int>{0, 1}));
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
