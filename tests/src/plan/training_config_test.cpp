// Tests of the "training" section: Megatron-like defaults, the ramp-up triple, ranges, the
// learning-rate schedule, data, evaluation, checkpoint and logging fields with Megatron's rules,
// --data-path and --split parsing as Megatron's, and errors naming the field.
#include "src/plan/training_config.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "src/common/error.hpp"

namespace mplan {
namespace {

using ::testing::StartsWith;

std::string error_of(const std::string& text) {
  try {
    training_from_json(parse_json(text, "t"), "training");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(TrainingConfig, Defaults) {
  TrainingConfig t = training_from_json(parse_json("{}", "t"), "training");
  EXPECT_EQ(t.precision, Precision::kBf16);
  EXPECT_TRUE(t.grads_in_fp32);
  EXPECT_EQ(t.attention_backend, AttentionBackend::kFlash);
  EXPECT_EQ(t.adam_beta1, 0.9);
  EXPECT_EQ(t.adam_beta2, 0.95);
  EXPECT_EQ(t.train_iters, 0);
  EXPECT_FALSE(t.rampup_batch_size.has_value());
  EXPECT_EQ(bytes_per_element(Precision::kBf16), 2);
  EXPECT_EQ(bytes_per_element(Precision::kFp16), 2);
  EXPECT_EQ(bytes_per_element(Precision::kFp32), 4);
}

TEST(TrainingConfig, NumbersOutsideTheirRangeNameTheField) {
  EXPECT_EQ(error_of(R"({"lr": 1e9})"), "training.lr: must be <= 10, got 1e+09");
  EXPECT_EQ(error_of(R"({"train_iters": 10000000000})"),
            "training.train_iters: must be <= 1000000000, got 10000000000");
  EXPECT_EQ(error_of(R"({"rampup_batch_size": [1, 1, 1099511627777]})"),
            "training.rampup_batch_size[2]: must be <= 1099511627776, got 1099511627777");
  EXPECT_EQ(error_of(R"({"rampup_batch_size": [100000000, 1, 1]})"),
            "training.rampup_batch_size[0]: must be <= 16777216, got 100000000");
  EXPECT_EQ(error_of(R"({"lr": 1e999})"), "t: lr: number out of range (1e999)");
}

TEST(TrainingConfig, OptimizerCpuOffloadRoundTrips) {
  const TrainingConfig d = training_from_json(parse_json("{}", "t"), "training");
  EXPECT_FALSE(d.optimizer_cpu_offload);
  EXPECT_EQ(d.optimizer_offload_fraction, 1.0);  // Megatron-LM's default
  EXPECT_FALSE(training_to_json(d).contains("optimizer_cpu_offload"));
  const TrainingConfig t = training_from_json(
      parse_json(R"({"optimizer_cpu_offload": true, "optimizer_offload_fraction": 0.25})", "t"),
      "training");
  EXPECT_TRUE(t.optimizer_cpu_offload);
  EXPECT_EQ(t.optimizer_offload_fraction, 0.25);
  EXPECT_EQ(training_from_json(training_to_json(t), "training"), t);
  EXPECT_EQ(error_of(R"({"optimizer_offload_fraction": 1.5})"),
            "training.optimizer_offload_fraction: must be <= 1, got 1.5");
}

TEST(TrainingConfig, ActivationOffloadingRoundTrips) {
  const TrainingConfig d = training_from_json(parse_json("{}", "t"), "training");
  EXPECT_EQ(d.cpu_offloading_num_layers, 0);
  EXPECT_FALSE(d.fine_grained_activation_offloading);
  EXPECT_EQ(d.offload_modules, 0u);
  EXPECT_FALSE(training_to_json(d).contains("offload_modules"));
  const TrainingConfig t = training_from_json(
      parse_json(R"({"cpu_offloading_num_layers": 3, "fine_grained_activation_offloading": true,
                     "offload_modules": ["attn_proj", "core_attn"],
                     "overlap_cpu_optimizer_d2h_h2d": true})",
                 "t"),
      "training");
  EXPECT_EQ(t.cpu_offloading_num_layers, 3);
  EXPECT_EQ(t.offload_modules, kOffloadCoreAttn | kOffloadAttnProj);
  EXPECT_EQ(offload_module_names(t.offload_modules),
            (std::vector<std::string>{"core_attn", "attn_proj"}));
  EXPECT_TRUE(t.overlap_cpu_optimizer_d2h_h2d);
  EXPECT_EQ(training_from_json(training_to_json(t), "training"), t);
  EXPECT_EQ(error_of(R"({"offload_modules": ["fused_group_mlp"]})").substr(0, 63),
            "training.offload_modules: must name modules among attn_norm, qk");
  EXPECT_EQ(error_of(R"({"cpu_offloading_num_layers": -1})"),
            "training.cpu_offloading_num_layers: must be >= 0, got -1");
}

TEST(TrainingConfig, Rampup) {
  TrainingConfig t =
      training_from_json(parse_json(R"({"rampup_batch_size": [16, 8, 300000]})", "t"), "training");
  ASSERT_TRUE(t.rampup_batch_size.has_value());
  EXPECT_EQ(*t.rampup_batch_size, (RampupBatchSize{16, 8, 300000}));
  const std::string shape =
      "training.rampup_batch_size: must be [start, increment, ramp_samples] (three integers)";
  EXPECT_THAT(error_of(R"({"rampup_batch_size": [16, 8]})"), StartsWith(shape));
  EXPECT_THAT(error_of(R"({"rampup_batch_size": 16})"), StartsWith(shape));
  EXPECT_THAT(error_of(R"({"rampup_batch_size": [16, 8.5, 10]})"), StartsWith(shape));
  EXPECT_THAT(error_of(R"({"rampup_batch_size": [0, 8, 10]})"),
              StartsWith("training.rampup_batch_size: start and increment must be >= 1"));
  EXPECT_THAT(error_of(R"({"rampup_batch_size": [16, 8, -1]})"),
              StartsWith("training.rampup_batch_size: start and increment must be >= 1 and "
                         "ramp_samples >= 0"));
}

TEST(TrainingConfig, ErrorsNameTheField) {
  EXPECT_EQ(error_of(R"({"precision": "fp8"})"),
            "training.precision: must be one of bf16, fp16, fp32; got \"fp8\"");
  EXPECT_EQ(error_of(R"({"adam_beta1": 1.0})"), "training.adam_beta1: must be < 1, got 1");
  EXPECT_EQ(error_of(R"({"lr": -1})"), "training.lr: must be >= 0, got -1");
  EXPECT_EQ(error_of(R"({"seed": 1.5})"), "training.seed: must be an integer, got 1.5");
  EXPECT_THAT(error_of(R"({"optimizer": "adam"})"), StartsWith("training.optimizer: unknown key"));
  EXPECT_EQ(error_of(R"({"attention_backend": "local"})"),
            "training.attention_backend: must be one of flash, unfused; got \"local\"");
}

TEST(TrainingConfig, ImplementationNamesTheStackAndDefaultsToMegatronWithTransformerEngine) {
  const TrainingConfig d = training_from_json(parse_json("{}", "t"), "training");
  EXPECT_EQ(d.implementation, Implementation::kMegatronTe);
  EXPECT_FALSE(training_to_json(d).contains("implementation"));  // old plans are written as before
  const TrainingConfig m =
      training_from_json(parse_json(R"({"implementation": "mplan"})", "t"), "training");
  EXPECT_EQ(m.implementation, Implementation::kMplan);
  EXPECT_EQ(m.attention_backend, AttentionBackend::kFlash);
  EXPECT_EQ(training_to_json(m)["implementation"], "mplan");
  EXPECT_EQ(training_from_json(training_to_json(m), "training"), m);
  // Megatron-LM's local implementation materializes the attention scores unless told otherwise.
  const TrainingConfig l =
      training_from_json(parse_json(R"({"implementation": "megatron-local"})", "t"), "training");
  EXPECT_EQ(l.attention_backend, AttentionBackend::kUnfused);
  EXPECT_EQ(training_from_json(parse_json(R"({"implementation": "megatron-local",
      "attention_backend": "flash"})",
                                          "t"),
                               "training")
                .attention_backend,
            AttentionBackend::kFlash);
  EXPECT_EQ(error_of(R"({"implementation": "te"})"),
            "training.implementation: must be one of megatron-te, megatron-local, mplan; got "
            "\"te\"");
  for (Implementation i : kImplementations) EXPECT_EQ(implementation_from(to_string(i)), i);
}

