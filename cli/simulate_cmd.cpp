// `mplan simulate PLAN.json`: predict one training iteration of a plan by discrete-event
// simulation — iteration time, throughput, model TFLOP/s and MFU, the time breakdown, and peak
// memory per pipeline stage — as text, JSON (--json) and a Chrome trace (--trace, one event per
// schedule action; --trace-level ops adds every kernel). An invalid plan lists every broken rule
// and exits 2; a valid plan that does not fit in GPU memory exits 1 (--allow-oom: 0).
#include <fstream>
#include <iostream>
#include <memory>

#include "cli/command_registry.hpp"
#include "cli/output.hpp"
#include "sim/calibration/uncertainty_band.hpp"
#include "sim/plan_sim/simulate.hpp"
#include "sim/plan_sim/simulation_json.hpp"
#include "sim/plan_sim/simulation_size.hpp"
#include "sim/plan_sim/trace_summary.hpp"
#include "src/common/error.hpp"
#include "src/common/units.hpp"
#include "src/plan/plan.hpp"
#include "src/plan/validate.hpp"

namespace mplan::cli {
namespace {

struct SimulateOptions {
  std::string plan_path;
  std::string hardware;
  std::string stack;
  std::string trace_path;
  bool json = false;
  bool full_grid = false;
  bool no_dropout = false;
  bool no_fusion = false;
  bool scatter_gather = false;
  bool allow_oom = false;
  std::string trace_level = "summary";
};

std::string pct(double part, double whole) {
  return whole > 0 ? format_percent(part / whole) : "-";
}

// "band 6.91 s - 7.62 s (in-sample, 18 runs, 10th-90th percentile of megatron-te's validation
// residuals)" or "no uncertainty band (<why>)".
template <class Format>
std::string band_text(const Plan& plan, double predicted, bool memory, Format fmt) {
  const sim::UncertaintyBand b =
      sim::prediction_band(plan.cluster, plan.training.implementation, memory);
  if (!b.available) return cat("no uncertainty band (", b.why_none, ")");
  return cat("band ", fmt(b.low(predicted)), " - ", fmt(b.high(predicted)), " (", b.basis(), " of ",
             b.implementation, "'s validation residuals)");
}

void print_text(const Plan& plan, const sim::SimulationResult& r, const std::string& trace) {
  const ParallelConfig& p = plan.parallel;
  std::cout << plan.model.name << " on " << plan.world_size() << " GPU"
            << (plan.world_size() > 1 ? "s" : "") << " of " << plan.cluster.name << " ("
            << plan.cluster.gpu.name << "): tp " << p.tp << " cp " << p.cp << " ep " << p.ep
            << " pp " << p.pp << " vpp " << p.vpp << " dp " << p.dp
            << (p.sequence_parallel && p.tp > 1 ? " sp" : "") << ", " << r.num_microbatches
            << " micro-batches of " << p.micro_batch_size << ", schedule " << to_string(p.schedule)
            << ", recompute " << to_string(p.recompute) << "\n";
  std::cout << "predicted for " << to_string(plan.training.implementation) << ": "
            << describe(plan.training.implementation) << " (--stack)\n\n";
  auto line = [](const char* label, const std::string& value) {
    std::string l = label;
    l.resize(24, ' ');
    std::cout << l << value << "\n";
  };
  line("iteration time", format_duration(r.iteration_time_s));
  line("", band_text(plan, r.iteration_time_s, false, format_duration));
  line("tokens/s",
       cat(format_fixed(r.tokens_per_s, 0), " (",
           format_fixed(r.tokens_per_s / static_cast<double>(plan.world_size()), 0), " per GPU)"));
  line("model TFLOP/s per GPU",
       cat(format_fixed(r.model_tflops_per_gpu, 1),
           " (Megatron-LM's num_floating_point_operations; recompute not counted)"));
  line("MFU", cat(format_percent(r.mfu), " of ", format_fixed(plan.cluster.gpu.peak_bf16_tflops, 0),
                  " TFLOP/s dense bf16"));
  if (p.pp > 1) line("pipeline bubble", format_percent(r.bubble_fraction));

  const sim::TimeBreakdown& b = r.breakdown;
  std::cout << "\ntime breakdown (pipeline stage " << r.critical_stage
            << ", the busiest; exposed communication only):\n";
  Table bt({"part", "time", "share"});
  const double it = r.iteration_time_s;
  auto row = [&](const char* name, double s) {
    bt.add_row({name, format_duration(s), pct(s, it)});
  };
  row("compute (incl. recompute)", b.compute_s);
  row("tensor-parallel comm", b.tp_comm_s);
  row("context-parallel comm", b.cp_comm_s);
  row("expert-parallel comm", b.ep_comm_s);
  row("pipeline send/recv", b.pp_comm_s);
  row("data-parallel comm", b.dp_comm_s);
  row("pipeline bubble", b.bubble_s);
  row("optimizer", b.optimizer_s);
  std::cout << bt.render("  ");

  std::cout << "\npeak memory per pipeline stage (GiB = 2^30 bytes; other = workspaces, buffers"
               " and the profile's "
            << format_gib(r.runtime_overhead_bytes) << " runtime overhead):\n";
  Table mt({"stage", "peak", "weights", "grads", "optimizer", "activations", "other"});
  for (const sim::StageMemory& s : r.per_stage)
    mt.add_row({cat(s.pp_rank), format_gib(s.peak_bytes, 2), format_gib(s.weights_bytes, 2),
                format_gib(s.grads_bytes, 2), format_gib(s.optimizer_bytes, 2),
                format_gib(s.activations_bytes, 2), format_gib(s.other_bytes, 2)});
  std::cout << mt.render("  ");
  std::cout << "peak " << format_gib(r.peak_bytes, 2) << " of " << format_gib(r.capacity_bytes, 1)
            << " per GPU: " << (r.fits ? "fits" : "DOES NOT FIT") << "\n";
  const std::string mem_band = band_text(plan, static_cast<double>(r.peak_bytes), true,
                                         [](double b) { return format_gib(std::llround(b), 2); });
  std::cout << "peak memory" << (mem_band.rfind("band", 0) == 0 ? " " : ": ") << mem_band << "\n";
  if (!trace.empty()) std::cout << "trace written to " << trace << "\n";
}

sim::TraceLevel trace_level_of(const std::string& s) {
  if (s == "summary") return sim::TraceLevel::kSummary;
  if (s == "ops") return sim::TraceLevel::kOps;
  throw Error(cat("--trace-level: must be summary or ops, got ", json_excerpt(s)));
}

void run_simulate(const SimulateOptions& o) {
  const sim::TraceLevel level = trace_level_of(o.trace_level);
  Plan plan = load_plan(o.plan_path);
  if (!o.hardware.empty()) plan.cluster = load_cluster(o.hardware, "--hardware");
  if (!o.stack.empty()) apply_stack(plan, stack_of(o.stack));
  std::vector<Violation> broken = validate(plan);
  if (broken.empty())
    if (auto v = sim::check_simulation_size(plan, o.full_grid)) broken.push_back(*v);
  if (!broken.empty()) {
    std::cerr << o.plan_path << ": " << broken.size() << " broken rule"
              << (broken.size() > 1 ? "s" : "") << ":\n";
    for (const Violation& v : broken) std::cerr << "  " << to_string(v) << "\n";
    throw ExitWith{2};
  }
  sim::SimOptions so;
  so.full_grid = o.full_grid;
  so.record_trace = !o.trace_path.empty();
  so.dropout = !o.no_dropout;
  so.fused_kernels = !o.no_fusion;
  so.pipeline_scatter_gather = o.scatter_gather;
  const sim::SimulationResult r = sim::simulate(plan, so);
  if (so.record_trace) {
    std::ofstream f(o.trace_path);
    if (!f) throw Error(cat("--trace: cannot write '", o.trace_path, "'"));
    sim::write_trace(f, r, level);
    if (!f) throw Error(cat("--trace: cannot write '", o.trace_path, "'"));
  }
  if (o.json) {
    Json j = sim::simulation_to_json(r);
    j["plan"] = o.plan_path;
    j["hardware"] = plan.cluster.name;
    j["implementation"] = to_string(plan.training.implementation);
    j["uncertainty"] = {
        {"iteration_time_s",
         sim::band_to_json(sim::prediction_band(plan.cluster, plan.training.implementation, false),
                           r.iteration_time_s)},
        {"peak_bytes",
         sim::band_to_json(sim::prediction_band(plan.cluster, plan.training.implementation, true),
                           static_cast<double>(r.peak_bytes))}};
    j["full_grid"] = o.full_grid;
    j["dropout"] = so.dropout;
    j["fused_kernels"] = so.fused_kernels;
    j["scatter_gather_tensors_in_pipeline"] = so.pipeline_scatter_gather;
    std::cout << j.dump(2) << "\n";
  } else {
    print_text(plan, r, o.trace_path);
  }
  if (!r.fits && !o.allow_oom) {
    std::cerr << "mplan: " << o.plan_path << " does not fit: peak " << format_gib(r.peak_bytes, 2)
              << " of " << format_gib(r.capacity_bytes, 1)
              << " per GPU (exit 1; --allow-oom reports without failing)\n";
    throw ExitWith{1};
  }
}

void add_simulate(CLI::App& app) {
  auto opts = std::make_shared<SimulateOptions>();
  auto* cmd = app.add_subcommand(
      "simulate", "Predict iteration time, throughput and per-stage peak memory of a plan");
  cmd->add_option("plan", opts->plan_path, "Plan JSON file ('-' reads standard input)")->required();
  cmd->add_option("--hardware", opts->hardware,
                  "Hardware profile replacing the plan's cluster: a preset name (h200x4, "
                  "dgx-a100-80g, dgx-h100, dgx-h200) or a cluster JSON file");
  cmd->add_option("--stack", opts->stack,
                  "The stack the prediction is for, replacing the plan's training.implementation: "
                  "megatron (= megatron-te, Megatron-LM with Transformer Engine), megatron-local "
                  "or mplan (mplan's executor); it picks the profile's efficiency set and "
                  "validation residuals");
  cmd->add_flag("--json", opts->json,
                "Print the result as JSON (iteration_time_s, tokens_per_s, model_tflops_per_gpu, "
                "mfu, breakdown, memory, ...)");
  cmd->add_option("--trace", opts->trace_path,
                  "Write a Chrome trace-event JSON of the simulated iteration (open in Perfetto): "
                  "one process per rank, one thread per stream, one event per schedule action");
  cmd->add_option("--trace-level", opts->trace_level,
                  "summary (default: one event per forward/backward pass, transfer, bucket and "
                  "step) or ops (also every GEMM, kernel and collective inside them; about ten "
                  "times larger)");
  cmd->add_flag("--allow-oom", opts->allow_oom,
                "Exit 0 on a plan that does not fit in GPU memory (the report says so)");
  cmd->add_flag("--full-grid", opts->full_grid,
                "Simulate every GPU instead of one rank per pipeline stage (same result, slower)");
  cmd->add_flag("--no-dropout", opts->no_dropout,
                "As Megatron-LM with --attention-dropout 0 --hidden-dropout 0 (no masks kept)");
  cmd->add_flag("--no-fusion", opts->no_fusion,
                "As Megatron-LM with --no-masked-softmax-fusion --no-bias-gelu-fusion "
                "--no-bias-dropout-fusion --no-gradient-accumulation-fusion");
  cmd->add_flag("--scatter-gather-tensors-in-pipeline", opts->scatter_gather,
                "As Megatron-LM 2021-22 (SC'21): without sequence parallelism each tensor-parallel "
                "rank sends 1/tp of a pipeline tensor, the receivers all-gather it");
  cmd->footer(
      "Exit status: 0 on success; 1 when the plan is valid but does not fit in GPU memory\n"
      "(--allow-oom: 0); 2 when the plan breaks a rule, is too large to simulate, or a file\n"
      "cannot be read.\n"
      "Examples:\n"
      "  mplan simulate configs/plans/gpt3-1.3b-dp4.json\n"
      "  mplan simulate best.json --hardware dgx-h100 --json\n"
      "  mplan simulate best.json --stack mplan           as `mplan run` would train it\n"
      "  mplan simulate best.json --trace trace.json      # open in https://ui.perfetto.dev");
  cmd->callback([opts] { run_simulate(*opts); });
}

MPLAN_REGISTER_COMMAND(12, add_simulate);

}  // namespace
}  // namespace mplan::cli
