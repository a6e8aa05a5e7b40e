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

bool ModelSpec::is_moe_layer(int64_t layer) const {
  // Megatron --moe-layer-freq N (int): layer i is MoE when i % N == 0.
  return moe.has_value() && layer % moe->layer_freq == 0;
}

int64_t ModelSpec::num_moe_layers() const {
  if (!moe) return 0;
  return (num_layers + moe->layer_freq - 1) / moe->layer_freq;
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
    moe.layer_freq = mo.get_int("layer_freq", 1, kLayers);
    mo.finish();
    if (moe.topk > moe.num_experts)
      throw Error(cat(mo.field("topk"), ": must be <= num_experts (", moe.num_experts, "), got ",
                      moe.topk));
    m.moe = moe;
  }
  o.finish();
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
  } else {
    j["moe"] = nullptr;
  }
  return j;
}

ModelSpec load_model(const std::string& ref, const std::string& field) {
  std::string text = load_config_text("models", ref, field);
  return model_from_json(parse_json(text, is_file_reference(ref) ? ref : field), field);
}

}  // namespace mplan
