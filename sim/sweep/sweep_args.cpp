// make_request(): the model file is read once as JSON, for its shape and its default batch;
// nothing is defaulted silently (no batch known -> an error naming --global-batch).
#include "sim/sweep/sweep_args.hpp"

#include "sim/sweep/sweep_advice.hpp"
#include "src/common/embedded_configs.hpp"
#include "src/common/error.hpp"
#include "src/plan/precision_rules.hpp"

namespace mplan::sweep {

TrainingConfig training_of(const SweepArgs& a) {
  // Through the plan file's own parser, so the flags obey the training section's rules.
  Json t = Json::object();
  if (a.precision == "fp8") {
    t["fp8_format"] = "hybrid";
    t["fp8_recipe"] = a.fp8_recipe;
    if (a.fp8_param_gather) t["fp8_param_gather"] = true;
  } else if (a.precision == "fp4") {
    t["fp4_format"] = "e2m1";
  } else if (a.precision != "bf16") {
    throw Error(cat("--precision: must be bf16, fp8 or fp4, got \"", a.precision, "\""));
  }
  if (a.precision != "fp8" && (a.fp8_recipe != "delayed" || a.fp8_param_gather))
    throw Error(cat(a.fp8_param_gather ? "--fp8-param-gather" : "--fp8-recipe",
                    ": needs --precision fp8, got --precision ", a.precision));
  try {
    return training_from_json(t, "training");
  } catch (const Error& e) {
    const std::string what = e.what();
    throw Error(what.rfind("training.fp8_recipe", 0) == 0
                    ? "--fp8-recipe" + what.substr(std::string("training.fp8_recipe").size())
                    : what);
  }
}

SweepRequest make_request(const SweepArgs& a) {
  SweepRequest r;
  const Json model_json = parse_json(load_config_text("models", a.model, "--model"),
                                     is_file_reference(a.model) ? a.model : "--model");
  r.base.model = model_from_json(model_json, "--model");
  r.base.cluster = load_cluster(a.cluster, "--cluster");
  r.base.training = training_of(a);
  const std::optional<Implementation> impl = stack_from(a.stack);
  if (!impl)
    throw Error(cat("--stack: must be one of ", kStackNames, ", got ", json_excerpt(a.stack)));
  r.base.training.implementation = *impl;
  // Megatron-LM's local implementation materializes the attention scores (as a plan file's
  // default for it, src/plan/training_config.cpp).
  if (*impl == Implementation::kMegatronLocal)
    r.base.training.attention_backend = AttentionBackend::kUnfused;
  r.gpus = a.gpus;
  r.objective = a.objective;
  r.fixed = parse_fixed_axes(a.fix, "--fix");
  r.memory_headroom = check_number_range(a.memory_headroom, {0.0, 0.9}, "--memory-headroom");

  ModelSpec& m = r.base.model;
  if (a.seq_length) {
    check_int_range(*a.seq_length, {1, 2097152}, "--seq-length");
    if (*a.seq_length > m.max_position_embeddings)
      throw Error(cat("--seq-length: ", *a.seq_length, " exceeds max_position_embeddings (",
                      m.max_position_embeddings, ") of model '", m.name,
                      "'; give a model file with a larger max_position_embeddings"));
    m.seq_length = *a.seq_length;
  }
  if (a.global_batch) {
    r.global_batch_size = check_int_range(*a.global_batch, {1, 1 << 24}, "--global-batch");
  } else if (model_json.is_object() && model_json.contains("default_global_batch_size") &&
             model_json["default_global_batch_size"].is_number_integer()) {
    r.global_batch_size = model_json["default_global_batch_size"].get<int64_t>();
  } else {
    throw Error(cat("--global-batch: model '", m.name,
                    "' has no default_global_batch_size; give --global-batch"));
  }
  // A recipe the GPU cannot run refuses every candidate: say so once, up front.
  std::vector<Violation> hw;
  append_precision_violations(r.base, hw);
  for (const Violation& v : hw)
    if (v.field == "training.fp8_format" || v.field == "training.fp8_recipe" ||
        v.field == "training.fp4_format" || v.field == "cluster.gpu.compute_capability")
      throw Error(cat(v.field == "training.fp8_recipe" ? "--fp8-recipe" : "--precision", ": ",
                      v.message, " (cluster '", r.base.cluster.name, "')"));
  check_request(r);
  return r;
}

}  // namespace mplan::sweep
