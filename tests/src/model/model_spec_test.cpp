// Tests of ModelSpec: every model preset loads and carries the numbers its sources cite; parse
// errors name the field; derived sizes (kv_channels, padded vocabulary, MoE layers) follow
// Megatron; JSON round-trips.
#include "src/model/model_spec.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>

#include "src/common/embedded_configs.hpp"
#include "src/common/error.hpp"

namespace mplan {
namespace {

using ::testing::HasSubstr;

struct Cited {
  const char* name;
  int64_t layers, hidden, heads, groups, ffn, vocab, seq;
  Activation act;
  bool tied;
};

// The numbers each preset's "sources" cite (papers and released config.json files).
const Cited kCited[] = {
    // Brown et al. 2020 Table 2.1 + SC'21 (vocab 51200); d_ff = 4 d_model.
    {"gpt3-175b", 96, 12288, 96, 96, 49152, 51200, 2048, Activation::kGelu, true},
    // The reference workload: 24 layers, hidden 2048, 16 heads, seq 2048, vocab 32000, 4h MLP.
    {"gpt3-1.3b", 24, 2048, 16, 16, 8192, 32000, 2048, Activation::kGelu, true},
    // Llama-2-7b-hf config.json; Llama 2 paper: 4k context.
    {"llama2-7b", 32, 4096, 32, 32, 11008, 32000, 4096, Activation::kSwiglu, false},
    // Llama-2-70b-hf config.json: 8 key/value heads, intermediate 28672.
    {"llama2-70b", 80, 8192, 64, 8, 28672, 32000, 4096, Activation::kSwiglu, false},
    // Llama 3 Herd paper Table 3; 128256 in the released config.json; 8192 pre-training length.
    {"llama3-8b", 32, 4096, 32, 8, 14336, 128256, 8192, Activation::kSwiglu, false},
    {"llama3-70b", 80, 8192, 64, 8, 28672, 128256, 8192, Activation::kSwiglu, false},
    {"llama3-405b", 126, 16384, 128, 8, 53248, 128256, 8192, Activation::kSwiglu, false},
    // Mixtral of Experts Table 1; training sequence 4096 as Megatron's example.
    {"mixtral-8x7b", 32, 4096, 32, 8, 14336, 32000, 4096, Activation::kSwiglu, false},
    // Llama-3.2-1B config.json (tied embeddings); the executor's sequence of 4096.
    {"llama3.2-1b", 16, 2048, 32, 8, 8192, 128256, 4096, Activation::kSwiglu, true},
    // DeepSeek-V3 technical report Section 4.2 and config.json (MLA: no query groups).
    {"deepseek-v3", 61, 7168, 128, 128, 18432, 129280, 4096, Activation::kSwiglu, false},
};

TEST(ModelSpec, EveryPresetLoadsWithItsCitedNumbers) {
  for (const Cited& c : kCited) {
    SCOPED_TRACE(c.name);
    ModelSpec m = load_model(c.name);
    EXPECT_EQ(m.name, c.name);
    EXPECT_EQ(m.num_layers, c.layers);
    EXPECT_EQ(m.hidden_size, c.hidden);
    EXPECT_EQ(m.num_attention_heads, c.heads);
    EXPECT_EQ(m.num_query_groups, c.groups);
    EXPECT_EQ(m.ffn_hidden_size, c.ffn);
    EXPECT_EQ(m.vocab_size, c.vocab);
    EXPECT_EQ(m.seq_length, c.seq);
    EXPECT_EQ(m.activation, c.act);
    EXPECT_EQ(m.tied_embeddings, c.tied);
    // Llama and Mixtral: head dim 128; GPT-3 175B: 12288 / 96 = 128; reference: 2048 / 16.
    if (!m.mla) {
      EXPECT_EQ(m.kv_channels, m.hidden_size / m.num_attention_heads);
    }
    if (c.act == Activation::kSwiglu) {
      EXPECT_EQ(m.normalization, Normalization::kRmsNorm);
      EXPECT_EQ(m.position_embedding, PositionEmbedding::kRope);
      EXPECT_FALSE(m.add_bias_linear);
    } else {
      EXPECT_EQ(m.normalization, Normalization::kLayerNorm);
      EXPECT_EQ(m.position_embedding, PositionEmbedding::kLearned);
      EXPECT_TRUE(m.add_bias_linear);
    }
  }
  // Every shipped model preset is covered above.
  EXPECT_EQ(preset_names("models").size(), std::size(kCited));
}

TEST(ModelSpec, DeepSeekV3IsMlaMoeWithDenseFirstLayersAndMtp) {
  const ModelSpec m = load_model("deepseek-v3");
  ASSERT_TRUE(m.mla.has_value());
  EXPECT_EQ(m.mla->q_lora_rank, 1536);
  EXPECT_EQ(m.mla->kv_lora_rank, 512);
  EXPECT_EQ(m.mla->qk_head_dim, 128);
  EXPECT_EQ(m.mla->qk_pos_emb_head_dim, 64);
  EXPECT_EQ(m.mla->v_head_dim, 128);
  ASSERT_TRUE(m.moe.has_value());
  EXPECT_EQ(m.moe->num_experts, 256);
  EXPECT_EQ(m.moe->topk, 8);
  EXPECT_EQ(m.moe->shared_expert_ffn_hidden_size, 2048);
  EXPECT_EQ(m.num_moe_layers(), 58);
  for (int64_t l = 0; l < 3; ++l) EXPECT_FALSE(m.is_moe_layer(l)) << l;
  for (int64_t l = 3; l < 61; ++l) EXPECT_TRUE(m.is_moe_layer(l)) << l;
  EXPECT_EQ(m.mtp_num_layers, 1);
  EXPECT_FALSE(m.window_size.has_value());
  EXPECT_EQ(model_from_json(model_to_json(m), "model"), m);
}

std::string model_error(const std::function<void(Json&)>& edit) {
  Json j = model_to_json(load_model("deepseek-v3"));
  edit(j);
  try {
    model_from_json(j, "model");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(ModelSpec, AttentionVariantsAndLayerPatterns) {
  // Sliding windows: Megatron's is_layer_window_attention over 1-based layer numbers; every 4th
  // layer full with window_attn_skip_freq 4.
  ModelSpec m = load_model("llama3-8b");
  EXPECT_FALSE(m.is_window_attention_layer(0));
  m.window_size = std::array<int64_t, 2>{4096, 0};
  EXPECT_TRUE(m.is_window_attention_layer(3));
  m.window_attn_skip_freq = 4;
  EXPECT_TRUE(m.is_window_attention_layer(0));
  EXPECT_TRUE(m.is_window_attention_layer(2));
  EXPECT_FALSE(m.is_window_attention_layer(3));  // layer number 4
  EXPECT_FALSE(m.is_window_attention_layer(7));
  EXPECT_EQ(model_from_json(model_to_json(m), "model"), m);
  m.window_attn_skip_freq = 0;
  m.window_attn_skip_pattern.assign(32, 0);
  m.window_attn_skip_pattern[5] = 1;
  EXPECT_TRUE(m.is_window_attention_layer(5));
  EXPECT_FALSE(m.is_window_attention_layer(4));
  EXPECT_EQ(model_from_json(model_to_json(m), "model"), m);

  EXPECT_EQ(model_error([](Json& j) {
              j["moe"]["layer_freq"] = Json::array({0, 1});
            }),
            "model.moe.layer_freq: a list must have one entry per layer (num_layers 61), got "
            "[0,1]");
  EXPECT_THAT(model_error([](Json& j) {
                Json l = Json::array();
                for (int i = 0; i < 61; ++i) l.push_back(2);
                j["moe"]["layer_freq"] = l;
              }),
              ::testing::StartsWith("model.moe.layer_freq: list entries must be 0 or 1"));
  EXPECT_THAT(model_error([](Json& j) { j["num_query_groups"] = 8; }),
              ::testing::StartsWith("model.num_query_groups: multi-latent attention has no query "
                                    "groups"));
  EXPECT_THAT(model_error([](Json& j) { j["window_size"] = Json::array({128}); }),
              ::testing::StartsWith("model.window_size: must be [left, right]"));
  EXPECT_THAT(model_error([](Json& j) {
                j["window_size"] = Json::array({-2, 0});
              }),
              ::testing::StartsWith("model.window_size[0]: must be >= -1"));
  EXPECT_THAT(model_error([](Json& j) { j["window_attn_skip_freq"] = 2; }),
              ::testing::StartsWith("model.window_attn_skip_freq: needs window_size"));
  EXPECT_THAT(model_error([](Json& j) { j["mtp_num_layers"] = 100; }),
              ::testing::StartsWith("model.mtp_num_layers: must be <= 64"));
  EXPECT_THAT(model_error([](Json& j) { j["moe"]["moe_token_dispatcher_type"] = "allgather"; }),
              ::testing::StartsWith("model.moe.moe_token_dispatcher_type: must be one of"));
  EXPECT_THAT(model_error([](Json& j) {
                j.erase("multi_latent_attention");
                j["num_query_groups"] = 128;
              }),
              ::testing::StartsWith("model.q_lora_rank: needs multi_latent_attention true"));
}

TEST(ModelSpec, MixtralIsEightExpertsTopTwo) {
  ModelSpec m = load_model("mixtral-8x7b");
  ASSERT_TRUE(m.moe.has_value());
  EXPECT_EQ(m.moe->num_experts, 8);
  EXPECT_EQ(m.moe->topk, 2);
  EXPECT_EQ(m.moe->moe_ffn_hidden_size, 14336);
  EXPECT_EQ(m.moe->shared_expert_ffn_hidden_size, 0);
  EXPECT_EQ(m.max_position_embeddings, 32768);
  EXPECT_EQ(m.num_moe_layers(), 32);
  EXPECT_FALSE(load_model("llama3-8b").moe.has_value());
}

TEST(ModelSpec, PaddedVocabularyFollowsMegatron) {
  // _vocab_size_with_padding: round up to a multiple of 128 x tp.
  ModelSpec m = load_model("gpt3-175b");  // 51200 = 400 x 128
  EXPECT_EQ(m.padded_vocab_size(1), 51200);
  EXPECT_EQ(m.padded_vocab_size(8), 51200);   // 1024 x 50
  EXPECT_EQ(m.padded_vocab_size(16), 51200);  // 2048 x 25
  EXPECT_EQ(m.padded_vocab_size(32), 53248);  // 4096 x 13 (51200 / 4096 = 12.5)
  m.vocab_size = 50257;                       // GPT-2's vocabulary
  EXPECT_EQ(m.padded_vocab_size(1), 50304);   // 393 x 128
  EXPECT_EQ(m.padded_vocab_size(2), 50432);   // 197 x 256
}

TEST(ModelSpec, MoeLayerFrequency) {
  ModelSpec m = load_model("mixtral-8x7b");
  m.moe->layer_freq = 2;  // Megatron: layer i is MoE when i % 2 == 0
  EXPECT_TRUE(m.is_moe_layer(0));
  EXPECT_FALSE(m.is_moe_layer(1));
  EXPECT_TRUE(m.is_moe_layer(30));
  EXPECT_EQ(m.num_moe_layers(), 16);
  m.num_layers = 5;
  m.moe->layer_freq = 3;  // layers 0 and 3
  EXPECT_EQ(m.num_moe_layers(), 2);
}

// ---- parsing --------------------------------------------------------------------------------

Json small_model() {
  return parse_json(R"({"name": "tiny", "num_layers": 2, "hidden_size": 64,
    "num_attention_heads": 4, "ffn_hidden_size": 256, "vocab_size": 1000, "seq_length": 128,
    "activation": "gelu", "normalization": "layernorm", "position_embedding": "learned",
    "tied_embeddings": true})",
                    "t");
}

std::string parse_error(const Json& j) {
  try {
    model_from_json(j, "model");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(ModelSpec, DefaultsOfAnInlineModel) {
  ModelSpec m = model_from_json(small_model(), "model");
  EXPECT_EQ(m.num_query_groups, 4);
  EXPECT_EQ(m.kv_channels, 16);
  EXPECT_EQ(m.max_position_embeddings, 128);
  EXPECT_EQ(m.make_vocab_size_divisible_by, 128);
  EXPECT_TRUE(m.add_bias_linear);
  EXPECT_FALSE(m.moe.has_value());
}

TEST(ModelSpec, UnknownKeyIsAnError) {
  Json j = small_model();
  j["num_layer"] = 3;
  EXPECT_THAT(parse_error(j), HasSubstr("model.num_layer: unknown key"));
  Json k = small_model();
  k["moe"] = parse_json(R"({"num_experts": 4, "topk": 1, "moe_ffn_hidden_size": 8, "k": 1})", "t");
  EXPECT_THAT(parse_error(k), HasSubstr("model.moe.k: unknown key"));
}

TEST(ModelSpec, WrongTypesNameTheField) {
  Json j = small_model();
  j["num_layers"] = "2";
  EXPECT_EQ(parse_error(j), "model.num_layers: must be an integer, got \"2\"");
  Json k = small_model();
  k["tied_embeddings"] = 1;
  EXPECT_EQ(parse_error(k), "model.tied_embeddings: must be true or false, got 1");
  Json a = small_model();
  a["activation"] = "relu";
  EXPECT_EQ(parse_error(a), "model.activation: must be one of gelu, swiglu; got \"relu\"");
  EXPECT_EQ(parse_error(Json::array()), "model: must be a JSON object, got []");
}

TEST(ModelSpec, MissingFieldsNameTheField) {
  for (const char* key :
       {"name", "num_layers", "hidden_size", "num_attention_heads", "ffn_hidden_size", "vocab_size",
        "seq_length", "activation", "normalization", "position_embedding", "tied_embeddings"}) {
    Json j = small_model();
    j.erase(key);
    EXPECT_EQ(parse_error(j), cat("model.", key, ": missing (required)"));
  }
  Json m = small_model();
  m["moe"] = parse_json(R"({"num_experts": 4, "topk": 1})", "t");
  EXPECT_EQ(parse_error(m), "model.moe.moe_ffn_hidden_size: missing (required)");
}

TEST(ModelSpec, ImpossibleValuesNameTheField) {
  Json j = small_model();
  j["num_layers"] = 0;
  EXPECT_EQ(parse_error(j), "model.num_layers: must be >= 1, got 0");
  Json g = small_model();
  g["num_query_groups"] = 3;
  EXPECT_EQ(parse_error(g), "model.num_query_groups: must divide num_attention_heads (4), got 3");
  Json h = small_model();
  h["hidden_size"] = 66;
  EXPECT_THAT(parse_error(h), HasSubstr("model.hidden_size: must be divisible by "
                                        "num_attention_heads (4) unless kv_channels is given"));
  h["kv_channels"] = 16;  // then any hidden size is fine, as in Megatron
  EXPECT_EQ(parse_error(h), "");
  Json p = small_model();
  p["max_position_embeddings"] = 64;
  EXPECT_EQ(parse_error(p),
            "model.max_position_embeddings: must be >= seq_length (128) with "
            "learned position embeddings, got 64");
  Json t = small_model();
  t["moe"] = parse_json(R"({"num_experts": 4, "topk": 5, "moe_ffn_hidden_size": 8})", "t");
  EXPECT_EQ(parse_error(t), "model.moe.topk: must be <= num_experts (4), got 5");
}

TEST(ModelSpec, SizesOutsidePhysicalRangesNameTheField) {
  auto with = [](const char* key, int64_t v) {
    Json j = small_model();
    j[key] = v;
    return parse_error(j);
  };
  EXPECT_EQ(with("num_layers", int64_t{1} << 32),
            "model.num_layers: must be <= 1024, got 4294967296");
  EXPECT_EQ(with("hidden_size", 1 << 20), "model.hidden_size: must be <= 65536, got 1048576");
  EXPECT_EQ(with("num_attention_heads", 2048),
            "model.num_attention_heads: must be <= 1024, got 2048");
  EXPECT_EQ(with("ffn_hidden_size", 1 << 30),
            "model.ffn_hidden_size: must be <= 262144, got 1073741824");
  EXPECT_EQ(with("vocab_size", int64_t{1} << 40),
            "model.vocab_size: must be <= 4194304, got 1099511627776");
  EXPECT_EQ(with("seq_length", 1 << 30), "model.seq_length: must be <= 2097152, got 1073741824");
  EXPECT_EQ(with("kv_channels", 1 << 20), "model.kv_channels: must be <= 4096, got 1048576");
  Json m = small_model();
  m["moe"] = parse_json(R"({"num_experts": 100000, "topk": 1, "moe_ffn_hidden_size": 8})", "t");
  EXPECT_EQ(parse_error(m), "model.moe.num_experts: must be <= 1024, got 100000");
  Json b = small_model();
  b["default_global_batch_size"] = 0;
  EXPECT_EQ(parse_error(b), "model.default_global_batch_size: must be >= 1, got 0");
}

TEST(ModelSpec, PresetByNameOrUnknown) {
  EXPECT_EQ(model_from_json(Json("llama3-8b"), "model"), load_model("llama3-8b"));
  EXPECT_THAT(parse_error(Json("llama9")), HasSubstr("model: unknown model preset 'llama9'"));
}

TEST(ModelSpec, JsonRoundTrip) {
  for (const auto& name : preset_names("models")) {
    ModelSpec m = load_model(name);
    EXPECT_EQ(model_from_json(model_to_json(m), "model"), m) << name;
  }
  ModelSpec m = model_from_json(small_model(), "model");
  m.moe = MoeSpec{4, 2, 32, 16, 2};
  EXPECT_EQ(model_from_json(model_to_json(m), "model"), m);
}

}  // namespace
}  // namespace mplan
