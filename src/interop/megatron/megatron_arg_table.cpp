// The rows. Argument names, defaults and rules follow Megatron-LM's megatron/training/arguments.py
// and the dataclasses its arguments are generated from (TransformerConfig, ModelParallelConfig,
// training/config). Import applies Megatron-LM's own defaults for what a script leaves out (e.g.
// --adam-beta2 0.999, --weight-decay 0.01), so the plan describes the job Megatron-LM would run;
// export writes every such value explicitly.
#include "src/interop/megatron/megatron_arg_table.hpp"

#include <algorithm>
#include <charconv>
#include <cstdlib>

#include "src/common/error.hpp"
#include "src/interop/megatron/layer_pattern.hpp"
#include "src/interop/megatron/megatron_rampup.hpp"

namespace mplan {
namespace {

using G = ArgGroup;
constexpr StepEffect kStep = StepEffect::kChangesStep;
constexpr StepEffect kNone = StepEffect::kNoEffect;
using Row = MegatronArgRow;
using In = ImportState;
using Out = ExportState;

std::string num(int64_t v) { return std::to_string(v); }

// Shortest text that reads back to the same double (Python's float() included).
std::string num(double v) {
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

int64_t required_int(const Row& r, In& s) {
  auto v = s.args.int_value(r.name, 1, true);
  if (!v) throw Error(cat(r.name, ": missing (Megatron-LM requires it)"));
  return *v;
}

void refuse_layout(const Row& r, In& s) {
  if (s.args.has(r.name))
    throw Error(cat(r.name, ": not modelled by mplan (its plans are GPT decoders)"));
}

void warn_other_activation(const Row& r, In& s) {
  if (s.args.has(r.name))
    s.warnings.push_back(cat(r.name, ": not modelled; mplan costs the MLP as ",
                             s.model.activation == Activation::kSwiglu ? "SwiGLU" : "GeLU"));
}

// A Megatron-LM default for an optional training number (no error when unresolved).
double training_number(const Row& r, In& s, double megatron_default) {
  return s.args.double_value(r.name, 0.0, false).value_or(megatron_default);
}

void check_beta(const Row& r, double v) {
  if (v >= 1.0) throw Error(cat(r.name, ": must be < 1, got ", num(v)));
}

// The expert layout is written for MoE models and whenever it differs from Megatron's default.
bool writes_expert_layout(const Plan& plan) {
  const ParallelConfig& p = plan.parallel;
  return plan.model.moe || p.ep != 1 || p.etp != p.tp;
}

// True when the plan's batch ramps up (a ramp-up that starts at the global batch does not).
bool ramps(const Plan& plan) {
  const auto& r = plan.training.rampup_batch_size;
  return r && plan.parallel.global_batch_size > r->start;
}

// Megatron-LM's rule for the ramp-up of a plan being exported; a note when it does not ramp.
void check_export_rampup(Out& o) {
  const auto& rr = o.plan.training.rampup_batch_size;
  if (!rr) return;
  const int64_t gbs = o.plan.parallel.global_batch_size;
  if (rr->start > gbs || (gbs - rr->start) % rr->increment != 0)
    throw Error(cat("training.rampup_batch_size: global_batch_size - start (", gbs, " - ",
                    rr->start, ") must be a non-negative multiple of the increment (",
                    rr->increment, "), as Megatron-LM's ramp-up requires"));
  if (ramps(o.plan) && rr->samples < 1)
    throw Error("training.rampup_batch_size: ramp_samples must be >= 1 when the batch ramps up");
  if (!ramps(o.plan))
    o.notes.push_back(
        "training.rampup_batch_size starts at the global batch size: no ramp-up is written");
}

// --rampup-batch-size START INCREMENT SAMPLES, all known here.
RampupBatchSize read_legacy_rampup(const ArgOccurrence& a) {
  if (a.values.size() != 3)
    throw Error(cat("--rampup-batch-size: takes three values START INCREMENT SAMPLES, got '",
                    MegatronArgList::text_of(a.values), "'"));
  int64_t v[3];
  for (int i = 0; i < 3; ++i) {
    const ShellField& f = a.values[i];
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
              MegatronArgList::text_of(a.values), "'"));
  }
  return RampupBatchSize{v[0], v[1], v[2]};
}

// --step-batch-size-schedule: the final batch is the global batch; a linear ramp-up the plan
// can hold becomes the plan's ramp-up.
void read_step_schedule(const ArgOccurrence& a, In& s) {
  if (s.training.rampup_batch_size)
    throw Error("--step-batch-size-schedule: give it or --rampup-batch-size, not both");
  bool unresolved = std::any_of(a.values.begin(), a.values.end(),
                                [](const ShellField& f) { return !f.resolved(); });
  if (a.values.empty() || unresolved)
    throw Error("--step-batch-size-schedule: needs one value \"THRESHOLD:BATCH ...\" known here");
  if (a.values.size() > 1)
    s.warnings.push_back(cat("--step-batch-size-schedule: its value reaches pretrain_gpt.py as ",
                             a.values.size(),
                             " words (an unquoted ${ARRAY[@]} splits it), which Megatron-LM's "
                             "argparse refuses; read as one value"));
  auto steps = parse_step_schedule(MegatronArgList::text_of(a.values), s.model.seq_length);
  int64_t final_batch = steps.back().second;
  if (s.global_batch_size) {
    s.warnings.push_back(
        cat("--global-batch-size with --step-batch-size-schedule: Megatron-LM "
            "refuses the two together; the schedule's final batch (",
            final_batch, ") is the plan's global batch"));
    if (*s.global_batch_size != final_batch)
      s.warnings.push_back(cat("--global-batch-size ", *s.global_batch_size,
                               " differs from the schedule's final batch ", final_batch));
  }
  s.global_batch_size = final_batch;
  if (steps.size() < 2) return;
  if (auto ramp = steps_as_rampup(steps)) {
    s.training.rampup_batch_size = *ramp;
  } else {
    s.warnings.push_back(
        cat("--step-batch-size-schedule: not a linear ramp-up that the plan can "
            "hold; the plan uses the final batch ",
            final_batch, " throughout"));
  }
}

// vpp from whichever of its three arguments the script gives (at most one).
void read_virtual_stages(const Row& r, In& s) {
  ParallelConfig& p = s.parallel;
  auto stages = s.args.int_value(r.name, 1, true);
  const auto& per_stage = s.layers_per_virtual_stage;
  if (int(per_stage.has_value()) + int(stages.has_value()) + int(s.legacy_vpp.has_value()) > 1)
    throw Error(
        "--num-layers-per-virtual-pipeline-stage: give only one of it, "
        "--num-virtual-stages-per-pipeline-rank and --virtual-pipeline-model-parallel-size");
  // arguments.py counts the embedding and the loss as layers when they are accounted for.
  const int64_t layers = s.model.num_layers +
                         int64_t{s.args.has("--account-for-embedding-in-pipeline-split")} +
                         int64_t{s.args.has("--account-for-loss-in-pipeline-split")};
  if (s.legacy_vpp) {
    p.vpp = *s.legacy_vpp;
    s.warnings.push_back(
        "--virtual-pipeline-model-parallel-size: not an argument of the current Megatron-LM (it "
        "takes --num-virtual-stages-per-pipeline-rank); read as vpp");
  } else if (stages) {
    p.vpp = *stages;
  } else if (per_stage) {
    // The uneven split's rows come after this one (export writes them after vpp).
    if (s.args.has("--decoder-first-pipeline-num-layers") ||
        s.args.has("--decoder-last-pipeline-num-layers"))
      throw Error(
          "--num-layers-per-virtual-pipeline-stage: Megatron-LM refuses it with an uneven "
          "pipeline; use --num-virtual-stages-per-pipeline-rank");
    if (layers % p.pp != 0)
      throw Error(cat("--pipeline-model-parallel-size: must divide --num-layers (", layers,
                      "), got ", p.pp));
    if ((layers / p.pp) % *per_stage != 0)
      throw Error(cat("--num-layers-per-virtual-pipeline-stage: must divide the ", layers / p.pp,
                      " layers per pipeline stage, got ", *per_stage));
    p.vpp = layers / p.pp / *per_stage;
  }
  if (p.vpp > 1 && p.pp == 1)
    throw Error(
        "--num-virtual-stages-per-pipeline-rank: virtual pipeline stages need "
        "--pipeline-model-parallel-size > 1");
  p.schedule = p.vpp > 1 ? ScheduleKind::kInterleaved : ScheduleKind::k1F1B;
}

// The words of an argument's values, each known here (not a shell expansion left unresolved);
// `what` names them in the error ("module names", "a type").
std::vector<std::string> known_words(const Row& r, const ArgOccurrence& a, const char* what) {
  std::vector<std::string> words;
  for (const ShellField& v : a.values) {
    if (!v.resolved())
      throw Error(cat(r.name, ": needs ", what, " known here, got '", v.text, "'"));
    words.push_back(v.text);
  }
  return words;
}

// --cp-comm-type: one type for every layer, or one per layer (Megatron); mplan takes one type,
// so a per-layer list must name the same type throughout.
void read_cp_comm_type(const Row& r, In& s) {
  const ArgOccurrence* a = s.args.get(r.name);
  if (!a || a->values.empty()) return;
  const std::vector<std::string> types = known_words(r, *a, "a type");
  for (const std::string& t : types)
    if (t != types.front())
      throw Error(cat(r.name, " ", MegatronArgList::text_of(a->values),
                      ": a type per layer is not modelled; mplan takes one type for every layer"));
  s.parallel.cp_comm_type = cp_comm_type_from_string(types.front(), std::string(r.name));
}

// --hierarchical-context-parallel-sizes (nargs '+'): the all-to-all and p2p sizes of a2a+p2p.
void read_hierarchical_cp_sizes(const Row& r, In& s) {
  const ArgOccurrence* a = s.args.get(r.name);
  if (!a) return;
  if (a->values.size() != 2)
    throw Error(cat(r.name, ": mplan takes two sizes (all-to-all, p2p), got '",
                    MegatronArgList::text_of(a->values), "'"));
  std::vector<int64_t>& out = s.parallel.hierarchical_context_parallel_sizes;
  out.clear();
  for (const ShellField& v : a->values) {
    char* end = nullptr;
    const long long n = v.resolved() ? std::strtoll(v.text.c_str(), &end, 10) : 0;
    if (!v.resolved() || end == v.text.c_str() || *end != '\0' || n < 1 || n > 1024)
      throw Error(cat(r.name, ": must be integers between 1 and 1024, got '", v.text, "'"));
    out.push_back(n);
  }
}

// --pipeline-model-parallel-layout (arguments.py): at most one of it and the two other ways of
// giving virtual stages; its stage count / pp is vpp. The layout's own rules are validate()'s.
void read_pipeline_layout(const Row& r, In& s) {
  auto text = s.args.value(r.name, true);
  if (!text) return;
  ParallelConfig& p = s.parallel;
  if (s.layers_per_virtual_stage || s.legacy_vpp ||
      s.args.has("--num-virtual-stages-per-pipeline-rank"))
    throw Error(cat(r.name,
                    ": No more than one of the following arguments can be set at the same time: "
                    "--num-layers-per-virtual-pipeline-stage, "
                    "--num-virtual-stages-per-pipeline-rank, --pipeline-model-parallel-layout"));
  p.pipeline_model_parallel_layout = parse_pipeline_layout(*text, std::string(r.name));
  const int64_t stages = p.pipeline_model_parallel_layout->num_stages();
  if (stages % p.pp != 0)
    throw Error(cat(r.name,
                    ": The length of pipeline_model_parallel_layout must be divisible by "
                    "pipeline_model_parallel_size (num_stages=",
                    stages, ", pipeline_model_parallel_size=", p.pp, ")"));
  if (stages / p.pp > 1024)
    throw Error(
        cat(r.name, ": ", stages / p.pp, " virtual stages per pipeline rank; at most 1024"));
  p.vpp = stages / p.pp;
  p.schedule = p.vpp > 1 ? ScheduleKind::kInterleaved : ScheduleKind::k1F1B;
}

// --main-params-dtype (fp32, fp16) and --exp-avg-dtype / --exp-avg-sq-dtype (fp32, fp16, bf16,
// fp8), Megatron-LM's choices.
void read_state_dtype(const Row& r, In& s, OptimStateDtype& out, bool moments) {
  auto v = s.args.value(r.name, true);
  if (!v) return;
  const OptimStateDtype all[] = {OptimStateDtype::kFp32, OptimStateDtype::kFp16,
                                 OptimStateDtype::kBf16, OptimStateDtype::kFp8};
  for (OptimStateDtype d : all)
    if (*v == to_string(d) &&
        (moments || d == OptimStateDtype::kFp32 || d == OptimStateDtype::kFp16)) {
      out = d;
      return;
    }
  throw Error(cat(r.name, ": must be one of ", moments ? "fp32, fp16, bf16, fp8" : "fp32, fp16",
                  "; got '", *v, "'"));
}

void write_state_dtype(const Row& r, Out& o, OptimStateDtype d) {
  if (d != OptimStateDtype::kFp32) o.arg(r.name, to_string(d));
}

// The schedule follows from vpp in Megatron-LM: interleaved when > 1, else 1F1B.
void note_schedule(Out& o) {
  const ParallelConfig& p = o.plan.parallel;
  switch (p.schedule) {
    case ScheduleKind::k1F1B:
      break;
    case ScheduleKind::kInterleaved:
      if (p.vpp == 1)
        o.notes.push_back("parallel.schedule interleaved with vpp 1 runs as 1F1B in Megatron-LM");
      break;
    case ScheduleKind::kGpipe:
      o.notes.push_back("parallel.schedule gpipe: Megatron-LM has no GPipe schedule and runs 1F1B");
      break;
    case ScheduleKind::kZbH1:
      o.notes.push_back(
          "parallel.schedule zb-h1: Megatron-LM has no zero-bubble schedule and runs 1F1B");
      break;
  }
}

// TransformerConfig's recompute rules over --recompute-granularity (or --recompute-activations),
// --recompute-method and --recompute-num-layers.
void read_recompute(const Row& r, In& s) {
  ParallelConfig& p = s.parallel;
  auto rnl = s.args.int_value(r.name, 1, true);
  const std::string& gran = s.recompute_granularity;
  const auto& method = s.recompute_method;
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
          "--recompute-num-layers: missing; Megatron-LM needs it with --recompute-granularity "
          "full");
    p.recompute_method = *method == "uniform" ? RecomputeMethod::kUniform : RecomputeMethod::kBlock;
    p.recompute_num_layers = *rnl;
  } else if (gran == "selective") {
    p.recompute = Recompute::kSelective;
    if (method)
      throw Error(
          "--recompute-method: Megatron-LM refuses it with --recompute-granularity selective");
    if (rnl)
      throw Error(
          "--recompute-num-layers: Megatron-LM refuses it with --recompute-granularity selective");
  } else if (gran.empty()) {
    if (method || rnl)
      s.warnings.push_back(
          "--recompute-method / --recompute-num-layers without --recompute-granularity: no "
          "recompute");
  } else {
    throw Error(cat("--recompute-granularity: must be full or selective, got '", gran, "'"));
  }
}

