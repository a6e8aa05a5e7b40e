// Activation memory stored for the backward pass, per transformer layer and micro-batch on one
// GPU, after Korthikanti et al. 2022 ("Reducing Activation Recomputation in Large Transformer
// Models", Section 4 and Table 2), generalised to GQA, SwiGLU, ffn != 4h, MoE, context
// parallelism, flash attention and dropout switched off; plus the first- and last-stage extras.
// Invariant: for a GPT layer (MHA, GeLU, ffn = 4h, dropout, materialized scores) the total equals
// Table 2: sbh(10 + 24/t + 5as/(ht)) with TP, sbh(34/t + 5as/(ht)) with SP, 34 sbh/t with SP and
// selective recompute, sbh(10 + 24/t) with selective recompute alone, 2 sbh with full recompute.
#pragma once

#include <cstdint>

#include "src/parallel/parallel_config.hpp"
#include "src/plan/training_config.hpp"

namespace mplan::cost {

struct LayerActivationShape {
  int64_t seq_length = 0;    // s: the full sequence (divided by cp here)
  int64_t micro_batch = 1;   // b
  int64_t hidden = 0;        // h
  int64_t heads = 0;         // a
  int64_t query_groups = 0;  // g (== a: multi-head attention)
  int64_t head_dim = 0;      // d (kv_channels); a·d is the query projection width
  int64_t ffn_hidden = 0;    // F of the dense MLP
  bool gated_mlp = false;    // SwiGLU: FC1 produces 2F
  int64_t tp = 1;
  int64_t cp = 1;
  bool sequence_parallel = false;
  Recompute recompute = Recompute::kNone;
  // With selective recompute, the modules it runs again (RecomputeModule bits, Megatron's
  // --recompute-modules); each drops what it recomputes (docs/cost-model.md, "Recompute modules").
  uint32_t recompute_modules = kRecomputeCoreAttn;
  // Transformer Engine's layer spec fuses a dense layer's norms into the QKV and FC1 linears
  // (LayerNormLinear) and MLA's input norm into its down projections: only the MoE pre-MLP norm is
  // a module of its own, the only one "layernorm" recompute then applies to. Megatron's local
  // spec keeps every norm separate.
  bool norms_fused = false;
  bool flash_attention = false;   // scores never stored (as with selective recompute)
  bool attention_dropout = true;  // Korthikanti's setting; p = 0 stores no mask
  bool hidden_dropout = true;
  int64_t bytes_per_element = 2;  // activations in bf16/fp16
  // fp8 / fp4 layers: bytes per element (with scales) of the quantized GEMM inputs Transformer
  // Engine keeps for the backward instead of the 16-bit ones (QKV, FC1, FC2 and the experts'
  // inputs; the projection's quantized input beside the 16-bit context the attention keeps).
  // 0: a 16-bit layer.
  double gemm_input_bytes = 0;
  // Multi-latent attention (0 ranks: standard attention): the latents kept for the up
  // projections and their norms replace the QKV input; Q and K are heads x (qk + RoPE) wide,
  // V and the context heads x v.
  bool mla = false;
  int64_t q_lora_rank = 0, kv_lora_rank = 0, qk_head_dim = 0, qk_pos_emb_head_dim = 0,
          v_head_dim = 0;

  // MoE layer: routed experts (and optional shared experts) replace the dense MLP.
  bool moe = false;
  int64_t num_experts = 0;
  int64_t topk = 0;
  int64_t moe_ffn_hidden = 0;     // F per expert
  int64_t shared_ffn_hidden = 0;  // 0: no shared expert
  int64_t etp = 1;                // expert tensor parallel size
};

struct LayerActivationBytes {
  int64_t checkpoint = 0;  // full recompute: the layer input, the only tensor kept
  int64_t norms = 0;       // inputs of the two norms
  int64_t attention = 0;   // QKV input, Q/K/V, scores (when stored), context, dropout mask
  int64_t mlp = 0;         // FC1 input, activation input/output, dropout mask (or the MoE parts)
  int64_t total() const { return checkpoint + norms + attention + mlp; }
};

// Bytes kept from the forward of one layer until its backward, for one micro-batch.
LayerActivationBytes layer_activation_bytes(const LayerActivationShape& s);

// Fine-grained activation offloading (--offload-modules; Megatron-LM
// core/pipeline_parallel/fine_grained_activation_offload.py, transformer_layer.py): the bytes of
// the input each module saves for its backward, of what the layer keeps after recompute, per
// micro-batch (0 where the layer has no such module: attn_norm and a dense layer's mlp_norm are
// IdentityOp when Transformer Engine fuses the norm into the linear after it, whose input
// qkv_linear then offloads with the norm's input; expert_fc1 and moe_act only in MoE layers).
struct OffloadableBytes {
  int64_t attn_norm = 0, qkv_linear = 0, core_attn = 0, attn_proj = 0, mlp_norm = 0;
  int64_t expert_fc1 = 0, moe_act = 0;
  int64_t of(uint32_t modules) const;  // the sum over the OffloadModule bits in `modules`
};
OffloadableBytes offloadable_bytes(const LayerActivationShape& s);

// First pipeline stage, per micro-batch: token ids (int64) and the embedding dropout mask, as
// Megatron's estimator counts them (megatron/training/theoretical_memory_usage.py): 8sb + sbh,
// divided by t with sequence parallelism.
int64_t embedding_activation_bytes(const LayerActivationShape& s);
// Last pipeline stage, per micro-batch: final norm input and output-layer input (2sbh each,
// divided by t with sequence parallelism) and the fp32 logits of the vocabulary-parallel cross
// entropy, 4·s·b·V/t (Megatron's estimator: 4sbh(1 + V/h)/t with SP).
int64_t output_layer_activation_bytes(const LayerActivationShape& s, int64_t padded_vocab);

}  // namespace mplan::cost
