// Tests of LowPrecision: which layers run in fp8 / fp4 (Megatron's is_first_last_bf16_layer,
// hand-worked for 8 layers) and the bytes per quantized element of each recipe.
#include "src/plan/low_precision.hpp"

#include <gtest/gtest.h>

namespace mplan {
namespace {

TEST(LowPrecision, LayersKeptInBf16AtEitherEnd) {
  TrainingConfig t;
  EXPECT_FALSE(low_precision(t));
  for (int64_t l = 0; l < 8; ++l) EXPECT_FALSE(layer_in_low_precision(t, 8, l)) << l;
  t.fp8_format = Fp8Format::kHybrid;
  t.fp8_recipe = Fp8Recipe::kTensorwise;
  for (int64_t l = 0; l < 8; ++l) EXPECT_TRUE(layer_in_low_precision(t, 8, l)) << l;
  // 2 at the start, 1 at the end: layers 0, 1 and 7 in bf16; 2 ... 6 in fp8.
  t.first_last_layers_bf16 = true;
  t.num_layers_at_start_in_bf16 = 2;
  t.num_layers_at_end_in_bf16 = 1;
  int64_t lp = 0;
  for (int64_t l = 0; l < 8; ++l) lp += layer_in_low_precision(t, 8, l) ? 1 : 0;
  EXPECT_EQ(lp, 5);
  EXPECT_FALSE(layer_in_low_precision(t, 8, 1));
  EXPECT_TRUE(layer_in_low_precision(t, 8, 2));
  EXPECT_TRUE(layer_in_low_precision(t, 8, 6));
  EXPECT_FALSE(layer_in_low_precision(t, 8, 7));
}

TEST(LowPrecision, QuantizedBytesPerElementWithScales) {
  TrainingConfig t;
  EXPECT_EQ(gemm_precision(t), GemmPrecision::kBf16);
  EXPECT_EQ(quantized_bytes_per_element(t), 2.0);
  t.fp8_format = Fp8Format::kE4m3;
  for (auto [r, bytes, passes] :
       {std::tuple{Fp8Recipe::kDelayed, 1.0, 1}, std::tuple{Fp8Recipe::kTensorwise, 1.0, 2},
        std::tuple{Fp8Recipe::kBlockwise, 1.03125, 1},  // 1 + 4/128
        std::tuple{Fp8Recipe::kMxfp8, 1.03125, 1}}) {   // 1 + 1/32
    t.fp8_recipe = r;
    EXPECT_EQ(gemm_precision(t), GemmPrecision::kFp8);
    EXPECT_EQ(quantized_bytes_per_element(t), bytes) << to_string(r);
    EXPECT_EQ(quantize_read_passes(t), passes) << to_string(r);
  }
  TrainingConfig f;
  f.fp4_format = Fp4Format::kE2m1;
  EXPECT_EQ(gemm_precision(f), GemmPrecision::kFp4);
  EXPECT_EQ(quantized_bytes_per_element(f), 0.5625);  // 0.5 + 1/16
  EXPECT_EQ(quantize_read_passes(f), 1);
}

}  // namespace
}  // namespace mplan