TEST(TrainingConfig, JsonRoundTrip) {
  TrainingConfig t;
  t.precision = Precision::kFp32;
  t.attention_backend = AttentionBackend::kUnfused;
  t.train_iters = 10;
  t.rampup_batch_size = RampupBatchSize{4, 4, 40};
  EXPECT_EQ(training_from_json(training_to_json(t), "training"), t);
  EXPECT_EQ(training_from_json(training_to_json(TrainingConfig{}), "training"), TrainingConfig{});
}

TEST(TrainingConfig, ScheduleDataEvalCheckpointDefaults) {
  const TrainingConfig t = training_from_json(parse_json("{}", "t"), "training");
  EXPECT_EQ(t.lr_decay_style, LrDecayStyle::kLinear);
  EXPECT_EQ(t.min_lr, 0.0);
  EXPECT_FALSE(t.lr_decay_iters.has_value());
  EXPECT_EQ(t.lr_warmup_iters, 0);
  EXPECT_FALSE(t.lr_warmup_fraction.has_value());
  EXPECT_TRUE(t.data_path.empty());
  EXPECT_EQ(t.split, "969, 30, 1");
  EXPECT_EQ(t.eval_interval, 1000);
  EXPECT_EQ(t.eval_iters, 100);
  EXPECT_EQ(t.save, "");
  EXPECT_EQ(t.save_interval, 0);
  EXPECT_EQ(t.log_interval, 100);
  EXPECT_EQ(t.tensorboard_dir, "");
  // Defaults are not written out, so existing plan files keep their shape.
  EXPECT_FALSE(training_to_json(t).contains("split"));
}

