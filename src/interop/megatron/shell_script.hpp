// ShellScript: reads a bash launch script without running it, far enough to recover the command
// lines it would run: assignments and arrays (NAME=( ... ) over many lines, +=), $VAR, ${VAR},
// ${VAR:-default}, ${ARR[@]}, $((arithmetic)), quoting, word splitting, line continuations,
// comments, and if / && / || on simple tests. Invariant: nothing is guessed. A value that depends
// on something the script does not define (a positional argument $1, an unset environment
// variable, a command substitution) keeps a placeholder and names what it depends on.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace mplan {

// One word of a command after expansion.
struct ShellField {
  std::string text;                  // the value; unknown parts appear as "$1", "$(...)"
  std::vector<std::string> unknown;  // what it depends on that has no value here: "$1", "$HOME"
  bool resolved() const { return unknown.empty(); }
  bool operator==(const ShellField&) const = default;
};

// A simple command the script runs (assignments and shell built-ins excluded), in script order.
struct ShellCommand {
  int line = 0;                   // 1-based line where the command starts
  std::vector<ShellField> words;  // after expansion and word splitting; words[0] is the program
};

struct ShellReadOptions {
  // Values for variables: "1".."9" are the positional arguments; a named variable overrides the
  // script's own assignments to it (so NUM_NODES=16 replaces the script's NUM_NODES=1).
  std::map<std::string, std::string> vars;
};

struct ShellScript {
  std::vector<ShellCommand> commands;
  // What was skipped, assumed or overridden, one line each, "line N: ...".
  std::vector<std::string> notes;
  // Positional arguments and variables read without a value, in order of first use ("$1").
  std::vector<std::string> undefined;
  // Defaults the script's ${X:-default} supplied because X has no value here: "$3 -> \"MOCK\"".
  std::vector<std::string> defaults_used;
};

// Reads `text`. Throws Error "line N: <what is wrong>" on a syntax error (unterminated quote,
// array or substitution; `if` without `fi`), on arithmetic that bash would stop at or wrap
// around ("$((GPUS / NODES)): division by zero", a result beyond 64 bits), on nesting deeper
// than 64 levels, and on substitutions that together produce more than 64 MiB of text.
ShellScript read_shell_script(const std::string& text, const ShellReadOptions& options = {});

}  // namespace mplan
