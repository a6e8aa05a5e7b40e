// `mplan sweep --gpus N`: every valid plan for N GPUs simulated and ranked (sim/sweep); prints a
// summary line, the rejected candidates by rule and the top-K table, writes best.json (a plan
// file `mplan simulate`, `validate` and `run` take as it is) and optionally CSV and HTML reports.
// Exit 2 on bad input or when no candidate is valid, 1 when valid plans exist but none fits in
// memory; either way one line says why and what would help.
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <thread>

#include "cli/command_registry.hpp"
#include "cli/output.hpp"
#include "sim/calibration/uncertainty_band.hpp"
#include "sim/sweep/sweep.hpp"
#include "sim/sweep/sweep_advice.hpp"
#include "sim/sweep/sweep_args.hpp"
#include "sim/sweep/sweep_csv.hpp"
#include "sim/sweep/sweep_json.hpp"
#include "sim/sweep/sweep_report.hpp"
#include "src/common/error.hpp"

namespace mplan::cli {
namespace {

struct SweepCliOptions {
  sweep::SweepArgs args;
  int64_t global_batch = 0;  // with global_batch_opt given
  int64_t seq_length = 0;    // with seq_length_opt given
  std::string objective = "throughput";
  int64_t top = 10;
  std::string out = "best.json";
  std::string csv, report;
  int64_t threads = 0;  // with threads_opt given; else the hardware's
  double headroom_percent = sweep::kDefaultMemoryHeadroom * 100;
  double time_limit_s = 600;
  bool json = false;
  bool no_prune = false;
  std::string command_line;
  CLI::Option *global_batch_opt = nullptr, *seq_length_opt = nullptr, *threads_opt = nullptr;
};

// "[=======>      ] 1200/4800  950/s  4 s left" on stderr, redrawn in place.
void draw_progress(int64_t done, int64_t total, double elapsed_s) {
  constexpr int kWidth = 30;
  const double frac = total > 0 ? static_cast<double>(done) / static_cast<double>(total) : 1.0;
  const int filled = static_cast<int>(frac * kWidth);
  std::string bar(static_cast<size_t>(filled), '=');
  if (filled < kWidth) bar += '>';
  bar.resize(kWidth, ' ');
  const double rate = elapsed_s > 0 ? static_cast<double>(done) / elapsed_s : 0;
  std::string left = "";
  if (rate > 0 && done < total)
    left = cat("  ", format_fixed(static_cast<double>(total - done) / rate, 0), " s left");
  std::fprintf(stderr, "\r[%s] %lld/%lld candidates  %s/s%s\033[K", bar.c_str(),
               static_cast<long long>(done), static_cast<long long>(total),
               format_fixed(rate, 0).c_str(), left.c_str());
  std::fflush(stderr);
}

std::string pct(double f) { return format_fixed(f * 100.0, 1) + " %"; }

void print_text(const sweep::SweepRequest& req, const sweep::SweepResult& res,
                const SweepCliOptions& o, bool defaults_used, bool batch_default) {
  const ClusterSpec& cl = req.base.cluster;
  const int64_t nodes = (req.gpus + cl.gpus_per_node - 1) / cl.gpus_per_node;
  std::cout << "mplan sweep: " << req.base.model.name << " on " << req.gpus << " GPUs (" << nodes
            << " node" << (nodes > 1 ? "s" : "") << " of " << cl.name << ", "
            << format_gib(res.gpu_memory_bytes) << " each, plans may use "
            << format_gib(res.capacity_bytes) << ": " << format_percent(req.memory_headroom, 0)
            << " kept free, --memory-headroom); global batch " << req.global_batch_size << " x "
            << req.base.model.seq_length << " tokens"
            << (batch_default ? " (the model's default)" : "") << "; objective "
            << sweep::to_string(req.objective)
            << (req.fixed.empty() ? "" : "; fixed " + sweep::to_string(req.fixed)) << "; stack "
            << to_string(req.base.training.implementation) << " (--stack)\n";
  if (defaults_used)
    std::cout << "  (built-in defaults: --model " << sweep::kDefaultModel << " --cluster "
              << sweep::kDefaultCluster << ")\n";
  const double per_s = res.wall_time_s > 0 ? 1.0 / res.wall_time_s : 0;
  std::cout << res.candidates << " candidates: " << res.invalid << " invalid, " << res.out_of_memory
            << " out of memory (" << res.out_of_memory_pruned << " proved without simulating), ";
  if (res.skipped > 0)
    std::cout << res.skipped << " skipped (a bound keeps them below the top " << res.top_k << "), ";
  std::cout << res.simulated << " simulated, " << res.fits << " fit; "
            << format_fixed(res.wall_time_s, 2) << " s on " << res.threads << " thread"
            << (res.threads > 1 ? "s" : "") << " ("
            << format_fixed(static_cast<double>(res.candidates) * per_s, 0) << " candidates/s, "
            << format_fixed(static_cast<double>(res.simulated) * per_s, 0) << " simulated/s)\n";
  if (!res.invalid_by_rule.empty()) {
    std::cout << "invalid by rule (first example of each):\n";
    for (const auto& r : res.invalid_by_rule)
      std::cout << "  " << r.count << "  " << r.example << "\n";
  }
  if (res.ranking.empty()) return;
  const int64_t k = std::min<int64_t>(o.top, static_cast<int64_t>(res.ranking.size()));
  std::cout << "\ntop " << k << " by "
            << (req.objective == sweep::Objective::kThroughput ? "tokens/s" : "peak memory")
            << ":\n";
  const sim::UncertaintyBand band =
      sim::prediction_band(cl, req.base.training.implementation, false);
  Table t({"#", "layout", "schedule", "mbs", "M", "sp", "recompute", "offload", "dp sharding",
           "iteration", "band", "tokens/s", "TFLOP/s/GPU", "MFU", "bubble", "peak / capacity"});
  for (int64_t r = 0; r < k; ++r) {
    const sweep::Evaluated& e = res.evaluated[static_cast<size_t>(res.ranking[r])];
    const sweep::Candidate& c = e.candidate;
    const sweep::Figures& f = e.figures;
    t.add_row({std::to_string(r + 1), sweep::layout_label(c), to_string(c.schedule),
               std::to_string(c.micro_batch_size),
               std::to_string(sweep::num_microbatches(c, req.global_batch_size)),
               sweep::sp_label(c), to_string(c.recompute), sweep::offload_label(c),
               sweep::dp_sharding_label(c), format_duration(f.iteration_time_s),
               band.available ? format_duration(band.low(f.iteration_time_s)) + " - " +
                                    format_duration(band.high(f.iteration_time_s))
                              : "-",
               format_fixed(f.tokens_per_s, 0), format_fixed(f.model_tflops_per_gpu, 1), pct(f.mfu),
               pct(f.bubble_fraction),
               format_gib(f.peak_bytes) + " / " + format_gib(f.capacity_bytes)});
  }
  std::cout << t.render("  ");
  if (band.available)
    std::cout << "band: the measured time for the errors of " << band.implementation
              << "'s validation runs on " << cl.name << " (" << band.basis()
              << (band.in_sample ? "; the profile was fitted to them" : "") << ")\n";
  else
    std::cout << "no uncertainty band (" << band.why_none << ")\n";
}

// The request from the flags; a flag given with 0 or out of range is an error, never "unset".
sweep::SweepRequest request_of(SweepCliOptions& o) {
  if (o.global_batch_opt->count() > 0) o.args.global_batch = o.global_batch;
  if (o.seq_length_opt->count() > 0) o.args.seq_length = o.seq_length;
  if (o.objective == "throughput") {
    o.args.objective = sweep::Objective::kThroughput;
  } else if (o.objective == "memory") {
    o.args.objective = sweep::Objective::kMemory;
  } else {
    throw Error(cat("--objective: must be throughput or memory, got ", json_excerpt(o.objective)));
  }
  check_int_range(o.top, {1, 1000000}, "--top");
  if (o.threads_opt->count() > 0) check_int_range(o.threads, {1, 1024}, "--threads");
  check_number_range(o.time_limit_s, {1, 86400}, "--time-limit");
  o.args.memory_headroom =
      check_number_range(o.headroom_percent, {0, 90}, "--memory-headroom") / 100.0;
  if (o.out.empty()) throw Error("--out: needs a file name");
  const sweep::SweepRequest req = sweep::make_request(o.args);
  // The request in canonical form (what determines the result), for best.json and the report.
  o.command_line = cat("mplan sweep --gpus ", req.gpus, " --model ", o.args.model, " --cluster ",
                       o.args.cluster, " --global-batch ", req.global_batch_size);
  if (o.args.seq_length) o.command_line += cat(" --seq-length ", req.base.model.seq_length);
  if (!req.fixed.empty()) o.command_line += " --fix " + sweep::to_string(req.fixed);
  if (req.objective != sweep::Objective::kThroughput)
    o.command_line += cat(" --objective ", sweep::to_string(req.objective));
  if (req.base.training.implementation != Implementation::kMegatronTe)
    o.command_line += cat(" --stack ", to_string(req.base.training.implementation));
  if (req.memory_headroom != sweep::kDefaultMemoryHeadroom)
    o.command_line += cat(" --memory-headroom ", o.headroom_percent);
  return req;
}

sweep::SweepOptions options_of(const SweepCliOptions& o) {
  sweep::SweepOptions opts;
  opts.threads = o.threads_opt->count() > 0
                     ? static_cast<int>(o.threads)
                     : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  opts.prune = !o.no_prune;
  opts.top_k = o.top;
  opts.time_limit_s = o.time_limit_s;
  if (stderr_is_terminal()) {
    const auto t0 = std::chrono::steady_clock::now();
    opts.progress = [t0](int64_t done, int64_t total) {
      draw_progress(done, total,
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    };
  }
  return opts;
}

// best.json: the best plan with a description of where it came from.
Json best_plan_json(const sweep::SweepRequest& req, const sweep::Evaluated& best,
                    const Plan& best_plan, const std::string& command_line) {
  Json plan_json;
  plan_json["schema_version"] = kPlanSchemaVersion;
  plan_json["description"] =
      cat("Best of `", command_line, "` (by ", sweep::to_string(req.objective),
          "): ", sweep::layout_label(best.candidate), ", ", to_string(best.candidate.schedule),
          best.candidate.offload_layers || best.candidate.offload_modules
              ? ", activation offload " + sweep::offload_label(best.candidate)
              : "",
          "; predicted ", format_duration(best.figures.iteration_time_s), " per iteration, ",
          format_fixed(best.figures.tokens_per_s, 0), " tokens/s, peak ",
          format_gib(best.figures.peak_bytes), " (for ",
          to_string(best_plan.training.implementation), ")");
  const Json full = plan_to_json(best_plan);
  for (const char* key : {"model", "cluster", "parallel", "training"}) plan_json[key] = full[key];
  return plan_json;
}

void run_sweep_cmd(SweepCliOptions& o) {
  const sweep::SweepRequest req = request_of(o);
  const sweep::SweepOptions opts = options_of(o);
  const sweep::SweepResult res = sweep::run_sweep(req, opts);
  if (opts.progress) std::fprintf(stderr, "\r\033[K"), std::fflush(stderr);

  const bool defaults_used =
      o.args.model == sweep::kDefaultModel && o.args.cluster == sweep::kDefaultCluster;
  if (res.fits == 0) {
    if (!o.json) print_text(req, res, o, defaults_used, !o.args.global_batch);
    const std::string why = sweep::explain_no_plan(req, res, opts);
    if (res.invalid == res.candidates) throw Error(why);
    std::cerr << "mplan: " << why << "\n";  // valid plans exist; none fits: exit 1
    throw ExitWith{1};
  }

  // The best plan, simulated once more for its per-stage detail.
  const sweep::Evaluated& best = res.best();
  Plan best_plan = sweep::plan_of(req, best.candidate);
  const sim::SimulationResult best_result = sim::simulate(best_plan, sim::SimOptions{});
  write_text_file(o.out, best_plan_json(req, best, best_plan, o.command_line).dump(2) + "\n",
                  "--out");
  if (!o.csv.empty()) write_text_file(o.csv, sweep::sweep_csv(req, res), "--csv");
  if (!o.report.empty())
    write_text_file(
        o.report,
        sweep::sweep_report_html(req, res, o.top, &best_plan, &best_result, o.command_line),
        "--report");

  const std::optional<std::string> warning = sweep::batch_warning(req, best.candidate);
  if (o.json) {
    Json j = sweep::sweep_to_json(req, res, o.top, o.out);
    j["implementation"] = to_string(req.base.training.implementation);
    j["uncertainty"] = sim::band_to_json(
        sim::prediction_band(req.base.cluster, req.base.training.implementation, false),
        best.figures.iteration_time_s);  // the range is the best plan's
    j["warnings"] = Json::array();
    if (warning) j["warnings"].push_back(*warning);
    std::cout << j.dump(2) << "\n";
    return;
  }
  print_text(req, res, o, defaults_used, !o.args.global_batch);
  if (warning) std::cout << "\n" << *warning << "\n";
  std::cout << "\nwrote " << o.out << " (best plan; try `mplan simulate " << o.out << "`)";
  if (!o.csv.empty()) std::cout << ", " << o.csv;
  if (!o.report.empty()) std::cout << ", " << o.report;
  std::cout << "\n";
}

void add_sweep(CLI::App& app) {
  auto o = std::make_shared<SweepCliOptions>();
  auto* cmd = app.add_subcommand(
      "sweep", "Simulate every valid plan for N GPUs, rank them, write the best as a plan file");
  cmd->add_option("--gpus", o->args.gpus, "Number of GPUs, 1 to 2^20 (a whole number of nodes)")
      ->required();
  cmd->add_option("--model", o->args.model,
                  "Model preset or JSON file (default gpt3-175b: GPT-3 175B)");
  cmd->add_option("--cluster", o->args.cluster,
                  "Cluster preset or JSON file (default dgx-a100-80g: DGX A100 80GB nodes)");
  o->global_batch_opt =
      cmd->add_option("--global-batch", o->global_batch,
                      "Global batch in sequences, 1 to 2^24 (default: the model preset's usual "
                      "batch, 1536 for gpt3-175b)");
  o->seq_length_opt = cmd->add_option("--seq-length", o->seq_length,
                                      "Sequence length, 1 to 2097152 (default: the model's)");
  cmd->add_option("--top", o->top, "Rows of the ranking to show (default 10)");
  cmd->add_option("--memory-headroom", o->headroom_percent,
                  "Percent of GPU memory every plan leaves free (0 to 90; default 5): a plan "
                  "fits when its peak is at most the rest");
  cmd->add_option("--time-limit", o->time_limit_s,
                  "Stop with a message after this many seconds (1 to 86400; default 600)");
  cmd->add_option("--out", o->out, "Where to write the best plan (default best.json)");
  cmd->add_option("--csv", o->csv, "Also write every simulated candidate with its figures to FILE");
  cmd->add_option("--report", o->report,
                  "Also write a self-contained HTML report (scatter, top K, timeline) to FILE");
  o->threads_opt = cmd->add_option("--threads", o->threads,
                                   "Worker threads, 1 to 1024 (default: the machine's hardware "
                                   "threads); any count gives the same result");
  cmd->add_option("--fix", o->args.fix,
                  "Pin axes, e.g. tp=8,pp=16 (keys: tp cp ep etp pp vpp dp mbs sp tp_comm_overlap "
                  "recompute dist_opt fsdp schedule cp_comm_type cp_a2a overlap_p2p "
                  "offload_layers offload_modules; e.g. cp_comm_type=a2a, fsdp=optim_grads_params, "
                  "fsdp=off, offload_modules=core_attn+attn_proj)");
  cmd->add_option("--stack", o->args.stack,
                  "The stack the plans are for: megatron (= megatron-te, default; Megatron-LM "
                  "with Transformer Engine), megatron-local, or mplan (mplan's executor). Only "
                  "plans the stack runs are candidates (Megatron-LM: no zb-h1 or gpipe; mplan: "
                  "no cp, ep, MoE or fp16), predicted with the profile's set for it");
  cmd->add_option("--precision", o->args.precision,
                  "GEMM precision of every candidate: bf16 (default), fp8 (Transformer Engine, "
                  "fp8_format hybrid) or fp4 (nvfp4; Blackwell)");
  cmd->add_option("--fp8-recipe", o->args.fp8_recipe,
                  "With --precision fp8: tensorwise, delayed (default), blockwise or mxfp8 "
                  "(Blackwell)");
  cmd->add_flag("--fp8-param-gather", o->args.fp8_param_gather,
                "With --precision fp8: FP8 weights, all-gathered in FP8 (needs the distributed "
                "optimizer)");
  cmd->add_option("--objective", o->objective,
                  "Rank by throughput (tokens/s; ties: no activation offloading, then less "
                  "memory) or memory (least peak "
                  "memory; ties: more tokens/s). Default throughput");
  cmd->add_flag("--json", o->json, "Print the summary and the top K as JSON instead of text");
  cmd->add_flag("--no-prune", o->no_prune,
                "Simulate every valid candidate, also those a lower bound proves out of memory "
                "or below the top K (slower; complete counts and CSV; same top K)");
  cmd->footer(
      "Searches tp (within a node), cp, pp (uneven first/last stage when pp does not divide the\n"
      "layers), dp, ep/etp (MoE), vpp, micro-batch 1-16, sequence parallel, recompute\n"
      "none/selective/full, distributed optimizer and schedule 1f1b/interleaved/zb-h1 (zb-h1\n"
      "only with --stack mplan: Megatron-LM does not run it); with cp > 1 the exchange\n"
      "cp_comm_type p2p/all_gather/a2a/a2a+p2p (all-to-all group inside a node); activation\n"
      "offloading at recompute none (cpu_offloading_num_layers L/4, L/2, L-1 at pp 1;\n"
      "fine-grained core_attn+attn_proj or every module with Transformer Engine). Interleaved\n"
      "plans overlap their pipeline sends and receives (overlap_p2p_comm) where the stack does.\n"
      "Invalid candidates are counted by rule; those out of GPU memory are counted, not ranked;\n"
      "what lower bounds prove out of memory or below the top K is counted without simulating\n"
      "(--no-prune simulates every valid candidate; the top K is the same).\n"
      "A progress bar is drawn on stderr when it is a terminal.\n"
      "Memory: a plan fits when its peak is at most the GPU's memory less the headroom (5 % by\n"
      "default). A warning says when the global batch is too small for the GPU count.\n"
      "Exit status: 0 with a plan; 1 when valid plans exist but none fits in memory; 2 on bad\n"
      "input or when no candidate is valid (the message says what would help, e.g. the\n"
      "smallest GPU count that fits).\n"
      "Examples:\n"
      "  mplan sweep --gpus 128                          gpt3-175b on dgx-a100-80g, batch 1536\n"
      "  mplan sweep --gpus 1024 --report report.html --csv all.csv\n"
      "  mplan sweep --gpus 64 --model llama3-70b --cluster dgx-h100 --fix tp=8\n"
      "  mplan sweep --gpus 16384 --model llama3-405b --cluster dgx-h100 --top 5\n"
      "  mplan sweep --gpus 4 --model gpt3-1.3b --cluster h200x4 --stack mplan\n"
      "  mplan simulate best.json && mplan export --megatron best.json");
  cmd->callback([o] { run_sweep_cmd(*o); });
}

MPLAN_REGISTER_COMMAND(10, add_sweep);

}  // namespace
}  // namespace mplan::cli
