// Tests of the bash reader: each expected word list is what bash itself would pass to the
// program (worked out by the bash rules: unquoted expansions split, "${A[@]}" keeps elements),
// with placeholders where the script reads a value it does not define.
#include "src/interop/megatron/shell_script.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "src/common/error.hpp"

namespace mplan {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<std::string> texts(const ShellCommand& c) {
  std::vector<std::string> out;
  for (const auto& w : c.words) out.push_back(w.text);
  return out;
}

ShellScript read(const std::string& s, std::map<std::string, std::string> vars = {}) {
  ShellReadOptions o;
  o.vars = std::move(vars);
  return read_shell_script(s, o);
}

bool any_contains(const std::vector<std::string>& v, const std::string& part) {
  for (const auto& s : v)
    if (s.find(part) != std::string::npos) return true;
  return false;
}

TEST(ShellScript, ArrayOverLinesWithCommentsAndContinuations) {
  auto sh = read(
      "A=(\n"
      "    --x 1 # a comment (with parentheses)\n"
      "    --y \"two words\" \\\n"
      "    --z\n"
      ")\n"
      "cmd ${A[@]}\n"
      "cmd \"${A[@]}\"\n");
  ASSERT_EQ(sh.commands.size(), 2u);
  EXPECT_THAT(texts(sh.commands[0]), ElementsAre("cmd", "--x", "1", "--y", "two", "words", "--z"));
  EXPECT_THAT(texts(sh.commands[1]), ElementsAre("cmd", "--x", "1", "--y", "two words", "--z"));
  EXPECT_EQ(sh.commands[0].line, 6);
  EXPECT_EQ(sh.commands[1].line, 7);
}

TEST(ShellScript, LineContinuationsJoinOneCommand) {
  auto sh = read("torchrun --nproc_per_node 8 \\\n  pretrain_gpt.py \\\n  --num-layers 2\n");
  ASSERT_EQ(sh.commands.size(), 1u);
  EXPECT_THAT(texts(sh.commands[0]), ElementsAre("torchrun", "--nproc_per_node", "8",
                                                 "pretrain_gpt.py", "--num-layers", "2"));
}

TEST(ShellScript, VariablesBracesAndDefaults) {
  auto sh = read(
      "GPUS=8\n"
      "export PORT=6000\n"
      "HOST=${MASTER_ADDR:-\"local host\"}\n"
      "cmd $GPUS ${GPUS}x \"$HOST\" $PORT ${UNSET_WITH_DEFAULT-dflt}\n");
  ASSERT_EQ(sh.commands.size(), 1u);
  EXPECT_THAT(texts(sh.commands[0]), ElementsAre("cmd", "8", "8x", "local host", "6000", "dflt"));
  EXPECT_TRUE(any_contains(sh.defaults_used, "$MASTER_ADDR -> \"local host\""));
}

TEST(ShellScript, PositionalArgumentsHaveNoValueUnlessGiven) {
  const std::string s = "CKPT=$1\nVOCAB=${2:-gpt2.json}\ncmd --save $CKPT/run --vocab $VOCAB\n";
  auto sh = read(s);
  ASSERT_EQ(sh.commands.size(), 1u);
  const auto& w = sh.commands[0].words;
  ASSERT_EQ(w.size(), 5u);
  EXPECT_EQ(w[2].text, "$1/run");
  EXPECT_THAT(w[2].unknown, ElementsAre("$1"));
  EXPECT_EQ(w[4].text, "gpt2.json");
  EXPECT_TRUE(w[4].resolved());
  EXPECT_THAT(sh.undefined, ElementsAre("$1"));
  EXPECT_TRUE(any_contains(sh.defaults_used, "$2 -> \"gpt2.json\""));

  auto given = read(s, {{"1", "/ckpt"}, {"2", "v.json"}});
  EXPECT_THAT(texts(given.commands[0]),
              ElementsAre("cmd", "--save", "/ckpt/run", "--vocab", "v.json"));
  EXPECT_TRUE(given.undefined.empty());
}

TEST(ShellScript, GivenVariableOverridesTheScriptsAssignment) {
  auto sh = read("NUM_NODES=1\ncmd $NUM_NODES\n", {{"NUM_NODES", "16"}});
  EXPECT_THAT(texts(sh.commands[0]), ElementsAre("cmd", "16"));
  EXPECT_TRUE(any_contains(sh.notes, "overridden"));
}

TEST(ShellScript, Arithmetic) {
  auto sh = read("G=8\nN=2\nW=$(($G*$N))\ncmd $W $((G + 1)) $(( (G - 2) / 3 % 5 ))\n");
  EXPECT_THAT(texts(sh.commands[0]), ElementsAre("cmd", "16", "9", "2"));
}

TEST(ShellScript, ArithmeticAsBashComputesIt) {
  // Octal constants, the sign of a remainder, INT64_MIN % -1, the largest 64-bit constant.
  auto sh = read(
      "cmd $((010 + 1)) $((-7 % 3)) $(( (-9223372036854775807 - 1) % -1 ))"
      " $((9223372036854775807))\n");
  EXPECT_THAT(texts(sh.commands[0]), ElementsAre("cmd", "9", "-1", "0", "9223372036854775807"));
}

TEST(ShellScript, ArithmeticBashStopsAtOrWrapsIsAnError) {
  auto error = [](const std::string& script) {
    try {
      read(script);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  // bash: "division by 0", and the script stops.
  EXPECT_EQ(error("NODES=0\nGPUS=8\nN=$((GPUS / NODES))\ncmd $N\n"),
            "line 3: $((GPUS / NODES)): division by zero");
  EXPECT_EQ(error("cmd $((1 % 0))\n"), "line 1: $((1 % 0)): division by zero");
  // bash wraps these around to a negative number.
  const std::string wraps = "the result overflows 64-bit integers (bash would wrap it around)";
  EXPECT_EQ(error("cmd $((9223372036854775807 * 2))\n"),
            "line 1: $((9223372036854775807 * 2)): " + wraps);
  EXPECT_EQ(error("cmd $((9223372036854775807 + 1))\n"),
            "line 1: $((9223372036854775807 + 1)): " + wraps);
  EXPECT_EQ(error("cmd $(( (-9223372036854775807 - 1) / -1 ))\n"),
            "line 1: $(( (-9223372036854775807 - 1) / -1 )): " + wraps);
  EXPECT_THAT(error("cmd $((99999999999999999999))\n"),
              HasSubstr("99999999999999999999: the constant overflows 64-bit integers"));
  EXPECT_THAT(error("cmd $((09))\n"), HasSubstr("09: value too great for base"));
}

TEST(ShellScript, NestingIsBoundedNotAStackOverflow) {
  auto nested = [](const std::string& open, const std::string& inner, const std::string& close,
                   int n) {
    std::string s;
    for (int i = 0; i < n; ++i) s += open;
    s += inner;
    for (int i = 0; i < n; ++i) s += close;
    return s;
  };
  // Within the limit each form is read; far beyond it, one line names what is nested.
  EXPECT_THAT(texts(read("cmd $((" + nested("(", "1", ")", 20) + "))").commands[0]),
              ElementsAre("cmd", "1"));
  EXPECT_THAT(texts(read(nested("( ", "cmd ${A:-${B:-${C:-1}}}", " )", 20)).commands[0]),
              ElementsAre("cmd", "1"));
  const int deep = 5000;
  EXPECT_THAT([&] { read("X=$((" + nested("(", "1", ")", deep) + "))"); },
              ::testing::ThrowsMessage<Error>(
                  HasSubstr("arithmetic signs and parentheses nested deeper than 64 levels")));
  EXPECT_THAT([&] { read("X=$((" + std::string(deep, '-') + "1))\n"); },
              ::testing::ThrowsMessage<Error>(HasSubstr("nested deeper than 64 levels")));
  EXPECT_THAT([&] { read(nested("(", "true", ")", deep)); },
              ::testing::ThrowsMessage<Error>(HasSubstr("commands nested deeper than 64 levels")));
  EXPECT_THAT([&] { read(nested("{ ", "true;", " }", deep)); },
              ::testing::ThrowsMessage<Error>(HasSubstr("commands nested deeper than 64 levels")));
  EXPECT_THAT([&] { read(nested("if true; then\n", "X=1\n", "fi\n", 1000)); },
              ::testing::ThrowsMessage<Error>(HasSubstr("commands nested deeper than 64 levels")));
  EXPECT_THAT(
      [&] { read("X=" + nested("${Y:-", "1", "}", 1000) + "\ncmd $X\n"); },
      ::testing::ThrowsMessage<Error>(HasSubstr("substitutions ${...} nested deeper than 64")));
  EXPECT_THAT([&] { read("[[ " + nested("( ", "-n x", " )", deep) + " ]]"); },
              ::testing::ThrowsMessage<Error>(HasSubstr("test operators ! and ( nested deeper")));
  EXPECT_THAT([&] { read("[[ " + nested("! ", "-n x", "", deep) + " ]]"); },
              ::testing::ThrowsMessage<Error>(HasSubstr("nested deeper than 64 levels")));
}

TEST(ShellScript, SubstitutionsThatDoubleAValueEndInAnError) {
  // Doubling 20 times (1 MiB) is read; 64 times would be 2^64 bytes.
  std::string doubling = "X=a\n";
  for (int i = 0; i < 20; ++i) doubling += "X=$X$X\n";
  EXPECT_EQ(read(doubling + "cmd ${#X}\n").commands[0].words[1].text, "1048576");
  for (int i = 20; i < 64; ++i) doubling += "X=$X$X\n";
  EXPECT_THAT([&] { read(doubling + "cmd $X\n"); },
              ::testing::ThrowsMessage<Error>(
                  HasSubstr("line 27: ${X}: the script's substitutions produce more than 64 MiB")));
}

TEST(ShellScript, ArithmeticOnAnUnknownStaysUnknown) {
  auto sh = read("W=$(($GPUS*2))\ncmd $W\n");
  ASSERT_EQ(sh.commands[0].words.size(), 2u);
  EXPECT_FALSE(sh.commands[0].words[1].resolved());
  EXPECT_THAT(sh.commands[0].words[1].unknown, ElementsAre("$GPUS"));
}

TEST(ShellScript, UnquotedElementsWithPlaceholdersStillSplit) {
  // bash splits "--cache ${PWD}/x" at the space when ${B[@]} is unquoted.
  auto sh = read("B=(\"--cache ${PWD}/x\" \"--n 1\")\ncmd ${B[@]}\n");
  const auto& w = sh.commands[0].words;
  ASSERT_EQ(w.size(), 5u);
  EXPECT_EQ(w[1].text, "--cache");
  EXPECT_TRUE(w[1].resolved());
  EXPECT_EQ(w[2].text, "$PWD/x");
  EXPECT_THAT(w[2].unknown, ElementsAre("$PWD"));
  EXPECT_EQ(w[3].text, "--n");
  EXPECT_EQ(w[4].text, "1");
}

TEST(ShellScript, CommandSubstitutionIsUnknown) {
  auto sh = read("D=$(dirname \"$0\")\ncmd $D/data\n");
  const auto& w = sh.commands[0].words;
  ASSERT_EQ(w.size(), 2u);
  EXPECT_FALSE(w[1].resolved());
  EXPECT_THAT(w[1].text, HasSubstr("$(dirname"));
}

TEST(ShellScript, IfOnKnownValuesIsFollowed) {
  auto sh = read(
      "DTYPE=fp8\nA=()\n"
      "if [[ \"$DTYPE\" == \"fp8\" ]]; then\n  A+=(--fp8-format hybrid)\nelse\n  A+=(--bf16)\nfi\n"
      "if [ \"$DTYPE\" != fp8 ]; then A+=(--no); elif [ 2 -gt 1 ]; then A+=(--yes); fi\n"
      "cmd ${A[@]}\n");
  EXPECT_THAT(texts(sh.commands[0]), ElementsAre("cmd", "--fp8-format", "hybrid", "--yes"));
}

TEST(ShellScript, IfOnAnUndefinedValueIsSkippedWithANote) {
  auto sh =
      read("A=(--x)\nif [ -n \"${WANDB_API_KEY}\" ]; then\n  A+=(--wandb)\nfi\ncmd ${A[@]}\n");
  EXPECT_THAT(texts(sh.commands[0]), ElementsAre("cmd", "--x"));
  ASSERT_EQ(sh.notes.size(), 1u);
  EXPECT_THAT(sh.notes[0], HasSubstr("line 2"));
  EXPECT_THAT(sh.notes[0], HasSubstr("$WANDB_API_KEY"));
}

TEST(ShellScript, FileTestsGuardingExitAreHarmless) {
  auto sh =
      read("S=pretrain_gpt.py\nif [ ! -f \"$S\" ]; then\n  echo missing\n  exit 1\nfi\ncmd $S\n");
  EXPECT_THAT(texts(sh.commands[0]), ElementsAre("cmd", "pretrain_gpt.py"));
  EXPECT_TRUE(sh.notes.empty());  // the skipped block sets nothing
}

TEST(ShellScript, AndOrLists) {
  auto sh = read("[ a = a ] && R=1 || R=2\n[ a = b ] && S=1 || S=2\ncmd $R $S\n");
  EXPECT_THAT(texts(sh.commands[0]), ElementsAre("cmd", "1", "2"));
}

TEST(ShellScript, RedirectionsAndPipes) {
  auto sh = read("torchrun a.py --x 1 2>&1 | tee log.txt\npython b.py > out.txt\n");
  ASSERT_EQ(sh.commands.size(), 3u);
  EXPECT_THAT(texts(sh.commands[0]), ElementsAre("torchrun", "a.py", "--x", "1"));
  EXPECT_THAT(texts(sh.commands[1]), ElementsAre("tee", "log.txt"));
  EXPECT_THAT(texts(sh.commands[2]), ElementsAre("python", "b.py"));
}

TEST(ShellScript, HereDocumentBodyIsNotRead) {
  auto sh = read("cat <<EOF > x.txt\nnot a command --x\nEOF\ncmd ok\n");
  ASSERT_EQ(sh.commands.size(), 2u);
  EXPECT_THAT(texts(sh.commands[0]), ElementsAre("cat"));
  EXPECT_THAT(texts(sh.commands[1]), ElementsAre("cmd", "ok"));
}

TEST(ShellScript, LoopsAreSkippedWithANote) {
  auto sh = read("A=()\nfor i in 1 2; do\n  A+=(--x)\ndone\ncmd ${A[@]}\n");
  EXPECT_THAT(texts(sh.commands[0]), ElementsAre("cmd"));
  ASSERT_EQ(sh.notes.size(), 1u);
  EXPECT_THAT(sh.notes[0], HasSubstr("for loop"));
}

TEST(ShellScript, QuotingRules) {
  auto sh = read("V='a $b'\ncmd \"$V\" 'x y' \"\" \\$HOME a\\ b\n");
  EXPECT_THAT(texts(sh.commands[0]), ElementsAre("cmd", "a $b", "x y", "", "$HOME", "a b"));
}

TEST(ShellScript, SyntaxErrorsNameTheLine) {
  EXPECT_THAT([] { read("X=1\nA=(\n --x 1\n"); },
              ::testing::ThrowsMessage<Error>(HasSubstr("line 2: unterminated array A=( ... )")));
  EXPECT_THAT([] { read("cmd \"open\n"); },
              ::testing::ThrowsMessage<Error>(HasSubstr("line 1: unterminated double quote")));
  EXPECT_THAT([] { read("if true; then\n cmd\n"); },
              ::testing::ThrowsMessage<Error>(HasSubstr("line 1: 'if' without matching 'fi'")));
  EXPECT_THAT([] { read("cmd ${X\n"); },
              ::testing::ThrowsMessage<Error>(HasSubstr("unterminated ${...}")));
  EXPECT_THAT([] { read("fi\n"); }, ::testing::ThrowsMessage<Error>(HasSubstr("unexpected 'fi'")));
}

}  // namespace
}  // namespace mplan
