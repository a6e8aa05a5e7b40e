// A small GPT ModelSpec built field by field for tests (no preset file), shared by the model,
// simulator and executor tests. Invariant: only the shape is set here; every other field keeps
// ModelSpec's default (GeLU, LayerNorm, learned positions, tied embeddings, vocab padding 128).
#pragma once

#include <cstdint>

#include "src/model/model_spec.hpp"

namespace mplan::test {

// A GPT-3-style decoder: multi-head attention (query groups = heads, head dim hidden / heads),
// ffn 4 · hidden, positions up to seq.
inline ModelSpec gpt(int64_t layers, int64_t hidden, int64_t heads, int64_t seq, int64_t vocab) {
  ModelSpec m;
  m.name = "test-gpt";
  m.num_layers = layers;
  m.hidden_size = hidden;
  m.num_attention_heads = heads;
  m.num_query_groups = heads;
  m.kv_channels = hidden / heads;
  m.ffn_hidden_size = 4 * hidden;
  m.vocab_size = vocab;
  m.seq_length = seq;
  m.max_position_embeddings = seq;
  return m;
}

}  // namespace mplan::test
