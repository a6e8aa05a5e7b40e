// Tests of `mplan calibrate` that need no GPU: its help names the options and examples, and a
// missing --out is refused (exit 2). The measurement itself is the gpu-labelled test
// tests/exec/cuda/calibrate_gpu_test.cpp.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/cli/cli_runner.hpp"

namespace {

using mplan::cli_test::Result;
using mplan::cli_test::run;
using ::testing::HasSubstr;

TEST(CalibrateCli, HelpNamesOptionsAndExamples) {
  Result r = run("calibrate --help");
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* s : {"--out", "--quick", "--base", "--model", "--heat-ms", "Examples:"})
    EXPECT_THAT(r.out, HasSubstr(s));
  Result top = run("--help");
  EXPECT_THAT(top.out, HasSubstr("calibrate"));
  EXPECT_THAT(top.out, HasSubstr("accuracy"));
}

TEST(CalibrateCli, OutIsRequired) {
  Result r = run("calibrate --quick");
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("--out"));
}

TEST(CalibrateCli, HeatOutsideItsRangeIsRefused) {
  for (const char* v : {"-1", "1001", "nan"}) {
    Result r = run(std::string("calibrate --out x.json --heat-ms ") + v);
    EXPECT_EQ(r.code, 2) << v;
    EXPECT_THAT(r.err, HasSubstr("--heat-ms")) << v;
  }
}

}  // namespace
