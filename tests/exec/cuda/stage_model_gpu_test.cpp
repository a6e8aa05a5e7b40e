// StageModel on the CUDA backend: the golden GPT against the PyTorch float64 oracle (golden.json,
// the check tests/exec/model/stage_model_test.cpp runs on the CPU backend, support/golden_gpt.hpp:
// logits, loss, every gradient, gradient norm, three AdamW steps with clipping) in bf16 and f32; a
// GPT with head dim 128 (the tensor-core attention at the reference head dim) against the same
// model on the CPU backend; two GPU runs from the same seed giving bitwise-identical losses and
// gradients; recomputation (selective, full) and the zero-bubble split giving bitwise the plain
// run's gradients; and the reference workload (gpt3-1.3b) trained with full recomputation equal
// to the plain run, bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>

#include "exec/cpu/cpu_backend.hpp"
#include "exec/cuda/cuda_backend.hpp"
#include "exec/model/stage_model.hpp"
#include "exec/parallel/grad_sync.hpp"
#include "exec/runner/trainer.hpp"
#include "src/common/embedded_configs.hpp"
#include "src/plan/validate.hpp"
#include "tests/exec/cuda/gpu_test_support.hpp"
#include "tests/exec/support/golden_gpt.hpp"
#include "tests/exec/support/self_comm.hpp"
#include "tests/exec/support/test_tensors.hpp"
#include "tests/exec/support/two_microbatches.hpp"
#include "tests/src/model/test_gpt.hpp"

