// The parameter tensors of GPTModel (LanguageModelEmbedding, TransformerLayer with SelfAttention
// and MLP or MoELayer, final norm, output layer), their shards and their names.
#include "src/model/tensor_layout.hpp"

#include "src/common/error.hpp"
#include "src/model/layer_range.hpp"

namespace mplan {

namespace {

const char* role_suffix(TensorRole r) {
  switch (r) {
    case TensorRole::kWordEmbedding:
      return "embedding.word_embeddings.weight";
    case TensorRole::kPositionEmbedding:
      return "embedding.position_embeddings.weight";
    case TensorRole::kInputNormWeight:
      return "input_layernorm.weight";
    case TensorRole::kInputNormBias:
      return "input_layernorm.bias";
    case TensorRole::kProjWeight:
      return "self_attention.linear_proj.weight";
    case TensorRole::kProjBias:
      return "self_attention.linear_proj.bias";
    case TensorRole::kQkvWeight:
      return "self_attention.linear_qkv.weight";
    case TensorRole::kQkvBias:
      return "self_attention.linear_qkv.bias";
    case TensorRole::kMlpNormWeight:
      return "pre_mlp_layernorm.weight";
    case TensorRole::kMlpNormBias:
      return "pre_mlp_layernorm.bias";
    case TensorRole::kFc1Weight:
      return "mlp.linear_fc1.weight";
    case TensorRole::kFc1Bias:
      return "mlp.linear_fc1.bias";
    case TensorRole::kFc2Weight:
      return "mlp.linear_fc2.weight";
    case TensorRole::kFc2Bias:
      return "mlp.linear_fc2.bias";
    case TensorRole::kRouterWeight:
      return "mlp.router.weight";
    case TensorRole::kRouterBias:
      return "mlp.router.bias";
    case TensorRole::kSharedFc1Weight:
      return "mlp.shared_experts.linear_fc1.weight";
    case TensorRole::kSharedFc1Bias:
      return "mlp.shared_experts.linear_fc1.bias";
    case TensorRole::kSharedFc2Weight:
      return "mlp.shared_experts.linear_fc2.weight";
    case TensorRole::kSharedFc2Bias:
      return "mlp.shared_experts.linear_fc2.bias";
    case TensorRole::kExpertFc1Weight:
      return "mlp.experts.linear_fc1.weight";
    case TensorRole::kExpertFc1Bias:
      return "mlp.experts.linear_fc1.bias";
    case TensorRole::kExpertFc2Weight:
      return "mlp.experts.linear_fc2.weight";
    case TensorRole::kExpertFc2Bias:
      return "mlp.experts.linear_fc2.bias";
    case TensorRole::kFinalNormWeight:
      return "decoder.final_layernorm.weight";
    case TensorRole::kFinalNormBias:
      return "decoder.final_layernorm.bias";
    case TensorRole::kOutputWeight:
      return "output_layer.weight";
    case TensorRole::kQDownWeight:
      return "self_attention.linear_q_down_proj.weight";
    case TensorRole::kQDownBias:
      return "self_attention.linear_q_down_proj.bias";
    case TensorRole::kQNormWeight:
      return "self_attention.q_layernorm.weight";
    case TensorRole::kQUpWeight:
      return "self_attention.linear_q_up_proj.weight";
    case TensorRole::kQUpBias:
      return "self_attention.linear_q_up_proj.bias";
    case TensorRole::kQProjWeight:
      return "self_attention.linear_q_proj.weight";
    case TensorRole::kQProjBias:
      return "self_attention.linear_q_proj.bias";
    case TensorRole::kKvDownWeight:
      return "self_attention.linear_kv_down_proj.weight";
    case TensorRole::kKvDownBias:
      return "self_attention.linear_kv_down_proj.bias";
    case TensorRole::kKvNormWeight:
      return "self_attention.kv_layernorm.weight";
    case TensorRole::kKvUpWeight:
      return "self_attention.linear_kv_up_proj.weight";
    case TensorRole::kKvUpBias:
      return "self_attention.linear_kv_up_proj.bias";
  }
  return "?";
}

// Builds tensors with their shard sizes; model_index is filled in by the callers.
class Builder {
 public:
  explicit Builder(std::vector<ParamTensor>& out) : out_(out) {}