TEST(TrainingConfig, ScheduleDataEvalCheckpointFields) {
  const TrainingConfig t = training_from_json(
      parse_json(R"({"lr": 6e-4, "min_lr": 6e-5, "lr_decay_style": "cosine", "train_iters": 2000,
                     "lr_decay_iters": 1800, "lr_warmup_fraction": 0.01, "lr_warmup_init": 1e-6,
                     "data_path": [0.3, "data/a_text_document", "0.7", "data/b_text_document"],
                     "split": "949,50,1", "eval_interval": 200, "eval_iters": 10,
                     "save": "ckpt", "load": "ckpt", "save_interval": 500, "log_interval": 10,
                     "tensorboard_dir": "tb"})",
                 "t"),
      "training");
  EXPECT_EQ(t.lr_decay_style, LrDecayStyle::kCosine);
  EXPECT_EQ(t.min_lr, 6e-5);
  EXPECT_EQ(t.lr_decay_iters, 1800);
  EXPECT_EQ(t.lr_warmup_fraction, 0.01);
  EXPECT_EQ(t.lr_warmup_init, 1e-6);
  EXPECT_EQ(t.data_path.prefixes,
            (std::vector<std::string>{"data/a_text_document", "data/b_text_document"}));
  EXPECT_EQ(t.data_path.weights, (std::vector<double>{0.3, 0.7}));
  EXPECT_EQ(t.split, "949,50,1");
  EXPECT_EQ(t.eval_interval, 200);
  EXPECT_EQ(t.save_interval, 500);
  EXPECT_EQ(t.tensorboard_dir, "tb");
  EXPECT_EQ(training_from_json(training_to_json(t), "training"), t);
}

