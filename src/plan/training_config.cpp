// TrainingConfig JSON adapter.
#include "src/plan/training_config.hpp"

#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "src/common/bit_names.hpp"
#include "src/common/error.hpp"

namespace mplan {

namespace {
constexpr const char* kOffloadModuleNames[kNumOffloadModules] = {
    "attn_norm", "qkv_linear", "core_attn", "attn_proj", "mlp_norm", "expert_fc1", "moe_act"};
}  // namespace

std::vector<std::string> offload_module_names(uint32_t bits) {
  return names_of_bits(kOffloadModuleNames, bits);
}

uint32_t offload_modules_from_names(const std::vector<std::string>& names,
                                    const std::string& field) {
  return bits_of_names(kOffloadModuleNames, names, field,
                       " (fused_group_mlp needs --use-transformer-engine-op-fuser and gdp_qkv "
                       "GatedDeltaProduct layers, neither of which mplan models)");
}

const char* to_string(LrDecayStyle s) {
  switch (s) {
    case LrDecayStyle::kConstant:
      return "constant";
    case LrDecayStyle::kLinear:
      return "linear";
    case LrDecayStyle::kCosine:
      return "cosine";
    case LrDecayStyle::kInverseSquareRoot:
      return "inverse-square-root";
  }
  return "?";
}

namespace {

// Python's float(word): the whole word (surrounding spaces allowed) is one number.
std::optional<double> parse_float(const std::string& word) {
  const char* begin = word.c_str();
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(begin, &end);
  if (end == begin) return std::nullopt;
  while (*end == ' ' || *end == '\t' || *end == '\n') ++end;
  if (*end != '\0') return std::nullopt;
  return v;
}

std::string strip(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\n\r\f\v");
  if (b == std::string::npos) return "";
  const size_t e = s.find_last_not_of(" \t\n\r\f\v");
  return s.substr(b, e - b + 1);
}

}  // namespace

DataBlend parse_data_path(const std::vector<std::string>& words, const std::string& field) {
  DataBlend b;
  bool weighted = !words.empty() && words.size() % 2 == 0;
  if (weighted)
    for (size_t i = 0; i < words.size(); i += 2) weighted = weighted && parse_float(words[i]);
  for (size_t i = weighted ? 1 : 0; i < words.size(); i += weighted ? 2 : 1) {
    const std::string prefix = strip(words[i]);
    if (prefix.empty()) throw Error(cat(field, ": an empty data prefix"));
    b.prefixes.push_back(prefix);
    if (weighted) {
      const double w = *parse_float(words[i - 1]);
      if (!(w > 0) || !std::isfinite(w))
        throw Error(
            cat(field, ": the weight of ", prefix, " must be a number > 0, got ", words[i - 1]));
      b.weights.push_back(w);
    }
  }
  return b;
}

std::vector<std::string> data_path_words(const DataBlend& blend) {
  std::vector<std::string> words;
  for (size_t i = 0; i < blend.prefixes.size(); ++i) {
    if (!blend.weights.empty()) words.push_back(Json(blend.weights[i]).dump());
    words.push_back(blend.prefixes[i]);
  }
  return words;
}

std::array<double, 3> parse_split(const std::string& split, const std::string& field) {
  std::vector<double> v;
  for (size_t i = 0; i < split.size();) {
    if (!(std::isdigit(static_cast<unsigned char>(split[i])) || split[i] == '.')) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < split.size() &&
           (std::isdigit(static_cast<unsigned char>(split[j])) || split[j] == '.'))
      ++j;
    const std::string word = split.substr(i, j - i);
    const auto x = parse_float(word);
    if (!x || word.find('.') != word.rfind('.'))
      throw Error(cat(field, ": \"", split, "\" has \"", word, "\", which is not a number"));
    v.push_back(*x);
    i = j;
  }
  if (v.size() > 3)
    throw Error(cat(field, ": \"", split, "\" has ", v.size(),
                    " numbers; at most three (train, valid, test)"));
  v.resize(3, 0.0);
  const double sum = v[0] + v[1] + v[2];
  if (!(sum > 0)) throw Error(cat(field, ": \"", split, "\" gives every split a share of 0"));
  return {v[0] / sum, v[1] / sum, v[2] / sum};
}

const char* to_string(Precision p) {
  switch (p) {
    case Precision::kBf16:
      return "bf16";
    case Precision::kFp16:
      return "fp16";
    case Precision::kFp32:
      return "fp32";
  }
  return "?";
}

