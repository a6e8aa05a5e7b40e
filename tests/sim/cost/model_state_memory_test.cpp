// Weights + grads + optimizer bytes against Megatron-LM's accounting (dist_optimizer.md table,
// theoretical_memory_usage.py) and Korthikanti et al. Figure 1.
#include "sim/cost/model_state_memory.hpp"

#include <gtest/gtest.h>

namespace mplan::cost {
namespace {

TrainingConfig precision(Precision p, bool grads_fp32) {
  TrainingConfig t;
  t.precision = p;
  t.grads_in_fp32 = grads_fp32;
  return t;
}

TEST(ModelStateMemory, MegatronBytesPerParameterTable) {
  const TrainingConfig bf16 = precision(Precision::kBf16, true);
  EXPECT_DOUBLE_EQ(bytes_per_parameter(bf16, false, 8), 18.0);
  EXPECT_DOUBLE_EQ(bytes_per_parameter(bf16, true, 8), 6.0 + 12.0 / 8);
  const TrainingConfig fp16 = precision(Precision::kFp16, false);
  EXPECT_DOUBLE_EQ(bytes_per_parameter(fp16, false, 4), 20.0);
  EXPECT_DOUBLE_EQ(bytes_per_parameter(fp16, true, 4), 4.0 + 16.0 / 4);
  const TrainingConfig fp32 = precision(Precision::kFp32, true);
  EXPECT_DOUBLE_EQ(bytes_per_parameter(fp32, false, 2), 16.0);
  EXPECT_DOUBLE_EQ(bytes_per_parameter(fp32, true, 2), 8.0 + 8.0 / 2);
}

TEST(ModelStateMemory, BreakdownOfBf16WithFp32Grads) {
  BytesPerParameter b = bytes_per_parameter(precision(Precision::kBf16, true));
  EXPECT_DOUBLE_EQ(b.weights, 2);
  EXPECT_DOUBLE_EQ(b.grads, 4);
  EXPECT_DOUBLE_EQ(b.optimizer, 12);  // fp32 master + Adam m + v
}

TEST(ModelStateMemory, ReferenceWorkloadAsMegatronCountsIt) {
  // GPT 1.27B (h 2048, 24 layers, vocab 32000, tied), tp = pp = 1. Megatron's
  // compute_weight_and_optimizer_memory: per layer 4h^2 (attention) + 8h^2 (MLP) + 4h (two
  // LayerNorms) = 50339840; 24 layers + final LayerNorm 2h + embedding hV = 1273696256 parameters,
  // 18 bytes each.
  const int64_t params =
      24 * (4 * 2048 * 2048 + 8 * 2048 * 2048 + 4 * 2048) + 2 * 2048 + 2048 * 32000;
  ASSERT_EQ(params, 1273696256);
  const TrainingConfig t = precision(Precision::kBf16, true);
  ModelStateBytes m = model_state_bytes(t, false, params, 4);
  EXPECT_EQ(m.total(), 18 * params);
  EXPECT_EQ(m.weights, 2 * params);
  EXPECT_EQ(m.grads, 4 * params);
  EXPECT_EQ(m.optimizer, 12 * params);
  // Distributed optimizer over dp 4: 6 + 12/4 = 9 bytes per parameter.
  EXPECT_EQ(model_state_bytes(t, true, params, 4).total(), 9 * params);
}

TEST(ModelStateMemory, Figure1ParamsGradsOptimizerFor22B) {
  // Korthikanti et al. Figure 1 (22B, t 8): 45.5625 GiB = 18 bytes × 12 h^2 L / t with h 6144,
  // L 48 (shared/anchors/published_calibration.json, analytic_references).
  const int64_t params = int64_t{12} * 6144 * 6144 * 48 / 8;
  ModelStateBytes m = model_state_bytes(precision(Precision::kBf16, true), false, params, 1);
  EXPECT_EQ(m.total() * 10000 / (int64_t{1} << 30), 455625);
}

TEST(ModelStateMemory, ExpertParametersShardOverExpertDataParallel) {
  // 1000 dense parameters over dp 8, 800 expert parameters over expert dp 2, distributed
  // optimizer: optimizer 12 · 1000 / 8 + 12 · 800 / 2 = 1500 + 4800.
  ModelStateBytes m = model_state_bytes(precision(Precision::kBf16, true), true, 1000, 8, 800, 2);
  EXPECT_EQ(m.weights, 2 * 1800);
  EXPECT_EQ(m.grads, 4 * 1800);
  EXPECT_EQ(m.optimizer, 1500 + 4800);
}

}  // namespace
}  // namespace mplan::cost
