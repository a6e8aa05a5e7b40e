// Tests of the argument list: argparse's last-occurrence rule, typed reads and their messages,
// what is left unread, and the report of values the script does not define.
#include "src/interop/megatron/megatron_arg_list.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "src/common/error.hpp"

namespace mplan {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

ShellField word(const std::string& text, std::vector<std::string> unknown = {}) {
  return {text, std::move(unknown)};
}

TEST(MegatronArgList, SplitsNamesAndValues) {
  std::vector<std::string> warnings;
  auto occ =
      split_arguments({word("--a"), word("1"), word("2"), word("--b=3"), word("--c")}, warnings);
  ASSERT_EQ(occ.size(), 3u);
  EXPECT_EQ(occ[0].name, "--a");
  EXPECT_EQ(occ[0].values.size(), 2u);
  EXPECT_EQ(occ[1].name, "--b");
  EXPECT_EQ(occ[1].values[0].text, "3");
  EXPECT_TRUE(occ[2].values.empty());
  EXPECT_THAT([&] { split_arguments({word("x")}, warnings); },
              ThrowsMessage<Error>(HasSubstr("unexpected argument 'x'")));
  EXPECT_TRUE(split_arguments({word("$EXTRA", {"$EXTRA"})}, warnings).empty());
  EXPECT_THAT(warnings, ElementsAre(HasSubstr("pretrain_gpt.py gets $EXTRA")));
}

TEST(MegatronArgList, LastOccurrenceWinsAndRepeatsAreReported) {
  std::vector<std::string> warnings;
  MegatronArgList args({{"--n", {word("1")}}, {"--n", {word("2")}}, {"--n", {word("2")}}},
                       warnings);
  EXPECT_EQ(args.int_value("--n", 1, true), 2);
  EXPECT_THAT(warnings, ElementsAre("--n is given twice; the last value wins (2), as in "
                                    "Megatron-LM's argparse"));
}

TEST(MegatronArgList, TypedReadsNameTheArgument) {
  std::vector<std::string> w;
  MegatronArgList args({{"--i", {word("x")}},
                        {"--f", {word("1")}},
                        {"--two", {word("1"), word("2")}},
                        {"--d", {word("-1")}},
                        {"--u", {word("$1", {"$1"})}}},
                       w);
  EXPECT_THAT([&] { args.int_value("--i", 1, true); },
              ThrowsMessage<Error>(HasSubstr("--i: must be an integer, got 'x'")));
  EXPECT_THAT([&] { args.flag("--f"); },
              ThrowsMessage<Error>(HasSubstr("--f: takes no value, got '1'")));
  EXPECT_THAT([&] { args.value("--two", true); },
              ThrowsMessage<Error>(HasSubstr("--two: takes one value, got '1 2'")));
  EXPECT_THAT([&] { args.double_value("--d", 0.0, true); },
              ThrowsMessage<Error>(HasSubstr("--d: must be >= 0, got -1")));
  EXPECT_THAT([&] { args.int_value("--u", 1, true); },
              ThrowsMessage<Error>(HasSubstr("give it with --var 1=VALUE")));
  EXPECT_EQ(args.int_value("--u", 1, false), std::nullopt);  // not layout: a warning
  EXPECT_THAT(w, ElementsAre(HasSubstr("--u: its value ($1) depends on $1")));
  EXPECT_EQ(args.int_value("--absent", 1, true), std::nullopt);
}

TEST(MegatronArgList, LeftoversAndUndefinedValues) {
  std::vector<std::string> w;
  MegatronArgList args({{"--save", {word("$2", {"$2"})}},
                        {"--used", {word("1")}},
                        {"--load", {word("$2", {"$2"})}},
                        {"--data", {word("$HOME/x", {"$HOME"}), word("$1", {"$1"})}}},
                       w);
  EXPECT_TRUE(args.has("--used"));
  args.get("--used");
  auto left = args.leftovers();
  ASSERT_EQ(left.size(), 3u);
  EXPECT_EQ(left[0].name, "--save");
  EXPECT_EQ(left[0].text, "--save $2");
  EXPECT_EQ(left[2].text, "--data $HOME/x $1");
  EXPECT_THAT(args.undefined_report(),
              ElementsAre("$1 (no value here): --data", "$2 (no value here): --save, --load",
                          "$HOME (no value here): --data"));
}

}  // namespace
}  // namespace mplan