const char* to_string(AttentionBackend a) {
  return a == AttentionBackend::kFlash ? "flash" : "unfused";
}

const char* to_string(Fp8Format f) {
  return f == Fp8Format::kE4m3 ? "e4m3" : f == Fp8Format::kHybrid ? "hybrid" : "none";
}
const char* to_string(Fp8Recipe r) {
  switch (r) {
    case Fp8Recipe::kTensorwise:
      return "tensorwise";
    case Fp8Recipe::kDelayed:
      return "delayed";
    case Fp8Recipe::kBlockwise:
      return "blockwise";
    case Fp8Recipe::kMxfp8:
      return "mxfp8";
  }
  return "?";
}
const char* to_string(Fp4Format f) { return f == Fp4Format::kE2m1 ? "e2m1" : "none"; }
const char* to_string(Fp4Recipe) { return "nvfp4"; }

int64_t bytes_per_element(Precision p) { return p == Precision::kFp32 ? 4 : 2; }

namespace {

// The fp8 / fp4 fields and the rules Megatron-LM states for them on their own
// (TransformerConfig.__post_init__, arguments.py validate_args); the rules that involve the
// model, the parallel layout or the GPU are in src/plan/precision_rules.
void parse_low_precision(const JsonObject& o, TrainingConfig& t) {
  const std::string f8 = o.get_enum("fp8_format", {"none", "e4m3", "hybrid"}, "none");
  t.fp8_format = f8 == "e4m3"     ? Fp8Format::kE4m3
                 : f8 == "hybrid" ? Fp8Format::kHybrid
                                  : Fp8Format::kNone;
  const std::string r8 =
      o.get_enum("fp8_recipe", {"tensorwise", "delayed", "blockwise", "mxfp8"}, "delayed");
  t.fp8_recipe = r8 == "tensorwise"  ? Fp8Recipe::kTensorwise
                 : r8 == "delayed"   ? Fp8Recipe::kDelayed
                 : r8 == "blockwise" ? Fp8Recipe::kBlockwise
                                     : Fp8Recipe::kMxfp8;
  t.fp4_format = o.get_enum("fp4_format", {"none", "e2m1"}, "none") == "e2m1" ? Fp4Format::kE2m1
                                                                              : Fp4Format::kNone;
  o.get_enum("fp4_recipe", {"nvfp4"}, "nvfp4");
  t.fp4_recipe = Fp4Recipe::kNvfp4;
  t.fp8_param_gather = o.get_bool("fp8_param_gather", false);
  t.fp4_param_gather = o.get_bool("fp4_param_gather", false);
  t.first_last_layers_bf16 = o.get_bool("first_last_layers_bf16", false);
  t.num_layers_at_start_in_bf16 = o.get_int("num_layers_at_start_in_bf16", 1, {0, 1024});
  t.num_layers_at_end_in_bf16 = o.get_int("num_layers_at_end_in_bf16", 1, {0, 1024});
  const bool fp8 = t.fp8_format != Fp8Format::kNone, fp4 = t.fp4_format != Fp4Format::kNone;
  if (fp8 && fp4)
    throw Error(cat(o.field("fp4_format"),
                    ": fp4 and fp8 cannot be used simultaneously. Please choose one (fp8_format ",
                    to_string(t.fp8_format), ")"));
  if (t.fp8_param_gather && !fp8)
    throw Error(cat(o.field("fp8_param_gather"),
                    ": fp8_param must be used together with fp8 mode (set fp8_format)"));
  if (t.fp4_param_gather && !fp4)
    throw Error(cat(o.field("fp4_param_gather"),
                    ": --fp4-param-gather must be used together with --fp4-format (set "
                    "fp4_format)"));
  if (fp8 && t.first_last_layers_bf16 && t.fp8_recipe == Fp8Recipe::kDelayed)
    throw Error(cat(o.field("first_last_layers_bf16"),
                    ": Delayed scaling does not support first / last layer in BF16 (fp8_recipe "
                    "delayed)"));
}

}  // namespace

