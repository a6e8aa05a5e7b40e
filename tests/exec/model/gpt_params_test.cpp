// GptParams: Megatron's parameter order and count (12h² + 13h per layer plus embeddings and the
// final norm), the shard of each kind on each tensor-parallel rank (checked element by element
// against hand-derived positions; the shards of all ranks tile the full tensor exactly once),
// decay flags, and initialization that does not depend on the layout.
#include "exec/model/gpt_params.hpp"

#include "exec/model/init_rng.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "tests/src/model/test_gpt.hpp"

namespace mplan::exec {
namespace {

// gpt(layers, hidden, heads, seq, vocab), the vocabulary padded to a multiple of 4.
ModelSpec small_model() {
  ModelSpec m = test::gpt(2, 8, 4, 6, 16);
  m.make_vocab_size_divisible_by = 4;
  return m;
}

TEST(GptParams, MegatronOrderAndCount) {
  GptDims d = gpt_dims(small_model(), 1, 1, 0, false);
  GptParams p = make_gpt_params(d);
  ASSERT_EQ(p.specs.size(), 2u + 12u * 2 + 2);
  EXPECT_EQ(p.specs[0].name, "embedding.word_embeddings.weight");
  EXPECT_EQ(p.specs[1].name, "embedding.position_embeddings.weight");
  EXPECT_EQ(p.specs[2].name, "decoder.layers.0.input_layernorm.weight");
  EXPECT_EQ(p.specs[4].name, "decoder.layers.0.self_attention.linear_proj.weight");
  EXPECT_EQ(p.specs[6].name, "decoder.layers.0.self_attention.linear_qkv.weight");
  EXPECT_EQ(p.specs[13].name, "decoder.layers.0.mlp.linear_fc2.bias");
  EXPECT_EQ(p.specs.back().name, "decoder.final_layernorm.bias");
  int64_t total = 0;
  for (const auto& s : p.specs) {
    total += s.rows * s.cols;
    EXPECT_EQ(s.offset % kParamAlignElems, 0) << s.name;
    EXPECT_EQ(s.weight_decay, s.ndim == 2) << s.name;  // no decay on biases and norms
  }
  const int64_t h = 8, L = 2, V = 16, S = 6;  // ffn = 4h: 12h² + 13h per layer
  EXPECT_EQ(total, V * h + S * h + L * (12 * h * h + 13 * h) + 2 * h);
}

TEST(GptParams, ShardsByHeadsInsideEachOfQkvAndTileTheFullTensor) {
  for (int64_t tp : {1, 2, 4}) {
    std::vector<std::multiset<int64_t>> seen(28);
    for (int64_t r = 0; r < tp; ++r) {
      GptDims d = gpt_dims(small_model(), 1, tp, r, false);
      GptParams p = make_gpt_params(d);
      for (size_t i = 0; i < p.specs.size(); ++i)
        for (int64_t j = 0; j < p.specs[i].local_numel(); ++j)
          seen[i].insert(full_index(p.specs[i], d, j));
      if (tp == 2 && r == 1) {
        const ParamSpec& qkv = p.specs[static_cast<size_t>(p.layers[0].qkv_w)];  // (24, 8) full
        ASSERT_EQ(qkv.local_rows, 12);
        // Local rows 0..3 are Q rows 4..7 (heads 2, 3); 4..7 are K rows 12..15; 8..11 V 20..23.
        EXPECT_EQ(full_index(qkv, d, 0), 4 * 8);
        EXPECT_EQ(full_index(qkv, d, 4 * 8 + 3), 12 * 8 + 3);
        EXPECT_EQ(full_index(qkv, d, 11 * 8 + 7), 23 * 8 + 7);
        const ParamSpec& proj = p.specs[static_cast<size_t>(p.layers[0].proj_w)];  // (8, 8)
        EXPECT_EQ(proj.local_cols, 4);
        EXPECT_EQ(full_index(proj, d, 1 * 4 + 2), 1 * 8 + 4 + 2);  // row 1, column 4 + 2
        const ParamSpec& wte = p.specs[0];                         // (16, 8): rows 8..15
        EXPECT_EQ(full_index(wte, d, 0), 8 * 8);
        const ParamSpec& fc1b = p.specs[static_cast<size_t>(p.layers[0].fc1_b)];
        EXPECT_EQ(full_index(fc1b, d, 0), 16);
        EXPECT_EQ(d.vocab_start(), 8);
      }
    }
    GptParams full = make_gpt_params(gpt_dims(small_model(), 1, 1, 0, false));
    for (size_t i = 0; i < full.specs.size(); ++i) {
      const ParamSpec& s = full.specs[i];
      int64_t copies = s.shard == ShardKind::kReplicated ? tp : 1;
      ASSERT_EQ(static_cast<int64_t>(seen[i].size()), s.rows * s.cols * copies) << s.name;
      for (int64_t e = 0; e < s.rows * s.cols; ++e)
        ASSERT_EQ(static_cast<int64_t>(seen[i].count(e)), copies) << s.name << " element " << e;
    }
  }
}

TEST(GptParams, InitIsMegatronsAndLayoutIndependent) {
  GptDims d1 = gpt_dims(small_model(), 1, 1, 0, false);
  GptDims d2 = gpt_dims(small_model(), 1, 2, 1, false);
  GptParams p1 = make_gpt_params(d1), p2 = make_gpt_params(d2);
  for (size_t i = 0; i < p1.specs.size(); ++i) {
    const ParamSpec &a = p1.specs[i], &b = p2.specs[i];
    std::vector<float> full(static_cast<size_t>(a.local_numel())),
        shard(static_cast<size_t>(b.local_numel()));
    init_param_shard(a, static_cast<int>(i), d1, 5, 0.02, 0, a.local_numel(), full.data());
    init_param_shard(b, static_cast<int>(i), d2, 5, 0.02, 0, b.local_numel(), shard.data());
    for (int64_t j = 0; j < b.local_numel(); ++j)
      ASSERT_EQ(shard[static_cast<size_t>(j)], full[static_cast<size_t>(full_index(b, d2, j))])
          << a.name;
    if (a.init == InitKind::kOne) {
      EXPECT_EQ(full[0], 1.0f);
    }
    if (a.init == InitKind::kZero) {
      EXPECT_EQ(full[0], 0.0f);
    }
  }
  // Output projections: std / sqrt(2 L) = 0.02 / 2 here; element 0 is that times the normal.
  const ParamSpec& proj = p1.specs[static_cast<size_t>(p1.layers[1].proj_w)];
  float v = 0;
  init_param_shard(proj, p1.layers[1].proj_w, d1, 5, 0.02, 0, 1, &v);
  EXPECT_FLOAT_EQ(
      v, static_cast<float>(0.01 * init_normal(5, static_cast<uint64_t>(p1.layers[1].proj_w), 0)));
  EXPECT_EQ(proj.init, InitKind::kScaledNormal);
  EXPECT_EQ(p1.specs[static_cast<size_t>(p1.layers[1].fc2_w)].init, InitKind::kScaledNormal);
  EXPECT_EQ(p1.specs[static_cast<size_t>(p1.layers[1].fc1_w)].init, InitKind::kNormal);
}

TEST(GptParams, SequenceParallelReducedAndDuplicatedFlags) {
  GptParams p = make_gpt_params(gpt_dims(small_model(), 1, 2, 0, true));
  std::set<std::string> sp;
  for (const auto& s : p.specs)
    if (s.sp_grad_reduce) sp.insert(s.name);
  // Megatron marks norms and row-parallel biases (added after the reduce-scatter).
  EXPECT_EQ(sp.size(), 2u * 6 + 2);
  EXPECT_TRUE(sp.count("decoder.layers.1.mlp.linear_fc2.bias"));
  EXPECT_TRUE(sp.count("decoder.layers.0.self_attention.linear_proj.bias"));
  EXPECT_FALSE(sp.count("decoder.layers.0.self_attention.linear_qkv.bias"));
  EXPECT_FALSE(sp.count("embedding.position_embeddings.weight"));
  EXPECT_TRUE(p.specs[1].tp_duplicated);   // position embedding
  EXPECT_FALSE(p.specs[0].tp_duplicated);  // vocab-parallel
}

}  // namespace
}  // namespace mplan::exec
