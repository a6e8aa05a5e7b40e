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

TEST(GptDims, RefusesModelsOfAnotherKind) {
  ModelSpec m = reference();
  m.activation = Activation::kSwiglu;
  expect_refused(m, "model.activation");
  m = reference();
  m.normalization = Normalization::kRmsNorm;
  expect_refused(m, "model.normalization");
  m = reference();
  m.position_embedding = PositionEmbedding::kRope;
  expect_refused(m, "model.position_embedding");
  m = reference();
  m.tied_embeddings = false;
  expect_refused(m, "model.tied_embeddings");
  m = reference();
  m.num_query_groups = 4;
  expect_refused(m, "model.num_query_groups");
  expect_refused(load_model("mixtral-8x7b"), "model.activation");
  // 16 heads by tp 3: validate()'s rule, a broken invariant here.
  EXPECT_THROW(gpt_dims(reference(), 1, 3, 0, false), InternalError);
}

}  // namespace
}  // namespace mplan::exec