TEST(TrainingConfig, MegatronsRules) {
  EXPECT_EQ(error_of(R"({"lr_warmup_iters": 10, "lr_warmup_fraction": 0.1})"),
            "training.lr_warmup_fraction: can only specify one of lr_warmup_fraction and "
            "lr_warmup_iters");
  EXPECT_THAT(error_of(R"({"lr_warmup_fraction": 1.0})"),
              StartsWith("training.lr_warmup_fraction: must be < 1"));
  EXPECT_EQ(error_of(R"({"lr": 1e-4, "min_lr": 1e-3})"),
            "training.min_lr: must be <= lr (0.0001), got 0.001");
  EXPECT_EQ(error_of(R"({"train_iters": 100, "lr_warmup_iters": 100})"),
            "training.lr_warmup_iters: must be < train_iters (100), got 100");
  EXPECT_EQ(error_of(R"({"train_iters": 100, "lr_decay_iters": 50, "lr_warmup_iters": 60})"),
            "training.lr_warmup_iters: must be < lr_decay_iters (50), got 60");
  EXPECT_EQ(error_of(R"({"save": "ckpt"})"),
            "training.save_interval: must be >= 1 when save is set");
  EXPECT_EQ(error_of(R"({"lr_decay_style": "WSD"})"),
            "training.lr_decay_style: must be one of constant, linear, cosine, "
            "inverse-square-root; got \"WSD\"");
  EXPECT_THAT(error_of(R"({"log_interval": 0})"),
              StartsWith("training.log_interval: must be >= 1"));
  EXPECT_THAT(error_of(R"({"data_path": ["a"], "split": "100,0,0"})"),
              StartsWith("training.split: \"100,0,0\" leaves the validation set empty while "
                         "evaluation is asked for"));
  // No evaluation asked: a split without validation is fine.
  EXPECT_NO_THROW(training_from_json(
      parse_json(R"({"data_path": ["a"], "split": "100,0,0", "eval_iters": 0})", "t"), "t"));
  EXPECT_THAT(error_of(R"({"data_path": [0, "a"]})"),
              StartsWith("training.data_path: the weight of a must be a number > 0"));
  EXPECT_THAT(error_of(R"({"data_path": "a"})"),
              StartsWith("training.data_path: must be a list of data prefixes"));
}

TEST(TrainingConfig, DataPathAsMegatronReadsIt) {
  // Megatron's get_blend_from_list: weight/prefix pairs only when every other word is a number.
  EXPECT_EQ(parse_data_path({"A"}, "f"), (DataBlend{{"A"}, {}}));
  EXPECT_EQ(parse_data_path({"0.3", "A", "0.7", "B"}, "f"), (DataBlend{{"A", "B"}, {0.3, 0.7}}));
  EXPECT_EQ(parse_data_path({"A", "B"}, "f"), (DataBlend{{"A", "B"}, {}}));
  EXPECT_EQ(parse_data_path({"1", "A", "B"}, "f"), (DataBlend{{"1", "A", "B"}, {}}));
  EXPECT_EQ(parse_data_path({"30", " A "}, "f"), (DataBlend{{"A"}, {30}}));
  const DataBlend b{{"A", "B"}, {0.25, 3}};
  EXPECT_EQ(parse_data_path(data_path_words(b), "f"), b);
}

