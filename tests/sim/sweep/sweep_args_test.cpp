// Tests of make_request(): the built-in defaults (gpt3-175b on dgx-a100-80g, batch 1536 from
// the preset), overrides, and errors that name the flag.
#include "sim/sweep/sweep_args.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

#include "src/common/error.hpp"

namespace mplan::sweep {
namespace {

using ::testing::HasSubstr;

std::string error_of(const SweepArgs& a) {
  try {
    make_request(a);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(SweepArgs, DefaultsAreGpt3OnDgxA100WithItsBatch) {
  SweepArgs a;
  a.gpus = 128;
  const SweepRequest r = make_request(a);
  EXPECT_EQ(r.base.model.name, "gpt3-175b");
  EXPECT_EQ(r.base.cluster.name, "dgx-a100-80g");
  EXPECT_EQ(r.global_batch_size, 1536);  // Megatron-LM's GPT-3 175B example, SC'21 Table 1
  EXPECT_EQ(r.base.model.seq_length, 2048);
  EXPECT_EQ(r.gpus, 128);
  EXPECT_EQ(r.objective, Objective::kThroughput);
  EXPECT_TRUE(r.fixed.empty());
}

TEST(SweepArgs, PresetBatchesAndOverrides) {
  SweepArgs a;
  a.gpus = 64;
  a.model = "llama3-405b";
  a.cluster = "dgx-h100";
  EXPECT_EQ(make_request(a).global_batch_size, 2048);  // 16M tokens of 8192
  a.model = "mixtral-8x7b";
  EXPECT_EQ(make_request(a).global_batch_size, 256);
  a.global_batch = 512;
  a.seq_length = 2048;
  a.fix = "tp=4";
  a.objective = Objective::kMemory;
  const SweepRequest r = make_request(a);
  EXPECT_EQ(r.global_batch_size, 512);
  EXPECT_EQ(r.base.model.seq_length, 2048);
  EXPECT_EQ(r.fixed.tp, 4);
  EXPECT_EQ(r.objective, Objective::kMemory);
}

TEST(SweepArgs, ErrorsNameTheFlag) {
  SweepArgs a;
  a.gpus = 64;
  a.model = "gpt5";
  EXPECT_THAT(error_of(a), HasSubstr("--model: unknown model preset 'gpt5'"));
  a.model = "gpt3-175b";
  a.cluster = "dgx-z";
  EXPECT_THAT(error_of(a), HasSubstr("--cluster: unknown cluster preset 'dgx-z'"));
  a.cluster = "dgx-a100-80g";
  a.seq_length = 4096;
  EXPECT_EQ(error_of(a),
            "--seq-length: 4096 exceeds max_position_embeddings (2048) of model 'gpt3-175b'; "
            "give a model file with a larger max_position_embeddings");
  a.seq_length.reset();
  a.fix = "tp=";
  EXPECT_THAT(error_of(a), HasSubstr("--fix: tp must be an integer"));
  a.fix = "";
  a.gpus = 100;
  EXPECT_THAT(error_of(a), HasSubstr("--gpus: 100 is not a whole number of nodes"));
}

TEST(SweepArgs, PrecisionFlagsSetEveryCandidatesTraining) {
  SweepArgs a;
  a.gpus = 64;
  a.cluster = "dgx-h100";
  EXPECT_EQ(make_request(a).base.training, TrainingConfig{});
  a.precision = "fp8";
  a.fp8_recipe = "tensorwise";
  a.fp8_param_gather = true;
  const TrainingConfig t = make_request(a).base.training;
  EXPECT_EQ(t.fp8_format, Fp8Format::kHybrid);
  EXPECT_EQ(t.fp8_recipe, Fp8Recipe::kTensorwise);
  EXPECT_TRUE(t.fp8_param_gather);
  // The GPU must run the recipe: MXFP8 on Blackwell only, FP8 not on an A100, FP4 on Blackwell.
  a.fp8_recipe = "mxfp8";
  EXPECT_THAT(error_of(a), HasSubstr("--fp8-recipe: MXFP8 (fp8_recipe mxfp8) needs compute "
                                     "capability 10 or later"));
  a.cluster = "dgx-b200";
  EXPECT_EQ(make_request(a).base.training.fp8_recipe, Fp8Recipe::kMxfp8);
  a.cluster = "dgx-a100-80g";
  a.fp8_recipe = "delayed";
  a.fp8_param_gather = false;
  EXPECT_THAT(error_of(a), HasSubstr("--precision: FP8 needs compute capability 8.9"));
  a.precision = "fp4";
  a.cluster = "dgx-h200";
  EXPECT_THAT(error_of(a), HasSubstr("--precision: NVFP4"));
  a.cluster = "gb200-nvl72";
  a.gpus = 72;
  EXPECT_EQ(make_request(a).base.training.fp4_format, Fp4Format::kE2m1);
  a.precision = "int8";
  EXPECT_EQ(error_of(a), "--precision: must be bf16, fp8 or fp4, got \"int8\"");
  a.precision = "bf16";
  a.fp8_recipe = "mxfp8";
  EXPECT_EQ(error_of(a), "--fp8-recipe: needs --precision fp8, got --precision bf16");
  a.precision = "fp8";
  a.fp8_recipe = "custom";
  EXPECT_THAT(error_of(a), HasSubstr("--fp8-recipe: must be one of"));
}

TEST(SweepArgs, ModelFileWithoutDefaultBatchNeedsTheFlag) {
  const std::string path =
      ::testing::TempDir() + "sweep_args_model_" + std::to_string(::getpid()) + ".json";
  std::ofstream(path) << R"({"name": "mine", "num_layers": 4, "hidden_size": 64,
      "num_attention_heads": 4, "ffn_hidden_size": 256, "vocab_size": 128, "seq_length": 16,
      "activation": "gelu", "normalization": "layernorm", "position_embedding": "learned",
      "tied_embeddings": true})";
  SweepArgs a;
  a.gpus = 8;
  a.model = path;
  EXPECT_EQ(error_of(a),
            "--global-batch: model 'mine' has no default_global_batch_size; give --global-batch");
  a.global_batch = 32;
  EXPECT_EQ(make_request(a).base.model.name, "mine");
  std::remove(path.c_str());
}

}  // namespace
}  // namespace mplan::sweep
