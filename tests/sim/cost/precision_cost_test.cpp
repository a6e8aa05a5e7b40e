// Tests of the fp8 / fp4 costs: a GEMM at each precision's peak with the same efficiency curve
// (hand-worked times on the round GPU), the bytes of the quantization kernels per recipe, the
// weight copies and the all-gather bytes, and the errors of a profile without the rates.
#include "sim/cost/precision_cost.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "sim/cost/gemm_cost.hpp"
#include "src/common/error.hpp"
#include "tests/sim/cost/test_gpus.hpp"

namespace mplan::cost {
namespace {

using ::testing::StartsWith;

TrainingConfig fp8(Fp8Recipe r, bool param_gather = false) {
  TrainingConfig t;
  t.fp8_format = Fp8Format::kHybrid;
  t.fp8_recipe = r;
  t.fp8_param_gather = param_gather;
  return t;
}

TEST(PrecisionCost, GemmAtThePrecisionsPeak) {
  GpuSpec g = testing::round_gpu();
  g.peak_fp8_tflops = 2000;
  g.peak_fp4_tflops = 4000;
  EXPECT_EQ(gemm_peak_tflops(g, GemmPrecision::kBf16), 1000);
  EXPECT_EQ(gemm_peak_tflops(g, GemmPrecision::kFp8), 2000);
  EXPECT_EQ(gemm_peak_tflops(g, GemmPrecision::kFp4), 4000);
  // 8192 x 8192 x 8192 = 2^40 FLOPs: efficiency 0.7; bf16 2^40 / (1e15 · 0.7) s = 1570.7 us, fp8
  // half, fp4 a quarter (1-byte operands: 3 · 2^26 bytes at 4 TB/s = 50 us, far below).
  const GemmShape big{8192, 8192, 8192, 1, 1};
  const double flops = std::ldexp(1.0, 40);
  EXPECT_NEAR(static_cast<double>(gemm_time_ns(g, {8192, 8192, 8192, 1, 2})),
              flops / (1e15 * 0.7) * 1e9, 1);
  EXPECT_NEAR(static_cast<double>(gemm_time_ns(gemm_gpu(g, GemmPrecision::kFp8), big)),
              flops / (2e15 * 0.7) * 1e9, 1);
  EXPECT_NEAR(static_cast<double>(gemm_time_ns(gemm_gpu(g, GemmPrecision::kFp4), big)),
              flops / (4e15 * 0.7) * 1e9, 1);
  EXPECT_EQ(gemm_gpu(g, GemmPrecision::kBf16), g);
}

TEST(PrecisionCost, MissingRatesNameTheProfileField) {
  GpuSpec g = testing::round_gpu();
  try {
    gemm_peak_tflops(g, GemmPrecision::kFp8);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), StartsWith("cluster.gpu.peak_fp8_tflops: missing in profile 'round'"));
  }
  try {
    gemm_gpu(g, GemmPrecision::kFp4);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), StartsWith("cluster.gpu.peak_fp4_tflops: missing"));
  }
}

TEST(PrecisionCost, QuantizationKernelBytes) {
  // Per 16-bit element: read 2 bytes (twice for tensorwise current scaling: amax, then cast) and
  // write two quantized copies.
  EXPECT_EQ(quantize_bytes(TrainingConfig{}, 1000), 0);
  EXPECT_EQ(quantize_bytes(fp8(Fp8Recipe::kDelayed), 1000), 1000 * (2 + 2 * 1.0));
  EXPECT_EQ(quantize_bytes(fp8(Fp8Recipe::kTensorwise), 1000), 1000 * (4 + 2 * 1.0));
  EXPECT_EQ(quantize_bytes(fp8(Fp8Recipe::kMxfp8), 1000), 1000 * (2 + 2 * 1.03125));
  EXPECT_EQ(quantize_bytes(fp8(Fp8Recipe::kBlockwise), 1000), 1000 * (2 + 2 * 1.03125));
  TrainingConfig f;
  f.fp4_format = Fp4Format::kE2m1;
  EXPECT_EQ(quantize_bytes(f, 1000), 1000 * (2 + 2 * 0.5625));
  EXPECT_EQ(weight_quantize_bytes_per_param(fp8(Fp8Recipe::kDelayed)), 4);
  EXPECT_EQ(weight_quantize_bytes_per_param(TrainingConfig{}), 0);
}

TEST(PrecisionCost, WeightCopiesAndGatherBytes) {
  // Without param gather: the 16-bit weight plus two 1-byte copies (+2 bytes per GEMM weight);
  // with it the row-wise copy replaces the 16-bit weight (2 · 1 - 2 = 0).
  EXPECT_EQ(low_precision_weight_extra_bytes(TrainingConfig{}), 0);
  EXPECT_EQ(low_precision_weight_extra_bytes(fp8(Fp8Recipe::kDelayed)), 2);
  EXPECT_EQ(low_precision_weight_extra_bytes(fp8(Fp8Recipe::kDelayed, true)), 0);
  EXPECT_EQ(low_precision_weight_extra_bytes(fp8(Fp8Recipe::kMxfp8, true)), 0.0625);
  EXPECT_EQ(gemm_weight_gather_bytes(TrainingConfig{}), 2);
  EXPECT_EQ(gemm_weight_gather_bytes(fp8(Fp8Recipe::kDelayed)), 2);
  EXPECT_EQ(gemm_weight_gather_bytes(fp8(Fp8Recipe::kTensorwise, true)), 1);
  EXPECT_EQ(gemm_weight_gather_bytes(fp8(Fp8Recipe::kMxfp8, true)), 1.03125);
}

}  // namespace
}  // namespace mplan::cost
