// Tests of the --fix parser: every key and its spellings, canonical text, and errors that name
// the flag and the item.
#include "sim/sweep/fixed_axes.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "src/common/error.hpp"

namespace mplan::sweep {
namespace {

using ::testing::HasSubstr;

std::string error_of(const std::string& text) {
  try {
    parse_fixed_axes(text);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(FixedAxes, EmptyFixesNothing) {
  EXPECT_TRUE(parse_fixed_axes("").empty());
  EXPECT_TRUE(parse_fixed_axes("  ").empty());
  EXPECT_EQ(to_string(FixedAxes{}), "");
}

TEST(FixedAxes, EveryKey) {
  FixedAxes f = parse_fixed_axes(
      "tp=8, cp=2,ep=4,etp=1,pp=16,vpp=3,dp=2,mbs=2,sp=on,recompute=full,dist_opt=off,"
      "schedule=interleaved");
  EXPECT_EQ(f.tp, 8);
  EXPECT_EQ(f.cp, 2);
  EXPECT_EQ(f.ep, 4);
  EXPECT_EQ(f.etp, 1);
  EXPECT_EQ(f.pp, 16);
  EXPECT_EQ(f.vpp, 3);
  EXPECT_EQ(f.dp, 2);
  EXPECT_EQ(f.micro_batch_size, 2);
  EXPECT_EQ(f.sequence_parallel, true);
  EXPECT_EQ(f.recompute, Recompute::kFull);
  EXPECT_EQ(f.distributed_optimizer, false);
  EXPECT_EQ(f.schedule, ScheduleKind::kInterleaved);
  EXPECT_EQ(to_string(f),
            "tp=8,cp=2,ep=4,etp=1,pp=16,vpp=3,dp=2,mbs=2,sp=on,recompute=full,dist_opt=off,"
            "schedule=interleaved");
}

TEST(FixedAxes, LongSpellingsAndSwitchWords) {
  FixedAxes f = parse_fixed_axes(
      "micro_batch_size=4,sequence_parallel=false,distributed_optimizer=1,schedule=zb-h1");
  EXPECT_EQ(f.micro_batch_size, 4);
  EXPECT_EQ(f.sequence_parallel, false);
  EXPECT_EQ(f.distributed_optimizer, true);
  EXPECT_EQ(f.schedule, ScheduleKind::kZbH1);
  EXPECT_EQ(parse_fixed_axes(to_string(f)), f);  // canonical text parses back
}

TEST(FixedAxes, ErrorsNameTheFlagAndItem) {
  EXPECT_THAT(error_of("tp=0"), HasSubstr("--fix: tp must be an integer from 1"));
  EXPECT_THAT(error_of("tp=eight"), HasSubstr("got \"eight\""));
  EXPECT_THAT(error_of("tp=3000000000"), HasSubstr("--fix: tp must be an integer from 1 to"));
  EXPECT_THAT(error_of("tp=8,tp=4"), HasSubstr("--fix: tp is given twice"));
  EXPECT_THAT(error_of("mbs=1,micro_batch_size=2"), HasSubstr("--fix: mbs is given twice"));
  EXPECT_THAT(error_of("tq=8"), HasSubstr("--fix: unknown key \"tq\" (keys: tp, cp"));
  EXPECT_THAT(error_of("tp"), HasSubstr("--fix: expected key=value items"));
  EXPECT_THAT(error_of("tp=8,"), HasSubstr("--fix: expected key=value items"));
  EXPECT_THAT(error_of("sp=maybe"), HasSubstr("--fix: sp must be on or off, got \"maybe\""));
  EXPECT_THAT(error_of("recompute=most"), HasSubstr("--fix: recompute: must be one of none"));
  EXPECT_THAT(error_of("schedule=best"), HasSubstr("--fix: schedule: must be one of gpipe"));
}

}  // namespace
}  // namespace mplan::sweep