TrainingConfig training_from_json(const Json& j, const std::string& path) {
  JsonObject o(j, path);
  TrainingConfig t;
  std::string prec = o.get_enum("precision", {"bf16", "fp16", "fp32"}, "bf16");
  t.precision = prec == "bf16"   ? Precision::kBf16
                : prec == "fp16" ? Precision::kFp16
                                 : Precision::kFp32;
  t.grads_in_fp32 = o.get_bool("grads_in_fp32", true);
  t.implementation = *implementation_from(
      o.get_enum("implementation", {"megatron-te", "megatron-local", "mplan"}, "megatron-te"));
  // Default as Megatron's "auto": flash kernels where the precision allows them (bf16/fp16) and
  // the implementation has them (Megatron's local attention materializes the scores).
  const char* auto_backend =
      t.precision == Precision::kFp32 || t.implementation == Implementation::kMegatronLocal
          ? "unfused"
          : "flash";
  t.attention_backend =
      o.get_enum("attention_backend", {"flash", "unfused"}, auto_backend) == "flash"
          ? AttentionBackend::kFlash
          : AttentionBackend::kUnfused;
  // Optimizer settings: wide ranges around every published recipe (lr 6e-5 to 6e-4, weight
  // decay 0.1, betas 0.9 / 0.95, eps 1e-8, clip 1.0, std 0.006 to 0.02).
  t.lr = o.get_number("lr", t.lr, {0.0, 10.0});
  t.weight_decay = o.get_number("weight_decay", t.weight_decay, {0.0, 10.0});
  t.adam_beta1 = o.get_number("adam_beta1", t.adam_beta1, {0.0, 1.0});
  t.adam_beta2 = o.get_number("adam_beta2", t.adam_beta2, {0.0, 1.0});
  t.adam_eps = o.get_number("adam_eps", t.adam_eps, {0.0, 1.0});
  t.clip_grad = o.get_number("clip_grad", t.clip_grad, {0.0, 1e6});
  t.init_method_std = o.get_number("init_method_std", t.init_method_std, {0.0, 10.0});
  t.seed = o.get_int("seed", t.seed, {0, INT64_MAX});
  t.train_iters = o.get_int("train_iters", 0, {0, 1'000'000'000});
  if (o.has("rampup_batch_size")) {
    const Json& r = o.raw("rampup_batch_size");
    std::string f = o.field("rampup_batch_size");
    if (!r.is_array() || r.size() != 3 || !r[0].is_number_integer() || !r[1].is_number_integer() ||
        !r[2].is_number_integer())
      throw Error(cat(f, ": must be [start, increment, ramp_samples] (three integers), got ",
                      json_excerpt(r)));
    RampupBatchSize rb{r[0].get<int64_t>(), r[1].get<int64_t>(), r[2].get<int64_t>()};
    if (rb.start < 1 || rb.increment < 1 || rb.samples < 0)
      throw Error(cat(f, ": start and increment must be >= 1 and ramp_samples >= 0, got ",
                      json_excerpt(r)));
    // As the global batch (parallel.global_batch_size <= 2^24); samples up to 2^40 (a trillion
    // sequences, hundreds of times more than any run has consumed).
    check_int_range(rb.start, {1, 1 << 24}, f + "[0]");
    check_int_range(rb.increment, {1, 1 << 24}, f + "[1]");
    check_int_range(rb.samples, {0, int64_t{1} << 40}, f + "[2]");
    t.rampup_batch_size = rb;
  }
  for (auto [name, v] : {std::pair{"adam_beta1", t.adam_beta1}, {"adam_beta2", t.adam_beta2}})
    if (v >= 1.0) throw Error(cat(o.field(name), ": must be < 1, got ", v));

  // Learning-rate schedule.
  const std::string style = o.get_enum(
      "lr_decay_style", {"constant", "linear", "cosine", "inverse-square-root"}, "linear");
  t.lr_decay_style = style == "constant" ? LrDecayStyle::kConstant
                     : style == "linear" ? LrDecayStyle::kLinear
                     : style == "cosine" ? LrDecayStyle::kCosine
                                         : LrDecayStyle::kInverseSquareRoot;
  t.min_lr = o.get_number("min_lr", 0.0, {0.0, 10.0});
  t.lr_decay_iters = o.get_optional_int("lr_decay_iters", {1, 1'000'000'000});
  t.lr_warmup_iters = o.get_int("lr_warmup_iters", 0, {0, 1'000'000'000});
  if (o.has("lr_warmup_fraction"))
    t.lr_warmup_fraction = o.get_number("lr_warmup_fraction", 0.0, {0.0, 1.0});
  t.lr_warmup_init = o.get_number("lr_warmup_init", 0.0, {0.0, 10.0});
  // Data.
  if (o.has("data_path")) {
    const Json& words = o.raw("data_path");
    const std::string f = o.field("data_path");
    if (!words.is_array())
      throw Error(cat(f, ": must be a list of data prefixes, optionally each after its weight ",
                      "([0.3, \"A\", 0.7, \"B\"]), got ", json_excerpt(words)));
    std::vector<std::string> list;
    for (const Json& w : words) {
      if (w.is_string())
        list.push_back(w.get<std::string>());
      else if (w.is_number())
        list.push_back(w.dump());
      else
        throw Error(cat(f, ": every entry must be a prefix or a weight, got ", json_excerpt(w)));
    }
    t.data_path = parse_data_path(list, f);
  }
  t.split = o.get_string("split", kDefaultSplit);
  const std::array<double, 3> shares = parse_split(t.split, o.field("split"));
  t.vocab_file = o.get_string("vocab_file", "");
  t.merge_file = o.get_string("merge_file", "");
  // Evaluation, checkpoints, logging.
  t.eval_interval = o.get_int("eval_interval", t.eval_interval, {0, 1'000'000'000});
  t.eval_iters = o.get_int("eval_iters", t.eval_iters, {0, 1'000'000'000});
  t.save = o.get_string("save", "");
  t.load = o.get_string("load", "");
  t.save_interval = o.get_int("save_interval", 0, {0, 1'000'000'000});
  t.log_interval = o.get_int("log_interval", t.log_interval, {1, 1'000'000'000});
  t.tensorboard_dir = o.get_string("tensorboard_dir", "");
  t.optimizer_precision = optimizer_precision_from_json(o);
  t.optimizer_cpu_offload = o.get_bool("optimizer_cpu_offload", false);
  t.optimizer_offload_fraction = o.get_number("optimizer_offload_fraction", 1.0, {0.0, 1.0});
  t.overlap_cpu_optimizer_d2h_h2d = o.get_bool("overlap_cpu_optimizer_d2h_h2d", false);
  t.cpu_offloading_num_layers = o.get_int("cpu_offloading_num_layers", 0, {0, 1'000'000});
  t.fine_grained_activation_offloading = o.get_bool("fine_grained_activation_offloading", false);
  if (o.has("offload_modules")) {
    const Json& v = o.raw("offload_modules");
    const std::string f = o.field("offload_modules");
    if (!v.is_array() || v.size() > 16)
      throw Error(cat(f, ": must be a list of module names (at most 16), got ", json_excerpt(v)));
    std::vector<std::string> names;
    for (const Json& e : v) {
      if (!e.is_string())
        throw Error(cat(f, ": must be a list of module names, got ", json_excerpt(e)));
      names.push_back(e.get<std::string>());
    }
    t.offload_modules = offload_modules_from_names(names, f);
  }

  parse_low_precision(o, t);

  // Megatron's rules (megatron/training/arguments.py, OptimizerParamScheduler).
  if (t.lr_warmup_fraction) {
    if (t.lr_warmup_iters > 0)
      throw Error(cat(o.field("lr_warmup_fraction"),
                      ": can only specify one of lr_warmup_fraction and lr_warmup_iters"));
    if (*t.lr_warmup_fraction >= 1.0)
      throw Error(cat(o.field("lr_warmup_fraction"),
                      ": must be < 1 (warmup must end before the decay does), got ",
                      *t.lr_warmup_fraction));
  }
  if (t.min_lr > t.lr)
    throw Error(cat(o.field("min_lr"), ": must be <= lr (", t.lr, "), got ", t.min_lr));
  if (t.lr_warmup_init > t.lr)
    throw Error(
        cat(o.field("lr_warmup_init"), ": must be <= lr (", t.lr, "), got ", t.lr_warmup_init));
  const int64_t decay_iters = t.lr_decay_iters.value_or(t.train_iters);
  if (decay_iters > 0 && t.lr_warmup_iters >= decay_iters)
    throw Error(cat(o.field("lr_warmup_iters"), ": must be < ",
                    t.lr_decay_iters ? "lr_decay_iters" : "train_iters", " (", decay_iters,
                    "), got ", t.lr_warmup_iters));
  if (!t.save.empty() && t.save_interval < 1)
    throw Error(cat(o.field("save_interval"), ": must be >= 1 when save is set"));
  if (!t.data_path.empty() && t.eval_interval > 0 && t.eval_iters > 0 && shares[1] <= 0)
    throw Error(cat(o.field("split"), ": \"", t.split,
                    "\" leaves the validation set empty while evaluation is asked for ",
                    "(eval_interval ", t.eval_interval, ", eval_iters ", t.eval_iters,
                    "); give it a share or set eval_iters to 0"));
  o.finish();
  return t;
}

Json training_to_json(const TrainingConfig& t) {
  Json j;
  j["precision"] = to_string(t.precision);
  j["grads_in_fp32"] = t.grads_in_fp32;
  if (t.implementation != Implementation::kMegatronTe)
    j["implementation"] = to_string(t.implementation);
  j["attention_backend"] = to_string(t.attention_backend);
  j["lr"] = t.lr;
  j["weight_decay"] = t.weight_decay;
  j["adam_beta1"] = t.adam_beta1;
  j["adam_beta2"] = t.adam_beta2;
  j["adam_eps"] = t.adam_eps;
  j["clip_grad"] = t.clip_grad;
  j["init_method_std"] = t.init_method_std;
  j["seed"] = t.seed;
  if (t.train_iters > 0) j["train_iters"] = t.train_iters;
  if (t.rampup_batch_size)
    j["rampup_batch_size"] = {t.rampup_batch_size->start, t.rampup_batch_size->increment,
                              t.rampup_batch_size->samples};
  // The schedule, data, evaluation, checkpoint and logging fields only when not the default.
  const TrainingConfig d;
  if (t.lr_decay_style != d.lr_decay_style) j["lr_decay_style"] = to_string(t.lr_decay_style);
  if (t.min_lr != d.min_lr) j["min_lr"] = t.min_lr;
  if (t.lr_decay_iters) j["lr_decay_iters"] = *t.lr_decay_iters;
  if (t.lr_warmup_iters != d.lr_warmup_iters) j["lr_warmup_iters"] = t.lr_warmup_iters;
  if (t.lr_warmup_fraction) j["lr_warmup_fraction"] = *t.lr_warmup_fraction;
  if (t.lr_warmup_init != d.lr_warmup_init) j["lr_warmup_init"] = t.lr_warmup_init;
  if (!t.data_path.empty()) {
    Json words = Json::array();
    for (size_t i = 0; i < t.data_path.prefixes.size(); ++i) {
      if (!t.data_path.weights.empty()) words.push_back(t.data_path.weights[i]);
      words.push_back(t.data_path.prefixes[i]);
    }
    j["data_path"] = words;
  }
  if (t.split != d.split) j["split"] = t.split;
  if (!t.vocab_file.empty()) j["vocab_file"] = t.vocab_file;
  if (!t.merge_file.empty()) j["merge_file"] = t.merge_file;
  if (t.eval_interval != d.eval_interval) j["eval_interval"] = t.eval_interval;
  if (t.eval_iters != d.eval_iters) j["eval_iters"] = t.eval_iters;
  if (!t.save.empty()) j["save"] = t.save;
  if (!t.load.empty()) j["load"] = t.load;
  if (t.save_interval != d.save_interval) j["save_interval"] = t.save_interval;
  if (t.log_interval != d.log_interval) j["log_interval"] = t.log_interval;
  if (!t.tensorboard_dir.empty()) j["tensorboard_dir"] = t.tensorboard_dir;
  // Low precision only when on.
  if (t.fp8_format != Fp8Format::kNone) {
    j["fp8_format"] = to_string(t.fp8_format);
    j["fp8_recipe"] = to_string(t.fp8_recipe);
    if (t.fp8_param_gather) j["fp8_param_gather"] = true;
  }
  if (t.fp4_format != Fp4Format::kNone) {
    j["fp4_format"] = to_string(t.fp4_format);
    j["fp4_recipe"] = to_string(t.fp4_recipe);
    if (t.fp4_param_gather) j["fp4_param_gather"] = true;
  }
  if (t.first_last_layers_bf16) {
    j["first_last_layers_bf16"] = true;
    j["num_layers_at_start_in_bf16"] = t.num_layers_at_start_in_bf16;
    j["num_layers_at_end_in_bf16"] = t.num_layers_at_end_in_bf16;
  }
  optimizer_precision_to_json(t.optimizer_precision, j);
  if (t.optimizer_cpu_offload) j["optimizer_cpu_offload"] = true;
  if (t.optimizer_offload_fraction != 1.0)
    j["optimizer_offload_fraction"] = t.optimizer_offload_fraction;
  if (t.overlap_cpu_optimizer_d2h_h2d) j["overlap_cpu_optimizer_d2h_h2d"] = true;
  if (t.cpu_offloading_num_layers > 0) j["cpu_offloading_num_layers"] = t.cpu_offloading_num_layers;
  if (t.fine_grained_activation_offloading) j["fine_grained_activation_offloading"] = true;
  if (t.offload_modules != 0) j["offload_modules"] = offload_module_names(t.offload_modules);
  return j;
}

}  // namespace mplan
