// Export: the Megatron-LM job of a plan (pretrain_gpt.py's arguments through the argument table,
// torchrun's process layout, the environment, and "# mplan:" directives for what is not an
// argument, such as the cluster). Invariant: for every plan whose fields Megatron-LM can express,
// import_megatron() of the rendered script gives the plan back; export lists in `notes` each
// field it cannot express (e.g. schedule zb-h1).
#pragma once

#include <cstdint>

#include "src/interop/megatron/megatron_launch.hpp"
#include "src/plan/plan.hpp"

namespace mplan {

struct MegatronExportOptions {
  // Batch ramp-up as --rampup-batch-size START INCR SAMPLES with --global-batch-size (Megatron-LM
  // releases before --step-batch-size-schedule); the default writes the equivalent step schedule,
  // because the current Megatron-LM ignores --rampup-batch-size.
  bool legacy_rampup = false;
  // --train-iters to write; 0: the plan's training.train_iters, or kExportTrainIters when the
  // plan sets none (with a "# mplan: default-train-iters" line, so import leaves it unset).
  int64_t train_iters = 0;
};

// Iterations an export runs when neither the plan nor the caller gives a count: enough for
// Megatron-LM's default log interval (100) to print one averaged iteration time.
inline constexpr int64_t kExportTrainIters = 100;

// The directive keys export writes and import reads.
inline constexpr const char* kClusterDirective = "cluster";
inline constexpr const char* kDefaultTrainItersDirective = "default-train-iters";
inline constexpr const char* kEvalOnlyAtEndDirective = "eval-only-at-end";

// The Megatron-LM job of a plan. Throws Error naming the field when the plan is invalid or uses
// something Megatron-LM has no argument for (a rank order other than its two).
MegatronLaunch megatron_launch_from_plan(const Plan& plan,
                                         const MegatronExportOptions& options = {});

}  // namespace mplan
