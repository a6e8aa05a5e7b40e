// Parameter counts from the modules Megatron-LM's GPTModel builds (LanguageModelEmbedding,
// TransformerLayer with SelfAttention / MLP / MoELayer, final norm, output layer) and the FLOP
// formulas of Megatron's training.py and of the SC'21 and MLSys'23 papers.
#include "src/model/model_stats.hpp"

#include "src/common/error.hpp"
#include "src/model/layer_range.hpp"
#include "src/model/tensor_layout.hpp"

namespace mplan {

LayerParams layer_params(const ModelSpec& m, int64_t layer) {
  MPLAN_CHECK(layer >= 0 && layer < m.num_layers, "layer ", layer, " of ", m.num_layers);
  LayerParams l;
  int64_t one_expert = 0;
  for (const ParamTensor& t : layer_tensors(m, ParallelConfig{}, layer)) {
    switch (t.role) {
      case TensorRole::kInputNormWeight:
      case TensorRole::kInputNormBias:
      case TensorRole::kMlpNormWeight:
      case TensorRole::kMlpNormBias:
        l.norms += t.numel();
        break;
      case TensorRole::kProjWeight:
      case TensorRole::kProjBias:
      case TensorRole::kQkvWeight:
      case TensorRole::kQkvBias:
      case TensorRole::kQDownWeight:
      case TensorRole::kQDownBias:
      case TensorRole::kQNormWeight:
      case TensorRole::kQUpWeight:
      case TensorRole::kQUpBias:
      case TensorRole::kQProjWeight:
      case TensorRole::kQProjBias:
      case TensorRole::kKvDownWeight:
      case TensorRole::kKvDownBias:
      case TensorRole::kKvNormWeight:
      case TensorRole::kKvUpWeight:
      case TensorRole::kKvUpBias:
        l.attention += t.numel();
        break;
      case TensorRole::kFc1Weight:
      case TensorRole::kFc1Bias:
      case TensorRole::kFc2Weight:
      case TensorRole::kFc2Bias:
        l.mlp += t.numel();
        break;
      case TensorRole::kRouterWeight:
      case TensorRole::kRouterBias:
        l.router += t.numel();
        break;
      case TensorRole::kSharedFc1Weight:
      case TensorRole::kSharedFc1Bias:
      case TensorRole::kSharedFc2Weight:
      case TensorRole::kSharedFc2Bias:
        l.shared_experts += t.numel();
        break;
      default:
        MPLAN_CHECK(t.expert, "unexpected tensor ", tensor_name(t), " in a layer");
        one_expert += t.numel();
        l.experts += t.local_numel();  // ep = etp = 1: every expert, whole
        break;
    }
  }
  if (m.is_moe_layer(layer)) l.active_experts = m.moe->topk * one_expert;
  return l;
}

ParamCounts count_params(const ModelSpec& m, int64_t tp) {
  ParamCounts c;
  ParallelConfig p;
  p.tp = tp;  // the vocabulary is padded for tp; the counts are whole tensors
  for (const ParamTensor& t : embedding_tensors(m, p))
    (t.role == TensorRole::kWordEmbedding ? c.word_embedding : c.position_embedding) += t.numel();
  for (int64_t i = 0; i < m.num_layers; ++i) {
    LayerParams l = layer_params(m, i);
    c.transformer_layers += l.total();
    c.expert += l.experts;
    c.active_expert += l.active_experts;
  }
  for (const ParamTensor& t : output_tensors(m, p))
    (t.role == TensorRole::kOutputWeight ? c.output_layer : c.final_norm) += t.numel();
  if (m.mtp_num_layers > 0) {
    const MtpParams b = mtp_block_params(m);
    c.mtp = m.mtp_num_layers * b.total();
    c.expert += m.mtp_num_layers * b.layer.experts;
    c.active_expert += m.mtp_num_layers * b.layer.active_experts;
  }
  return c;
}

MtpParams mtp_block_params(const ModelSpec& m) {
  // megatron/core/transformer/multi_token_prediction.py: enorm, hnorm and final_layernorm of the
  // model's normalization; eh_proj a column-parallel linear without bias.
  MtpParams b;
  const int64_t h = m.hidden_size;
  b.norms = 3 * h * (m.normalization == Normalization::kLayerNorm ? 2 : 1);
  b.eh_proj = 2 * h * h;
  b.layer = layer_params(m, m.num_layers - 1);
  return b;
}

namespace {

// Stage `pp_rank`: its tensors (src/model/tensor_layout) summed, sharded as rank `p` holds them or
// whole (`sharded` false: one copy of every tensor, all experts, the vocabulary padded for p.tp).
StageParams stage_shard(const ModelSpec& m, const ParallelConfig& p, int64_t pp_rank,
                        bool sharded) {
  MPLAN_CHECK(pp_rank >= 0 && pp_rank < p.pp, "pp_rank ", pp_rank, " of pp ", p.pp);
  ParallelConfig whole = p;
  whole.tp = whole.ep = whole.etp = 1;
  const ParallelConfig& lp = sharded ? p : whole;
  const bool any_dense = m.num_moe_layers() < m.num_layers;
  const LayerShard dense = any_dense ? layer_shard(m, lp, false) : LayerShard{};
  const LayerShard moe = m.moe ? layer_shard(m, lp, true) : LayerShard{};
  StageParams s;
  for (const LayerRange& r : stage_chunks(m.num_layers, p, pp_rank)) {
    s.num_layers += r.count;
    for (int64_t i = r.first; i < r.first + r.count; ++i) {
      const LayerShard& l = m.is_moe_layer(i) ? moe : dense;
      s.non_expert += l.dense;
      s.expert += l.expert;
    }
  }
  auto size = [&](const ParamTensor& t) { return sharded ? t.local_numel() : t.numel(); };
  if (pp_rank == 0)
    for (const ParamTensor& t : embedding_tensors(m, p)) s.embedding += size(t);
  if (pp_rank == p.pp - 1)
    for (const ParamTensor& t : output_tensors(m, p))
      (t.role == TensorRole::kOutputWeight ? s.embedding : s.non_expert) += size(t);
  if (pp_rank == p.pp - 1 && m.mtp_num_layers > 0) {
    // Multi-token prediction on the last stage: each block's norms (whole), eh_proj (split over
    // tp) and transformer layer; with pp > 1 and untied embeddings the stage also holds a copy
    // of the word embedding for the blocks' input (Megatron builds it where mtp_process is set).
    const int64_t h = m.hidden_size, t = sharded ? p.tp : 1;
    const MtpParams b = mtp_block_params(m);
    const LayerShard l = layer_shard(m, lp, m.is_moe_layer(m.num_layers - 1));
    s.non_expert += m.mtp_num_layers * (b.norms + 2 * h * h / t + l.dense);
    s.expert += m.mtp_num_layers * l.expert;
    if (p.pp > 1 && !m.tied_embeddings) s.embedding += m.padded_vocab_size(p.tp) / t * h;
  }
  s.non_expert += s.embedding;
  return s;
}

}  // namespace

StageParams stage_params(const ModelSpec& m, const ParallelConfig& p, int64_t pp_rank) {
  return stage_shard(m, p, pp_rank, false);
}

StageParams rank_params(const ModelSpec& m, const ParallelConfig& p, int64_t pp_rank) {
  MPLAN_CHECK((m.ffn_hidden_size % p.tp == 0 || m.num_moe_layers() == m.num_layers) &&
                  m.num_query_groups % p.tp == 0,
              "tp ", p.tp, " does not divide the model (validate() first)");
  if (m.moe)
    MPLAN_CHECK(m.moe->num_experts % p.ep == 0 && m.moe->moe_ffn_hidden_size % p.etp == 0 &&
                    m.moe->shared_expert_ffn_hidden_size % p.tp == 0,
                "ep ", p.ep, " / etp ", p.etp, " do not divide the experts (validate() first)");
  return stage_shard(m, p, pp_rank, true);
}

double megatron_flops(const ModelSpec& m, int64_t batch_size, int64_t tp) {
  // Variable names follow transformer_flops() in megatron/training/training.py.
  const double h = static_cast<double>(m.hidden_size);
  const double s = static_cast<double>(m.seq_length);
  const double tokens = static_cast<double>(batch_size) * s;  // BSHD: batch x s
  const double seqlen_squared_sum = static_cast<double>(batch_size) * s * s;
  // Multi-token prediction adds mtp_num_layers layers of the last layer's kind.
  const double mtp = static_cast<double>(m.mtp_num_layers);
  const double last_is_moe = m.is_moe_layer(m.num_layers - 1) ? 1 : 0;
  const double num_layers = static_cast<double>(m.num_layers) + mtp;
  const double num_moe_layers = static_cast<double>(m.num_moe_layers()) + last_is_moe * mtp;
  const double num_dense_layers = num_layers - num_moe_layers;
  const double experts_routed_to = m.moe ? static_cast<double>(m.moe->topk) : 0.0;
  const double moe_ffn = m.moe ? static_cast<double>(m.moe->moe_ffn_hidden_size) : 0.0;
  const double shared_ffn = m.moe ? static_cast<double>(m.moe->shared_expert_ffn_hidden_size) : 0.0;
  const double fwd_bwd = 3;  // forward, backward wgrad, backward dgrad
  const double fma = 2;      // a multiply-add is two FLOPs
  const double ffn_factor = m.activation == Activation::kSwiglu ? 3 : 2;
  const double q = static_cast<double>(m.kv_channels * m.num_attention_heads);
  const double kv = static_cast<double>(m.kv_channels * m.num_query_groups);
  double self_attn_term = fwd_bwd * fma * (h * (q + kv + kv) + q * h);
  double self_attn_core_term = fwd_bwd * fma * q / 2 * 2;  // causal: half the scores
  if (m.mla) {
    // Multi-latent attention: the q and kv LoRA projections with their norms and the decoupled
    // RoPE key, the output projection; the core over qk (+ RoPE) and v head dims.
    const MlaSpec& a = *m.mla;
    const double heads = static_cast<double>(m.num_attention_heads);
    const double qr = static_cast<double>(a.q_lora_rank), kr = static_cast<double>(a.kv_lora_rank);
    const double dn = static_cast<double>(a.qk_head_dim),
                 dr = static_cast<double>(a.qk_pos_emb_head_dim);
    const double dv = static_cast<double>(a.v_head_dim);
    const double q_term =
        a.q_lora_rank == 0 ? h * heads * (dn + dr) : qr * (h + heads * (dn + dr) + 1);
    self_attn_term =
        fwd_bwd * fma * (q_term + kr * (h + heads * (dn + dv) + 1) + h * dr + heads * dv * h);
    self_attn_core_term = fwd_bwd * fma * (heads * (dn + dr) / 2 + heads * dv / 2);
  }
  const double vocab = static_cast<double>(m.padded_vocab_size(tp));
  return tokens *
             (fwd_bwd * fma * h *
                  (static_cast<double>(m.ffn_hidden_size) * ffn_factor * num_dense_layers +
                   moe_ffn * experts_routed_to * ffn_factor * num_moe_layers +
                   shared_ffn * ffn_factor * num_moe_layers) +
              self_attn_term * num_layers +
              // MTP: enorm, hnorm, final norm and eh_proj per block
              fwd_bwd * fma * mtp * (3 * h + 2 * h * h) + fwd_bwd * fma * h * vocab * (mtp + 1)) +
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
