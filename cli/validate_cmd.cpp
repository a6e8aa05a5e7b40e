// `mplan validate PLAN.json`: parse a plan and list every broken rule (exit 2; for
// training.implementation mplan, also what the executor does not run), or print "valid"
// with the sizes derived from it and whether it fits in GPU memory (simulated peak against the
// GPU's memory): exit 0 when it fits, 1 when it is valid but does not fit.
#include <iostream>
#include <optional>

#include "cli/command_registry.hpp"
#include "cli/output.hpp"
#include "sim/plan_sim/simulate.hpp"
#include "sim/plan_sim/simulation_size.hpp"
#include "sim/sweep/stack_rules.hpp"
#include "src/batch/microbatch_calculator.hpp"
#include "src/common/error.hpp"
#include "src/plan/plan.hpp"
#include "src/plan/validate.hpp"

namespace mplan::cli {
namespace {

struct ValidateOptions {
  std::string plan_path;
  bool json = false;
};

// The memory fit of a valid plan: its simulated peak, or why it cannot be known (a plan too
// large to simulate, a cluster without the numbers the cost model needs).
struct MemoryFit {
  std::optional<sim::SimulationResult> result;
  std::string unknown_because;
};

MemoryFit memory_fit(const Plan& plan) {
  MemoryFit m;
  if (auto v = sim::check_simulation_size(plan, false)) {
    m.unknown_because = to_string(*v);
    return m;
  }
  try {
    m.result = sim::simulate(plan);
  } catch (const Error& e) {
    m.unknown_because = e.what();
  }
  return m;
}

Json memory_json(const MemoryFit& m) {
  if (!m.result) return {{"fits", nullptr}, {"unknown_because", m.unknown_because}};
  return {{"fits", m.result->fits},
          {"peak_bytes", m.result->peak_bytes},
          {"capacity_bytes", m.result->capacity_bytes}};
}

std::string memory_text(const MemoryFit& m) {
  if (!m.result) return cat("memory fit unknown: ", m.unknown_because);
  return cat("peak memory ", format_gib(m.result->peak_bytes, 2), " of ",
             format_gib(m.result->capacity_bytes, 1),
             " per GPU: ", m.result->fits ? "fits" : "DOES NOT FIT");
}

void run_validate(const ValidateOptions& o) {
  Plan plan = load_plan(o.plan_path);
  auto violations = validate(plan);
  // A plan for mplan's executor is also checked against what the executor runs, as the sweep's
  // --stack mplan counts it (what `mplan run` would refuse).
  if (violations.empty() && plan.training.implementation == Implementation::kMplan)
    if (auto v = sweep::stack_violation(plan)) violations.push_back(*v);
  const ParallelConfig& p = plan.parallel;
  std::optional<MemoryFit> fit;
  if (violations.empty()) fit = memory_fit(plan);
  if (o.json) {
    Json j;
    j["valid"] = violations.empty();
    j["violations"] = Json::array();
    for (const auto& v : violations)
      j["violations"].push_back({{"field", v.field}, {"rule", v.message}});
    j["world_size"] = plan.world_size();
    j["num_nodes"] = plan.num_nodes();
    if (violations.empty()) {
      j["num_microbatches"] = num_microbatches(p.global_batch_size, p.micro_batch_size, p.dp);
      j["memory"] = memory_json(*fit);
    }
    std::cout << j.dump(2) << "\n";
  } else if (violations.empty()) {
    std::cout << "valid: " << plan.model.name << " on " << plan.world_size() << " GPUs ("
              << plan.num_nodes() << " node" << (plan.num_nodes() > 1 ? "s" : "") << " of "
              << plan.cluster.name << "): tp " << p.tp << " cp " << p.cp << " ep " << p.ep
              << " etp " << p.etp << " pp " << p.pp << " vpp " << p.vpp << " dp " << p.dp << "; "
              << num_microbatches(p.global_batch_size, p.micro_batch_size, p.dp)
              << " micro-batches of " << p.micro_batch_size << " per step, schedule "
              << to_string(p.schedule) << "\n"
              << memory_text(*fit) << "\n";
  } else {
    std::cout << o.plan_path << ": " << violations.size() << " broken rule"
              << (violations.size() > 1 ? "s" : "") << ":\n";
    for (const auto& v : violations) std::cout << "  " << to_string(v) << "\n";
  }
  if (!violations.empty()) throw ExitWith{2};
  if (fit->result && !fit->result->fits) throw ExitWith{1};
}

void add_validate(CLI::App& app) {
  auto opts = std::make_shared<ValidateOptions>();
  auto* cmd =
      app.add_subcommand("validate", "Check a plan file against every rule and its memory fit");
  cmd->add_option("plan", opts->plan_path, "Plan JSON file ('-' reads standard input)")->required();
  cmd->add_flag("--json", opts->json,
                "Print {valid, violations: [{field, rule}], world_size, num_nodes, "
                "num_microbatches, memory: {fits, peak_bytes, capacity_bytes}}");
  cmd->footer(
      "A valid plan's memory fit comes from its simulated peak (as `mplan simulate`); it is\n"
      "unknown when the cluster lacks the numbers the cost model needs.\n"
      "Exit status: 0 when valid and fitting (or its fit unknown); 1 when valid but it does not\n"
      "fit in GPU memory; 2 when a rule is broken or the file cannot be read.\n"
      "Examples:\n"
      "  mplan validate best.json\n"
      "  mplan validate configs/plans/gpt3-1.3b-dp4.json --json");
  cmd->callback([opts] { run_validate(*opts); });
}

MPLAN_REGISTER_COMMAND(90, add_validate);

}  // namespace
}  // namespace mplan::cli
