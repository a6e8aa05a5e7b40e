// LtGemm through CudaBackend::gemm against the CPU backend: every transpose combination, bf16
// and f32 outputs, beta = 1 accumulation into f32 (weight gradients), alpha, odd sizes, the f32
// activation path, the bias / bias+GeLU / GeLU-backward epilogues both fused (cuBLASLt) and
// unfused, and the tuned algorithm choice (MPLAN_GEMM_TUNE).
#include "tests/exec/cuda/gpu_test_support.hpp"

namespace mplan::exec::cuda::testing {
namespace {

using GemmLtTest = GpuOpTest;

TEST_F(GemmLtTest, AllTransposesBf16Output) {
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      check().gemm(ta, tb, 96, 80, 72, DType::kBF16, DType::kBF16, 1, 0);
  expect_all_pass();
}

TEST_F(GemmLtTest, AccumulatesIntoF32WithBetaOne) {
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      check().gemm(ta, tb, 64, 48, 128, DType::kBF16, DType::kF32, 1, 1);
  expect_all_pass();
}

TEST_F(GemmLtTest, OddSizesAndAlpha) {
  check().gemm(false, true, 33, 17, 9, DType::kBF16, DType::kBF16, 0.5f, 0);
  check().gemm(true, false, 7, 130, 3, DType::kBF16, DType::kF32, 2.0f, 1);
  check().gemm(false, false, 1, 1, 1, DType::kBF16, DType::kBF16, 1, 0);
  expect_all_pass();
}

TEST_F(GemmLtTest, F32Activations) {
  check().gemm(false, false, 40, 24, 56, DType::kF32, DType::kF32, 1, 0);
  check().gemm(true, true, 40, 24, 56, DType::kF32, DType::kF32, 1, 1);
  expect_all_pass();
}

TEST_F(GemmLtTest, BiasAndGeluEpiloguesFusedAndUnfused) {
  for (bool fused : {true, false}) {
    check().gemm_epilogue(Epilogue::kBias, 64, 96, 48, fused);
    check().gemm_epilogue(Epilogue::kBiasGelu, 64, 96, 48, fused);
    check().gemm_epilogue(Epilogue::kBiasGelu, 40, 200, 72, fused);
  }
  expect_all_pass();
}

TEST_F(GemmLtTest, GeluBackwardEpilogueFusedAndUnfused) {
  for (bool fused : {true, false}) {
    check().gemm_dgelu(64, 96, 48, DType::kBF16, fused);
    check().gemm_dgelu(300, 200, 72, DType::kBF16, fused);
    check().gemm_dgelu(33, 50, 24, DType::kBF16, fused);  // n % 8 != 0: the unfused path
    check().gemm_dgelu(40, 24, 56, DType::kF32, fused);
  }
  expect_all_pass();
}

// MPLAN_GEMM_TUNE's path: the candidates are timed on the call's own operands, which must not
// change its result (beta 0: C and aux written afresh after the trials); a call that accumulates
// (beta 1) keeps the heuristic's first algorithm.
TEST_F(GemmLtTest, TunedAlgorithmsGiveTheSameResults) {
  gpu().set_tune_gemms(true);
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      check().gemm(ta, tb, 256, 192, 320, DType::kBF16, DType::kBF16, 1, 0);
  check().gemm(true, false, 256, 128, 512, DType::kBF16, DType::kF32, 1, 1);
  check().gemm_epilogue(Epilogue::kBiasGelu, 256, 192, 128, true);
  check().gemm_dgelu(256, 192, 128, DType::kBF16, true);
  expect_all_pass();
  // Tuning did run: the plans that overwrite C (beta 0) and have several candidates were timed
  // (the accumulating dW GEMM is settled untuned).
  EXPECT_GE(gpu().timed_gemm_plans(), 1u);
}

TEST_F(GemmLtTest, LargeReductionDimension) {
  // k = 4096 as in a weight gradient over many tokens.
  check().gemm(true, false, 32, 48, 4096, DType::kBF16, DType::kF32, 1, 1);
  expect_all_pass();
}

}  // namespace
}  // namespace mplan::exec::cuda::testing
