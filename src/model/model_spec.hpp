// ModelSpec: the shape of a GPT / Llama / MoE decoder, with field names after Megatron-LM's
// arguments. Invariant after parse: every size is positive; num_query_groups divides
// num_attention_heads; kv_channels defaults to hidden_size / num_attention_heads.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "src/common/json_reader.hpp"

namespace mplan {

enum class Activation { kGelu, kSwiglu };
enum class Normalization { kLayerNorm, kRmsNorm };
enum class PositionEmbedding { kLearned, kRope };

struct MoeSpec {
  int64_t num_experts = 0;                    // --num-experts
  int64_t topk = 0;                           // --moe-router-topk
  int64_t moe_ffn_hidden_size = 0;            // --moe-ffn-hidden-size (per expert)
  int64_t shared_expert_ffn_hidden_size = 0;  // --moe-shared-expert-intermediate-size (0: none)
  int64_t layer_freq = 1;                     // --moe-layer-freq: every layer_freq-th layer is MoE
  bool operator==(const MoeSpec&) const = default;
};

struct ModelSpec {
  std::string name;
  int64_t num_layers = 0;           // --num-layers
  int64_t hidden_size = 0;          // --hidden-size
  int64_t num_attention_heads = 0;  // --num-attention-heads
  int64_t num_query_groups = 0;     // --num-query-groups (== heads: multi-head attention)
  int64_t kv_channels = 0;          // --kv-channels (head dim; default hidden / heads)
  int64_t ffn_hidden_size = 0;      // --ffn-hidden-size
  int64_t vocab_size = 0;           // --vocab-size (before padding)
  int64_t make_vocab_size_divisible_by = 128;  // --make-vocab-size-divisible-by
  int64_t seq_length = 0;                      // --seq-length
  int64_t max_position_embeddings = 0;         // --max-position-embeddings (default seq_length)
  Activation activation = Activation::kGelu;
  Normalization normalization = Normalization::kLayerNorm;
  PositionEmbedding position_embedding = PositionEmbedding::kLearned;
  double rotary_base = 10000;    // --rotary-base (RoPE only)
  double rotary_percent = 1.0;   // --rotary-percent: the share of each head dim rotated (RoPE)
  bool tied_embeddings = true;   // not --untie-embeddings-and-output-weights
  bool add_bias_linear = true;   // not --disable-bias-linear
  std::optional<MoeSpec> moe;    // null: dense model

  bool operator==(const ModelSpec&) const = default;

  // Megatron pads the vocabulary to a multiple of make_vocab_size_divisible_by * tp.
  int64_t padded_vocab_size(int64_t tp) const;
  // True when layer `layer` (0-based) is an MoE layer (Megatron: layer_freq pattern).
  bool is_moe_layer(int64_t layer) const;
  int64_t num_moe_layers() const;
};

const char* to_string(Activation a);
const char* to_string(Normalization n);
const char* to_string(PositionEmbedding p);

// Parses a model object (or, when `j` is a string, the preset / file it names). `path` names the
// field for error messages ("model").
ModelSpec model_from_json(const Json& j, const std::string& path);
Json model_to_json(const ModelSpec& m);
// Loads a model preset by name or a model JSON file by path.
ModelSpec load_model(const std::string& ref, const std::string& field = "model");

}  // namespace mplan
