// Import: a Megatron-LM launch script or argument list as a plan. The script is read, not run
// (shell_script.hpp); the training command's arguments go through the argument table
// (megatron_arg_table.hpp); what is not an argument — the world size, a vocabulary the script
// leaves to its tokenizer, the preset the model matches — is settled after it; the cluster and
// an export's own --train-iters come from "# mplan:" lines. Invariant: nothing is guessed
// silently; every assumption, disagreement and unread argument is reported.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "src/plan/plan.hpp"

namespace mplan {

// The cluster import uses when neither the caller nor the script names one: where
// Megatron-LM's papers measured.
inline constexpr const char* kDefaultImportCluster = "dgx-a100-80g";

struct MegatronImportOptions {
  // The plan's cluster; unset: the script's "# mplan: cluster=" line (written by mplan export),
  // else kDefaultImportCluster.
  std::optional<ClusterSpec> cluster;
  std::map<std::string, std::string> vars;     // shell variables: "1" -> $1, "NUM_NODES" -> ...
  int64_t gpus = 0;                            // GPU count to size the plan for; 0: the script's
  int64_t vocab_size = 0;                      // when the script gives no --vocab-size; 0: infer
  std::string model_name = "megatron-import";  // the model's name unless it matches a preset
};

// Where the plan's cluster came from.
enum class ClusterSource { kGiven, kScript, kDefault };

struct MegatronImport {
  Plan plan;
  ClusterSource cluster_source = ClusterSource::kDefault;
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
