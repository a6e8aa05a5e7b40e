// Trainer under mpirun: the parallel-invariance matrix of the executor. For the tiny 8-layer GPT,
// every layout of support/invariance.hpp — the (tp, dp, sp) matrix; pipelines of 2 and 4 stages
// with gpipe, 1f1b, zb-h1 and interleaved (vpp 2) schedules; an uneven first/last split; free
// layouts with uneven stages and uneven interleaved chunks; tp 2 with
// sequence parallelism across stages; the other rank order; the distributed optimizer; selective
// and full (uniform, block) recomputation — gives the losses, gradient norms and EVERY gradient of
// the single-rank run, computed on each rank alone (SelfCommWorld), and the same loss curve over
// several AdamW steps. A layout runs when the world size is tp·pp·dp (ctest runs this binary with
// -np 1, 2, 4 and 8). At dp 2, the distributed optimizer's weights and f32 master weights after
// several steps equal the plain optimizer's.
// Stated tolerances, relative to the largest element of each reference tensor:
//   f32 activations: 2e-5 (gradients), 1e-5 (losses, first gradient norm), 1e-4 (gradient norms
//   after AdamW steps, which amplify last-bit differences of near-zero gradients): summation
//   order only.
//   bf16 activations: 5e-2 (gradients), 5e-3 (losses), 2e-2 (norms): bf16 rounding of activations
//   whose partial sums are split differently across ranks.
#include "exec/runner/trainer.hpp"

#include <gtest/gtest.h>
#include <mpi.h>

#include <map>
#include <tuple>

#include "exec/cpu/cpu_backend.hpp"
#include "exec/mpi/mpi_comm.hpp"
#include "sim/sweep/stack_rules.hpp"
#include "tests/exec/support/invariance.hpp"
#include "tests/exec/support/self_comm.hpp"