void read_position_type(const Row& r, In& s) {
  std::string pos = s.args.value(r.name, true).value_or("learned_absolute");
  if (s.rotary_alias) pos = "rope";
  if (pos == "learned_absolute") {
    s.model.position_embedding = PositionEmbedding::kLearned;
  } else if (pos == "rope") {
    s.model.position_embedding = PositionEmbedding::kRope;
  } else if (pos == "yarn" || pos == "mrope" || pos == "relative" || pos == "none" ||
             pos == "alibi") {  // alibi: Megatron-DeepSpeed's (BLOOM), no position parameters
    s.model.position_embedding = PositionEmbedding::kRope;
    s.warnings.push_back(cat("--position-embedding-type ", pos,
                             ": not modelled; costed as rope (no position parameters)"));
  } else {
    throw Error(
        cat("--position-embedding-type: must be one of learned_absolute, rope, yarn, "
            "mrope, relative, none, alibi; got '",
            pos, "'"));
  }
  s.position_type = pos;
}

void read_attention_backend(const Row& r, In& s) {
  TrainingConfig& t = s.training;
  std::string backend = s.args.value(r.name, false).value_or("auto");
  if (s.use_flash_attn) backend = "flash";
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
}

void read_moe_layer_freq(const Row& r, In& s) {
  if (!s.model.moe) return;
  auto f = s.args.value(r.name, true);
  if (!f) return;
  if (is_layer_pattern(*f)) {  // arguments.py moe_freq_type: a list expression
    std::vector<int64_t> v = parse_layer_pattern(*f, std::string(r.name));
    if (static_cast<int64_t>(v.size()) != s.model.num_layers)
      throw Error(cat(r.name, ": Invalid length of moe_layer_pattern: ", v.size(), ", expected ",
                      s.model.num_layers));
    for (int64_t x : v)
      if (x != 0 && x != 1) throw Error(cat(r.name, ": pattern entries must be 0 or 1, got ", x));
    s.model.moe->layer_pattern = std::move(v);
    return;
  }
  int64_t x = 0;
  auto res = std::from_chars(f->data(), f->data() + f->size(), x);
  if (res.ec != std::errc() || res.ptr != f->data() + f->size() || x < 1)
    throw Error(
        cat("--moe-layer-freq: only an integer frequency N >= 1 (every N-th layer is MoE) "
            "is modelled, got '",
            *f, "'"));
  s.model.moe->layer_freq = x;
}

// The --train-iters export writes: the caller's, the plan's, or its own count.
int64_t exported_train_iters(const Out& o) {
  if (o.options.train_iters > 0) return o.options.train_iters;
  if (o.plan.training.train_iters > 0) return o.plan.training.train_iters;
  return kExportTrainIters;
}

// A path argument (--save, --load, --vocab-file, ...): its value, or "" (none) when absent or
// unknown here (with a warning).
std::string path_arg(const Row& r, In& s) { return s.args.value(r.name, false).value_or(""); }

// --data-path (nargs='*'): Megatron's get_blend_from_list over its words. A word that depends on
// something without a value here leaves the plan on synthetic data, with a warning.
void read_data_path(const Row& r, In& s) {
  const ArgOccurrence* a = s.args.get(r.name);
  if (!a) return;
  // arguments.py: "A single data source must be provided in training mode".
  if (s.mock_data)
    throw Error(cat(r.name, ": Megatron-LM refuses it together with --mock-data (a single data ",
                    "source must be provided)"));
  std::vector<std::string> words;
  for (const ShellField& f : a->values) {
    if (!f.resolved()) {
      s.warnings.push_back(cat(r.name, ": its value (", MegatronArgList::text_of(a->values),
                               ") depends on ", join_unknown(f.unknown),
                               ", which has no value here; the plan keeps synthetic data"));
      return;
    }
    words.push_back(f.text);
  }
  s.training.data_path = parse_data_path(words, std::string(r.name));
}

// The GPT-2 BPE files are the plan's only tokenizer files: read with GPT2BPETokenizer, or with
// no --tokenizer-type (Megatron-LM's older examples); another tokenizer's files stay unread.
bool reads_bpe_files(const In& s) {
  return s.tokenizer_type.empty() || s.tokenizer_type == "GPT2BPETokenizer";
}

void read_lr_decay_style(const Row& r, In& s) {
  const auto v = s.args.value(r.name, false);
  if (!v) return;
  for (LrDecayStyle st : {LrDecayStyle::kConstant, LrDecayStyle::kLinear, LrDecayStyle::kCosine,
                          LrDecayStyle::kInverseSquareRoot})
    if (*v == to_string(st)) {
      s.training.lr_decay_style = st;
      return;
    }
  if (*v != "WSD")
    throw Error(cat(r.name, ": must be one of constant, linear, cosine, inverse-square-root, WSD ",
                    "(Megatron-LM's choices), got '", *v, "'"));
  s.warnings.push_back(
      cat(r.name, " WSD: not modelled; the plan keeps ", to_string(s.training.lr_decay_style)));
}

// --eval-interval: not given, Megatron-LM's ValidationConfig does not evaluate during training
// (the plan's 0); the value export wrote for the plan's 0 reads back as 0.
void read_eval_interval(const Row& r, In& s) {
  auto v = s.args.int_value(r.name, 0, false);
  if (v && v == s.export_eval_only_at_end) v.reset();
  s.training.eval_interval = v.value_or(0);
}

// Megatron-LM's --eval-interval must divide the run (train_iters // eval_interval): the plan's 0
// (evaluate only at the end) is written past the last iteration, and marked for import.
void write_eval_interval(const Row& r, Out& o) {
  const int64_t interval = o.plan.training.eval_interval;
  if (interval > 0) return o.arg(r.name, interval);
  const int64_t past_end = exported_train_iters(o) + 1;
  o.arg(r.name, past_end);
  o.directives.push_back({kEvalOnlyAtEndDirective, num(past_end)});
}

// --eval-iters. Without a validation set (a --split whose second share is 0) Megatron-LM does
// not evaluate whatever the count: the plan says so with 0.
void read_eval_iters(const Row& r, In& s) {
  TrainingConfig& t = s.training;
  t.eval_iters = s.args.int_value(r.name, 0, false).value_or(100);
  if (t.data_path.empty() || t.eval_iters == 0 || parse_split(t.split, "--split")[1] > 0) return;
  s.warnings.push_back(cat("--split \"", t.split, "\" gives the validation set no share: ",
                           "Megatron-LM does not evaluate, and the plan's eval_iters is 0"));
  t.eval_iters = 0;
}

// An argument with no effect on a step, matched as a name prefix: data, tokenizer files,
// checkpoints, logging, evaluation, learning-rate schedule, profiling, loss scaling.
Row no_effect(std::string_view name) { return Row{name, G::kNone, "", kNone}; }

