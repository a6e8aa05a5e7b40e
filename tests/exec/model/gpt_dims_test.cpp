// gpt_dims(): shard sizes of a rank and the models the executor refuses, each naming its field.
#include "exec/model/gpt_dims.hpp"

#include <gtest/gtest.h>

#include "src/common/error.hpp"

namespace mplan::exec {
namespace {

ModelSpec reference() { return load_model("gpt3-1.3b"); }

TEST(GptDims, ShardsOfTheReferenceModel) {
  GptDims d = gpt_dims(reference(), 4, 4, 3, true);
  EXPECT_EQ(d.head_dim, 128);
  EXPECT_EQ(d.heads_local(), 4);
  EXPECT_EQ(d.ffn_local(), 2048);
  EXPECT_EQ(d.vocab, 32256);  // Megatron pads 32000 to a multiple of 128 · 4
  EXPECT_EQ(d.vocab_local(), 8064);
  EXPECT_EQ(d.vocab_start(), 3 * 8064);
  EXPECT_EQ(d.seq_local(), 512);
  EXPECT_EQ(d.seq_offset(), 1536);
  EXPECT_EQ(d.tokens(), 8192);
  EXPECT_EQ(d.tokens_local(), 2048);
  GptDims n = gpt_dims(reference(), 4, 1, 0, true);  // sequence parallel needs tp > 1
  EXPECT_FALSE(n.sp());
  EXPECT_EQ(n.seq_local(), 2048);
  EXPECT_EQ(n.vocab, 32000);
}

void expect_refused(ModelSpec m, const std::string& field) {
  try {
    gpt_dims(m, 1, 1, 0, false);
    ADD_FAILURE() << field << " accepted";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind(field + ":", 0), 0u) << e.what();
  }
}

TEST(GptDims, LlamaFamilyShards) {
  // llama3-8b at tp 4: 32 heads and 8 query groups of 128, SwiGLU ffn 14336, RoPE base 500000.
  const GptDims d = gpt_dims(load_model("llama3-8b"), 1, 4, 1, true);
  EXPECT_TRUE(d.gqa() && d.gated && d.rmsnorm && d.rope && !d.bias);
  EXPECT_EQ(d.heads_local(), 8);
  EXPECT_EQ(d.groups_local(), 2);
  EXPECT_EQ(d.qkv_heads_local(), 12);
  EXPECT_EQ(d.fc1_local(), 2 * 3584);
  EXPECT_EQ(d.rot_dim, 128);
  EXPECT_EQ(d.rotary_base, 500000.0f);
  ModelSpec half = load_model("llama3-8b");
  half.rotary_percent = 0.5;
  EXPECT_EQ(gpt_dims(half, 1, 1, 0, false).rot_dim, 64);
}

TEST(GptDims, RefusesModelsOfAnotherKind) {
  expect_refused(load_model("mixtral-8x7b"), "model.moe");
  ModelSpec m = load_model("llama3-8b");
  m.rotary_percent = 0.2890625;  // int(37.0) dims, odd: validate()'s rule, an invariant here
  EXPECT_THROW(gpt_dims(m, 1, 1, 0, false), InternalError);
  m.rotary_percent = 0.3;  // int(38.4) = 38, as Megatron truncates
  EXPECT_EQ(gpt_dims(m, 1, 1, 0, false).rot_dim, 38);
  // 16 heads by tp 3: validate()'s rule, a broken invariant here.
  EXPECT_THROW(gpt_dims(reference(), 1, 3, 0, false), InternalError);
}

}  // namespace
}  // namespace mplan::exec
