// ModelSpec JSON adapter and the derived sizes Megatron computes from the arguments.
#include "src/model/model_spec.hpp"

#include "src/common/embedded_configs.hpp"
#include "src/common/error.hpp"

namespace mplan {

const char* to_string(Activation a) { return a == Activation::kGelu ? "gelu" : "swiglu"; }
const char* to_string(Normalization n) {
  return n == Normalization::kLayerNorm ? "layernorm" : "rmsnorm";
}
const char* to_string(PositionEmbedding p) {
  return p == PositionEmbedding::kLearned ? "learned" : "rope";
}

int64_t ModelSpec::padded_vocab_size(int64_t tp) const {
  // megatron/training/tokenizer: _vocab_size_with_padding: multiple = divisible_by * tp.
  int64_t multiple = make_vocab_size_divisible_by * tp;
  return (vocab_size + multiple - 1) / multiple * multiple;
}

const char* to_string(MoeDispatcher d) { return d == MoeDispatcher::kFlex ? "flex" : "alltoall"; }
const char* to_string(FlexBackend b) { return b == FlexBackend::kHybridEp ? "hybridep" : "deepep"; }

bool ModelSpec::is_moe_layer(int64_t layer) const {
  if (!moe) return false;
  // Megatron --moe-layer-freq as a list: its entry; as an int N: layer i is MoE when i % N == 0.
  if (!moe->layer_pattern.empty()) return moe->layer_pattern[static_cast<size_t>(layer)] != 0;
  return layer % moe->layer_freq == 0;
}

int64_t ModelSpec::num_moe_layers() const {
  if (!moe) return 0;
  if (!moe->layer_pattern.empty()) {
    int64_t n = 0;
    for (int64_t v : moe->layer_pattern) n += v != 0 ? 1 : 0;
    return n;
  }
  return (num_layers + moe->layer_freq - 1) / moe->layer_freq;
}

bool ModelSpec::is_window_attention_layer(int64_t layer) const {
  // megatron/core/transformer/utils.py is_layer_window_attention (layer_number 1-based).
  if (!window_size) return false;
  if (!window_attn_skip_pattern.empty())
    return window_attn_skip_pattern[static_cast<size_t>(layer)] != 0;
  if (window_attn_skip_freq > 0) return (layer + 1) % window_attn_skip_freq != 0;
  return true;
}

namespace {

// Ranges of the shape fields. The largest published decoders stay well inside them (Megatron-LM's
// 1T GPT: 128 layers, hidden 25600, 160 heads, ffn 102400; PaLM 540B: 118 layers, ffn 73728;
// Llama 3 405B: 126 layers, vocabulary 128256; DeepSeek-V3: 256 routed experts; contexts of
// 1M tokens); they bound every size the simulator derives (parameters, bytes, FLOPs) far below
// the range of int64.
constexpr IntRange kLayers{1, 1024};
constexpr IntRange kHidden{1, 65536};
constexpr IntRange kHeads{1, 1024};
constexpr IntRange kHeadDim{1, 4096};
constexpr IntRange kFfn{1, 262144};
constexpr IntRange kVocab{1, 4194304};
constexpr IntRange kVocabMultiple{1, 65536};
constexpr IntRange kSequence{1, 2097152};
constexpr IntRange kExperts{1, 1024};
constexpr IntRange kLoraRank{1, 65536};
constexpr IntRange kWindow{-1, 2097152};  // -1: unbounded (Megatron's "infinite window")
constexpr IntRange kMtpLayers{0, 64};

// A per-layer list of 0 / 1 (Megatron's --moe-layer-freq / --window-attn-skip-freq lists), one
// entry per layer.
std::vector<int64_t> layer_pattern(const Json& j, const std::string& field, int64_t num_layers) {
  if (!j.is_array() || static_cast<int64_t>(j.size()) != num_layers)
    throw Error(cat(field, ": a list must have one entry per layer (num_layers ", num_layers,
                    "), got ", json_excerpt(j)));
  std::vector<int64_t> v;
  for (const Json& x : j) {
    if (!x.is_number_integer() || (x.get<int64_t>() != 0 && x.get<int64_t>() != 1))
      throw Error(cat(field, ": list entries must be 0 or 1, got ", json_excerpt(x)));
    v.push_back(x.get<int64_t>());
  }
  return v;
}

void parse_moe_extras(const JsonObject& mo, MoeSpec& moe, int64_t num_layers) {
  if (mo.has("layer_freq") && mo.raw("layer_freq").is_array())
    moe.layer_pattern = layer_pattern(mo.raw("layer_freq"), mo.field("layer_freq"), num_layers);
  else
    moe.layer_freq = mo.get_int("layer_freq", 1, kLayers);
  moe.moe_grouped_gemm = mo.get_bool("moe_grouped_gemm", true);
  moe.moe_token_dispatcher_type =
      mo.get_enum("moe_token_dispatcher_type", {"alltoall", "flex"}, "alltoall") == "flex"
          ? MoeDispatcher::kFlex
          : MoeDispatcher::kAllToAll;
  moe.moe_flex_dispatcher_backend =
      mo.get_enum("moe_flex_dispatcher_backend", {"deepep", "hybridep"}, "deepep") == "hybridep"
          ? FlexBackend::kHybridEp
          : FlexBackend::kDeepEp;
  moe.overlap_moe_expert_parallel_comm = mo.get_bool("overlap_moe_expert_parallel_comm", false);
}

// Multi-latent attention, sliding windows and multi-token prediction (flat fields, as Megatron's
// arguments).
void parse_attention_variants(const JsonObject& o, ModelSpec& m) {
  if (o.get_bool("multi_latent_attention", false)) {
    MlaSpec a;
    a.q_lora_rank = o.get_int("q_lora_rank", 0, {0, kLoraRank.max});
    a.kv_lora_rank = o.get_int("kv_lora_rank", 32, kLoraRank);
    a.qk_head_dim = o.get_int("qk_head_dim", 128, kHeadDim);
    a.qk_pos_emb_head_dim = o.get_int("qk_pos_emb_head_dim", 64, kHeadDim);
    a.v_head_dim = o.get_int("v_head_dim", 128, kHeadDim);
    m.mla = a;
  } else {
    for (const char* k :
         {"q_lora_rank", "kv_lora_rank", "qk_head_dim", "qk_pos_emb_head_dim", "v_head_dim"})
      if (o.has(k))
        throw Error(cat(o.field(k),
                        ": needs multi_latent_attention true (Megatron reads it for "
                        "MLA only)"));
  }
  if (o.has("window_size") && !o.raw("window_size").is_null()) {
    const Json& w = o.raw("window_size");
    if (!w.is_array() || w.size() != 2 || !w[0].is_number_integer() || !w[1].is_number_integer())
      throw Error(cat(o.field("window_size"),
                      ": must be [left, right] (two integers, -1 for "
                      "unbounded), got ",
                      json_excerpt(w)));
    std::array<int64_t, 2> ws{w[0].get<int64_t>(), w[1].get<int64_t>()};
    check_int_range(ws[0], kWindow, o.field("window_size") + "[0]");
    check_int_range(ws[1], kWindow, o.field("window_size") + "[1]");
    m.window_size = ws;
  }
  if (o.has("window_attn_skip_freq") && !m.window_size)
    throw Error(cat(o.field("window_attn_skip_freq"),
                    ": needs window_size (Megatron-LM slides no window without it)"));
  if (o.has("window_attn_skip_freq")) {
    const Json& f = o.raw("window_attn_skip_freq");
    if (f.is_array())
      m.window_attn_skip_pattern = layer_pattern(f, o.field("window_attn_skip_freq"), m.num_layers);
    else
      m.window_attn_skip_freq = o.get_int("window_attn_skip_freq", 0, {1, kLayers.max});
  }
  m.mtp_num_layers = o.get_int("mtp_num_layers", 0, kMtpLayers);
}

}  // namespace

ModelSpec model_from_json(const Json& j, const std::string& path) {
  if (j.is_string()) return load_model(j.get<std::string>(), path);
  JsonObject o(j, path);
  o.allow("sources");  // per-field citations in presets
  o.allow("description");
  if (o.has("default_global_batch_size"))  // the model's usual batch, read by `mplan sweep`
    o.get_int("default_global_batch_size", {1, 1 << 24});
  ModelSpec m;
  m.name = o.get_string("name");
  m.num_layers = o.get_int("num_layers", kLayers);
  m.hidden_size = o.get_int("hidden_size", kHidden);
  m.num_attention_heads = o.get_int("num_attention_heads", kHeads);
  m.num_query_groups = o.get_int("num_query_groups", m.num_attention_heads, kHeads);
  m.kv_channels = o.get_int("kv_channels", 0, kHeadDim);
  m.ffn_hidden_size = o.get_int("ffn_hidden_size", kFfn);
  m.vocab_size = o.get_int("vocab_size", kVocab);
  m.make_vocab_size_divisible_by = o.get_int("make_vocab_size_divisible_by", 128, kVocabMultiple);
  m.seq_length = o.get_int("seq_length", kSequence);
  m.max_position_embeddings = o.get_int("max_position_embeddings", m.seq_length, kSequence);
  m.activation = o.get_enum("activation", {"gelu", "swiglu"}) == "gelu" ? Activation::kGelu
                                                                        : Activation::kSwiglu;
  m.normalization = o.get_enum("normalization", {"layernorm", "rmsnorm"}) == "layernorm"
                        ? Normalization::kLayerNorm
                        : Normalization::kRmsNorm;
  m.position_embedding = o.get_enum("position_embedding", {"learned", "rope"}) == "learned"
                             ? PositionEmbedding::kLearned
                             : PositionEmbedding::kRope;
  if (m.position_embedding == PositionEmbedding::kRope) {
    m.rotary_base = o.get_number("rotary_base", 10000.0, {1.0, 1e12});
    m.rotary_percent = o.get_number("rotary_percent", 1.0, {1e-9, 1.0});
  }
  m.tied_embeddings = o.get_bool("tied_embeddings");
  m.add_bias_linear = o.get_bool("add_bias_linear", true);
  if (o.has("moe")) {
    JsonObject mo = o.get_object("moe");
    MoeSpec moe;
    moe.num_experts = mo.get_int("num_experts", kExperts);
    moe.topk = mo.get_int("topk", kExperts);
    moe.moe_ffn_hidden_size = mo.get_int("moe_ffn_hidden_size", kFfn);
    moe.shared_expert_ffn_hidden_size =
        mo.get_int("shared_expert_ffn_hidden_size", 0, {0, kFfn.max});
    parse_moe_extras(mo, moe, m.num_layers);
    mo.finish();
    if (moe.topk > moe.num_experts)
      throw Error(cat(mo.field("topk"), ": must be <= num_experts (", moe.num_experts, "), got ",
                      moe.topk));
    m.moe = moe;
  }
  parse_attention_variants(o, m);
  o.finish();
  if (m.mla && m.num_query_groups != m.num_attention_heads)
    throw Error(cat(o.field("num_query_groups"),
                    ": multi-latent attention has no query groups; "
                    "must equal num_attention_heads (",
                    m.num_attention_heads, "), got ", m.num_query_groups));
  if (m.num_attention_heads % m.num_query_groups != 0)
    throw Error(cat(o.field("num_query_groups"), ": must divide num_attention_heads (",
                    m.num_attention_heads, "), got ", m.num_query_groups));
  if (m.kv_channels == 0) {
    if (m.hidden_size % m.num_attention_heads != 0)
      throw Error(cat(o.field("hidden_size"), ": must be divisible by num_attention_heads (",
                      m.num_attention_heads, ") unless kv_channels is given, got ", m.hidden_size));
    m.kv_channels = m.hidden_size / m.num_attention_heads;
  }
  if (m.position_embedding == PositionEmbedding::kLearned &&
      m.max_position_embeddings < m.seq_length)
    throw Error(cat(o.field("max_position_embeddings"), ": must be >= seq_length (", m.seq_length,
                    ") with learned position embeddings, got ", m.max_position_embeddings));
  return m;
}

Json model_to_json(const ModelSpec& m) {
  Json j;
  j["name"] = m.name;
  j["num_layers"] = m.num_layers;
  j["hidden_size"] = m.hidden_size;
  j["num_attention_heads"] = m.num_attention_heads;
  j["num_query_groups"] = m.num_query_groups;
  j["kv_channels"] = m.kv_channels;
  j["ffn_hidden_size"] = m.ffn_hidden_size;
  j["vocab_size"] = m.vocab_size;
  j["make_vocab_size_divisible_by"] = m.make_vocab_size_divisible_by;
  j["seq_length"] = m.seq_length;
  j["max_position_embeddings"] = m.max_position_embeddings;
  j["activation"] = to_string(m.activation);
  j["normalization"] = to_string(m.normalization);
  j["position_embedding"] = to_string(m.position_embedding);
  if (m.position_embedding == PositionEmbedding::kRope) {
    j["rotary_base"] = m.rotary_base;
    j["rotary_percent"] = m.rotary_percent;
  }
  j["tied_embeddings"] = m.tied_embeddings;
  j["add_bias_linear"] = m.add_bias_linear;
  if (m.moe) {
    j["moe"] = {{"num_experts", m.moe->num_experts},
                {"topk", m.moe->topk},
                {"moe_ffn_hidden_size", m.moe->moe_ffn_hidden_size},
                {"shared_expert_ffn_hidden_size", m.moe->shared_expert_ffn_hidden_size},
                {"layer_freq", m.moe->layer_freq}};
    if (!m.moe->layer_pattern.empty()) j["moe"]["layer_freq"] = m.moe->layer_pattern;
    j["moe"]["moe_grouped_gemm"] = m.moe->moe_grouped_gemm;
    j["moe"]["moe_token_dispatcher_type"] = to_string(m.moe->moe_token_dispatcher_type);
    if (m.moe->moe_token_dispatcher_type == MoeDispatcher::kFlex)
      j["moe"]["moe_flex_dispatcher_backend"] = to_string(m.moe->moe_flex_dispatcher_backend);
    if (m.moe->overlap_moe_expert_parallel_comm)
      j["moe"]["overlap_moe_expert_parallel_comm"] = true;
  } else {
    j["moe"] = nullptr;
  }
  if (m.mla) {
    j["multi_latent_attention"] = true;
    j["q_lora_rank"] = m.mla->q_lora_rank;
    j["kv_lora_rank"] = m.mla->kv_lora_rank;
    j["qk_head_dim"] = m.mla->qk_head_dim;
    j["qk_pos_emb_head_dim"] = m.mla->qk_pos_emb_head_dim;
    j["v_head_dim"] = m.mla->v_head_dim;
  }
  if (m.window_size) {
    j["window_size"] = {(*m.window_size)[0], (*m.window_size)[1]};
    if (!m.window_attn_skip_pattern.empty())
      j["window_attn_skip_freq"] = m.window_attn_skip_pattern;
    else if (m.window_attn_skip_freq > 0)
      j["window_attn_skip_freq"] = m.window_attn_skip_freq;
  }
  if (m.mtp_num_layers > 0) j["mtp_num_layers"] = m.mtp_num_layers;
  return j;
}

ModelSpec load_model(const std::string& ref, const std::string& field) {
  std::string text = load_config_text("models", ref, field);
  return model_from_json(parse_json(text, is_file_reference(ref) ? ref : field), field);
}

}  // namespace mplan
