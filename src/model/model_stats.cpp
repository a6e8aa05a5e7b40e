// Parameter counts from the modules Megatron-LM's GPTModel builds (LanguageModelEmbedding,
// TransformerLayer with SelfAttention / MLP / MoELayer, final norm, output layer) and the FLOP
// formulas of Megatron's training.py and of the SC'21 and MLSys'23 papers.
#include "src/model/model_stats.hpp"

#include "src/common/error.hpp"
#include "src/model/layer_range.hpp"

namespace mplan {

namespace {

// One linear layer's pieces, so a shard can split the right ones.
struct Mlp {
  int64_t fc1_weight = 0;  // hidden -> ffn (x2 for SwiGLU: gate and up), column-parallel
  int64_t fc1_bias = 0;    // column-parallel bias
  int64_t fc2_weight = 0;  // ffn -> hidden, row-parallel
  int64_t fc2_bias = 0;    // row-parallel bias: whole on every rank
  int64_t total() const { return fc1_weight + fc1_bias + fc2_weight + fc2_bias; }
  // The part one of `n` tensor-parallel ranks holds.
  int64_t shard(int64_t n) const { return (fc1_weight + fc1_bias + fc2_weight) / n + fc2_bias; }
};

Mlp mlp_of(const ModelSpec& m, int64_t ffn) {
  const int64_t glu = m.activation == Activation::kSwiglu ? 2 : 1;
  const int64_t bias = m.add_bias_linear ? 1 : 0;
  return {m.hidden_size * ffn * glu, bias * ffn * glu, ffn * m.hidden_size, bias * m.hidden_size};
}

struct Attention {
  int64_t qkv_weight = 0;  // hidden -> (heads + 2 groups) x kv_channels, column-parallel
  int64_t qkv_bias = 0;
  int64_t proj_weight = 0;  // heads x kv_channels -> hidden, row-parallel
  int64_t proj_bias = 0;    // whole on every rank
  int64_t total() const { return qkv_weight + qkv_bias + proj_weight + proj_bias; }
  int64_t shard(int64_t n) const { return (qkv_weight + qkv_bias + proj_weight) / n + proj_bias; }
};

Attention attention_of(const ModelSpec& m) {
  const int64_t q = m.kv_channels * m.num_attention_heads;
  const int64_t kv = m.kv_channels * m.num_query_groups;
  const int64_t bias = m.add_bias_linear ? 1 : 0;
  return {m.hidden_size * (q + 2 * kv), bias * (q + 2 * kv), q * m.hidden_size,
          bias * m.hidden_size};
}

int64_t norm_of(const ModelSpec& m) {
  return (m.normalization == Normalization::kLayerNorm ? 2 : 1) * m.hidden_size;
}

int64_t router_of(const ModelSpec& m) {
  return m.moe->num_experts * m.hidden_size + (m.add_bias_linear ? m.moe->num_experts : 0);
}

}  // namespace

LayerParams layer_params(const ModelSpec& m, int64_t layer) {
  MPLAN_CHECK(layer >= 0 && layer < m.num_layers, "layer ", layer, " of ", m.num_layers);
  LayerParams l;
  l.norms = 2 * norm_of(m);
  l.attention = attention_of(m).total();
  if (!m.is_moe_layer(layer)) {
    l.mlp = mlp_of(m, m.ffn_hidden_size).total();
    return l;
  }
  const MoeSpec& e = *m.moe;
  l.router = router_of(m);
  if (e.shared_expert_ffn_hidden_size > 0)
    l.shared_experts = mlp_of(m, e.shared_expert_ffn_hidden_size).total();
  const int64_t one_expert = mlp_of(m, e.moe_ffn_hidden_size).total();
  l.experts = e.num_experts * one_expert;
  l.active_experts = e.topk * one_expert;
  return l;
}

ParamCounts count_params(const ModelSpec& m, int64_t tp) {
  ParamCounts c;
  const int64_t vocab = m.padded_vocab_size(tp);
  c.word_embedding = vocab * m.hidden_size;
  if (m.position_embedding == PositionEmbedding::kLearned)
    c.position_embedding = m.max_position_embeddings * m.hidden_size;
  for (int64_t i = 0; i < m.num_layers; ++i) {
    LayerParams l = layer_params(m, i);
    c.transformer_layers += l.total();
    c.expert += l.experts;
    c.active_expert += l.active_experts;
  }
  c.final_norm = norm_of(m);
  if (!m.tied_embeddings) c.output_layer = vocab * m.hidden_size;
  return c;
}

namespace {

// Stage `pp_rank` with tensor-parallel split `tp`, expert split `ep` x `etp` (1, 1, 1: whole).
StageParams stage_shard(const ModelSpec& m, const ParallelConfig& p, int64_t pp_rank, int64_t tp,
                        int64_t ep, int64_t etp) {
  MPLAN_CHECK(pp_rank >= 0 && pp_rank < p.pp, "pp_rank ", pp_rank, " of pp ", p.pp);
  StageParams s;
  const int64_t norm = norm_of(m);
  const int64_t attention = attention_of(m).shard(tp);
  const int64_t dense_mlp = mlp_of(m, m.ffn_hidden_size).shard(tp);
  for (const LayerRange& r : stage_chunks(m.num_layers, p, pp_rank)) {
    s.num_layers += r.count;
    for (int64_t i = r.first; i < r.first + r.count; ++i) {
      s.non_expert += 2 * norm + attention;
      if (!m.is_moe_layer(i)) {
        s.non_expert += dense_mlp;
        continue;
      }
      const MoeSpec& e = *m.moe;
      s.non_expert += router_of(m);
      if (e.shared_expert_ffn_hidden_size > 0)
        s.non_expert += mlp_of(m, e.shared_expert_ffn_hidden_size).shard(tp);
      s.expert += e.num_experts / ep * mlp_of(m, e.moe_ffn_hidden_size).shard(etp);
    }
  }
  const int64_t vocab_shard = m.padded_vocab_size(p.tp) / tp * m.hidden_size;
  if (pp_rank == 0) {
    s.embedding += vocab_shard;
    if (m.position_embedding == PositionEmbedding::kLearned)
      s.embedding += m.max_position_embeddings * m.hidden_size;
  }
  if (pp_rank == p.pp - 1) {
    s.non_expert += norm;  // final_layernorm
    // Untied: the output layer. Tied with pp > 1: the last stage's copy of the word embedding.
    if (!m.tied_embeddings || p.pp > 1) s.embedding += vocab_shard;
  }
  s.non_expert += s.embedding;
  return s;
}

}  // namespace

StageParams stage_params(const ModelSpec& m, const ParallelConfig& p, int64_t pp_rank) {
  return stage_shard(m, p, pp_rank, 1, 1, 1);
}

StageParams rank_params(const ModelSpec& m, const ParallelConfig& p, int64_t pp_rank) {
  MPLAN_CHECK((m.ffn_hidden_size % p.tp == 0 || m.num_moe_layers() == m.num_layers) &&
                  m.num_query_groups % p.tp == 0,
              "tp ", p.tp, " does not divide the model (validate() first)");
  if (m.moe)
    MPLAN_CHECK(m.moe->num_experts % p.ep == 0 && m.moe->moe_ffn_hidden_size % p.etp == 0 &&
                    m.moe->shared_expert_ffn_hidden_size % p.tp == 0,
                "ep ", p.ep, " / etp ", p.etp, " do not divide the experts (validate() first)");
  return stage_shard(m, p, pp_rank, p.tp, p.ep, p.etp);
}

double megatron_flops(const ModelSpec& m, int64_t batch_size, int64_t tp) {
  // Variable names follow transformer_flops() in megatron/training/training.py.
  const double h = static_cast<double>(m.hidden_size);
  const double s = static_cast<double>(m.seq_length);
  const double tokens = static_cast<double>(batch_size) * s;  // BSHD: batch x s
  const double seqlen_squared_sum = static_cast<double>(batch_size) * s * s;
  const double num_layers = static_cast<double>(m.num_layers);
  const double num_moe_layers = static_cast<double>(m.num_moe_layers());
  const double num_dense_layers = num_layers - num_moe_layers;
  const double experts_routed_to = m.moe ? static_cast<double>(m.moe->topk) : 0.0;
  const double moe_ffn = m.moe ? static_cast<double>(m.moe->moe_ffn_hidden_size) : 0.0;
  const double shared_ffn = m.moe ? static_cast<double>(m.moe->shared_expert_ffn_hidden_size) : 0.0;
  const double fwd_bwd = 3;  // forward, backward wgrad, backward dgrad
  const double fma = 2;      // a multiply-add is two FLOPs
  const double ffn_factor = m.activation == Activation::kSwiglu ? 3 : 2;
  const double q = static_cast<double>(m.kv_channels * m.num_attention_heads);
  const double kv = static_cast<double>(m.kv_channels * m.num_query_groups);
  const double self_attn_term = fwd_bwd * fma * (h * (q + kv + kv) + q * h);
  const double self_attn_core_term = fwd_bwd * fma * q / 2 * 2;  // causal: half the scores
  const double vocab = static_cast<double>(m.padded_vocab_size(tp));
  return tokens * (fwd_bwd * fma * h *
                       (static_cast<double>(m.ffn_hidden_size) * ffn_factor * num_dense_layers +
                        moe_ffn * experts_routed_to * ffn_factor * num_moe_layers +
                        shared_ffn * ffn_factor * num_moe_layers) +
                   self_attn_term * num_layers + fwd_bwd * fma * h * vocab) +
         seqlen_squared_sum * self_attn_core_term * num_layers;
}

namespace {
struct PaperShape {
  double b, s, l, h, v;
};
PaperShape paper_shape(const ModelSpec& m, int64_t batch_size) {
  return {static_cast<double>(batch_size), static_cast<double>(m.seq_length),
          static_cast<double>(m.num_layers), static_cast<double>(m.hidden_size),
          static_cast<double>(m.vocab_size)};
}
}  // namespace

double sc21_eq3_flops(const ModelSpec& m, int64_t batch_size) {
  auto [b, s, l, h, v] = paper_shape(m, batch_size);
  return 96 * b * s * l * h * h * (1 + s / (6 * h) + v / (16 * l * h));
}

double korthikanti_model_flops(const ModelSpec& m, int64_t batch_size) {
  auto [b, s, l, h, v] = paper_shape(m, batch_size);
  return 72 * b * s * l * h * h * (1 + s / (6 * h) + v / (12 * l * h));
}

double korthikanti_selective_hardware_flops(const ModelSpec& m, int64_t batch_size) {
  auto [b, s, l, h, v] = paper_shape(m, batch_size);
  return 72 * b * s * l * h * h * (1 + s / (3 * h) + v / (12 * l * h));
}

}  // namespace mplan
