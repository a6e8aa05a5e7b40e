// Runs the built `mplan` binary (MPLAN_BIN) for the CLI tests and captures what it did: exit code,
// stdout and stderr. Header-only, shared by every tests/cli/*_test.cpp. Invariant: each run's
// output goes through files private to the test process (named by its pid), removed after reading.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>

namespace mplan::cli_test {

// What one run of `mplan` did. code is -1 when the process did not exit normally.
struct Result {
  int code = -1;
  std::string out, err;
};

struct RunOptions {
  std::string cwd;            // run in this directory (empty: the test's working directory)
  bool merge_stderr = false;  // stderr goes to `out` too, interleaved as written; `err` is empty
};

// The whole content of a file ("" if it cannot be read).
inline std::string slurp(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A path in the test temp dir, unique to this process: TempDir/mplan_cli_<pid>_<name>.
inline std::string temp_path(const std::string& name) {
  return ::testing::TempDir() + "mplan_cli_" + std::to_string(::getpid()) + "_" + name;
}

// Writes `text` to temp_path(name) and returns that path.
inline std::string write_temp(const std::string& name, const std::string& text) {
  std::string path = temp_path(name);
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

// A plan file shipped in configs/plans/, by name without ".json".
inline std::string shipped_plan(const std::string& name) {
  return std::string(MPLAN_SOURCE_DIR) + "/configs/plans/" + name + ".json";
}

// Number of '\n' in `text`: a one-line error message counts 1.
inline size_t count_lines(std::string_view text) {
  return static_cast<size_t>(std::count(text.begin(), text.end(), '\n'));
}

// Runs `mplan ARGS` through the shell: ARGS is shell text (quoting, `<`, `|` all work; a pipe's
// later commands must name the binary themselves).
inline Result run(const std::string& args, const RunOptions& options = {}) {
  const std::string out_path = temp_path("run_stdout.txt"), err_path = temp_path("run_stderr.txt");
  // Built by appending: GCC 12 warns (-Wrestrict) on `"literal" + std::string&&` here.
  std::string cmd;
  if (!options.cwd.empty()) cmd.append("cd '").append(options.cwd).append("' && ");
  cmd.append("'").append(MPLAN_BIN).append("' ").append(args);
  cmd.append(" >'").append(out_path).append("' ");
  if (options.merge_stderr) {
    cmd.append("2>&1");
  } else {
    cmd.append("2>'").append(err_path).append("'");
  }
  const int status = std::system(cmd.c_str());
  Result r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = slurp(out_path);
  if (!options.merge_stderr) r.err = slurp(err_path);
  std::remove(out_path.c_str());
  std::remove(err_path.c_str());
  return r;
}

}  // namespace mplan::cli_test
