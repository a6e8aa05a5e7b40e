// Tests of the "training" section: Megatron-like defaults, the ramp-up triple, ranges, and
// errors naming the field.
#include "src/plan/training_config.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "src/common/error.hpp"

namespace mplan {
namespace {

using ::testing::StartsWith;

std::string error_of(const std::string& text) {
  try {
    training_from_json(parse_json(text, "t"), "training");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(TrainingConfig, Defaults) {
  TrainingConfig t = training_from_json(parse_json("{}", "t"), "training");
  EXPECT_EQ(t.precision, Precision::kBf16);
  EXPECT_TRUE(t.grads_in_fp32);
  EXPECT_EQ(t.attention_backend, AttentionBackend::kFlash);
  EXPECT_EQ(t.adam_beta1, 0.9);
  EXPECT_EQ(t.adam_beta2, 0.95);
  EXPECT_EQ(t.train_iters, 0);
  EXPECT_FALSE(t.rampup_batch_size.has_value());
  EXPECT_EQ(bytes_per_element(Precision::kBf16), 2);
  EXPECT_EQ(bytes_per_element(Precision::kFp16), 2);
  EXPECT_EQ(bytes_per_element(Precision::kFp32), 4);
}

TEST(TrainingConfig, NumbersOutsideTheirRangeNameTheField) {
  EXPECT_EQ(error_of(R"({"lr": 1e9})"), "training.lr: must be <= 10, got 1e+09");
  EXPECT_EQ(error_of(R"({"train_iters": 10000000000})"),
            "training.train_iters: must be <= 1000000000, got 10000000000");
  EXPECT_EQ(error_of(R"({"rampup_batch_size": [1, 1, 1099511627777]})"),
            "training.rampup_batch_size[2]: must be <= 1099511627776, got 1099511627777");
  EXPECT_EQ(error_of(R"({"rampup_batch_size": [100000000, 1, 1]})"),
            "training.rampup_batch_size[0]: must be <= 16777216, got 100000000");
  EXPECT_EQ(error_of(R"({"lr": 1e999})"), "t: lr: number out of range (1e999)");
}

TEST(TrainingConfig, Rampup) {
  TrainingConfig t =
      training_from_json(parse_json(R"({"rampup_batch_size": [16, 8, 300000]})", "t"), "training");
  ASSERT_TRUE(t.rampup_batch_size.has_value());
  EXPECT_EQ(*t.rampup_batch_size, (RampupBatchSize{16, 8, 300000}));
  const std::string shape =
      "training.rampup_batch_size: must be [start, increment, ramp_samples] (three integers)";
  EXPECT_THAT(error_of(R"({"rampup_batch_size": [16, 8]})"), StartsWith(shape));
  EXPECT_THAT(error_of(R"({"rampup_batch_size": 16})"), StartsWith(shape));
  EXPECT_THAT(error_of(R"({"rampup_batch_size": [16, 8.5, 10]})"), StartsWith(shape));
  EXPECT_THAT(error_of(R"({"rampup_batch_size": [0, 8, 10]})"),
              StartsWith("training.rampup_batch_size: start and increment must be >= 1"));
  EXPECT_THAT(error_of(R"({"rampup_batch_size": [16, 8, -1]})"),
              StartsWith("training.rampup_batch_size: start and increment must be >= 1 and "
                         "ramp_samples >= 0"));
}

TEST(TrainingConfig, ErrorsNameTheField) {
  EXPECT_EQ(error_of(R"({"precision": "fp8"})"),
            "training.precision: must be one of bf16, fp16, fp32; got \"fp8\"");
  EXPECT_EQ(error_of(R"({"adam_beta1": 1.0})"), "training.adam_beta1: must be < 1, got 1");
  EXPECT_EQ(error_of(R"({"lr": -1})"), "training.lr: must be >= 0, got -1");
  EXPECT_EQ(error_of(R"({"seed": 1.5})"), "training.seed: must be an integer, got 1.5");
  EXPECT_THAT(error_of(R"({"optimizer": "adam"})"), StartsWith("training.optimizer: unknown key"));
  EXPECT_EQ(error_of(R"({"attention_backend": "local"})"),
            "training.attention_backend: must be one of flash, unfused; got \"local\"");
}

TEST(TrainingConfig, JsonRoundTrip) {
  TrainingConfig t;
  t.precision = Precision::kFp32;
  t.attention_backend = AttentionBackend::kUnfused;
  t.train_iters = 10;
  t.rampup_batch_size = RampupBatchSize{4, 4, 40};
  EXPECT_EQ(training_from_json(training_to_json(t), "training"), t);
  EXPECT_EQ(training_from_json(training_to_json(TrainingConfig{}), "training"), TrainingConfig{});
}

}  // namespace
}  // namespace mplan
