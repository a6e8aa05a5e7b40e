// Tests of GPTModelPipe's spec lists and DeepSpeed's split of them into a layout. Spec lists
// follow megatron/model/gpt_model.py of bigscience's and microsoft's Megatron-DeepSpeed; the
// expected splits are worked out by hand in the comments.
#include "src/interop/megatron/deepspeed_pipeline.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "src/common/error.hpp"
#include "src/interop/megatron/deepspeed_partition.hpp"

namespace mplan {
namespace {

using ::testing::HasSubstr;

// A small GPT: 4 layers, hidden 64, 4 heads, ffn 256, vocabulary 1024, 32 learned positions.
ModelSpec small_gpt(int64_t layers = 4) {
  ModelSpec m;
  m.name = "small";
  m.num_layers = layers;
  m.hidden_size = 64;
  m.num_attention_heads = 4;
  m.num_query_groups = 4;
  m.kv_channels = 16;
  m.ffn_hidden_size = 256;
  m.vocab_size = 1024;
  m.seq_length = 32;
  m.max_position_embeddings = 32;
  return m;
}

std::vector<std::string> names(const std::vector<DsLayerSpec>& specs) {
  std::vector<std::string> v;
  for (const DsLayerSpec& s : specs) v.push_back(s.name);
  return v;
}

TEST(MegatronDeepSpeedPipeline, BigScienceSpecsAndTheirParameters) {
  ParallelConfig p;
  DsModelOptions o;
  o.half_precision = true;
  const auto specs = gpt_model_pipe_specs(small_gpt(2), p, o);
  EXPECT_EQ(names(specs), (std::vector<std::string>{
                              "_to_float16", "EmbeddingPipe", "<lambda>",
                              "ParallelTransformerLayerPipe", "ParallelTransformerLayerPipe",
                              "undo", "MixedFusedLayerNorm", "EmbeddingPipe", "float16_to_fp32"}));
  // Embedding: 1024 x 64 words + 32 x 64 positions = 67584. A layer: 12 h^2 + 13 h = 49984
  // (two LayerNorms 4h, QKV 3h^2 + 3h, proj h^2 + h, fc1 4h^2 + 4h, fc2 4h^2 + h). Final
  // LayerNorm 2h = 128.
  EXPECT_EQ(specs[1].params, 67584);
  EXPECT_EQ(specs[3].params, 49984);
  EXPECT_EQ(specs[6].params, 128);
  EXPECT_EQ(specs[7].params, 67584);
  EXPECT_EQ(specs[0].params + specs[2].params + specs[5].params + specs[8].params, 0);
}

TEST(MegatronDeepSpeedPipeline, MicrosoftSpecsUntiedRmsNorm) {
  ModelSpec m = small_gpt(2);
  m.tied_embeddings = false;
  m.normalization = Normalization::kRmsNorm;
  ParallelConfig p;
  p.tp = 2;
  p.etp = 2;
  DsModelOptions o;
  o.fork = MegatronDeepSpeedFork::kMicrosoft;
  const auto specs = gpt_model_pipe_specs(m, p, o);
  EXPECT_EQ(names(specs), (std::vector<std::string>{
                              "_to_float16", "EmbeddingPipe", "ParallelTransformerLayerPipe",
                              "ParallelTransformerLayerPipe", "MixedFusedRMSNorm", "LMHeadPipe"}));
  // LMHeadPipe: the vocabulary padded to 256 (128 x tp 2) is already 1024; 1024 / 2 x 64.
  EXPECT_EQ(specs.back().params, 1024 / 2 * 64);
}

// pp 3 on the small model (fp32: no cast at the end), specs
//   0 _to_float16, 1 EmbeddingPipe, 2 <lambda>, 3-6 layers, 7 undo, 8 LayerNorm, 9 EmbeddingPipe.
TEST(MegatronDeepSpeedPipeline, SmallModelUnderEachMethod) {
  const auto specs = gpt_model_pipe_specs(small_gpt(), ParallelConfig{}, DsModelOptions{});
  ASSERT_EQ(specs.size(), 10u);
  // uniform: 10 over 3, chunk 3, residual 1: 0 4 7 10 -> layers 3 | 4 5 6 | -: the last stage
  // holds undo, the norm and the output: 1, 3, 0 layers.
  auto parts = deepspeed_stage_boundaries(specs, "uniform", 3);
  EXPECT_EQ(parts, (std::vector<int64_t>{0, 4, 7, 10}));
  EXPECT_EQ(deepspeed_layout(specs, parts, "uniform").text, "Et|t*3|L");
  // parameters: [E t0 | t1 t2 | t3 norm E] = 117568, 99968, 117696 has the smallest spread
  // (17728); moving a layer to either end costs more than 49984.
  parts = deepspeed_stage_boundaries(specs, "parameters", 3);
  EXPECT_EQ(parts, (std::vector<int64_t>{0, 4, 6, 10}));
  EXPECT_EQ(deepspeed_layout(specs, parts, "parameters").text, "Et|t*2|tL");
  // type:transformer|embedding: weights 1 on 1, 3-6 and 9, two per stage: E t0 | t1 t2 | t3 E.
  parts = deepspeed_stage_boundaries(specs, "type:transformer|embedding", 3);
  EXPECT_EQ(deepspeed_layout(specs, parts, "type:transformer|embedding").text, "Et|t*2|tL");
  // type:transformer: weights 1 on 3-6 only, prefix sums 0 0 0 0 1 2 3 4 4 4 4. At (10, 3):
  // k = 5 ((5,2) = [1][1]) + [2] and k = 6 ((6,2) = [1][2], itself a tie of k = 4 and 5 won by
  // 5) + [1] both spread 1; k = 7..9 leave a last part of 0 (spread 2). k = 6 wins the tie:
  // 0 5 6 10 -> t0 t1 | t2 | t3.
  parts = deepspeed_stage_boundaries(specs, "type:transformer", 3);
  EXPECT_EQ(deepspeed_layout(specs, parts, "type:transformer").text, "Et*2|t|tL");
  // DeepSpeed lowers the method; the regex matches case-insensitively.
  EXPECT_EQ(deepspeed_stage_boundaries(specs, "TYPE:Transformer", 3), parts);
}

TEST(MegatronDeepSpeedPipeline, MethodsDeepSpeedRefusesNameTheFlag) {
  const auto specs = gpt_model_pipe_specs(small_gpt(), ParallelConfig{}, DsModelOptions{});
  auto message = [&](const std::string& method) {
    try {
      deepspeed_stage_boundaries(specs, method, 2);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_THAT(message("profile"), HasSubstr("--pp-partition-method 'profile': DeepSpeed's "
                                            "PipelineModule implements uniform, parameters and "
                                            "type:REGEX"));
  EXPECT_THAT(message("balanced"), HasSubstr("--pp-partition-method 'balanced'"));
  EXPECT_THAT(message("type:attention"),
              HasSubstr("--pp-partition-method 'type:attention': DeepSpeed finds no layer"));
  EXPECT_THAT(message("type:\\w+Pipe"), HasSubstr("syntax mplan does not reproduce"));
  EXPECT_THAT(message("type:(?i)transformer"), HasSubstr("syntax mplan does not reproduce"));
  EXPECT_THAT(message("type:transformer("), HasSubstr("is not a regex"));
  // A launch string expanded without being parsed again keeps its quotes: not a method.
  EXPECT_THAT(message("'type:transformer|embedding'"),
              HasSubstr("--pp-partition-method ''type:transformer|embedding''"));
}

TEST(MegatronDeepSpeedPipeline, EmbeddingOffTheFirstStageIsAnError) {
  // 2 layers (8 specs, fp32) over 8 stages, uniform: one spec each; stage 0 holds only
  // _to_float16 and the embedding lands on stage 1.
  const auto specs = gpt_model_pipe_specs(small_gpt(2), ParallelConfig{}, DsModelOptions{});
  const auto parts = deepspeed_stage_boundaries(specs, "uniform", 8);
  EXPECT_THAT([&] { deepspeed_layout(specs, parts, "uniform"); },
              ::testing::ThrowsMessage<Error>(HasSubstr(
                  "--pp-partition-method 'uniform': DeepSpeed puts the embedding on pipeline "
                  "stage 1 of 8")));
}

}  // namespace
}  // namespace mplan
