// LrSchedule: Megatron's OptimizerParamScheduler values at chosen iterations, each worked out by
// hand from the formula in lr_schedule.hpp. Common setting: lr 1.0, min_lr 0.1, global batch 2,
// train_iters 110, warmup 10 iterations: warmup_steps = 20 samples, decay_steps = 220 samples.
#include "exec/data/lr_schedule.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "tests/exec/data/data_test_util.hpp"

namespace mplan::exec {
namespace {

using ::testing::StartsWith;

LrSchedule schedule(LrDecayStyle style, double init = 0.0) {
  return LrSchedule::from_iterations(1.0, 0.1, init, style, 110, std::nullopt, 10, std::nullopt, 2);
}

TEST(LrSchedule, LinearWarmup) {
  const LrSchedule s = schedule(LrDecayStyle::kCosine);
  EXPECT_DOUBLE_EQ(s.warmup_steps, 20);
  EXPECT_DOUBLE_EQ(s.decay_steps, 220);
  EXPECT_DOUBLE_EQ(s.lr(0), 0.0);   // n = 0
  EXPECT_DOUBLE_EQ(s.lr(5), 0.5);   // n = 10: 10 / 20
  EXPECT_DOUBLE_EQ(s.lr(10), 1.0);  // n = 20: the last warmup step reaches lr
  // From --lr-warmup-init 0.2: 0.2 + 0.8 · 10 / 20.
  EXPECT_DOUBLE_EQ(schedule(LrDecayStyle::kLinear, 0.2).lr(5), 0.6);
}

TEST(LrSchedule, Linear) {
  const LrSchedule s = schedule(LrDecayStyle::kLinear);
  // n = 70: r = (70 - 20) / 200 = 0.25, lr = 0.1 + 0.9 · 0.75.
  EXPECT_DOUBLE_EQ(s.lr(35), 0.775);
  EXPECT_DOUBLE_EQ(s.lr(60), 0.55);  // r = 0.5
  EXPECT_DOUBLE_EQ(s.lr(110), 0.1);  // r = 1
  EXPECT_DOUBLE_EQ(s.lr(111), 0.1);  // past decay_steps: min_lr
}

TEST(LrSchedule, Cosine) {
  const LrSchedule s = schedule(LrDecayStyle::kCosine);
  // r = 0.25: 0.1 + 0.9 · 0.5 · (cos(pi/4) + 1) = 0.1 + 0.45 · (1 + sqrt(2)/2).
  EXPECT_DOUBLE_EQ(s.lr(35), 0.1 + 0.45 * (1 + std::sqrt(2.0) / 2));
  EXPECT_DOUBLE_EQ(s.lr(60), 0.55);  // r = 0.5: cos(pi/2) = 0
  EXPECT_DOUBLE_EQ(s.lr(110), 0.1);
  EXPECT_DOUBLE_EQ(s.lr(500), 0.1);
}

TEST(LrSchedule, Constant) {
  const LrSchedule s = schedule(LrDecayStyle::kConstant);
  EXPECT_DOUBLE_EQ(s.lr(5), 0.5);  // warmup still applies
  EXPECT_DOUBLE_EQ(s.lr(50), 1.0);
  EXPECT_DOUBLE_EQ(s.lr(500), 1.0);  // constant is checked before the end of the decay
}

TEST(LrSchedule, InverseSquareRoot) {
  const LrSchedule s = schedule(LrDecayStyle::kInverseSquareRoot);
  EXPECT_DOUBLE_EQ(s.lr(45), std::sqrt(20.0) / std::sqrt(90.0));    // n = 90: sqrt(2/9)
  EXPECT_DOUBLE_EQ(s.lr(100), std::sqrt(20.0) / std::sqrt(200.0));  // sqrt(0.1)
  EXPECT_DOUBLE_EQ(s.lr(111), 0.1);                                 // past decay_steps
}

TEST(LrSchedule, WarmupFractionAndDecayIters) {
  // lr_decay_iters 50: decay_steps 100 samples; fraction 0.1 of it: warmup 10 samples.
  const LrSchedule s =
      LrSchedule::from_iterations(1.0, 0.0, 0.0, LrDecayStyle::kLinear, 110, 50, 0, 0.1, 2);
  EXPECT_DOUBLE_EQ(s.warmup_steps, 10);
  EXPECT_DOUBLE_EQ(s.lr(1), 0.2);                 // n = 2: 2 / 10
  EXPECT_DOUBLE_EQ(s.lr(20), 1.0 - 30.0 / 90.0);  // n = 40: r = (40 - 10) / (100 - 10)
  EXPECT_DOUBLE_EQ(s.lr(51), 0.0);                // past lr_decay_iters
}

TEST(LrSchedule, FromTraining) {
  TrainingConfig t;
  t.lr = 1.0;
  t.min_lr = 0.1;
  t.lr_decay_style = LrDecayStyle::kLinear;
  t.lr_warmup_iters = 10;
  t.train_iters = 110;
  EXPECT_DOUBLE_EQ(LrSchedule::from_training(t, 2).lr(35), 0.775);
  t.train_iters = 0;
  EXPECT_DOUBLE_EQ(LrSchedule::from_training(t, 2, 110).lr(35), 0.775);
}

TEST(LrSchedule, MegatronsRules) {
  auto make = [](double lr, double min_lr, int64_t warmup, std::optional<double> fraction) {
    LrSchedule::from_iterations(lr, min_lr, 0, LrDecayStyle::kLinear, 100, std::nullopt, warmup,
                                fraction, 4);
  };
  EXPECT_EQ(test::error_of([&] { make(1e-4, 1e-3, 0, std::nullopt); }),
            "--min-lr: must be <= --lr (0.0001), got 0.001");
  EXPECT_EQ(test::error_of([&] { make(1, 0, 5, 0.1); }),
            "--lr-warmup-fraction: can only specify one of lr-warmup-fraction and lr-warmup-iters");
  EXPECT_THAT(test::error_of([&] { make(1, 0, 100, std::nullopt); }),
              StartsWith("--lr-warmup-iters: warmup (400 samples) must end before the decay does"));
}

}  // namespace
}  // namespace mplan::exec
