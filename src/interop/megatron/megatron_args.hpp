// Megatron-LM interoperability: a plan as the arguments of Megatron-LM's pretrain_gpt.py
// (export), and a Megatron-LM launch script or argument list as a plan (import). The mapping
// table between plan fields and arguments is in megatron_args.cpp (docs/megatron-interop.md).
// Invariant: plan -> arguments -> plan is the identity for every plan whose fields Megatron-LM
// can express; export lists in `notes` each field it cannot (e.g. schedule zb-h1).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "src/common/json_reader.hpp"
#include "src/plan/plan.hpp"

namespace mplan {

// One argument with its values as given on the command line ({"--num-layers", {"96"}}).
struct MegatronArg {
  std::string name;
  std::vector<std::string> values;  // empty for a flag such as --bf16
  bool operator==(const MegatronArg&) const = default;
};

// A bash array of arguments in the rendered script, named as in Megatron-LM's examples.
struct MegatronArgGroup {
  std::string name;  // "GPT_MODEL_ARGS", "MOE_ARGS", "TRAINING_ARGS", ...
  std::vector<MegatronArg> args;
};

// A Megatron-LM job: torchrun's process layout, the environment and pretrain_gpt.py's arguments.
struct MegatronLaunch {
  int64_t nproc_per_node = 1;
  int64_t nnodes = 1;
  std::string script = "pretrain_gpt.py";
  std::vector<std::pair<std::string, std::string>> env;  // exported before the launch
  std::vector<MegatronArgGroup> groups;
  std::vector<std::string> notes;  // plan fields the arguments cannot express exactly
};

struct MegatronExportOptions {
  // Batch ramp-up as --rampup-batch-size START INCR SAMPLES with --global-batch-size (Megatron-LM
  // releases before --step-batch-size-schedule); the default writes the equivalent step schedule,
  // because the current Megatron-LM ignores --rampup-batch-size.
  bool legacy_rampup = false;
};

// The Megatron-LM job of a plan. Throws Error naming the field when the plan is invalid or uses
// something Megatron-LM has no argument for (a rank order other than its two).
MegatronLaunch megatron_launch_from_plan(const Plan& plan,
                                         const MegatronExportOptions& options = {});
// pretrain_gpt.py's arguments, flat, in group order.
std::vector<std::string> megatron_argv(const MegatronLaunch& launch);
// A bash script in the style of Megatron-LM's examples: variables, one array per group, and
// `torchrun "${DISTRIBUTED_ARGS[@]}" pretrain_gpt.py "${GPT_MODEL_ARGS[@]}" ...` with `\` lines.
// `title` becomes the first comment line.
std::string render_megatron_torchrun(const MegatronLaunch& launch, const std::string& title);
// The arguments only, one per line with its values, shell-quoted where needed.
std::string render_megatron_args(const MegatronLaunch& launch);
Json megatron_launch_to_json(const MegatronLaunch& launch);
// Quotes a word for bash when it holds anything but [A-Za-z0-9_./:=,+@%-].
std::string shell_quote(const std::string& word);

// The global batch after `consumed_samples` under the legacy --rampup-batch-size schedule
// (Megatron-LM's RampupBatchsizeNumMicroBatchesCalculator), whose final batch is `global_batch`.
int64_t legacy_rampup_batch(const RampupBatchSize& r, int64_t global_batch,
                            int64_t consumed_samples);
// The same schedule as --step-batch-size-schedule entries: (threshold in samples, batch size),
// strictly increasing thresholds starting at 0.
std::vector<std::pair<int64_t, int64_t>> rampup_as_steps(const RampupBatchSize& r,
                                                         int64_t global_batch);

struct MegatronImportOptions {
  ClusterSpec cluster;                         // the plan's cluster
  std::map<std::string, std::string> vars;     // shell variables: "1" -> $1, "NUM_NODES" -> ...
  int64_t gpus = 0;                            // GPU count to size the plan for; 0: the script's
  int64_t vocab_size = 0;                      // when the script gives no --vocab-size; 0: infer
  std::string model_name = "megatron-import";  // the model's name unless it matches a preset
};

struct MegatronImport {
  Plan plan;
  int64_t script_world_size = 0;          // processes the script launches; 0 when not known
  std::string matched_preset;             // model preset with the same shape, or ""
  std::vector<std::string> warnings;      // disagreements, assumptions, skipped script parts
  std::vector<std::string> not_modelled;  // arguments mplan does not model ("--fp8-format hybrid")
  std::vector<std::string> ignored;       // arguments with no effect on a step (data, logging, ...)
  std::vector<std::string> undefined;     // "$1 (no value): --save, --load"
};

// Reads a launch script or argument list. Throws Error naming the argument (or "line N" of the
// script) when something layout-relevant is missing, malformed or refused by Megatron-LM.
MegatronImport import_megatron(const std::string& text, const MegatronImportOptions& options);

}  // namespace mplan
