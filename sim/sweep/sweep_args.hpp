// SweepArgs: the sweep's inputs as a user gives them (preset names or files, optional batch and
// sequence length, the --fix text), and make_request() which loads and checks them into a
// SweepRequest. The defaults make `mplan sweep --gpus N` meaningful out of the box: GPT-3 175B
// on DGX A100 80GB nodes (the Megatron-LM paper's setting, Narayanan et al. SC'21) at the
// model preset's default_global_batch_size (1536).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "sim/sweep/sweep.hpp"

namespace mplan::sweep {

inline constexpr const char* kDefaultModel = "gpt3-175b";
inline constexpr const char* kDefaultCluster = "dgx-a100-80g";
// Memory kept free on every GPU unless --memory-headroom says otherwise: allocator fragmentation
// and NCCL buffers beyond the profile's runtime overhead vary between runs.
inline constexpr double kDefaultMemoryHeadroom = 0.05;

struct SweepArgs {
  int64_t gpus = 0;                       // --gpus
  std::string model = kDefaultModel;      // --model NAME|FILE
  std::string cluster = kDefaultCluster;  // --cluster NAME|FILE
  std::optional<int64_t> global_batch;    // --global-batch (default: the model's)
  std::optional<int64_t> seq_length;      // --seq-length (default: the model's)
  std::string fix;                        // --fix
  // --stack: the implementation every candidate is predicted for and must be runnable by
  // (sim/sweep/stack_rules); "megatron" means megatron-te. Default Megatron-LM with TE.
  std::string stack = "megatron-te";
  Objective objective = Objective::kThroughput;
  double memory_headroom = kDefaultMemoryHeadroom;  // --memory-headroom (as a fraction)
  // Low precision of every candidate: --precision bf16|fp8|fp4 (fp8: fp8_format hybrid with
  // --fp8-recipe; fp4: fp4_format e2m1, nvfp4), --fp8-param-gather.
  std::string precision = "bf16";
  std::string fp8_recipe = "delayed";
  bool fp8_param_gather = false;
};

// The training section --precision, --fp8-recipe and --fp8-param-gather describe; errors name
// the flag (an unknown value, --fp8-recipe or --fp8-param-gather without --precision fp8).
TrainingConfig training_of(const SweepArgs& args);

// Loads model and cluster, applies --seq-length, takes the global batch from --global-batch or
// the model file's "default_global_batch_size", parses --fix, then check_request(). Errors name
// the flag: an unknown preset, a value outside its range (a given 0 is an error, never "unset"),
// a sequence longer than max_position_embeddings, a model file without a default batch and no
// --global-batch, a GPU count the cluster cannot host.
SweepRequest make_request(const SweepArgs& args);

}  // namespace mplan::sweep
