// Activation bytes per layer and micro-batch against Korthikanti et al. 2022, Table 2 (exact
// expressions for GPT layers), their Figure 1 totals for the 22B model, and hand counts for the
// generalised cases (GQA + SwiGLU, MoE, context parallelism, first/last stage extras).
#include "sim/cost/activation_memory.hpp"

#include <gtest/gtest.h>

namespace mplan::cost {
namespace {

// The 22B GPT of Korthikanti et al. Table 3: h 6144, a 64, s 2048, micro-batch 4.
LayerActivationShape gpt22b(int64_t t) {
  LayerActivationShape s;
  s.seq_length = 2048;
  s.micro_batch = 4;
  s.hidden = 6144;
  s.heads = 64;
  s.query_groups = 64;
  s.head_dim = 96;
  s.ffn_hidden = 4 * 6144;
  s.tp = t;
  return s;
}

constexpr int64_t kS = 2048, kB = 4, kH = 6144, kA = 64;
constexpr int64_t kSbh = kS * kB * kH;        // 50331648
constexpr int64_t kAs2b = kA * kS * kS * kB;  // 1073741824

class Table2 : public ::testing::TestWithParam<int64_t> {};

TEST_P(Table2, TensorParallelOnly) {
  const int64_t t = GetParam();
  // sbh (10 + 24/t + 5as/(ht))
  EXPECT_EQ(layer_activation_bytes(gpt22b(t)).total(), 10 * kSbh + 24 * kSbh / t + 5 * kAs2b / t);
}

TEST_P(Table2, SequenceParallel) {
  const int64_t t = GetParam();
  LayerActivationShape s = gpt22b(t);
  s.sequence_parallel = true;
  // sbh (34/t + 5as/(ht))
  EXPECT_EQ(layer_activation_bytes(s).total(), 34 * kSbh / t + 5 * kAs2b / t);
}

TEST_P(Table2, Fp8KeepsTheGemmInputsQuantized) {
  // Transformer Engine keeps the QKV, FC1 and FC2 inputs quantized (1 byte instead of 2:
  // sbh + sbh + 4sbh less, per t with sequence parallelism) and the projection's quantized input
  // beside the 16-bit context (sbh more): 34 - 5 = 29 sbh/t.
  const int64_t t = GetParam();
  LayerActivationShape s = gpt22b(t);
  s.sequence_parallel = true;
  s.gemm_input_bytes = 1;  // tensorwise / delayed scaling
  EXPECT_EQ(layer_activation_bytes(s).total(), 29 * kSbh / t + 5 * kAs2b / t);
  // MXFP8: 1 + 1/32 bytes: 34 - 6 (2 - 33/32) + 33/32 = 935/32 sbh/t.
  s.gemm_input_bytes = 1.03125;
  EXPECT_EQ(layer_activation_bytes(s).total(), 935 * kSbh / 32 / t + 5 * kAs2b / t);
  // Full recompute keeps only the 16-bit layer input.
  s.recompute = Recompute::kFull;
  EXPECT_EQ(layer_activation_bytes(s).total(), 2 * kSbh / t);
}

// DeepSeek-V3's attention: h 7168, a 128, q_r 1536, k_r 512, d_n 128, d_r 64, d_v 128, s 4096,
// b 1, t 1, flash, no dropout.
LayerActivationShape deepseek_v3_attention() {
  LayerActivationShape s = gpt22b(1);
  s.seq_length = 4096;
  s.micro_batch = 1;
  s.hidden = 7168;
  s.heads = 128;
  s.query_groups = 128;
  s.head_dim = 128;
  s.flash_attention = true;
  s.attention_dropout = s.hidden_dropout = false;
  s.mla = true;
  s.q_lora_rank = 1536;
  s.kv_lora_rank = 512;
  s.qk_head_dim = 128;
  s.qk_pos_emb_head_dim = 64;
  s.v_head_dim = 128;
  return s;
}

TEST(ActivationMemory, MultiLatentAttentionKeepsLatentsAndWiderQk) {
  // h 7168, a 128, q_r 1536, k_r 512, d_n 128, d_r 64, d_v 128 (DeepSeek-V3), s 4096, b 1, t 1,
  // flash, no dropout: x (2sbh), each latent before and after its norm (2·2·sb·(q_r + k_r)),
  // Q and K (2·2·sb·a·192), V and the context (2·2·sb·a·128).
  LayerActivationShape s = deepseek_v3_attention();
  const int64_t sb = 4096;
  EXPECT_EQ(layer_activation_bytes(s).attention,
            2 * sb * 7168 + 4 * sb * (1536 + 512) + 4 * sb * 128 * 192 + 4 * sb * 128 * 128);
}

TEST_P(Table2, SelectiveRecompute) {
  const int64_t t = GetParam();
  LayerActivationShape s = gpt22b(t);
  s.recompute = Recompute::kSelective;
  EXPECT_EQ(layer_activation_bytes(s).total(), 10 * kSbh + 24 * kSbh / t);  // sbh (10 + 24/t)
  s.sequence_parallel = true;
  EXPECT_EQ(layer_activation_bytes(s).total(), 34 * kSbh / t);  // sbh · 34/t
}

TEST_P(Table2, RecomputeModulesDropWhatTheyRunAgain) {
  // Sequence parallel, Megatron's local spec (every norm a module of its own). Per sbh/t: norms
  // 2 + 2; attention: QKV input 2, Q and K 4, V 2, context 2, dropout mask 1; MLP: FC1 input 2,
  // GeLU input 8, FC2 input 8, dropout mask 1; the scores 5as/(ht) unless core_attn is recomputed.
  const int64_t t = GetParam();
  LayerActivationShape s = gpt22b(t);
  s.sequence_parallel = true;
  s.recompute = Recompute::kSelective;
  s.recompute_modules = kRecomputeMlp;  // scores kept; GeLU and FC2 inputs dropped: 34 - 16
  EXPECT_EQ(layer_activation_bytes(s).total(), 18 * kSbh / t + 5 * kAs2b / t);
  s.recompute_modules = kRecomputeCoreAttn | kRecomputeMlp;
  EXPECT_EQ(layer_activation_bytes(s).total(), 18 * kSbh / t);
  s.recompute_modules = kRecomputeCoreAttn | kRecomputeLayernorm;  // QKV and FC1 inputs: 34 - 4
  EXPECT_EQ(layer_activation_bytes(s).total(), 30 * kSbh / t);
  // Transformer Engine's LayerNormLinear: no norm module to recompute; mlp also drops the fused
  // norm's output, the FC1 input: 34 - 18.
  s.norms_fused = true;
  EXPECT_EQ(layer_activation_bytes(s).total(), 34 * kSbh / t);
  s.recompute_modules = kRecomputeCoreAttn | kRecomputeMlp;
  EXPECT_EQ(layer_activation_bytes(s).total(), 16 * kSbh / t);
  // Without selective granularity the modules change nothing.
  s.recompute = Recompute::kNone;
  EXPECT_EQ(layer_activation_bytes(s).total(), 34 * kSbh / t + 5 * kAs2b / t);
}

TEST_P(Table2, FullRecompute) {
  LayerActivationShape s = gpt22b(GetParam());
  s.recompute = Recompute::kFull;
  EXPECT_EQ(layer_activation_bytes(s).total(), 2 * kSbh);  // sbh · 2
  EXPECT_EQ(layer_activation_bytes(s).checkpoint, 2 * kSbh);
}

TEST_P(Table2, FlashAttentionDropsTheScoreTerm) {
  const int64_t t = GetParam();
  LayerActivationShape s = gpt22b(t);
  s.flash_attention = true;
  EXPECT_EQ(layer_activation_bytes(s).total(), 10 * kSbh + 24 * kSbh / t);
  s.sequence_parallel = true;
  EXPECT_EQ(layer_activation_bytes(s).total(), 34 * kSbh / t);
}

INSTANTIATE_TEST_SUITE_P(TensorParallelSizes, Table2, ::testing::Values(1, 2, 4, 8));

TEST(ActivationMemory, OffloadModulesAreTheInputsModulesSave) {
  // The 22B layer with flash attention, no dropout: Korthikanti's terms in units of sbh:
  // norms 2 + 2, QKV input 2, Q and K 4, V 2, context 2 (each / t but the norms and QKV input).
  LayerActivationShape s = gpt22b(2);
  s.flash_attention = true;
  s.attention_dropout = s.hidden_dropout = false;
  OffloadableBytes o = offloadable_bytes(s);  // Megatron's local spec: every norm a module
  EXPECT_EQ(o.attn_norm, 2 * kSbh);
  EXPECT_EQ(o.mlp_norm, 2 * kSbh);
  EXPECT_EQ(o.qkv_linear, 2 * kSbh);
  EXPECT_EQ(o.core_attn, 6 * kSbh / 2);
  EXPECT_EQ(o.attn_proj, 2 * kSbh / 2);
  EXPECT_EQ(o.expert_fc1 + o.moe_act, 0);  // a dense layer
  EXPECT_EQ(o.of(kOffloadCoreAttn | kOffloadAttnProj), 8 * kSbh / 2);
  EXPECT_EQ(o.of(0), 0);
  // Transformer Engine's spec: the norms are fused into QKV and FC1 (IdentityOp modules); the
  // QKV linear keeps the norm's input beside its own.
  s.norms_fused = true;
  o = offloadable_bytes(s);
  EXPECT_EQ(o.attn_norm, 0);
  EXPECT_EQ(o.mlp_norm, 0);
  EXPECT_EQ(o.qkv_linear, 4 * kSbh);
  // Full recompute keeps the checkpoint alone: nothing to offload.
  s.recompute = Recompute::kFull;
  EXPECT_EQ(offloadable_bytes(s).of(0x7f), 0);
}

TEST(ActivationMemory, NoParallelismIs34PlusScores) {
  // Section 4.1: sbh (34 + 5as/h); the attention block 11sbh + 5as^2b, MLP 19sbh, norms 4sbh.
  LayerActivationBytes b = layer_activation_bytes(gpt22b(1));
  EXPECT_EQ(b.total(), 34 * kSbh + 5 * kAs2b);
  EXPECT_EQ(b.attention, 11 * kSbh + 5 * kAs2b);
  EXPECT_EQ(b.mlp, 19 * kSbh);
  EXPECT_EQ(b.norms, 4 * kSbh);
}

TEST(ActivationMemory, Figure1TotalsFor22B) {
  // Korthikanti et al. Figure 1, 22B (t 8, p 1, 48 layers): activations 59.25 GiB per GPU with
  // tensor parallelism alone, 9.5625 GiB with sequence parallelism and selective recompute
  // (values from shared/anchors/published_calibration.json, analytic_references).
  constexpr int64_t kGiB = int64_t{1} << 30;
  LayerActivationShape s = gpt22b(8);
  EXPECT_EQ(48 * layer_activation_bytes(s).total() * 10000 / kGiB, 592500);  // 59.25 GiB
  s.sequence_parallel = true;
  s.recompute = Recompute::kSelective;
  EXPECT_EQ(48 * layer_activation_bytes(s).total() * 10000 / kGiB, 95625);  // 9.5625 GiB
}

TEST(ActivationMemory, DropoutOffStoresNoMasksAndNoSecondScoreCopy) {
  LayerActivationShape s = gpt22b(1);
  s.attention_dropout = false;
  s.hidden_dropout = false;
  // Without masks (2 sbh, as^2b) and the dropout output (2 as^2b): 32 sbh + 2 as^2b.
  EXPECT_EQ(layer_activation_bytes(s).total(), 32 * kSbh + 2 * kAs2b);
}

TEST(ActivationMemory, GroupedQueryAttentionWithSwiGlu) {
  // Llama-like: s 4096, b 1, h 4096, 32 heads of 128, 8 query groups, ffn 14336 SwiGLU; t 4 with
  // sequence parallelism, flash attention, no dropout. In units of sbh/4 (sbh = 2^24):
  // norms 2 + 2; attention: QKV input 2, Q 2, K 0.5, V 0.5, context 2 = 7;
  // MLP: FC1 input 2, SwiGLU input 2 · 2 · 14336/4096 = 14, FC2 input 7 = 23.
  LayerActivationShape s;
  s.seq_length = 4096;
  s.micro_batch = 1;
  s.hidden = 4096;
  s.heads = 32;
  s.query_groups = 8;
  s.head_dim = 128;
  s.ffn_hidden = 14336;
  s.gated_mlp = true;
  s.tp = 4;
  s.sequence_parallel = true;
  s.flash_attention = true;
  s.attention_dropout = s.hidden_dropout = false;
  const int64_t unit = (int64_t{1} << 24) / 4;
  LayerActivationBytes b = layer_activation_bytes(s);
  EXPECT_EQ(b.norms, 4 * unit);
  EXPECT_EQ(b.attention, 7 * unit);
  EXPECT_EQ(b.mlp, 23 * unit);
}

TEST(ActivationMemory, MixtureOfExperts) {
  // s 4096, b 1, h 4096, t 2 with SP, 8 experts top-2 of ffn 14336 SwiGLU, etp 1, flash, no
  // dropout. Tokens on the rank: 2048; routed copies: 4096. MLP part:
  //   router input 2 · 2048 · 4096 = 16777216; router probabilities 4 · 2048 · 8 = 65536;
  //   dispatched tokens 2 · 4096 · 4096 = 33554432; SwiGLU input 2 · 4096 · 28672 = 234881024;
  //   FC2 input 2 · 4096 · 14336 = 117440512; expert outputs for the combine 2 · 2048 · 2 · 4096
  //   = 33554432. Sum 436273152.
  LayerActivationShape s;
  s.seq_length = 4096;
  s.micro_batch = 1;
  s.hidden = 4096;
  s.heads = 32;
  s.query_groups = 8;
  s.head_dim = 128;
  s.gated_mlp = true;
  s.tp = 2;
  s.sequence_parallel = true;
  s.flash_attention = true;
  s.attention_dropout = s.hidden_dropout = false;
  s.moe = true;
  s.num_experts = 8;
  s.topk = 2;
  s.moe_ffn_hidden = 14336;
  EXPECT_EQ(layer_activation_bytes(s).mlp, 436273152);
  // A shared expert of 4096 adds its SwiGLU input and FC2 input, split by t:
  // 2 · 4096 · 8192 / 2 + 2 · 4096 · 4096 / 2 = 33554432 + 16777216.
  s.shared_ffn_hidden = 4096;
  EXPECT_EQ(layer_activation_bytes(s).mlp, 436273152 + 33554432 + 16777216);
}

TEST(ActivationMemory, MoeRecomputeModules) {
  // The MixtureOfExperts shape above with a shared expert, selective recompute with flash
  // attention (core_attn changes nothing). moe_act drops the experts' FC2 input (117440512),
  // shared_experts the shared expert's inputs (33554432 + 16777216), moe everything of the MoE
  // layer but its router input (16777216); layernorm drops the pre-MLP norm's output even with
  // Transformer Engine (the MoE layer's norm is a module of its own): the router input.
  LayerActivationShape s;
  s.seq_length = 4096;
  s.micro_batch = 1;
  s.hidden = 4096;
  s.heads = 32;
  s.query_groups = 8;
  s.head_dim = 128;
  s.gated_mlp = true;
  s.tp = 2;
  s.sequence_parallel = true;
  s.flash_attention = true;
  s.attention_dropout = s.hidden_dropout = false;
  s.moe = true;
  s.num_experts = 8;
  s.topk = 2;
  s.moe_ffn_hidden = 14336;
  s.shared_ffn_hidden = 4096;
  s.norms_fused = true;
  s.recompute = Recompute::kSelective;
  const int64_t all = 436273152 + 33554432 + 16777216;
  EXPECT_EQ(layer_activation_bytes(s).mlp, all);
  s.recompute_modules = kRecomputeMoeAct;
  EXPECT_EQ(layer_activation_bytes(s).mlp, all - 117440512);
  s.recompute_modules = kRecomputeMoeAct | kRecomputeSharedExperts;
  EXPECT_EQ(layer_activation_bytes(s).mlp, all - 117440512 - 33554432 - 16777216);
  s.recompute_modules = kRecomputeMoe;
  EXPECT_EQ(layer_activation_bytes(s).mlp, 16777216);
  s.recompute_modules = kRecomputeMoe | kRecomputeLayernorm;
  EXPECT_EQ(layer_activation_bytes(s).mlp, 0);
  // Attention is untouched by the MoE modules: QKV input with the fused norm kept.
  s.recompute_modules = kRecomputeLayernorm;
  EXPECT_EQ(layer_activation_bytes(s).attention, layer_activation_bytes([&] {
                                                   LayerActivationShape u = s;
                                                   u.recompute_modules = kRecomputeCoreAttn;
                                                   return u;
                                                 }())
                                                     .attention);
}

TEST(ActivationMemory, MlaUpProjRecomputeDropsQkv) {
  // DeepSeek-V3's attention as in MultiLatentAttentionKeepsLatentsAndWiderQk: mla_up_proj drops
  // Q, K (4·sb·128·192) and V (2·sb·128·128); the context stays for the projection.
  LayerActivationShape s = deepseek_v3_attention();
  s.recompute = Recompute::kSelective;
  s.recompute_modules = kRecomputeCoreAttn | kRecomputeMlaUpProj;
  const int64_t sb = 4096;
  EXPECT_EQ(layer_activation_bytes(s).attention,
            2 * sb * 7168 + 4 * sb * (1536 + 512) + 2 * sb * 128 * 128);
}

TEST(ActivationMemory, ContextParallelSplitsTheSequence) {
  LayerActivationShape s = gpt22b(2);
  s.flash_attention = true;
  LayerActivationShape c = s;
  c.cp = 2;
  EXPECT_EQ(2 * layer_activation_bytes(c).total(), layer_activation_bytes(s).total());
  // Materialized scores with CP: each rank's s/cp queries against all s keys.
  s.flash_attention = c.flash_attention = false;
  EXPECT_EQ(layer_activation_bytes(c).total(), (10 * kSbh + 24 * kSbh / 2) / 2 + 5 * kAs2b / 4);
}

TEST(ActivationMemory, FirstAndLastStageExtras) {
  LayerActivationShape s = gpt22b(8);
  s.sequence_parallel = true;
  // Megatron's estimator (SP path, divided by t): 8sb + sbh per micro-batch on the first stage.
  EXPECT_EQ(embedding_activation_bytes(s), (8 * kS * kB + kSbh) / 8);
  // Last stage: 4sbh (1 + V/h) / t with V = 51200: 4 sbh / t + 4 sbV / t.
  EXPECT_EQ(output_layer_activation_bytes(s, 51200), 4 * kSbh / 8 + 4 * kS * kB * 51200 / 8);
}

}  // namespace
}  // namespace mplan::cost
