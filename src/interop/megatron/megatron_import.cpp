// Import in steps: the script's training command, its arguments through the table, the world
// size (the launch's process count against the layout), the global batch when the script gives
// none, the vocabulary when the script leaves it to the tokenizer, the matching preset, and the
// lists of what was not read.
#include "src/interop/megatron/megatron_import.hpp"

#include <charconv>
#include <numeric>
#include <optional>

#include "src/common/embedded_configs.hpp"
#include "src/common/error.hpp"
#include "src/interop/megatron/deepspeed_pipeline.hpp"
#include "src/interop/megatron/launch_command.hpp"
#include "src/interop/megatron/megatron_arg_table.hpp"
#include "src/interop/megatron/megatron_launch.hpp"
#include "src/interop/megatron/shell_script.hpp"
#include "src/plan/validate.hpp"

namespace mplan {
namespace {

constexpr int64_t kGpt2BpeVocab = 50257;  // GPT-2 BPE (gpt2-vocab.json)
constexpr int64_t kLlama2Vocab = 32000;   // Llama 2 SentencePiece model

int64_t lcm64(int64_t a, int64_t b) { return a / std::gcd(a, b) * b; }

// The experts' shape (not how a run dispatches them: grouped GEMM, dispatcher, overlap).
bool same_moe_shape(const ModelSpec& a, const ModelSpec& b) {
  if (!a.moe || !b.moe) return !a.moe && !b.moe;
  if (a.num_layers != b.num_layers) return false;
  for (int64_t l = 0; l < a.num_layers; ++l)
    if (a.is_moe_layer(l) != b.is_moe_layer(l)) return false;
  return a.moe->num_experts == b.moe->num_experts && a.moe->topk == b.moe->topk &&
         a.moe->moe_ffn_hidden_size == b.moe->moe_ffn_hidden_size &&
         a.moe->shared_expert_ffn_hidden_size == b.moe->shared_expert_ffn_hidden_size;
}

// Model presets with the same architecture. Compares the padded vocabulary (what the model
// holds) and, with learned positions, the position table; the sequence length may differ.
std::string match_preset(const ModelSpec& m, int64_t tp, bool compare_vocab, std::string& detail) {
  for (const auto& name : preset_names("models")) {
    ModelSpec pm = load_model(name);
    bool same =
        pm.num_layers == m.num_layers && pm.hidden_size == m.hidden_size &&
        pm.num_attention_heads == m.num_attention_heads &&
        pm.num_query_groups == m.num_query_groups && pm.kv_channels == m.kv_channels &&
        pm.ffn_hidden_size == m.ffn_hidden_size && pm.activation == m.activation &&
        pm.normalization == m.normalization && pm.position_embedding == m.position_embedding &&
        pm.tied_embeddings == m.tied_embeddings && pm.add_bias_linear == m.add_bias_linear &&
        same_moe_shape(pm, m) && pm.mla == m.mla && pm.mtp_num_layers == m.mtp_num_layers &&
        pm.window_size == m.window_size;
    if (same && compare_vocab) same = pm.padded_vocab_size(tp) == m.padded_vocab_size(tp);
    if (same && m.position_embedding == PositionEmbedding::kLearned)
      same = pm.max_position_embeddings == m.max_position_embeddings;
    if (!same) continue;
    detail.clear();
    if (compare_vocab && pm.vocab_size != m.vocab_size)
      detail += cat("vocabulary ", m.vocab_size, " here, ", pm.vocab_size,
                    " in the preset: the same after padding to ", m.padded_vocab_size(tp));
    if (pm.seq_length != m.seq_length)
      detail += cat(detail.empty() ? "" : "; ", "seq_length ", m.seq_length, " here, ",
                    pm.seq_length, " in the preset");
    if (m.position_embedding == PositionEmbedding::kRope && pm.rotary_base != m.rotary_base)
      detail += cat(detail.empty() ? "" : "; ", "rotary base ", m.rotary_base, " here, ",
                    pm.rotary_base, " in the preset");
    return name;
  }
  return "";
}

// The "tp .. x cp .. x pp .. = N" layout a world size must hold, for messages.
std::string layout_text(const ParallelConfig& p, int64_t need) {
  const int64_t model_size = p.tp * p.cp * p.pp, expert_size = p.etp * p.ep * p.pp;
  std::string layout = cat("tp ", p.tp, " x cp ", p.cp, " x pp ", p.pp, " = ", model_size);
  if (expert_size != model_size && need != model_size)
    layout += cat(" and etp ", p.etp, " x ep ", p.ep, " x pp ", p.pp, " = ", expert_size);
  return layout;
}

// dp from the processes launched (or --gpus); the smallest size that holds the layout when that
// does not divide.
void size_world(ImportState& s, const LaunchCommand& launch, const MegatronImportOptions& o,
                const ClusterSpec& cluster, MegatronImport& r) {
  ParallelConfig& p = s.parallel;
  const int64_t model_size = p.tp * p.cp * p.pp;
  const int64_t expert_size = p.etp * p.ep * p.pp;
  std::optional<int64_t> world = launch.world;
  if (world) r.script_world_size = *world;
  std::string source = launch.description;
  if (o.gpus > 0) {
    world = o.gpus;
    source = cat("--gpus ", o.gpus);
    if (launch.world && *launch.world != o.gpus)
      r.warnings.push_back(cat("sized for --gpus ", o.gpus, " instead of the script's ",
                               *launch.world, " processes (", launch.description, ")"));
  }
  if (world && *world % model_size == 0 && *world % expert_size == 0) {
    p.dp = *world / model_size;
  } else {
    const int64_t need = lcm64(model_size, expert_size);
    p.dp = need / model_size;
    if (world) {
      r.warnings.push_back(cat("the script launches ", *world, " processes (", source,
                               ") but its layout (", layout_text(p, need), ") needs a multiple of ",
                               need, " GPUs; the plan is sized by the layout: ", need, " GPUs, dp ",
                               p.dp));
    } else {
      r.warnings.push_back(cat("the process count is not known; the plan is sized by the layout (",
                               layout_text(p, need), "): ", need, " GPUs, dp ", p.dp,
                               " (use --gpus N for another size)"));
    }
  }
  if (launch.nnodes > 1 && launch.nproc_per_node != cluster.gpus_per_node && o.gpus == 0)
    r.warnings.push_back(cat("the script runs ", launch.nproc_per_node,
                             " processes per node; cluster '", cluster.name, "' has ",
                             cluster.gpus_per_node, " GPUs per node"));
}

// Megatron-LM's global batch when the script gives none: micro batch x dp.
void default_global_batch(ImportState& s, MegatronImport& r) {
  if (!s.global_batch_size) {
    s.global_batch_size = s.parallel.micro_batch_size * s.parallel.dp;
    r.warnings.push_back(cat("--global-batch-size: not given; Megatron-LM uses micro batch x dp = ",
                             *s.global_batch_size));
  }
  s.parallel.global_batch_size = *s.global_batch_size;
}

// The vocabulary: the script's --vocab-size, else --vocab-size given to mplan, else what the
// tokenizer implies (GPT-2 BPE files, the Llama 2 model), else a preset of the same shape.
void infer_vocab(ImportState& s, const MegatronImportOptions& o, MegatronImport& r) {
  ModelSpec& m = s.model;
  if (s.vocab_size) {
    m.vocab_size = *s.vocab_size;
    return;
  }
  if (o.vocab_size > 0) {
    m.vocab_size = o.vocab_size;
    return;
  }
  const std::string& tok = s.tokenizer_type;
  if (tok == "GPT2BPETokenizer" || (tok.empty() && s.args.has("--merge-file"))) {
    m.vocab_size = kGpt2BpeVocab;
    r.warnings.push_back(cat("--vocab-size: not given; read as GPT-2 BPE's ", kGpt2BpeVocab,
                             " tokens (", tok.empty() ? "--vocab-file/--merge-file" : tok, ")"));
    return;
  }
  if (tok == "Llama2Tokenizer") {
    m.vocab_size = kLlama2Vocab;
    r.warnings.push_back(
        cat("--vocab-size: not given; read as the Llama 2 tokenizer's ", kLlama2Vocab, " tokens"));
    return;
  }
  std::string detail;
  m.vocab_size = 1;
  std::string preset = match_preset(m, s.parallel.tp, false, detail);
  if (preset.empty())
    throw Error(cat("--vocab-size: not given, and the vocabulary of ",
                    tok.empty() ? std::string("the tokenizer") : "--tokenizer-type " + tok,
                    " is not known here; pass --vocab-size N to mplan import"));
  m.vocab_size = load_model(preset).vocab_size;
  r.warnings.push_back(cat("--vocab-size: not given; took ", m.vocab_size, " from preset ", preset,
                           ", whose shape this model has"));
}

// What else in the script splits the pipeline (for the Megatron-DeepSpeed conflict message).
std::string other_pipeline_split(const ParallelConfig& p) {
  if (p.pipeline_model_parallel_layout) return "--pipeline-model-parallel-layout";
  if (p.decoder_first_pipeline_num_layers) return "--decoder-first-pipeline-num-layers";
  if (p.decoder_last_pipeline_num_layers) return "--decoder-last-pipeline-num-layers";
  if (p.account_for_embedding_in_pipeline_split) return "--account-for-embedding-in-pipeline-split";
  if (p.account_for_loss_in_pipeline_split) return "--account-for-loss-in-pipeline-split";
  if (p.vpp > 1) return "virtual pipeline stages";
  return "";
}

// A Megatron-DeepSpeed script (--deepspeed, --deepspeed_config or --pp-partition-method) with
// pp > 1 runs GPTModelPipe, whose layers DeepSpeed's PipelineModule splits: that split becomes
// the plan's layout. The script's DeepSpeed arguments stay unread (reported as not modelled);
// only their presence is looked at here. --pp-partition-method marks bigscience's fork (the only
// one that has it); without it, microsoft's, which always splits by "type:transformer".
void split_as_deepspeed(ImportState& s, MegatronImport& r) {
  const MegatronArgList& a = s.args;
  const bool deepspeed = a.has("--deepspeed") || a.has("--deepspeed_config") ||
                         a.has("--deepscale") || a.has("--deepscale_config");
  ParallelConfig& p = s.parallel;
  if ((!deepspeed && !s.pp_partition_method) || p.pp <= 1) return;
  if (deepspeed && a.has("--no-pipeline-parallel")) return;  // microsoft's GPTModel, no pipe
  const std::string other = other_pipeline_split(p);
  if (!other.empty())
    throw Error(cat(kPpPartitionMethodFlag, ": a Megatron-DeepSpeed script's layers are split by ",
                    "DeepSpeed's PipelineModule, one layer range per stage; it cannot also take ",
                    other));
  DsModelOptions o;
  o.fork = s.pp_partition_method ? MegatronDeepSpeedFork::kBigScience
                                 : MegatronDeepSpeedFork::kMicrosoft;
  o.half_precision = s.training.precision != Precision::kFp32;
  o.embed_layernorm = a.has("--embed-layernorm");
  const std::string method = s.pp_partition_method.value_or("type:transformer");
  const std::vector<DsLayerSpec> specs = gpt_model_pipe_specs(s.model, p, o);
  const std::vector<int64_t> parts = deepspeed_stage_boundaries(specs, method, p.pp);
  PipelineLayout layout = deepspeed_layout(specs, parts, method);
  std::string counts;
  for (const LayoutStage& st : layout.stages) counts += cat(counts.empty() ? "" : " ", st.decoder);
  r.warnings.push_back(
      cat(kPpPartitionMethodFlag, " ", method, s.pp_partition_method ? "" : " (the default)",
          ": DeepSpeed's PipelineModule splits ",
          o.fork == MegatronDeepSpeedFork::kBigScience ? "bigscience's" : "microsoft's",
          " GPTModelPipe as ", counts, " transformer layers over ", p.pp,
          " stages; the plan's layout is '", layout.text, "'"));
  p.pipeline_model_parallel_layout = std::move(layout);
}

// The plan's rules over the training section (Megatron-LM's: warmup against decay, min_lr <= lr,
// --save with --save-interval, ...), each error named by the argument of its field:
// "--min-lr (training.min_lr): must be <= lr (0.0001), got 0.001".
void check_training_rules(const TrainingConfig& t) {
  try {
    training_from_json(training_to_json(t), "training");
  } catch (const Error& e) {
    const std::string what = e.what();
    const size_t colon = what.find(':');
    if (!what.starts_with("training.") || colon == std::string::npos) throw;
    const std::string field = what.substr(0, colon);
    for (const MegatronArgRow& row : megatron_arg_table())
      if (row.field == field && !row.name.empty())
        throw Error(cat(row.name, " (", field, ")", what.substr(colon)));
    throw;
  }
}

// The arguments no row read, as "ignored" (no effect on a step) or "not modelled".
void list_unread(const MegatronArgList& args, MegatronImport& r) {
  for (const auto& left : args.leftovers()) {
    const MegatronArgRow* row = find_arg_row(left.name);
    bool no_effect = row && row->effect == StepEffect::kNoEffect;
    (no_effect ? r.ignored : r.not_modelled).push_back(left.text);
  }
}

// A "# mplan: cluster=" value: a preset name, or a cluster as JSON (never a file: a script
// does not make mplan read other files).
ClusterSpec directive_cluster(const MplanDirective& d) {
  const std::string field = cat("line ", d.line, ": # mplan: cluster");
  if (!d.value.empty() && d.value[0] == '{')
    return cluster_from_json(parse_json(d.value, field), field);
  if (is_file_reference(d.value))
    throw Error(
        cat(field, ": names a file ('", d.value, "'); give a preset name or the cluster as JSON"));
  return load_cluster(d.value, field);
}

// What the script's "# mplan:" lines settle.
struct Directives {
  ClusterSpec cluster;  // the caller's, else the script's, else the default preset
  std::optional<int64_t> default_train_iters;
  std::optional<int64_t> eval_only_at_end;
};

// The count of a "# mplan: KEY=N" line.
int64_t directive_count(const MplanDirective& d) {
  int64_t n = 0;
  auto res = std::from_chars(d.value.data(), d.value.data() + d.value.size(), n);
  if (res.ec != std::errc() || res.ptr != d.value.data() + d.value.size() || n < 1)
    throw Error(cat("line ", d.line, ": # mplan: ", d.key, ": must be an integer >= 1, got '",
                    d.value, "'"));
  return n;
}

Directives read_directives(const std::string& text, const MegatronImportOptions& o,
                           MegatronImport& r) {
  Directives out;
  std::optional<ClusterSpec> from_script;
  for (const MplanDirective& d : read_mplan_directives(text)) {
    if (d.key == kClusterDirective) {
      from_script = directive_cluster(d);
    } else if (d.key == kDefaultTrainItersDirective) {
      out.default_train_iters = directive_count(d);
    } else if (d.key == kEvalOnlyAtEndDirective) {
      out.eval_only_at_end = directive_count(d);
    } else {
      r.warnings.push_back(cat("line ", d.line, ": # mplan: ", d.key.empty() ? d.value : d.key,
                               ": not a directive mplan knows (cluster=, default-train-iters=, "
                               "eval-only-at-end=); ignored"));
    }
  }
  if (o.cluster) {
    r.cluster_source = ClusterSource::kGiven;
    if (from_script && !(*from_script == *o.cluster))
      r.warnings.push_back(cat("the script was exported for cluster '", from_script->name,
                               "'; the plan uses the cluster given, '", o.cluster->name, "'"));
    out.cluster = *o.cluster;
  } else if (from_script) {
    r.cluster_source = ClusterSource::kScript;
    out.cluster = *from_script;
  } else {
    r.cluster_source = ClusterSource::kDefault;
    out.cluster = load_cluster(kDefaultImportCluster);
  }
  return out;
}

}  // namespace

MegatronImport import_megatron(const std::string& text, const MegatronImportOptions& o) {
  MegatronImport r;
  ShellReadOptions so;
  so.vars = o.vars;
  ShellScript sh = read_shell_script(text, so);
  r.warnings = sh.notes;
  const Directives directives = read_directives(text, o, r);
  const ClusterSpec& cluster = directives.cluster;
  LaunchCommand launch = find_launch_command(sh, o.gpus, cluster.gpus_per_node, r.warnings);
  MegatronArgList args(split_arguments(launch.arguments, r.warnings), r.warnings);
  r.undefined = args.undefined_report();
  for (const auto& d : sh.defaults_used)
    r.undefined.push_back(d + " (has no value here; the script's default is used)");

  ImportState s{args, r.warnings};
  s.export_default_train_iters = directives.default_train_iters;
  s.export_eval_only_at_end = directives.eval_only_at_end;
  for (const MegatronArgRow& row : megatron_arg_table())
    if (row.parse) row.parse(row, s);
  check_training_rules(s.training);
  size_world(s, launch, o, cluster, r);
  default_global_batch(s, r);
  infer_vocab(s, o, r);
  split_as_deepspeed(s, r);

  std::string detail;
  r.matched_preset = match_preset(s.model, s.parallel.tp, true, detail);
  s.model.name = r.matched_preset.empty() ? o.model_name : r.matched_preset;
  if (!r.matched_preset.empty() && !detail.empty())
    r.warnings.push_back(cat("model matches preset ", r.matched_preset, " (", detail, ")"));
  r.plan.model = s.model;
  r.plan.cluster = cluster;
  r.plan.parallel = s.parallel;
  r.plan.training = s.training;
  list_unread(args, r);

  // The plan must read back from its JSON unchanged: plan.json is what the user gets.
  Plan again = plan_from_json(plan_to_json(r.plan));
  MPLAN_CHECK(again == r.plan, "imported plan does not survive its JSON form");
  for (const auto& v : validate(r.plan))
    r.warnings.push_back(cat("the plan breaks a rule: ", to_string(v)));
  return r;
}

}  // namespace mplan
