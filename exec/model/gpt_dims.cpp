// gpt_dims(): which models the executor runs, and the shard sizes of one tensor-parallel rank.
#include "exec/model/gpt_dims.hpp"

#include "src/common/error.hpp"

namespace mplan::exec {

GptDims gpt_dims(const ModelSpec& m, int64_t micro_batch, int64_t tp, int64_t tp_rank,
                 bool sequence_parallel) {
  const char* no = "the executor runs GPT models with ";
  if (m.activation != Activation::kGelu)
    throw Error(cat("model.activation: ", no, "gelu, got ", to_string(m.activation)));
  if (m.normalization != Normalization::kLayerNorm)
    throw Error(cat("model.normalization: ", no, "layernorm, got ", to_string(m.normalization)));
  if (m.position_embedding != PositionEmbedding::kLearned)
    throw Error(cat("model.position_embedding: ", no, "learned positions, got ",
                    to_string(m.position_embedding)));
  if (!m.tied_embeddings) throw Error(cat("model.tied_embeddings: ", no, "tied embeddings"));
  if (!m.add_bias_linear) throw Error(cat("model.add_bias_linear: ", no, "linear biases"));
  if (m.moe) throw Error(cat("model.moe: ", no, "dense MLPs (MoE is not supported yet)"));
  if (m.num_query_groups != m.num_attention_heads)
    throw Error(cat("model.num_query_groups: ", no, "multi-head attention (num_query_groups = ",
                    "num_attention_heads = ", m.num_attention_heads, "), got ",
                    m.num_query_groups));
  MPLAN_CHECK(m.seq_length <= m.max_position_embeddings, "seq_length ", m.seq_length,
              " exceeds max_position_embeddings ", m.max_position_embeddings);
  GptDims d;
  d.layers = m.num_layers;
  d.hidden = m.hidden_size;
  d.heads = m.num_attention_heads;
  d.head_dim = m.kv_channels;
  d.ffn = m.ffn_hidden_size;
  d.vocab = m.padded_vocab_size(tp);
  d.max_positions = m.max_position_embeddings;
  d.seq = m.seq_length;
  d.micro_batch = micro_batch;
  d.tp = tp;
  d.tp_rank = tp_rank;
  d.sequence_parallel = sequence_parallel;
  // validate() owns the divisibility rules (src/plan/validate): here they are invariants.
  MPLAN_CHECK(d.heads % tp == 0 && d.ffn % tp == 0 && (!d.sp() || d.seq % tp == 0), "tp ", tp,
              " does not divide heads ", d.heads, ", ffn ", d.ffn, " or the sequence ", d.seq);
  MPLAN_CHECK(d.vocab % tp == 0, "padded vocabulary ", d.vocab, " not divisible by tp ", tp);
  MPLAN_CHECK(tp_rank >= 0 && tp_rank < tp, "tp_rank ", tp_rank, " of ", tp);
  return d;
}

}  // namespace mplan::exec