namespace mplan::exec {
namespace {

using testing::invariance_layouts;
using testing::Layout;
using testing::RunResult;
using testing::tiny_plan;

class TrainerInvariance : public ::testing::TestWithParam<Layout> {};

// The single-rank reference of layout l, computed once per process: it depends only on the
// activation type, the layer family and the global batch (reference_plan), which many layouts
// share.
const RunResult& reference_run(const Layout& l) {
  static std::map<std::tuple<DType, bool, int64_t>, RunResult> cache;
  const auto key = std::make_tuple(l.act, l.llama, l.dp);
  auto it = cache.find(key);
  if (it == cache.end()) {
    CpuBackend be;
    testing::SelfCommWorld self(be);
    it =
        cache.emplace(key, testing::train_steps(testing::reference_plan(l), be, self, l.act)).first;
  }
  return it->second;
}

TEST_P(TrainerInvariance, LossesAndEveryGradientMatchTheSingleRankRun) {
  const Layout l = GetParam();
  int world_size = 0, me = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  if (world_size != l.world()) GTEST_SKIP() << "needs " << l.world() << " ranks";
  const bool bf16 = l.act == DType::kBF16;
  const testing::Tolerances tol = bf16 ? testing::Tolerances{5e-2, 5e-3, 2e-2, 2e-2}
                                       : testing::Tolerances{2e-5, 1e-5, 1e-5, 1e-4};
  const RunResult& ref = reference_run(l);
  Plan plan = tiny_plan(l);
  MpiCommWorld world(trainer_groups(plan.parallel, me));
  CpuBackend be;
  RunResult got = testing::train_steps(plan, be, world, l.act);
  testing::expect_invariant(l, world.group("tp").rank(), world.group("dp").rank(), got, ref, tol);
}

INSTANTIATE_TEST_SUITE_P(Layouts, TrainerInvariance, ::testing::ValuesIn(invariance_layouts()),
                         [](const auto& info) { return testing::layout_name(info.param); });

// Every parameter after kInvarianceSteps AdamW steps of the tiny plan at dp 2 (f32), on this
// rank: the model's weights (after the distributed optimizer's parameter all-gather) and the
// optimizer's f32 master weights, whose shards are gathered over the data-parallel group.
struct FinalParams {
  std::vector<float> initial, weights, master;
  std::vector<ParamSpec> specs;
};

FinalParams train_dp2(bool distributed_optimizer, int me) {
  Plan plan = tiny_plan({.dp = 2, .distributed_optimizer = distributed_optimizer});
  MpiCommWorld world(trainer_groups(plan.parallel, me));
  CpuBackend be;
  Trainer t(plan, be, world,
            TrainerOptions{DType::kF32, testing::kInvarianceSeed, testing::kInvarianceBucketElems});
  FinalParams r;
  r.initial = testing::read(be, t.model().weights());
  for (int k = 0; k < testing::kInvarianceSteps; ++k) t.step();
  r.weights = testing::read(be, t.model().weights());
  r.specs = t.model().params().specs;
  const Optimizer& o = t.optimizer();
  const std::vector<float> packed = testing::read(be, o.master());
  r.master.assign(r.weights.size(), 0.0f);  // zero where another rank owns the element
  for (const ShardRange& s : o.owned())
    for (int64_t flat = s.begin; flat < s.end; ++flat)
      r.master[static_cast<size_t>(flat)] = packed[static_cast<size_t>(o.packed_of(flat))];
  if (distributed_optimizer)  // disjoint shards: the sum is the gather
    MPI_Allreduce(MPI_IN_PLACE, r.master.data(), static_cast<int>(r.master.size()), MPI_FLOAT,
                  MPI_SUM, static_cast<MpiComm&>(world.group("dp")).handle());
  return r;
}

// The distributed optimizer updates each shard as the plain optimizer updates the whole: after
// several steps every parameter is the same, to f32's 1e-5 relative to each tensor's largest
// element (the reductions differ in order only: reduce-scatter against all-reduce, and the norm
// summed over shards).
TEST(Trainer, DistributedOptimizerEndsWithThePlainOptimizersWeights) {
  int world_size = 0, me = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  if (world_size != 2) GTEST_SKIP() << "needs 2 ranks";
  const FinalParams plain = train_dp2(false, me);
  const FinalParams dist = train_dp2(true, me);
  // The same tensors; the distributed optimizer pads its flat buffers to whole shards, so each
  // tensor is compared at its own offset in each run.
  ASSERT_EQ(plain.specs.size(), dist.specs.size());
  for (size_t i = 0; i < plain.specs.size(); ++i) {
    const ParamSpec& p = plain.specs[i];
    const ParamSpec& d = dist.specs[i];
    SCOPED_TRACE(p.name);
    ASSERT_EQ(p.name, d.name);
    ASSERT_EQ(p.local_numel(), d.local_numel());
    auto slice = [](const ParamSpec& s, const std::vector<float>& v) {
      return std::vector<float>(v.begin() + s.offset, v.begin() + s.offset + s.local_numel());
    };
    const std::vector<float> want = slice(p, plain.weights);
    double scale = 1e-12;
    for (float x : want) scale = std::max(scale, std::abs(static_cast<double>(x)));
    EXPECT_TRUE(testing::all_close(slice(d, dist.weights), want, 1e-5, 1e-5 * scale));
    EXPECT_TRUE(
        testing::all_close(slice(d, dist.master), slice(p, plain.master), 1e-5, 1e-5 * scale));
    EXPECT_NE(want, slice(p, plain.initial));  // the steps moved every tensor
  }
}

TEST(Trainer, SameSeedGivesBitwiseSameLosses) {
  int world_size = 0, me = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  Layout l{.act = DType::kBF16};
  if (world_size >= 2) l.pp = 2;
  if (world_size >= 4) l.tp = 2, l.sp = true;
  l.dp = world_size / (l.tp * l.pp);
  Plan plan = tiny_plan(l);
  MpiCommWorld world(trainer_groups(plan.parallel, me));
  CpuBackend be1, be2;
  RunResult a = testing::train_steps(plan, be1, world, DType::kBF16);
  RunResult b = testing::train_steps(plan, be2, world, DType::kBF16);
  EXPECT_EQ(a.losses, b.losses);
  EXPECT_EQ(a.norms, b.norms);
  EXPECT_EQ(a.grads, b.grads);
  // Training moves: the loss of the last step is not the first one.
  EXPECT_NE(a.losses.front(), a.losses.back());
}

TEST(Trainer, BatchRampupFollowsMegatronsCalculator) {
  int world_size = 0, me = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  Layout l;
  l.dp = world_size;
  Plan plan = tiny_plan(l);
  // From 2 · dp samples up by 2 · dp per 8 · dp samples consumed, to 8 · dp.
  plan.training.rampup_batch_size = RampupBatchSize{2 * l.dp, 2 * l.dp, 8 * l.dp};
  require_valid(plan);
  MpiCommWorld world(trainer_groups(plan.parallel, me));
  CpuBackend be;
  Trainer t(plan, be, world, TrainerOptions{DType::kF32, 5, 0});
  std::vector<int64_t> micro;
  for (int k = 0; k < 6; ++k) micro.push_back(t.step().num_microbatches);
  // Megatron: 8 samples per increment over 3 increments: 2, 2, 2, 2 (8 consumed, not 8 + ...)
  MicrobatchCalculator calc({8 * l.dp, 2, l.dp, plan.training.rampup_batch_size, false});
  int64_t consumed = 0;
  for (int k = 0; k < 6; ++k) {
    const BatchState s = calc.at(consumed);
    EXPECT_EQ(micro[static_cast<size_t>(k)], s.num_microbatches) << "iteration " << k;
    consumed += s.running_global_batch_size;
  }
  EXPECT_EQ(t.consumed_samples(), consumed);
  EXPECT_LT(micro.front(), micro.back());
}

TEST(Trainer, GroupsAreMegatrons) {
  // parallel_state's docstring, tp 2: tensor groups [g0, g1], [g2, g3]; data [g0, g2], [g1, g3].
  GroupMembers g = trainer_groups(tiny_plan({.tp = 2, .dp = 2, .sp = true}).parallel, 3);
  EXPECT_EQ(g.at("tp"), (std::vector<int>{2, 3}));
  EXPECT_EQ(g.at("dp"), (std::vector<int>{1, 3}));
  EXPECT_EQ(g.at("pp"), (std::vector<int>{3}));
  EXPECT_EQ(g.at("world"), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(trainer_groups(tiny_plan({.tp = 4, .sp = true}).parallel, 2).at("tp"),
            (std::vector<int>{0, 1, 2, 3}));
  // pp 2, dp 2 in the default order tp-cp-ep-dp-pp: stage 0 is ranks 0, 1; pp groups [0, 2], [1,
  // 3].
  GroupMembers p = trainer_groups(tiny_plan({.pp = 2, .dp = 2}).parallel, 1);
  EXPECT_EQ(p.at("pp"), (std::vector<int>{1, 3}));
  EXPECT_EQ(p.at("embedding"), (std::vector<int>{1, 3}));
  EXPECT_EQ(p.at("mp"), (std::vector<int>{1, 3}));
  // The other order, tp-cp-ep-pp-dp: pp groups [0, 1], [2, 3].
  GroupMembers q =
      trainer_groups(tiny_plan({.pp = 2, .dp = 2, .tp_pp_dp_order = true}).parallel, 1);
  EXPECT_EQ(q.at("pp"), (std::vector<int>{0, 1}));
  EXPECT_EQ(q.at("dp"), (std::vector<int>{1, 3}));
  // A middle stage has no embedding group: a group of its own.
  GroupMembers m = trainer_groups(tiny_plan({.pp = 4}).parallel, 1);
  EXPECT_EQ(m.at("embedding"), (std::vector<int>{1}));
}

TEST(Trainer, RefusesPlansItCannotRun) {
  Plan p = tiny_plan({});
  p.parallel.cp = 2;
  try {
    check_executable(p);
    ADD_FAILURE() << "cp = 2 accepted";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "parallel.cp: context parallelism is not supported by the executor (cp = 2)");
  }
  p = tiny_plan({});
  p.model.moe = MoeSpec{4, 2, 256, 0, 1};
  p.parallel.ep = 1;
  EXPECT_THROW(check_executable(p), Error);  // mixture of experts
  p = tiny_plan({});
  p.training.precision = Precision::kFp16;
  EXPECT_THROW(check_executable(p), Error);
  p = tiny_plan({});
  p.training.fp8_format = Fp8Format::kHybrid;  // fp8 GEMMs: simulated and exported, not run
  EXPECT_THROW(check_executable(p), Error);
  // Fields the executor would run in fp32 anyway: bf16 main gradients, and the precision-aware
  // optimizer's 16-bit state.
  p = tiny_plan({});
  p.training.grads_in_fp32 = false;
  try {
    check_executable(p);
    ADD_FAILURE() << "bf16 main gradients accepted";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "training.grads_in_fp32: bf16 main gradients (Megatron's --grad-reduce-in-bf16) "
                 "are not supported by the executor, which accumulates and reduces gradients in "
                 "fp32; set it to true");
  }
  p.training.precision = Precision::kFp32;  // fp32 training has fp32 gradients whatever it says
  EXPECT_NO_THROW(check_executable(p));
  struct StateDtype {
    const char* field;
    OptimStateDtype OptimizerPrecision::*member;
    OptimStateDtype dtype;
  };
  for (const StateDtype& s :
       {StateDtype{"main_params_dtype", &OptimizerPrecision::main_params_dtype,
                   OptimStateDtype::kFp16},
        StateDtype{"exp_avg_dtype", &OptimizerPrecision::exp_avg_dtype, OptimStateDtype::kBf16},
        StateDtype{"exp_avg_sq_dtype", &OptimizerPrecision::exp_avg_sq_dtype,
                   OptimStateDtype::kBf16}}) {
    p = tiny_plan({});
    p.training.optimizer_precision.use_precision_aware_optimizer = true;
    EXPECT_NO_THROW(check_executable(p));  // fp32 state: what the executor's optimizer keeps
    p.training.optimizer_precision.*s.member = s.dtype;
    try {
      check_executable(p);
      ADD_FAILURE() << s.field << " accepted";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()),
                cat("training.", s.field, ": ", to_string(s.dtype),
                    " (Megatron's precision-aware optimizer) is not supported by the executor, "
                    "which keeps master weights and Adam moments in fp32; use fp32"));
    }
  }
  // Llama-family layers, pipelines, recomputation and the distributed optimizer run.
  EXPECT_NO_THROW(check_executable(tiny_plan({.llama = true})));
  EXPECT_NO_THROW(check_executable(tiny_plan({.pp = 4,
                                              .vpp = 2,
                                              .schedule = ScheduleKind::kInterleaved,
                                              .recompute = Recompute::kFull,
                                              .distributed_optimizer = true})));
  EXPECT_EQ(act_dtype_of(tiny_plan({})), DType::kBF16);
  // A layout with a standalone embedding and loss stage: Megatron runs it, the executor needs a
  // transformer layer in every chunk.
  try {
    check_executable(
        tiny_plan({.pp = 2, .schedule = ScheduleKind::kInterleaved, .layout = "E|t*4|t*4|L"}));
    ADD_FAILURE() << "an empty chunk accepted";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "parallel: pipeline stage 0 chunk 0 has no transformer layer; the executor "
                 "needs at least one per chunk");
  }
  EXPECT_NO_THROW(check_executable(tiny_plan({.pp = 4, .layout = "Et|t*3|t*3|tL"})));
  p = tiny_plan({.dp = 2, .distributed_optimizer = true});
  p.parallel.use_megatron_fsdp = true;
  EXPECT_THROW(check_executable(p), Error);  // Megatron-FSDP
  p = tiny_plan({.dp = 2, .distributed_optimizer = true});
  p.parallel.num_distributed_optimizer_instances = 2;
  EXPECT_THROW(check_executable(p), Error);
  p = tiny_plan({.recompute = Recompute::kSelective});
  EXPECT_NO_THROW(check_executable(p));  // core_attn, what the executor recomputes
  p.parallel.recompute_modules = kRecomputeCoreAttn | kRecomputeMlp;
  EXPECT_THROW(check_executable(p), Error);
  p = tiny_plan({});
  p.training.optimizer_cpu_offload = true;
  EXPECT_THROW(check_executable(p), Error);
}

