// TrainingConfig JSON adapter.
#include "src/plan/training_config.hpp"

#include "src/common/error.hpp"

namespace mplan {

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

int64_t bytes_per_element(Precision p) { return p == Precision::kFp32 ? 4 : 2; }

TrainingConfig training_from_json(const Json& j, const std::string& path) {
  JsonObject o(j, path);
  TrainingConfig t;
  std::string prec = o.get_enum("precision", {"bf16", "fp16", "fp32"}, "bf16");
  t.precision = prec == "bf16"   ? Precision::kBf16
                : prec == "fp16" ? Precision::kFp16
                                 : Precision::kFp32;
  t.grads_in_fp32 = o.get_bool("grads_in_fp32", true);
  // Default as Megatron's "auto": flash kernels where the precision allows them (bf16/fp16).
  const char* auto_backend = t.precision == Precision::kFp32 ? "unfused" : "flash";
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
  o.finish();
  return t;
}

Json training_to_json(const TrainingConfig& t) {
  Json j;
  j["precision"] = to_string(t.precision);
  j["grads_in_fp32"] = t.grads_in_fp32;
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
  return j;
}

}  // namespace mplan
