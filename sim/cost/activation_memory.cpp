// Activation bytes, term by term after Korthikanti et al. 2022, Section 4.1 (per layer:
// attention 11sbh + 5as²b, MLP 19sbh, norms 4sbh, without parallelism), with the tensor-parallel
// and sequence-parallel divisions of Sections 4.2.1-4.2.2 and the recomputation of Section 5.
// Each term names the tensor it keeps; 2-byte activations, 1-byte dropout masks.
#include "sim/cost/activation_memory.hpp"

#include <cmath>

#include "src/common/error.hpp"

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

}  // namespace

LayerActivationBytes layer_activation_bytes(const LayerActivationShape& s) {
  check(s);
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

  LayerActivationBytes out;
  if (s.recompute == Recompute::kFull) {
    // Section 5: only the layer input is kept; the rest is recomputed in the backward pass.
    out.checkpoint = round_bytes(e * sbh / rep);
    return out;
  }

  // Norms: the inputs of the two LayerNorms/RMSNorms, 2sbh each.
  out.norms = round_bytes(2 * e * sbh / rep);

  // Attention block.
  double att = qe * sbh / rep;                      // QKV GEMM input: 2sbh
  att += e * sl * b * (q_width + kv_width) / t;     // Q and K (inputs of Q·K^T): 4sbh/t
  att += e * sl * b * kv_width / t;                 // V: 2sbh/t
  att += e * sl * b * q_width / t;                  // context (output-projection input): 2sbh/t
  if (quantized) att += qe * sl * b * q_width / t;  // its quantized copy, the projection input
  if (s.mla) {
    // megatron/core/transformer/multi_latent_attention.py: the down projections' input (x), each
    // latent before and after its norm (gathered: every token, whole on each tp rank), Q and K
    // with their RoPE part, V, the context (and its quantized copy in fp8 / fp4).
    const double a = static_cast<double>(s.heads);
    const double qk = a * static_cast<double>(s.qk_head_dim + s.qk_pos_emb_head_dim);
    const double v = a * static_cast<double>(s.v_head_dim);
    att = qe * sbh / rep;
    att += 2 * e * sl * b * static_cast<double>(s.q_lora_rank + s.kv_lora_rank);
    att += e * sl * b * 2 * qk / t + e * sl * b * v / t + e * sl * b * v / t;
    if (quantized) att += qe * sl * b * v / t;
  }
  if (s.hidden_dropout) att += sbh / rep;  // dropout mask after the projection: sbh
  const bool scores_stored = !s.flash_attention && s.recompute != Recompute::kSelective;
  if (scores_stored) {
    // Per head s_q × s_k scores: with context parallelism each rank's queries see the whole
    // sequence. Softmax output 2as²b/t, dropout mask as²b/t, dropout output 2as²b/t.
    const double score_elems =
        static_cast<double>(s.heads) * b * sl * static_cast<double>(s.seq_length) / t;
    att += e * score_elems;
    if (s.attention_dropout) att += score_elems + e * score_elems;
  }
  out.attention = round_bytes(att);

  // MLP block.
  double mlp = 0;
  if (!s.moe) {
    const double f = static_cast<double>(s.ffn_hidden);
    mlp += qe * sbh / rep;                              // FC1 input: 2sbh
    mlp += e * sl * b * (s.gated_mlp ? 2 * f : f) / t;  // activation input: 8sbh/t for 4h GeLU
    mlp += qe * sl * b * f / t;                         // FC2 input: 8sbh/t
  } else {
    const double tokens = sl * b / rep;  // tokens entering the layer on this rank
    const double routed = tokens * static_cast<double>(s.topk) * static_cast<double>(s.etp);
    const double f = static_cast<double>(s.moe_ffn_hidden) / static_cast<double>(s.etp);
    mlp += e * sbh / rep;                                      // router and shared-expert input
    mlp += 4.0 * tokens * static_cast<double>(s.num_experts);  // router probabilities (fp32)
    mlp += qe * routed * h;                                    // dispatched tokens (FC1 input)
    mlp += e * routed * (s.gated_mlp ? 2 * f : f);             // activation input
    mlp += qe * routed * f;                                    // FC2 input
    mlp += e * tokens * static_cast<double>(s.topk) * h;       // expert outputs kept for combine
    if (s.shared_ffn_hidden > 0) {
      const double fs = static_cast<double>(s.shared_ffn_hidden);
      mlp += e * sl * b * (s.gated_mlp ? 2 * fs : fs) / t;
      mlp += qe * sl * b * fs / t;
    }
  }
  if (s.hidden_dropout) mlp += sbh / rep;  // dropout mask after FC2: sbh
  out.mlp = round_bytes(mlp);
  return out;
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
