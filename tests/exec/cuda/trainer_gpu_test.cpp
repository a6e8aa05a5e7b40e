// The parallel-invariance matrix on GPUs (label gpu; mpirun -np 2 and 4, one rank per GPU): the
// tiny GPT on the CUDA backend over NCCL, each layout of support/invariance.hpp (tensor, sequence,
// pipeline with each schedule, data parallelism, the distributed optimizer, recomputation) whose
// size is the world size, against the single-GPU run each rank computes alone on its own GPU; and
// two runs with the same seed giving bitwise-identical losses, gradient norms and gradients.
// Stated tolerances, relative to the largest element of each reference tensor:
//   bf16 activations: 5e-2 (gradients), 5e-3 (losses), 2e-2 (gradient norms) — bf16 rounding of
//   partial sums split differently across ranks, as on the CPU;
//   f32 activations: 1e-4 (gradients), 2e-5 (losses, first norm), 2e-4 (later norms) — summation
//   order of cuBLAS and NCCL, which differs from the single-GPU run's.
// Skips (never fails) where the host has fewer GPUs than local ranks, as in CI.
#include <gtest/gtest.h>

#include "exec/cuda/cuda_backend.hpp"
#include "exec/cuda/nccl_comm.hpp"
#include "exec/mpi/mpi_runtime.hpp"
#include "tests/exec/cuda/gpu_test_support.hpp"
#include "tests/exec/support/invariance.hpp"
#include "tests/exec/support/self_comm.hpp"

namespace mplan::exec::testing {
namespace {

class GpuTrainerInvariance : public ::testing::TestWithParam<Layout> {};

// Skips unless every rank of this host has a GPU of its own; returns this process's identity.
#define MPLAN_REQUIRE_GPU_PER_RANK(id)         \
  MPLAN_REQUIRE_GPU();                         \
  const ProcessIdentity id = query_identity(); \
  if (cuda_device_count() < id.local_size)     \
  GTEST_SKIP() << id.local_size << " ranks on this host but " << cuda_device_count() << " GPUs"

TEST_P(GpuTrainerInvariance, LossesAndEveryGradientMatchTheSingleGpuRun) {
  const Layout l = GetParam();
  MPLAN_REQUIRE_GPU_PER_RANK(id);
  if (id.world_size != l.world()) GTEST_SKIP() << "needs " << l.world() << " ranks";
  const bool bf16 = l.act == DType::kBF16;
  const Tolerances tol =
      bf16 ? Tolerances{5e-2, 5e-3, 2e-2, 2e-2} : Tolerances{1e-4, 2e-5, 2e-5, 2e-4};
  RunResult ref;
  {
    auto be = make_cuda_backend(id.local_rank);
    SelfCommWorld self(*be);
    ref = train_steps(reference_plan(l), *be, self, l.act);
  }
  Plan plan = tiny_plan(l);
  auto be = make_cuda_backend(id.local_rank);
  auto world = make_nccl_comm_world(trainer_groups(plan.parallel, id.world_rank), *be);
  RunResult got = train_steps(plan, *be, *world, l.act);
  expect_invariant(l, world->group("tp").rank(), world->group("dp").rank(), got, ref, tol);
}

INSTANTIATE_TEST_SUITE_P(Layouts, GpuTrainerInvariance, ::testing::ValuesIn(invariance_layouts()),
                         [](const auto& info) { return layout_name(info.param); });

TEST(GpuTrainer, SameSeedGivesBitwiseSameLosses) {
  MPLAN_REQUIRE_GPU_PER_RANK(id);
  Layout l{.act = DType::kBF16};
  if (id.world_size >= 2) l.pp = 2;
  if (id.world_size >= 4) l.tp = 2, l.sp = true;
  l.dp = id.world_size / (l.tp * l.pp);
  Plan plan = tiny_plan(l);
  auto be = make_cuda_backend(id.local_rank);
  auto world = make_nccl_comm_world(trainer_groups(plan.parallel, id.world_rank), *be);
  RunResult a = train_steps(plan, *be, *world, DType::kBF16);
  RunResult b = train_steps(plan, *be, *world, DType::kBF16);
  EXPECT_EQ(a.losses, b.losses);
  EXPECT_EQ(a.norms, b.norms);
  EXPECT_EQ(a.grads, b.grads);
  EXPECT_NE(a.losses.front(), a.losses.back());  // training moves
}

}  // namespace
}  // namespace mplan::exec::testing
