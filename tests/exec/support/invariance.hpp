// The executor's parallel-invariance check, shared by the CPU (mpi label) and GPU (gpu label)
// tests: for a tiny 8-layer GPT, a layout — tensor, sequence, pipeline (each schedule, virtual
// stages, an uneven first/last split, free layouts), data parallelism, the distributed optimizer,
// recomputation, either rank order — trained for a few steps gives the losses, gradient norms
// and EVERY gradient of the single-rank layout, which each rank computes alone (SelfCommWorld) on
// the same backend kind. Tolerances are relative to the largest element of each reference tensor
// and stated by the caller.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "exec/runner/trainer.hpp"
#include "src/common/embedded_configs.hpp"
#include "src/plan/validate.hpp"
#include "tests/exec/support/test_tensors.hpp"

namespace mplan::exec::testing {

inline constexpr int kInvarianceSteps = 4;
inline constexpr uint64_t kInvarianceSeed = 99;
inline constexpr int64_t kInvarianceBucketElems = 6000;  // several DP buckets in the tiny model
inline constexpr int64_t kInvarianceLayers = 8;

struct Layout {
  int64_t tp = 1, pp = 1, dp = 1;
  bool sp = false;
  DType act = DType::kF32;
  int64_t vpp = 1;
  ScheduleKind schedule = ScheduleKind::k1F1B;
  Recompute recompute = Recompute::kNone;
  RecomputeMethod method = RecomputeMethod::kUniform;
  int64_t recompute_layers = 1;
  bool distributed_optimizer = false;
  bool tp_pp_dp_order = false;  // Megatron's --use-tp-pp-dp-mapping
  bool uneven = false;          // decoder_first/last_pipeline_num_layers
  bool llama = false;           // RMSNorm, RoPE, grouped-query attention, SwiGLU, no biases, untied
  const char* layout = nullptr;  // pipeline_model_parallel_layout (vpp follows from it)
  int64_t world() const { return tp * pp * dp; }
};

inline std::string layout_name(const Layout& l) {
  std::string n = cat("tp", l.tp, "_pp", l.pp, "_dp", l.dp);
  if (l.sp) n += "_sp";
  if (l.pp > 1) n += cat("_", to_string(l.schedule));
  if (l.vpp > 1) n += cat("_vpp", l.vpp);
  if (l.recompute != Recompute::kNone)
    n += cat("_", to_string(l.recompute),
             l.recompute == Recompute::kFull ? cat("_", to_string(l.method), l.recompute_layers)
                                             : std::string());
  if (l.distributed_optimizer) n += "_distopt";
  if (l.tp_pp_dp_order) n += "_tppdp";
  if (l.uneven) n += "_uneven";
  if (l.llama) n += "_llama";
  if (l.layout) {  // the layers of each stage: "_layout3122"
    n += "_layout";
    for (const LayoutStage& st : parse_pipeline_layout(l.layout, "layout").stages)
      n += cat(st.decoder);
  }
  n += cat("_", to_string(l.act));
  for (char& c : n)
    if (c == '-') c = '_';
  return n;
}

inline void PrintTo(const Layout& l, std::ostream* os) { *os << layout_name(l); }

// The layouts of the tests: the (tp, dp, sp) matrix, and pipeline layouts with every schedule
// and option.
inline std::vector<Layout> invariance_layouts() {
  std::vector<Layout> out;
  for (DType act : {DType::kF32, DType::kBF16})
    for (auto [tp, dp, sp] : std::vector<std::tuple<int64_t, int64_t, bool>>{
             {1, 1, false}, {2, 1, false}, {2, 1, true}, {1, 2, false}, {2, 2, true}, {4, 1, true}})
      out.push_back({.tp = tp, .dp = dp, .sp = sp, .act = act});
  using S = ScheduleKind;
  for (S s : {S::kGpipe, S::k1F1B, S::kZbH1}) {
    out.push_back({.pp = 2, .schedule = s});
    out.push_back({.pp = 4, .schedule = s});
  }
  out.push_back({.pp = 2, .vpp = 2, .schedule = S::kInterleaved});
  out.push_back({.pp = 4, .vpp = 2, .schedule = S::kInterleaved});
  out.push_back({.pp = 2, .act = DType::kBF16});
  out.push_back({.pp = 4, .uneven = true});
  // Free layouts: uneven stages (1 + 3 + 3 + 1), and uneven interleaved chunks (3, 1 | 2, 2).
  out.push_back({.pp = 4, .layout = "Et|t*3|t*3|tL"});
  out.push_back({.pp = 2, .schedule = S::kInterleaved, .layout = "Et*3|t|t*2|t*2L"});
  out.push_back({.tp = 2, .pp = 2, .sp = true});
  out.push_back({.tp = 2, .pp = 2, .sp = true, .vpp = 2, .schedule = S::kInterleaved});
  out.push_back({.pp = 2, .dp = 2, .tp_pp_dp_order = true});
  out.push_back({.dp = 2, .distributed_optimizer = true});
  out.push_back({.dp = 4, .distributed_optimizer = true});
  out.push_back({.pp = 2, .dp = 2, .distributed_optimizer = true});
  out.push_back({.tp = 2, .dp = 2, .sp = true, .distributed_optimizer = true});
  out.push_back({.pp = 2, .recompute = Recompute::kSelective});
  out.push_back({.pp = 2, .recompute = Recompute::kFull, .recompute_layers = 2});
  out.push_back({.pp = 2,
                 .recompute = Recompute::kFull,
                 .method = RecomputeMethod::kBlock,
                 .recompute_layers = 3});
  out.push_back(
      {.pp = 2, .schedule = S::kZbH1, .recompute = Recompute::kFull, .recompute_layers = 2});
  out.push_back({.tp = 2,
                 .pp = 2,
                 .dp = 2,
                 .sp = true,
                 .vpp = 2,
                 .schedule = S::kInterleaved,
                 .distributed_optimizer = true});
  // The Llama family: grouped-query attention split over tp 2, with sequence parallelism.
  for (DType act : {DType::kF32, DType::kBF16}) out.push_back({.act = act, .llama = true});
  out.push_back({.tp = 2, .sp = true, .llama = true});
  out.push_back({.tp = 2, .sp = true, .act = DType::kBF16, .llama = true});
  out.push_back({.pp = 2, .dp = 2, .llama = true});
  out.push_back({.tp = 2, .pp = 2, .sp = true, .schedule = S::kZbH1, .llama = true});
  out.push_back({.tp = 2,
                 .pp = 2,
                 .dp = 2,
                 .sp = true,
                 .recompute = Recompute::kSelective,
                 .distributed_optimizer = true,
                 .llama = true});
  return out;
}

inline Plan tiny_plan(const Layout& l) {
  Plan p = plan_from_json(parse_json(load_config_text("plans", "tiny-gpt", "plan"), "tiny-gpt"));
  p.model.num_layers = kInvarianceLayers;
  if (l.llama) {  // 4 heads of 16 in 2 query groups (tp 2 splits the groups)
    p.model.num_query_groups = 2;
    p.model.activation = Activation::kSwiglu;
    p.model.normalization = Normalization::kRmsNorm;
    p.model.position_embedding = PositionEmbedding::kRope;
    p.model.rotary_base = 100;  // rotations that matter over 32 positions
    p.model.tied_embeddings = false;
    p.model.add_bias_linear = false;
    p.model.ffn_hidden_size = 96;
  }
  ParallelConfig& q = p.parallel;
  q.tp = l.tp;
  q.pp = l.pp;
  q.dp = l.dp;
  q.vpp = l.vpp;
  q.sequence_parallel = l.sp;
  q.schedule = l.pp > 1 ? l.schedule : ScheduleKind::k1F1B;
  q.recompute = l.recompute;
  q.recompute_method = l.method;
  q.recompute_num_layers = l.recompute_layers;
  q.distributed_optimizer = l.distributed_optimizer;
  if (l.tp_pp_dp_order) q.order = "tp-cp-ep-pp-dp";
  if (l.uneven) {
    q.decoder_first_pipeline_num_layers = 1;
    q.decoder_last_pipeline_num_layers = 3;
  }
  if (l.layout) {
    q.pipeline_model_parallel_layout = parse_pipeline_layout(l.layout, "layout");
    q.vpp = q.pipeline_model_parallel_layout->num_stages() / l.pp;
  }
  q.micro_batch_size = 2;
  q.global_batch_size = 8 * l.dp;  // 4 micro-batches per pipeline
  p.training.lr = 3e-3;
  require_valid(p);
  return p;
}

// The single-rank reference of a layout: the same global batch on one rank.
inline Plan reference_plan(const Layout& l) {
  Plan p = tiny_plan(Layout{.act = l.act, .llama = l.llama});
  p.parallel.global_batch_size = 8 * l.dp;
  require_valid(p);
  return p;
}

struct RunResult {
  std::vector<double> losses, norms;
  std::map<std::string, std::vector<float>> grads;  // first step, per parameter (local shard)
  std::vector<ParamSpec> specs;
  std::vector<GradBucket> bucket_list;
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
    if (k == 0) {  // the optimizer leaves the gradient buffer as the step computed it
      for (size_t i = 0; i < t.model().params().specs.size(); ++i) {
        const ParamSpec& p = t.model().params().specs[i];
        r.grads[p.name] = read(be, t.model().grad(static_cast<int>(i)));
        r.specs.push_back(p);
      }
    }
  }
  r.bucket_list = t.model().params().buckets;
  r.reductions = t.grad_sync().reductions_launched();
  r.buckets = t.grad_sync().buckets().size();
  return r;
}

