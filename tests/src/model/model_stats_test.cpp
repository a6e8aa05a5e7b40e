// Tests of the parameter counts and FLOP formulas against numbers derived independently: the
// SC'21 parameter formula, the published parameter counts of the Llama and Mixtral releases, the
// published FLOPs of the SC'21 and MLSys'23 runs, and per-shard counts worked out by hand from
// the modules Megatron builds.
#include "src/model/model_stats.hpp"

#include <gtest/gtest.h>

#include "tests/src/model/test_gpt.hpp"

namespace mplan {
namespace {

// A GPT-3-style model (MHA, 4h GeLU MLP with biases, LayerNorm, learned positions, tied):
// gpt(layers, hidden, heads, seq, vocab).
using test::gpt;

TEST(ModelStats, Gpt3_175bMatchesTheSc21Formula) {
  // Narayanan et al. SC'21: P = 12 l h^2 (1 + 13/(12h) + (V + s)/(12 l h))
  //   = 12 l h^2 + 13 l h + V h + s h = 174,615,822,336 for l 96, h 12288, V 51200, s 2048.
  // Megatron also has the final LayerNorm (2h = 24,576), which the formula leaves out.
  ParamCounts c = count_params(load_model("gpt3-175b"));
  EXPECT_EQ(c.total(), 174615822336 + 2 * 12288);
  EXPECT_EQ(c.word_embedding, 51200LL * 12288);
  EXPECT_EQ(c.position_embedding, 2048LL * 12288);
  EXPECT_EQ(c.output_layer, 0);  // tied
  EXPECT_EQ(c.expert, 0);
  EXPECT_EQ(c.active(), c.total());
  // One layer: 12 h^2 + 13 h (QKV 3h^2+3h, proj h^2+h, fc1 4h^2+4h, fc2 4h^2+h, two LN 4h).
  LayerParams l = layer_params(load_model("gpt3-175b"), 0);
  EXPECT_EQ(l.total(), 12LL * 12288 * 12288 + 13 * 12288);
  EXPECT_EQ(l.attention, 4LL * 12288 * 12288 + 4 * 12288);
  EXPECT_EQ(l.mlp, 8LL * 12288 * 12288 + 5 * 12288);
  EXPECT_EQ(l.norms, 4 * 12288);
}

TEST(ModelStats, ReferenceWorkloadHas1_278BParameters) {
  // 24 x (12 h^2 + 13 h) + V h + s h + 2h with h 2048, V 32000, s 2048 = 1,278,332,928; the
  // PyTorch reference (tied wte/head, wpe, biased Linear layers, LayerNorms) builds the same
  // modules, and the workload is quoted as 1.27 B parameters.
  ParamCounts c = count_params(load_model("gpt3-1.3b"));
  EXPECT_EQ(c.total(), 1278332928);
}

TEST(ModelStats, LlamaReleasesMatchTheirPublishedCounts) {
  // Per layer: QKV h (q + 2 kv) + proj q h + SwiGLU 3 h ffn + two RMSNorms 2h; plus untied
  // embedding and output layer 2 V h and the final RMSNorm h. No biases.
  // Llama-2-7B: 32 x 202,383,360 + 2 x 32000 x 4096 + 4096 = 6,738,415,616 (6.74 B).
  EXPECT_EQ(count_params(load_model("llama2-7b")).total(), 6738415616);
  // Llama-2-70B: 80 x 855,654,400 + 2 x 32000 x 8192 + 8192 = 68,976,648,192 (69.0 B).
  EXPECT_EQ(count_params(load_model("llama2-70b")).total(), 68976648192);
  // Llama-3-8B: 32 x 218,112,000 + 2 x 128256 x 4096 + 4096 = 8,030,261,248 (8.03 B).
  EXPECT_EQ(count_params(load_model("llama3-8b")).total(), 8030261248);
  // Llama-3-70B: 80 x 855,654,400 + 2 x 128256 x 8192 + 8192 = 70,553,706,496 (70.6 B).
  EXPECT_EQ(count_params(load_model("llama3-70b")).total(), 70553706496);
  // Llama-3-405B: 126 x 3,187,703,808 + 2 x 128256 x 16384 + 16384 = 405,853,388,800 (405.8 B).
  EXPECT_EQ(count_params(load_model("llama3-405b")).total(), 405853388800);
}

TEST(ModelStats, LlamaLayerWithGqa) {
  // Llama-3-8B layer: QKV 4096 x (4096 + 2 x 1024) = 25,165,824; proj 16,777,216; SwiGLU
  // 3 x 4096 x 14336 = 176,160,768; norms 8192.
  LayerParams l = layer_params(load_model("llama3-8b"), 5);
  EXPECT_EQ(l.attention, 25165824 + 16777216);
  EXPECT_EQ(l.mlp, 176160768);
  EXPECT_EQ(l.norms, 8192);
  EXPECT_EQ(l.total(), 218112000);
}

TEST(ModelStats, Mixtral8x7bTotalAndActive) {
  // Per layer: attention 41,943,040; 8 experts x 3 x 4096 x 14336 = 1,409,286,144; router
  // 8 x 4096 = 32,768; norms 8192. Total 32 x 1,451,270,144 + 2 x 32000 x 4096 + 4096
  // = 46,702,792,704 (46.7 B). Active: 2 experts per token: 32 x 394,305,536 + 262,148,096
  // = 12,879,925,248 (12.9 B).
  ParamCounts c = count_params(load_model("mixtral-8x7b"));
  EXPECT_EQ(c.total(), 46702792704);
  EXPECT_EQ(c.active(), 12879925248);
  EXPECT_EQ(c.expert, 32 * 1409286144LL);
  EXPECT_EQ(c.non_expert(), 46702792704 - 32 * 1409286144LL);
  LayerParams l = layer_params(load_model("mixtral-8x7b"), 0);
  EXPECT_EQ(l.router, 32768);
  EXPECT_EQ(l.mlp, 0);
  EXPECT_EQ(l.experts, 1409286144);
  EXPECT_EQ(l.active_experts, 2 * 176160768);
}

TEST(ModelStats, MoeWithSharedExpertsBiasAndLayerFreq) {
  // A small MoE: h 8, 4 experts of ffn 4 (GeLU, biased), shared expert ffn 6, router with bias,
  // every 2nd layer MoE (layers 0 and 2 of 4).
  ModelSpec m = gpt(4, 8, 2, 16, 100);
  m.moe = MoeSpec{4, 2, 4, 6, 2};
  // Expert: fc1 8x4 + 4, fc2 4x8 + 8 = 76. Shared: 8x6 + 6 + 6x8 + 8 = 110. Router 4x8 + 4.
  LayerParams moe = layer_params(m, 2);
  EXPECT_EQ(moe.experts, 4 * 76);
  EXPECT_EQ(moe.active_experts, 2 * 76);
  EXPECT_EQ(moe.shared_experts, 110);
  EXPECT_EQ(moe.router, 36);
  EXPECT_EQ(moe.mlp, 0);
  LayerParams dense = layer_params(m, 1);
  EXPECT_EQ(dense.mlp, 8 * 32 + 32 + 32 * 8 + 8);
  EXPECT_EQ(dense.experts, 0);
  EXPECT_EQ(count_params(m).expert, 2 * 4 * 76);
}

TEST(ModelStats, VocabularyIsPaddedPerTensorParallelSize) {
  // Llama-3: 128256 = 1002 x 128 needs no padding at tp 1; at tp 8 the multiple is 1024:
  // ceil(128256 / 1024) x 1024 = 129024.
  ModelSpec m = load_model("llama3-8b");
  EXPECT_EQ(count_params(m, 1).word_embedding, 128256LL * 4096);
  EXPECT_EQ(count_params(m, 8).word_embedding, 129024LL * 4096);
  EXPECT_EQ(count_params(m, 8).output_layer, 129024LL * 4096);
}

TEST(ModelStats, ReferenceWorkloadShardsAtTp2Pp2) {
  // h 2048, 24 layers over 2 stages. Per rank and layer: attention (4h^2 + 3h)/2 + h (proj bias
  // whole) = 8,393,728; MLP (8h^2 + 4h)/2 + h (fc2 bias whole) = 16,783,360; LayerNorms 4h =
  // 8192; 25,185,280 per layer, 302,223,360 for 12 layers. Vocabulary 32000 (a multiple of
  // 256): 16000 x 2048 = 32,768,000 per rank.
  ModelSpec m = load_model("gpt3-1.3b");
  ParallelConfig p;
  p.tp = 2;
  p.pp = 2;
  p.dp = 1;
  StageParams first = rank_params(m, p, 0);
  EXPECT_EQ(first.num_layers, 12);
  EXPECT_EQ(first.embedding, 32768000 + 2048 * 2048);  // + position embedding, whole
  EXPECT_EQ(first.total(), 302223360 + 32768000 + 4194304);
  StageParams last = rank_params(m, p, 1);
  // Final LayerNorm 4096 and the last stage's copy of the tied output weight.
  EXPECT_EQ(last.embedding, 32768000);
  EXPECT_EQ(last.total(), 302223360 + 4096 + 32768000);
  EXPECT_EQ(last.expert, 0);
  // Unsharded stages add up to the model plus the last stage's copy of the tied weight.
  EXPECT_EQ(stage_params(m, p, 0).total() + stage_params(m, p, 1).total(),
            count_params(m, 2).total() + 32000LL * 2048);
}

TEST(ModelStats, TiedEmbeddingOnOneStageIsCountedOnce) {
  ModelSpec m = load_model("gpt3-1.3b");
  ParallelConfig p;
  EXPECT_EQ(stage_params(m, p, 0).total(), count_params(m).total());
  EXPECT_EQ(rank_params(m, p, 0).total(), 1278332928);
}

TEST(ModelStats, MixtralShardsOverExpertParallel) {
  // ep 8, pp 4: 8 layers per stage, one local expert per layer (3 x 4096 x 14336 = 176,160,768).
  // Non-expert per layer: attention 41,943,040 + router 32,768 + norms 8192 = 41,984,000.
  ModelSpec m = load_model("mixtral-8x7b");
  ParallelConfig p;
  p.pp = 4;
  p.ep = 8;
  p.dp = 8;
  StageParams s0 = rank_params(m, p, 0);
  EXPECT_EQ(s0.num_layers, 8);
  EXPECT_EQ(s0.expert, 8 * 176160768LL);
  EXPECT_EQ(s0.non_expert, 8 * 41984000LL + 32000LL * 4096);
  StageParams s1 = rank_params(m, p, 1);
  EXPECT_EQ(s1.non_expert, 8 * 41984000LL);
  StageParams s3 = rank_params(m, p, 3);
  EXPECT_EQ(s3.non_expert, 8 * 41984000LL + 4096 + 32000LL * 4096);
  // etp 2 on top: each expert's fc1 and fc2 halve (no biases in Mixtral).
  p.etp = 2;
  p.dp = 8;
  EXPECT_EQ(rank_params(m, p, 1).expert, 8 * 176160768LL / 2);
  // tp 2: attention halves, router and norms stay whole; experts follow etp, not tp.
  p.tp = 2;
  p.etp = 1;
  EXPECT_EQ(rank_params(m, p, 1).non_expert, 8 * (41943040LL / 2 + 32768 + 8192));
  EXPECT_EQ(rank_params(m, p, 1).expert, 8 * 176160768LL);
}

TEST(ModelStats, BiasesOfRowParallelLayersStayWholeOnEveryTpRank) {
  // Small biased model, h 8, 2 heads, ffn 32, tp 2: attention (8x24 + 24 + 8x8)/2 + 8 = 148;
  // MLP (8x32 + 32 + 32x8)/2 + 8 = 280; LayerNorms 32. Vocab 100 pads to 256 (128 x tp 2):
  // 128 x 8 per rank; positions 16 x 8 whole.
  ModelSpec m = gpt(2, 8, 2, 16, 100);
  ParallelConfig p;
  p.tp = 2;
  StageParams s = rank_params(m, p, 0);
  EXPECT_EQ(s.total(), 2 * (148 + 280 + 32) + 128 * 8 + 16 * 8 + 16);
}

TEST(ModelStats, UnevenStagesCountTheirOwnLayers) {
  // Llama-3-8B, pp 4 with 6 layers on the first stage and 8 on the last: the middle two take
  // (32 - 14) / 2 = 9 each.
  ModelSpec m = load_model("llama3-8b");
  ParallelConfig p;
  p.pp = 4;
  p.decoder_first_pipeline_num_layers = 6;
  p.decoder_last_pipeline_num_layers = 8;
  EXPECT_EQ(stage_params(m, p, 0).num_layers, 6);
  EXPECT_EQ(stage_params(m, p, 1).num_layers, 9);
  EXPECT_EQ(stage_params(m, p, 2).num_layers, 9);
  EXPECT_EQ(stage_params(m, p, 3).num_layers, 8);
  EXPECT_EQ(stage_params(m, p, 1).total(), 9 * 218112000LL);
  EXPECT_EQ(stage_params(m, p, 0).total(), 6 * 218112000LL + 128256LL * 4096);
  EXPECT_EQ(stage_params(m, p, 3).total(), 8 * 218112000LL + 4096 + 128256LL * 4096);
}

// ---- FLOPs ---------------------------------------------------------------------------------

double rel(double a, double b) { return std::abs(a - b) / std::abs(b); }

TEST(ModelStats, Sc21Eq3MatchesThePublishedCalibrationRuns) {
  // SC'21 Table 1 runs: FLOPs per iteration from eq. (3) as derived in the calibration data
  // (5 significant digits): 1.7B (l 24, h 2304, B 512): 1.54668e16; 18.4B (40, 6144, 1024):
  // 3.2484e17; 1T (128, 25600, 3072): 5.13905e19. V 51200, s 2048.
  EXPECT_LT(rel(sc21_eq3_flops(gpt(24, 2304, 24, 2048, 51200), 512), 1.54668e16), 1e-5);
  EXPECT_LT(rel(sc21_eq3_flops(gpt(40, 6144, 48, 2048, 51200), 1024), 3.2484e17), 1e-5);
  EXPECT_LT(rel(sc21_eq3_flops(gpt(128, 25600, 160, 2048, 51200), 3072), 5.13905e19), 1e-5);
}

TEST(ModelStats, KorthikantiEq7MatchesTheMlsys23Runs) {
  // MLSys'23 Table 5: model FLOPs per iteration, 175B (96, 12288, B 64): 1.41092e17;
  // 530B (105, 20480, B 280): 1.85223e18.
  EXPECT_LT(rel(korthikanti_model_flops(gpt(96, 12288, 96, 2048, 51200), 64), 1.41092e17), 1e-5);
  EXPECT_LT(rel(korthikanti_model_flops(gpt(105, 20480, 128, 2048, 51200), 280), 1.85223e18), 1e-5);
  // Eq. (8) adds one more s/(6h) term: the recomputed attention scores.
  ModelSpec m = gpt(96, 12288, 96, 2048, 51200);
  double b = 64, s = 2048, l = 96, h = 12288;
  EXPECT_LT(rel(korthikanti_selective_hardware_flops(m, 64) - korthikanti_model_flops(m, 64),
                72 * b * s * l * h * h * s / (6 * h)),
            1e-12);
}

TEST(ModelStats, MegatronFlopsForGptIsEq7WithACausalAttentionScoreTerm) {
  // For a GPT shape Megatron's formula is 72 B s l h^2 (1 + s/(12h) + V/(12 l h)): eq. (7) less
  // half the score term (6 B s^2 h l). Reference workload, B 64: 1,080,682,491,150,336.
  ModelSpec m = load_model("gpt3-1.3b");
  EXPECT_LT(rel(megatron_flops(m, 64), 1080682491150336.0), 1e-12);
  double b = 64, s = 2048, l = 24, h = 2048;
  EXPECT_LT(rel(korthikanti_model_flops(m, 64) - megatron_flops(m, 64), 6 * b * s * s * h * l),
            1e-9);
}

TEST(ModelStats, MegatronFlopsWithGqaSwigluAndMoe) {
  // Llama-3-8B, B 1: tokens 8192 x (6h x 3 ffn x 32 + 6 (h (q + 2k) + q h) x 32 + 6 h V)
  // + 8192^2 x 6 q x 32 with h 4096, ffn 14336, q 4096, k 1024, V 128256 = 421,645,529,382,912.
  EXPECT_LT(rel(megatron_flops(load_model("llama3-8b"), 1), 421645529382912.0), 1e-12);
  // Mixtral 8x7B, B 1, s 4096: the MLP term is moe_ffn 14336 x topk 2 x 3 per MoE layer:
  // 326,477,644,038,144.
  EXPECT_LT(rel(megatron_flops(load_model("mixtral-8x7b"), 1), 326477644038144.0), 1e-12);
}

TEST(ModelStats, MegatronFlopsUseThePaddedVocabulary) {
  // Llama-3-8B at tp 8: V 129024 instead of 128256: 6 x 8192 tokens x 4096 x 768 more.
  ModelSpec m = load_model("llama3-8b");
  EXPECT_LT(rel(megatron_flops(m, 1, 8) - megatron_flops(m, 1, 1), 6.0 * 8192 * 4096 * 768), 1e-9);
}

// DeepSeek-V3, counted by hand from the modules Megatron builds (RMSNorm weights, no biases):
// MLA attention per layer h·q_r + q_r + q_r·a·(d_n + d_r) + h·(k_r + d_r) + k_r + k_r·a·(d_n + d_v)
// + a·d_v·h = 187,107,328 with h 7168, a 128, q_r 1536, k_r 512, d_n 128, d_r 64, d_v 128.
TEST(ModelStats, DeepSeekV3Is671BTotal37BActive) {
  const ModelSpec m = load_model("deepseek-v3");
  const int64_t h = 7168;
  const int64_t attention = 187107328;
  const LayerParams dense = layer_params(m, 0);
  EXPECT_EQ(dense.attention, attention);
  EXPECT_EQ(dense.mlp, 3 * h * 18432);
  EXPECT_EQ(dense.norms, 2 * h);
  const LayerParams moe = layer_params(m, 3);
  EXPECT_EQ(moe.attention, attention);
  EXPECT_EQ(moe.router, 256 * h);
  EXPECT_EQ(moe.shared_experts, 3 * h * 2048);
  EXPECT_EQ(moe.experts, 256LL * 3 * h * 2048);
  EXPECT_EQ(moe.active_experts, 8LL * 3 * h * 2048);
  const ParamCounts c = count_params(m);
  // The main model: 671,026,404,352 (the report's 671B), 37.55B active (its 37B); one MTP block
  // (3 norms, eh_proj 2h·h, an MoE layer) 11,610,067,968 more.
  EXPECT_EQ(c.total() - c.mtp, 671026404352LL);
  EXPECT_EQ(c.mtp, 3 * h + 2 * h * h + moe.total());
  EXPECT_EQ(c.mtp, 11610067968LL);
  const int64_t mtp_active = c.mtp - moe.experts + moe.active_experts;
  EXPECT_EQ(c.active() - mtp_active, 37552282624LL);
  // The MTP block sits on the last stage; with pp > 1 and untied embeddings it also holds a
  // word-embedding copy there.
  ParallelConfig p;
  p.pp = 4;  // 16 + 15 + 15 + 15 layers
  p.decoder_first_pipeline_num_layers = 16;
  p.decoder_last_pipeline_num_layers = 15;
  int64_t stages = 0;
  for (int64_t r = 0; r < p.pp; ++r) stages += stage_params(m, p, r).total();
  EXPECT_EQ(stages, c.total() + 129280LL * h);
}

TEST(ModelStats, MegatronFlopsWithMlaMoePatternAndMtp) {
  // training.py's formula for DeepSeek-V3 over one 4096-token sequence, evaluated apart (62 layers
  // with the MTP one, 59 of them MoE, logits twice): 1,064,931,126,411,264 FLOPs, 2.60e11 per
  // token (the Megatron-Bridge tables' 725 TFLOP/s per GPU at 2790 tokens/s: 2.60e11).
  EXPECT_LT(rel(megatron_flops(load_model("deepseek-v3"), 1), 1064931126411264.0), 1e-12);
  // Without q compression: q_term h·a·(d_n + d_r) in place of the LoRA pair.
  ModelSpec m = load_model("deepseek-v3");
  m.mtp_num_layers = 0;
  const double with_lora = megatron_flops(m, 1);
  m.mla->q_lora_rank = 0;
  const double h = 7168, a = 128, qr = 1536;
  const double dq = (h * a * 192) - qr * (h + a * 192 + 1);  // per token per layer
  EXPECT_LT(rel(megatron_flops(m, 1) - with_lora, 6 * 4096 * 61 * dq), 1e-9);
  // Sliding windows do not change Megatron's count.
  ModelSpec w = m;
  w.window_size = std::array<int64_t, 2>{128, 0};
  EXPECT_EQ(megatron_flops(w, 1), megatron_flops(m, 1));
}

}  // namespace
}  // namespace mplan
