// Plan <-> Megatron-LM arguments. Argument names, defaults and rules follow Megatron-LM's
// megatron/training/arguments.py and the dataclasses its arguments are generated from
// (TransformerConfig, ModelParallelConfig, training/config). Import applies Megatron-LM's own
// defaults for what a script leaves out (e.g. --adam-beta2 0.999, --weight-decay 0.01), so the
// plan describes the job Megatron-LM would run; export writes every such value explicitly.
#include "src/interop/megatron/megatron_args.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <numeric>
#include <optional>
#include <set>

#include "src/common/embedded_configs.hpp"
#include "src/common/error.hpp"
#include "src/interop/megatron/shell_script.hpp"
#include "src/plan/validate.hpp"

namespace mplan {
namespace {

constexpr const char* kDefaultOrder = "tp-cp-ep-dp-pp";
constexpr const char* kTpPpDpOrder = "tp-cp-ep-pp-dp";  // --use-tp-pp-dp-mapping
constexpr int64_t kGpt2BpeVocab = 50257;                // GPT-2 BPE (gpt2-vocab.json)
constexpr int64_t kLlama2Vocab = 32000;                 // Llama 2 SentencePiece model

std::string num(int64_t v) { return std::to_string(v); }

// Shortest text that reads back to the same double (Python's float() included).
std::string num(double v) {
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Batch ramp-up

int64_t legacy_rampup_batch(const RampupBatchSize& r, int64_t global_batch, int64_t consumed) {
  // RampupBatchsizeNumMicroBatchesCalculator.update(): past ramp_samples the final batch; before,
  // start + int(consumed / (ramp_samples / num_increments)) * increment, in Python floats.
  if (consumed > r.samples) return global_batch;
  int64_t increments = (global_batch - r.start) / r.increment;
  double per_increment = static_cast<double>(r.samples) / static_cast<double>(increments);
  auto steps = static_cast<int64_t>(static_cast<double>(consumed) / per_increment);
  return r.start + steps * r.increment;
}

std::vector<std::pair<int64_t, int64_t>> rampup_as_steps(const RampupBatchSize& r,
                                                         int64_t global_batch) {
  MPLAN_CHECK(
      r.increment > 0 && global_batch > r.start && (global_batch - r.start) % r.increment == 0,
      "rampup ", r.start, " ", r.increment, " to ", global_batch);
  std::vector<std::pair<int64_t, int64_t>> steps = {{0, legacy_rampup_batch(r, global_batch, 0)}};
  int64_t increments = (global_batch - r.start) / r.increment;
  for (int64_t k = 1; k <= increments; ++k) {
    int64_t target = r.start + k * r.increment;
    // Smallest sample count whose batch reaches `target` (the batch never decreases).
    int64_t lo = 0, hi = r.samples + 1;
    while (lo < hi) {
      int64_t mid = lo + (hi - lo) / 2;
      if (legacy_rampup_batch(r, global_batch, mid) >= target) {
        hi = mid;
      } else {
        lo = mid + 1;
      }
    }
    int64_t batch = legacy_rampup_batch(r, global_batch, lo);
    if (steps.back().first == lo) {
      steps.back().second = batch;
    } else if (batch != steps.back().second) {
      steps.push_back({lo, batch});
    }
  }
  return steps;
}

// ---------------------------------------------------------------------------------------------
// Export

namespace {

struct GroupBuilder {
  MegatronArgGroup g;
  explicit GroupBuilder(std::string name) { g.name = std::move(name); }
  void flag(const std::string& n) { g.args.push_back({n, {}}); }
  void arg(const std::string& n, const std::string& v) { g.args.push_back({n, {v}}); }
  void arg(const std::string& n, int64_t v) { arg(n, num(v)); }
  void arg_d(const std::string& n, double v) { arg(n, num(v)); }
};

}  // namespace

MegatronLaunch megatron_launch_from_plan(const Plan& plan, const MegatronExportOptions& options) {
  const ModelSpec& m = plan.model;
  const ParallelConfig& p = plan.parallel;
  const TrainingConfig& t = plan.training;

  if (p.order != kDefaultOrder && p.order != kTpPpDpOrder)
    throw Error(cat("parallel.order: Megatron-LM places ranks only in the order ", kDefaultOrder,
                    " (default) or ", kTpPpDpOrder, " (--use-tp-pp-dp-mapping), got \"", p.order,
                    "\""));
  auto violations = validate(plan);
  if (!violations.empty())
    throw Error(cat(to_string(violations.front()),
                    " (the plan is invalid, so Megatron-LM would refuse it; see mplan validate)"));

  MegatronLaunch L;
  int64_t world = plan.world_size();
  int64_t gpn = plan.cluster.gpus_per_node;
  L.nproc_per_node = world < gpn ? world : gpn;
  L.nnodes = world < gpn ? 1 : world / gpn;
  // Megatron-LM needs one CUDA connection so that kernels queue in issue order (TP/SP overlap).
  L.env.push_back({"CUDA_DEVICE_MAX_CONNECTIONS", "1"});

  GroupBuilder model("GPT_MODEL_ARGS");
  model.arg("--num-layers", m.num_layers);
  model.arg("--hidden-size", m.hidden_size);
  model.arg("--num-attention-heads", m.num_attention_heads);
  if (m.num_query_groups != m.num_attention_heads) {
    model.flag("--group-query-attention");
    model.arg("--num-query-groups", m.num_query_groups);
  }
  if (m.kv_channels != m.hidden_size / m.num_attention_heads ||
      m.hidden_size % m.num_attention_heads != 0)
    model.arg("--kv-channels", m.kv_channels);
  model.arg("--ffn-hidden-size", m.ffn_hidden_size);
  model.arg("--seq-length", m.seq_length);
  model.arg("--max-position-embeddings", m.max_position_embeddings);
  if (m.position_embedding == PositionEmbedding::kRope)
    model.arg("--position-embedding-type", "rope");
  if (m.normalization == Normalization::kRmsNorm) model.arg("--normalization", "RMSNorm");
  if (m.activation == Activation::kSwiglu) model.flag("--swiglu");
  if (!m.tied_embeddings) model.flag("--untie-embeddings-and-output-weights");
  if (!m.add_bias_linear) model.flag("--disable-bias-linear");
  model.arg("--vocab-size", m.vocab_size);
  if (m.make_vocab_size_divisible_by != 128)
    model.arg("--make-vocab-size-divisible-by", m.make_vocab_size_divisible_by);
  if (t.attention_backend == AttentionBackend::kUnfused)
    model.arg("--attention-backend", "unfused");
  L.groups.push_back(std::move(model.g));

  if (m.moe) {
    GroupBuilder moe("MOE_ARGS");
    moe.arg("--num-experts", m.moe->num_experts);
    moe.arg("--moe-router-topk", m.moe->topk);
    moe.arg("--moe-ffn-hidden-size", m.moe->moe_ffn_hidden_size);
    if (m.moe->shared_expert_ffn_hidden_size > 0)
      moe.arg("--moe-shared-expert-intermediate-size", m.moe->shared_expert_ffn_hidden_size);
    if (m.moe->layer_freq != 1) moe.arg("--moe-layer-freq", m.moe->layer_freq);
    // Expert parallelism exchanges tokens by all-to-all, as the cost model assumes.
    moe.arg("--moe-token-dispatcher-type", "alltoall");
    L.groups.push_back(std::move(moe.g));
  }

  GroupBuilder train("TRAINING_ARGS");
  train.arg("--micro-batch-size", p.micro_batch_size);
  bool ramps = t.rampup_batch_size && p.global_batch_size > t.rampup_batch_size->start;
  if (t.rampup_batch_size) {
    const RampupBatchSize& r = *t.rampup_batch_size;
    if (r.start > p.global_batch_size || (p.global_batch_size - r.start) % r.increment != 0)
      throw Error(cat("training.rampup_batch_size: global_batch_size - start (",
                      p.global_batch_size, " - ", r.start,
                      ") must be a non-negative multiple of "
                      "the increment (",
                      r.increment, "), as Megatron-LM's ramp-up requires"));
    if (ramps && r.samples < 1)
      throw Error("training.rampup_batch_size: ramp_samples must be >= 1 when the batch ramps up");
    if (!ramps)
      L.notes.push_back(
          "training.rampup_batch_size starts at the global batch size: no ramp-up "
          "is written");
  }
  if (ramps && options.legacy_rampup) {
    const RampupBatchSize& r = *t.rampup_batch_size;
    train.arg("--global-batch-size", p.global_batch_size);
    train.g.args.push_back(
        {"--rampup-batch-size", {num(r.start), num(r.increment), num(r.samples)}});
    L.notes.push_back(
        "--rampup-batch-size is for Megatron-LM releases before "
        "--step-batch-size-schedule; the current one ignores it");
  } else if (ramps) {
    // Thresholds in tokens: Megatron-LM divides them by --seq-length (floor) to get samples.
    std::string sched;
    for (auto [samples, batch] : rampup_as_steps(*t.rampup_batch_size, p.global_batch_size))
      sched += (sched.empty() ? "" : " ") + num(samples * m.seq_length) + ":" + num(batch);
    train.arg("--step-batch-size-schedule", sched);
  } else {
    train.arg("--global-batch-size", p.global_batch_size);
  }
  if (t.train_iters > 0) {
    train.arg("--train-iters", t.train_iters);
  } else {
    L.notes.push_back(
        "the plan sets no training.train_iters: add --train-iters or --train-samples "
        "before running");
  }
  train.arg_d("--lr", t.lr);
  train.arg_d("--weight-decay", t.weight_decay);
  train.arg_d("--adam-beta1", t.adam_beta1);
  train.arg_d("--adam-beta2", t.adam_beta2);
  train.arg_d("--adam-eps", t.adam_eps);
  train.arg_d("--clip-grad", t.clip_grad);
  train.arg_d("--init-method-std", t.init_method_std);
  train.arg("--seed", t.seed);
  switch (t.precision) {
    case Precision::kBf16:
      train.flag("--bf16");
      // bf16 reduces gradients in fp32 unless --grad-reduce-in-bf16.
      if (!t.grads_in_fp32) train.flag("--grad-reduce-in-bf16");
      break;
    case Precision::kFp16:
      train.flag("--fp16");
      if (t.grads_in_fp32) train.flag("--accumulate-allreduce-grads-in-fp32");
      break;
    case Precision::kFp32:
      if (!t.grads_in_fp32)
        L.notes.push_back("training.grads_in_fp32 false has no meaning in fp32: not written");
      break;
  }
  if (p.recompute == Recompute::kSelective) {
    train.arg("--recompute-granularity", "selective");
  } else if (p.recompute == Recompute::kFull) {
    train.arg("--recompute-granularity", "full");
    train.arg("--recompute-method", to_string(p.recompute_method));
    train.arg("--recompute-num-layers", p.recompute_num_layers);
  }
  L.groups.push_back(std::move(train.g));

  GroupBuilder par("MODEL_PARALLEL_ARGS");
  par.arg("--tensor-model-parallel-size", p.tp);
  par.arg("--pipeline-model-parallel-size", p.pp);
  if (p.vpp > 1) par.arg("--num-virtual-stages-per-pipeline-rank", p.vpp);
  if (p.microbatch_group_size_per_vp_stage > 0)
    par.arg("--microbatch-group-size-per-virtual-pipeline-stage",
            p.microbatch_group_size_per_vp_stage);
  if (p.decoder_first_pipeline_num_layers)
    par.arg("--decoder-first-pipeline-num-layers", *p.decoder_first_pipeline_num_layers);
  if (p.decoder_last_pipeline_num_layers)
    par.arg("--decoder-last-pipeline-num-layers", *p.decoder_last_pipeline_num_layers);
  par.arg("--context-parallel-size", p.cp);
  if (m.moe || p.ep != 1 || p.etp != p.tp) {
    par.arg("--expert-model-parallel-size", p.ep);
    par.arg("--expert-tensor-parallel-size", p.etp);
  }
  if (p.sequence_parallel && p.tp > 1) par.flag("--sequence-parallel");
  if (p.sequence_parallel && p.tp == 1)
    L.notes.push_back(
        "parallel.sequence_parallel with tp 1: Megatron-LM turns it off, not written");
  if (p.order == kTpPpDpOrder) par.flag("--use-tp-pp-dp-mapping");
  if (p.distributed_optimizer) par.flag("--use-distributed-optimizer");
  if (p.overlap_grad_reduce) par.flag("--overlap-grad-reduce");
  if (p.distributed_optimizer && p.overlap_param_gather) {
    if (p.overlap_grad_reduce) {
      par.flag("--overlap-param-gather");
    } else {
      L.notes.push_back(
          "parallel.overlap_param_gather needs overlap_grad_reduce in Megatron-LM: "
          "not written");
    }
  }
  L.groups.push_back(std::move(par.g));

  switch (p.schedule) {
    case ScheduleKind::k1F1B:
      break;
    case ScheduleKind::kInterleaved:
      if (p.vpp == 1)
        L.notes.push_back("parallel.schedule interleaved with vpp 1 runs as 1F1B in Megatron-LM");
      break;
    case ScheduleKind::kGpipe:
      L.notes.push_back("parallel.schedule gpipe: Megatron-LM has no GPipe schedule and runs 1F1B");
      break;
    case ScheduleKind::kZbH1:
      L.notes.push_back(
          "parallel.schedule zb-h1: Megatron-LM has no zero-bubble schedule and runs "
          "1F1B");
      break;
  }

  GroupBuilder data("DATA_ARGS");
  // Synthetic data with a tokenizer of exactly --vocab-size tokens: the job runs as it is.
  data.flag("--mock-data");
  data.arg("--tokenizer-type", "NullTokenizer");
  L.groups.push_back(std::move(data.g));
  return L;
}

std::vector<std::string> megatron_argv(const MegatronLaunch& launch) {
  std::vector<std::string> out;
  for (const auto& g : launch.groups)
    for (const auto& a : g.args) {
      out.push_back(a.name);
      out.insert(out.end(), a.values.begin(), a.values.end());
    }
  return out;
}

std::string shell_quote(const std::string& w) {
  bool plain = !w.empty() && std::all_of(w.begin(), w.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) ||
           std::string_view("_./:=,+@%-").find(c) != std::string_view::npos;
  });
  if (plain) return w;
  std::string q = "'";
  for (char c : w) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

namespace {
std::string arg_line(const MegatronArg& a) {
  std::string s = a.name;
  for (const auto& v : a.values) {
    s += ' ';
    s += shell_quote(v);
  }
  return s;
}
}  // namespace

std::string render_megatron_args(const MegatronLaunch& launch) {
  std::string out;
  for (const auto& g : launch.groups)
    for (const auto& a : g.args) out += arg_line(a) + "\n";
  return out;
}

std::string render_megatron_torchrun(const MegatronLaunch& L, const std::string& title) {
  std::string s = "#!/bin/bash\n";
  s += "# " + title + "\n";
  s += cat("# Megatron-LM launch written by mplan export: ", L.nnodes * L.nproc_per_node,
           " GPUs as ", L.nnodes, " node", L.nnodes > 1 ? "s" : "", " x ", L.nproc_per_node,
           " processes.\n");
  s += "# Run it from the Megatron-LM repository root";
  s += L.nnodes > 1 ? " on every node, with NODE_RANK (0 .. NUM_NODES-1) and MASTER_ADDR set.\n"
                    : ".\n";
  for (const auto& n : L.notes) s += "# note: " + n + "\n";
  s += "\n";
  for (const auto& [k, v] : L.env) s += "export " + k + "=" + shell_quote(v) + "\n";
  s += cat("\nGPUS_PER_NODE=", L.nproc_per_node, "\nNUM_NODES=", L.nnodes, "\n");
  s += "NODE_RANK=${NODE_RANK:-0}\nMASTER_ADDR=${MASTER_ADDR:-localhost}\n"
       "MASTER_PORT=${MASTER_PORT:-6000}\n\n";
  s += "DISTRIBUTED_ARGS=(\n    --nproc_per_node $GPUS_PER_NODE\n    --nnodes $NUM_NODES\n"
       "    --node_rank $NODE_RANK\n    --master_addr $MASTER_ADDR\n"
       "    --master_port $MASTER_PORT\n)\n";
  for (const auto& g : L.groups) {
    s += "\n" + g.name + "=(\n";
    for (const auto& a : g.args) s += "    " + arg_line(a) + "\n";
    s += ")\n";
  }
  s += "\ntorchrun \"${DISTRIBUTED_ARGS[@]}\" " + L.script;
  for (const auto& g : L.groups) s += " \\\n    \"${" + g.name + "[@]}\"";
  s += "\n";
  return s;
}

Json megatron_launch_to_json(const MegatronLaunch& L) {
  Json j;
  j["schema_version"] = 1;
  j["launcher"] = {{"program", "torchrun"},
                   {"nproc_per_node", L.nproc_per_node},
                   {"nnodes", L.nnodes},
                   {"world_size", L.nproc_per_node * L.nnodes}};
  Json env = Json::object();
  for (const auto& [k, v] : L.env) env[k] = v;
  j["env"] = env;
  j["script"] = L.script;
  Json groups = Json::object();
  for (const auto& g : L.groups) {
    Json a = Json::array();
    for (const auto& arg : g.args) {
      a.push_back(arg.name);
      for (const auto& v : arg.values) a.push_back(v);
    }
    groups[g.name] = a;
  }
  j["groups"] = groups;
  j["argv"] = megatron_argv(L);
  j["notes"] = L.notes;
  return j;
}

// ---------------------------------------------------------------------------------------------
// Import

namespace {

// Arguments that change neither time nor memory of a training step: data, tokenizer files,
// checkpoints, logging, evaluation, learning-rate schedule. Matched as name prefixes.
const std::vector<std::string>& no_effect_prefixes() {
  static const std::vector<std::string> v = {"--data-path",
                                             "--data-cache-path",
                                             "--data-args-path",
                                             "--per-split-data-args-path",
                                             "--train-data-path",
                                             "--valid-data-path",
                                             "--test-data-path",
                                             "--split",
                                             "--mock-data",
                                             "--vocab-file",
                                             "--merge-file",
                                             "--tokenizer-",
                                             "--tiktoken-",
                                             "--num-workers",
                                             "--no-mmap-bin-files",
                                             "--no-create-attention-mask-in-dataloader",
                                             "--save",
                                             "--load",
                                             "--no-save-",
                                             "--no-load-",
                                             "--ckpt-",
                                             "--dist-ckpt-",
                                             "--async-save",
                                             "--finetune",
                                             "--pretrained-checkpoint",
                                             "--use-checkpoint-args",
                                             "--auto-detect-ckpt-format",
                                             "--log-",
                                             "--tensorboard-",
                                             "--wandb-",
                                             "--eval-",
                                             "--exit-",
                                             "--timing-log-",
                                             "--distributed-timeout-minutes",
                                             "--lr-",
                                             "--min-lr",
                                             "--decoupled-",
                                             "--train-samples",
                                             "--use-mcore-models",
                                             "--profile",
                                             "--use-pytorch-profiler",
                                             "--record-memory-history",
                                             "--memory-snapshot-path",
                                             "--rotary-base",
                                             "--norm-epsilon",
                                             "--loss-scale",
                                             "--initial-loss-scale",
                                             "--min-loss-scale",
                                             "--hysteresis",
                                             "--moe-aux-loss-coeff",
                                             "--override-opt",
                                             "--use-checkpoint-opt",
                                             "--no-check-for-nan",
                                             "--check-for-",
                                             "--start-weight-decay",
                                             "--end-weight-decay",
                                             "--weight-decay-incr-style",
                                             "--rerun-",
                                             "--one-logger",
                                             "--enable-one-logger",
                                             "--straggler",
                                             "--no-async-save"};
  return v;
}

bool has_no_effect(const std::string& name) {
  for (const auto& p : no_effect_prefixes())
    if (name.compare(0, p.size(), p) == 0) return true;
  return false;
}

std::string basename_of(const std::string& path) {
  size_t s = path.find_last_of('/');
  return s == std::string::npos ? path : path.substr(s + 1);
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string join_unknown(const std::vector<std::string>& u) {
  std::string s;
  for (const auto& x : u) s += (s.empty() ? "" : ", ") + x;
  return s;
}

// How to give a value for what a field depends on, e.g. "--var 1=VALUE".
std::string how_to_set(const std::vector<std::string>& unknown) {
  for (const auto& u : unknown)
    if (u.size() > 1 && u[0] == '$' &&
        (std::isalnum(static_cast<unsigned char>(u[1])) || u[1] == '_') &&
        u.find_first_of("({ ") == std::string::npos)
      return cat("give it with --var ", u.substr(1), "=VALUE");
  return "give the value in the script";
}

struct ArgOccurrence {
  std::string name;
  std::vector<ShellField> values;
};

// pretrain_gpt.py's arguments in order; argparse semantics: the last occurrence wins.
class ArgList {
 public:
  ArgList(std::vector<ArgOccurrence> list, std::vector<std::string>& warnings)
      : list_(std::move(list)), warnings_(warnings) {
    for (size_t i = 0; i < list_.size(); ++i) {
      auto it = last_.find(list_[i].name);
      if (it != last_.end()) {
        const auto& a = list_[it->second].values;
        const auto& b = list_[i].values;
        if (a != b)
          warnings_.push_back(cat(list_[i].name, " is given twice; the last value wins (",
                                  text_of(b), "), as in Megatron-LM's argparse"));
      }
      last_[list_[i].name] = i;
    }
  }

  static std::string text_of(const std::vector<ShellField>& v) {
    std::string s;
    for (const auto& f : v) s += (s.empty() ? "" : " ") + f.text;
    return s;
  }

  bool has(const std::string& name) const { return last_.count(name) > 0; }

  const ArgOccurrence* get(const std::string& name) {
    auto it = last_.find(name);
    if (it == last_.end()) return nullptr;
    used_.insert(name);
    return &list_[it->second];
  }

  // A flag (store_true): present, and takes no value.
  bool flag(const std::string& name) {
    const ArgOccurrence* a = get(name);
    if (!a) return false;
    if (!a->values.empty())
      throw Error(cat(name, ": takes no value, got '", text_of(a->values), "'"));
    return true;
  }

  // The single value of `name`, or nullopt when absent. A value that depends on something
  // without a value here: an error when the argument shapes the plan (`layout`), otherwise a
  // warning and nullopt (the caller uses its default).
  std::optional<std::string> value(const std::string& name, bool layout) {
    const ArgOccurrence* a = get(name);
    if (!a) return std::nullopt;
    if (a->values.size() != 1)
      throw Error(cat(name, ": takes one value, got ",
                      a->values.empty() ? std::string("none") : "'" + text_of(a->values) + "'"));
    const ShellField& f = a->values[0];
    if (!f.resolved()) {
      if (layout)
        throw Error(cat(name, ": its value (", f.text, ") depends on ", join_unknown(f.unknown),
                        ", which has no value here; ", how_to_set(f.unknown)));
      warnings_.push_back(cat(name, ": its value (", f.text, ") depends on ",
                              join_unknown(f.unknown),
                              ", which has no value here; the plan keeps its default"));
      return std::nullopt;
    }
    return f.text;
  }

  std::optional<int64_t> int_value(const std::string& name, int64_t min, bool layout) {
    auto v = value(name, layout);
    if (!v) return std::nullopt;
    const std::string& s = *v;
    int64_t x = 0;
    auto r = std::from_chars(s.data(), s.data() + s.size(), x);
    if (r.ec != std::errc() || r.ptr != s.data() + s.size())
      throw Error(cat(name, ": must be an integer, got '", s, "'"));
    if (x < min) throw Error(cat(name, ": must be >= ", min, ", got ", x));
    return x;
  }

  std::optional<double> double_value(const std::string& name, double min, bool layout) {
    auto v = value(name, layout);
    if (!v) return std::nullopt;
    const std::string& s = *v;
    char* end = nullptr;
    double x = std::strtod(s.c_str(), &end);
    if (s.empty() || end != s.c_str() + s.size() || !std::isfinite(x))
      throw Error(cat(name, ": must be a number, got '", s, "'"));
    if (x < min) throw Error(cat(name, ": must be >= ", num(min), ", got ", s));
    return x;
  }

  // Arguments no getter asked for, as "--name value ...", split into those with no effect on a
  // step and those mplan does not model.
  void leftovers(std::vector<std::string>& ignored, std::vector<std::string>& not_modelled) const {
    std::set<std::string> seen;
    for (const auto& a : list_) {
      if (used_.count(a.name) || !seen.insert(a.name).second) continue;
      const ArgOccurrence& last = list_[last_.at(a.name)];
      std::string s = last.name;
      if (!last.values.empty()) s += " " + text_of(last.values);
      (has_no_effect(a.name) ? ignored : not_modelled).push_back(s);
    }
  }

  // "$1 (no value): --save, --load" for each unknown a value depends on.
  std::vector<std::string> undefined_report() const {
    std::vector<std::string> order;
    std::map<std::string, std::vector<std::string>> users;
    for (const auto& a : list_)
      for (const auto& v : a.values)
        for (const auto& u : v.unknown) {
          if (!users.count(u)) order.push_back(u);
          auto& l = users[u];
          if (std::find(l.begin(), l.end(), a.name) == l.end()) l.push_back(a.name);
        }
    // Positional arguments first, by number, then the rest in order of use.
    auto rank = [](const std::string& u) -> int64_t {
      int64_t n = 0;
      for (size_t i = 1; i < u.size(); ++i) {
        if (!std::isdigit(static_cast<unsigned char>(u[i]))) return INT64_MAX;
        n = n * 10 + (u[i] - '0');
      }
      return u.size() > 1 ? n : INT64_MAX;
    };
    std::stable_sort(order.begin(), order.end(),
                     [&](const std::string& a, const std::string& b) { return rank(a) < rank(b); });
    std::vector<std::string> out;
    for (const auto& u : order) out.push_back(cat(u, " (no value here): ", join_unknown(users[u])));
    return out;
  }

 private:
  std::vector<ArgOccurrence> list_;
  std::map<std::string, size_t> last_;
  std::set<std::string> used_;
  std::vector<std::string>& warnings_;
};

struct Launcher {
  std::optional<int64_t> world;  // processes launched, when known
  std::string description;       // "--nproc_per_node 8 x --nnodes 1"
  int64_t nproc_per_node = 0;
  int64_t nnodes = 0;
};

// Reads torchrun's (or python -m torch.distributed.run/launch's) process count.
Launcher read_launcher(const std::vector<ShellField>& words, size_t script_at,
                       const MegatronImportOptions& o, std::vector<std::string>& warnings) {
  Launcher l;
  size_t start = std::string::npos;
  for (size_t i = 0; i < script_at; ++i) {
    const std::string& w = words[i].text;
    if (basename_of(w) == "torchrun") start = i + 1;
    if (w == "-m" && i + 1 < script_at &&
        (words[i + 1].text == "torch.distributed.run" ||
         words[i + 1].text == "torch.distributed.launch"))
      start = i + 2;
  }
  if (start == std::string::npos) {
    std::string prog = basename_of(words[0].text);
    if (prog.rfind("python", 0) == 0) {
      l.world = 1;
      l.nproc_per_node = l.nnodes = 1;
      l.description = "plain " + prog + " (one process)";
    } else {
      warnings.push_back(cat("the script launches ", words[script_at].text, " with ", words[0].text,
                             ": its process count is not known here"));
    }
    return l;
  }
  int64_t nproc = 1, nnodes = 1;  // torchrun's defaults
  bool known = true;
  for (size_t i = start; i < script_at; ++i) {
    std::string w = words[i].text;
    std::string name = w, val;
    const ShellField* vf = nullptr;
    size_t eq = w.find('=');
    if (w.rfind("--", 0) == 0 && eq != std::string::npos) {
      name = w.substr(0, eq);
      val = w.substr(eq + 1);
      vf = &words[i];
    } else if (i + 1 < script_at) {
      vf = &words[i + 1];
      val = vf->text;
    }
    bool is_nproc = name == "--nproc_per_node" || name == "--nproc-per-node";
    bool is_nnodes = name == "--nnodes";
    if (!is_nproc && !is_nnodes) continue;
    if (!vf) throw Error(cat(name, ": missing its value"));
    if (eq == std::string::npos) ++i;
    if (!vf->resolved()) {
      if (o.gpus > 0) {
        known = false;
        continue;
      }
      throw Error(cat(name, ": its value (", vf->text, ") depends on ", join_unknown(vf->unknown),
                      ", which has no value here; ", how_to_set(vf->unknown),
                      ", or size the plan with --gpus N"));
    }
    if (is_nproc) {
      if (val == "gpu" || val == "auto") {
        nproc = o.cluster.gpus_per_node;
        warnings.push_back(
            cat(name, " ", val, ": read as the cluster's ", nproc, " GPUs per node"));
        continue;
      }
      int64_t x = 0;
      auto r = std::from_chars(val.data(), val.data() + val.size(), x);
      if (r.ec != std::errc() || r.ptr != val.data() + val.size() || x < 1)
        throw Error(cat(name, ": must be an integer >= 1, got '", val, "'"));
      nproc = x;
    } else {
      std::string v = val;
      size_t colon = v.find(':');
      if (colon != std::string::npos) {
        warnings.push_back(cat("--nnodes ", v, ": an elastic range; read as its maximum"));
        v = v.substr(colon + 1);
      }
      int64_t x = 0;
      auto r = std::from_chars(v.data(), v.data() + v.size(), x);
      if (r.ec != std::errc() || r.ptr != v.data() + v.size() || x < 1)
        throw Error(cat("--nnodes: must be an integer >= 1, got '", val, "'"));
      nnodes = x;
    }
  }
  if (known) {
    l.world = nproc * nnodes;
    l.nproc_per_node = nproc;
    l.nnodes = nnodes;
    l.description = cat("--nproc_per_node ", nproc, " x --nnodes ", nnodes);
  }
  return l;
}

// Python's int(float(text) * multiplier) for Megatron-LM's "2.4B"-style numbers.
std::optional<int64_t> parse_suffixed(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  double mult = 1;
  if (!s.empty()) {
    char last = s.back();
    if (last == 'T') mult = 1e12;
    if (last == 'B') mult = 1e9;
    if (last == 'M') mult = 1e6;
    if (last == 'K') mult = 1e3;
    if (mult != 1) s.pop_back();
  }
  char* end = nullptr;
  double x = std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size() || !std::isfinite(x)) return std::nullopt;
  return static_cast<int64_t>(std::trunc(x * mult));
}

int64_t lcm64(int64_t a, int64_t b) { return a / std::gcd(a, b) * b; }

// Model presets with the same architecture. Compares the padded vocabulary (what the model
// holds) and, with learned positions, the position table; the sequence length may differ.
std::string match_preset(const ModelSpec& m, int64_t tp, bool compare_vocab, std::string& detail) {
  for (const auto& name : preset_names("models")) {
    ModelSpec pm = load_model(name);
    bool same = pm.num_layers == m.num_layers && pm.hidden_size == m.hidden_size &&
                pm.num_attention_heads == m.num_attention_heads &&
                pm.num_query_groups == m.num_query_groups && pm.kv_channels == m.kv_channels &&
                pm.ffn_hidden_size == m.ffn_hidden_size && pm.activation == m.activation &&
                pm.normalization == m.normalization &&
                pm.position_embedding == m.position_embedding &&
                pm.tied_embeddings == m.tied_embeddings &&
                pm.add_bias_linear == m.add_bias_linear && pm.moe == m.moe;
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
    return name;
  }
  return "";
}

// The schedule of --step-batch-size-schedule as (threshold in samples, batch), as
// StepBatchsizeNumMicroBatchesCalculator parses it (thresholds in tokens when seq_length is set).
std::vector<std::pair<int64_t, int64_t>> parse_step_schedule(const std::string& text,
                                                             int64_t seq_length) {
  const std::string flag = "--step-batch-size-schedule";
  std::vector<std::pair<int64_t, int64_t>> out;
  std::string s = text;
  std::replace(s.begin(), s.end(), ',', ' ');
  size_t p = 0;
  while (p < s.size()) {
    size_t b = s.find_first_not_of(" \t\n", p);
    if (b == std::string::npos) break;
    size_t e = s.find_first_of(" \t\n", b);
    std::string entry = s.substr(b, e == std::string::npos ? std::string::npos : e - b);
    p = e == std::string::npos ? s.size() : e;
    size_t colon = entry.find(':');
    if (colon == std::string::npos)
      throw Error(cat(flag, ": entry '", entry, "' is not THRESHOLD:BATCH_SIZE"));
    auto th = parse_suffixed(entry.substr(0, colon));
    auto bs = parse_suffixed(entry.substr(colon + 1));
    if (!th || !bs || *th < 0 || *bs < 1)
      throw Error(cat(flag, ": entry '", entry, "' is not THRESHOLD:BATCH_SIZE"));
    out.push_back({*th / seq_length, *bs});
  }
  if (out.empty()) throw Error(cat(flag, ": empty schedule"));
  std::stable_sort(out.begin(), out.end(), [](auto& a, auto& b) { return a.first < b.first; });
  if (out[0].first != 0)
    throw Error(
        cat(flag, ": the first entry must have threshold 0, got ", out[0].first, " samples"));
  for (size_t i = 1; i < out.size(); ++i)
    if (out[i].first <= out[i - 1].first)
      throw Error(cat(flag, ": thresholds must increase, got ", out[i - 1].first, " then ",
                      out[i].first, " samples"));
  return out;
}

// The legacy ramp-up that gives exactly `steps`, when there is one. Its increment divides every
// step (several increments can share a threshold), and its ramp length is the last threshold
// (or one less, where the float division lands just below a whole increment).
std::optional<RampupBatchSize> steps_as_rampup(
    const std::vector<std::pair<int64_t, int64_t>>& steps) {
  if (steps.size() < 2) return std::nullopt;
  int64_t start = steps[0].second;
  int64_t global = steps.back().second;
  int64_t last = steps.back().first;
  int64_t g = 0;
  for (size_t i = 1; i < steps.size(); ++i) {
    int64_t d = steps[i].second - steps[i - 1].second;
    if (d < 1) return std::nullopt;
    g = std::gcd(g, d);
  }
  std::vector<int64_t> divisors;
  for (int64_t d = 1; d * d <= g; ++d)
    if (g % d == 0) divisors.insert(divisors.end(), {d, g / d});
  std::sort(divisors.rbegin(), divisors.rend());
  for (int64_t incr : divisors) {
    for (int64_t samples : {last, last - 1}) {
      if (samples < 1) continue;
      RampupBatchSize r{start, incr, samples};
      if (rampup_as_steps(r, global) == steps) return r;
    }
  }
  return std::nullopt;
}

}  // namespace

MegatronImport import_megatron(const std::string& text, const MegatronImportOptions& o) {
  MegatronImport r;
  ShellReadOptions so;
  so.vars = o.vars;
  ShellScript sh = read_shell_script(text, so);
  for (const auto& n : sh.notes) r.warnings.push_back(n);

  // --- the launch command ------------------------------------------------------------------
  // The training program: the last command running a pretrain*/train* Python file, else the
  // last command running any Python file.
  const ShellCommand* launch = nullptr;
  size_t script_at = 0;
  int candidates = 0;
  bool launch_is_training = false;
  for (const auto& c : sh.commands) {
    for (size_t i = 0; i < c.words.size(); ++i) {
      const ShellField& w = c.words[i];
      if (!w.resolved() || !ends_with(w.text, ".py")) continue;
      std::string base = basename_of(w.text);
      bool training = base.find("train") != std::string::npos;
      ++candidates;
      if (training || !launch_is_training) {
        launch = &c;
        script_at = i;
        launch_is_training = training;
      }
      break;
    }
  }
  std::vector<ShellField> arg_words;
  Launcher launcher;
  if (launch) {
    if (candidates > 1)
      r.warnings.push_back(cat("the script runs ", candidates,
                               " Python programs; reading the one "
                               "on line ",
                               launch->line, " (", launch->words[script_at].text, ")"));
    std::string base = basename_of(launch->words[script_at].text);
    if (base.rfind("pretrain_", 0) == 0 && base != "pretrain_gpt.py")
      throw Error(cat(base, ": mplan imports GPT decoder jobs (pretrain_gpt.py) only"));
    if (base != "pretrain_gpt.py")
      r.warnings.push_back(
          cat("the script runs ", base, ", read as Megatron-LM's pretrain_gpt.py"));
    launcher = read_launcher(launch->words, script_at, o, r.warnings);
    arg_words.assign(launch->words.begin() + static_cast<long>(script_at) + 1, launch->words.end());
  } else {
    for (const auto& c : sh.commands)
      if (!c.words.empty() && c.words[0].text.rfind("--", 0) == 0)
        arg_words.insert(arg_words.end(), c.words.begin(), c.words.end());
    if (arg_words.empty())
      throw Error(
          "no Megatron-LM launch command (torchrun ... pretrain_gpt.py ...) and no "
          "argument list (--num-layers ...) found");
  }

  // --- arguments ---------------------------------------------------------------------------
  std::vector<ArgOccurrence> occ;
  for (const auto& w : arg_words) {
    if (w.resolved() && w.text.rfind("--", 0) == 0) {
      size_t eq = w.text.find('=');
      if (eq != std::string::npos) {
        occ.push_back({w.text.substr(0, eq), {{w.text.substr(eq + 1), w.unknown}}});
      } else {
        occ.push_back({w.text, {}});
      }
    } else if (!occ.empty()) {
      occ.back().values.push_back(w);
    } else if (!w.resolved()) {
      r.warnings.push_back(cat("pretrain_gpt.py gets ", w.text, ", which depends on ",
                               join_unknown(w.unknown),
                               " with no value here: any arguments it "
                               "holds are not read"));
    } else {
      throw Error(cat("pretrain_gpt.py: unexpected argument '", w.text,
                      "' (Megatron-LM takes only --options)"));
    }
  }
  ArgList args(std::move(occ), r.warnings);
  r.undefined = args.undefined_report();
  for (const auto& d : sh.defaults_used)
    r.undefined.push_back(d + " (has no value here; the script's default is used)");

  // Arguments that make a model or layout mplan cannot represent.
  for (const char* refused :
       {"--pipeline-model-parallel-layout", "--hybrid-layer-pattern", "--multi-latent-attention",
        "--encoder-num-layers", "--decoder-num-layers"}) {
    if (args.has(refused))
      throw Error(cat(refused,
                      ": not modelled by mplan (its plans are GPT decoders with an even "
                      "or first/last-uneven pipeline split)"));
  }
  if (args.has("--model-parallel-size"))
    throw Error("--model-parallel-size: Megatron-LM refuses it; use --tensor-model-parallel-size");

  // --- model ---------------------------------------------------------------------------------
  auto required = [&](const char* name) {
    auto v = args.int_value(name, 1, true);
    if (!v) throw Error(cat(name, ": missing (Megatron-LM requires it)"));
    return *v;
  };
  ModelSpec m;
  m.num_layers = required("--num-layers");
  m.hidden_size = required("--hidden-size");
  m.num_attention_heads = required("--num-attention-heads");
  bool gqa = args.flag("--group-query-attention");
  auto groups = args.int_value("--num-query-groups", 1, true);
  m.num_query_groups = gqa ? groups.value_or(1) : m.num_attention_heads;
  if (!gqa && groups)
    r.warnings.push_back(
        "--num-query-groups without --group-query-attention: Megatron-LM ignores "
        "it (multi-head attention)");
  if (m.num_attention_heads % m.num_query_groups != 0)
    throw Error(cat("--num-query-groups: must divide --num-attention-heads (",
                    m.num_attention_heads, "), got ", m.num_query_groups));
  auto kv = args.int_value("--kv-channels", 1, true);
  if (!kv && m.hidden_size % m.num_attention_heads != 0)
    throw Error(cat("--hidden-size: must be divisible by --num-attention-heads (",
                    m.num_attention_heads, ") unless --kv-channels is given, got ", m.hidden_size));
  m.kv_channels = kv.value_or(m.hidden_size / m.num_attention_heads);
  bool swiglu = args.flag("--swiglu");
  m.activation = swiglu ? Activation::kSwiglu : Activation::kGelu;
  for (const char* act : {"--squared-relu", "--quick-geglu", "--openai-gelu"})
    if (args.has(act))
      r.warnings.push_back(
          cat(act, ": not modelled; mplan costs the MLP as ", swiglu ? "SwiGLU" : "GeLU"));
  // arguments.py: ffn_hidden_size defaults to 4h, or int((4h * 2/3) / 64) * 64 with SwiGLU.
  auto ffn = args.int_value("--ffn-hidden-size", 1, true);
  if (ffn) {
    m.ffn_hidden_size = *ffn;
  } else if (swiglu) {
    double x = static_cast<double>(4 * m.hidden_size * 2) / 3.0 / 64.0;
    m.ffn_hidden_size = static_cast<int64_t>(x) * 64;
  } else {
    m.ffn_hidden_size = 4 * m.hidden_size;
  }
  m.seq_length = required("--seq-length");
  m.max_position_embeddings = required("--max-position-embeddings");
  if (m.max_position_embeddings < m.seq_length)
    throw Error(cat("--max-position-embeddings: must be >= --seq-length (", m.seq_length,
                    ") as Megatron-LM requires, got ", m.max_position_embeddings));
  std::string pos = args.value("--position-embedding-type", true).value_or("learned_absolute");
  if (args.flag("--use-rotary-position-embeddings")) pos = "rope";
  if (pos == "learned_absolute") {
    m.position_embedding = PositionEmbedding::kLearned;
  } else if (pos == "rope") {
    m.position_embedding = PositionEmbedding::kRope;
  } else if (pos == "yarn" || pos == "mrope" || pos == "relative" || pos == "none") {
    m.position_embedding = PositionEmbedding::kRope;
    r.warnings.push_back(cat("--position-embedding-type ", pos,
                             ": not modelled; costed as rope "
                             "(no position parameters)"));
  } else {
    throw Error(
        cat("--position-embedding-type: must be one of learned_absolute, rope, yarn, "
            "mrope, relative, none; got '",
            pos, "'"));
  }
  if (args.flag("--no-position-embedding") && pos != "rope")
    throw Error(
        "--no-position-embedding: Megatron-LM refuses it unless --position-embedding-type "
        "rope (use --position-embedding-type)");
  std::string norm = args.value("--normalization", true).value_or("LayerNorm");
  if (norm == "LayerNorm") {
    m.normalization = Normalization::kLayerNorm;
  } else if (norm == "RMSNorm") {
    m.normalization = Normalization::kRmsNorm;
  } else {
    throw Error(cat("--normalization: must be LayerNorm or RMSNorm, got '", norm, "'"));
  }
  m.tied_embeddings = !args.flag("--untie-embeddings-and-output-weights");
  m.add_bias_linear = !args.flag("--disable-bias-linear");
  m.make_vocab_size_divisible_by =
      args.int_value("--make-vocab-size-divisible-by", 1, true).value_or(128);
  auto experts = args.int_value("--num-experts", 0, true);
  if (experts && *experts > 0) {
    MoeSpec moe;
    moe.num_experts = *experts;
    moe.topk = args.int_value("--moe-router-topk", 1, true).value_or(2);
    if (moe.topk > moe.num_experts)
      throw Error(cat("--moe-router-topk: must be <= --num-experts (", moe.num_experts, "), got ",
                      moe.topk));
    moe.moe_ffn_hidden_size =
        args.int_value("--moe-ffn-hidden-size", 1, true).value_or(m.ffn_hidden_size);
    moe.shared_expert_ffn_hidden_size =
        args.int_value("--moe-shared-expert-intermediate-size", 1, true).value_or(0);
    if (auto f = args.value("--moe-layer-freq", true)) {
      int64_t x = 0;
      auto res = std::from_chars(f->data(), f->data() + f->size(), x);
      if (res.ec != std::errc() || res.ptr != f->data() + f->size() || x < 1)
        throw Error(
            cat("--moe-layer-freq: only an integer frequency N >= 1 (every N-th layer is "
                "MoE) is modelled, got '",
                *f, "'"));
      moe.layer_freq = x;
    }
    m.moe = moe;
  }

  // --- parallel layout -----------------------------------------------------------------------
  ParallelConfig p;
  p.tp = args.int_value("--tensor-model-parallel-size", 1, true).value_or(1);
  p.pp = args.int_value("--pipeline-model-parallel-size", 1, true).value_or(1);
  p.cp = args.int_value("--context-parallel-size", 1, true).value_or(1);
  p.ep = args.int_value("--expert-model-parallel-size", 1, true).value_or(1);
  p.etp = args.int_value("--expert-tensor-parallel-size", 1, true).value_or(p.tp);
  if (p.ep > 1 && !m.moe)
    throw Error(cat("--expert-model-parallel-size: ", p.ep,
                    " needs --num-experts (Megatron-LM "
                    "requires an MoE model for expert parallelism)"));
  p.decoder_first_pipeline_num_layers =
      args.int_value("--decoder-first-pipeline-num-layers", 1, true);
  p.decoder_last_pipeline_num_layers =
      args.int_value("--decoder-last-pipeline-num-layers", 1, true);
  bool uneven = p.decoder_first_pipeline_num_layers || p.decoder_last_pipeline_num_layers;
  auto per_stage = args.int_value("--num-layers-per-virtual-pipeline-stage", 1, true);
  auto stages = args.int_value("--num-virtual-stages-per-pipeline-rank", 1, true);
  auto vpp_old = args.int_value("--virtual-pipeline-model-parallel-size", 1, true);
  if (int(per_stage.has_value()) + int(stages.has_value()) + int(vpp_old.has_value()) > 1)
    throw Error(
        "--num-layers-per-virtual-pipeline-stage: give only one of it, "
        "--num-virtual-stages-per-pipeline-rank and --virtual-pipeline-model-parallel-size");
  if (vpp_old) {
    p.vpp = *vpp_old;
    r.warnings.push_back(
        "--virtual-pipeline-model-parallel-size: not an argument of the current "
        "Megatron-LM (it takes --num-virtual-stages-per-pipeline-rank); read as vpp");
  } else if (stages) {
    p.vpp = *stages;
  } else if (per_stage) {
    if (uneven)
      throw Error(
          "--num-layers-per-virtual-pipeline-stage: Megatron-LM refuses it with an uneven "
          "pipeline; use --num-virtual-stages-per-pipeline-rank");
    if (m.num_layers % p.pp != 0)
      throw Error(cat("--pipeline-model-parallel-size: must divide --num-layers (", m.num_layers,
                      "), got ", p.pp));
    if ((m.num_layers / p.pp) % *per_stage != 0)
      throw Error(cat("--num-layers-per-virtual-pipeline-stage: must divide the ",
                      m.num_layers / p.pp, " layers per pipeline stage, got ", *per_stage));
    p.vpp = m.num_layers / p.pp / *per_stage;
  }
  if (p.vpp > 1 && p.pp == 1)
    throw Error(
        "--num-virtual-stages-per-pipeline-rank: virtual pipeline stages need "
        "--pipeline-model-parallel-size > 1");
  p.schedule = p.vpp > 1 ? ScheduleKind::kInterleaved : ScheduleKind::k1F1B;
  p.microbatch_group_size_per_vp_stage =
      args.int_value("--microbatch-group-size-per-virtual-pipeline-stage", 1, true).value_or(0);
  if (auto d = args.value("--moe-token-dispatcher-type", false); d && *d != "alltoall")
    r.warnings.push_back(cat("--moe-token-dispatcher-type ", *d,
                             ": not modelled; mplan costs the "
                             "token exchange as all-to-all"));
  p.sequence_parallel = args.flag("--sequence-parallel");
  if (p.sequence_parallel && p.tp == 1) {
    p.sequence_parallel = false;
    r.warnings.push_back(
        "--sequence-parallel with tensor parallel size 1: Megatron-LM turns it "
        "off, and so does the plan");
  }
  p.order = args.flag("--use-tp-pp-dp-mapping") ? kTpPpDpOrder : kDefaultOrder;
  auto mbs = args.int_value("--micro-batch-size", 1, true);
  if (!mbs) throw Error("--micro-batch-size: missing (Megatron-LM requires it)");
  p.micro_batch_size = *mbs;

  // Recompute: TransformerConfig's rules.
  std::string gran = args.value("--recompute-granularity", true).value_or("");
  if (args.flag("--recompute-activations")) gran = "selective";
  auto method = args.value("--recompute-method", true);
  auto rnl = args.int_value("--recompute-num-layers", 1, true);
  if (gran == "full") {
    p.recompute = Recompute::kFull;
    if (!method)
      throw Error(
          "--recompute-method: missing; Megatron-LM needs uniform or block with "
          "--recompute-granularity full");
    if (*method != "uniform" && *method != "block")
      throw Error(cat("--recompute-method: must be uniform or block, got '", *method, "'"));
    if (!rnl)
      throw Error(
          "--recompute-num-layers: missing; Megatron-LM needs it with "
          "--recompute-granularity full");
    p.recompute_method = *method == "uniform" ? RecomputeMethod::kUniform : RecomputeMethod::kBlock;
    p.recompute_num_layers = *rnl;
  } else if (gran == "selective") {
    p.recompute = Recompute::kSelective;
    if (method)
      throw Error(
          "--recompute-method: Megatron-LM refuses it with --recompute-granularity "
          "selective");
    if (rnl)
      throw Error(
          "--recompute-num-layers: Megatron-LM refuses it with --recompute-granularity "
          "selective");
  } else if (gran.empty()) {
    if (method || rnl)
      r.warnings.push_back(
          "--recompute-method / --recompute-num-layers without "
          "--recompute-granularity: no recompute");
  } else {
    throw Error(cat("--recompute-granularity: must be full or selective, got '", gran, "'"));
  }

  p.distributed_optimizer = args.flag("--use-distributed-optimizer");
  p.overlap_grad_reduce = args.flag("--overlap-grad-reduce");
  bool opg = args.flag("--overlap-param-gather");
  if (opg && !p.distributed_optimizer)
    throw Error(
        "--overlap-param-gather: Megatron-LM supports it only with "
        "--use-distributed-optimizer");
  if (opg && !p.overlap_grad_reduce)
    throw Error("--overlap-param-gather: Megatron-LM needs --overlap-grad-reduce with it");
  // Without the distributed optimizer there is no parameter gather: keep the plan's default.
  p.overlap_param_gather = p.distributed_optimizer ? opg : true;
  for (const char* a :
       {"--account-for-embedding-in-pipeline-split", "--account-for-loss-in-pipeline-split"})
    if (args.has(a))
      r.warnings.push_back(cat(a, ": not modelled; the plan splits the transformer layers only"));

  // --- training ------------------------------------------------------------------------------
  TrainingConfig t;
  bool bf16 = args.flag("--bf16"), fp16 = args.flag("--fp16");
  if (bf16 && fp16) throw Error("--bf16: Megatron-LM refuses --bf16 together with --fp16");
  t.precision = bf16 ? Precision::kBf16 : fp16 ? Precision::kFp16 : Precision::kFp32;
  bool reduce_bf16 = args.flag("--grad-reduce-in-bf16");
  bool acc_fp32 = args.flag("--accumulate-allreduce-grads-in-fp32");
  if (bf16) {
    t.grads_in_fp32 = !reduce_bf16;  // arguments.py: bf16 accumulates in fp32 unless bf16 reduce
  } else if (fp16) {
    t.grads_in_fp32 = acc_fp32;
  } else {
    t.grads_in_fp32 = true;
  }
  if (args.has("--fp8-format"))
    r.warnings.push_back("--fp8-format: fp8 compute is not modelled; the plan is costed in " +
                         std::string(to_string(t.precision)));
  std::string backend = args.value("--attention-backend", false).value_or("auto");
  if (args.flag("--use-flash-attn")) backend = "flash";
  if (backend == "unfused" || backend == "local") {
    t.attention_backend = AttentionBackend::kUnfused;
  } else if (backend == "auto" && t.precision == Precision::kFp32) {
    t.attention_backend = AttentionBackend::kUnfused;  // auto: no flash kernels in fp32
  } else if (backend == "auto" || backend == "flash" || backend == "fused") {
    t.attention_backend = AttentionBackend::kFlash;
  } else {
    throw Error(cat("--attention-backend: must be one of auto, flash, fused, unfused, local; got '",
                    backend, "'"));
  }
  // Megatron-LM's defaults where the script is silent (arguments.py / its config dataclasses).
  if (auto v = args.double_value("--lr", 0.0, false)) {
    t.lr = *v;
  } else if (!args.has("--lr")) {
    r.warnings.push_back(cat("--lr: not given (Megatron-LM needs it); the plan uses ", num(t.lr)));
  }
  t.weight_decay = args.double_value("--weight-decay", 0.0, false).value_or(0.01);
  t.adam_beta1 = args.double_value("--adam-beta1", 0.0, false).value_or(0.9);
  t.adam_beta2 = args.double_value("--adam-beta2", 0.0, false).value_or(0.999);
  t.adam_eps = args.double_value("--adam-eps", 0.0, false).value_or(1e-8);
  t.clip_grad = args.double_value("--clip-grad", 0.0, false).value_or(1.0);
  t.init_method_std = args.double_value("--init-method-std", 0.0, false).value_or(0.02);
  t.seed = args.int_value("--seed", 0, false).value_or(1234);
  t.train_iters = args.int_value("--train-iters", 1, false).value_or(0);
  for (auto [name, v] : {std::pair{"--adam-beta1", t.adam_beta1}, {"--adam-beta2", t.adam_beta2}})
    if (v >= 1.0) throw Error(cat(name, ": must be < 1, got ", num(v)));

  // Batch: constant, legacy ramp-up, or a step schedule that is one.
  auto gbs = args.int_value("--global-batch-size", 1, true);
  if (const ArgOccurrence* a = args.get("--rampup-batch-size")) {
    if (a->values.size() != 3)
      throw Error(cat("--rampup-batch-size: takes three values START INCREMENT SAMPLES, got '",
                      ArgList::text_of(a->values), "'"));
    int64_t v[3];
    for (int i = 0; i < 3; ++i) {
      const ShellField& f = a->values[i];
      if (!f.resolved())
        throw Error(cat("--rampup-batch-size: its value (", f.text, ") depends on ",
                        join_unknown(f.unknown), ", which has no value here; ",
                        how_to_set(f.unknown)));
      auto res = std::from_chars(f.text.data(), f.text.data() + f.text.size(), v[i]);
      if (res.ec != std::errc() || res.ptr != f.text.data() + f.text.size() ||
          v[i] < (i == 2 ? 0 : 1))
        throw Error(
            cat("--rampup-batch-size: START and INCREMENT must be integers >= 1 and "
                "SAMPLES >= 0, got '",
                ArgList::text_of(a->values), "'"));
    }
    t.rampup_batch_size = RampupBatchSize{v[0], v[1], v[2]};
    r.warnings.push_back(
        "--rampup-batch-size: the current Megatron-LM ignores it (deprecated for "
        "--step-batch-size-schedule); the plan keeps the ramp-up the script asks for");
  }
  if (const ArgOccurrence* a = args.get("--step-batch-size-schedule")) {
    if (t.rampup_batch_size)
      throw Error("--step-batch-size-schedule: give it or --rampup-batch-size, not both");
    bool unresolved = std::any_of(a->values.begin(), a->values.end(),
                                  [](const ShellField& f) { return !f.resolved(); });
    if (a->values.empty() || unresolved)
      throw Error("--step-batch-size-schedule: needs one value \"THRESHOLD:BATCH ...\" known here");
    if (a->values.size() > 1)
      r.warnings.push_back(cat("--step-batch-size-schedule: its value reaches pretrain_gpt.py as ",
                               a->values.size(),
                               " words (an unquoted ${ARRAY[@]} splits it), which "
                               "Megatron-LM's argparse refuses; read as one value"));
    auto steps = parse_step_schedule(ArgList::text_of(a->values), m.seq_length);
    int64_t final_batch = steps.back().second;
    if (gbs) {
      r.warnings.push_back(
          cat("--global-batch-size with --step-batch-size-schedule: Megatron-LM "
              "refuses the two together; the schedule's final batch (",
              final_batch, ") is the plan's global batch"));
      if (*gbs != final_batch)
        r.warnings.push_back(cat("--global-batch-size ", *gbs,
                                 " differs from the schedule's "
                                 "final batch ",
                                 final_batch));
    }
    gbs = final_batch;
    if (steps.size() > 1) {
      auto ramp = steps_as_rampup(steps);
      if (ramp) {
        t.rampup_batch_size = *ramp;
      } else {
        r.warnings.push_back(
            cat("--step-batch-size-schedule: not a linear ramp-up that the plan "
                "can hold; the plan uses the final batch ",
                final_batch, " throughout"));
      }
    }
  }

  // --- world size ----------------------------------------------------------------------------
  int64_t model_size = p.tp * p.cp * p.pp;
  int64_t expert_size = p.etp * p.ep * p.pp;
  std::optional<int64_t> world = launcher.world;
  if (world) r.script_world_size = *world;
  std::string source = launcher.description;
  if (o.gpus > 0) {
    world = o.gpus;
    source = cat("--gpus ", o.gpus);
    if (launcher.world && *launcher.world != o.gpus)
      r.warnings.push_back(cat("sized for --gpus ", o.gpus, " instead of the script's ",
                               *launcher.world, " processes (", launcher.description, ")"));
  }
  if (world && *world % model_size == 0 && *world % expert_size == 0) {
    p.dp = *world / model_size;
  } else {
    int64_t need = lcm64(model_size, expert_size);
    p.dp = need / model_size;
    std::string layout = cat("tp ", p.tp, " x cp ", p.cp, " x pp ", p.pp, " = ", model_size);
    if (expert_size != model_size && need != model_size)
      layout += cat(" and etp ", p.etp, " x ep ", p.ep, " x pp ", p.pp, " = ", expert_size);
    if (world) {
      r.warnings.push_back(cat("the script launches ", *world, " processes (", source,
                               ") but its "
                               "layout (",
                               layout, ") needs a multiple of ", need,
                               " GPUs; the "
                               "plan is sized by the layout: ",
                               need, " GPUs, dp ", p.dp));
    } else {
      r.warnings.push_back(cat("the process count is not known; the plan is sized by the layout (",
                               layout, "): ", need, " GPUs, dp ", p.dp,
                               " (use --gpus N for another size)"));
    }
  }
  if (launcher.nnodes > 1 && launcher.nproc_per_node != o.cluster.gpus_per_node && o.gpus == 0)
    r.warnings.push_back(cat("the script runs ", launcher.nproc_per_node,
                             " processes per node; "
                             "cluster '",
                             o.cluster.name, "' has ", o.cluster.gpus_per_node, " GPUs per node"));
  if (!gbs) {
    gbs = p.micro_batch_size * p.dp;
    r.warnings.push_back(
        cat("--global-batch-size: not given; Megatron-LM uses micro batch x dp = ", *gbs));
  }
  p.global_batch_size = *gbs;

  // --- vocabulary ----------------------------------------------------------------------------
  // Vocabulary: the script's --vocab-size, else --vocab-size given to mplan, else what the
  // tokenizer implies (GPT-2 BPE files, the Llama 2 model), else a preset of the same shape.
  auto vocab = args.int_value("--vocab-size", 1, true);
  if (vocab) {
    m.vocab_size = *vocab;
  } else if (o.vocab_size > 0) {
    m.vocab_size = o.vocab_size;
  } else {
    std::string tok = args.value("--tokenizer-type", false).value_or("");
    if (tok == "GPT2BPETokenizer" || (tok.empty() && args.has("--merge-file"))) {
      m.vocab_size = kGpt2BpeVocab;
      r.warnings.push_back(cat("--vocab-size: not given; read as GPT-2 BPE's ", kGpt2BpeVocab,
                               " tokens (", tok.empty() ? "--vocab-file/--merge-file" : tok, ")"));
    } else if (tok == "Llama2Tokenizer") {
      m.vocab_size = kLlama2Vocab;
      r.warnings.push_back(cat("--vocab-size: not given; read as the Llama 2 tokenizer's ",
                               kLlama2Vocab, " tokens"));
    } else {
      std::string detail;
      m.vocab_size = 1;
      std::string preset = match_preset(m, p.tp, false, detail);
      if (preset.empty())
        throw Error(cat("--vocab-size: not given, and the vocabulary of ",
                        tok.empty() ? std::string("the tokenizer") : "--tokenizer-type " + tok,
                        " is not known here; pass --vocab-size N to mplan import"));
      m.vocab_size = load_model(preset).vocab_size;
      r.warnings.push_back(cat("--vocab-size: not given; took ", m.vocab_size, " from preset ",
                               preset, ", whose shape this model has"));
    }
  }
  if (args.has("--vocab-extra-ids"))
    r.warnings.push_back("--vocab-extra-ids: not modelled; the vocabulary is --vocab-size only");

  std::string detail;
  r.matched_preset = match_preset(m, p.tp, true, detail);
  m.name = r.matched_preset.empty() ? o.model_name : r.matched_preset;
  if (!r.matched_preset.empty() && !detail.empty())
    r.warnings.push_back(cat("model matches preset ", r.matched_preset, " (", detail, ")"));

  r.plan.model = m;
  r.plan.cluster = o.cluster;
  r.plan.parallel = p;
  r.plan.training = t;
  args.leftovers(r.ignored, r.not_modelled);

  // The plan must read back from its JSON unchanged: plan.json is what the user gets.
  Plan again = plan_from_json(plan_to_json(r.plan));
  MPLAN_CHECK(again == r.plan, "imported plan does not survive its JSON form");
  for (const auto& v : validate(r.plan))
    r.warnings.push_back(cat("the plan breaks a rule: ", to_string(v)));
  return r;
}

}  // namespace mplan
