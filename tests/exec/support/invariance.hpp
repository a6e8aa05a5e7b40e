// The executor's parallel-invariance check, shared by the CPU (mpi label) and GPU (gpu label)
// tests: for the tiny GPT, a layout (tp, dp, sp) trained for a few steps gives the losses,
// gradient norms and EVERY gradient of the single-rank layout (1, 1, off), which each rank
// computes alone (SelfCommWorld) on the same backend kind. Tolerances are relative to the largest
// element of each reference tensor and stated by the caller.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <tuple>
#include <vector>

#include "exec/runner/trainer.hpp"
#include "src/common/embedded_configs.hpp"
#include "src/plan/validate.hpp"
#include "tests/exec/support/test_tensors.hpp"

namespace mplan::exec::testing {

inline constexpr int kInvarianceSteps = 4;
inline constexpr uint64_t kInvarianceSeed = 99;
inline constexpr int64_t kInvarianceBucketElems = 6000;  // several DP buckets in the tiny model

struct Layout {
  int64_t tp, dp;
  bool sp;
  DType act;
};

inline void PrintTo(const Layout& l, std::ostream* os) {
  *os << "tp " << l.tp << " dp " << l.dp << " sp " << l.sp << " " << to_string(l.act);
}

// The matrix, in f32 and bf16 activations.
inline std::vector<Layout> invariance_layouts() {
  std::vector<Layout> out;
  for (DType act : {DType::kF32, DType::kBF16})
    for (auto [tp, dp, sp] : std::vector<std::tuple<int64_t, int64_t, bool>>{
             {1, 1, false}, {2, 1, false}, {2, 1, true}, {1, 2, false}, {2, 2, true}, {4, 1, true}})
      out.push_back({tp, dp, sp, act});
  return out;
}

inline std::string layout_name(const Layout& l) {
  return cat("tp", l.tp, "_dp", l.dp, l.sp ? "_sp_" : "_", to_string(l.act));
}

inline Plan tiny_plan(int64_t tp, int64_t dp, bool sp) {
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

inline RunResult train_steps(const Plan& plan, Backend& be, CommWorld& world, DType act) {
  Trainer t(plan, be, world, TrainerOptions{act, kInvarianceSeed, kInvarianceBucketElems});
  RunResult r;
  for (int k = 0; k < kInvarianceSteps; ++k) {
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

struct Tolerances {
  double grad, loss, first_norm, later_norm;
};

// Compares `got` (layout l, this rank's shards; tp_rank its tensor-parallel rank) with the
// single-rank reference `ref`.
inline void expect_invariant(const Layout& l, int tp_rank, const RunResult& got,
                             const RunResult& ref, const Tolerances& tol) {
  const Plan plan = tiny_plan(l.tp, l.dp, l.sp);
  for (int k = 0; k < kInvarianceSteps; ++k) {
    EXPECT_NEAR(got.losses[k], ref.losses[k], tol.loss * ref.losses[k]) << "step " << k;
    double ntol = k == 0 ? tol.first_norm : tol.later_norm;
    EXPECT_NEAR(got.norms[k], ref.norms[k], ntol * ref.norms[k]) << "step " << k;
  }
  GptDims dims = gpt_dims(plan.model, 2, l.tp, tp_rank, l.sp);
  GptParams params = make_gpt_params(dims);
  ASSERT_EQ(got.grads.size(), params.specs.size());
  for (size_t i = 0; i < params.specs.size(); ++i) {
    const ParamSpec& p = params.specs[i];
    SCOPED_TRACE(p.name);
    std::vector<float> want(static_cast<size_t>(p.local_numel()));
    for (int64_t j = 0; j < p.local_numel(); ++j)
      want[static_cast<size_t>(j)] = ref.grads[i][static_cast<size_t>(full_index(p, dims, j))];
    double scale = 1e-12;
    for (float x : ref.grads[i]) scale = std::max(scale, std::abs(static_cast<double>(x)));
    EXPECT_TRUE(all_close(got.grads[i], want, tol.grad, tol.grad * scale));
  }
  // Data parallelism reduced every bucket once per step, as the buckets became final.
  if (l.dp > 1) {
    EXPECT_GT(got.buckets, 2u);
    EXPECT_EQ(got.reductions, static_cast<int64_t>(got.buckets) * kInvarianceSteps);
  } else {
    EXPECT_EQ(got.reductions, 0);
  }
}

}  // namespace mplan::exec::testing
