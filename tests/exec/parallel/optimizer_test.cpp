// Optimizer: which parameters each rank counts in the gradient norm (Megatron: tensor-parallel
// shards everywhere, duplicated parameters on TP rank 0 only), runs grouped by weight decay, the
// clip coefficient, and a step applied through the runs equal to per-parameter AdamW by hand.
#include "exec/parallel/optimizer.hpp"

#include <gtest/gtest.h>

#include <cmath>

#include "exec/cpu/cpu_backend.hpp"
#include "tests/exec/support/test_tensors.hpp"
#include "tests/src/model/test_gpt.hpp"

namespace mplan::exec {
namespace {

using testing::make;
using testing::read;

// gpt(layers, hidden, heads, seq, vocab), the vocabulary padded to a multiple of 32.
ModelSpec small_model() {
  ModelSpec m = test::gpt(1, 8, 2, 4, 64);
  m.make_vocab_size_divisible_by = 32;
  return m;
}

struct Buffers {
  CpuBackend be;
  GptParams p;
  Tensor master, weights, grads;
  explicit Buffers(const GptDims& d) : p(make_gpt_params(d)) {
    master = be.alloc(DType::kF32, {p.total_elems}, "m");
    weights = be.alloc(DType::kBF16, {p.total_elems}, "w");
    grads = be.alloc(DType::kF32, {p.total_elems}, "g");
    be.fill(master, 0.5f);
    be.fill(grads, 0.0f);
    for (const auto& s : p.specs)  // gradient 1 on every real element, 0 in alignment gaps
      be.fill(grads.flat_slice(s.offset, s.local_numel()), 1.0f);
  }
};

TEST(Optimizer, GradNormCountsDuplicatesOnTpRankZeroOnly) {
  for (int64_t rank : {0, 1}) {
    GptDims d = gpt_dims(small_model(), 1, 2, rank, true);
    Buffers b(d);
    Optimizer opt(b.p, rank, b.master, b.weights, b.grads, b.be, OptimizerConfig{});
    Tensor out = make(b.be, DType::kF32, {1}, {0.0f});
    opt.grad_sum_squares(out);
    int64_t want = 0;  // every counted element contributes 1² = 1
    for (const auto& s : b.p.specs)
      if (!s.tp_duplicated || rank == 0) want += s.local_numel();
    EXPECT_EQ(read(b.be, out)[0], static_cast<float>(want)) << "tp rank " << rank;
    // Rank 1 holds only shards: wte, qkv, proj, fc1, fc2 weights and the qkv and fc1 biases.
    if (rank == 1) {
      EXPECT_EQ(want, 32 * 8 + 12 * 8 + 12 + 8 * 4 + 16 * 8 + 16 + 8 * 16);
    }
  }
}

TEST(Optimizer, RunsAlternateWithWeightDecay) {
  GptDims d = gpt_dims(small_model(), 1, 1, 0, false);
  Buffers b(d);
  Optimizer opt(b.p, 0, b.master, b.weights, b.grads, b.be, OptimizerConfig{});
  // wte+wpe (decay) | ln1 w, ln1 b | proj w | proj b | qkv w | qkv b, ln2 w, ln2 b | fc1 w |
  // fc1 b | fc2 w | fc2 b, lnf w, lnf b.
  std::vector<bool> want{true, false, true, false, true, false, true, false, true, false};
  ASSERT_EQ(opt.adam_runs().size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(opt.adam_runs()[i].weight_decay, want[i]);
  EXPECT_EQ(opt.adam_runs().front().offset, 0);
  EXPECT_EQ(opt.adam_runs().back().offset + opt.adam_runs().back().numel,
            b.p.specs.back().offset + b.p.specs.back().local_numel());
  ASSERT_EQ(opt.norm_runs().size(), 1u);  // tp 1: everything, one run
}

TEST(Optimizer, ClipCoefficient) {
  OptimizerConfig c;
  c.clip_grad = 1.0f;
  GptDims d = gpt_dims(small_model(), 1, 1, 0, false);
  Buffers b(d);
  Optimizer opt(b.p, 0, b.master, b.weights, b.grads, b.be, c);
  EXPECT_FLOAT_EQ(opt.clip_coefficient(4.0), static_cast<float>(1.0 / (4.0 + 1e-6)));
  EXPECT_EQ(opt.clip_coefficient(0.5), 1.0f);
  c.clip_grad = 0;
  Optimizer off(b.p, 0, b.master, b.weights, b.grads, b.be, c);
  EXPECT_EQ(off.clip_coefficient(100.0), 1.0f);
}

TEST(Optimizer, FirstStepDecaysOnlyWeights) {
  GptDims d = gpt_dims(small_model(), 1, 1, 0, false);
  Buffers b(d);
  OptimizerConfig c;
  c.lr = 0.01f;
  c.weight_decay = 0.1f;
  Optimizer opt(b.p, 0, b.master, b.weights, b.grads, b.be, c);
  opt.step(1, 1.0f);
  // Step 1 with gradient 1: p = 0.5·(1 - lr·wd) - lr for weights, 0.5 - lr for biases/norms.
  auto m = read(b.be, b.master);
  auto w = read(b.be, b.weights);
  for (const auto& s : b.p.specs) {
    float want = s.weight_decay ? 0.5f * (1 - 0.001f) - 0.01f : 0.5f - 0.01f;
    EXPECT_NEAR(m[static_cast<size_t>(s.offset)], want, 1e-6) << s.name;
    EXPECT_EQ(w[static_cast<size_t>(s.offset)], round_to_bf16(m[static_cast<size_t>(s.offset)]));
  }
}

}  // namespace
}  // namespace mplan::exec