// The sweep's --stack mplan (sim/sweep/stack_rules) refuses every plan check_executable refuses,
// under the field its error names, and passes the plans it runs: `mplan sweep` writes no plan
// that `mplan run` refuses.
TEST(Trainer, TheSweepsStackRulesRefuseWhatTheExecutorRefuses) {
  auto mplan_plan = [](Plan p) {
    p.training.implementation = Implementation::kMplan;
    return p;
  };
  const Plan base = mplan_plan(tiny_plan({}));
  const Plan dist = mplan_plan(tiny_plan({.dp = 2, .distributed_optimizer = true}));
  std::vector<std::pair<std::string, Plan>> refused;
  Plan p = base;
  p.parallel.cp = 2;
  refused.emplace_back("cp", p);
  p = base;
  p.parallel.ep = 2;
  refused.emplace_back("ep", p);
  p = base;
  p.model.moe = MoeSpec{4, 2, 256, 0, 1};
  refused.emplace_back("moe", p);
  p = base;
  p.training.precision = Precision::kFp16;
  refused.emplace_back("fp16", p);
  p = base;
  p.training.grads_in_fp32 = false;
  refused.emplace_back("bf16 main gradients", p);
  p = base;
  p.training.optimizer_precision.use_precision_aware_optimizer = true;
  p.training.optimizer_precision.main_params_dtype = OptimStateDtype::kFp16;
  refused.emplace_back("fp16 master weights", p);
  p = base;
  p.training.optimizer_precision.exp_avg_dtype = OptimStateDtype::kBf16;
  refused.emplace_back("bf16 exp_avg", p);
  p = base;
  p.training.optimizer_precision.exp_avg_sq_dtype = OptimStateDtype::kBf16;
  refused.emplace_back("bf16 exp_avg_sq", p);
  p = base;
  p.training.fp8_format = Fp8Format::kHybrid;
  refused.emplace_back("fp8", p);
  p = base;
  p.training.fp4_format = Fp4Format::kE2m1;
  refused.emplace_back("fp4", p);
  p = base;
  p.model.mla = MlaSpec{};
  refused.emplace_back("multi-latent attention", p);
  p = base;
  p.model.mtp_num_layers = 1;
  refused.emplace_back("multi-token prediction", p);
  p = base;
  p.model.window_size = std::array<int64_t, 2>{64, 0};
  refused.emplace_back("sliding window", p);
  p = mplan_plan(tiny_plan({.tp = 2, .sp = true}));
  p.parallel.tp_comm_overlap = true;
  refused.emplace_back("tensor-parallel userbuffer overlap", p);
  p = dist;
  p.parallel.use_megatron_fsdp = true;
  refused.emplace_back("Megatron-FSDP", p);
  p = dist;
  p.parallel.num_distributed_optimizer_instances = 2;
  refused.emplace_back("partial distributed optimizer", p);
  p = mplan_plan(tiny_plan({.recompute = Recompute::kSelective}));
  p.parallel.recompute_modules = kRecomputeCoreAttn | kRecomputeMlp;
  refused.emplace_back("recompute modules other than core_attn", p);
  p = base;
  p.training.optimizer_precision.use_precision_aware_optimizer = true;
  p.training.optimizer_cpu_offload = true;
  refused.emplace_back("optimizer offload", p);
  p = mplan_plan(tiny_plan({.pp = 2, .vpp = 2, .schedule = ScheduleKind::kInterleaved}));
  p.parallel.overlap_p2p_comm = true;
  refused.emplace_back("overlapped pipeline p2p", p);
  p = base;
  p.training.cpu_offloading_num_layers = 1;
  refused.emplace_back("activation offload", p);
  p = base;
  p.training.fine_grained_activation_offloading = true;
  p.training.offload_modules = kOffloadCoreAttn;
  refused.emplace_back("fine-grained activation offload", p);
  refused.emplace_back(
      "empty chunk",
      mplan_plan(
          tiny_plan({.pp = 2, .schedule = ScheduleKind::kInterleaved, .layout = "E|t*4|t*4|L"})));
  for (const auto& [what, plan] : refused) {
    SCOPED_TRACE(what);
    std::string field;
    try {
      check_executable(plan);
      ADD_FAILURE() << "accepted by the executor";
      continue;
    } catch (const Error& e) {
      const std::string m = e.what();
      field = m.substr(0, m.find(':'));
    }
    const auto v = sweep::stack_violation(plan);
    ASSERT_TRUE(v.has_value()) << "the sweep keeps a plan the executor refuses (" << field << ")";
    EXPECT_EQ(v->field, field);
  }
  // Plans both run: Llama-family layers; an interleaved pipeline with full recomputation and the
  // distributed optimizer.
  const Plan llama = mplan_plan(tiny_plan({.llama = true}));
  const Plan pipeline = mplan_plan(tiny_plan({.pp = 4,
                                              .vpp = 2,
                                              .schedule = ScheduleKind::kInterleaved,
                                              .recompute = Recompute::kFull,
                                              .distributed_optimizer = true}));
  for (const Plan& ok : {base, dist, llama, pipeline}) {
    EXPECT_NO_THROW(check_executable(ok));
    EXPECT_EQ(sweep::stack_violation(ok), std::nullopt);
  }
}

}  // namespace
}  // namespace mplan::exec
