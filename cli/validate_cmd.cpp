// `mplan validate PLAN.json`: parse a plan and list every broken rule (exit 2), or print "valid"
// with the sizes derived from it (exit 0).
#include <iostream>

#include "cli/command_registry.hpp"
#include "src/plan/plan.hpp"
#include "src/plan/validate.hpp"

namespace mplan::cli {
namespace {

struct ValidateOptions {
  std::string plan_path;
  bool json = false;
};

void run_validate(const ValidateOptions& o) {
  Plan plan = load_plan(o.plan_path);
  auto violations = validate(plan);
  const ParallelConfig& p = plan.parallel;
  if (o.json) {
    Json j;
    j["valid"] = violations.empty();
    j["violations"] = Json::array();
    for (const auto& v : violations) j["violations"].push_back({{"field", v.field}, {"rule", v.message}});
    j["world_size"] = plan.world_size();
    j["num_nodes"] = plan.num_nodes();
    if (violations.empty())
      j["num_microbatches"] = p.global_batch_size / (p.micro_batch_size * p.dp);
    std::cout << j.dump(2) << "\n";
  } else if (violations.empty()) {
    std::cout << "valid: " << plan.model.name << " on " << plan.world_size() << " GPUs ("
              << plan.num_nodes() << " node" << (plan.num_nodes() > 1 ? "s" : "") << " of "
              << plan.cluster.name << "): tp " << p.tp << " cp " << p.cp << " ep " << p.ep
              << " etp " << p.etp << " pp " << p.pp << " vpp " << p.vpp << " dp " << p.dp
              << "; " << p.global_batch_size / (p.micro_batch_size * p.dp)
              << " micro-batches of " << p.micro_batch_size << " per step, schedule "
              << to_string(p.schedule) << "\n";
  } else {
    std::cout << o.plan_path << ": " << violations.size() << " broken rule"
              << (violations.size() > 1 ? "s" : "") << ":\n";
    for (const auto& v : violations) std::cout << "  " << to_string(v) << "\n";
  }
  if (!violations.empty()) throw ExitWith{2};
}

void add_validate(CLI::App& app) {
  auto opts = std::make_shared<ValidateOptions>();
  auto* cmd = app.add_subcommand("validate", "Check a plan file against every rule; list what is broken");
  cmd->add_option("plan", opts->plan_path, "Plan JSON file ('-' reads standard input)")->required();
  cmd->add_flag("--json", opts->json, "Print {valid, violations: [{field, rule}], world_size, ...}");
  cmd->footer(
      "Exit status: 0 when valid, 2 when a rule is broken or the file cannot be read.\n"
      "Examples:\n"
      "  mplan validate best.json\n"
      "  mplan validate configs/plans/gpt3-1.3b-dp4.json --json");
  cmd->callback([opts] { run_validate(*opts); });
}

MPLAN_REGISTER_COMMAND(90, add_validate);

}  // namespace
}  // namespace mplan::cli
