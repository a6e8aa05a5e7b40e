// make_request(): the model file is read once as JSON, for its shape and its default batch;
// nothing is defaulted silently (no batch known -> an error naming --global-batch).
#include "sim/sweep/sweep_args.hpp"

#include "sim/sweep/sweep_advice.hpp"
#include "src/common/embedded_configs.hpp"
#include "src/common/error.hpp"

namespace mplan::sweep {

SweepRequest make_request(const SweepArgs& a) {
  SweepRequest r;
  const Json model_json = parse_json(load_config_text("models", a.model, "--model"),
                                     is_file_reference(a.model) ? a.model : "--model");
  r.base.model = model_from_json(model_json, "--model");
  r.base.cluster = load_cluster(a.cluster, "--cluster");
  r.base.training = TrainingConfig{};
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
  check_request(r);
  return r;
}

}  // namespace mplan::sweep
