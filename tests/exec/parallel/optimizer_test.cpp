// Optimizer: which parameters each rank counts in the gradient norm (Megatron: tensor-parallel
// shards everywhere, duplicated parameters on TP rank 0 only, the tied embedding's shared copy
// nowhere), runs grouped by weight decay, the clip coefficient, a step applied through the runs
// equal to per-parameter AdamW by hand, and the distributed optimizer's shards: master weights
// only for the owned elements, updated there and nowhere else.
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
ModelSpec small_model(int64_t layers = 1) {
  ModelSpec m = test::gpt(layers, 8, 2, 4, 64);
  m.make_vocab_size_divisible_by = 32;
  return m;
}

ParamInit constant(float v) {
  return [v](const ParamSpec&, int64_t b, int64_t e, float* out) {
    for (int64_t i = b; i < e; ++i) out[i - b] = v;
  };
}

struct Buffers {
  CpuBackend be;
  ParamLayout p;
  Tensor weights, grads;
  explicit Buffers(const ParallelConfig& par, int64_t pp_rank = 0)
      : p(make_param_layout(small_model(par.pp), par, pp_rank)) {
    weights = be.alloc(DType::kBF16, {p.total_elems}, "w");
    grads = be.alloc(DType::kF32, {p.total_elems}, "g");
    be.fill(weights, 0.0f);
    be.fill(grads, 0.0f);
    for (const auto& s : p.specs)  // gradient 1 on every real element, 0 in alignment gaps
      be.fill(grads.flat_slice(s.offset, s.local_numel()), 1.0f);
  }
  std::vector<ShardRange> all() const { return {{0, p.total_elems}}; }
};

ParallelConfig tp(int64_t n) {
  ParallelConfig p;
  p.tp = n;
  p.sequence_parallel = n > 1;
  return p;
}

TEST(Optimizer, GradNormCountsDuplicatesOnTpRankZeroOnly) {
  for (int64_t rank : {0, 1}) {
    Buffers b(tp(2));
    Optimizer opt(b.p, rank, b.all(), b.weights, b.grads, b.be, OptimizerConfig{}, constant(0));
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

TEST(Optimizer, GradNormLeavesOutTheSharedEmbeddingCopy) {
  ParallelConfig p;
  p.pp = 2;
  Buffers b(p, /*pp_rank=*/1);  // the last stage: layer 1, the final norm, the output copy
  Optimizer opt(b.p, 0, b.all(), b.weights, b.grads, b.be, OptimizerConfig{}, constant(0));
  Tensor out = make(b.be, DType::kF32, {1}, {0.0f});
  opt.grad_sum_squares(out);
  int64_t want = 0;
  for (const auto& s : b.p.specs)
    if (!s.shared_copy) want += s.local_numel();
  ASSERT_GE(b.p.chunks[0].output, 0);
  EXPECT_TRUE(b.p.specs[static_cast<size_t>(b.p.chunks[0].output)].shared_copy);
  EXPECT_EQ(read(b.be, out)[0], static_cast<float>(want));
}

TEST(Optimizer, RunsAlternateWithWeightDecay) {
  Buffers b(tp(1));
  Optimizer opt(b.p, 0, b.all(), b.weights, b.grads, b.be, OptimizerConfig{}, constant(0));
  // The buffer in reverse order: lnf b, lnf w, fc2 b | fc2 w | fc1 b | fc1 w | ln2 b, ln2 w,
  // qkv b | qkv w | proj b | proj w | ln1 b, ln1 w | wpe, wte.
  std::vector<bool> want{false, true, false, true, false, true, false, true, false, true};
  ASSERT_EQ(opt.adam_runs().size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(opt.adam_runs()[i].weight_decay, want[i]);
  EXPECT_EQ(opt.adam_runs().front().offset, 0);
  EXPECT_EQ(opt.adam_runs().back().offset + opt.adam_runs().back().numel,
            b.p.specs.front().offset + b.p.specs.front().local_numel());
  ASSERT_EQ(opt.norm_runs().size(), 1u);  // tp 1: everything, one run
}

TEST(Optimizer, ClipCoefficient) {
  OptimizerConfig c;
  c.clip_grad = 1.0f;
  Buffers b(tp(1));
  Optimizer opt(b.p, 0, b.all(), b.weights, b.grads, b.be, c, constant(0));
  EXPECT_FLOAT_EQ(opt.clip_coefficient(4.0), static_cast<float>(1.0 / (4.0 + 1e-6)));
  EXPECT_EQ(opt.clip_coefficient(0.5), 1.0f);
  c.clip_grad = 0;
  Optimizer off(b.p, 0, b.all(), b.weights, b.grads, b.be, c, constant(0));
  EXPECT_EQ(off.clip_coefficient(100.0), 1.0f);
}

TEST(Optimizer, FirstStepDecaysOnlyWeights) {
  Buffers b(tp(1));
  OptimizerConfig c;
  c.lr = 0.01f;
  c.weight_decay = 0.1f;
  Optimizer opt(b.p, 0, b.all(), b.weights, b.grads, b.be, c, constant(0.5f));
  opt.step(1, 1.0f);
  // Step 1 with gradient 1: p = 0.5·(1 - lr·wd) - lr for weights, 0.5 - lr for biases/norms.
  auto m = read(b.be, opt.master());
  auto w = read(b.be, b.weights);
  for (const auto& s : b.p.specs) {
    float want = s.weight_decay ? 0.5f * (1 - 0.001f) - 0.01f : 0.5f - 0.01f;
    EXPECT_NEAR(m[static_cast<size_t>(s.offset)], want, 1e-6) << s.name;
    EXPECT_EQ(w[static_cast<size_t>(s.offset)], round_to_bf16(m[static_cast<size_t>(s.offset)]));
  }
}

TEST(Optimizer, DistributedShardsUpdateOnlyWhatTheyOwn) {
  ParallelConfig p = tp(1);
  p.dp = 2;
  p.distributed_optimizer = true;
  Buffers b(p);
  std::vector<ShardRange> owned;
  for (const GradBucket& g : b.p.buckets) owned.push_back(bucket_shard(g, 1, 2));
  OptimizerConfig c;
  c.lr = 0.01f;
  c.weight_decay = 0;
  Optimizer opt(b.p, 0, owned, b.weights, b.grads, b.be, c, constant(0.5f));
  int64_t owned_elems = 0;
  for (const ShardRange& r : owned) owned_elems += r.end - r.begin;
  EXPECT_EQ(opt.owned_elems(), owned_elems);
  EXPECT_EQ(opt.master().numel(), owned_elems);
  EXPECT_LT(2 * owned_elems, b.p.total_elems + 2 * 128 * static_cast<int64_t>(owned.size()));
  opt.step(1, 1.0f);
  auto w = read(b.be, b.weights);
  for (const auto& s : b.p.specs)
    for (int64_t e = s.offset; e < s.offset + s.local_numel(); e += 7) {
      const bool mine = opt.packed_of(e) >= 0;
      // Owned elements: 0.5 - lr in bf16; the others untouched (0) until the parameter gather.
      EXPECT_EQ(w[static_cast<size_t>(e)], mine ? round_to_bf16(0.49f) : 0.0f) << s.name;
    }
}

}  // namespace
}  // namespace mplan::exec
