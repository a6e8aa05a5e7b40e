// `mplan export --megatron PLAN.json`: the Megatron-LM job of a plan, as a ready torchrun script
// (default), a plain argument list for pretrain_gpt.py, or JSON. What Megatron-LM cannot express
// exactly is listed on stderr (and as comments in the script); the plan itself must be valid.
// The launch names the stack its prediction is for (--stack, else the plan's Megatron-LM
// implementation) with the predicted iteration time and its uncertainty band.
#include <filesystem>
#include <iostream>

#include "cli/command_registry.hpp"
#include "cli/output.hpp"
#include "sim/calibration/uncertainty_band.hpp"
#include "sim/plan_sim/simulate.hpp"
#include "sim/plan_sim/simulation_size.hpp"
#include "src/common/error.hpp"
#include "src/interop/megatron/megatron_export.hpp"
#include "src/plan/plan.hpp"

namespace mplan::cli {
namespace {

struct ExportOptions {
  std::string plan_path;
  std::string format = "torchrun";
  std::string out;
  std::string stack;
  bool legacy_rampup = false;
  int64_t train_iters = 0;
};

// The stack the launch runs: --stack (a Megatron-LM implementation), else the plan's when it
// is one, else megatron-te (Megatron-LM's default --transformer-impl).
Implementation export_stack(const ExportOptions& o, const Plan& plan) {
  if (!o.stack.empty()) {
    const Implementation impl = stack_of(o.stack);
    if (impl == Implementation::kMplan)
      throw Error(
          "--stack: export writes a Megatron-LM launch; must be megatron, megatron-te or "
          "megatron-local, got \"mplan\"");
    return impl;
  }
  return plan.training.implementation == Implementation::kMplan ? Implementation::kMegatronTe
                                                                : plan.training.implementation;
}

// The prediction the launch comes with, as JSON: {"implementation", "description",
// "iteration_time_s", "uncertainty"} or, when the simulator refuses the plan, {"implementation",
// "description", "error"}.
Json prediction_of(Plan plan, Implementation impl) {
  apply_stack(plan, impl);
  Json j;
  j["implementation"] = to_string(impl);
  j["description"] = describe(impl);
  try {
    if (auto v = sim::check_simulation_size(plan, false)) throw Error(to_string(*v));
    const sim::SimulationResult r = sim::simulate(plan, sim::SimOptions{});
    j["iteration_time_s"] = r.iteration_time_s;
    j["uncertainty"] =
        sim::band_to_json(sim::prediction_band(plan.cluster, impl, false), r.iteration_time_s);
  } catch (const Error& e) {
    j["error"] = e.what();
  }
  return j;
}

// "prediction for megatron-te on dgx-h100 (Megatron-LM with Transformer Engine): 7.14 s per
// iteration, band 6.91 s - 7.62 s (in-sample, 18 runs, 10th-90th percentile)".
std::string prediction_line(const Json& p, const std::string& cluster) {
  std::string s = cat("prediction for ", p["implementation"].get<std::string>(), " on ", cluster,
                      " (", p["description"].get<std::string>(), "): ");
  if (p.contains("error")) return s + "none (" + p["error"].get<std::string>() + ")";
  const double t = p["iteration_time_s"].get<double>();
  s += format_duration(t) + " per iteration";
  const Json& u = p["uncertainty"];
  if (!u["available"].get<bool>())
    return s + ", no uncertainty band (" + u["reason"].get<std::string>() + ")";
  return cat(s, ", band ", format_duration(u["range"][0].get<double>()), " - ",
             format_duration(u["range"][1].get<double>()), " (",
             u["in_sample"].get<bool>() ? "in-sample" : "out-of-sample", ", ",
             u["runs"].get<size_t>(), " validation runs)");
}

void run_export(const ExportOptions& o) {
  Plan plan = load_plan(o.plan_path);
  const Implementation stack = export_stack(o, plan);
  MegatronExportOptions eo;
  eo.legacy_rampup = o.legacy_rampup;
  eo.train_iters = o.train_iters;
  MegatronLaunch launch;
  try {
    launch = megatron_launch_from_plan(plan, eo);
  } catch (const Error& e) {
    throw Error(cat(o.plan_path, ": ", e.what()));
  }
  const Json prediction = prediction_of(plan, stack);
  launch.notes.push_back(prediction_line(prediction, plan.cluster.name));
  if (stack == Implementation::kMegatronLocal)
    launch.notes.push_back(
        "megatron-local: run Megatron-LM with --transformer-impl local (the prediction assumes "
        "it)");
  const ParallelConfig& p = plan.parallel;
  std::string name = o.plan_path == "-" ? "standard input"
                                        : std::filesystem::path(o.plan_path).filename().string();
  std::string title = cat(plan.model.name, " on ", plan.world_size(), " GPUs of ",
                          plan.cluster.name, ": tp ", p.tp, " cp ", p.cp, " pp ", p.pp, " vpp ",
                          p.vpp, " dp ", p.dp, " ep ", p.ep, " etp ", p.etp, " (from ", name, ")");
  std::string text;
  if (o.format == "torchrun") {
    text = render_megatron_torchrun(launch, title);
  } else if (o.format == "args") {
    text = render_megatron_args(launch);
  } else {
    Json j = megatron_launch_to_json(launch);
    j["prediction"] = prediction;
    text = j.dump(2) + "\n";
  }
  for (const auto& n : launch.notes) std::cerr << "mplan: note: " << n << "\n";
  if (o.out.empty() || o.out == "-") {
    std::cout << text;
    return;
  }
  write_text_file(o.out, text, "--out");
  if (o.format == "torchrun") {
    std::error_code ec;  // executable like Megatron-LM's example scripts; best effort
    std::filesystem::permissions(o.out,
                                 std::filesystem::perms::owner_exec |
                                     std::filesystem::perms::group_exec |
                                     std::filesystem::perms::others_exec,
                                 std::filesystem::perm_options::add, ec);
  }
  std::cout << "wrote " << o.out << ": Megatron-LM " << o.format << " for " << title << "\n";
}

void add_export(CLI::App& app) {
  auto opts = std::make_shared<ExportOptions>();
  auto* cmd = app.add_subcommand(
      "export",
      "Write a plan as a Megatron-LM launch (torchrun ... pretrain_gpt.py with its arguments)");
  cmd->add_option("--megatron", opts->plan_path,
                  "Plan JSON file to export for Megatron-LM ('-' reads standard input)")
      ->required();
  cmd->add_option("--format", opts->format,
                  "torchrun: a ready bash launch script (default); args: pretrain_gpt.py's "
                  "arguments, one per line; json: launcher, groups and argv as JSON")
      ->check(CLI::IsMember({"torchrun", "args", "json"}));
  cmd->add_option("--out", opts->out, "Write to this file instead of standard output");
  cmd->add_option("--stack", opts->stack,
                  "The Megatron-LM implementation the launch and its prediction are for: "
                  "megatron (= megatron-te, Transformer Engine) or megatron-local (default: the "
                  "plan's training.implementation when it is one of them, else megatron-te)");
  cmd->add_option("--train-iters", opts->train_iters,
                  "Iterations to train (--train-iters); default: the plan's training.train_iters, "
                  "else 100")
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--legacy-rampup", opts->legacy_rampup,
                "Write a batch ramp-up as --rampup-batch-size (Megatron-LM before "
                "--step-batch-size-schedule) instead of the equivalent step schedule");
  cmd->footer(
      "The plan must be valid (mplan validate). The script runs as it is: every argument the\n"
      "plan and its prediction depend on is written (--train-iters, --moe-grouped-gemm and\n"
      "--moe-token-dispatcher-type alltoall for MoE models, a preset's --rotary-base, ...).\n"
      "Fields Megatron-LM cannot express exactly (a zb-h1 or gpipe schedule, sequence\n"
      "parallelism with tp 1, ...) are listed on stderr and as comments in the script. The\n"
      "script trains on synthetic data (--mock-data with a NullTokenizer of the model's\n"
      "vocabulary); replace DATA_ARGS for real data. '# mplan:' lines keep the cluster (and mark\n"
      "a --train-iters the plan did not set) for mplan import. A note names the stack the\n"
      "prediction is for, with the predicted iteration time and its uncertainty band.\n"
      "Examples:\n"
      "  mplan export --megatron best.json > train.sh       torchrun script, 'bash train.sh' on "
      "each node\n"
      "  mplan export --megatron best.json --out train.sh   the same, written to train.sh\n"
      "  mplan export --megatron best.json --format args    pretrain_gpt.py's arguments only\n"
      "  mplan export --megatron best.json --format json    for tools\n"
      "  mplan export --megatron best.json --train-iters 500\n"
      "  mplan import --megatron train.sh --out again.json  the way back (identical plan)");
  cmd->callback([opts] { run_export(*opts); });
}

MPLAN_REGISTER_COMMAND(80, add_export);

}  // namespace
}  // namespace mplan::cli