  ParamTensor& add(TensorRole role, int64_t layer, int ndim, int64_t rows, int64_t cols,
                   ShardKind shard, int64_t ways, InitKind init) {
    ParamTensor t;
    t.role = role;
    t.layer = layer;
    t.ndim = ndim;
    t.rows = rows;
    t.cols = cols;
    t.shard = shard;
    t.shard_ways = shard == ShardKind::kReplicated ? 1 : ways;
    t.init = init;
    t.weight_decay = ndim == 2;  // biases and norm weights are 1-D
    t.tp_duplicated = shard == ShardKind::kReplicated;
    t.local_rows = rows;
    t.local_cols = cols;
    if (shard == ShardKind::kRows || shard == ShardKind::kBlockRows) {
      MPLAN_CHECK(rows % ways == 0, tensor_name(t), ": rows ", rows, " by ", ways);
      t.local_rows = rows / ways;
    } else if (shard == ShardKind::kCols) {
      MPLAN_CHECK(cols % ways == 0, tensor_name(t), ": cols ", cols, " by ", ways);
      t.local_cols = cols / ways;
    }
    out_.push_back(t);
    return out_.back();
  }

 private:
  std::vector<ParamTensor>& out_;
};

void add_norm(Builder& b, const ModelSpec& m, TensorRole weight, TensorRole bias, int64_t layer) {
  b.add(weight, layer, 1, m.hidden_size, 1, ShardKind::kReplicated, 1, InitKind::kOne)
      .sp_grad_reduce = true;
  if (m.normalization == Normalization::kLayerNorm)
    b.add(bias, layer, 1, m.hidden_size, 1, ShardKind::kReplicated, 1, InitKind::kZero)
        .sp_grad_reduce = true;
}

// fc1 (column-parallel, 2·ffn rows with SwiGLU) and fc2 (row-parallel) of one MLP of width ffn.
void add_mlp(Builder& b, const ModelSpec& m, int64_t layer, int64_t ffn, int64_t ways,
             TensorRole fc1_w, TensorRole fc1_b, TensorRole fc2_w, TensorRole fc2_b, int64_t copies,
             bool expert) {
  const int64_t glu = m.activation == Activation::kSwiglu ? 2 : 1;
  const int64_t h = m.hidden_size;
  auto mark = [&](ParamTensor& t) {
    t.copies = copies;
    t.expert = expert;
    return &t;
  };
  // SwiGLU: [gate; up], each half split over the ranks (Megatron's fc1 layout).
  const ShardKind fc1_shard = glu == 2 ? ShardKind::kBlockRows : ShardKind::kRows;
  auto halves = [&](ParamTensor& t) {
    if (glu == 2) t.block_rows = {ffn, ffn, 0};
    return &t;
  };
  mark(*halves(b.add(fc1_w, layer, 2, glu * ffn, h, fc1_shard, ways, InitKind::kNormal)));
  if (m.add_bias_linear)
    mark(*halves(b.add(fc1_b, layer, 1, glu * ffn, 1, fc1_shard, ways, InitKind::kZero)));
  mark(b.add(fc2_w, layer, 2, h, ffn, ShardKind::kCols, ways, InitKind::kScaledNormal));
  if (m.add_bias_linear) {
    ParamTensor* t = mark(b.add(fc2_b, layer, 1, h, 1, ShardKind::kReplicated, 1, InitKind::kZero));
    t->sp_grad_reduce = !expert;
  }
}

// Multi-latent attention's projections (megatron/core/transformer/multi_latent_attention.py,
// MLASelfAttention): the down projections and latent norms whole on every tensor-parallel rank
// (their gradients summed over tp under sequence parallelism, as the norms'), the up projections
// split by heads. The latent norms carry a weight only (RMSNorm, as DeepSeek-V2 / V3 use).
void add_mla(Builder& b, const ModelSpec& m, const ParallelConfig& p, int64_t layer) {
  const MlaSpec& a = *m.mla;
  const int64_t h = m.hidden_size, heads = m.num_attention_heads;
  const int64_t q_out = heads * (a.qk_head_dim + a.qk_pos_emb_head_dim);
  const int64_t kv_out = heads * (a.qk_head_dim + a.v_head_dim);
  auto dup = [&](TensorRole r, int ndim, int64_t rows, int64_t cols, InitKind init) {
    b.add(r, layer, ndim, rows, cols, ShardKind::kReplicated, 1, init).sp_grad_reduce = true;
  };
  auto col = [&](TensorRole w, TensorRole bias, int64_t rows, int64_t cols) {
    b.add(w, layer, 2, rows, cols, ShardKind::kRows, p.tp, InitKind::kNormal);
    if (m.add_bias_linear) b.add(bias, layer, 1, rows, 1, ShardKind::kRows, p.tp, InitKind::kZero);
  };
  if (a.q_lora_rank > 0) {
    dup(TensorRole::kQDownWeight, 2, a.q_lora_rank, h, InitKind::kNormal);
    if (m.add_bias_linear) dup(TensorRole::kQDownBias, 1, a.q_lora_rank, 1, InitKind::kZero);
    dup(TensorRole::kQNormWeight, 1, a.q_lora_rank, 1, InitKind::kOne);
    col(TensorRole::kQUpWeight, TensorRole::kQUpBias, q_out, a.q_lora_rank);
  } else {
    col(TensorRole::kQProjWeight, TensorRole::kQProjBias, q_out, h);
  }
  const int64_t kv_down = a.kv_lora_rank + a.qk_pos_emb_head_dim;
  dup(TensorRole::kKvDownWeight, 2, kv_down, h, InitKind::kNormal);
  if (m.add_bias_linear) dup(TensorRole::kKvDownBias, 1, kv_down, 1, InitKind::kZero);
  dup(TensorRole::kKvNormWeight, 1, a.kv_lora_rank, 1, InitKind::kOne);
  col(TensorRole::kKvUpWeight, TensorRole::kKvUpBias, kv_out, a.kv_lora_rank);
}

void build_layer(const ModelSpec& m, const ParallelConfig& p, bool moe, int64_t layer,
                 std::vector<ParamTensor>& out) {
  Builder b(out);
  const int64_t h = m.hidden_size;
  const int64_t q = (m.mla ? m.mla->v_head_dim : m.kv_channels) * m.num_attention_heads;
  const int64_t kv = m.kv_channels * m.num_query_groups;
  // Q, K and V as three row blocks, each sharded by heads (K and V by query groups), so a rank's
  // output is its heads' Q, K, V side by side. (Megatron interleaves them per query group; the
  // shard sizes are the same.)
  const ShardKind qkv_shard = ShardKind::kBlockRows;
  add_norm(b, m, TensorRole::kInputNormWeight, TensorRole::kInputNormBias, layer);
  b.add(TensorRole::kProjWeight, layer, 2, h, q, ShardKind::kCols, p.tp, InitKind::kScaledNormal);
  if (m.add_bias_linear)
    b.add(TensorRole::kProjBias, layer, 1, h, 1, ShardKind::kReplicated, 1, InitKind::kZero)
        .sp_grad_reduce = true;
  if (m.mla) {
    add_mla(b, m, p, layer);
  } else {
    b.add(TensorRole::kQkvWeight, layer, 2, q + 2 * kv, h, qkv_shard, p.tp, InitKind::kNormal)
        .block_rows = {q, kv, kv};
    if (m.add_bias_linear)
      b.add(TensorRole::kQkvBias, layer, 1, q + 2 * kv, 1, qkv_shard, p.tp, InitKind::kZero)
          .block_rows = {q, kv, kv};
  }
  add_norm(b, m, TensorRole::kMlpNormWeight, TensorRole::kMlpNormBias, layer);
  if (!moe) {
    add_mlp(b, m, layer, m.ffn_hidden_size, p.tp, TensorRole::kFc1Weight, TensorRole::kFc1Bias,
            TensorRole::kFc2Weight, TensorRole::kFc2Bias, 1, false);
    return;
  }
  const MoeSpec& e = *m.moe;
  b.add(TensorRole::kRouterWeight, layer, 2, e.num_experts, h, ShardKind::kReplicated, 1,
        InitKind::kNormal)
      .sp_grad_reduce = true;
  if (m.add_bias_linear)
    b.add(TensorRole::kRouterBias, layer, 1, e.num_experts, 1, ShardKind::kReplicated, 1,
          InitKind::kZero)
        .sp_grad_reduce = true;
  if (e.shared_expert_ffn_hidden_size > 0)
    add_mlp(b, m, layer, e.shared_expert_ffn_hidden_size, p.tp, TensorRole::kSharedFc1Weight,
            TensorRole::kSharedFc1Bias, TensorRole::kSharedFc2Weight, TensorRole::kSharedFc2Bias, 1,
            false);
  MPLAN_CHECK(e.num_experts % p.ep == 0, "ep ", p.ep, " does not divide ", e.num_experts,
              " experts (validate() first)");
  add_mlp(b, m, layer, e.moe_ffn_hidden_size, p.etp, TensorRole::kExpertFc1Weight,
          TensorRole::kExpertFc1Bias, TensorRole::kExpertFc2Weight, TensorRole::kExpertFc2Bias,
          e.num_experts / p.ep, true);
}

// Tensors per layer of each kind (the same on every rank; used for model indices).
int64_t tensors_per_layer(const ModelSpec& m, bool moe) {
  std::vector<ParamTensor> v;
  build_layer(m, ParallelConfig{}, moe, 0, v);
  return static_cast<int64_t>(v.size());
}

// Model index of the first tensor of layer `layer`.
int64_t first_index_of_layer(const ModelSpec& m, int64_t layer) {
  const int64_t base = m.position_embedding == PositionEmbedding::kLearned ? 2 : 1;
  int64_t moe_before = 0;
  if (m.moe)
    for (int64_t l = 0; l < layer; ++l) moe_before += m.is_moe_layer(l) ? 1 : 0;
  const int64_t dense_before = layer - moe_before;
  int64_t idx = base + dense_before * tensors_per_layer(m, false);
  if (moe_before > 0) idx += moe_before * tensors_per_layer(m, true);
  return idx;
}

}  // namespace

std::string tensor_name(const ParamTensor& t) {
  if (t.layer < 0) return role_suffix(t.role);
  return cat("decoder.layers.", t.layer, ".", role_suffix(t.role));
}

std::vector<ParamTensor> layer_tensors(const ModelSpec& m, const ParallelConfig& p, int64_t layer) {
  MPLAN_CHECK(layer >= 0 && layer < m.num_layers, "layer ", layer, " of ", m.num_layers);
  std::vector<ParamTensor> out;
  build_layer(m, p, m.is_moe_layer(layer), layer, out);
  int64_t idx = first_index_of_layer(m, layer);
  for (ParamTensor& t : out) t.model_index = idx++;
  return out;
}

std::vector<ParamTensor> embedding_tensors(const ModelSpec& m, const ParallelConfig& p) {
  std::vector<ParamTensor> out;
  Builder b(out);
  const int64_t h = m.hidden_size, vocab = m.padded_vocab_size(p.tp);
  ParamTensor& wte =
      b.add(TensorRole::kWordEmbedding, -1, 2, vocab, h, ShardKind::kRows, p.tp, InitKind::kNormal);
  wte.model_index = 0;
  wte.shared_embedding = m.tied_embeddings && p.pp > 1;
  if (m.position_embedding == PositionEmbedding::kLearned)
    b.add(TensorRole::kPositionEmbedding, -1, 2, m.max_position_embeddings, h,
          ShardKind::kReplicated, 1, InitKind::kNormal)
        .model_index = 1;
  return out;
}

std::vector<ParamTensor> output_tensors(const ModelSpec& m, const ParallelConfig& p) {
  std::vector<ParamTensor> out;
  Builder b(out);
  int64_t idx = first_index_of_layer(m, m.num_layers);
  add_norm(b, m, TensorRole::kFinalNormWeight, TensorRole::kFinalNormBias, -1);
  for (ParamTensor& t : out) t.model_index = idx++;
  if (!m.tied_embeddings || p.pp > 1) {
    ParamTensor& o = b.add(TensorRole::kOutputWeight, -1, 2, m.padded_vocab_size(p.tp),
                           m.hidden_size, ShardKind::kRows, p.tp, InitKind::kNormal);
    o.shared_embedding = o.shared_copy = m.tied_embeddings;
    o.model_index = m.tied_embeddings ? 0 : idx;
  }
  return out;
}

std::vector<ParamTensor> chunk_tensors(const ModelSpec& m, const ParallelConfig& p, int64_t pp_rank,
                                       int64_t chunk) {
  MPLAN_CHECK(pp_rank >= 0 && pp_rank < p.pp && chunk >= 0 && chunk < p.vpp, "chunk ", chunk,
              " of pp rank ", pp_rank, " (pp ", p.pp, ", vpp ", p.vpp, ")");
  std::vector<ParamTensor> out;
  if (pp_rank == 0 && chunk == 0) out = embedding_tensors(m, p);
  const LayerRange range = chunk_layers(m.num_layers, p, pp_rank, chunk);
  if (range.count > 0) {
    int64_t idx = first_index_of_layer(m, range.first);
    for (int64_t l = range.first; l < range.first + range.count; ++l) {
      const size_t at = out.size();
      build_layer(m, p, m.is_moe_layer(l), l, out);
      for (size_t i = at; i < out.size(); ++i) out[i].model_index = idx++;
    }
  }
  if (pp_rank == p.pp - 1 && chunk == p.vpp - 1) {
    std::vector<ParamTensor> tail = output_tensors(m, p);
    out.insert(out.end(), tail.begin(), tail.end());
  }
  return out;
}

LayerShard layer_shard(const ModelSpec& m, const ParallelConfig& p, bool moe) {
  MPLAN_CHECK(!moe || m.moe, "an MoE layer of a dense model");
  std::vector<ParamTensor> v;
  build_layer(m, p, moe, 0, v);
  LayerShard s;
  for (const ParamTensor& t : v) {
    (t.expert ? s.expert : s.dense) += t.local_numel();
    if (is_gemm_weight(t.role)) (t.expert ? s.gemm_expert : s.gemm_dense) += t.local_numel();
  }
  return s;
}

bool is_gemm_weight(TensorRole r) {
  switch (r) {
    case TensorRole::kQkvWeight:
    case TensorRole::kProjWeight:
    case TensorRole::kFc1Weight:
    case TensorRole::kFc2Weight:
    case TensorRole::kSharedFc1Weight:
    case TensorRole::kSharedFc2Weight:
    case TensorRole::kExpertFc1Weight:
    case TensorRole::kExpertFc2Weight:
    case TensorRole::kQDownWeight:
    case TensorRole::kQUpWeight:
    case TensorRole::kQProjWeight:
    case TensorRole::kKvDownWeight:
    case TensorRole::kKvUpWeight:
      return true;
    default:
      return false;
  }
}

}  // namespace mplan
