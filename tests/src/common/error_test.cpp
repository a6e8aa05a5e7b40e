// Tests of the error tiers: Error carries the user message as given; MPLAN_CHECK throws an
// InternalError naming file, line, condition and the values.
#include "src/common/error.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace mplan {
namespace {

using ::testing::HasSubstr;

TEST(Error, CatJoinsValues) { EXPECT_EQ(cat("tp=", 2, ", x=", 1.5), "tp=2, x=1.5"); }

TEST(Error, CheckThrowsInternalErrorWithLocation) {
  int tp = 3;
  try {
    MPLAN_CHECK(tp % 2 == 0, "tp=", tp);
    FAIL() << "expected an InternalError";
  } catch (const InternalError& e) {
    EXPECT_THAT(e.what(), HasSubstr("error_test.cpp:"));
    EXPECT_THAT(e.what(), HasSubstr("internal check failed: tp % 2 == 0 (tp=3)"));
  }
  EXPECT_NO_THROW(MPLAN_CHECK(tp == 3));
}

TEST(Error, UserErrorIsNotAnInternalError) {
  try {
    throw Error("parallel.tp: must be >= 1, got 0");
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "parallel.tp: must be >= 1, got 0");
  }
}

}  // namespace
}  // namespace mplan