const std::vector<Row>& table() {
  static const std::vector<Row> rows = {
      // ---- arguments that make a model or layout mplan cannot represent ---------------------
      {"--hybrid-layer-pattern", G::kNone, "", kStep, refuse_layout},
      {"--encoder-num-layers", G::kNone, "", kStep, refuse_layout},
      {"--decoder-num-layers", G::kNone, "", kStep, refuse_layout},
      {"--model-parallel-size", G::kNone, "", kStep,
       [](const Row& r, In& s) {
         if (s.args.has(r.name))
           throw Error(
               "--model-parallel-size: Megatron-LM refuses it; use --tensor-model-parallel-size");
       }},

      // ---- model ------------------------------------------------------------------------------
      {"--num-layers", G::kModel, "model.num_layers", kStep,
       [](const Row& r, In& s) { s.model.num_layers = required_int(r, s); },
       [](const Row& r, Out& o) { o.arg(r.name, o.plan.model.num_layers); }},
      {"--hidden-size", G::kModel, "model.hidden_size", kStep,
       [](const Row& r, In& s) { s.model.hidden_size = required_int(r, s); },
       [](const Row& r, Out& o) { o.arg(r.name, o.plan.model.hidden_size); }},
      {"--num-attention-heads", G::kModel, "model.num_attention_heads", kStep,
       [](const Row& r, In& s) { s.model.num_attention_heads = required_int(r, s); },
       [](const Row& r, Out& o) { o.arg(r.name, o.plan.model.num_attention_heads); }},
      {"--group-query-attention", G::kModel, "model.num_query_groups", kStep,
       [](const Row& r, In& s) { s.group_query_attention = s.args.flag(r.name); },
       [](const Row& r, Out& o) {
         const ModelSpec& m = o.plan.model;
         if (m.num_query_groups != m.num_attention_heads) o.flag(r.name);
       }},
      {"--num-query-groups", G::kModel, "model.num_query_groups", kStep,
       [](const Row& r, In& s) {
         ModelSpec& m = s.model;
         auto groups = s.args.int_value(r.name, 1, true);
         m.num_query_groups = s.group_query_attention ? groups.value_or(1) : m.num_attention_heads;
         if (!s.group_query_attention && groups)
           s.warnings.push_back(
               "--num-query-groups without --group-query-attention: Megatron-LM ignores it "
               "(multi-head attention)");
         if (m.num_attention_heads % m.num_query_groups != 0)
           throw Error(cat("--num-query-groups: must divide --num-attention-heads (",
                           m.num_attention_heads, "), got ", m.num_query_groups));
       },
       [](const Row& r, Out& o) {
         const ModelSpec& m = o.plan.model;
         if (m.num_query_groups != m.num_attention_heads) o.arg(r.name, m.num_query_groups);
       }},
      {"--kv-channels", G::kModel, "model.kv_channels", kStep,
       [](const Row& r, In& s) {
         ModelSpec& m = s.model;
         auto kv = s.args.int_value(r.name, 1, true);
         if (!kv && m.hidden_size % m.num_attention_heads != 0)
           throw Error(cat("--hidden-size: must be divisible by --num-attention-heads (",
                           m.num_attention_heads, ") unless --kv-channels is given, got ",
                           m.hidden_size));
         m.kv_channels = kv.value_or(m.hidden_size / m.num_attention_heads);
       },
       [](const Row& r, Out& o) {
         const ModelSpec& m = o.plan.model;
         if (m.kv_channels != m.hidden_size / m.num_attention_heads ||
             m.hidden_size % m.num_attention_heads != 0)
           o.arg(r.name, m.kv_channels);
       }},
      // ---- model: multi-latent attention, sliding windows, multi-token prediction -------------
      {"--multi-latent-attention", G::kModel, "model.multi_latent_attention", kStep,
       [](const Row& r, In& s) {
         if (s.args.flag(r.name)) s.model.mla = MlaSpec{};
       },
       [](const Row& r, Out& o) {
         if (o.plan.model.mla) o.flag(r.name);
       }},
      {"--q-lora-rank", G::kModel, "model.q_lora_rank", kStep,
       [](const Row& r, In& s) {
         const auto v = s.args.int_value(r.name, 1, true);
         if (v && s.model.mla)
           s.model.mla->q_lora_rank = *v;
         else if (v)
           s.warnings.push_back(cat(r.name, ": no effect without --multi-latent-attention"));
       },
       [](const Row& r, Out& o) {
         if (o.plan.model.mla && o.plan.model.mla->q_lora_rank > 0)
           o.arg(r.name, o.plan.model.mla->q_lora_rank);
       }},
      {"--kv-lora-rank", G::kModel, "model.kv_lora_rank", kStep,
       [](const Row& r, In& s) {
         const auto v = s.args.int_value(r.name, 1, true);
         if (v && s.model.mla)
           s.model.mla->kv_lora_rank = *v;
         else if (v)
           s.warnings.push_back(cat(r.name, ": no effect without --multi-latent-attention"));
       },
       [](const Row& r, Out& o) {
         if (o.plan.model.mla) o.arg(r.name, o.plan.model.mla->kv_lora_rank);
       }},
      {"--qk-head-dim", G::kModel, "model.qk_head_dim", kStep,
       [](const Row& r, In& s) {
         const auto v = s.args.int_value(r.name, 1, true);
         if (v && s.model.mla)
           s.model.mla->qk_head_dim = *v;
         else if (v)
           s.warnings.push_back(cat(r.name, ": no effect without --multi-latent-attention"));
       },
       [](const Row& r, Out& o) {
         if (o.plan.model.mla) o.arg(r.name, o.plan.model.mla->qk_head_dim);
       }},
      {"--qk-pos-emb-head-dim", G::kModel, "model.qk_pos_emb_head_dim", kStep,
       [](const Row& r, In& s) {
         const auto v = s.args.int_value(r.name, 1, true);
         if (v && s.model.mla)
           s.model.mla->qk_pos_emb_head_dim = *v;
         else if (v)
           s.warnings.push_back(cat(r.name, ": no effect without --multi-latent-attention"));
       },
       [](const Row& r, Out& o) {
         if (o.plan.model.mla) o.arg(r.name, o.plan.model.mla->qk_pos_emb_head_dim);
       }},
      {"--v-head-dim", G::kModel, "model.v_head_dim", kStep,
       [](const Row& r, In& s) {
         const auto v = s.args.int_value(r.name, 1, true);
         if (v && s.model.mla)
           s.model.mla->v_head_dim = *v;
         else if (v)
           s.warnings.push_back(cat(r.name, ": no effect without --multi-latent-attention"));
       },
       [](const Row& r, Out& o) {
         if (o.plan.model.mla) o.arg(r.name, o.plan.model.mla->v_head_dim);
       }},
      {"--window-size", G::kModel, "model.window_size", kStep,
       [](const Row& r, In& s) {
         // arguments.py tuple_type: "(left,right)" or "left,right".
         const auto v = s.args.value(r.name, true);
         if (!v) return;
         std::string t = *v;
         while (!t.empty() && (t.front() == '(' || t.front() == ' ')) t.erase(t.begin());
         while (!t.empty() && (t.back() == ')' || t.back() == ' ')) t.pop_back();
         const size_t comma = t.find(',');
         int64_t left = 0, right = 0;
         auto num = [&](std::string_view w, int64_t& x) {
           while (!w.empty() && w.front() == ' ') w.remove_prefix(1);
           while (!w.empty() && w.back() == ' ') w.remove_suffix(1);
           auto res = std::from_chars(w.data(), w.data() + w.size(), x);
           return res.ec == std::errc() && res.ptr == w.data() + w.size() && x >= -1;
         };
         if (comma == std::string::npos || !num(std::string_view(t).substr(0, comma), left) ||
             !num(std::string_view(t).substr(comma + 1), right))
           throw Error(cat(r.name, ": must be (left,right), two integers >= -1, got ", *v));
         s.model.window_size = std::array<int64_t, 2>{left, right};
       },
       [](const Row& r, Out& o) {
         if (const auto& w = o.plan.model.window_size) o.arg(r.name, cat("(", (*w)[0], ",", (*w)[1], ")"));
       }},
      {"--window-attn-skip-freq", G::kModel, "model.window_attn_skip_freq", kStep,
       [](const Row& r, In& s) {
         const auto v = s.args.value(r.name, true);
         if (!v) return;
         if (!s.model.window_size) {
           s.warnings.push_back(cat(r.name, " ", *v, ": no effect without --window-size"));
           return;
         }
         if (is_layer_pattern(*v)) {
           std::vector<int64_t> p = parse_layer_pattern(*v, std::string(r.name));
           if (static_cast<int64_t>(p.size()) != s.model.num_layers)
             throw Error(cat(r.name, ": the pattern has ", p.size(), " entries; num_layers is ",
                             s.model.num_layers));
           s.model.window_attn_skip_pattern = std::move(p);
         } else {
           s.model.window_attn_skip_freq = s.args.int_value(r.name, 1, true).value_or(0);
         }
       },
       [](const Row& r, Out& o) {
         const ModelSpec& m = o.plan.model;
         if (!m.window_size) return;
         if (!m.window_attn_skip_pattern.empty())
           o.arg(r.name, format_layer_pattern(m.window_attn_skip_pattern));
         else if (m.window_attn_skip_freq > 0)
           o.arg(r.name, m.window_attn_skip_freq);
       }},
      {"--mtp-num-layers", G::kModel, "model.mtp_num_layers", kStep,
       [](const Row& r, In& s) {
         s.model.mtp_num_layers = s.args.int_value(r.name, 0, true).value_or(0);
       },
       [](const Row& r, Out& o) {
         if (o.plan.model.mtp_num_layers > 0) o.arg(r.name, o.plan.model.mtp_num_layers);
       }},
      {"--ffn-hidden-size", G::kModel, "model.ffn_hidden_size", kStep,
       [](const Row& r, In& s) {
         // arguments.py: 4h, or int((4h * 2/3) / 64) * 64 with SwiGLU (--swiglu is looked at
         // here; its row comes later, where export writes it).
         ModelSpec& m = s.model;
         auto ffn = s.args.int_value(r.name, 1, true);
         if (ffn) {
           m.ffn_hidden_size = *ffn;
         } else if (s.args.has("--swiglu")) {
           double x = static_cast<double>(4 * m.hidden_size * 2) / 3.0 / 64.0;
           m.ffn_hidden_size = static_cast<int64_t>(x) * 64;
         } else {
           m.ffn_hidden_size = 4 * m.hidden_size;
         }
       },
       [](const Row& r, Out& o) { o.arg(r.name, o.plan.model.ffn_hidden_size); }},
      {"--seq-length", G::kModel, "model.seq_length", kStep,
       [](const Row& r, In& s) { s.model.seq_length = required_int(r, s); },
       [](const Row& r, Out& o) { o.arg(r.name, o.plan.model.seq_length); }},
      {"--max-position-embeddings", G::kModel, "model.max_position_embeddings", kStep,
       [](const Row& r, In& s) {
         ModelSpec& m = s.model;
         m.max_position_embeddings = required_int(r, s);
         if (m.max_position_embeddings < m.seq_length)
           throw Error(cat("--max-position-embeddings: must be >= --seq-length (", m.seq_length,
                           ") as Megatron-LM requires, got ", m.max_position_embeddings));
       },
       [](const Row& r, Out& o) { o.arg(r.name, o.plan.model.max_position_embeddings); }},
      {"--use-rotary-position-embeddings", G::kNone, "model.position_embedding", kStep,
       [](const Row& r, In& s) { s.rotary_alias = s.args.flag(r.name); }},
      {"--position-embedding-type", G::kModel, "model.position_embedding", kStep,
       read_position_type,
       [](const Row& r, Out& o) {
         if (o.plan.model.position_embedding == PositionEmbedding::kRope) o.arg(r.name, "rope");
       }},
      {"--rotary-base", G::kModel, "model.rotary_base", kNone,
       [](const Row& r, In& s) {
         if (auto v = s.args.double_value(r.name, 1, false)) {
           if (s.model.position_embedding == PositionEmbedding::kRope)
             s.model.rotary_base = *v;
           else
             s.warnings.push_back(cat(r.name, ": no effect without --position-embedding-type rope "
                                      "(Megatron-LM's default is learned_absolute)"));
         }
       },
       [](const Row& r, Out& o) {
         const double base = o.plan.model.rotary_base;
         if (o.plan.model.position_embedding != PositionEmbedding::kRope) return;
         if (base == static_cast<double>(static_cast<int64_t>(base)))
           o.arg(r.name, static_cast<int64_t>(base));  // 500000, not 5e+05
         else
           o.number(r.name, base);
       }},
      {"--rotary-percent", G::kModel, "model.rotary_percent", kNone,
       [](const Row& r, In& s) {
         if (auto v = s.args.double_value(r.name, 1e-9, false)) {
           if (*v > 1.0) throw Error(cat(r.name, ": must be in (0, 1], got ", *v));
           if (s.model.position_embedding == PositionEmbedding::kRope)
             s.model.rotary_percent = *v;
           else
             s.warnings.push_back(cat(r.name, ": no effect without --position-embedding-type rope "
                                      "(Megatron-LM's default is learned_absolute)"));
         }
       },
       [](const Row& r, Out& o) {
         if (o.plan.model.position_embedding == PositionEmbedding::kRope &&
             o.plan.model.rotary_percent != 1.0)
           o.number(r.name, o.plan.model.rotary_percent);
       }},
      {"--no-position-embedding", G::kNone, "model.position_embedding", kStep,
       [](const Row& r, In& s) {
         if (s.args.flag(r.name) && s.position_type != "rope")
           throw Error(
               "--no-position-embedding: Megatron-LM refuses it unless --position-embedding-type "
               "rope (use --position-embedding-type)");
       }},
      {"--normalization", G::kModel, "model.normalization", kStep,
       [](const Row& r, In& s) {
         std::string norm = s.args.value(r.name, true).value_or("LayerNorm");
         if (norm == "LayerNorm") {
           s.model.normalization = Normalization::kLayerNorm;
         } else if (norm == "RMSNorm") {
           s.model.normalization = Normalization::kRmsNorm;
         } else {
           throw Error(cat("--normalization: must be LayerNorm or RMSNorm, got '", norm, "'"));
         }
       },
       [](const Row& r, Out& o) {
         if (o.plan.model.normalization == Normalization::kRmsNorm) o.arg(r.name, "RMSNorm");
       }},
      {"--swiglu", G::kModel, "model.activation", kStep,
       [](const Row& r, In& s) {
         s.model.activation = s.args.flag(r.name) ? Activation::kSwiglu : Activation::kGelu;
       },
       [](const Row& r, Out& o) {
         if (o.plan.model.activation == Activation::kSwiglu) o.flag(r.name);
       }},
      {"--squared-relu", G::kNone, "", kStep, warn_other_activation},
      {"--quick-geglu", G::kNone, "", kStep, warn_other_activation},
      {"--openai-gelu", G::kNone, "", kStep, warn_other_activation},
      {"--untie-embeddings-and-output-weights", G::kModel, "model.tied_embeddings", kStep,
       [](const Row& r, In& s) { s.model.tied_embeddings = !s.args.flag(r.name); },
       [](const Row& r, Out& o) {
         if (!o.plan.model.tied_embeddings) o.flag(r.name);
       }},
      {"--disable-bias-linear", G::kModel, "model.add_bias_linear", kStep,
       [](const Row& r, In& s) { s.model.add_bias_linear = !s.args.flag(r.name); },
       [](const Row& r, Out& o) {
         if (!o.plan.model.add_bias_linear) o.flag(r.name);
       }},
      {"--vocab-size", G::kModel, "model.vocab_size", kStep,
       // Without it, import infers the vocabulary after the table (tokenizer, preset).
       [](const Row& r, In& s) { s.vocab_size = s.args.int_value(r.name, 1, true); },
       [](const Row& r, Out& o) { o.arg(r.name, o.plan.model.vocab_size); }},
      {"--vocab-extra-ids", G::kNone, "", kStep,
       [](const Row& r, In& s) {
         if (s.args.has(r.name))
           s.warnings.push_back("--vocab-extra-ids: not modelled; the vocabulary is --vocab-size only");
       }},
      {"--make-vocab-size-divisible-by", G::kModel, "model.make_vocab_size_divisible_by", kStep,
       [](const Row& r, In& s) {
         s.model.make_vocab_size_divisible_by = s.args.int_value(r.name, 1, true).value_or(128);
       },
       [](const Row& r, Out& o) {
         if (o.plan.model.make_vocab_size_divisible_by != 128)
           o.arg(r.name, o.plan.model.make_vocab_size_divisible_by);
       }},

      // ---- MoE (read only when --num-experts makes the model an MoE) ---------------------------
      {"--num-experts", G::kMoe, "model.moe.num_experts", kStep,
       [](const Row& r, In& s) {
         auto experts = s.args.int_value(r.name, 0, true);
         if (!experts || *experts == 0) return;
         MoeSpec moe;
         moe.num_experts = *experts;
         s.model.moe = moe;
       },
       [](const Row& r, Out& o) {
         if (o.plan.model.moe) o.arg(r.name, o.plan.model.moe->num_experts);
       }},
      {"--moe-router-topk", G::kMoe, "model.moe.topk", kStep,
       [](const Row& r, In& s) {
         auto& moe = s.model.moe;
         if (!moe) return;
         moe->topk = s.args.int_value(r.name, 1, true).value_or(2);
         if (moe->topk > moe->num_experts)
           throw Error(cat("--moe-router-topk: must be <= --num-experts (", moe->num_experts,
                           "), got ", moe->topk));
       },
       [](const Row& r, Out& o) {
         if (o.plan.model.moe) o.arg(r.name, o.plan.model.moe->topk);
       }},
      {"--moe-ffn-hidden-size", G::kMoe, "model.moe.moe_ffn_hidden_size", kStep,
       [](const Row& r, In& s) {
         if (!s.model.moe) return;
         s.model.moe->moe_ffn_hidden_size =
             s.args.int_value(r.name, 1, true).value_or(s.model.ffn_hidden_size);
       },
       [](const Row& r, Out& o) {
         if (o.plan.model.moe) o.arg(r.name, o.plan.model.moe->moe_ffn_hidden_size);
       }},
      {"--moe-shared-expert-intermediate-size", G::kMoe, "model.moe.shared_expert_ffn_hidden_size",
       kStep,
       [](const Row& r, In& s) {
         if (!s.model.moe) return;
         s.model.moe->shared_expert_ffn_hidden_size =
             s.args.int_value(r.name, 1, true).value_or(0);
       },
       [](const Row& r, Out& o) {
         const auto& moe = o.plan.model.moe;
         if (moe && moe->shared_expert_ffn_hidden_size > 0)
           o.arg(r.name, moe->shared_expert_ffn_hidden_size);
       }},
      {"--moe-layer-freq", G::kMoe, "model.moe.layer_freq", kStep, read_moe_layer_freq,
       [](const Row& r, Out& o) {
         const auto& moe = o.plan.model.moe;
         if (moe && !moe->layer_pattern.empty())
           o.arg(r.name, format_layer_pattern(moe->layer_pattern));
         else if (moe && moe->layer_freq != 1)
           o.arg(r.name, moe->layer_freq);
       }},
      {"--moe-grouped-gemm", G::kMoe, "model.moe.moe_grouped_gemm", kStep,
       [](const Row& r, In& s) {
         if (!s.model.moe) return;
         s.model.moe->moe_grouped_gemm = s.args.flag(r.name);  // Megatron's default: one GEMM each
       },
       [](const Row& r, Out& o) {
         if (o.plan.model.moe && o.plan.model.moe->moe_grouped_gemm) o.flag(r.name);
       }},
      {"--moe-token-dispatcher-type", G::kMoe, "model.moe.moe_token_dispatcher_type", kStep,
       [](const Row& r, In& s) {
         const auto d = s.args.value(r.name, false);
         if (!s.model.moe || !d) return;
         if (*d == "flex")
           s.model.moe->moe_token_dispatcher_type = MoeDispatcher::kFlex;
         else if (*d != "alltoall")
           s.warnings.push_back(cat(r.name, " ", *d,
                                    ": not modelled; mplan costs the token exchange as "
                                    "all-to-all"));
       },
       [](const Row& r, Out& o) {
         if (o.plan.model.moe) o.arg(r.name, to_string(o.plan.model.moe->moe_token_dispatcher_type));
       }},
      {"--moe-flex-dispatcher-backend", G::kMoe, "model.moe.moe_flex_dispatcher_backend", kStep,
       [](const Row& r, In& s) {
         const auto b = s.args.value(r.name, false);
         if (!s.model.moe || !b) return;
         if (*b != "deepep" && *b != "hybridep")
           throw Error(cat(r.name, ": ", *b, " is not modelled; mplan knows deepep and hybridep"));
         if (s.model.moe->moe_token_dispatcher_type != MoeDispatcher::kFlex) {
           s.warnings.push_back(
               cat(r.name, ": no effect without --moe-token-dispatcher-type flex"));
           return;
         }
         s.model.moe->moe_flex_dispatcher_backend =
             *b == "hybridep" ? FlexBackend::kHybridEp : FlexBackend::kDeepEp;
       },
       [](const Row& r, Out& o) {
         const auto& moe = o.plan.model.moe;
         if (moe && moe->moe_token_dispatcher_type == MoeDispatcher::kFlex)
           o.arg(r.name, to_string(moe->moe_flex_dispatcher_backend));
       }},
      {"--moe-enable-deepep", G::kNone, "model.moe.moe_token_dispatcher_type", kStep,
       [](const Row& r, In& s) {
         // TransformerConfig: the older switch for the flex dispatcher with DeepEP.
         if (s.args.flag(r.name) && s.model.moe) {
           s.model.moe->moe_token_dispatcher_type = MoeDispatcher::kFlex;
           s.model.moe->moe_flex_dispatcher_backend = FlexBackend::kDeepEp;
         }
       }},
      {"--overlap-moe-expert-parallel-comm", G::kMoe, "model.moe.overlap_moe_expert_parallel_comm",
       kStep,
       [](const Row& r, In& s) {
         const bool on = s.args.flag(r.name);
         if (s.model.moe) s.model.moe->overlap_moe_expert_parallel_comm = on;
       },
       [](const Row& r, Out& o) {
         const auto& moe = o.plan.model.moe;
         if (moe && moe->overlap_moe_expert_parallel_comm) o.flag(r.name);
       }},

      // ---- parallel layout --------------------------------------------------------------------
      {"--tensor-model-parallel-size", G::kParallel, "parallel.tp", kStep,
       [](const Row& r, In& s) { s.parallel.tp = s.args.int_value(r.name, 1, true).value_or(1); },
       [](const Row& r, Out& o) { o.arg(r.name, o.plan.parallel.tp); }},
      {"--pipeline-model-parallel-size", G::kParallel, "parallel.pp", kStep,
       [](const Row& r, In& s) { s.parallel.pp = s.args.int_value(r.name, 1, true).value_or(1); },
       [](const Row& r, Out& o) { o.arg(r.name, o.plan.parallel.pp); }},
      {"--num-layers-per-virtual-pipeline-stage", G::kNone, "parallel.vpp", kStep,
       [](const Row& r, In& s) { s.layers_per_virtual_stage = s.args.int_value(r.name, 1, true); }},
      {"--virtual-pipeline-model-parallel-size", G::kNone, "parallel.vpp", kStep,
       [](const Row& r, In& s) { s.legacy_vpp = s.args.int_value(r.name, 1, true); }},
      {"--num-virtual-stages-per-pipeline-rank", G::kParallel, "parallel.vpp, parallel.schedule",
       kStep, read_virtual_stages,
       [](const Row& r, Out& o) {
         const ParallelConfig& p = o.plan.parallel;
         if (p.vpp > 1 && !p.pipeline_model_parallel_layout) o.arg(r.name, p.vpp);
       }},
      {"--microbatch-group-size-per-virtual-pipeline-stage", G::kParallel,
       "parallel.microbatch_group_size_per_vp_stage", kStep,
       [](const Row& r, In& s) {
         s.parallel.microbatch_group_size_per_vp_stage =
             s.args.int_value(r.name, 1, true).value_or(0);
       },
       [](const Row& r, Out& o) {
         int64_t g = o.plan.parallel.microbatch_group_size_per_vp_stage;
         if (g > 0) o.arg(r.name, g);
       }},
      {"--decoder-first-pipeline-num-layers", G::kParallel,
       "parallel.decoder_first_pipeline_num_layers", kStep,
       [](const Row& r, In& s) {
         s.parallel.decoder_first_pipeline_num_layers = s.args.int_value(r.name, 1, true);
       },
       [](const Row& r, Out& o) {
         if (const auto& v = o.plan.parallel.decoder_first_pipeline_num_layers) o.arg(r.name, *v);
       }},
      {"--decoder-last-pipeline-num-layers", G::kParallel,
       "parallel.decoder_last_pipeline_num_layers", kStep,
       [](const Row& r, In& s) {
         s.parallel.decoder_last_pipeline_num_layers = s.args.int_value(r.name, 1, true);
       },
       [](const Row& r, Out& o) {
         if (const auto& v = o.plan.parallel.decoder_last_pipeline_num_layers) o.arg(r.name, *v);
       }},
      {"--account-for-embedding-in-pipeline-split", G::kParallel,
       "parallel.account_for_embedding_in_pipeline_split", kStep,
       [](const Row& r, In& s) {
         s.parallel.account_for_embedding_in_pipeline_split = s.args.flag(r.name);
       },
       [](const Row& r, Out& o) {
         if (o.plan.parallel.account_for_embedding_in_pipeline_split) o.flag(r.name);
       }},
      {"--account-for-loss-in-pipeline-split", G::kParallel,
       "parallel.account_for_loss_in_pipeline_split", kStep,
       [](const Row& r, In& s) { s.parallel.account_for_loss_in_pipeline_split = s.args.flag(r.name); },
       [](const Row& r, Out& o) {
         if (o.plan.parallel.account_for_loss_in_pipeline_split) o.flag(r.name);
       }},
      {"--pipeline-model-parallel-layout", G::kParallel,
       "parallel.pipeline_model_parallel_layout, parallel.vpp, parallel.schedule", kStep,
       read_pipeline_layout,
       [](const Row& r, Out& o) {
         if (const auto& l = o.plan.parallel.pipeline_model_parallel_layout) o.arg(r.name, l->text);
       }},
      // Megatron-DeepSpeed: DeepSpeed's PipelineModule splits the layers by this method; the
      // split becomes the layout after the table (megatron_import.cpp, deepspeed_pipeline.hpp).
      {"--pp-partition-method", G::kNone, "parallel.pipeline_model_parallel_layout", kStep,
       [](const Row& r, In& s) { s.pp_partition_method = s.args.value(r.name, true); }},
      {"--context-parallel-size", G::kParallel, "parallel.cp", kStep,
       [](const Row& r, In& s) { s.parallel.cp = s.args.int_value(r.name, 1, true).value_or(1); },
       [](const Row& r, Out& o) { o.arg(r.name, o.plan.parallel.cp); }},
      {"--cp-comm-type", G::kParallel, "parallel.cp_comm_type", kStep, read_cp_comm_type,
       [](const Row& r, Out& o) {
         if (o.plan.parallel.cp > 1) o.arg(r.name, to_string(o.plan.parallel.cp_comm_type));
       }},
      {"--hierarchical-context-parallel-sizes", G::kParallel,
       "parallel.hierarchical_context_parallel_sizes", kStep, read_hierarchical_cp_sizes,
       [](const Row& r, Out& o) {
         std::vector<std::string> v;
         for (int64_t n : o.plan.parallel.hierarchical_context_parallel_sizes)
           v.push_back(std::to_string(n));
         if (!v.empty()) o.args.push_back({std::string(r.name), v});
       }},
      // Megatron's default overlaps the interleaved schedule's p2p transfers (arguments.py turns
      // it off for the other schedules); the plan's false is the blocking exchange.
      {"--no-overlap-p2p-communication", G::kParallel, "parallel.overlap_p2p_comm", kStep,
       [](const Row& r, In& s) {
         s.parallel.overlap_p2p_comm =
             !s.args.flag(r.name) && s.parallel.schedule == ScheduleKind::kInterleaved;
       },
       [](const Row& r, Out& o) {
         const ParallelConfig& p = o.plan.parallel;
         if (p.schedule == ScheduleKind::kInterleaved && !p.overlap_p2p_comm) o.flag(r.name);
       }},
      {"--overlap-p2p-communication-warmup-flush", G::kParallel,
       "parallel.overlap_p2p_comm_warmup_flush", kStep,
       [](const Row& r, In& s) { s.parallel.overlap_p2p_comm_warmup_flush = s.args.flag(r.name); },
       [](const Row& r, Out& o) {
         if (o.plan.parallel.overlap_p2p_comm_warmup_flush) o.flag(r.name);
       }},
      {"--expert-model-parallel-size", G::kParallel, "parallel.ep", kStep,
       [](const Row& r, In& s) {
         s.parallel.ep = s.args.int_value(r.name, 1, true).value_or(1);
         if (s.parallel.ep > 1 && !s.model.moe)
           throw Error(cat("--expert-model-parallel-size: ", s.parallel.ep,
                           " needs --num-experts (Megatron-LM requires an MoE model for expert "
                           "parallelism)"));
       },
       [](const Row& r, Out& o) {
         if (writes_expert_layout(o.plan)) o.arg(r.name, o.plan.parallel.ep);
       }},
      {"--expert-tensor-parallel-size", G::kParallel, "parallel.etp", kStep,
       [](const Row& r, In& s) {
         s.parallel.etp = s.args.int_value(r.name, 1, true).value_or(s.parallel.tp);
       },
       [](const Row& r, Out& o) {
         if (writes_expert_layout(o.plan)) o.arg(r.name, o.plan.parallel.etp);
       }},
      {"--sequence-parallel", G::kParallel, "parallel.sequence_parallel", kStep,
       [](const Row& r, In& s) {
         ParallelConfig& p = s.parallel;
         p.sequence_parallel = s.args.flag(r.name);
         if (p.sequence_parallel && p.tp == 1) {
           p.sequence_parallel = false;
           s.warnings.push_back(
               "--sequence-parallel with tensor parallel size 1: Megatron-LM turns it off, and so "
               "does the plan");
         }
       },
       [](const Row& r, Out& o) {
         const ParallelConfig& p = o.plan.parallel;
         if (p.sequence_parallel && p.tp > 1) o.flag(r.name);
         if (p.sequence_parallel && p.tp == 1)
           o.notes.push_back(
               "parallel.sequence_parallel with tp 1: Megatron-LM turns it off, not written");
       }},
      {"--use-tp-pp-dp-mapping", G::kParallel, "parallel.order", kStep,
       [](const Row& r, In& s) {
         s.parallel.order = s.args.flag(r.name) ? kMegatronTpPpDpOrder : kMegatronDefaultOrder;
       },
       [](const Row& r, Out& o) {
         if (o.plan.parallel.order == kMegatronTpPpDpOrder) o.flag(r.name);
       }},
      {"--use-distributed-optimizer", G::kParallel, "parallel.distributed_optimizer", kStep,
       [](const Row& r, In& s) { s.parallel.distributed_optimizer = s.args.flag(r.name); },
       [](const Row& r, Out& o) {
         if (o.plan.parallel.distributed_optimizer) o.flag(r.name);
       }},
      // Megatron-FSDP v1 runs on the distributed optimizer; arguments.py turns it on.
      {"--use-megatron-fsdp", G::kParallel,
       "parallel.use_megatron_fsdp, parallel.distributed_optimizer", kStep,
       [](const Row& r, In& s) {
         ParallelConfig& p = s.parallel;
         p.use_megatron_fsdp = s.args.flag(r.name);
         if (p.use_megatron_fsdp && !p.distributed_optimizer) {
           p.distributed_optimizer = true;
           s.warnings.push_back(
               "--use-megatron-fsdp: Megatron-FSDP v1 is only compatible with "
               "--use-distributed-optimizer; Megatron-LM turns it on, and so does the plan");
         }
       },
       [](const Row& r, Out& o) {
         if (o.plan.parallel.use_megatron_fsdp) o.flag(r.name);
       }},
      {"--data-parallel-sharding-strategy", G::kParallel,
       "parallel.data_parallel_sharding_strategy", kStep,
       [](const Row& r, In& s) {
         if (auto v = s.args.value(r.name, true))
           s.parallel.data_parallel_sharding_strategy =
               dp_sharding_from_string(*v, std::string(r.name));
       },
       [](const Row& r, Out& o) {
         const ParallelConfig& p = o.plan.parallel;
         if (p.use_megatron_fsdp ||
             p.data_parallel_sharding_strategy != DpSharding::kOptimGradsParams)
           o.arg(r.name, to_string(p.data_parallel_sharding_strategy));
       }},
      // arguments.py: Megatron-FSDP requires the `fsdp_dtensor` checkpointing format.
      {"--ckpt-format", G::kParallel, "", kNone, nullptr,
       [](const Row& r, Out& o) {
         if (o.plan.parallel.use_megatron_fsdp) o.arg(r.name, "fsdp_dtensor");
       }},
      {"--fsdp-double-buffer", G::kParallel, "parallel.fsdp_double_buffer", kStep,
       [](const Row& r, In& s) { s.parallel.fsdp_double_buffer = s.args.flag(r.name); },
       [](const Row& r, Out& o) {
         if (o.plan.parallel.fsdp_double_buffer) o.flag(r.name);
       }},
      {"--num-distributed-optimizer-instances", G::kParallel,
       "parallel.num_distributed_optimizer_instances", kStep,
       [](const Row& r, In& s) {
         s.parallel.num_distributed_optimizer_instances =
             s.args.int_value(r.name, 1, true).value_or(1);
       },
       [](const Row& r, Out& o) {
         const int64_t n = o.plan.parallel.num_distributed_optimizer_instances;
         if (n != 1) o.arg(r.name, n);
       }},
      {"--overlap-grad-reduce", G::kParallel, "parallel.overlap_grad_reduce", kStep,
       [](const Row& r, In& s) { s.parallel.overlap_grad_reduce = s.args.flag(r.name); },
       [](const Row& r, Out& o) {
         if (o.plan.parallel.overlap_grad_reduce) o.flag(r.name);
       }},
      {"--overlap-param-gather", G::kParallel, "parallel.overlap_param_gather", kStep,
       [](const Row& r, In& s) {
         ParallelConfig& p = s.parallel;
         bool opg = s.args.flag(r.name);
         if (opg && !p.distributed_optimizer)
           throw Error(
               "--overlap-param-gather: Megatron-LM supports it only with "
               "--use-distributed-optimizer");
         if (opg && !p.overlap_grad_reduce)
           throw Error("--overlap-param-gather: Megatron-LM needs --overlap-grad-reduce with it");
         // Without the distributed optimizer there is no parameter gather: the plan's default.
         p.overlap_param_gather = p.distributed_optimizer ? opg : true;
       },
       [](const Row& r, Out& o) {
         const ParallelConfig& p = o.plan.parallel;
         if (!p.distributed_optimizer || !p.overlap_param_gather) return;
         if (p.overlap_grad_reduce) {
           o.flag(r.name);
         } else {
           o.notes.push_back(
               "parallel.overlap_param_gather needs overlap_grad_reduce in Megatron-LM: not "
               "written");
         }
       }},
      // parallel.schedule has no argument: Megatron-LM runs interleaved 1F1B when vpp > 1 (read
      // by --num-virtual-stages-per-pipeline-rank), else 1F1B; export notes the rest.
      {"", G::kParallel, "parallel.schedule", kStep, nullptr,
       [](const Row&, Out& o) { note_schedule(o); }},

      // ---- training: the precision-aware optimizer (OptimizerConfig) -------------------------
      {"--use-precision-aware-optimizer", G::kTraining,
       "training.use_precision_aware_optimizer", kStep,
       [](const Row& r, In& s) {
         s.training.optimizer_precision.use_precision_aware_optimizer = s.args.flag(r.name);
       },
       [](const Row& r, Out& o) {
         if (o.plan.training.optimizer_precision.use_precision_aware_optimizer) o.flag(r.name);
       }},
      {"--main-params-dtype", G::kTraining, "training.main_params_dtype", kStep,
       [](const Row& r, In& s) {
         read_state_dtype(r, s, s.training.optimizer_precision.main_params_dtype, false);
       },
       [](const Row& r, Out& o) {
         write_state_dtype(r, o, o.plan.training.optimizer_precision.main_params_dtype);
       }},
      {"--exp-avg-dtype", G::kTraining, "training.exp_avg_dtype", kStep,
       [](const Row& r, In& s) {
         read_state_dtype(r, s, s.training.optimizer_precision.exp_avg_dtype, true);
       },
       [](const Row& r, Out& o) {
         write_state_dtype(r, o, o.plan.training.optimizer_precision.exp_avg_dtype);
       }},
      {"--exp-avg-sq-dtype", G::kTraining, "training.exp_avg_sq_dtype", kStep,
       [](const Row& r, In& s) {
         read_state_dtype(r, s, s.training.optimizer_precision.exp_avg_sq_dtype, true);
       },
       [](const Row& r, Out& o) {
         write_state_dtype(r, o, o.plan.training.optimizer_precision.exp_avg_sq_dtype);
       }},

      // ---- training: batch ----------------------------------------------------------------------
      {"--micro-batch-size", G::kTraining, "parallel.micro_batch_size", kStep,
       [](const Row& r, In& s) { s.parallel.micro_batch_size = required_int(r, s); },
       [](const Row& r, Out& o) { o.arg(r.name, o.plan.parallel.micro_batch_size); }},
      {"--global-batch-size", G::kTraining, "parallel.global_batch_size", kStep,
       // Without it (or a step schedule), import uses micro batch x dp once dp is known.
       [](const Row& r, In& s) { s.global_batch_size = s.args.int_value(r.name, 1, true); },
       [](const Row& r, Out& o) {
         check_export_rampup(o);
         if (!ramps(o.plan) || o.options.legacy_rampup)
           o.arg(r.name, o.plan.parallel.global_batch_size);
       }},
      {"--rampup-batch-size", G::kTraining, "training.rampup_batch_size", kStep,
       [](const Row& r, In& s) {
         const ArgOccurrence* a = s.args.get(r.name);
         if (!a) return;
         s.training.rampup_batch_size = read_legacy_rampup(*a);
         s.warnings.push_back(
             "--rampup-batch-size: the current Megatron-LM ignores it (deprecated for "
             "--step-batch-size-schedule); the plan keeps the ramp-up the script asks for");
       },
       [](const Row& r, Out& o) {
         if (!ramps(o.plan) || !o.options.legacy_rampup) return;
         const RampupBatchSize& rr = *o.plan.training.rampup_batch_size;
         o.args.push_back({std::string(r.name), {num(rr.start), num(rr.increment), num(rr.samples)}});
         o.notes.push_back(
             "--rampup-batch-size is for Megatron-LM releases before --step-batch-size-schedule; "
             "the current one ignores it");
       }},
      {"--step-batch-size-schedule", G::kTraining,
       "training.rampup_batch_size, parallel.global_batch_size", kStep,
       [](const Row& r, In& s) {
         if (const ArgOccurrence* a = s.args.get(r.name)) read_step_schedule(*a, s);
       },
       [](const Row& r, Out& o) {
         if (!ramps(o.plan) || o.options.legacy_rampup) return;
         // Thresholds in tokens: Megatron-LM divides them by --seq-length (floor) to get samples.
         std::string sched;
         for (auto [samples, batch] :
              rampup_as_steps(*o.plan.training.rampup_batch_size, o.plan.parallel.global_batch_size))
           sched += (sched.empty() ? "" : " ") + num(samples * o.plan.model.seq_length) + ":" +
                    num(batch);
         o.arg(r.name, sched);
       }},

      // ---- training: iterations, optimizer, initialization --------------------------------------
      {"--train-iters", G::kTraining, "training.train_iters", kNone,
       [](const Row& r, In& s) {
         auto iters = s.args.int_value(r.name, 1, false);
         // A count export chose because the plan had none leaves the plan without one.
         if (iters && iters == s.export_default_train_iters) iters.reset();
         s.training.train_iters = iters.value_or(0);
       },
       [](const Row& r, Out& o) {
         o.arg(r.name, exported_train_iters(o));
         if (o.options.train_iters == 0 && o.plan.training.train_iters == 0) {
           // Megatron-LM needs --train-iters or --train-samples to run at all.
           o.notes.push_back(cat("the plan sets no training.train_iters: --train-iters ",
                                 kExportTrainIters,
                                 " written (mplan export --train-iters N for another count)"));
           o.directives.push_back({kDefaultTrainItersDirective, num(kExportTrainIters)});
         }
       }},
      {"--lr", G::kTraining, "training.lr", kNone,
       [](const Row& r, In& s) {
         if (auto v = s.args.double_value(r.name, 0.0, false)) {
           s.training.lr = *v;
         } else if (!s.args.has(r.name)) {
           s.warnings.push_back(
               cat("--lr: not given (Megatron-LM needs it); the plan uses ", num(s.training.lr)));
         }
       },
       [](const Row& r, Out& o) { o.number(r.name, o.plan.training.lr); }},
      // ---- training: the learning-rate schedule (OptimizerParamScheduler); the rules over
      // several of them are the plan's, checked after the table ---------------------------------
      {"--min-lr", G::kTraining, "training.min_lr", kNone,
       [](const Row& r, In& s) { s.training.min_lr = training_number(r, s, 0.0); },
       [](const Row& r, Out& o) {
         if (o.plan.training.min_lr != 0) o.number(r.name, o.plan.training.min_lr);
       }},
      {"--lr-decay-style", G::kTraining, "training.lr_decay_style", kNone, read_lr_decay_style,
       [](const Row& r, Out& o) {
         if (o.plan.training.lr_decay_style != LrDecayStyle::kLinear)
           o.arg(r.name, to_string(o.plan.training.lr_decay_style));
       }},
      {"--lr-decay-iters", G::kTraining, "training.lr_decay_iters", kNone,
       [](const Row& r, In& s) { s.training.lr_decay_iters = s.args.int_value(r.name, 1, false); },
       [](const Row& r, Out& o) {
         if (const auto& v = o.plan.training.lr_decay_iters) o.arg(r.name, *v);
       }},
      {"--lr-warmup-iters", G::kTraining, "training.lr_warmup_iters", kNone,
       [](const Row& r, In& s) {
         s.training.lr_warmup_iters = s.args.int_value(r.name, 0, false).value_or(0);
       },
       [](const Row& r, Out& o) {
         if (o.plan.training.lr_warmup_iters > 0) o.arg(r.name, o.plan.training.lr_warmup_iters);
       }},
      {"--lr-warmup-fraction", G::kTraining, "training.lr_warmup_fraction", kNone,
       [](const Row& r, In& s) {
         s.training.lr_warmup_fraction = s.args.double_value(r.name, 0.0, false);
       },
       [](const Row& r, Out& o) {
         if (const auto& v = o.plan.training.lr_warmup_fraction) o.number(r.name, *v);
       }},
      {"--lr-warmup-init", G::kTraining, "training.lr_warmup_init", kNone,
       [](const Row& r, In& s) { s.training.lr_warmup_init = training_number(r, s, 0.0); },
       [](const Row& r, Out& o) {
         if (o.plan.training.lr_warmup_init != 0) o.number(r.name, o.plan.training.lr_warmup_init);
       }},
      {"--weight-decay", G::kTraining, "training.weight_decay", kNone,
       [](const Row& r, In& s) { s.training.weight_decay = training_number(r, s, 0.01); },
       [](const Row& r, Out& o) { o.number(r.name, o.plan.training.weight_decay); }},
      {"--adam-beta1", G::kTraining, "training.adam_beta1", kNone,
       [](const Row& r, In& s) {
         s.training.adam_beta1 = training_number(r, s, 0.9);
         check_beta(r, s.training.adam_beta1);
       },
       [](const Row& r, Out& o) { o.number(r.name, o.plan.training.adam_beta1); }},
      {"--adam-beta2", G::kTraining, "training.adam_beta2", kNone,
       [](const Row& r, In& s) {
         s.training.adam_beta2 = training_number(r, s, 0.999);
         check_beta(r, s.training.adam_beta2);
       },
       [](const Row& r, Out& o) { o.number(r.name, o.plan.training.adam_beta2); }},
      {"--adam-eps", G::kTraining, "training.adam_eps", kNone,
       [](const Row& r, In& s) { s.training.adam_eps = training_number(r, s, 1e-8); },
       [](const Row& r, Out& o) { o.number(r.name, o.plan.training.adam_eps); }},
      {"--clip-grad", G::kTraining, "training.clip_grad", kNone,
       [](const Row& r, In& s) { s.training.clip_grad = training_number(r, s, 1.0); },
       [](const Row& r, Out& o) { o.number(r.name, o.plan.training.clip_grad); }},
      {"--init-method-std", G::kTraining, "training.init_method_std", kNone,
       [](const Row& r, In& s) { s.training.init_method_std = training_number(r, s, 0.02); },
       [](const Row& r, Out& o) { o.number(r.name, o.plan.training.init_method_std); }},
      {"--seed", G::kTraining, "training.seed", kNone,
       [](const Row& r, In& s) { s.training.seed = s.args.int_value(r.name, 0, false).value_or(1234); },
       [](const Row& r, Out& o) { o.arg(r.name, o.plan.training.seed); }},

      // ---- training: precision ------------------------------------------------------------------
      {"--bf16", G::kTraining, "training.precision", kStep,
       [](const Row& r, In& s) { s.bf16 = s.args.flag(r.name); },
       [](const Row& r, Out& o) {
         if (o.plan.training.precision == Precision::kBf16) o.flag(r.name);
       }},
      {"--grad-reduce-in-bf16", G::kTraining, "training.grads_in_fp32", kStep,
       [](const Row& r, In& s) { s.reduce_in_bf16 = s.args.flag(r.name); },
       [](const Row& r, Out& o) {
         // bf16 reduces gradients in fp32 unless --grad-reduce-in-bf16.
         const TrainingConfig& t = o.plan.training;
         if (t.precision == Precision::kBf16 && !t.grads_in_fp32) o.flag(r.name);
       }},
      {"--fp16", G::kTraining, "training.precision", kStep,
       [](const Row& r, In& s) {
         bool fp16 = s.args.flag(r.name);
         if (s.bf16 && fp16) throw Error("--bf16: Megatron-LM refuses --bf16 together with --fp16");
         s.training.precision = s.bf16 ? Precision::kBf16 : fp16 ? Precision::kFp16 : Precision::kFp32;
       },
       [](const Row& r, Out& o) {
         if (o.plan.training.precision == Precision::kFp16) o.flag(r.name);
       }},
      {"--accumulate-allreduce-grads-in-fp32", G::kTraining, "training.grads_in_fp32", kStep,
       [](const Row& r, In& s) {
         // arguments.py: bf16 accumulates in fp32 unless it reduces in bf16; fp16 on request.
         bool acc = s.args.flag(r.name);
         TrainingConfig& t = s.training;
         if (t.precision == Precision::kBf16) {
           t.grads_in_fp32 = !s.reduce_in_bf16;
         } else if (t.precision == Precision::kFp16) {
           t.grads_in_fp32 = acc;
         } else {
           t.grads_in_fp32 = true;
         }
       },
       [](const Row& r, Out& o) {
         const TrainingConfig& t = o.plan.training;
         if (t.precision == Precision::kFp16 && t.grads_in_fp32) o.flag(r.name);
         if (t.precision == Precision::kFp32 && !t.grads_in_fp32)
           o.notes.push_back("training.grads_in_fp32 false has no meaning in fp32: not written");
       }},
      // ---- training: fp8 / fp4 (TransformerConfig's fp8 and fp4 fields) ------------------------
      {"--fp8-format", G::kTraining, "training.fp8_format", kStep,
       [](const Row& r, In& s) {
         const auto v = s.args.value(r.name, true);
         if (!v) return;
         if (*v != "e4m3" && *v != "hybrid")
           throw Error(cat(r.name, ": must be e4m3 or hybrid (Megatron-LM's choices), got ", *v));
         s.training.fp8_format = *v == "e4m3" ? Fp8Format::kE4m3 : Fp8Format::kHybrid;
       },
       [](const Row& r, Out& o) {
         if (o.plan.training.fp8_format != Fp8Format::kNone)
           o.arg(r.name, to_string(o.plan.training.fp8_format));
       }},
      {"--fp8-recipe", G::kTraining, "training.fp8_recipe", kStep,
       [](const Row& r, In& s) {
         const auto v = s.args.value(r.name, true);
         if (!v) return;
         if (s.training.fp8_format == Fp8Format::kNone) {
           s.warnings.push_back(cat(r.name, " ", *v, ": no effect without --fp8-format"));
           return;
         }
         for (Fp8Recipe k : {Fp8Recipe::kTensorwise, Fp8Recipe::kDelayed, Fp8Recipe::kBlockwise,
                             Fp8Recipe::kMxfp8})
           if (*v == to_string(k)) {
             s.training.fp8_recipe = k;
             return;
           }
         throw Error(cat(r.name, ": ", *v,
                         " is not modelled; mplan knows tensorwise, delayed, blockwise and "
                         "mxfp8"));
       },
       [](const Row& r, Out& o) {
         // Written with the format (Megatron's default recipe, delayed, is written too).
         if (o.plan.training.fp8_format != Fp8Format::kNone)
           o.arg(r.name, to_string(o.plan.training.fp8_recipe));
       }},
      {"--fp8-param-gather", G::kTraining, "training.fp8_param_gather", kStep,
       [](const Row& r, In& s) {
         if (!s.args.flag(r.name)) return;
         if (s.training.fp8_format != Fp8Format::kNone)
           s.training.fp8_param_gather = true;
         else
           s.warnings.push_back(cat(r.name, ": no effect without --fp8-format"));
       },
       [](const Row& r, Out& o) {
         if (o.plan.training.fp8_param_gather) o.flag(r.name);
       }},
      {"--fp4-format", G::kTraining, "training.fp4_format", kStep,
       [](const Row& r, In& s) {
         const auto v = s.args.value(r.name, true);
         if (!v) return;
         if (*v != "e2m1") throw Error(cat(r.name, ": must be e2m1 (Megatron-LM's choice), got ", *v));
         s.training.fp4_format = Fp4Format::kE2m1;
       },
       [](const Row& r, Out& o) {
         if (o.plan.training.fp4_format != Fp4Format::kNone) o.arg(r.name, "e2m1");
       }},
      {"--fp4-recipe", G::kTraining, "training.fp4_recipe", kStep,
       [](const Row& r, In& s) {
         const auto v = s.args.value(r.name, true);
         if (v && *v != "nvfp4")
           throw Error(cat(r.name, ": ", *v, " is not modelled; mplan knows nvfp4"));
       },
       [](const Row& r, Out& o) {
         if (o.plan.training.fp4_format != Fp4Format::kNone) o.arg(r.name, "nvfp4");
       }},
      {"--fp4-param-gather", G::kTraining, "training.fp4_param_gather", kStep,
       [](const Row& r, In& s) {
         if (!s.args.flag(r.name)) return;
         if (s.training.fp4_format != Fp4Format::kNone)
           s.training.fp4_param_gather = true;
         else
           s.warnings.push_back(cat(r.name, ": no effect without --fp4-format"));
       },
       [](const Row& r, Out& o) {
         if (o.plan.training.fp4_param_gather) o.flag(r.name);
       }},
      {"--first-last-layers-bf16", G::kTraining, "training.first_last_layers_bf16", kStep,
       [](const Row& r, In& s) { s.training.first_last_layers_bf16 = s.args.flag(r.name); },
       [](const Row& r, Out& o) {
         if (o.plan.training.first_last_layers_bf16) o.flag(r.name);
       }},
      {"--num-layers-at-start-in-bf16", G::kTraining, "training.num_layers_at_start_in_bf16", kStep,
       [](const Row& r, In& s) {
         const auto n = s.args.int_value(r.name, 0, true);
         if (n && s.training.first_last_layers_bf16)
           s.training.num_layers_at_start_in_bf16 = *n;
         else if (n)
           s.warnings.push_back(cat(r.name, ": no effect without --first-last-layers-bf16"));
       },
       [](const Row& r, Out& o) {
         if (o.plan.training.first_last_layers_bf16)
           o.arg(r.name, o.plan.training.num_layers_at_start_in_bf16);
       }},
      {"--num-layers-at-end-in-bf16", G::kTraining, "training.num_layers_at_end_in_bf16", kStep,
       [](const Row& r, In& s) {
         const auto n = s.args.int_value(r.name, 0, true);
         if (n && s.training.first_last_layers_bf16)
           s.training.num_layers_at_end_in_bf16 = *n;
         else if (n)
           s.warnings.push_back(cat(r.name, ": no effect without --first-last-layers-bf16"));
       },
       [](const Row& r, Out& o) {
         if (o.plan.training.first_last_layers_bf16)
           o.arg(r.name, o.plan.training.num_layers_at_end_in_bf16);
       }},
      {"--use-flash-attn", G::kNone, "training.attention_backend", kStep,
       [](const Row& r, In& s) { s.use_flash_attn = s.args.flag(r.name); }},
      {"--attention-backend", G::kModel, "training.attention_backend", kStep, read_attention_backend,
       [](const Row& r, Out& o) {
         if (o.plan.training.attention_backend == AttentionBackend::kUnfused)
           o.arg(r.name, "unfused");
       }},

      // ---- training: recompute ------------------------------------------------------------------
      {"--recompute-activations", G::kNone, "parallel.recompute", kStep,
       [](const Row& r, In& s) { s.recompute_activations = s.args.flag(r.name); }},
      {"--recompute-granularity", G::kTraining, "parallel.recompute", kStep,
       [](const Row& r, In& s) {
         s.recompute_granularity = s.args.value(r.name, true).value_or("");
         if (s.recompute_activations) s.recompute_granularity = "selective";
       },
       [](const Row& r, Out& o) {
         Recompute rc = o.plan.parallel.recompute;
         if (rc == Recompute::kSelective) o.arg(r.name, "selective");
         if (rc == Recompute::kFull) o.arg(r.name, "full");
       }},
      {"--recompute-method", G::kTraining, "parallel.recompute_method", kStep,
       [](const Row& r, In& s) { s.recompute_method = s.args.value(r.name, true); },
       [](const Row& r, Out& o) {
         const ParallelConfig& p = o.plan.parallel;
         if (p.recompute == Recompute::kFull) o.arg(r.name, to_string(p.recompute_method));
       }},
      {"--recompute-num-layers", G::kTraining, "parallel.recompute_num_layers", kStep,
       read_recompute,
       [](const Row& r, Out& o) {
         const ParallelConfig& p = o.plan.parallel;
         if (p.recompute == Recompute::kFull) o.arg(r.name, p.recompute_num_layers);
       }},
      // --recompute-modules (nargs *; TransformerConfig checks it with selective granularity).
      {"--recompute-modules", G::kTraining, "parallel.recompute_modules", kStep,
       [](const Row& r, In& s) {
         const ArgOccurrence* a = s.args.get(r.name);
         if (!a) return;
         const std::vector<std::string> names = known_words(r, *a, "module names");
         s.parallel.recompute_modules = recompute_modules_from_names(names, std::string(r.name));
         if (s.parallel.recompute != Recompute::kSelective)
           s.warnings.push_back(cat(r.name, " ", MegatronArgList::text_of(a->values),
                                    ": no effect without --recompute-granularity selective"));
       },
       [](const Row& r, Out& o) {
         const ParallelConfig& p = o.plan.parallel;
         if (p.recompute == Recompute::kSelective && p.recompute_modules != kDefaultRecomputeModules)
           o.args.push_back({std::string(r.name), recompute_module_names(p.recompute_modules)});
       }},
      {"--tp-comm-overlap", G::kParallel, "parallel.tp_comm_overlap", kStep,
       [](const Row& r, In& s) { s.parallel.tp_comm_overlap = s.args.flag(r.name); },
       [](const Row& r, Out& o) {
         if (o.plan.parallel.tp_comm_overlap) o.flag(r.name);
       }},
      {"--optimizer-cpu-offload", G::kTraining, "training.optimizer_cpu_offload", kStep,
       [](const Row& r, In& s) { s.training.optimizer_cpu_offload = s.args.flag(r.name); },
       [](const Row& r, Out& o) {
         if (o.plan.training.optimizer_cpu_offload) o.flag(r.name);
       }},
      {"--optimizer-offload-fraction", G::kTraining, "training.optimizer_offload_fraction", kStep,
       [](const Row& r, In& s) {
         const auto v = s.args.double_value(r.name, 0.0, true);
         if (!v) return;
         if (*v > 1) throw Error(cat(r.name, ": must be between 0 and 1, got ", *v));
         s.training.optimizer_offload_fraction = *v;
       },
       [](const Row& r, Out& o) {
         const TrainingConfig& t = o.plan.training;
         if (t.optimizer_cpu_offload && t.optimizer_offload_fraction != 1.0)
           o.number(r.name, t.optimizer_offload_fraction);
       }},

      {"--overlap-cpu-optimizer-d2h-h2d", G::kTraining, "training.overlap_cpu_optimizer_d2h_h2d",
       kStep,
       [](const Row& r, In& s) { s.training.overlap_cpu_optimizer_d2h_h2d = s.args.flag(r.name); },
       [](const Row& r, Out& o) {
         if (o.plan.training.overlap_cpu_optimizer_d2h_h2d) o.flag(r.name);
       }},
      {"--cpu-offloading-num-layers", G::kTraining, "training.cpu_offloading_num_layers", kStep,
       [](const Row& r, In& s) {
         s.training.cpu_offloading_num_layers = s.args.int_value(r.name, 0, true).value_or(0);
       },
       [](const Row& r, Out& o) {
         const int64_t n = o.plan.training.cpu_offloading_num_layers;
         if (n > 0) o.arg(r.name, n);
       }},
      {"--fine-grained-activation-offloading", G::kTraining,
       "training.fine_grained_activation_offloading", kStep,
       [](const Row& r, In& s) {
         s.training.fine_grained_activation_offloading = s.args.flag(r.name);
       },
       [](const Row& r, Out& o) {
         if (o.plan.training.fine_grained_activation_offloading) o.flag(r.name);
       }},
      {"--offload-modules", G::kTraining, "training.offload_modules", kStep,
       [](const Row& r, In& s) {
         const ArgOccurrence* a = s.args.get(r.name);
         if (!a) return;
         const std::vector<std::string> names = known_words(r, *a, "module names");
         s.training.offload_modules = offload_modules_from_names(names, std::string(r.name));
       },
       [](const Row& r, Out& o) {
         const TrainingConfig& t = o.plan.training;
         if (t.offload_modules != 0)
           o.args.push_back({std::string(r.name), offload_module_names(t.offload_modules)});
       }},

      // ---- data ---------------------------------------------------------------------------------
      // The plan's indexed datasets, else synthetic data; a tokenizer of exactly --vocab-size
      // tokens unless the plan names GPT-2 BPE files: the job runs as it is.
      {"--mock-data", G::kData, "training.data_path", kNone,
       [](const Row& r, In& s) { s.mock_data = s.args.flag(r.name); },
       [](const Row& r, Out& o) {
         if (o.plan.training.data_path.empty()) o.flag(r.name);
       }},
      {"--data-path", G::kData, "training.data_path", kNone, read_data_path,
       [](const Row& r, Out& o) {
         const DataBlend& d = o.plan.training.data_path;
         if (!d.empty()) o.args.push_back({std::string(r.name), data_path_words(d)});
       }},
      {"--split", G::kData, "training.split", kNone,
       [](const Row& r, In& s) {
         const auto v = s.args.value(r.name, false);
         if (!v) return;
         parse_split(*v, std::string(r.name));
         s.training.split = *v;
       },
       [](const Row& r, Out& o) {
         // With data always (Megatron-LM warns when --data-path comes without it).
         const TrainingConfig& t = o.plan.training;
         if (!t.data_path.empty() || t.split != kDefaultSplit) o.arg(r.name, t.split);
       }},
      {"--tokenizer-type", G::kData, "training.vocab_file, training.merge_file", kNone,
       [](const Row& r, In& s) {
         s.tokenizer_type = s.args.value(r.name, false).value_or("");
         if (!reads_bpe_files(s) && s.tokenizer_type != "NullTokenizer")
           s.warnings.push_back(cat(r.name, " ", s.tokenizer_type,
                                    ": the plan keeps only GPT-2 BPE files; export writes "
                                    "NullTokenizer (token ids as they are) unless they are set"));
       },
       [](const Row& r, Out& o) {
         const TrainingConfig& t = o.plan.training;
         const bool bpe = !t.vocab_file.empty() || !t.merge_file.empty();
         o.arg(r.name, bpe ? "GPT2BPETokenizer" : "NullTokenizer");
       }},
      {"--vocab-file", G::kData, "training.vocab_file", kNone,
       [](const Row& r, In& s) {
         if (reads_bpe_files(s)) s.training.vocab_file = path_arg(r, s);
       },
       [](const Row& r, Out& o) {
         if (!o.plan.training.vocab_file.empty()) o.arg(r.name, o.plan.training.vocab_file);
       }},
      {"--merge-file", G::kData, "training.merge_file", kNone,
       [](const Row& r, In& s) {
         if (reads_bpe_files(s)) s.training.merge_file = path_arg(r, s);
       },
       [](const Row& r, Out& o) {
         if (!o.plan.training.merge_file.empty()) o.arg(r.name, o.plan.training.merge_file);
       }},

      // ---- evaluation, checkpoints, logging (after the data: a split without a validation set
      // turns evaluation off) -----------------------------------------------------------------------
      {"--log-interval", G::kEvalAndLogging, "training.log_interval", kNone,
       [](const Row& r, In& s) {
         s.training.log_interval = s.args.int_value(r.name, 1, false).value_or(100);
       },
       [](const Row& r, Out& o) {
         if (o.plan.training.log_interval != 100) o.arg(r.name, o.plan.training.log_interval);
       }},
      {"--eval-interval", G::kEvalAndLogging, "training.eval_interval", kNone, read_eval_interval,
       write_eval_interval},
      {"--eval-iters", G::kEvalAndLogging, "training.eval_iters", kNone, read_eval_iters,
       [](const Row& r, Out& o) { o.arg(r.name, o.plan.training.eval_iters); }},
      {"--save", G::kEvalAndLogging, "training.save", kNone,
       [](const Row& r, In& s) { s.training.save = path_arg(r, s); },
       [](const Row& r, Out& o) {
         if (!o.plan.training.save.empty()) o.arg(r.name, o.plan.training.save);
       }},
      {"--save-interval", G::kEvalAndLogging, "training.save_interval", kNone,
       [](const Row& r, In& s) {
         s.training.save_interval = s.args.int_value(r.name, 1, false).value_or(0);
       },
       [](const Row& r, Out& o) {
         if (o.plan.training.save_interval > 0) o.arg(r.name, o.plan.training.save_interval);
       }},
      {"--load", G::kEvalAndLogging, "training.load", kNone,
       [](const Row& r, In& s) { s.training.load = path_arg(r, s); },
       [](const Row& r, Out& o) {
         if (!o.plan.training.load.empty()) o.arg(r.name, o.plan.training.load);
       }},
      {"--tensorboard-dir", G::kEvalAndLogging, "training.tensorboard_dir", kNone,
       [](const Row& r, In& s) { s.training.tensorboard_dir = path_arg(r, s); },
       [](const Row& r, Out& o) {
         if (!o.plan.training.tensorboard_dir.empty())
           o.arg(r.name, o.plan.training.tensorboard_dir);
       }},

      // ---- no effect on a step (each name also covers the arguments it begins) ------------------
      no_effect("--data-cache-path"),
      no_effect("--data-args-path"), no_effect("--per-split-data-args-path"),
      no_effect("--train-data-path"), no_effect("--valid-data-path"),
      no_effect("--test-data-path"),
      no_effect("--tokenizer-"), no_effect("--tiktoken-"),
      no_effect("--num-workers"), no_effect("--no-mmap-bin-files"),
      no_effect("--no-create-attention-mask-in-dataloader"),
      no_effect("--no-save-"), no_effect("--no-load-"),
      no_effect("--ckpt-"), no_effect("--dist-ckpt-"), no_effect("--async-save"),
      no_effect("--finetune"), no_effect("--pretrained-checkpoint"),
      no_effect("--use-checkpoint-args"), no_effect("--auto-detect-ckpt-format"),
      no_effect("--log-"), no_effect("--tensorboard-"), no_effect("--wandb-"),
      no_effect("--eval-"), no_effect("--exit-"), no_effect("--timing-log-"),
      no_effect("--distributed-timeout-minutes"), no_effect("--lr-"),
      no_effect("--decoupled-"),
      no_effect("--train-samples"), no_effect("--use-mcore-models"),
      no_effect("--profile"), no_effect("--use-pytorch-profiler"),
      no_effect("--record-memory-history"), no_effect("--memory-snapshot-path"),
      no_effect("--norm-epsilon"),
      no_effect("--loss-scale"), no_effect("--initial-loss-scale"),
      no_effect("--min-loss-scale"), no_effect("--hysteresis"),
      no_effect("--moe-aux-loss-coeff"), no_effect("--override-opt"),
      no_effect("--use-checkpoint-opt"), no_effect("--no-check-for-nan"),
      no_effect("--check-for-"), no_effect("--start-weight-decay"),
      no_effect("--end-weight-decay"), no_effect("--weight-decay-incr-style"),
      no_effect("--rerun-"), no_effect("--one-logger"),
      no_effect("--enable-one-logger"), no_effect("--straggler"),
      no_effect("--no-async-save"),
  };
  return rows;
}

}  // namespace

