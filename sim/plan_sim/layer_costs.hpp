// LayerCosts: the time and memory of one transformer layer (dense and MoE), the embedding and
// the output layer with its loss, per micro-batch on one GPU of a plan — forward, backward
// (whole, or split into input- and weight-gradient passes for zero-bubble schedules), the
// attention core alone (what selective recompute runs again) — built from the cost primitives
// (sim/cost) kernel by kernel as Megatron-LM runs them, and the bytes each pass keeps or needs.
// Invariant: each Pass's items add up to its cost; a layer's backward equals its input-gradient
// plus weight-gradient passes less the tensor-parallel communication the weight-gradient GEMMs
// hide (Megatron overlaps the column-parallel input-gradient all-reduce with them).
#pragma once

#include <cstdint>

#include "sim/cost/collective_cost.hpp"
#include "sim/plan_sim/pass_cost.hpp"
#include "sim/plan_sim/simulate.hpp"
#include "sim/plan_sim/stage_groups.hpp"
#include "src/plan/plan.hpp"

namespace mplan::sim {

// Kernel-level constants of the cost model (docs/cost-model.md, "Lowering a plan").
// Norm kernels run at about half the bandwidth of a copy (H200: layernorm 0.40-0.49 of HBM
// bandwidth vs copy 0.85, reports/calibration/h200x4-2026-11-20): a norm is costed as this many
// passes over its input, forward and backward (backward: x, dy, dx, the residual-gradient add and
// the weight-gradient partial sums).
inline constexpr double kNormForwardPasses = 4;
inline constexpr double kNormBackwardPasses = 6;
// Megatron's vocabulary-parallel cross entropy (tensor_parallel/cross_entropy.py) per logit:
// forward .float() (2 + 4), max (4), subtract (4 + 4), exp (4 + 4), sum (4), divide (4 + 4) = 38
// bytes; backward scale by the loss gradient (4 + 4) and the cast back to 16 bits (4 + 2) = 14.
inline constexpr double kCrossEntropyForwardBytesPerLogit = 38;
inline constexpr double kCrossEntropyBackwardBytesPerLogit = 14;
// Optimizer step per parameter the rank updates (fp32 master weights, Adam m and v): gradient
// norm read 4; Adam read master, grad, m, v and write master, m, v 28; copy of the master weights
// to the 16-bit parameters 4 + 2; and per parameter the rank holds, zeroing its main gradient.
inline constexpr double kOptimizerBytesPerOwnedParam16 = 38;
inline constexpr double kOptimizerBytesPerOwnedParam32 = 32;
// Without gradient-accumulation fusion the 16-bit weight gradient is added to the fp32 main
// gradient by a separate kernel: read 2 + 4, write 4 bytes per parameter, every micro-batch.
inline constexpr double kGradAccumulateBytesPerParam = 10;

// The derived sizes of a plan that every cost uses (one micro-batch on one GPU).
struct PlanDims {
  int64_t e = 2;                       // bytes per activation element
  int64_t s = 0;                       // sequence length
  int64_t sl = 0;                      // s / cp: positions on this GPU
  int64_t b = 1;                       // micro-batch size
  int64_t h = 0, a = 0, g = 0, d = 0;  // hidden, heads, query groups, head dim
  int64_t ffn = 0;                     // dense FFN width F
  int64_t vocab = 0;                   // padded vocabulary
  int64_t t = 1, cp = 1;               // tensor, context parallel
  int64_t r = 1;       // t with sequence parallelism (tokens outside the TP regions split), else 1
  int64_t tokens = 0;  // T = sl·b tokens of a micro-batch on this GPU
  int64_t q_w = 0, kv_w = 0;  // a·d/t and g·d/t: query and key/value widths on this GPU
  int64_t gate = 1;           // 2 with SwiGLU (FC1 produces 2F)
  bool sp = false, flash = true, dropout = true, fused = true, bias = true, rope = false;
  bool rmsnorm = false;
  bool exec = false;  // implementation mplan: the executor's own kernels (exec/model/gpt_blocks)
  // MoE
  int64_t experts = 0, topk = 0, moe_ffn = 0, shared_ffn = 0, ep = 1, etp = 1;
  bool grouped_gemm = true, flex_dispatch = false, overlap_ep = false;
  // Multi-latent attention (0 when standard attention): ranks and head dims.
  int64_t q_lora = 0, kv_lora = 0, qk_dim = 0, rope_dim = 0, v_dim = 0;
  bool mla = false;
  // Sliding window: positions each query sees at most (left + 1; 0: full causal attention).
  int64_t window = 0;
  // Transformer Engine's layer spec (megatron-te): the norms fused into the linears after them,
  // and --tp-comm-overlap's userbuffers (only with sequence parallelism).
  bool te = false, tp_overlap = false;
  // Context parallelism's exchange (--cp-comm-type) and its all-to-all group (a2a: cp; a2a+p2p:
  // the first hierarchical size; else 1).
  CpCommType cp_comm = CpCommType::kP2p;
  int64_t cp_a2a = 1;
};
PlanDims plan_dims(const Plan& plan, const SimOptions& options);

struct LayerCosts {
  Pass fwd;        // forward
  Pass bwd;        // backward: input and weight gradients, TP communication as Megatron overlaps it
  Pass bwd_input;  // zero-bubble B: input gradients, TP communication exposed
  Pass bwd_weight;     // zero-bubble W: weight gradients
  Pass attn_fwd;       // the attention core's forward
  Pass recompute_fwd;  // what selective recompute runs again (the recompute modules' forwards)
  // Activation offloading: the host copies' exposed time after the forward (offload) and before
  // the backward (reload), for a layer whose activations are offloaded (ChunkUnit::offloaded).
  Pass offload_fwd, offload_bwd;
  int64_t offload_bytes = 0;  // bytes per micro-batch that such a layer keeps on the host
  // Bytes per micro-batch:
  int64_t act_bytes = 0;           // kept from forward to backward with the plan's recompute
                                   // (none or selective; see ckpt_bytes for full)
  int64_t act_full_bytes = 0;      // kept without any recompute
  int64_t ckpt_bytes = 0;          // full recompute: the layer input, the only tensor kept
  int64_t weight_input_bytes = 0;  // inputs of the weight-gradient GEMMs (kept until W)
  int64_t weight_dy_bytes = 0;     // zero-bubble: their output gradients, made in B, used in W
  int64_t ws_fwd_bytes = 0;        // transient during the forward (materialized scores)
  int64_t ws_bwd_bytes = 0;        // transient during the backward (activation gradients)
  int64_t dense_params = 0;        // this GPU's shard of the layer's non-expert parameters
  int64_t expert_params = 0;       // ... of its routed-expert parameters
  // Of those, the GEMM weights when the layer runs in fp8 / fp4 (0 in a 16-bit layer): what
  // the quantized weight copies, the per-step weight quantization and the fp8 all-gather count.
  int64_t lp_gemm_params = 0;
};

// The embedding (first stage) and the output layer with the loss (last stage).
struct ExtraCosts {
  Pass fwd, bwd, bwd_input, bwd_weight;
  int64_t act_bytes = 0;
  int64_t weight_input_bytes = 0;
  int64_t weight_dy_bytes = 0;
  int64_t ws_fwd_bytes = 0, ws_bwd_bytes = 0;
  int64_t params = 0;  // this GPU's shard (output: final norm + output weight unless tied, pp 1)
  int64_t expert_params = 0;  // output: the routed experts of multi-token-prediction blocks
};

struct PlanCosts {
  PlanDims dims;
  LayerCosts dense;  // in the plan's GEMM precision (fp8 / fp4 when the plan asks for it)
  LayerCosts moe;    // empty for a dense model
  ExtraCosts embedding;
  ExtraCosts output;
  // fp8 / fp4 with first_last_layers_bf16: the layers kept in 16 bits (else empty).
  bool has_bf16_layers = false;
  LayerCosts dense_bf16;
  LayerCosts moe_bf16;
  // Sliding-window attention with window_attn_skip_freq: the layers that keep full attention
  // (the fields above are the sliding-window layers; built in the plan's GEMM precision).
  bool has_full_attention_layers = false;
  LayerCosts dense_full;
  LayerCosts moe_full;
};

// The costs of layer `layer` (0-based): dense or MoE, in low precision or kept in 16 bits
// (src/plan/low_precision: layer_in_low_precision).
const LayerCosts& layer_costs_of(const PlanCosts& costs, const Plan& plan, int64_t layer);

// Costs with the groups of `groups` (tensor-, context-, expert-parallel placement). Items are
// recorded when `record_items`. `out` is overwritten; its vectors keep their capacity.
void build_plan_costs(const Plan& plan, const SimOptions& options, const StageGroups& groups,
                      bool record_items, PlanCosts& out);

// Optimizer step of a GPU: bytes it moves (kOptimizerBytesPerOwnedParam* per owned parameter,
// main-gradient zeroing per held parameter).
double optimizer_bytes(const Plan& plan, int64_t owned_params, int64_t held_params);
// Its time with the plan's implementation's set: optimizer_bytes at memory_bound_efficiency, or,
// where the set has the kinds (adamw, grad_norm, fill), the executor's kernels: the gradient norm
// over the held gradients, AdamW over the owned parameters, and the zeroing of `filled_params`
// gradients (the executor's weight-gradient GEMMs overwrite on their first write of an
// iteration; only gradients first written by adding kernels are zeroed).
int64_t optimizer_time_ns(const Plan& plan, int64_t owned_params, int64_t held_params,
                          int64_t filled_params);

}  // namespace mplan::sim
