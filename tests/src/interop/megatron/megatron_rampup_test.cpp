// Tests of the ramp-up arithmetic: the legacy calculator's formula, its step-schedule form (the
// GPT-3 175B example's schedule), step-schedule parsing and the way back.
#include "src/interop/megatron/megatron_rampup.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "src/common/error.hpp"

namespace mplan {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

TEST(MegatronRampup, LegacyCalculator) {
  RampupBatchSize r{16, 16, 5859375};
  // 95 increments; 5859375 / 95 = 61677.63 samples each.
  EXPECT_EQ(legacy_rampup_batch(r, 1536, 0), 16);
  EXPECT_EQ(legacy_rampup_batch(r, 1536, 61677), 16);
  EXPECT_EQ(legacy_rampup_batch(r, 1536, 61678), 32);
  EXPECT_EQ(legacy_rampup_batch(r, 1536, 5859374), 1520);
  EXPECT_EQ(legacy_rampup_batch(r, 1536, 5859376), 1536);
  auto steps = rampup_as_steps(r, 1536);
  ASSERT_EQ(steps.size(), 96u);
  EXPECT_EQ(steps[1], (std::pair<int64_t, int64_t>{61678, 32}));
  EXPECT_EQ(steps.back().second, 1536);
}

TEST(MegatronRampup, MatchesTheGpt3ExampleStepSchedule) {
  // examples/gpt3/train_gpt3_175b_distributed.sh: "0:16 2.4B:320 4.8B:624 7.2B:928 9.6B:1232
  // 12B:1536" in tokens of 2048 = samples 0, 1171875, ..., 5859375: a ramp 16 + 304 per step.
  auto steps = rampup_as_steps(RampupBatchSize{16, 304, 5859375}, 1536);
  EXPECT_THAT(steps, ElementsAre(std::pair<int64_t, int64_t>{0, 16},
                                 std::pair<int64_t, int64_t>{1171875, 320},
                                 std::pair<int64_t, int64_t>{2343750, 624},
                                 std::pair<int64_t, int64_t>{3515625, 928},
                                 std::pair<int64_t, int64_t>{4687500, 1232},
                                 std::pair<int64_t, int64_t>{5859375, 1536}));
}

TEST(MegatronRampup, StepScheduleInTokensWithSuffixes) {
  // Thresholds in tokens, divided by the sequence length (floor); commas count as spaces.
  auto steps = parse_step_schedule("0:16, 2.4B:320 4.8B:624", 2048);
  EXPECT_THAT(steps, ElementsAre(std::pair<int64_t, int64_t>{0, 16},
                                 std::pair<int64_t, int64_t>{1171875, 320},
                                 std::pair<int64_t, int64_t>{2343750, 624}));
  EXPECT_EQ(parse_suffixed("2.4b"), 2400000000);
  EXPECT_EQ(parse_suffixed("12K"), 12000);
  EXPECT_EQ(parse_suffixed("x"), std::nullopt);
}

TEST(MegatronRampup, MalformedStepSchedulesNameTheArgument) {
  auto fails = [](const std::string& text, const std::string& message) {
    EXPECT_THAT([&] { parse_step_schedule(text, 1); }, ThrowsMessage<Error>(HasSubstr(message)))
        << text;
  };
  fails("", "--step-batch-size-schedule: empty schedule");
  fails("16", "entry '16' is not THRESHOLD:BATCH_SIZE");
  fails("10:16", "the first entry must have threshold 0");
  fails("0:16 5:32 5:64", "thresholds must increase");
}

TEST(MegatronRampup, StepsBackToARampupOnlyWhenExact) {
  RampupBatchSize r{16, 16, 5859375};
  EXPECT_EQ(steps_as_rampup(rampup_as_steps(r, 1536)), r);
  EXPECT_EQ(steps_as_rampup({{0, 16}, {100, 48}, {150, 64}}), std::nullopt);  // uneven steps
  EXPECT_EQ(steps_as_rampup({{0, 16}}), std::nullopt);
}

}  // namespace
}  // namespace mplan