const char* group_name(ArgGroup g) {
  switch (g) {
    case ArgGroup::kModel:
      return "GPT_MODEL_ARGS";
    case ArgGroup::kMoe:
      return "MOE_ARGS";
    case ArgGroup::kTraining:
      return "TRAINING_ARGS";
    case ArgGroup::kParallel:
      return "MODEL_PARALLEL_ARGS";
    case ArgGroup::kData:
      return "DATA_ARGS";
    case ArgGroup::kEvalAndLogging:
      return "EVAL_AND_LOGGING_ARGS";
    case ArgGroup::kNone:
      break;
  }
  return "";
}

void ExportState::arg(std::string_view name, std::string value) {
  args.push_back({std::string(name), {std::move(value)}});
}
void ExportState::arg(std::string_view name, int64_t value) { arg(name, num(value)); }
void ExportState::number(std::string_view name, double value) { arg(name, num(value)); }

const std::vector<MegatronArgRow>& megatron_arg_table() { return table(); }

const MegatronArgRow* find_arg_row(std::string_view name) {
  if (name.empty()) return nullptr;
  const auto& rows = table();
  for (const Row& r : rows)
    if (r.name == name) return &r;
  for (const Row& r : rows)
    if (r.effect == StepEffect::kNoEffect && name.substr(0, r.name.size()) == r.name) return &r;
  return nullptr;
}

}  // namespace mplan
