// ModelSpec: the shape of a GPT / Llama / MoE decoder, with field names after Megatron-LM's
// arguments. Invariant after parse: every size is positive; num_query_groups divides
// num_attention_heads; kv_channels defaults to hidden_size / num_attention_heads.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "src/common/json_reader.hpp"

namespace mplan {

enum class Activation { kGelu, kSwiglu };
enum class Normalization { kLayerNorm, kRmsNorm };
enum class PositionEmbedding { kLearned, kRope };

// --moe-token-dispatcher-type (allgather is not modelled) and --moe-flex-dispatcher-backend.
enum class MoeDispatcher { kAllToAll, kFlex };
enum class FlexBackend { kDeepEp, kHybridEp };
const char* to_string(MoeDispatcher d);  // "alltoall", "flex"
const char* to_string(FlexBackend b);    // "deepep", "hybridep"

struct MoeSpec {
  int64_t num_experts = 0;                    // --num-experts
  int64_t topk = 0;                           // --moe-router-topk
  int64_t moe_ffn_hidden_size = 0;            // --moe-ffn-hidden-size (per expert)
  int64_t shared_expert_ffn_hidden_size = 0;  // --moe-shared-expert-intermediate-size (0: none)
  int64_t layer_freq = 1;                     // --moe-layer-freq: every layer_freq-th layer is MoE
  // --moe-layer-freq as a list: 1 for an MoE layer, 0 for a dense one, one per layer (empty: the
  // int above). DeepSeek-V3: [0]*3 + [1]*58.
  std::vector<int64_t> layer_pattern{};
  bool moe_grouped_gemm = true;  // --moe-grouped-gemm (false: one GEMM per local expert)
  MoeDispatcher moe_token_dispatcher_type =
      MoeDispatcher::kAllToAll;                                    // --moe-token-dispatcher-type
  FlexBackend moe_flex_dispatcher_backend = FlexBackend::kDeepEp;  // --moe-flex-dispatcher-backend
  bool overlap_moe_expert_parallel_comm = false;  // --overlap-moe-expert-parallel-comm
  bool operator==(const MoeSpec&) const = default;
};

// Multi-latent attention (DeepSeek-V2 / V3; Megatron-LM's MLASelfAttention): queries through a
// low-rank down / up projection (or one projection when q_lora_rank is 0), keys and values from
// a shared latent of kv_lora_rank, a decoupled RoPE part of qk_pos_emb_head_dim per head.
struct MlaSpec {
  int64_t q_lora_rank = 0;           // --q-lora-rank (0: Megatron's None, linear_q_proj)
  int64_t kv_lora_rank = 32;         // --kv-lora-rank
  int64_t qk_head_dim = 128;         // --qk-head-dim (the non-RoPE part of a query/key head)
  int64_t qk_pos_emb_head_dim = 64;  // --qk-pos-emb-head-dim (the RoPE part)
  int64_t v_head_dim = 128;          // --v-head-dim
  bool operator==(const MlaSpec&) const = default;
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
  std::optional<MlaSpec> mla{};  // --multi-latent-attention (null: standard attention)
  // --window-size (left, right): sliding-window attention over `left` earlier and `right` later
  // positions, -1 unbounded (null: full attention everywhere).
  std::optional<std::array<int64_t, 2>> window_size{};
  // --window-attn-skip-freq: N (every N-th layer, 1-based, keeps full attention) or a per-layer
  // list (1: sliding window, 0: full); 0 / empty: every layer slides.
  int64_t window_attn_skip_freq = 0;
  std::vector<int64_t> window_attn_skip_pattern{};
  int64_t mtp_num_layers = 0;  // --mtp-num-layers: multi-token-prediction depth (0: none)

  bool operator==(const ModelSpec&) const = default;

  // Megatron pads the vocabulary to a multiple of make_vocab_size_divisible_by * tp.
  int64_t padded_vocab_size(int64_t tp) const;
  // True when layer `layer` (0-based) is an MoE layer (Megatron: layer_freq pattern).
  bool is_moe_layer(int64_t layer) const;
  int64_t num_moe_layers() const;
  // True when layer `layer` (0-based) uses the sliding window (Megatron-LM's
  // is_layer_window_attention over its 1-based layer number).
  bool is_window_attention_layer(int64_t layer) const;
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
