// Tests of `mplan microbatches` run as a program: exit codes (0, 2), JSON shapes, Megatron's
// rule in the message naming the flag, and the ramp-up listing.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "tests/cli/cli_runner.hpp"

namespace {

using ::testing::HasSubstr;

using mplan::cli_test::Result;
using mplan::cli_test::run;

TEST(MicrobatchesCli, ConstantJson) {
  Result r = run("microbatches --global-batch 64 --micro-batch 4 --dp 4 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j, nlohmann::json::parse(R"({"global_batch_size": 64, "num_microbatches": 4})"));
}

TEST(MicrobatchesCli, ConstantHuman) {
  Result r = run("microbatches --global-batch 64 --micro-batch 4 --dp 4");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("global batch 64 = 4 micro-batches x micro batch 4 x dp 4"));
}

TEST(MicrobatchesCli, NotDivisibleExitsTwoWithMegatronsRule) {
  Result r = run("microbatches --global-batch 33 --micro-batch 8 --dp 2");
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("--global-batch: global batch size (33) is not divisible by micro "
                               "batch size (8) times data parallel size (2)"));
  EXPECT_EQ(r.out, "");
}

TEST(MicrobatchesCli, DecreaseBatchSizeIfNeeded) {
  // Megatron's test: global 32, micro 8, dp 3 -> 1 micro-batch, running global batch 24.
  Result r =
      run("microbatches --global-batch 32 --micro-batch 8 --dp 3 "
          "--decrease-batch-size-if-needed --json");
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["global_batch_size"], 32);
  EXPECT_EQ(j["running_global_batch_size"], 24);
  EXPECT_EQ(j["num_microbatches"], 1);
}

TEST(MicrobatchesCli, RampupSamplesJson) {
  // Megatron's test_ramp_up: [16, 16, 96] to 32 with micro 8 x dp 2: 16 up to 96 consumed
  // samples (int(96 / 96.0) = 1 gives 32 there), 32 after.
  Result r =
      run("microbatches --global-batch 32 --micro-batch 8 --dp 2 --rampup 16 16 96 "
          "--consumed-samples 0 95 96 500 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  auto expected = nlohmann::json::parse(R"({"samples": [
      {"consumed_samples": 0, "global_batch_size": 16, "num_microbatches": 1},
      {"consumed_samples": 95, "global_batch_size": 16, "num_microbatches": 1},
      {"consumed_samples": 96, "global_batch_size": 32, "num_microbatches": 2},
      {"consumed_samples": 500, "global_batch_size": 32, "num_microbatches": 2}]})");
  EXPECT_EQ(j, expected);
}

TEST(MicrobatchesCli, RampupDefaultListing) {
  Result r = run("microbatches --global-batch 32 --micro-batch 8 --dp 2 --rampup 16 16 96");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("iteration  consumed samples  global batch  micro-batches"));
  EXPECT_THAT(r.out, HasSubstr("the ramp-up takes 6 iterations and 96 samples"));
  Result j = run("microbatches --global-batch 32 --micro-batch 8 --dp 2 --rampup 16 16 96 --json");
  ASSERT_EQ(j.code, 0) << j.err;
  auto s = nlohmann::json::parse(j.out)["samples"];
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0]["consumed_samples"], 0);
  EXPECT_EQ(s[0]["num_iterations"], 6);
  EXPECT_EQ(s[1]["consumed_samples"], 96);
  EXPECT_EQ(s[1]["first_iteration"], 6);
  EXPECT_EQ(s[1]["global_batch_size"], 32);
}

TEST(MicrobatchesCli, RampupErrorsExitTwo) {
  Result a = run("microbatches --global-batch 32 --micro-batch 8 --dp 2 --rampup 48 16 96");
  EXPECT_EQ(a.code, 2);
  EXPECT_THAT(a.err, HasSubstr("--rampup: expected global batch size to be greater than or "
                               "equal to start batch size, got 32 and 48"));
  Result b = run("microbatches --global-batch 32 --micro-batch 8 --dp 2 --rampup 16 12 96");
  EXPECT_EQ(b.code, 2);
  EXPECT_THAT(b.err, HasSubstr("--rampup: expected global batch size interval (16) to be "
                               "divisible by global batch size increment (12)"));
  // A step a run reaches (24 at 48 samples) is not a multiple of micro 8 x dp 2.
  Result c = run("microbatches --global-batch 32 --micro-batch 8 --dp 2 --rampup 16 8 96");
  EXPECT_EQ(c.code, 2);
  EXPECT_THAT(c.err, HasSubstr("--rampup: current global batch size (24) is not divisible by "
                               "micro-batch-size (8) times data parallel size (2)"));
  Result d = run("microbatches --global-batch 32 --micro-batch 8 --dp 2 --rampup 16 16");
  EXPECT_EQ(d.code, 2);
  EXPECT_THAT(d.err, HasSubstr("--rampup"));
}

TEST(MicrobatchesCli, BadValuesExitTwoNamingTheFlag) {
  Result a = run("microbatches --global-batch 32 --micro-batch 0 --dp 2");
  EXPECT_EQ(a.code, 2);
  EXPECT_THAT(a.err, HasSubstr("--micro-batch: micro batch size must be > 0, got 0"));
  Result b = run("microbatches --global-batch 32 --micro-batch 8 --dp 2 --consumed-samples -1");
  EXPECT_EQ(b.code, 2);
  EXPECT_THAT(b.err, HasSubstr("--consumed-samples: must be >= 0, got -1"));
  Result c = run("microbatches --global-batch 32 --micro-batch 8");
  EXPECT_EQ(c.code, 2);
  EXPECT_THAT(c.err, HasSubstr("--dp"));
  Result d = run("microbatches --global-batch x --micro-batch 8 --dp 2");
  EXPECT_EQ(d.code, 2);
  EXPECT_THAT(d.err, HasSubstr("--global-batch"));
}

TEST(MicrobatchesCli, ValuesBeyondTheirRangeAndEndlessRampsExitTwo) {
  Result a = run("microbatches --global-batch 4611686018427387904 --micro-batch 1 --dp 1");
  EXPECT_EQ(a.code, 2);
  EXPECT_THAT(a.err, HasSubstr("--global-batch: must be <= 16777216"));
  Result b = run("microbatches --global-batch 16777216 --micro-batch 1 --dp 1 --rampup 1 1 100");
  EXPECT_EQ(b.code, 2);
  EXPECT_THAT(b.err, HasSubstr("--rampup: 16777215 batch-size changes"));
  Result c = run("microbatches --global-batch 64 --micro-batch 1 --dp 2097152");
  EXPECT_EQ(c.code, 2);
  EXPECT_THAT(c.err, HasSubstr("--dp: must be <= 1048576"));
}

TEST(MicrobatchesCli, HelpListsEveryOption) {
  Result r = run("microbatches --help");
  EXPECT_EQ(r.code, 0);
  for (const char* opt :
       {"--global-batch", "--micro-batch", "--dp", "--rampup", "--consumed-samples",
        "--decrease-batch-size-if-needed", "--json", "Examples:"})
    EXPECT_THAT(r.out, HasSubstr(opt));
}

}  // namespace
