// NestingDepth: how deeply each function of a C++ / CUDA source nests its blocks. Depth counts the
// blocks a statement sits in below the function body (the body itself is depth 0): the braces of
// if / for / while / switch / do / try / catch, a controlled statement written without braces,
// a bare { } block and a lambda body each add one; an `else if` stays at its `if`'s depth, and
// a case label's { } adds nothing beyond the switch. Invariant: every function body the scanner
// finds is reported once; members of a class (local classes included) are their own functions.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace mplan::codecheck {

struct FunctionDepth {
  std::string name;      // as declared: "Engine::run", "TEST(Suite, Name)", "Grid::size"
  int line = 0;          // 1-based line of the body's opening brace
  int last_line = 0;     // line of its closing brace
  int depth = 0;         // deepest nesting inside the body
  int deepest_line = 0;  // where that depth is first reached
};

// Every function body in `text`, in source order.
std::vector<FunctionDepth> function_depths(std::string_view text);

// A function nested deeper than a limit, with the file it is in.
struct DeepFunction {
  std::string file;  // repository path, '/'-separated
  FunctionDepth function;
};

// The functions nested deeper than `max_depth` in the C++ / CUDA files (.hpp .cpp .h .cc .cu .cuh)
// under each of `dirs` (relative to `repo_root`), ordered by file then line.
std::vector<DeepFunction> deep_functions(const std::filesystem::path& repo_root,
                                         const std::vector<std::string>& dirs, int max_depth);

}  // namespace mplan::codecheck