namespace mplan::exec::cuda::testing {
namespace {

using ::mplan::exec::testing::golden_stage;
using ::mplan::exec::testing::load_golden;
using ::mplan::exec::testing::read;
using ::mplan::exec::testing::run_golden;
using ::mplan::exec::testing::SoloComm;
using ::mplan::exec::testing::two_microbatch_step;

// The CPU backend's bf16 tolerances (tests/exec/model/stage_model_test.cpp).
TEST(StageModelGpuGolden, Bf16MatchesTorchFloat64Loosely) {
  MPLAN_REQUIRE_GPU();
  CudaBackend be(0);
  run_golden(be, DType::kBF16, {2e-2, 2e-3, 6e-2, 2e-2});
}

// f32 activations (f32 GEMMs without TF32, reference attention kernels): twice the CPU's
// tolerances, for the different summation orders.
TEST(StageModelGpuGolden, F32MatchesTorchFloat64) {
  MPLAN_REQUIRE_GPU();
  CudaBackend be(0);
  run_golden(be, DType::kF32, {2e-4, 2e-5, 2e-4, 2e-5});
}

// The Llama family (RMSNorm, RoPE, grouped-query attention, SwiGLU, no biases, untied output)
// against its PyTorch oracle, with the CPU backend's tolerances (f32 twice them).
TEST(StageModelGpuGolden, LlamaBf16MatchesTorchFloat64Loosely) {
  MPLAN_REQUIRE_GPU();
  CudaBackend be(0);
  run_golden(be, DType::kBF16, {2e-2, 2e-3, 6e-2, 2e-2}, "golden_llama.json");
}

TEST(StageModelGpuGolden, LlamaF32MatchesTorchFloat64) {
  MPLAN_REQUIRE_GPU();
  CudaBackend be(0);
  run_golden(be, DType::kF32, {2e-4, 2e-5, 2e-4, 2e-5}, "golden_llama.json");
}

// A GPT with head dim 128: 2 layers, hidden 256 = 2 heads × 128, ffn 1024, vocab 512 (no
// padding), sequence 160 (off the tiles), micro-batch 2.
StageSpec head_dim_128(uint64_t seed) {
  StageSpec s;
  s.model = ::mplan::test::gpt(2, 256, 2, 160, 512);
  s.model.make_vocab_size_divisible_by = s.model.vocab_size;
  s.parallel.micro_batch_size = 2;
  s.parallel.global_batch_size = 4;
  s.seed = seed;
  return s;
}

// Forward and backward of two micro-batches (F0 F1 B0 B1, W0 W1 when split): the summed loss,
// then every gradient. With `again`, a second pass follows on the same model: begin_grads(), every
// gradient then filled with NaN (begin_grads fills nothing; the first writes must overwrite), the
// pass again.
struct PassResult {
  float loss = 0;
  std::vector<std::vector<float>> grads;
  std::vector<std::string> names;
};

PassResult two_microbatches(Backend& be, const StageSpec& spec, bool again = false) {
  SoloComm solo;
  StageModel model(spec, be, solo, nullptr);
  const GptDims& d = model.dims();
  GradSync sync(model.params(), model.grads(), be, solo, true, false, nullptr);
  Tensor tok = be.alloc(DType::kI32, {2, d.seq, d.micro_batch}, "t");
  Tensor loss = be.alloc(DType::kF32, {1}, "t");
  std::mt19937 gen(static_cast<uint32_t>(spec.seed));
  std::uniform_int_distribution<int32_t> u(0, static_cast<int32_t>(d.vocab - 1));
  std::vector<int32_t> in(static_cast<size_t>(2 * d.tokens()));
  for (auto& x : in) x = u(gen);
  be.upload(tok, in.data());
  for (int pass = 0; pass < (again ? 2 : 1); ++pass)
    two_microbatch_step(model, be, sync, tok, loss, 0.001f, spec.split_backward, pass > 0);
  PassResult r;
  r.loss = read(be, loss)[0];
  for (size_t i = 0; i < model.params().specs.size(); ++i) {
    r.grads.push_back(read(be, model.grad(static_cast<int>(i))));
    r.names.push_back(model.params().specs[i].name);
  }
  for (Tensor* t : {&tok, &loss}) be.release(*t);
  return r;
}

void expect_bitwise(const PassResult& a, const PassResult& b) {
  EXPECT_EQ(std::memcmp(&a.loss, &b.loss, sizeof(float)), 0) << a.loss << " vs " << b.loss;
  ASSERT_EQ(a.grads.size(), b.grads.size());
  for (size_t i = 0; i < a.grads.size(); ++i)
    EXPECT_EQ(std::memcmp(a.grads[i].data(), b.grads[i].data(), a.grads[i].size() * sizeof(float)),
              0)
        << a.names[i] << " differs";
}

TEST(StageModelGpu, HeadDim128MatchesCpuBackend) {
  MPLAN_REQUIRE_GPU();
  CudaBackend gpu(0);
  CpuBackend cpu;
  const PassResult g = two_microbatches(gpu, head_dim_128(99));
  const PassResult c = two_microbatches(cpu, head_dim_128(99));
  // Both in bf16, rounding at different points (fused epilogues, bf16 P in attention): the
  // summed loss within 0.5 %, each gradient within 5 % in relative L2 norm.
  EXPECT_NEAR(g.loss, c.loss, 5e-3 * std::abs(c.loss));
  ASSERT_EQ(g.grads.size(), c.grads.size());
  for (size_t i = 0; i < g.grads.size(); ++i) {
    double num = 0, den = 0;
    for (size_t j = 0; j < g.grads[i].size(); ++j) {
      const double diff = static_cast<double>(g.grads[i][j]) - c.grads[i][j];
      num += diff * diff;
      den += static_cast<double>(c.grads[i][j]) * c.grads[i][j];
    }
    const double rel = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
    std::printf("  %-48s rel_l2 %.2e\n", g.names[i].c_str(), rel);
    EXPECT_LT(rel, 5e-2) << g.names[i];
  }
}

TEST(StageModelGpu, TwoRunsFromOneSeedAreBitwiseEqual) {
  MPLAN_REQUIRE_GPU();
  CudaBackend gpu(0);
  expect_bitwise(two_microbatches(gpu, head_dim_128(7)), two_microbatches(gpu, head_dim_128(7)));
}

// The first write of each gradient overwrites it (weight-gradient GEMMs with beta 0, the adding
// kernels' outputs zeroed first): over NaN the bits of the pass onto a zeroed buffer, for a GPT
// (biases, tied embeddings) and the golden Llama (RMSNorm, untied output).
TEST(StageModelGpu, GradientsNeedNoZeroedBuffer) {
  MPLAN_REQUIRE_GPU();
  CudaBackend gpu(0);
  for (bool llama : {false, true}) {
    for (bool split : {false, true}) {
      StageSpec s =
          llama ? golden_stage(load_golden("golden_llama.json"), DType::kBF16) : head_dim_128(13);
      s.split_backward = split;
      SCOPED_TRACE(::testing::Message() << (llama ? "llama" : "gpt") << (split ? " split" : ""));
      expect_bitwise(two_microbatches(gpu, s, /*again=*/true), two_microbatches(gpu, s));
    }
  }
}

TEST(StageModelGpu, RecomputationAndTheSplitBackwardAreBitwiseThePlainRun) {
  MPLAN_REQUIRE_GPU();
  CudaBackend gpu(0);
  const PassResult plain = two_microbatches(gpu, head_dim_128(11));
  for (int mode = 0; mode < 4; ++mode) {
    StageSpec s = head_dim_128(11);
    if (mode == 0) s.parallel.recompute = Recompute::kSelective;
    if (mode >= 1) s.parallel.recompute = Recompute::kFull;
    if (mode == 2) s.parallel.recompute_num_layers = 2;
    if (mode == 3) s.split_backward = true;
    SCOPED_TRACE(::testing::Message() << "mode " << mode);
    expect_bitwise(two_microbatches(gpu, s), plain);
  }
}

// The reference workload (gpt3-1.3b, micro-batch 4, bf16) on one GPU, 2 micro-batches per
// iteration, two iterations: full recomputation gives bitwise the losses and gradient norms of the
// plain run.
TEST(StageModelGpu, ReferenceWorkloadWithFullRecomputationEqualsThePlainRun) {
  MPLAN_REQUIRE_GPU();
  Plan plan = plan_from_json(
      parse_json(load_config_text("plans", "gpt3-1.3b-dp4", "plan"), "gpt3-1.3b-dp4"));
  plan.parallel.dp = 1;
  plan.parallel.global_batch_size = 8;
  require_valid(plan);
  auto run = [&](Recompute r) {
    Plan p = plan;
    p.parallel.recompute = r;
    p.parallel.recompute_num_layers = 1;
    auto be = make_cuda_backend(0);
    ::mplan::exec::testing::SelfCommWorld self(*be);
    Trainer t(p, *be, self, TrainerOptions{DType::kBF16, 1234, 0});
    std::vector<double> out;
    for (int k = 0; k < 2; ++k) {
      StepResult s = t.step();
      out.push_back(s.loss);
      out.push_back(s.grad_norm);
    }
    return out;
  };
  const std::vector<double> plain = run(Recompute::kNone), full = run(Recompute::kFull);
  std::printf("  plain: loss %.6f norm %.6f, then loss %.6f norm %.6f\n", plain[0], plain[1],
              plain[2], plain[3]);
  EXPECT_EQ(full, plain);
}

}  // namespace
}  // namespace mplan::exec::cuda::testing