struct Tolerances {
  double grad, loss, first_norm, later_norm;
};

// Compares `got` (layout l; this rank's shards on tensor-parallel rank tp_rank and data-parallel
// rank dp_rank) with the single-rank reference `ref`.
inline void expect_invariant(const Layout& l, int tp_rank, int dp_rank, const RunResult& got,
                             const RunResult& ref, const Tolerances& tol) {
  for (int k = 0; k < kInvarianceSteps; ++k) {
    EXPECT_NEAR(got.losses[k], ref.losses[k], tol.loss * ref.losses[k]) << "step " << k;
    double ntol = k == 0 ? tol.first_norm : tol.later_norm;
    EXPECT_NEAR(got.norms[k], ref.norms[k], ntol * ref.norms[k]) << "step " << k;
  }
  const Plan plan = tiny_plan(l);
  GptDims dims = gpt_dims(plan.model, 2, l.tp, tp_rank, l.sp);
  for (const ParamSpec& p : got.specs) {
    SCOPED_TRACE(p.name);
    // The last stage's copy of the tied embedding carries the word embedding's whole gradient.
    const std::string key = p.shared_copy ? "embedding.word_embeddings.weight" : p.name;
    ASSERT_TRUE(ref.grads.count(key));
    const std::vector<float>& full = ref.grads.at(key);
    const std::vector<float>& mine = got.grads.at(p.name);
    std::vector<float> want, have;
    for (int64_t j = 0; j < p.local_numel(); ++j) {
      // The distributed optimizer reduces only this rank's shard of each bucket.
      if (l.distributed_optimizer) {
        bool owned = false;
        const int64_t flat = p.offset + j;
        for (const GradBucket& b : got.bucket_list) {
          const ShardRange r = bucket_shard(b, dp_rank, static_cast<int>(l.dp));
          owned = owned || (flat >= r.begin && flat < r.end);
        }
        if (!owned) continue;
      }
      want.push_back(full[static_cast<size_t>(full_index(p, dims, j))]);
      have.push_back(mine[static_cast<size_t>(j)]);
    }
    double scale = 1e-12;
    for (float x : full) scale = std::max(scale, std::abs(static_cast<double>(x)));
    EXPECT_TRUE(all_close(have, want, tol.grad, tol.grad * scale));
  }
  // Data parallelism reduced every bucket once per step.
  if (l.dp > 1) {
    EXPECT_EQ(got.reductions, static_cast<int64_t>(got.buckets) * kInvarianceSteps);
  } else {
    EXPECT_EQ(got.reductions, 0);
  }
}

}  // namespace mplan::exec::testing
