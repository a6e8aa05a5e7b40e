// megatron_model_flops() against Megatron's closed form for ffn = 4h multi-head GPTs,
// 72·B·s·L·h²·(1 + s/(12h) + V/(12·L·h)) (the causal core attention counted as half the
// s x s square, as megatron/training/training.py does), evaluated here independently.
#include "exec/runner/model_flops.hpp"

#include <gtest/gtest.h>

#include "src/plan/plan.hpp"

namespace mplan::exec {
namespace {

TEST(ModelFlops, ReferenceWorkloadMatchesTheClosedForm) {
  Plan p = load_plan(std::string(MPLAN_SOURCE_DIR) + "/configs/plans/gpt3-1.3b-dp4.json");
  const double B = 64, s = 2048, L = 24, h = 2048, V = 32000;  // 32000 needs no padding at tp 1
  double want = 72 * B * s * L * h * h * (1 + s / (12 * h) + V / (12 * L * h));
  EXPECT_DOUBLE_EQ(megatron_model_flops(p), want);
  EXPECT_NEAR(megatron_model_flops(p) / 1e12, 1080.68, 0.01);  // TFLOP per iteration
}

TEST(ModelFlops, CountsThePaddedVocabulary) {
  Plan p = load_plan(std::string(MPLAN_SOURCE_DIR) + "/configs/plans/gpt3-1.3b-dp4.json");
  double tp1 = megatron_model_flops(p);
  p.parallel.tp = 4;  // 32000 -> 32256 (multiple of 128·4)
  EXPECT_DOUBLE_EQ(megatron_model_flops(p) - tp1, 6.0 * 64 * 2048 * 2048 * 256);
}

}  // namespace
}  // namespace mplan::exec
