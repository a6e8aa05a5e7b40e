// The Megatron-LM argument table: one row per argument of pretrain_gpt.py that mplan reads or
// writes — its name, the array export writes it in, the plan field it maps to, whether it changes
// the time or memory of a training step, how import parses it and how export writes it. Import
// runs the rows' parsers in table order; export writes each array's rows in table order. So the
// two directions of an argument sit side by side, and a new argument is one row.
// Invariant: a row that export writes also parses it back (tested for every row).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "src/interop/megatron/megatron_arg_list.hpp"
#include "src/interop/megatron/megatron_export.hpp"
#include "src/interop/megatron/megatron_launch.hpp"
#include "src/plan/plan.hpp"

namespace mplan {

// The bash arrays of the exported script, in the order the script passes them.
enum class ArgGroup { kModel, kMoe, kTraining, kParallel, kData, kEvalAndLogging, kNone };
inline constexpr ArgGroup kExportGroups[] = {ArgGroup::kModel,    ArgGroup::kMoe,
                                             ArgGroup::kTraining, ArgGroup::kParallel,
                                             ArgGroup::kData,     ArgGroup::kEvalAndLogging};
// "GPT_MODEL_ARGS", "MOE_ARGS", "TRAINING_ARGS", "MODEL_PARALLEL_ARGS", "DATA_ARGS",
// "EVAL_AND_LOGGING_ARGS"; "" for kNone.
const char* group_name(ArgGroup g);

// Whether an argument changes the time or memory of a training step (what mplan predicts).
// Arguments left unread are reported by this: "ignored" (no effect) or "not modelled".
enum class StepEffect { kChangesStep, kNoEffect };

// What the rows read an imported job into. Rows run in table order; a row may read what an
// earlier row recorded (aliases and alternatives come before the argument they stand for, and
// a rule over several arguments sits in the row of the last of them).
struct ImportState {
  ImportState(MegatronArgList& a, std::vector<std::string>& w) : args(a), warnings(w) {}
  MegatronArgList& args;
  std::vector<std::string>& warnings;
  ModelSpec model;
  ParallelConfig parallel;
  TrainingConfig training;
  // Settled after the table: the world size sizes the default batch, and the vocabulary
  // inference needs the whole model and layout.
  std::optional<int64_t> global_batch_size;  // --global-batch-size, or a step schedule's end
  std::optional<int64_t> vocab_size;         // --vocab-size
  // Recorded by one row for a later one.
  bool group_query_attention = false;               // --group-query-attention
  bool rotary_alias = false;                        // --use-rotary-position-embeddings
  std::string position_type;                        // --position-embedding-type, resolved
  std::optional<int64_t> layers_per_virtual_stage;  // --num-layers-per-virtual-pipeline-stage
  std::optional<int64_t> legacy_vpp;                // --virtual-pipeline-model-parallel-size
  bool bf16 = false, reduce_in_bf16 = false;        // --bf16, --grad-reduce-in-bf16
  bool recompute_activations = false;               // --recompute-activations
  std::string recompute_granularity;                // --recompute-granularity
  std::optional<std::string> recompute_method;      // --recompute-method
  bool use_flash_attn = false;                      // --use-flash-attn
  bool mock_data = false;                           // --mock-data
  std::string tokenizer_type;                       // --tokenizer-type ("" : not given)
  // Megatron-DeepSpeed's --pp-partition-method; the split is made after the table, once the
  // vocabulary (which the "parameters" method weighs) is settled.
  std::optional<std::string> pp_partition_method;
  // From the script's "# mplan: default-train-iters=N" line: a --train-iters N that export chose
  // because the plan had none.
  std::optional<int64_t> export_default_train_iters;
  // From "# mplan: eval-only-at-end=N": an --eval-interval N (past the last iteration) that
  // export wrote for the plan's eval_interval 0, which Megatron-LM cannot take.
  std::optional<int64_t> export_eval_only_at_end;
};

// What the rows write an exported job from.
struct ExportState {
  const Plan& plan;
  const MegatronExportOptions& options;
  std::vector<MegatronArg>& args;   // the array being written
  std::vector<std::string>& notes;  // what the arguments cannot express
  std::vector<std::pair<std::string, std::string>>& directives;  // "# mplan:" lines for import

  void flag(std::string_view name) { args.push_back({std::string(name), {}}); }
  void arg(std::string_view name, std::string value);
  void arg(std::string_view name, int64_t value);
  void number(std::string_view name, double value);  // shortest text that reads back the same
};

struct MegatronArgRow {
  // The argument; a row with no effect on a step also covers the arguments its name begins
  // ("--log-" covers --log-interval; "--save" covers --save-interval). "" for a plan field that
  // has no argument (parallel.schedule), whose row only writes export's notes.
  std::string_view name;
  ArgGroup group;          // the array export writes it in; kNone: import only
  std::string_view field;  // the plan field(s) it sets, "" when none
  StepEffect effect;
  void (*parse)(const MegatronArgRow&, ImportState&) = nullptr;  // null: left unread
  void (*write)(const MegatronArgRow&, ExportState&) = nullptr;  // null: never written
};

// The table, in import order (see ImportState).
const std::vector<MegatronArgRow>& megatron_arg_table();

// The row of an argument: its own, else the no-effect row whose name it begins with; nullptr.
const MegatronArgRow* find_arg_row(std::string_view name);

// Megatron-LM's two rank orders: the default and the one of --use-tp-pp-dp-mapping.
inline constexpr const char* kMegatronDefaultOrder = "tp-cp-ep-dp-pp";
inline constexpr const char* kMegatronTpPpDpOrder = "tp-cp-ep-pp-dp";

}  // namespace mplan
