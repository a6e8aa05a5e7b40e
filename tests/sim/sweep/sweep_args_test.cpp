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
