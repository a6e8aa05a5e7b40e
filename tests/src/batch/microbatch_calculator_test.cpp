// Tests of MicrobatchCalculator: the cases of Megatron-LM's
// tests/unit_tests/test_num_microbatches_calculator.py (constant and ramp-up calculators), its
// constructor asserts and messages, and the double-division rounding of the ramp-up.
#include "src/batch/microbatch_calculator.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "src/common/error.hpp"

namespace mplan {
namespace {

using ::testing::HasSubstr;

MicrobatchSpec constant(int64_t g, int64_t m, int64_t d, bool decrease = false) {
  return {g, m, d, std::nullopt, decrease};
}
MicrobatchSpec ramp(int64_t g, int64_t m, int64_t d, int64_t start, int64_t incr, int64_t samples,
                    bool decrease = false) {
  return {g, m, d, RampupBatchSize{start, incr, samples}, decrease};
}

std::string error_of(const MicrobatchSpec& s) {
  try {
    MicrobatchCalculator c(s);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// --- Megatron's test_init_num_microbatches_calculator / test_get_* / TestConstant... --------

TEST(MicrobatchCalculator, MegatronConstant32x8x2) {
  MicrobatchCalculator c(constant(32, 8, 2));
  BatchState s = c.at(0);
  EXPECT_EQ(s.num_microbatches, 2);
  EXPECT_EQ(s.global_batch_size, 32);
  EXPECT_EQ(s.running_global_batch_size, 32);
  EXPECT_EQ(c.spec().micro_batch_size, 8);
  EXPECT_FALSE(c.has_rampup());
  // Megatron's update_num_microbatches(16) on a constant calculator changes nothing.
  EXPECT_EQ(c.at(16).num_microbatches, 2);
}

TEST(MicrobatchCalculator, MegatronConstantDecreaseBatchSize) {
  // init(global 32, micro 8, dp 3, decrease): 1 micro-batch, running global batch 24.
  BatchState a = MicrobatchCalculator(constant(32, 8, 3, true)).at(0);
  EXPECT_EQ(a.num_microbatches, 1);
  EXPECT_EQ(a.global_batch_size, 32);
  EXPECT_EQ(a.running_global_batch_size, 24);
  // init(33, 8, 2, decrease): 2 micro-batches, running 32.
  BatchState b = MicrobatchCalculator(constant(33, 8, 2, true)).at(0);
  EXPECT_EQ(b.num_microbatches, 2);
  EXPECT_EQ(b.global_batch_size, 33);
  EXPECT_EQ(b.running_global_batch_size, 32);
  // reconfigure(16, 4, 3, decrease): 1 micro-batch, running 12.
  BatchState d = MicrobatchCalculator(constant(16, 4, 3, true)).at(0);
  EXPECT_EQ(d.num_microbatches, 1);
  EXPECT_EQ(d.global_batch_size, 16);
  EXPECT_EQ(d.running_global_batch_size, 12);
}

TEST(MicrobatchCalculator, MegatronReconfigureCases) {
  EXPECT_EQ(MicrobatchCalculator(constant(16, 8, 2)).at(0).num_microbatches, 1);
  EXPECT_EQ(MicrobatchCalculator(constant(16, 4, 2)).at(0).global_batch_size, 16);
  EXPECT_EQ(num_microbatches(64, 4, 4), 4);  // the reference workload: 64 / (4 x 4)
}

TEST(MicrobatchCalculator, ConstantNotDivisibleUsesMegatronsMessage) {
  EXPECT_EQ(error_of(constant(33, 8, 2)),
            "parallel.global_batch_size: global batch size (33) is not divisible by micro batch "
            "size (8) times data parallel size (2)");
  try {
    num_microbatches(10, 4, 1,
                     BatchFieldNames{"--global-batch", "--micro-batch", "--dp", "--rampup",
                                     "--consumed-samples"});
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "--global-batch: global batch size (10) is not divisible by micro batch size (4) "
                 "times data parallel size (1)");
  }
}

TEST(MicrobatchCalculator, ConstantDecreaseBelowOneMicrobatchIsRefused) {
  // Megatron: assert num_micro_batches >= 1, 'number of microbatches should be at least 1'.
  EXPECT_THAT(error_of(constant(7, 4, 2, true)),
              HasSubstr("number of microbatches should be at least 1, got 0."));
}

TEST(MicrobatchCalculator, NonPositiveSizesAreRefused) {
  EXPECT_THAT(error_of(constant(32, 0, 2)),
              HasSubstr("parallel.micro_batch_size: micro batch size must be > 0, got 0"));
  EXPECT_THAT(error_of(constant(32, 8, 0)), HasSubstr("parallel.dp: data parallel size"));
  EXPECT_THAT(error_of(constant(0, 8, 2)),
              HasSubstr("parallel.global_batch_size: global batch size must be > 0"));
}

// --- Ramp-up: Megatron's TestRampupBatchsizeNumMicroBatchesCalculator and test_ramp_up -------

TEST(MicrobatchCalculator, MegatronRampupConstructor) {
  // RampupBatchsizeNumMicroBatchesCalculator(32, 8, 2, False, 0, 16, 16, 48).
  MicrobatchCalculator c(ramp(32, 8, 2, 16, 16, 48));
  EXPECT_TRUE(c.has_rampup());
  EXPECT_EQ(c.micro_times_dp(), 16);
  BatchState s = c.at(0, false);
  EXPECT_EQ(s.num_microbatches, 1);
  EXPECT_EQ(s.global_batch_size, 16);
}

TEST(MicrobatchCalculator, MegatronUpdateNumMicrobatches) {
  // reconfigure(rampup [16, 8, 96], 32, 4, 2): 2 micro-batches at 0; update(48) -> 3:
  // 2 increments, 48 samples each; int(48 / 48.0) = 1 -> 16 + 8 = 24 = 3 x (4 x 2).
  MicrobatchCalculator c(ramp(32, 4, 2, 16, 8, 96));
  EXPECT_EQ(c.at(0).num_microbatches, 2);
  EXPECT_EQ(c.at(48, false).num_microbatches, 3);
  // reconfigure([16, 8, 96], 32, 8, 2); update(49, True) raises: 24 % 16 != 0.
  MicrobatchCalculator d(ramp(32, 8, 2, 16, 8, 96));
  try {
    d.at(49, true);
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "training.rampup_batch_size: current global batch size (24) is not divisible by "
                 "micro-batch-size (8) times data parallel size (2) at 49 consumed samples");
  }
  // Without the consistency check Megatron carries on: 24 / 16 = 1 micro-batch.
  EXPECT_EQ(d.at(49, false).num_microbatches, 1);
}

TEST(MicrobatchCalculator, MegatronBuildRampup) {
  // _build_num_microbatches_calculator(0, [16, 16, 48], 32, 8, 2, False): get() == 1, gbs 16.
  MicrobatchCalculator c(ramp(32, 8, 2, 16, 16, 48));
  EXPECT_EQ(c.at(0).num_microbatches, 1);
  EXPECT_EQ(c.at(0).global_batch_size, 16);
}

TEST(MicrobatchCalculator, MegatronTestRampUpSequence) {
  // test_ramp_up: [16, 16, 96], 32, 8, 2; consuming the current global batch each iteration the
  // consumed-sample counts are 0, 16, 32, 48, 64, 80, 96, 128, 160, 192, 224, 256, and the
  // consistency check passes at each.
  MicrobatchCalculator c(ramp(32, 8, 2, 16, 16, 96));
  const std::vector<int64_t> expected = {0, 16, 32, 48, 64, 80, 96, 128, 160, 192, 224, 256};
  int64_t consumed = 0;
  size_t count = 0;
  while (consumed < 256) {
    consumed += c.at(consumed, true).global_batch_size;
    ++count;
    ASSERT_LT(count, expected.size());
    EXPECT_EQ(consumed, expected[count]);
  }
  // The same run as steps: 6 iterations of 16, then 32 from iteration 6 at 96 samples.
  std::vector<RampStep> steps = c.ramp_steps();
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_EQ(steps[0], (RampStep{0, 6, {0, 16, 16, 1}}));
  EXPECT_EQ(steps[1], (RampStep{6, 0, {96, 32, 32, 2}}));
  EXPECT_FALSE(c.first_inconsistent_step().has_value());
}

TEST(MicrobatchCalculator, RampupFinalSizeOnlyPastTheRampSamples) {
  // Megatron: `if consumed_samples > ramup_samples` -> final; at exactly ramp samples the step
  // formula applies. [8, 8, 64] to 32: 3 increments of 64/3 = 21.33 samples.
  MicrobatchCalculator c(ramp(32, 8, 1, 8, 8, 64));
  EXPECT_EQ(c.at(0).global_batch_size, 8);
  EXPECT_EQ(c.at(21).global_batch_size, 8);   // int(21 / 21.33) = 0
  EXPECT_EQ(c.at(22).global_batch_size, 16);  // int(22 / 21.33) = 1
  EXPECT_EQ(c.at(43).global_batch_size, 24);  // int(43 / 21.33) = 2
  EXPECT_EQ(c.at(64).global_batch_size, 32);  // int(64 / 21.33) = 3 (64 / (64/3) == 3.0)
  EXPECT_EQ(c.at(65).global_batch_size, 32);
  EXPECT_EQ(c.next_change(0), 22);
  EXPECT_EQ(c.next_change(22), 43);
  EXPECT_EQ(c.next_change(43), 64);
  EXPECT_FALSE(c.next_change(64).has_value());
}

TEST(MicrobatchCalculator, RampupRoundsLikePythonDoubleDivision) {
  // 14 increments over 18 samples: Python's int(9 / (18 / 14)) is 6, although 9 x 14 / 18 is
  // exactly 7: the double quotient 18/14 rounds up, so 9 / it falls just below 7.
  MicrobatchCalculator c(ramp(30, 2, 1, 2, 2, 18));
  EXPECT_EQ(c.at(9).global_batch_size, 2 + 6 * 2);
  EXPECT_EQ(c.at(10).global_batch_size, 2 + 7 * 2);  // int(10 / 1.2857) = 7
  // 7 increments over 9 samples: at exactly 9 consumed samples int(9 / (9/7)) is 6, not 7, so
  // the last increment only arrives past the ramp.
  MicrobatchCalculator d(ramp(8, 1, 1, 1, 1, 9));
  EXPECT_EQ(d.at(9).global_batch_size, 7);
  EXPECT_EQ(d.at(10).global_batch_size, 8);
}

TEST(MicrobatchCalculator, RampStepsSkipIncrementsABatchJumpsOver) {
  // [8, 8, 10] to 64: 7 increments of 10/7 samples. A run consumes 8 at 0, then at 8 the step
  // is int(8 / 1.4286) = 5 -> 48; at 56 > 10 it is 64. Increments 16..40 are never used.
  MicrobatchCalculator c(ramp(64, 8, 1, 8, 8, 10));
  std::vector<RampStep> steps = c.ramp_steps();
  ASSERT_EQ(steps.size(), 3u);
  EXPECT_EQ(steps[0], (RampStep{0, 1, {0, 8, 8, 1}}));
  EXPECT_EQ(steps[1], (RampStep{1, 1, {8, 48, 48, 6}}));
  EXPECT_EQ(steps[2], (RampStep{2, 0, {56, 64, 64, 8}}));
}

TEST(MicrobatchCalculator, FirstInconsistentStepIsTheOneARunReaches) {
  // [16, 8, 96] to 32 with micro 8 x dp 2: 16 at 0..47 (3 iterations), then 24 at 48: the
  // first batch not divisible by 16.
  MicrobatchCalculator c(ramp(32, 8, 2, 16, 8, 96));
  auto bad = c.first_inconsistent_step();
  ASSERT_TRUE(bad.has_value());
  EXPECT_EQ(bad->consumed_samples, 48);
  EXPECT_EQ(bad->global_batch_size, 24);
  // The same ramp skipping the odd step is fine: [8, 8, 10] to 64 with micro 8 x dp 1.
  EXPECT_FALSE(MicrobatchCalculator(ramp(64, 8, 1, 8, 8, 10)).first_inconsistent_step());
  // With decrease_batch_size_if_needed nothing is inconsistent: 24 runs as 16.
  MicrobatchCalculator d(ramp(32, 8, 2, 16, 8, 96, true));
  EXPECT_FALSE(d.first_inconsistent_step());
  BatchState s = d.at(48);
  EXPECT_EQ(s.global_batch_size, 24);
  EXPECT_EQ(s.running_global_batch_size, 16);
  EXPECT_EQ(s.num_microbatches, 1);
}

TEST(MicrobatchCalculator, RampupConstructorAssertsUseMegatronsMessages) {
  EXPECT_EQ(error_of(ramp(0, 8, 2, 16, 16, 48)),
            "parallel.global_batch_size: global batch size should be positive, got 0.");
  EXPECT_EQ(error_of(ramp(32, 8, 2, 0, 16, 48)),
            "training.rampup_batch_size: start batch size should be positive, got 0.");
  EXPECT_EQ(error_of(ramp(32, 8, 2, 16, 0, 48)),
            "training.rampup_batch_size: batch size increment should be positive, got 0.");
  EXPECT_EQ(error_of(ramp(32, 8, 2, 16, 16, -1)),
            "training.rampup_batch_size: ramp-up samples should be non-negative, got -1.");
  EXPECT_EQ(error_of(ramp(32, 8, 2, 48, 16, 48)),
            "training.rampup_batch_size: expected global batch size to be greater than or equal "
            "to start batch size, got 32 and 48");
  EXPECT_EQ(error_of(ramp(32, 8, 2, 16, 12, 48)),
            "training.rampup_batch_size: expected global batch size interval (16) to be "
            "divisible by global batch size increment (12)");
}

TEST(MicrobatchCalculator, RampupThatMegatronDividesByZeroIsRefused) {
  // start == global: 0 increments, Python raises ZeroDivisionError in the constructor.
  EXPECT_THAT(error_of(ramp(32, 8, 2, 32, 16, 48)), HasSubstr("at least one increment"));
  // ramp samples 0: 0 / 0.0 in the constructor's update(0) raises ZeroDivisionError.
  EXPECT_THAT(error_of(ramp(32, 8, 2, 16, 16, 0)), HasSubstr("ramp-up samples must be > 0"));
}

TEST(MicrobatchCalculator, RampupWithZeroMicrobatchesIsRefused) {
  // decrease with a start batch below micro x dp would run 0 micro-batches.
  MicrobatchCalculator c(ramp(48, 8, 3, 16, 8, 96, true));
  EXPECT_THROW(c.at(0), Error);
  EXPECT_EQ(c.at(100).num_microbatches, 2);  // 48 / 24
}

TEST(MicrobatchCalculator, NegativeConsumedSamplesAreAnError) {
  MicrobatchCalculator c(constant(32, 8, 2));
  try {
    c.at(-1);
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "consumed_samples: must be >= 0, got -1");
  }
}

TEST(MicrobatchCalculator, GptThreeStyleRampupSteps) {
  // GPT-3's schedule shape: 32 -> 1536 in steps of 32 over 1,953,125 samples (47 increments of
  // 41555.85 samples), micro 1 x dp 32. First change at ceil(41555.85) = 41556 samples; a run
  // of 32-sample iterations reaches it after ceil(41556 / 32) = 1299 iterations (41568 samples).
  MicrobatchCalculator c(ramp(1536, 1, 32, 32, 32, 1953125));
  std::vector<RampStep> steps = c.ramp_steps();
  ASSERT_GE(steps.size(), 2u);
  EXPECT_EQ(steps[0], (RampStep{0, 1299, {0, 32, 32, 1}}));
  EXPECT_EQ(steps[1].state.consumed_samples, 41568);
  EXPECT_EQ(steps[1].state.global_batch_size, 64);
  EXPECT_EQ(steps.back().state.global_batch_size, 1536);
  EXPECT_EQ(steps.back().state.num_microbatches, 48);
  EXPECT_GT(steps.back().state.consumed_samples, 1953125);
  // Every step's batch is a multiple of 32 = micro x dp.
  EXPECT_FALSE(c.first_inconsistent_step());
}

}  // namespace
}  // namespace mplan
