// run_mplan: the whole `mplan` command line. Builds the CLI11 app from the registered subcommands,
// runs the chosen one, and maps failures to exit codes: 0 ok, 2 bad input (one line naming the
// flag or field), 1 a valid plan that does not fit or a failure while running, 3 a broken
// internal invariant (a bug: no input should reach it; the fuzzer checks that none does).
#include "cli/mplan_app.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <string>

#include "cli/command_registry.hpp"
#include "src/common/error.hpp"

namespace mplan::cli {
std::vector<CommandEntry>& command_registry() {
  static std::vector<CommandEntry> entries;
  return entries;
}
}  // namespace mplan::cli

namespace mplan::cli {

int run_mplan(int argc, char** argv) {
  CLI::App app{
      "mplan plans, simulates and runs Megatron-LM-style hybrid-parallel LLM training "
      "(TP, SP, CP, EP, PP with virtual stages, DP).",
      "mplan"};
  app.set_version_flag("--version", "mplan 0.1.0");
  app.require_subcommand(1, 1);
  app.footer(
      "Examples:\n"
      "  mplan sweep --gpus 128                      rank every valid plan, write best.json\n"
      "  mplan simulate best.json                    predict time and memory of one plan\n"
      "  mplan show-groups --tp 2 --pp 2 --dp 2      Megatron's communication groups\n"
      "  mpirun -np 4 mplan run best.json            train the plan on GPUs\n"
      "  mpirun -np 2 mplan calibrate --out p.json   measure the GPUs, write a profile\n"
      "  mplan accuracy run-*.json --cluster p.json  predicted against measured runs\n"
      "Run `mplan <command> --help` for a command's options.");
  auto& entries = mplan::cli::command_registry();
  std::stable_sort(entries.begin(), entries.end(),
                   [](const auto& a, const auto& b) { return a.position < b.position; });
  for (const auto& e : entries) e.add(app);

  // An unknown first word is a mistyped command: say so, not "a subcommand is required".
  if (argc >= 2 && argv[1][0] != '-') {
    std::string word = argv[1], known;
    bool found = false;
    for (const CLI::App* sub : app.get_subcommands({})) {
      found = found || sub->get_name() == word;
      known += (known.empty() ? "" : ", ") + sub->get_name();
    }
    if (!found) {
      std::cerr << "mplan: unknown command '" << word << "' (commands: " << known
                << "; see mplan --help)\n";
      return 2;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::RequiredError& e) {
    // No subcommand given: show the overview, as most tools do, and fail.
    if (app.get_subcommands().empty() && argc == 1) {
      std::cerr << app.help();
      return 2;
    }
    std::cerr << "mplan: " << e.what() << " (see --help)\n";
    return 2;
  } catch (const CLI::ParseError& e) {
    std::cerr << "mplan: " << e.what() << " (see --help)\n";
    return 2;
  } catch (const mplan::cli::ExitWith& e) {
    return e.code;
  } catch (const mplan::Error& e) {
    std::cerr << "mplan: error: " << e.what() << "\n";
    return 2;
  } catch (const mplan::InternalError& e) {
    std::cerr << "mplan: internal error: " << e.what() << "\n";
    return 3;
  } catch (const std::exception& e) {
    std::cerr << "mplan: failed: " << e.what() << "\n";
    return 1;
  } catch (...) {
    std::cerr << "mplan: failed: unknown exception\n";
    return 1;
  }
  return 0;
}

}  // namespace mplan::cli