TEST(TrainingConfig, SplitAsMegatronReadsIt) {
  // Megatron's parse_and_normalize_split: the numbers, padded to three, normalized.
  EXPECT_EQ(parse_split("949,50,1", "f"), (std::array<double, 3>{0.949, 0.05, 0.001}));
  EXPECT_EQ(parse_split("1 1", "f"), (std::array<double, 3>{0.5, 0.5, 0.0}));
  EXPECT_EQ(parse_split("90/5/5", "f"), (std::array<double, 3>{0.9, 0.05, 0.05}));
  EXPECT_EQ(parse_split("0.5, 0.25, .25", "f"), (std::array<double, 3>{0.5, 0.25, 0.25}));
  EXPECT_THAT(error_of(R"({"split": "1,2,3,4"})"),
              StartsWith("training.split: \"1,2,3,4\" has 4 numbers; at most three"));
  EXPECT_THAT(error_of(R"({"split": "0,0"})"), StartsWith("training.split: \"0,0\" gives every"));
  EXPECT_THAT(error_of(R"({"split": "1.2.3"})"),
              StartsWith("training.split: \"1.2.3\" has \"1.2.3\""));
}

TEST(TrainingConfig, LowPrecisionFieldsAndMegatronsRules) {
  TrainingConfig d = training_from_json(parse_json("{}", "t"), "training");
  EXPECT_EQ(d.fp8_format, Fp8Format::kNone);
  EXPECT_EQ(d.fp8_recipe, Fp8Recipe::kDelayed);  // TransformerConfig's default
  EXPECT_EQ(d.fp4_format, Fp4Format::kNone);
  EXPECT_FALSE(d.first_last_layers_bf16);
  EXPECT_EQ(d.num_layers_at_start_in_bf16, 1);
  EXPECT_EQ(d.num_layers_at_end_in_bf16, 1);
  EXPECT_FALSE(training_to_json(d).contains("fp8_format"));

  TrainingConfig t = training_from_json(
      parse_json(R"({"fp8_format": "hybrid", "fp8_recipe": "mxfp8", "fp8_param_gather": true,
                     "first_last_layers_bf16": true, "num_layers_at_start_in_bf16": 2,
                     "num_layers_at_end_in_bf16": 0})",
                 "t"),
      "training");
  EXPECT_EQ(t.fp8_format, Fp8Format::kHybrid);
  EXPECT_EQ(t.fp8_recipe, Fp8Recipe::kMxfp8);
  EXPECT_TRUE(t.fp8_param_gather);
  EXPECT_EQ(t.num_layers_at_start_in_bf16, 2);
  EXPECT_EQ(t.num_layers_at_end_in_bf16, 0);
  EXPECT_EQ(training_from_json(training_to_json(t), "training"), t);
  TrainingConfig f = training_from_json(
      parse_json(R"({"fp4_format": "e2m1", "fp4_param_gather": true})", "t"), "training");
  EXPECT_EQ(f.fp4_format, Fp4Format::kE2m1);
  EXPECT_EQ(f.fp4_recipe, Fp4Recipe::kNvfp4);
  EXPECT_EQ(training_from_json(training_to_json(f), "training"), f);

  EXPECT_THAT(error_of(R"({"fp8_format": "e5m2"})"), StartsWith("training.fp8_format:"));
  EXPECT_THAT(error_of(R"({"fp8_recipe": "custom"})"), StartsWith("training.fp8_recipe:"));
  EXPECT_EQ(error_of(R"({"fp8_format": "e4m3", "fp4_format": "e2m1"})"),
            "training.fp4_format: fp4 and fp8 cannot be used simultaneously. Please choose one "
            "(fp8_format e4m3)");
  EXPECT_EQ(error_of(R"({"fp8_param_gather": true})"),
            "training.fp8_param_gather: fp8_param must be used together with fp8 mode (set "
            "fp8_format)");
  EXPECT_THAT(error_of(R"({"fp4_param_gather": true})"),
              StartsWith("training.fp4_param_gather: --fp4-param-gather must be used together"));
  EXPECT_EQ(error_of(R"({"fp8_format": "e4m3", "first_last_layers_bf16": true})"),
            "training.first_last_layers_bf16: Delayed scaling does not support first / last "
            "layer in BF16 (fp8_recipe delayed)");
  EXPECT_THAT(error_of(R"({"num_layers_at_start_in_bf16": -1})"),
              StartsWith("training.num_layers_at_start_in_bf16:"));
}

}  // namespace
}  // namespace mplan
