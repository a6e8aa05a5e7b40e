// Subcommands register themselves: each cli/<command>.cpp calls MPLAN_REGISTER_COMMAND with a
// position (the order in `mplan --help`) and a function that adds its CLI11 subcommand.
// The callback a command installs may throw mplan::Error for bad input (main prints it, exit 2).
#pragma once

#include <CLI/CLI.hpp>
#include <vector>

namespace mplan::cli {

using AddCommandFn = void (*)(CLI::App& app);

struct CommandEntry {
  int position;
  AddCommandFn add;
};

std::vector<CommandEntry>& command_registry();

// Thrown by a command to end with a given exit code after printing its own output
// (e.g. `mplan validate` on an invalid plan exits 2 after listing every violation).
struct ExitWith {
  int code;
};

struct RegisterCommand {
  RegisterCommand(int position, AddCommandFn add) { command_registry().push_back({position, add}); }
};

}  // namespace mplan::cli

#define MPLAN_CLI_CONCAT_(a, b) a##b
#define MPLAN_CLI_CONCAT(a, b) MPLAN_CLI_CONCAT_(a, b)
#define MPLAN_REGISTER_COMMAND(position, fn) \
  static ::mplan::cli::RegisterCommand MPLAN_CLI_CONCAT(mplan_register_, __COUNTER__)(position, fn)
