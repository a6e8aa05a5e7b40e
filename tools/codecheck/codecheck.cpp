// mplan-codecheck: the repository's structure checks from the command line. `layers` lists the
// includes of src/ that break its layering; `depth` lists the functions nested deeper than a
// limit. Exit status 0 when nothing is found, 1 when something is, 2 on bad arguments.
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "tools/codecheck/include_layers.hpp"
#include "tools/codecheck/nesting_depth.hpp"

namespace {

constexpr const char* kUsage =
    "usage: mplan-codecheck layers [REPO]\n"
    "       mplan-codecheck depth [--max N] [--all] [REPO [DIR...]]\n"
    "layers: every #include under REPO/src that points up its layer order (docs/architecture.md)\n"
    "depth:  every function nested deeper than N blocks (default 6) in DIR... (default: src sim\n"
    "        cli exec tests bench tools); --all lists every function with its depth instead\n";

int layers(const std::vector<std::string>& args) {
  if (args.size() > 1) {
    std::cerr << kUsage;
    return 2;
  }
  const std::string root = args.empty() ? "." : args[0];
  auto found = mplan::codecheck::check_src_layers(root);
  for (const auto& v : found)
    std::cout << v.file << ":" << v.line << ": " << (v.target.empty() ? "" : v.target + ": ")
              << v.rule << "\n";
  std::cout << found.size() << " layering violation" << (found.size() == 1 ? "" : "s") << "\n";
  return found.empty() ? 0 : 1;
}

int depth(std::vector<std::string> args) {
  int max_depth = 6;
  bool all = false;
  std::vector<std::string> rest;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--max" && i + 1 < args.size()) {
      char* end = nullptr;
      long v = std::strtol(args[i + 1].c_str(), &end, 10);
      if (*end != '\0' || v < 0 || v > 1000) {
        std::cerr << "mplan-codecheck: --max: expected an integer 0..1000, got '" << args[i + 1]
                  << "'\n";
        return 2;
      }
      max_depth = static_cast<int>(v);
      ++i;
    } else if (args[i] == "--all") {
      all = true;
    } else {
      rest.push_back(args[i]);
    }
  }
  const std::string root = rest.empty() ? "." : rest[0];
  std::vector<std::string> dirs(rest.size() > 1 ? rest.begin() + 1 : rest.end(), rest.end());
  if (dirs.empty()) dirs = {"src", "sim", "cli", "exec", "tests", "bench", "tools"};
  auto found = mplan::codecheck::deep_functions(root, dirs, all ? -1 : max_depth);
  size_t over = 0;
  for (const auto& d : found) {
    const auto& f = d.function;
    over += f.depth > max_depth;
    std::cout << d.file << ":" << f.line << ": " << f.name << ": depth " << f.depth << " (line "
              << f.deepest_line << "), " << f.last_line - f.line + 1 << " lines\n";
  }
  std::cout << over << " function" << (over == 1 ? "" : "s") << " nested deeper than " << max_depth
            << "\n";
  return over == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) {
    std::cerr << kUsage;
    return 2;
  }
  std::string cmd = args[0];
  args.erase(args.begin());
  if (cmd == "layers") return layers(args);
  if (cmd == "depth") return depth(args);
  std::cerr << kUsage;
  return 2;
}
