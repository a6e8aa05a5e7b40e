// Activation bytes, term by term after Korthikanti et al. 2022, Section 4.1 (per layer:
// attention 11sbh + 5as²b, MLP 19sbh, norms 4sbh, without parallelism), with the tensor-parallel
// and sequence-parallel divisions of Sections 4.2.1-4.2.2 and the recomputation of Section 5.
// Each term names the tensor it keeps; 2-byte activations, 1-byte dropout masks.
#include "sim/cost/activation_memory.hpp"

#include <cmath>

#include "src/common/error.hpp"
#include "src/plan/training_config.hpp"

namespace mplan::cost {

namespace {

int64_t round_bytes(double b) { return static_cast<int64_t>(std::llround(b)); }

void check(const LayerActivationShape& s) {
  MPLAN_CHECK(s.seq_length >= 1 && s.micro_batch >= 1 && s.hidden >= 1 && s.heads >= 1 &&
                  s.query_groups >= 1 && s.head_dim >= 1 && s.tp >= 1 && s.cp >= 1 &&
                  s.bytes_per_element >= 1,
              "activation shape s=", s.seq_length, " b=", s.micro_batch, " h=", s.hidden,
              " a=", s.heads, " g=", s.query_groups, " d=", s.head_dim, " t=", s.tp, " cp=", s.cp);
  MPLAN_CHECK(!s.moe || (s.num_experts >= 1 && s.topk >= 1 && s.moe_ffn_hidden >= 1 && s.etp >= 1),
              "MoE shape experts=", s.num_experts, " topk=", s.topk, " F=", s.moe_ffn_hidden);
}

// The tensors of one layer kept for the backward, term by term (bytes per micro-batch), after
// what selective recompute drops.
struct Terms {
  double norm_attn = 0, norm_mlp = 0;  // the two norm inputs
  // Attention block.
  double qkv_in = 0;   // QKV GEMM input (MLA: the down projections' input x)
  double latents = 0;  // MLA: each latent before and after its norm
  double qk = 0, v = 0;
  double context = 0;  // projection input (the context, + its quantized copy in fp8 / fp4)
  double attn_mask = 0, scores = 0;
  // MLP block (dense) or MoE.
  double fc1_in = 0;  // dense FC1 input, or the MoE router and shared-expert input
  double probs = 0, dispatched = 0, act_in = 0, fc2_in = 0, outputs = 0;
  double shared = 0;  // shared experts' activation and FC2 inputs
  double mlp_mask = 0;
  double attention() const { return qkv_in + latents + qk + v + context + attn_mask + scores; }
  double mlp() const {
    return fc1_in + probs + dispatched + act_in + fc2_in + outputs + shared + mlp_mask;
  }
};

Terms layer_terms(const LayerActivationShape& s) {
  const double e = static_cast<double>(s.bytes_per_element);
  const double t = static_cast<double>(s.tp);
  const double sl = static_cast<double>(s.seq_length) / static_cast<double>(s.cp);  // local s
  const double b = static_cast<double>(s.micro_batch);
  const double h = static_cast<double>(s.hidden);
  const double q_width = static_cast<double>(s.heads * s.head_dim);
  const double kv_width = static_cast<double>(s.query_groups * s.head_dim);
  // Tensors outside the tensor-parallel regions are replicated across TP ranks, or split by t
  // along the sequence with sequence parallelism (Section 4.2.2).
  const double rep = s.sequence_parallel ? t : 1.0;
  const double sbh = sl * b * h;
  // The saved input of a GEMM: quantized in an fp8 / fp4 layer (gemm_input_bytes), else 16 bits.
  const bool quantized = s.gemm_input_bytes > 0;
  const double qe = quantized ? s.gemm_input_bytes : e;
  const bool selective = s.recompute == Recompute::kSelective;
  auto recomputes = [&](uint32_t m) { return selective && (s.recompute_modules & m) != 0; };

  Terms x;
  // Norms: the inputs of the two LayerNorms/RMSNorms, 2sbh each.
  x.norm_attn = x.norm_mlp = e * sbh / rep;

  // Attention block.
  x.qkv_in = qe * sbh / rep;                     // QKV GEMM input: 2sbh
  x.qk = e * sl * b * (q_width + kv_width) / t;  // Q and K (inputs of Q·K^T): 4sbh/t
  x.v = e * sl * b * kv_width / t;               // V: 2sbh/t
  x.context = e * sl * b * q_width / t;          // context (output-projection input): 2sbh/t
  if (quantized)
    x.context += qe * sl * b * q_width / t;  // its quantized copy, the projection input
  if (s.mla) {
    // megatron/core/transformer/multi_latent_attention.py: the down projections' input (x), each
    // latent before and after its norm (gathered: every token, whole on each tp rank), Q and K
    // with their RoPE part, V, the context (and its quantized copy in fp8 / fp4).
    const double a = static_cast<double>(s.heads);
    const double qk = a * static_cast<double>(s.qk_head_dim + s.qk_pos_emb_head_dim);
    const double v = a * static_cast<double>(s.v_head_dim);
    x.latents = 2 * e * sl * b * static_cast<double>(s.q_lora_rank + s.kv_lora_rank);
    x.qk = e * sl * b * 2 * qk / t;
    x.v = e * sl * b * v / t;
    x.context = e * sl * b * v / t + (quantized ? qe * sl * b * v / t : 0);
  }
  if (s.hidden_dropout) x.attn_mask = sbh / rep;  // dropout mask after the projection: sbh
  // Scores: not with flash attention, nor when core_attn is recomputed.
  if (!s.flash_attention && !recomputes(kRecomputeCoreAttn)) {
    // Per head s_q × s_k scores: with context parallelism each rank's queries see the whole
    // sequence. Softmax output 2as²b/t, dropout mask as²b/t, dropout output 2as²b/t.
    const double score_elems =
        static_cast<double>(s.heads) * b * sl * static_cast<double>(s.seq_length) / t;
    x.scores = e * score_elems;
    if (s.attention_dropout) x.scores += score_elems + e * score_elems;
  }

  // MLP block.
  if (!s.moe) {
    const double f = static_cast<double>(s.ffn_hidden);
    x.fc1_in = qe * sbh / rep;                              // FC1 input: 2sbh
    x.act_in = e * sl * b * (s.gated_mlp ? 2 * f : f) / t;  // activation input: 8sbh/t for 4h GeLU
    x.fc2_in = qe * sl * b * f / t;                         // FC2 input: 8sbh/t
  } else {
    const double tokens = sl * b / rep;  // tokens entering the layer on this rank
    const double routed = tokens * static_cast<double>(s.topk) * static_cast<double>(s.etp);
    const double f = static_cast<double>(s.moe_ffn_hidden) / static_cast<double>(s.etp);
    x.fc1_in = e * sbh / rep;                                     // router and shared-expert input
    x.probs = 4.0 * tokens * static_cast<double>(s.num_experts);  // router probabilities (fp32)
    x.dispatched = qe * routed * h;                               // dispatched tokens (FC1 input)
    x.act_in = e * routed * (s.gated_mlp ? 2 * f : f);            // activation input
    x.fc2_in = qe * routed * f;                                   // FC2 input
    x.outputs = e * tokens * static_cast<double>(s.topk) * h;     // expert outputs kept for combine
    if (s.shared_ffn_hidden > 0) {
      const double fs = static_cast<double>(s.shared_ffn_hidden);
      x.shared = e * sl * b * (s.gated_mlp ? 2 * fs : fs) / t + qe * sl * b * fs / t;
    }
  }
  if (s.hidden_dropout) x.mlp_mask = sbh / rep;  // dropout mask after FC2: sbh

  // Selective recompute of other modules (TransformerConfig.recompute_modules;
  // transformer_layer.py, moe_layer.py, experts.py, multi_latent_attention.py): each drops the
  // tensors it runs again. layernorm (output-discarding): the outputs of the norms that are modules
  // of their own.
  if (recomputes(kRecomputeLayernorm)) {
    if (!s.norms_fused) x.qkv_in = 0;
    if (!s.norms_fused || s.moe) x.fc1_in = 0;
  }
  // mlp (dense layers; checkpointed with its input): everything inside it, and with a fused
  // norm the norm's output too (the FC1 input; the checkpoint keeps the norm's input).
  if (!s.moe && recomputes(kRecomputeMlp)) {
    x.act_in = x.fc2_in = 0;
    if (s.norms_fused) x.fc1_in = 0;
  }
  if (s.moe && recomputes(kRecomputeMoe))  // moe: the whole MoE layer from its input
    x.probs = x.dispatched = x.act_in = x.fc2_in = x.outputs = x.shared = 0;
  if (s.moe && recomputes(kRecomputeMoeAct)) x.fc2_in = 0;  // the experts' activation output
  if (s.moe && recomputes(kRecomputeSharedExperts)) x.shared = 0;
  if (s.mla && recomputes(kRecomputeMlaUpProj)) x.qk = x.v = 0;  // up projections and RoPE
  return x;
}

}  // namespace

LayerActivationBytes layer_activation_bytes(const LayerActivationShape& s) {
  check(s);
  LayerActivationBytes out;
  if (s.recompute == Recompute::kFull) {
    // Section 5: only the layer input is kept; the rest is recomputed in the backward pass.
    const double rep = s.sequence_parallel ? static_cast<double>(s.tp) : 1.0;
    out.checkpoint =
        round_bytes(static_cast<double>(s.bytes_per_element) * static_cast<double>(s.seq_length) /
                    static_cast<double>(s.cp) * static_cast<double>(s.micro_batch) *
                    static_cast<double>(s.hidden) / rep);
    return out;
  }
  const Terms x = layer_terms(s);
  out.norms = round_bytes(x.norm_attn + x.norm_mlp);
  out.attention = round_bytes(x.attention());
  out.mlp = round_bytes(x.mlp());
  return out;
}

int64_t OffloadableBytes::of(uint32_t m) const {
  int64_t n = 0;
  if (m & kOffloadAttnNorm) n += attn_norm;
  if (m & kOffloadQkvLinear) n += qkv_linear;
  if (m & kOffloadCoreAttn) n += core_attn;
  if (m & kOffloadAttnProj) n += attn_proj;
  if (m & kOffloadMlpNorm) n += mlp_norm;
  if (m & kOffloadExpertFc1) n += expert_fc1;
  if (m & kOffloadMoeAct) n += moe_act;
  return n;
}

OffloadableBytes offloadable_bytes(const LayerActivationShape& s) {
  check(s);
  OffloadableBytes o;
  if (s.recompute == Recompute::kFull) return o;  // the checkpoint alone: nothing to offload
  const Terms x = layer_terms(s);
  o.attn_norm = s.norms_fused ? 0 : round_bytes(x.norm_attn);
  o.qkv_linear = round_bytes(x.qkv_in + (s.norms_fused ? x.norm_attn : 0.0));
  o.core_attn = round_bytes(x.qk + x.v);
  o.attn_proj = round_bytes(x.context);
  o.mlp_norm = s.norms_fused && !s.moe ? 0 : round_bytes(x.norm_mlp);
  if (s.moe) {
    o.expert_fc1 = round_bytes(x.dispatched);
    o.moe_act = round_bytes(x.act_in);
  }
  return o;
}

int64_t embedding_activation_bytes(const LayerActivationShape& s) {
  check(s);
  const double rep = s.sequence_parallel ? static_cast<double>(s.tp) : 1.0;
  const double sb = static_cast<double>(s.seq_length) / static_cast<double>(s.cp) *
                    static_cast<double>(s.micro_batch);
  double bytes = 8 * sb;                                              // token ids, int64
  if (s.hidden_dropout) bytes += sb * static_cast<double>(s.hidden);  // dropout mask
  return round_bytes(bytes / rep);
}

int64_t output_layer_activation_bytes(const LayerActivationShape& s, int64_t padded_vocab) {
  check(s);
  MPLAN_CHECK(padded_vocab >= 1 && padded_vocab % s.tp == 0, "padded vocab ", padded_vocab,
              " with tp ", s.tp);
  const double t = static_cast<double>(s.tp);
  const double rep = s.sequence_parallel ? t : 1.0;
  const double sb = static_cast<double>(s.seq_length) / static_cast<double>(s.cp) *
                    static_cast<double>(s.micro_batch);
  const double e = static_cast<double>(s.bytes_per_element);
  double bytes =
      2 * e * sb * static_cast<double>(s.hidden) / rep;     // final norm + output GEMM inputs
  bytes += 4 * sb * static_cast<double>(padded_vocab) / t;  // fp32 softmax of the logits
  return round_bytes(bytes);
}

}  // namespace mplan::cost
