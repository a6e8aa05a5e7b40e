// Tensor layout: the parameter tensors of GPT, Llama and MoE layers in Megatron's order with
// their shards (worked out by hand for small shapes), the model index that seeds every layout's
// initialization alike, the tied embedding's flags under pipeline parallelism, and per-layer
// shard sums.
#include "src/model/tensor_layout.hpp"

#include <gtest/gtest.h>

#include "src/model/model_spec.hpp"
#include "tests/src/model/test_gpt.hpp"

namespace mplan {
namespace {

ParallelConfig tp(int64_t n) {
  ParallelConfig p;
  p.tp = n;
  return p;
}

TEST(TensorLayout, GptLayerInMegatronsOrderWithItsShards) {
  const ModelSpec m = test::gpt(2, 8, 4, 6, 16);  // h 8, 4 heads of 2, ffn 32
  const auto t = layer_tensors(m, tp(2), 1);
  ASSERT_EQ(t.size(), 12u);
  EXPECT_EQ(tensor_name(t[0]), "decoder.layers.1.input_layernorm.weight");
  EXPECT_EQ(tensor_name(t[2]), "decoder.layers.1.self_attention.linear_proj.weight");
  EXPECT_EQ(tensor_name(t[4]), "decoder.layers.1.self_attention.linear_qkv.weight");
  EXPECT_EQ(tensor_name(t[11]), "decoder.layers.1.mlp.linear_fc2.bias");
  // qkv: (3·8, 8) split by heads in each of Q, K, V; proj: columns; fc1: rows; fc2: columns.
  EXPECT_EQ(t[4].shard, ShardKind::kBlockRows);
  EXPECT_EQ(t[4].block_rows, (std::array<int64_t, 3>{8, 8, 8}));
  EXPECT_EQ(t[4].local_rows, 12);
  EXPECT_EQ(t[2].local_cols, 4);
  EXPECT_EQ(t[8].local_rows, 16);
  EXPECT_EQ(t[10].local_cols, 16);
  // Norms and row-parallel biases: whole on each rank, TP-reduced under sequence parallelism.
  for (int i : {0, 1, 3, 6, 7, 11}) {
    EXPECT_TRUE(t[static_cast<size_t>(i)].tp_duplicated) << tensor_name(t[static_cast<size_t>(i)]);
    EXPECT_TRUE(t[static_cast<size_t>(i)].sp_grad_reduce);
  }
  EXPECT_FALSE(t[5].sp_grad_reduce);  // the qkv bias is column-parallel
  // Layer 1's first tensor follows wte, wpe and layer 0's twelve.
  EXPECT_EQ(t[0].model_index, 2 + 12);
}

TEST(TensorLayout, LlamaLayerHasNoBiasesAGatedMlpAndGroupedQueries) {
  ModelSpec m = test::gpt(2, 8, 4, 6, 16);
  m.num_query_groups = 2;
  m.activation = Activation::kSwiglu;
  m.normalization = Normalization::kRmsNorm;
  m.position_embedding = PositionEmbedding::kRope;
  m.tied_embeddings = false;
  m.add_bias_linear = false;
  const auto t = layer_tensors(m, tp(2), 0);
  ASSERT_EQ(t.size(), 6u);                       // norm, proj, qkv, norm, fc1, fc2
  EXPECT_EQ(t[2].rows, 8 + 2 * 4);               // q (4 heads × 2) + k and v (2 groups × 2 each)
  EXPECT_EQ(t[2].shard, ShardKind::kBlockRows);  // Q by heads, K and V by query groups
  EXPECT_EQ(t[2].block_rows, (std::array<int64_t, 3>{8, 4, 4}));
  EXPECT_EQ(t[4].rows, 2 * 32);  // gate and up, each split over the ranks
  EXPECT_EQ(t[4].local_rows, 32);
  EXPECT_EQ(t[4].block_rows, (std::array<int64_t, 3>{32, 32, 0}));
  // Untied: an output layer at pp 1; no position embedding.
  const auto e = embedding_tensors(m, tp(2));
  ASSERT_EQ(e.size(), 1u);
  const auto o = output_tensors(m, tp(2));
  ASSERT_EQ(o.size(), 2u);  // RMSNorm weight, output layer
  EXPECT_EQ(tensor_name(o[1]), "output_layer.weight");
  EXPECT_FALSE(o[1].shared_embedding);
  EXPECT_EQ(o[1].model_index, 1 + 2 * 6 + 1);
}

TEST(TensorLayout, MoeLayerCountsRouterSharedAndLocalExperts) {
  ModelSpec m = test::gpt(2, 8, 4, 6, 16);
  m.add_bias_linear = false;
  m.moe = MoeSpec{.num_experts = 8,
                  .topk = 2,
                  .moe_ffn_hidden_size = 16,
                  .shared_expert_ffn_hidden_size = 8,
                  .layer_freq = 1};
  ParallelConfig p = tp(2);
  p.ep = 4;
  p.etp = 1;
  const auto t = layer_tensors(m, p, 0);
  LayerShard s = layer_shard(m, p, true);
  int64_t dense = 0, expert = 0;
  for (const auto& x : t) (x.expert ? expert : dense) += x.local_numel();
  EXPECT_EQ(s.dense, dense);
  EXPECT_EQ(s.expert, expert);
  // Two local experts of fc1 (16, 8) and fc2 (8, 16), whole (etp 1).
  EXPECT_EQ(expert, 2 * (16 * 8 + 8 * 16));
  // Router (8, 8) whole; shared expert fc1 (8, 8) and fc2 (8, 8) split over tp 2.
  const int64_t attn = (8 * 24 + 8 * 8) / 2, norms = 2 * 2 * 8;
  EXPECT_EQ(dense, norms + attn + 8 * 8 + (8 * 8 + 8 * 8) / 2);
}

TEST(TensorLayout, PipelineChunksKeepTheModelIndexAndShareTheTiedEmbedding) {
  const ModelSpec m = test::gpt(4, 8, 4, 6, 16);
  ParallelConfig one;
  std::vector<ParamTensor> whole = chunk_tensors(m, one, 0, 0);
  ParallelConfig p;
  p.pp = 2;
  p.vpp = 2;
  std::vector<ParamTensor> split;
  for (int64_t c = 0; c < 2; ++c)  // virtual stages 0, 1, 2, 3 in model order
    for (int64_t s = 0; s < 2; ++s)
      for (const ParamTensor& t : chunk_tensors(m, p, s, c)) split.push_back(t);
  // The same tensors in the same order, plus the last stage's copy of the embedding.
  ASSERT_EQ(split.size(), whole.size() + 1);
  const ParamTensor& copy = split.back();
  EXPECT_EQ(copy.role, TensorRole::kOutputWeight);
  EXPECT_TRUE(copy.shared_embedding && copy.shared_copy);
  EXPECT_EQ(copy.model_index, 0);  // initialized as the word embedding
  EXPECT_TRUE(split.front().shared_embedding);
  EXPECT_FALSE(split.front().shared_copy);
  for (size_t i = 0; i < whole.size(); ++i) {
    EXPECT_EQ(tensor_name(split[i]), tensor_name(whole[i]));
    EXPECT_EQ(split[i].model_index, whole[i].model_index);
    EXPECT_EQ(whole[i].model_index, static_cast<int64_t>(i));
  }
  EXPECT_FALSE(whole.front().shared_embedding);  // pp 1: nothing to share
}

}  // namespace
}  // namespace mplan
