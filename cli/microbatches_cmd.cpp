// `mplan microbatches`: Megatron-LM's micro-batch count for a global batch, micro batch and data
// parallel size, constant or along a batch-size ramp-up. Every input Megatron would refuse
// (including a ramp-up step whose batch is not divisible by micro x dp) exits 2 naming the flag.
#include <algorithm>
#include <iostream>
#include <memory>

#include "cli/command_registry.hpp"
#include "cli/output.hpp"
#include "src/batch/microbatch_calculator.hpp"
#include "src/common/error.hpp"
#include "src/common/json_reader.hpp"

namespace mplan::cli {
namespace {

struct MicrobatchesOptions {
  int64_t global_batch = 0;
  int64_t micro_batch = 0;
  int64_t dp = 0;
  std::vector<int64_t> rampup;
  std::vector<int64_t> consumed_samples;
  bool decrease = false;
  bool json = false;
};

const BatchFieldNames kFlagNames{"--global-batch", "--micro-batch", "--dp", "--rampup",
                                 "--consumed-samples"};

Json state_json(const BatchState& s, bool decrease) {
  Json j;
  j["consumed_samples"] = s.consumed_samples;
  j["global_batch_size"] = s.global_batch_size;
  if (decrease) j["running_global_batch_size"] = s.running_global_batch_size;
  j["num_microbatches"] = s.num_microbatches;
  return j;
}

std::string batch_cell(const BatchState& s) {
  if (s.running_global_batch_size == s.global_batch_size)
    return std::to_string(s.global_batch_size);
  return std::to_string(s.global_batch_size) + " (runs " +
         std::to_string(s.running_global_batch_size) + ")";
}

// The upper ends of the plan file's batch fields (docs/plan-file.md), and a ramp of at most 2^16
// batch-size changes (published ramps have tens), so the table printed stays bounded. The lower
// ends and the rules between the values are the calculator's (in Megatron's words).
void check_ranges(const MicrobatchesOptions& o) {
  constexpr int64_t kAny = INT64_MIN;
  check_int_range(o.global_batch, {kAny, 1 << 24}, "--global-batch");
  check_int_range(o.micro_batch, {kAny, 1 << 24}, "--micro-batch");
  check_int_range(o.dp, {kAny, 1 << 20}, "--dp");
  for (int64_t c : o.consumed_samples)
    check_int_range(c, {kAny, int64_t{1} << 50}, "--consumed-samples");
  if (o.rampup.empty()) return;
  check_int_range(o.rampup[0], {kAny, 1 << 24}, "--rampup START");
  check_int_range(o.rampup[1], {kAny, 1 << 24}, "--rampup INCR");
  check_int_range(o.rampup[2], {kAny, int64_t{1} << 40}, "--rampup SAMPLES");
  if (o.rampup[0] < 1 || o.rampup[1] < 1) return;
  const int64_t steps = (o.global_batch - std::min(o.rampup[0], o.global_batch)) / o.rampup[1];
  if (steps > (1 << 16))
    throw Error(cat("--rampup: ", steps, " batch-size changes from ", o.rampup[0], " to ",
                    o.global_batch, " in steps of ", o.rampup[1],
                    "; at most 65536 (use a larger INCR)"));
}

void run_microbatches(const MicrobatchesOptions& o) {
  check_ranges(o);
  MicrobatchSpec spec;
  spec.global_batch_size = o.global_batch;
  spec.micro_batch_size = o.micro_batch;
  spec.data_parallel_size = o.dp;
  spec.decrease_batch_size_if_needed = o.decrease;
  if (!o.rampup.empty()) spec.rampup = RampupBatchSize{o.rampup[0], o.rampup[1], o.rampup[2]};
  MicrobatchCalculator calc(spec, kFlagNames);
  // Megatron checks every iteration's batch during training: refuse a ramp that fails anywhere
  // (at() throws for a batch not divisible by M x D, or one that leaves no micro-batch).
  std::vector<RampStep> steps = calc.ramp_steps();
  for (const auto& step : steps) calc.at(step.state.consumed_samples);

  std::vector<BatchState> samples;
  for (int64_t c : o.consumed_samples) samples.push_back(calc.at(c));
  const int64_t md = calc.micro_times_dp();

  if (!calc.has_rampup()) {
    BatchState s = calc.at(0);
    if (o.json) {
      Json j;
      j["global_batch_size"] = s.global_batch_size;
      if (o.decrease) j["running_global_batch_size"] = s.running_global_batch_size;
      j["num_microbatches"] = s.num_microbatches;
      if (!samples.empty()) {
        j["samples"] = Json::array();
        for (const auto& st : samples) j["samples"].push_back(state_json(st, o.decrease));
      }
      std::cout << j.dump(2) << "\n";
      return;
    }
    std::cout << "global batch " << batch_cell(s) << " = " << s.num_microbatches << " micro-batch"
              << (s.num_microbatches > 1 ? "es" : "") << " x micro batch " << o.micro_batch
              << " x dp " << o.dp << "\n";
    if (!samples.empty()) {
      Table t({"consumed samples", "global batch", "micro-batches"});
      for (const auto& st : samples)
        t.add_row({std::to_string(st.consumed_samples), batch_cell(st),
                   std::to_string(st.num_microbatches)});
      std::cout << t.render("  ");
    }
    return;
  }

  if (o.json) {
    Json j;
    j["samples"] = Json::array();
    if (!samples.empty()) {
      for (const auto& st : samples) j["samples"].push_back(state_json(st, o.decrease));
    } else {
      for (const auto& step : steps) {
        Json s = state_json(step.state, o.decrease);
        s["first_iteration"] = step.first_iteration;
        if (step.num_iterations > 0) s["num_iterations"] = step.num_iterations;
        j["samples"].push_back(s);
      }
    }
    std::cout << j.dump(2) << "\n";
    return;
  }

  const RampupBatchSize& r = *spec.rampup;
  std::cout << "batch-size ramp-up from " << r.start << " to " << o.global_batch << " in steps of "
            << r.increment << " over " << r.samples << " samples; micro batch " << o.micro_batch
            << " x dp " << o.dp << " = " << md << " samples per micro-batch round\n";
  if (!samples.empty()) {
    Table t({"consumed samples", "global batch", "micro-batches"});
    for (const auto& s : samples)
      t.add_row(
          {std::to_string(s.consumed_samples), batch_cell(s), std::to_string(s.num_microbatches)});
    std::cout << t.render("  ");
    return;
  }
  Table t({"iteration", "consumed samples", "global batch", "micro-batches", "iterations"});
  for (const auto& step : steps)
    t.add_row({std::to_string(step.first_iteration), std::to_string(step.state.consumed_samples),
               batch_cell(step.state), std::to_string(step.state.num_microbatches),
               step.num_iterations > 0 ? std::to_string(step.num_iterations) : "to the end"});
  std::cout << t.render("  ");
  const RampStep& last = steps.back();
  std::cout << "the ramp-up takes " << last.first_iteration << " iterations and "
            << last.state.consumed_samples << " samples; " << steps.size() - 1
            << " batch-size change" << (steps.size() == 2 ? "" : "s") << "\n";
}

void add_microbatches(CLI::App& app) {
  auto opts = std::make_shared<MicrobatchesOptions>();
  auto* cmd = app.add_subcommand(
      "microbatches",
      "Micro-batches per iteration (Megatron's rules), constant or along a batch-size ramp-up");
  cmd->add_option("--global-batch", opts->global_batch,
                  "Global batch size G in samples (--global-batch-size; the final one with a ramp)")
      ->required();
  cmd->add_option("--micro-batch", opts->micro_batch, "Micro batch size M (--micro-batch-size)")
      ->required();
  cmd->add_option("--dp", opts->dp, "Data parallel size D")->required();
  cmd->add_option("--rampup", opts->rampup,
                  "START INCR SAMPLES: Megatron's --rampup-batch-size (start batch, increment, "
                  "ramp-up samples)")
      ->expected(3);
  cmd->add_option("--consumed-samples", opts->consumed_samples,
                  "Consumed-sample counts to evaluate (one or more; repeatable)")
      ->expected(1, 1 << 16);
  cmd->add_flag("--decrease-batch-size-if-needed", opts->decrease,
                "Round each global batch down to a multiple of M x D (Megatron's flag)");
  cmd->add_flag("--json", opts->json,
                "Print JSON: {global_batch_size, num_microbatches}, or with --rampup "
                "{samples: [{consumed_samples, global_batch_size, num_microbatches}...]}");
  cmd->footer(
      "Rules (Megatron-LM): G divisible by M x D; with a ramp-up, G >= START, (G - START) "
      "divisible by INCR,\nand every batch a run passes through divisible by M x D. Exit "
      "status 2 when a rule is broken.\n"
      "Examples:\n"
      "  mplan microbatches --global-batch 64 --micro-batch 4 --dp 4\n"
      "  mplan microbatches --global-batch 1536 --micro-batch 1 --dp 64 --rampup 64 64 1000000\n"
      "  mplan microbatches --global-batch 32 --micro-batch 8 --dp 2 --rampup 16 16 96 "
      "--consumed-samples 0 96 200 --json\n");
  cmd->callback([opts] { run_microbatches(*opts); });
}

MPLAN_REGISTER_COMMAND(30, add_microbatches);

}  // namespace
}  // namespace mplan::cli
