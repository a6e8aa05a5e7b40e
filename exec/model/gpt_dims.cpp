// gpt_dims(): which models the executor runs, and the shard sizes of one tensor-parallel rank.
#include "exec/model/gpt_dims.hpp"

#include <cmath>

#include "src/common/error.hpp"

namespace mplan::exec {

GptDims gpt_dims(const ModelSpec& m, int64_t micro_batch, int64_t tp, int64_t tp_rank,
                 bool sequence_parallel) {
  if (m.moe)
    throw Error(
        "model.moe: the executor runs dense models (mixture-of-experts layers are not "
        "supported yet)");
  GptDims d;
  d.layers = m.num_layers;
  d.hidden = m.hidden_size;
  d.heads = m.num_attention_heads;
  d.groups = m.num_query_groups;
  d.head_dim = m.kv_channels;
  d.ffn = m.ffn_hidden_size;
  d.vocab = m.padded_vocab_size(tp);
  d.max_positions = m.max_position_embeddings;
  d.seq = m.seq_length;
  d.micro_batch = micro_batch;
  d.tp = tp;
  d.tp_rank = tp_rank;
  d.sequence_parallel = sequence_parallel;
  d.gated = m.activation == Activation::kSwiglu;
  d.rmsnorm = m.normalization == Normalization::kRmsNorm;
  d.rope = m.position_embedding == PositionEmbedding::kRope;
  d.bias = m.add_bias_linear;
  if (d.rope) {
    // Megatron's RotaryEmbedding: dim = int(kv_channels · rotary_percent), pairs (i, i + dim/2).
    // validate() owns the rule that this is an even number >= 2 (src/plan/validate).
    d.rot_dim = static_cast<int64_t>(m.rotary_percent * static_cast<double>(d.head_dim));
    MPLAN_CHECK(d.rot_dim >= 2 && d.rot_dim % 2 == 0, "rotary dims int(", m.rotary_percent, " x ",
                d.head_dim, ") = ", d.rot_dim, " not an even number >= 2");
    d.rotary_base = static_cast<float>(m.rotary_base);
  }
  if (!d.rope)
    MPLAN_CHECK(m.seq_length <= m.max_position_embeddings, "seq_length ", m.seq_length,
                " exceeds max_position_embeddings ", m.max_position_embeddings);
  // validate() owns the divisibility rules (src/plan/validate): here they are invariants.
  MPLAN_CHECK(d.heads % tp == 0 && d.groups % tp == 0 && d.heads % d.groups == 0 &&
                  d.ffn % tp == 0 && (!d.sp() || d.seq % tp == 0),
              "tp ", tp, " does not divide heads ", d.heads, ", groups ", d.groups, ", ffn ", d.ffn,
              " or the sequence ", d.seq);
  MPLAN_CHECK(d.vocab % tp == 0, "padded vocabulary ", d.vocab, " not divisible by tp ", tp);
  MPLAN_CHECK(tp_rank >= 0 && tp_rank < tp, "tp_rank ", tp_rank, " of ", tp);
  return d;
}

}  // namespace mplan::exec
