// The regression corpus: every input that ever crashed, hung or ended in an internal error
// (tests/cli/fixtures/crashers), run through the built `mplan`. Each must end with exit code 0, 1
// or 2 and no "internal error" or escaped exception. NAME.args holds a command line, one argument
// per line ($PLAN: NAME.json beside it, $OUT: a scratch file, $FIXTURES: the corpus directory); a
// NAME.json without one is run through validate, simulate, compare and show-schedule.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tests/cli/cli_runner.hpp"

namespace {

namespace fs = std::filesystem;
using mplan::cli_test::Result;
using mplan::cli_test::run;
using mplan::cli_test::temp_path;

const fs::path kCorpus = fs::path(MPLAN_SOURCE_DIR) / "tests/cli/fixtures/crashers";

std::string shell_quoted(const std::string& s) {
  std::string q = "'";
  for (char c : s) {
    if (c == '\'') {
      q.append("'\\''");
    } else {
      q.push_back(c);
    }
  }
  q.push_back('\'');
  return q;
}

// The shell text of a corpus command line.
std::string command_of(const fs::path& args_file) {
  const fs::path plan = fs::path(args_file).replace_extension(".json");
  std::ifstream in(args_file);
  std::string line, cmd;
  while (std::getline(in, line)) {
    if (line == "$PLAN") line = plan.string();
    if (line == "$OUT") line = temp_path("crasher_out");
    if (line == "$FIXTURES") line = kCorpus.string();
    if (!cmd.empty()) cmd += ' ';
    cmd += shell_quoted(line);
  }
  return cmd;
}

void expect_clean(const Result& r, const std::string& what) {
  EXPECT_TRUE(r.code == 0 || r.code == 1 || r.code == 2) << what << ": exit " << r.code << "\n"
                                                         << r.err;
  EXPECT_THAT(r.err, ::testing::Not(::testing::HasSubstr("internal error"))) << what;
  EXPECT_THAT(r.err, ::testing::Not(::testing::HasSubstr("mplan: failed:"))) << what;
}

TEST(Crashers, EveryCorpusInputEndsCleanly) {
  int args = 0, plans = 0;
  for (const auto& e : fs::directory_iterator(kCorpus)) {
    const fs::path p = e.path();
    if (p.extension() == ".args") {
      const std::string cmd = command_of(p);
      expect_clean(run(cmd), p.filename().string() + ": mplan " + cmd);
      ++args;
      continue;
    }
    if (p.extension() != ".json" || fs::exists(fs::path(p).replace_extension(".args"))) continue;
    const std::string plan = shell_quoted(p.string());
    std::vector<std::string> cmds;
    for (const char* c : {"validate ", "simulate --allow-oom ", "show-schedule --plan "})
      cmds.push_back(std::string(c).append(plan));
    cmds.push_back(std::string("compare ").append(plan).append(" ").append(plan));
    for (const std::string& cmd : cmds)
      expect_clean(run(cmd), p.filename().string() + ": mplan " + cmd);
    ++plans;
  }
  EXPECT_GE(args, 10);
  EXPECT_GE(plans, 7);
}

}  // namespace
