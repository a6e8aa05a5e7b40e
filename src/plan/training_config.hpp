// TrainingConfig: precision, optimizer, learning-rate schedule, data, evaluation, checkpoint and
// logging settings of a plan ("training" in the plan file), named after Megatron-LM's arguments.
// All fields have Megatron-like defaults; training_from_json checks the rules Megatron states for
// them (e.g. --lr-warmup-iters and --lr-warmup-fraction are exclusive).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "src/batch/rampup_batch_size.hpp"
#include "src/common/json_reader.hpp"
#include "src/plan/implementation.hpp"
#include "src/plan/optimizer_precision.hpp"

namespace mplan {

enum class Precision { kBf16, kFp16, kFp32 };
enum class AttentionBackend { kFlash, kUnfused };

const char* to_string(Precision p);
const char* to_string(AttentionBackend a);
// Bytes per element of the parameters / activations for a precision.
int64_t bytes_per_element(Precision p);

// Low-precision GEMMs through Transformer Engine (Megatron-LM's TransformerConfig fp8 / fp4
// fields): the format of the FP8 tensors and the scaling recipe.
enum class Fp8Format { kNone, kE4m3, kHybrid };                      // --fp8-format (none: off)
enum class Fp8Recipe { kTensorwise, kDelayed, kBlockwise, kMxfp8 };  // --fp8-recipe
enum class Fp4Format { kNone, kE2m1 };                               // --fp4-format (none: off)
enum class Fp4Recipe { kNvfp4 };                                     // --fp4-recipe
const char* to_string(Fp8Format f);                                  // "none", "e4m3", "hybrid"
const char* to_string(Fp8Recipe r);  // "tensorwise", "delayed", "blockwise", "mxfp8"
const char* to_string(Fp4Format f);  // "none", "e2m1"
const char* to_string(Fp4Recipe r);  // "nvfp4"

// --offload-modules of --fine-grained-activation-offloading (TransformerConfig.offload_modules):
// the modules whose input moves to host memory from a layer's forward to its backward, as bits.
enum OffloadModule : uint32_t {
  kOffloadAttnNorm = 1u << 0,   // attn_norm: the input norm's input
  kOffloadQkvLinear = 1u << 1,  // qkv_linear: the QKV projection's input
  kOffloadCoreAttn = 1u << 2,   // core_attn: Q, K and V
  kOffloadAttnProj = 1u << 3,   // attn_proj: the output projection's input (the context)
  kOffloadMlpNorm = 1u << 4,    // mlp_norm: the pre-MLP norm's input
  kOffloadExpertFc1 = 1u << 5,  // expert_fc1: the routed experts' FC1 input
  kOffloadMoeAct = 1u << 6,     // moe_act: the experts' activation input
};
inline constexpr uint32_t kNumOffloadModules = 7;
// Megatron's names in its order (attn_norm, qkv_linear, core_attn, attn_proj, mlp_norm,
// expert_fc1, moe_act), and back (an Error naming `field` for any other name).
std::vector<std::string> offload_module_names(uint32_t bits);
uint32_t offload_modules_from_names(const std::vector<std::string>& names,
                                    const std::string& field);

enum class LrDecayStyle { kConstant, kLinear, kCosine, kInverseSquareRoot };
const char* to_string(LrDecayStyle s);  // Megatron's names: constant, linear, cosine, ...

// --data-path: data prefixes, optionally weighted ("0.3 A 0.7 B"). weights is empty or one per
// prefix (Megatron's get_blend_from_list).
struct DataBlend {
  std::vector<std::string> prefixes;
  std::vector<double> weights;
  bool empty() const { return prefixes.empty(); }
  bool operator==(const DataBlend&) const = default;
};

// Megatron's get_blend_from_list over the words of --data-path: an even count whose every other
// word (from the first) is a number is weight/prefix pairs, anything else is prefixes only.
// `field` names the flag or field in errors (weights must be > 0).
DataBlend parse_data_path(const std::vector<std::string>& words, const std::string& field);
// The words back (weights printed as numbers), so parse_data_path(data_path_words(b)) == b.
std::vector<std::string> data_path_words(const DataBlend& blend);

// Megatron's parse_and_normalize_split: the numbers of `split` (any separators: "949,50,1"),
// padded with zeros to three, each >= 0, normalized to sum 1. Error naming `field` otherwise.
std::array<double, 3> parse_split(const std::string& split, const std::string& field);

inline constexpr const char* kDefaultSplit = "969, 30, 1";  // Megatron's legacy default

struct TrainingConfig {
  Precision precision = Precision::kBf16;  // --bf16 / --fp16 / neither
  bool grads_in_fp32 = true;               // --accumulate-allreduce-grads-in-fp32 (main grads)
  // The stack the plan is predicted for: its efficiency set in the hardware profile
  // (ClusterSpec::gpu_for). Default megatron-te, Megatron-LM's own default (--transformer-impl
  // transformer_engine) and what `mplan export` writes; `mplan run` predicts with mplan.
  Implementation implementation = Implementation::kMegatronTe;
  // --attention-backend (default: flash; unfused for fp32 and for megatron-local, whose
  // attention materializes the scores)
  AttentionBackend attention_backend = AttentionBackend::kFlash;
  double lr = 1e-4;               // --lr
  double weight_decay = 0.1;      // --weight-decay
  double adam_beta1 = 0.9;        // --adam-beta1
  double adam_beta2 = 0.95;       // --adam-beta2
  double adam_eps = 1e-8;         // --adam-eps
  double clip_grad = 1.0;         // --clip-grad (0: off)
  double init_method_std = 0.02;  // --init-method-std
  int64_t seed = 1234;            // --seed
  int64_t train_iters = 0;        // --train-iters (0: not set)
  std::optional<RampupBatchSize> rampup_batch_size;
  // Learning-rate schedule (Megatron's OptimizerParamScheduler).
  LrDecayStyle lr_decay_style = LrDecayStyle::kLinear;  // --lr-decay-style
  double min_lr = 0.0;                                  // --min-lr
  std::optional<int64_t> lr_decay_iters;                // --lr-decay-iters (unset: train_iters)
  int64_t lr_warmup_iters = 0;                          // --lr-warmup-iters
  std::optional<double> lr_warmup_fraction;             // --lr-warmup-fraction
  double lr_warmup_init = 0.0;                          // --lr-warmup-init
  // Data (empty data_path: synthetic tokens).
  DataBlend data_path;                // --data-path
  std::string split = kDefaultSplit;  // --split
  // GPT-2 BPE files of the tokenizer the data was made with (--tokenizer-type GPT2BPETokenizer).
  // Carried for Megatron-LM; `mplan run` reads token ids and needs neither ("" : none).
  std::string vocab_file;  // --vocab-file
  std::string merge_file;  // --merge-file
  // Evaluation, checkpoints, logging.
  int64_t eval_interval = 1000;  // --eval-interval (0: only at the end)
  int64_t eval_iters = 100;      // --eval-iters
  std::string save;              // --save ("" : none)
  std::string load;              // --load ("" : none)
  int64_t save_interval = 0;     // --save-interval (0: not set)
  int64_t log_interval = 100;    // --log-interval
  std::string tensorboard_dir;   // --tensorboard-dir ("" : none)
  // Low precision (src/plan/low_precision.hpp says which layers and tensors it covers).
  Fp8Format fp8_format = Fp8Format::kNone;     // --fp8-format
  Fp8Recipe fp8_recipe = Fp8Recipe::kDelayed;  // --fp8-recipe (Megatron's default: delayed)
  Fp4Format fp4_format = Fp4Format::kNone;     // --fp4-format
  Fp4Recipe fp4_recipe = Fp4Recipe::kNvfp4;    // --fp4-recipe
  bool fp8_param_gather = false;               // --fp8-param-gather: FP8 weights, FP8 gather
  bool fp4_param_gather = false;               // --fp4-param-gather: FP4 weights, FP4 gather
  bool first_last_layers_bf16 = false;         // --first-last-layers-bf16
  int64_t num_layers_at_start_in_bf16 = 1;     // --num-layers-at-start-in-bf16
  int64_t num_layers_at_end_in_bf16 = 1;       // --num-layers-at-end-in-bf16
  // --use-precision-aware-optimizer and the optimizer state's dtypes.
  OptimizerPrecision optimizer_precision;
  // --optimizer-cpu-offload: Megatron's HybridDeviceOptimizer keeps the optimizer state of
  // --optimizer-offload-fraction of the parameters on the host and runs their Adam step there
  // (docs/cost-model.md, "Optimizer offloading").
  bool optimizer_cpu_offload = false;
  double optimizer_offload_fraction = 1.0;  // Megatron-LM's default
  // --overlap-cpu-optimizer-d2h-h2d: the hybrid optimizer's copies run beside the host's Adam.
  bool overlap_cpu_optimizer_d2h_h2d = false;
  // Activation offloading (docs/cost-model.md, "Activation offloading").
  // --cpu-offloading-num-layers: Transformer Engine's CPU offload context moves the activations
  // of the first N transformer layers to host memory after their forward and back before their
  // backward (Megatron sets cpu_offloading when N > 0; cpu_offloading_activations is on and
  // cpu_offloading_weights off, Megatron's defaults, neither having a command-line argument).
  int64_t cpu_offloading_num_layers = 0;
  // --fine-grained-activation-offloading with --offload-modules (OffloadModule bits).
  bool fine_grained_activation_offloading = false;
  uint32_t offload_modules = 0;
  bool operator==(const TrainingConfig&) const = default;
};

TrainingConfig training_from_json(const Json& j, const std::string& path);
Json training_to_json(const TrainingConfig& t);

}  // namespace mplan
