// GptModel on the CUDA backend: the golden GPT against the PyTorch float64 oracle (golden.json,
// the check tests/exec/model/gpt_model_test.cpp runs on the CPU backend, support/golden_gpt.hpp:
// logits, loss, every gradient, gradient norm, three AdamW steps with clipping) in bf16 and f32; a
// GPT with head dim 128 (the tensor-core attention at the reference head dim) against the same
// model on the CPU backend; and two GPU runs from the same seed giving bitwise-identical losses and
// gradients.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>

#include "exec/cpu/cpu_backend.hpp"
#include "exec/cuda/cuda_backend.hpp"
#include "exec/model/gpt_model.hpp"
#include "exec/model/gpt_params.hpp"
#include "tests/exec/gpu/gpu_test_support.hpp"
#include "tests/exec/support/golden_gpt.hpp"
#include "tests/exec/support/test_tensors.hpp"
#include "tests/src/model/test_gpt.hpp"

namespace mplan::exec::cuda::testing {
namespace {

using ::mplan::exec::testing::read;
using ::mplan::exec::testing::run_golden;
using ::mplan::exec::testing::SoloComm;

// The CPU backend's bf16 tolerances (tests/exec/model/gpt_model_test.cpp).
TEST(GptModelGpuGolden, Bf16MatchesTorchFloat64Loosely) {
  MPLAN_REQUIRE_GPU();
  CudaBackend be(0);
  run_golden(be, DType::kBF16, {2e-2, 2e-3, 6e-2, 2e-2});
}

// f32 activations (f32 GEMMs without TF32, reference attention kernels): twice the CPU's
// tolerances, for the different summation orders.
TEST(GptModelGpuGolden, F32MatchesTorchFloat64) {
  MPLAN_REQUIRE_GPU();
  CudaBackend be(0);
  run_golden(be, DType::kF32, {2e-4, 2e-5, 2e-4, 2e-5});
}

// One forward/backward of a GPT with head dim 128 on `be`: the summed loss, then every gradient.
struct StepResult {
  float loss = 0;
  std::vector<std::vector<float>> grads;
};

StepResult one_step(Backend& be, const GptDims& d, uint64_t seed) {
  SoloComm solo;
  GptModel model(d, DType::kBF16, be, solo, solo, seed, 0.02, 0);
  Tensor tok = be.alloc(DType::kI32, {d.seq, d.micro_batch}, "t");
  Tensor tgt = be.alloc(DType::kI32, {d.seq, d.micro_batch}, "t");
  Tensor loss = be.alloc(DType::kF32, {1}, "t");
  std::mt19937 gen(static_cast<uint32_t>(seed));
  std::uniform_int_distribution<int32_t> u(0, static_cast<int32_t>(d.vocab - 1));
  std::vector<int32_t> in(static_cast<size_t>(d.tokens())), out(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    in[i] = u(gen);
    out[i] = u(gen);
  }
  be.upload(tok, in.data());
  be.upload(tgt, out.data());
  be.fill(loss, 0.0f);
  model.zero_grads();
  model.forward(tok);
  model.backward(tok, tgt, 1.0f / static_cast<float>(d.tokens()), true, loss);
  model.finish_grads();
  StepResult r;
  r.loss = read(be, loss)[0];
  for (size_t i = 0; i < model.params().specs.size(); ++i)
    r.grads.push_back(read(be, model.grad(static_cast<int>(i))));
  for (Tensor* t : {&tok, &tgt, &loss}) be.release(*t);
  return r;
}

GptDims head_dim_128_dims() {
  // 2 layers, hidden 256 = 2 heads × 128, ffn 1024, vocab 512 (no padding), sequence 160 (off
  // the tiles).
  ModelSpec m = ::mplan::test::gpt(2, 256, 2, 160, 512);
  m.make_vocab_size_divisible_by = m.vocab_size;
  return gpt_dims(m, 2, 1, 0, false);
}

TEST(GptModelGpu, HeadDim128MatchesCpuBackend) {
  MPLAN_REQUIRE_GPU();
  const GptDims d = head_dim_128_dims();
  CudaBackend gpu(0);
  CpuBackend cpu;
  const StepResult g = one_step(gpu, d, 99), c = one_step(cpu, d, 99);
  // Both in bf16, rounding at different points (fused epilogues, bf16 P in attention): the
  // summed loss within 0.5 %, each gradient within 5 % in relative L2 norm.
  EXPECT_NEAR(g.loss, c.loss, 5e-3 * std::abs(c.loss));
  ASSERT_EQ(g.grads.size(), c.grads.size());
  const GptParams params = make_gpt_params(d);
  for (size_t i = 0; i < g.grads.size(); ++i) {
    double num = 0, den = 0;
    for (size_t j = 0; j < g.grads[i].size(); ++j) {
      const double diff = static_cast<double>(g.grads[i][j]) - c.grads[i][j];
      num += diff * diff;
      den += static_cast<double>(c.grads[i][j]) * c.grads[i][j];
    }
    const double rel = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
    std::printf("  %-48s rel_l2 %.2e\n", params.specs[i].name.c_str(), rel);
    EXPECT_LT(rel, 5e-2) << params.specs[i].name;
  }
}

TEST(GptModelGpu, TwoRunsFromOneSeedAreBitwiseEqual) {
  MPLAN_REQUIRE_GPU();
  const GptDims d = head_dim_128_dims();
  CudaBackend gpu(0);
  const StepResult a = one_step(gpu, d, 7), b = one_step(gpu, d, 7);
  EXPECT_EQ(std::memcmp(&a.loss, &b.loss, sizeof(float)), 0) << a.loss << " vs " << b.loss;
  ASSERT_EQ(a.grads.size(), b.grads.size());
  for (size_t i = 0; i < a.grads.size(); ++i)
    EXPECT_EQ(std::memcmp(a.grads[i].data(), b.grads[i].data(), a.grads[i].size() * sizeof(float)),
              0)
        << "gradient " << i << " differs between two runs";
}

}  // namespace
}  // namespace mplan::exec::cuda::testing
