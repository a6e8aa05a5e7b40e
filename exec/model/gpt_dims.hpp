// GptDims: the sizes of the decoder the executor runs — GPT (learned positions, LayerNorm, GeLU,
// tied embeddings, biases) or Llama-family (RoPE, RMSNorm, SwiGLU, grouped-query attention,
// untied embeddings, no biases), dense — and of this rank's tensor-parallel shard of it.
// Invariant: heads, query groups, ffn and the padded vocabulary divide by tp; with sequence
// parallelism the sequence does too (validate() already requires these of a plan).
#pragma once

#include <cstdint>

#include "src/model/model_spec.hpp"

namespace mplan::exec {

struct GptDims {
  int64_t layers = 0;
  int64_t hidden = 0;
  int64_t heads = 0;
  int64_t groups = 0;    // query groups (== heads: multi-head attention)
  int64_t head_dim = 0;  // kv_channels
  int64_t ffn = 0;
  int64_t vocab = 0;  // padded as Megatron pads it for this tp (the model's real row count)
  int64_t max_positions = 0;
  int64_t seq = 0;          // s
  int64_t micro_batch = 0;  // b
  int64_t tp = 1;
  int64_t tp_rank = 0;
  bool sequence_parallel = false;  // only meaningful with tp > 1
  bool gated = false;              // SwiGLU: fc1 writes [gate | up], 2·ffn columns
  bool rmsnorm = false;            // RMSNorm (no bias) instead of LayerNorm
  bool rope = false;               // rotary position embedding instead of learned positions
  int64_t rot_dim = 0;             // RoPE: rotated dims of each head (rotary_percent · head_dim)
  float rotary_base = 10000;
  bool bias = true;  // linear layers have biases

  bool sp() const { return sequence_parallel && tp > 1; }
  bool gqa() const { return groups != heads; }
  int64_t heads_local() const { return heads / tp; }
  int64_t groups_local() const { return groups / tp; }
  int64_t attn_local() const { return heads_local() * head_dim; }  // per-rank width of Q
  // Heads of the packed per-token QKV on this rank: Q heads, then K and V groups.
  int64_t qkv_heads_local() const { return heads_local() + 2 * groups_local(); }
  int64_t ffn_local() const { return ffn / tp; }
  int64_t fc1_local() const { return (gated ? 2 : 1) * ffn_local(); }  // fc1's output width
  int64_t vocab_local() const { return vocab / tp; }
  int64_t vocab_start() const { return tp_rank * vocab_local(); }
  int64_t tokens() const { return seq * micro_batch; }         // T: tokens of one micro-batch
  int64_t seq_local() const { return sp() ? seq / tp : seq; }  // rows of the residual stream
  int64_t seq_offset() const { return sp() ? tp_rank * seq_local() : 0; }
  int64_t tokens_local() const { return seq_local() * micro_batch; }
};

// The dims of `model` for micro-batch `micro_batch` on tensor-parallel rank `tp_rank` of `tp`.
// Throws mplan::Error naming the model field when the model is not one the executor runs (MoE;
// a rotary share that leaves an odd number of dims).
// The plan's divisibility rules are validate()'s; a plan breaking them is an InternalError here.
GptDims gpt_dims(const ModelSpec& model, int64_t micro_batch, int64_t tp, int64_t tp_rank,
                 bool sequence_parallel);

}  // namespace mplan::exec
