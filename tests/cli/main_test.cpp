// `mplan` itself (cli/main.cpp) run as a program: --help lists every subcommand, no arguments
// prints the overview and exits 2, an unknown command is named (exit 2), --version exits 0, and a
// subcommand's unknown flag is a one-line error with exit 2.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "tests/cli/cli_runner.hpp"

namespace {

using mplan::cli_test::count_lines;
using mplan::cli_test::Result;
using mplan::cli_test::run;
using mplan::cli_test::shipped_plan;
using ::testing::HasSubstr;
using ::testing::MatchesRegex;

// Every subcommand the tool documents (docs/cli/<command>.md).
const char* const kCommands[] = {"validate", "microbatches", "show-groups", "show-schedule",
                                 "simulate", "sweep",        "run",         "import",
                                 "export",   "calibrate",    "accuracy"};

TEST(MainCli, HelpListsEverySubcommand) {
  Result r = run("--help");
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* c : kCommands) EXPECT_THAT(r.out, HasSubstr(c)) << c;
  EXPECT_THAT(r.out, HasSubstr("Examples:"));
  EXPECT_EQ(r.err, "");
}

TEST(MainCli, NoArgumentsPrintsTheOverviewAndExitsTwo) {
  Result r = run("");
  EXPECT_EQ(r.code, 2);
  // The overview is the --help text, on stderr since the run failed.
  Result help = run("--help");
  EXPECT_EQ(r.err, help.out);
  for (const char* c : kCommands) EXPECT_THAT(r.err, HasSubstr(c)) << c;
  EXPECT_EQ(r.out, "");
}

TEST(MainCli, UnknownCommandIsNamedAndExitsTwo) {
  Result r = run("frobnicate");
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("unknown command 'frobnicate'"));
  EXPECT_THAT(r.err, HasSubstr("validate"));  // the known commands are listed
  EXPECT_EQ(count_lines(r.err), 1u) << r.err;
  EXPECT_EQ(r.out, "");
}

TEST(MainCli, VersionExitsZero) {
  Result r = run("--version");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, MatchesRegex("mplan [0-9]+\\.[0-9]+\\.[0-9]+\n"));
}

TEST(MainCli, UnknownFlagOfASubcommandIsOneLineAndExitsTwo) {
  struct Case {
    std::string args, flag;
  } cases[] = {
      {"validate " + shipped_plan("gpt3-1.3b-dp4") + " --frobnicate", "--frobnicate"},
      {"show-groups --tp 2 --pp 1 --dp 1 --bogus 3", "--bogus"},
      {"microbatches --global-batch 8 --micro-batch 1 --dp 1 --nope", "--nope"},
  };
  for (const Case& c : cases) {
    Result r = run(c.args);
    EXPECT_EQ(r.code, 2) << c.args;
    EXPECT_THAT(r.err, HasSubstr(c.flag)) << c.args;
    EXPECT_EQ(count_lines(r.err), 1u) << c.args << "\n" << r.err;
    EXPECT_EQ(r.out, "") << c.args;
  }
}

}  // namespace
