// LtGemm through CudaBackend::gemm against the CPU backend: every transpose combination, bf16
// and f32 outputs, beta = 1 accumulation into f32 (weight gradients), alpha, odd sizes, the f32
// activation path, the bias / bias+GeLU / GeLU-backward epilogues both fused (cuBLASLt) and
// unfused, the tuned algorithm choice (MPLAN_GEMM_TUNE) and its file (MPLAN_GEMM_ALGOS).
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "exec/cuda/gemm_lt.hpp"
#include "exec/cuda/kernels.hpp"
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

// MPLAN_GEMM_TUNE's path: the candidates are timed on a scratch copy of C, which must not change
// the call's result (beta 0: C and aux written afresh; beta 1: C read as it was).
TEST_F(GemmLtTest, TunedAlgorithmsGiveTheSameResults) {
  LtGemm::forget_choices();
  gpu().set_tune_gemms(true);
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      check().gemm(ta, tb, 256, 192, 320, DType::kBF16, DType::kBF16, 1, 0);
  check().gemm(true, false, 256, 128, 512, DType::kBF16, DType::kF32, 1, 1);
  check().gemm_epilogue(Epilogue::kBiasGelu, 256, 192, 128, true);
  check().gemm_dgelu(256, 192, 128, DType::kBF16, true);
  expect_all_pass();
  // Tuning did run, the accumulating dW GEMM (beta 1) included.
  EXPECT_GE(gpu().timed_gemm_plans(), 5u);
  LtGemm::forget_choices();
}

// MPLAN_GEMM_ALGOS: a tuning backend writes its choices to the file; after the process forgets
// them, a backend that only reads the file makes the same choices: the same bits, untimed.
TEST_F(GemmLtTest, AlgorithmFileGivesTheSameChoicesUntimed) {
  const std::string path = ::testing::TempDir() + "mplan_gemm_algos_test.json";
  std::remove(path.c_str());
  LtGemm::forget_choices();
  const int64_t m = 512, n = 384, k = 256;
  auto product = [&](CudaBackend& g, bool accumulate) {
    const DType ct = accumulate ? DType::kF32 : DType::kBF16;
    Tensor a = g.alloc(DType::kBF16, {m, k}, "test"), b = g.alloc(DType::kBF16, {n, k}, "test");
    Tensor c = g.alloc(ct, {m, n}, "test");
    launch_fill_uniform(a.data, a.dtype, a.numel(), 1, -1, 1, nullptr);
    launch_fill_uniform(b.data, b.dtype, b.numel(), 2, -1, 1, nullptr);
    launch_fill_uniform(c.data, c.dtype, c.numel(), 3, -1, 1, nullptr);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);  // (the fills ran on the default stream)
    const GemmArgs args{.trans_b = true, .m = m, .n = n, .k = k, .beta = accumulate ? 1.0f : 0.0f};
    g.gemm(args, a, b, c);
    std::vector<uint8_t> host(c.bytes());
    g.download(host.data(), c);
    for (Tensor* x : {&a, &b, &c}) g.release(*x);
    return host;
  };
  std::vector<uint8_t> tuned[2], read[2];
  {
    CudaBackend g(0);
    g.set_tune_gemms(true);
    g.set_gemm_algos_file(path);
    for (int acc = 0; acc < 2; ++acc) tuned[acc] = product(g, acc == 1);
    EXPECT_EQ(g.timed_gemm_plans(), 2u);
  }
  std::ifstream in(path);
  ASSERT_TRUE(in.good()) << path << " not written";
  const nlohmann::json j = nlohmann::json::parse(in);
  EXPECT_EQ(j.value("format", ""), "mplan gemm algorithms 1");
  ASSERT_EQ(j["gemms"].size(), 2u);
  EXPECT_EQ(j["gemms"][0]["algo"].size(), 8u);
  LtGemm::forget_choices();
  {
    CudaBackend g(0);
    g.set_gemm_algos_file(path);
    for (int acc = 0; acc < 2; ++acc) read[acc] = product(g, acc == 1);
    EXPECT_EQ(g.timed_gemm_plans(), 0u);
    EXPECT_EQ(g.chosen_gemm_plans(), 2u);
  }
  for (int acc = 0; acc < 2; ++acc) EXPECT_TRUE(tuned[acc] == read[acc]) << "accumulate " << acc;
  LtGemm::forget_choices();
  std::remove(path.c_str());
}

// A file written for another device (or cuBLASLt) is ignored; one that is not such a file stops.
TEST_F(GemmLtTest, AlgorithmFileOfAnotherDeviceIsIgnoredAndAMalformedOneRefused) {
  const std::string path = ::testing::TempDir() + "mplan_gemm_algos_other.json";
  std::remove(path.c_str());
  LtGemm::forget_choices();
  {
    CudaBackend g(0);
    OpChecker c(g, cpu_, 7);
    g.set_tune_gemms(true);
    g.set_gemm_algos_file(path);
    c.gemm(false, true, 64, 48, 32, DType::kBF16, DType::kBF16, 1, 0);
    EXPECT_EQ(g.timed_gemm_plans(), 1u);
  }
  nlohmann::json j;
  {
    std::ifstream in(path);
    j = nlohmann::json::parse(in);
  }
  j["device"] = "another GPU";
  std::ofstream(path) << j.dump();
  LtGemm::forget_choices();
  {
    CudaBackend g(0);
    OpChecker c(g, cpu_, 7);
    g.set_gemm_algos_file(path);  // warns, reads nothing
    c.gemm(false, true, 64, 48, 32, DType::kBF16, DType::kBF16, 1, 0);
    for (const CheckResult& r : c.results()) EXPECT_TRUE(r.pass) << r.describe();
    EXPECT_EQ(g.chosen_gemm_plans(), 0u);
  }
  LtGemm::forget_choices();
  std::ofstream(path) << R"({"format": "something else", "gemms": []})";
  {
    CudaBackend g(0);
    EXPECT_ANY_THROW(g.set_gemm_algos_file(path));
  }
  LtGemm::forget_choices();
  std::remove(path.c_str());
}

TEST_F(GemmLtTest, LargeReductionDimension) {
  // k = 4096 as in a weight gradient over many tokens.
  check().gemm(true, false, 32, 48, 4096, DType::kBF16, DType::kF32, 1, 1);
  expect_all_pass();
}

}  // namespace
}  // namespace mplan::exec::cuda::testing
