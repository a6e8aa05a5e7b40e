// Layer costs, kernel by kernel in the order Megatron-LM's TransformerLayer runs them (input norm,
// QKV, attention core, projection, bias-dropout-add, pre-MLP norm, FC1, activation, FC2,
// bias-dropout-add), with the tensor-parallel collectives of its ColumnParallelLinear /
// RowParallelLinear (megatron/core/tensor_parallel/layers.py and mappings.py):
// - forward: an all-reduce after each row-parallel GEMM; with sequence parallelism an all-gather
//   before each column-parallel GEMM and a reduce-scatter after each row-parallel one;
// - backward: the row-parallel layers' backward is the identity (all-gather of the output
//   gradient with sequence parallelism); the column-parallel layers all-reduce (reduce-scatter)
//   their input gradient asynchronously while the weight-gradient GEMM runs, and with sequence
//   parallelism all-gather their saved input again while the input-gradient GEMM runs
//   (LinearWithGradAccumulationAndAsyncCommunication.backward): those collectives cost only what
//   the GEMM beside them does not hide.
// Sources of the kernel byte counts are in layer_costs.hpp and docs/cost-model.md.
#include "sim/plan_sim/layer_costs.hpp"

#include <algorithm>
#include <cmath>
#include <optional>

#include "sim/cost/activation_memory.hpp"
#include "sim/cost/attention_cost.hpp"
#include "sim/cost/gemm_cost.hpp"
#include "sim/cost/kernel_overhead.hpp"
#include "sim/cost/memory_bound_cost.hpp"
#include "sim/cost/model_state_memory.hpp"
#include "sim/cost/moe_routing.hpp"
#include "sim/cost/offload_cost.hpp"
#include "sim/cost/precision_cost.hpp"
#include "sim/cost/time_ns.hpp"
#include "src/common/error.hpp"
#include "src/model/tensor_layout.hpp"
#include "src/plan/low_precision.hpp"

namespace mplan::sim {

const char* to_string(Cat c) {
  switch (c) {
    case Cat::kCompute:
      return "compute";
    case Cat::kTp:
      return "tp";
    case Cat::kCp:
      return "cp";
    case Cat::kEp:
      return "ep";
    case Cat::kDp:
      return "dp";
    case Cat::kOptimizer:
      return "optimizer";
  }
  return "?";
}

PlanDims plan_dims(const Plan& plan, const SimOptions& options) {
  const ModelSpec& m = plan.model;
  const ParallelConfig& p = plan.parallel;
  PlanDims d;
  d.e = bytes_per_element(plan.training.precision);
  d.s = m.seq_length;
  d.cp = p.cp;
  d.sl = m.seq_length / p.cp;
  d.b = p.micro_batch_size;
  d.h = m.hidden_size;
  d.a = m.num_attention_heads;
  d.g = m.num_query_groups;
  d.d = m.kv_channels;
  d.ffn = m.ffn_hidden_size;
  d.vocab = m.padded_vocab_size(p.tp);
  d.t = p.tp;
  d.sp = p.sequence_parallel && p.tp > 1;
  d.r = d.sp ? p.tp : 1;
  d.tokens = d.sl * d.b;
  d.q_w = d.a * d.d / d.t;
  d.kv_w = d.g * d.d / d.t;
  d.gate = m.activation == Activation::kSwiglu ? 2 : 1;
  d.flash = plan.training.attention_backend == AttentionBackend::kFlash;
  // mplan's executor has no dropout and fuses what Megatron's fusion flags fuse (bias epilogues,
  // gradients accumulated straight into the fp32 main gradients).
  d.exec = plan.training.implementation == Implementation::kMplan;
  d.dropout = options.dropout && !d.exec;
  d.fused = options.fused_kernels || d.exec;
  d.rmsnorm = m.normalization == Normalization::kRmsNorm;
  d.bias = m.add_bias_linear;
  d.rope = m.position_embedding == PositionEmbedding::kRope;
  if (m.moe) {
    d.experts = m.moe->num_experts;
    d.topk = m.moe->topk;
    d.moe_ffn = m.moe->moe_ffn_hidden_size;
    d.shared_ffn = m.moe->shared_expert_ffn_hidden_size;
    d.ep = p.ep;
    d.etp = p.etp;
    d.grouped_gemm = m.moe->moe_grouped_gemm;
    d.flex_dispatch = m.moe->moe_token_dispatcher_type == MoeDispatcher::kFlex;
    d.overlap_ep = m.moe->overlap_moe_expert_parallel_comm && p.ep > 1;
  }
  if (m.mla) {
    d.mla = true;
    d.q_lora = m.mla->q_lora_rank;
    d.kv_lora = m.mla->kv_lora_rank;
    d.qk_dim = m.mla->qk_head_dim;
    d.rope_dim = m.mla->qk_pos_emb_head_dim;
    d.v_dim = m.mla->v_head_dim;
    d.q_w = d.a * (d.qk_dim + d.rope_dim) / d.t;  // this GPU's queries (and keys) width
    d.kv_w = d.a * d.v_dim / d.t;                 // its values width
  }
  if (m.window_size && (*m.window_size)[0] >= 0 && (*m.window_size)[0] + 1 < m.seq_length)
    d.window = (*m.window_size)[0] + 1;
  d.te = plan.training.implementation == Implementation::kMegatronTe;
  d.tp_overlap = d.te && d.sp && p.tp_comm_overlap;
  d.cp_comm = p.cp_comm_type;
  d.cp_a2a = cp_a2a_size(p);
  return d;
}

double optimizer_bytes(const Plan& plan, int64_t owned_params, int64_t held_params) {
  const bool fp32 = plan.training.precision == Precision::kFp32;
  const double per_owned = fp32 ? kOptimizerBytesPerOwnedParam32 : kOptimizerBytesPerOwnedParam16;
  const double grad_bytes = cost::bytes_per_parameter(plan.training).grads;
  return per_owned * static_cast<double>(owned_params) +
         grad_bytes * static_cast<double>(held_params);
}

int64_t optimizer_time_ns(const Plan& plan, int64_t owned_params, int64_t held_params,
                          int64_t filled_params) {
  const GpuSpec& gpu = plan.cluster.gpu_for(plan.training.implementation);
  const bool kinds = cost::has_kind_rate(gpu, MemKernel::kAdamW) &&
                     cost::has_kind_rate(gpu, MemKernel::kGradNorm) &&
                     cost::has_kind_rate(gpu, MemKernel::kFill);
  if (!kinds)
    return cost::to_ns(cost::kernel_ns(
        gpu,
        cost::memory_bound_seconds(gpu, optimizer_bytes(plan, owned_params, held_params)) * 1e9,
        1));
  // The executor's step: the gradient norm over the held gradients, AdamW over the owned
  // parameters, the gradients that adding kernels write first zeroed.
  const double owned = static_cast<double>(owned_params), held = static_cast<double>(held_params);
  const double filled = static_cast<double>(filled_params);
  const int64_t e = bytes_per_element(plan.training.precision);
  auto k = [&](MemKernel kind, double n) {
    return cost::mem_kernel_time_ns(gpu, kind, cost::mem_kernel_bytes(kind, n, 1, e), 0);
  };
  return k(MemKernel::kGradNorm, held) + k(MemKernel::kAdamW, owned) +
         (filled > 0 ? k(MemKernel::kFill, filled) : 0);
}

namespace {

using cost::CollectiveKind;

struct Ctx {
  const Plan& plan;
  const ClusterSpec& cluster;
  const GpuSpec& gpu;  // the plan's implementation's set (ClusterSpec::gpu_for)
  const PlanDims& d;
  const StageGroups& groups;
  // fp8 / fp4 layers (src/plan/low_precision): their GEMMs run at the precision's peak with
  // 1-byte operands, their inputs are quantized, and with sequence parallelism the input
  // all-gathers carry the quantized tensor (ag_scale = quantized bytes / 16-bit bytes).
  const GpuSpec* gemm_gpu = nullptr;  // null: gpu
  bool lp = false;
  double ag_scale = 1;

  double dbl(int64_t v) const { return static_cast<double>(v); }
  // A GEMM of Transformer Engine's linears: at the low precision's rate where the plan has one.
  int64_t gemm(int64_t m, int64_t n, int64_t k, GemmPass pass, int64_t batch = 1) const {
    if (lp) return cost::gemm_time_ns(*gemm_gpu, {m, n, k, batch, 1, pass});
    return cost::gemm_time_ns(gpu, {m, n, k, batch, d.e, pass});
  }
  // A GEMM outside Transformer Engine's linears (the MoE router): always 16 bits.
  int64_t gemm16(int64_t m, int64_t n, int64_t k, GemmPass pass) const {
    return cost::gemm_time_ns(gpu, {m, n, k, 1, d.e, pass});
  }
  // A memory-bound kernel of Megatron's with no kind of its own.
  int64_t mem(double bytes) const {
    if (bytes == 0) return 0;
    return cost::to_ns(cost::kernel_ns(gpu, cost::memory_bound_seconds(gpu, bytes) * 1e9, 1));
  }
  // A memory-bound kernel of kind `k` on rows × cols elements: the kind's measured rate (at
  // row width cols, where measured at several) where the profile has one, else `legacy_bytes`
  // (the pass count below) at memory_bound_efficiency.
  int64_t kern(MemKernel k, double rows, double cols, double legacy_bytes, int kernels = 1) const {
    return cost::mem_kernel_time_ns(gpu, k, cost::mem_kernel_bytes(k, rows, cols, d.e),
                                    legacy_bytes, kernels, cols);
  }
  MemKernel norm_kind(bool backward) const {
    if (d.rmsnorm) return backward ? MemKernel::kRmsNormBackward : MemKernel::kRmsNormForward;
    return backward ? MemKernel::kLayerNormBackward : MemKernel::kLayerNormForward;
  }
  // A compute kernel that overlaps a collective of `comm_ns` on another stream: slower by the
  // profile's overlap_slowdown over the overlapped time.
  int64_t overlapped(int64_t compute_ns, int64_t comm_ns) const {
    if (gpu.overlap_slowdown <= 0 || comm_ns <= 0) return compute_ns;
    return compute_ns +
           std::llround(gpu.overlap_slowdown * static_cast<double>(std::min(compute_ns, comm_ns)));
  }
  int64_t coll(CollectiveKind k, double bytes, const cost::GroupPlacement& g) const {
    return cost::collective_time_ns(cluster, k, bytes, g);
  }
  // Activation tensor of the residual stream on this GPU: (s/cp / r, b, h), in bytes.
  double x_bytes() const { return dbl(d.e) * dbl(d.tokens) * dbl(d.h) / dbl(d.r); }
  // The same, gathered over tensor parallel: (s/cp, b, h).
  double full_x_bytes() const { return dbl(d.e) * dbl(d.tokens) * dbl(d.h); }
  double tokens_r() const { return dbl(d.tokens) / dbl(d.r); }
};

// ---- shared pieces --------------------------------------------------------------------------

void norm_forward(const Ctx& c, Pass& p, const char* name) {
  p.add(name, Cat::kCompute,
        c.kern(c.norm_kind(false), c.tokens_r(), c.dbl(c.d.h), kNormForwardPasses * c.x_bytes()));
}
// The executor's norm backward adds into the residual gradient in the same kernel and finishes
// the weight gradients in a second one.
void norm_backward(const Ctx& c, Pass& p, const char* name) {
  p.add(name, Cat::kCompute,
        c.kern(c.norm_kind(true), c.tokens_r(), c.dbl(c.d.h), kNormBackwardPasses * c.x_bytes(),
               c.d.exec ? 2 : 1));
}

// Bias + dropout + residual add after a row-parallel GEMM (Megatron's bias_dropout_add_fused_*):
// reads the branch and the residual, writes the sum (+ a 1-byte mask with dropout); unfused:
// bias add, dropout and add as separate kernels.
void bias_dropout_add_forward(const Ctx& c, Pass& p) {
  if (c.d.exec) {   // the bias is the GEMM's epilogue; so is the residual add at tensor parallel 1
    if (c.d.t > 1)  // (else the sum of the tensor-parallel partials comes first)
      p.add("residual_add", Cat::kCompute,
            c.kern(MemKernel::kAdd, c.tokens_r(), c.dbl(c.d.h), 3 * c.x_bytes()));
    return;
  }
  const double x = c.x_bytes(), mask = c.tokens_r() * c.dbl(c.d.h);
  double bytes = 3 * x + (c.d.dropout ? mask : 0);
  if (!c.d.fused) bytes += (c.d.bias ? 2 * x : 0) + (c.d.dropout ? 2 * x : 0);
  p.add("bias_dropout_add", Cat::kCompute, c.mem(bytes));
}
void bias_dropout_add_backward(const Ctx& c, Pass& p) {
  if (c.d.exec) return;  // the executor passes the residual gradient on (its norm adds into it)
  const double x = c.x_bytes(), mask = c.tokens_r() * c.dbl(c.d.h);
  double bytes = 2 * x + (c.d.dropout ? mask : 0) + (c.d.bias ? x : 0);
  if (!c.d.fused) bytes += 2 * x;
  p.add("bias_dropout_add_bwd", Cat::kCompute, c.mem(bytes));
}

// --tp-comm-overlap (Transformer Engine's userbuffers, comm_gemm_overlap): the GEMM is split into
// t chunks and each chunk's all-gather (reduce-scatter) step to a ring neighbour runs beside the
// next (previous) chunk's GEMM. A pipeline of t stages of two kinds takes max(A, B) + min(A, B)/t
// (Wang et al., "Overlap Communication with Dependent Computation via Decomposition in Large Deep
// Learning Models", ASPLOS 2023, Section 3). Adds the GEMM, slowed by the profile's
// overlap_slowdown, and what of the collective stays exposed; `comm_first`: the collective's item
// comes first (an all-gather before its GEMM).
void pipelined(const Ctx& c, Pass& p, const char* comm_name, int64_t comm, const char* gemm_name,
               int64_t gemm, bool comm_first) {
  const int64_t g = c.overlapped(gemm, comm);
  const int64_t exposed =
      std::max(g, comm) + std::llround(c.dbl(std::min(g, comm)) / c.dbl(c.d.t)) - g;
  if (comm_first) p.add(comm_name, Cat::kTp, exposed, true);
  p.add(gemm_name, Cat::kCompute, g);
  if (!comm_first) p.add(comm_name, Cat::kTp, exposed, true);
}

// Column-parallel linear (QKV, FC1): forward all-gather with sequence parallelism, then the GEMM
// (m = tokens, n = out_width on this GPU, k = h).
void column_forward(const Ctx& c, Pass& p, const char* ag_name, const char* name, int64_t tokens,
                    int64_t out_width, const cost::GroupPlacement& tp,
                    GemmPass pass = GemmPass::kForward, bool te_linear = true) {
  const int64_t gemm = c.gemm(tokens, out_width, c.d.h, pass);
  if (!c.d.sp) return p.add(name, Cat::kCompute, gemm);
  const int64_t ag = c.coll(CollectiveKind::kAllGather, c.ag_scale * c.full_x_bytes(), tp);
  if (te_linear && c.d.tp_overlap) return pipelined(c, p, ag_name, ag, name, gemm, true);
  p.add(ag_name, Cat::kTp, ag, true);
  p.add(name, Cat::kCompute, gemm);
}
// Row-parallel linear (projection, FC2): the GEMM (k = in_width on this GPU, n = h), then the
// all-reduce, or reduce-scatter with sequence parallelism.
void row_forward(const Ctx& c, Pass& p, const char* name, const char* comm_name, int64_t tokens,
                 int64_t in_width, const cost::GroupPlacement& tp) {
  const int64_t gemm = c.gemm(tokens, c.d.h, in_width, GemmPass::kForward);
  const auto kind = c.d.sp ? CollectiveKind::kReduceScatter : CollectiveKind::kAllReduce;
  const int64_t comm = c.coll(kind, c.full_x_bytes(), tp);
  if (c.d.tp_overlap) return pipelined(c, p, comm_name, comm, name, gemm, false);
  p.add(name, Cat::kCompute, gemm);
  p.add(comm_name, Cat::kTp, comm, true);
}

// Backward of a row-parallel linear: all-gather of the output gradient with sequence
// parallelism; input-gradient GEMM (tokens x in_width x h; `dgrad_pass`: with the GeLU-backward
// epilogue or not) into `b_pass`, weight-gradient GEMM (in_width x h x tokens) into `w_pass`.
// `split` (zero-bubble's B and W): the executor keeps its shard of the output gradient for W (a
// copy in B) and, with sequence parallelism, gathers it again in W.
void row_backward(const Ctx& c, Pass& b_pass, Pass& w_pass, const char* ag_name,
                  const char* dgrad_name, const char* wgrad_name, int64_t tokens, int64_t in_width,
                  const cost::GroupPlacement& tp, bool split,
                  GemmPass dgrad_pass = GemmPass::kInputGrad) {
  if (split && c.d.exec)
    b_pass.add("copy", Cat::kCompute,
               c.kern(MemKernel::kCopy, c.tokens_r(), c.dbl(c.d.h), 2 * c.x_bytes()));
  const int64_t dgrad = c.gemm(tokens, in_width, c.d.h, dgrad_pass);
  const int64_t ag = c.d.sp ? c.coll(CollectiveKind::kAllGather, c.full_x_bytes(), tp) : 0;
  if (c.d.tp_overlap) {
    pipelined(c, b_pass, ag_name, ag, dgrad_name, dgrad, true);
  } else {
    if (c.d.sp) b_pass.add(ag_name, Cat::kTp, ag, true);
    b_pass.add(dgrad_name, Cat::kCompute, dgrad);
  }
  if (split && c.d.exec && c.d.sp) w_pass.add(ag_name, Cat::kTp, ag, true);
  // (The executor's bias gradient, column sums of this rank's output gradient, comes with the
  // next norm's backward, which reads that gradient anyway.)
  w_pass.add(wgrad_name, Cat::kCompute, c.gemm(in_width, c.d.h, tokens, GemmPass::kWeightGrad));
}

// Backward of a column-parallel linear, in three forms: `fused` (Megatron: the saved input's
// all-gather overlaps the input-gradient GEMM, the input gradient's all-reduce / reduce-scatter
// overlaps the weight-gradient GEMM; the executor: both in line, exposed) and split into `b_pass` /
// `w_pass` (zero-bubble: the input-gradient collective is exposed in B; the input all-gather
// belongs to W). The bias gradient of a column-parallel linear: in another kernel (Megatron's fused
// wgrad, or none) or a kernel of its own (the executor's FC1, and QKV's with RoPE; in W when B and
// W are split).
enum class BiasGrad : uint8_t { kElsewhere, kKernel };

void column_backward(const Ctx& c, Pass& fused, Pass& b_pass, Pass& w_pass, const char* dgrad_name,
                     const char* wgrad_name, const char* ag_name, const char* comm_name,
                     int64_t tokens, int64_t out_width, const cost::GroupPlacement& tp,
                     BiasGrad bias_grad = BiasGrad::kElsewhere) {
  const int64_t dgrad = c.gemm(tokens, c.d.h, out_width, GemmPass::kInputGrad);
  const int64_t wgrad = c.gemm(out_width, c.d.h, tokens, GemmPass::kWeightGrad);
  const int64_t ag =
      c.d.sp ? c.coll(CollectiveKind::kAllGather, c.ag_scale * c.full_x_bytes(), tp) : 0;
  const auto kind = c.d.sp ? CollectiveKind::kReduceScatter : CollectiveKind::kAllReduce;
  const int64_t comm = c.coll(kind, c.full_x_bytes(), tp);
  if (c.d.exec) {  // the executor runs both collectives in line on the compute stream
    fused.add(ag_name, Cat::kTp, ag, true);
    fused.add(wgrad_name, Cat::kCompute, wgrad);
    fused.add(dgrad_name, Cat::kCompute, dgrad);
    fused.add(comm_name, Cat::kTp, comm, true);
  } else {
    fused.add(dgrad_name, Cat::kCompute, c.overlapped(dgrad, ag));
    fused.add(ag_name, Cat::kTp, std::max<int64_t>(0, ag - dgrad), true);
    fused.add(wgrad_name, Cat::kCompute, c.overlapped(wgrad, comm));
    fused.add(comm_name, Cat::kTp, std::max<int64_t>(0, comm - wgrad), true);
  }
  b_pass.add(dgrad_name, Cat::kCompute, dgrad);
  b_pass.add(comm_name, Cat::kTp, comm, true);
  w_pass.add(ag_name, Cat::kTp, ag, true);
  w_pass.add(wgrad_name, Cat::kCompute, wgrad);
  if (bias_grad != BiasGrad::kElsewhere) {
    const int64_t ns = c.kern(MemKernel::kBiasGrad, c.dbl(tokens), c.dbl(out_width),
                              c.dbl(c.d.e) * c.dbl(tokens) * c.dbl(out_width));
    fused.add("bias_grad", Cat::kCompute, ns);
    w_pass.add("bias_grad", Cat::kCompute, ns);
  }
}

// Both backward forms get the same item when it belongs to the input-gradient pass.
struct BackwardPasses {
  Pass& fused;
  Pass& b;
  Pass& w;
  void add_b(const char* name, Cat cat, int64_t ns, bool comm = false) {
    fused.add(name, cat, ns, comm);
    b.add(name, cat, ns, comm);
  }
  void add_w(const char* name, Cat cat, int64_t ns, bool comm = false) {
    fused.add(name, cat, ns, comm);
    w.add(name, cat, ns, comm);
  }
};

// ---- attention core -------------------------------------------------------------------------

struct AttentionTimes {
  int64_t fwd = 0, bwd = 0;        // compute
  int64_t cp_fwd = 0, cp_bwd = 0;  // exposed context-parallel exchange
};

// Sliding window of `window` positions (0: none): the scores one query computes under the causal
// mask, summed over the sequence, as a share of full causal attention's s(s+1)/2.
double window_share(int64_t s, int64_t window) {
  if (window <= 0 || window >= s) return 1.0;
  const double S = static_cast<double>(s), w = static_cast<double>(window);
  return (S * w - w * (w - 1) / 2) / (S * (S + 1) / 2);
}

AttentionTimes attention_times_full(const Ctx& c);

// The attention core with the plan's sliding window (`window` > 0): Transformer Engine's fused
// attention skips the blocks outside the window, so the work is the full causal attention's
// times the window's share of the scores (window_share), taken at the efficiency of that smaller
// call (a non-causal shape of as many scores).
AttentionTimes attention_times(const Ctx& c, int64_t window) {
  if (window <= 0) return attention_times_full(c);
  const PlanDims& d = c.d;
  const double share = window_share(d.s, window);
  if (d.cp == 1 && d.flash) {
    const int64_t heads = d.a / d.t, kv_heads = d.mla ? heads : std::max<int64_t>(1, d.g / d.t);
    const int64_t hd = d.mla ? (d.qk_dim + d.rope_dim + d.v_dim) / 2 : d.d;
    // s x s_eq non-causal scores = share of s(s+1)/2.
    const int64_t s_eq =
        std::max<int64_t>(1, std::llround(share * static_cast<double>(d.s + 1) / 2.0));
    const cost::AttentionShape sh{d.b, heads, kv_heads, d.s, s_eq, hd, false, d.e};
    AttentionTimes at;
    at.fwd = cost::flash_attention_forward_ns(c.gpu, sh);
    at.bwd = cost::flash_attention_backward_ns(c.gpu, sh);
    return at;
  }
  AttentionTimes at = attention_times_full(c);
  at.fwd = std::llround(static_cast<double>(at.fwd) * share);
  at.bwd = std::llround(static_cast<double>(at.bwd) * share);
  return at;
}

AttentionTimes attention_times_full(const Ctx& c) {
  const PlanDims& d = c.d;
  AttentionTimes at;
  const int64_t heads = d.a / d.t, kv_heads = d.mla ? heads : std::max<int64_t>(1, d.g / d.t);
  // Multi-latent attention: Q·Kᵀ over qk + RoPE dims, P·V over v dims; FLOPs as one head dim
  // of their mean.
  const int64_t hd = d.mla ? (d.qk_dim + d.rope_dim + d.v_dim) / 2 : d.d;
  cost::MaterializedSoftmax sm;
  if (!d.fused) {
    // --no-masked-softmax-fusion: masked_fill (read + write) and softmax (read + write) in 16
    // bits forward; softmax backward (read output and gradient, write) and the masked_fill
    // backward (read + write).
    sm.forward_bytes_per_score = 8;
    sm.backward_bytes_per_score = 10;
  }
  if (d.dropout) {
    // Dropout on the probabilities: read, write, 1-byte mask; backward the same.
    sm.forward_bytes_per_score += 5;
    sm.backward_bytes_per_score += 5;
  }
  // The executor's backward is three launches: rowsum(dO∘O), the main pass and the dQ finalize
  // (mma.sync kernels), or rowsum(dO∘O), the counters' memset and the main pass, which converts
  // dQ itself (Hopper kernels).
  const int bwd_kernels = d.exec ? 3 : 1;
  if (d.cp == 1) {
    cost::AttentionShape s{d.b, heads, kv_heads, d.s, d.s, hd, true, d.e};
    if (d.flash) {
      at.fwd = cost::flash_attention_forward_ns(c.gpu, s);
      at.bwd = cost::flash_attention_backward_ns(c.gpu, s, bwd_kernels);
    } else {
      at.fwd = cost::materialized_attention_forward_ns(c.gpu, s, sm);
      at.bwd = cost::materialized_attention_backward_ns(c.gpu, s, sm);
    }
    return at;
  }
  // Context parallelism (Transformer Engine's context_parallel.py), by --cp-comm-type:
  // - p2p (Megatron's default; AttnFuncWithCPAndKVP2P, the load-balanced ring): cp steps, each
  //   over (s/cp) x (s/cp) positions of which half are computed under the causal mask; K and V
  //   travel to the next rank while a step computes (and dK, dV with them in the backward), so
  //   each of the cp - 1 transfers costs what its step does not hide;
  // - all_gather (AttnFuncWithCPAndKVAllGather): K and V all-gathered before the same work, not
  //   overlapped (TransformerConfig.cp_comm_type: "The all-gather is not async"); gathered again
  //   in the backward, dK and dV reduce-scattered after it;
  // - a2a (AttnFuncWithCPAndQKVOA2A, DeepSpeed Ulysses): all-to-alls scatter the heads and gather
  //   the sequence of Q, K, V before the core and the reverse for its output; the core runs on
  //   the whole sequence with heads / cp (backward: dO before, dQ, dK, dV after); not overlapped;
  // - a2a+p2p: the all-to-all over the first hierarchical group (a ranks), then the p2p ring over
  //   the second (cp / a ranks), with heads / a and s / (cp / a) positions per ring step.
  const int64_t ca = d.cp_a2a, cr = d.cp / ca;  // all-to-all group, ring
  const int64_t heads_r = heads / ca, kv_heads_r = std::max<int64_t>(1, kv_heads / ca);
  const double e = c.dbl(d.e), T = c.dbl(d.tokens);
  // Q, and K with V (multi-latent attention: keys q_w wide, values kv_w) this GPU holds.
  const double q_bytes = e * T * c.dbl(d.q_w);
  const double kv_bytes = d.mla ? e * T * c.dbl(d.q_w + d.kv_w) : e * T * 2.0 * c.dbl(d.kv_w);
  const double out_bytes = e * T * c.dbl(d.mla ? d.kv_w : d.q_w);
  if (ca > 1) {  // the all-to-all send buffer of this GPU, as the expert-parallel exchange's
    auto a2a = [&](double bytes) {
      return c.coll(CollectiveKind::kAllToAll, bytes, c.groups.cp_a2a);
    };
    at.cp_fwd += a2a(q_bytes + kv_bytes) + a2a(out_bytes);
    at.cp_bwd += a2a(out_bytes) + a2a(q_bytes + kv_bytes);
  }
  const int64_t s_step = d.s / cr;  // the positions each ring step's queries and keys cover
  cost::AttentionShape step{d.b, heads_r, kv_heads_r, s_step, s_step, hd, true, d.e};
  int64_t step_fwd = 0, step_bwd = 0;
  if (d.flash) {
    step_fwd = cost::flash_attention_forward_ns(c.gpu, step);
    step_bwd = cost::flash_attention_backward_ns(c.gpu, step);
  } else if (cr > 1) {
    step.causal = false;  // a materialized block computes every score
    step_fwd = cost::materialized_attention_forward_ns(c.gpu, step, sm) / 2;
    step_bwd = cost::materialized_attention_backward_ns(c.gpu, step, sm) / 2;
  } else {
    step_fwd = cost::materialized_attention_forward_ns(c.gpu, step, sm);
    step_bwd = cost::materialized_attention_backward_ns(c.gpu, step, sm);
  }
  at.fwd = cr * step_fwd;
  at.bwd = cr * step_bwd;
  if (cr == 1) return at;
  if (d.cp_comm == CpCommType::kAllGather) {
    const double gathered = c.dbl(d.cp) * kv_bytes;  // (s, b, 2·kv_w) after the gather
    const int64_t ag = c.coll(CollectiveKind::kAllGather, gathered, c.groups.cp);
    at.cp_fwd += ag;
    at.cp_bwd += ag + c.coll(CollectiveKind::kReduceScatter, gathered, c.groups.cp);
    return at;
  }
  const bool same_node = ca > 1 ? c.groups.cp_outer_ring_same_node : c.groups.cp_ring_same_node;
  const int64_t send_fwd = cost::p2p_time_ns(c.cluster, kv_bytes, same_node);
  const int64_t send_bwd = cost::p2p_time_ns(c.cluster, 2 * kv_bytes, same_node);
  at.cp_fwd += (cr - 1) * std::max<int64_t>(0, send_fwd - step_fwd);
  at.cp_bwd += (cr - 1) * std::max<int64_t>(0, send_bwd - step_bwd);
  return at;
}

void attention_forward(const AttentionTimes& at, Pass& p) {
  p.add("attention", Cat::kCompute, at.fwd);
  p.add("cp_kv_exchange", Cat::kCp, at.cp_fwd, true);
}

// ---- dense and MoE layers -------------------------------------------------------------------

// Multi-latent attention (megatron/core/transformer/multi_latent_attention.py): the down
// projections run duplicated on every tensor-parallel rank over its own tokens (this GPU's
// sequence shard with sequence parallelism, after which the small latents are all-gathered), the
// latent norms, the column-parallel up projections (q_w = heads/t x (qk + RoPE) dims, keys the
// same, values kv_w = heads/t x v dims), RoPE on the decoupled part, the core, the row-parallel
// projection. Backward: the up projections' input (latent) gradients are summed over tp.
void mla_block_forward(const Ctx& c, const AttentionTimes& at, Pass& p) {
  const PlanDims& d = c.d;
  const int64_t T = d.tokens, heads = d.a / d.t;
  const int64_t kv_down = d.kv_lora + d.rope_dim;
  const double e = c.dbl(d.e);
  norm_forward(c, p, "input_norm");
  const bool gather_x = d.sp && d.q_lora == 0;  // linear_q_proj needs every token's x
  const int64_t down_tokens = gather_x || !d.sp ? T : T / d.r;
  if (gather_x)
    p.add("tp_all_gather", Cat::kTp,
          c.coll(CollectiveKind::kAllGather, c.ag_scale * c.full_x_bytes(), c.groups.tp), true);
  if (d.q_lora > 0)
    p.add("q_down", Cat::kCompute, c.gemm(down_tokens, d.q_lora, d.h, GemmPass::kForward));
  p.add("kv_down", Cat::kCompute, c.gemm(down_tokens, kv_down, d.h, GemmPass::kForward));
  if (d.sp && !gather_x)
    p.add("tp_all_gather", Cat::kTp,
          c.coll(CollectiveKind::kAllGather, e * c.dbl(T) * c.dbl(d.q_lora + kv_down), c.groups.tp),
          true);
  if (d.q_lora > 0) {
    p.add("q_norm", Cat::kCompute, c.mem(kNormForwardPasses * e * c.dbl(T) * c.dbl(d.q_lora)));
    p.add("q_up", Cat::kCompute, c.gemm(T, d.q_w, d.q_lora, GemmPass::kForward));
  } else {
    p.add("q_proj", Cat::kCompute, c.gemm(T, d.q_w, d.h, GemmPass::kForward));
  }
  p.add("kv_norm", Cat::kCompute, c.mem(kNormForwardPasses * e * c.dbl(T) * c.dbl(d.kv_lora)));
  p.add("kv_up", Cat::kCompute,
        c.gemm(T, heads * (d.qk_dim + d.v_dim), d.kv_lora, GemmPass::kForward));
  p.add("rope", Cat::kCompute, c.mem(2.0 * e * c.dbl(T) * c.dbl((heads + 1) * d.rope_dim)));
  attention_forward(at, p);
  row_forward(c, p, "proj", d.sp ? "tp_reduce_scatter" : "tp_all_reduce", T, d.kv_w, c.groups.tp);
  bias_dropout_add_forward(c, p);
}

void mla_block_backward(const Ctx& c, const AttentionTimes& at, BackwardPasses bp) {
  const PlanDims& d = c.d;
  const int64_t T = d.tokens, heads = d.a / d.t;
  const int64_t kv_down = d.kv_lora + d.rope_dim, kv_up = heads * (d.qk_dim + d.v_dim);
  const double e = c.dbl(d.e);
  bias_dropout_add_backward(c, bp.fused);
  bias_dropout_add_backward(c, bp.b);
  row_backward(c, bp.fused, bp.fused, "tp_all_gather", "proj_dgrad", "proj_wgrad", T, d.kv_w,
               c.groups.tp, false);
  row_backward(c, bp.b, bp.w, "tp_all_gather", "proj_dgrad", "proj_wgrad", T, d.kv_w, c.groups.tp,
               true);
  bp.add_b("attention_bwd", Cat::kCompute, at.bwd);
  bp.add_b("cp_kv_exchange", Cat::kCp, at.cp_bwd, true);
  bp.add_b("rope_bwd", Cat::kCompute, c.mem(2.0 * e * c.dbl(T) * c.dbl((heads + 1) * d.rope_dim)));
  bp.add_b("kv_up_dgrad", Cat::kCompute, c.gemm(T, d.kv_lora, kv_up, GemmPass::kInputGrad));
  bp.add_w("kv_up_wgrad", Cat::kCompute, c.gemm(kv_up, d.kv_lora, T, GemmPass::kWeightGrad));
  bp.add_b("kv_norm_bwd", Cat::kCompute,
           c.mem(kNormBackwardPasses * e * c.dbl(T) * c.dbl(d.kv_lora)));
  const bool gather_x = d.sp && d.q_lora == 0;
  if (d.q_lora > 0) {
    bp.add_b("q_up_dgrad", Cat::kCompute, c.gemm(T, d.q_lora, d.q_w, GemmPass::kInputGrad));
    bp.add_w("q_up_wgrad", Cat::kCompute, c.gemm(d.q_w, d.q_lora, T, GemmPass::kWeightGrad));
    bp.add_b("q_norm_bwd", Cat::kCompute,
             c.mem(kNormBackwardPasses * e * c.dbl(T) * c.dbl(d.q_lora)));
  } else {
    bp.add_b("q_proj_dgrad", Cat::kCompute, c.gemm(T, d.h, d.q_w, GemmPass::kInputGrad));
    bp.add_w("q_proj_wgrad", Cat::kCompute, c.gemm(d.q_w, d.h, T, GemmPass::kWeightGrad));
  }
  // The latents' (or, with linear_q_proj, the input's) gradients summed over tp.
  const double lat_bytes = gather_x ? c.full_x_bytes() : e * c.dbl(T) * c.dbl(d.q_lora + kv_down);
  const auto kind = d.sp ? CollectiveKind::kReduceScatter : CollectiveKind::kAllReduce;
  bp.add_b(d.sp ? "tp_reduce_scatter" : "tp_all_reduce", Cat::kTp,
           c.coll(kind, lat_bytes, c.groups.tp), true);
  const int64_t down_tokens = gather_x || !d.sp ? T : T / d.r;
  bp.add_b("kv_down_dgrad", Cat::kCompute, c.gemm(down_tokens, d.h, kv_down, GemmPass::kInputGrad));
  bp.add_w("kv_down_wgrad", Cat::kCompute,
           c.gemm(kv_down, d.h, down_tokens, GemmPass::kWeightGrad));
  if (d.q_lora > 0) {
    bp.add_b("q_down_dgrad", Cat::kCompute,
             c.gemm(down_tokens, d.h, d.q_lora, GemmPass::kInputGrad));
    bp.add_w("q_down_wgrad", Cat::kCompute,
             c.gemm(d.q_lora, d.h, down_tokens, GemmPass::kWeightGrad));
  }
  norm_backward(c, bp.fused, "input_norm_bwd");
  norm_backward(c, bp.b, "input_norm_bwd");
}

void attention_block_forward(const Ctx& c, const AttentionTimes& at, Pass& p) {
  const PlanDims& d = c.d;
  if (d.mla) return mla_block_forward(c, at, p);
  norm_forward(c, p, "input_norm");
  column_forward(c, p, "tp_all_gather", "qkv", d.tokens, d.q_w + 2 * d.kv_w, c.groups.tp);
  if (d.rope)  // rotary embedding of Q and K: read + write
    p.add("rope", Cat::kCompute,
          c.kern(MemKernel::kRope, c.dbl(d.tokens), c.dbl(d.q_w + d.kv_w),
                 2.0 * c.dbl(d.e * d.tokens) * c.dbl(d.q_w + d.kv_w)));
  attention_forward(at, p);
  row_forward(c, p, "proj", d.sp ? "tp_reduce_scatter" : "tp_all_reduce", d.tokens, d.q_w,
              c.groups.tp);
  bias_dropout_add_forward(c, p);
}

void attention_block_backward(const Ctx& c, const AttentionTimes& at, BackwardPasses bp) {
  const PlanDims& d = c.d;
  if (d.mla) return mla_block_backward(c, at, bp);
  bias_dropout_add_backward(c, bp.fused);
  bias_dropout_add_backward(c, bp.b);
  row_backward(c, bp.fused, bp.fused, "tp_all_gather", "proj_dgrad", "proj_wgrad", d.tokens, d.q_w,
               c.groups.tp, false);
  row_backward(c, bp.b, bp.w, "tp_all_gather", "proj_dgrad", "proj_wgrad", d.tokens, d.q_w,
               c.groups.tp, true);
  bp.add_b("attention_bwd", Cat::kCompute, at.bwd);
  bp.add_b("cp_kv_exchange", Cat::kCp, at.cp_bwd, true);
  if (d.rope)
    bp.add_b("rope_bwd", Cat::kCompute,
             c.kern(MemKernel::kRope, c.dbl(d.tokens), c.dbl(d.q_w + d.kv_w),
                    2.0 * c.dbl(d.e * d.tokens) * c.dbl(d.q_w + d.kv_w)));
  // The executor's QKV bias gradient comes with its (Hopper) attention backward, unless RoPE
  // rotates that gradient afterwards: then a kernel of its own.
  column_backward(c, bp.fused, bp.b, bp.w, "qkv_dgrad", "qkv_wgrad", "tp_all_gather",
                  d.sp ? "tp_reduce_scatter" : "tp_all_reduce", d.tokens, d.q_w + 2 * d.kv_w,
                  c.groups.tp,
                  d.exec && d.bias && d.rope ? BiasGrad::kKernel : BiasGrad::kElsewhere);
  norm_backward(c, bp.fused, "input_norm_bwd");
  norm_backward(c, bp.b, "input_norm_bwd");
}

// Element-wise activation over `elems` outputs: GeLU (fused with its bias) or SwiGLU.
// `rows` × `width` outputs (width F on this GPU).
int64_t activation_forward_ns(const Ctx& c, double rows, double width) {
  const double e = c.dbl(c.d.e), elems = rows * width;
  if (c.d.gate == 2)  // read 2F, write F
    return c.kern(MemKernel::kSwigluForward, rows, width, 3 * e * elems);
  return c.kern(MemKernel::kGeluForward, rows, width, (c.d.fused || !c.d.bias ? 2 : 4) * e * elems);
}
int64_t activation_backward_ns(const Ctx& c, double rows, double width) {
  const double e = c.dbl(c.d.e), elems = rows * width;
  if (c.d.gate == 2)  // read dY (F), X (2F); write dX (2F)
    return c.kern(MemKernel::kSwigluBackward, rows, width, 5 * e * elems);
  return c.kern(MemKernel::kGeluBackward, rows, width,
                (c.d.fused || !c.d.bias ? 3 : 4) * e * elems);
}
// The executor fuses bias and GeLU into FC1's GEMM epilogue (cuBLASLt GELU_AUX_BIAS).
bool gelu_in_epilogue(const Ctx& c) { return c.d.exec && c.d.gate == 1 && c.d.bias; }
// ... and GeLU's backward into FC2's input-gradient GEMM (cuBLASLt DGELU, on the saved
// pre-activation), with or without biases.
bool dgelu_in_epilogue(const Ctx& c) { return c.d.exec && c.d.gate == 1; }

// A tensor-parallel MLP of width `ffn` (the dense MLP, or MoE shared experts) on all tokens.
void mlp_forward(const Ctx& c, Pass& p, int64_t ffn) {
  const PlanDims& d = c.d;
  const int64_t f_t = ffn / d.t;
  const bool epilogue = gelu_in_epilogue(c);
  column_forward(c, p, "tp_all_gather", "fc1", d.tokens, d.gate * f_t, c.groups.tp,
                 epilogue ? GemmPass::kForwardGelu : GemmPass::kForward);
  if (!epilogue)
    p.add("activation", Cat::kCompute, activation_forward_ns(c, c.dbl(d.tokens), c.dbl(f_t)));
  row_forward(c, p, "fc2", d.sp ? "tp_reduce_scatter" : "tp_all_reduce", d.tokens, f_t,
              c.groups.tp);
}

void mlp_backward(const Ctx& c, BackwardPasses bp, int64_t ffn) {
  const PlanDims& d = c.d;
  const int64_t f_t = ffn / d.t;
  const bool dgelu = dgelu_in_epilogue(c);
  const GemmPass dx_pass = dgelu ? GemmPass::kInputGradDGelu : GemmPass::kInputGrad;
  row_backward(c, bp.fused, bp.fused, "tp_all_gather", "fc2_dgrad", "fc2_wgrad", d.tokens, f_t,
               c.groups.tp, false, dx_pass);
  row_backward(c, bp.b, bp.w, "tp_all_gather", "fc2_dgrad", "fc2_wgrad", d.tokens, f_t, c.groups.tp,
               true, dx_pass);
  if (!dgelu)
    bp.add_b("activation_bwd", Cat::kCompute,
             activation_backward_ns(c, c.dbl(d.tokens), c.dbl(f_t)));
  column_backward(c, bp.fused, bp.b, bp.w, "fc1_dgrad", "fc1_wgrad", "tp_all_gather",
                  d.sp ? "tp_reduce_scatter" : "tp_all_reduce", d.tokens, d.gate * f_t, c.groups.tp,
                  d.exec && d.bias ? BiasGrad::kKernel : BiasGrad::kElsewhere);
}

// MoE block after the pre-MLP norm (Megatron's MoELayer with the all-to-all token dispatcher):
// router, permutation, all-to-all over ep, all-gather over expert tp, the local experts as one
// grouped GEMM, and the way back; the busiest GPU of the expert-parallel group sets the pace of
// the all-to-alls and the expert GEMMs (cost::routing_imbalance, uniform random routing).
struct MoeShape {
  double tokens = 0;     // tokens entering the layer on this GPU (s/cp·b / r)
  double imbalance = 1;  // the busiest GPU's token copies over the mean
  double routed = 0;  // token copies processed by the busiest GPU's experts: tokens·k·etp·imb.
  double routed_mean = 0;  // the same on average (what the memory model keeps)
  int64_t local_experts = 0;
  int64_t per_expert = 0;     // tokens per local expert
  int64_t f_local = 0;        // F / etp
  double dispatch_bytes = 0;  // this GPU's all-to-all send buffer: tokens·k·h·e
};

MoeShape moe_shape(const Ctx& c) {
  const PlanDims& d = c.d;
  MoeShape m;
  m.tokens = c.tokens_r();
  m.imbalance = cost::routing_imbalance(m.tokens * c.dbl(d.topk), d.ep);
  m.routed_mean = m.tokens * c.dbl(d.topk) * c.dbl(d.etp);
  m.routed = m.routed_mean * m.imbalance;
  m.local_experts = d.experts / d.ep;
  m.per_expert =
      std::max<int64_t>(1, std::llround(m.routed / static_cast<double>(m.local_experts)));
  m.f_local = d.moe_ffn / d.etp;
  m.dispatch_bytes = m.tokens * c.dbl(d.topk) * c.dbl(d.h) * c.dbl(d.e) * m.imbalance;
  return m;
}

// The local experts' GEMM (rows x n x k per expert): one grouped GEMM (--moe-grouped-gemm), or
// one GEMM per local expert, each at its own (smaller) efficiency.
int64_t expert_gemm(const Ctx& c, const MoeShape& m, int64_t rows, int64_t n, int64_t k,
                    GemmPass pass) {
  if (c.d.grouped_gemm) return c.gemm(rows, n, k, pass, m.local_experts);
  return m.local_experts * c.gemm(rows, n, k, pass);
}

// An expert-parallel all-to-all: exposed whole, or with overlap_moe_expert_parallel_comm (Megatron
// overlaps one micro-batch's dispatch / combine with another's computation, 1F1B A2A overlap) for
// what half the experts' computation of the pass does not hide (an approximation: the overlapped
// partner is the same layer's experts of the other micro-batch).
int64_t ep_exchange(const Ctx& c, double bytes, int64_t hide_ns) {
  const int64_t t = c.coll(CollectiveKind::kAllToAll, bytes, c.groups.ep);
  return c.d.overlap_ep ? std::max<int64_t>(0, t - hide_ns / 2) : t;
}

// The token permutation around the exchange: with the flex dispatcher (DeepEP / HybridEP) it is
// fused into the dispatch and combine kernels (no separate pass); the combine's weighted sum into
// the residual stays.
double permute_bytes(const Ctx& c, const MoeShape& m) {
  return c.d.flex_dispatch ? 0.0 : 2 * m.dispatch_bytes;
}

void moe_forward(const Ctx& c, Pass& p) {
  const PlanDims& d = c.d;
  const MoeShape m = moe_shape(c);
  const int64_t tokens = std::llround(m.tokens);
  const int64_t fc1 = expert_gemm(c, m, m.per_expert, d.gate * m.f_local, d.h, GemmPass::kForward);
  const int64_t act = activation_forward_ns(c, m.routed, c.dbl(m.f_local));
  const int64_t fc2 = expert_gemm(c, m, m.per_expert, d.h, m.f_local, GemmPass::kForward);
  p.add("router", Cat::kCompute, c.gemm16(tokens, d.experts, d.h, GemmPass::kForward));
  p.add("router_topk", Cat::kCompute, c.mem(4.0 * m.tokens * c.dbl(d.experts) * 4));
  p.add("permute", Cat::kCompute, c.mem(permute_bytes(c, m)));
  p.add("ep_all_to_all", Cat::kEp, ep_exchange(c, m.dispatch_bytes, fc1 + act + fc2), true);
  p.add("etp_all_gather", Cat::kEp,
        c.coll(CollectiveKind::kAllGather, m.dispatch_bytes * c.dbl(d.etp), c.groups.expert_tp),
        true);
  p.add("expert_fc1", Cat::kCompute, fc1);
  p.add("expert_activation", Cat::kCompute, act);
  p.add("expert_fc2", Cat::kCompute, fc2);
  p.add("etp_reduce_scatter", Cat::kEp,
        c.coll(CollectiveKind::kReduceScatter, m.dispatch_bytes * c.dbl(d.etp), c.groups.expert_tp),
        true);
  p.add("ep_all_to_all", Cat::kEp, ep_exchange(c, m.dispatch_bytes, fc1 + act + fc2), true);
  p.add("unpermute", Cat::kCompute, c.mem(permute_bytes(c, m) + c.x_bytes()));
  if (d.shared_ffn > 0) mlp_forward(c, p, d.shared_ffn);
}

void moe_backward(const Ctx& c, BackwardPasses bp) {
  const PlanDims& d = c.d;
  const MoeShape m = moe_shape(c);
  const int64_t tokens = std::llround(m.tokens);
  const int64_t fc2_d = expert_gemm(c, m, m.per_expert, m.f_local, d.h, GemmPass::kInputGrad);
  const int64_t fc2_w = expert_gemm(c, m, m.f_local, d.h, m.per_expert, GemmPass::kWeightGrad);
  const int64_t act = activation_backward_ns(c, m.routed, c.dbl(m.f_local));
  const int64_t fc1_d =
      expert_gemm(c, m, m.per_expert, d.h, d.gate * m.f_local, GemmPass::kInputGrad);
  const int64_t fc1_w =
      expert_gemm(c, m, d.gate * m.f_local, d.h, m.per_expert, GemmPass::kWeightGrad);
  const int64_t hide = fc2_d + fc2_w + act + fc1_d + fc1_w;
  if (d.shared_ffn > 0) mlp_backward(c, bp, d.shared_ffn);
  bp.add_b("unpermute_bwd", Cat::kCompute, c.mem(permute_bytes(c, m) + c.x_bytes()));
  bp.add_b("ep_all_to_all", Cat::kEp, ep_exchange(c, m.dispatch_bytes, hide), true);
  bp.add_b("etp_all_gather", Cat::kEp,
           c.coll(CollectiveKind::kAllGather, m.dispatch_bytes * c.dbl(d.etp), c.groups.expert_tp),
           true);
  bp.add_b("expert_fc2_dgrad", Cat::kCompute, fc2_d);
  bp.add_w("expert_fc2_wgrad", Cat::kCompute, fc2_w);
  bp.add_b("expert_activation_bwd", Cat::kCompute, act);
  bp.add_b("expert_fc1_dgrad", Cat::kCompute, fc1_d);
  bp.add_w("expert_fc1_wgrad", Cat::kCompute, fc1_w);
  bp.add_b(
      "etp_reduce_scatter", Cat::kEp,
      c.coll(CollectiveKind::kReduceScatter, m.dispatch_bytes * c.dbl(d.etp), c.groups.expert_tp),
      true);
  bp.add_b("ep_all_to_all", Cat::kEp, ep_exchange(c, m.dispatch_bytes, hide), true);
  bp.add_b("permute_bwd", Cat::kCompute, c.mem(permute_bytes(c, m)));
  bp.add_b("router_bwd", Cat::kCompute,
           c.gemm16(tokens, d.h, d.experts, GemmPass::kInputGrad) +
               c.mem(4.0 * m.tokens * c.dbl(d.experts) * 4));
  bp.add_w("router_wgrad", Cat::kCompute, c.gemm16(d.experts, d.h, tokens, GemmPass::kWeightGrad));
}

cost::LayerActivationShape activation_shape(const Plan& plan, const PlanDims& d, bool moe,
                                            Recompute recompute) {
  cost::LayerActivationShape s;
  s.seq_length = d.s;
  s.micro_batch = d.b;
  s.hidden = d.h;
  s.heads = d.a;
  s.query_groups = d.g;
  s.head_dim = d.d;
  s.ffn_hidden = d.ffn;
  s.gated_mlp = d.gate == 2;
  s.tp = d.t;
  s.cp = d.cp;
  s.sequence_parallel = d.sp;
  s.recompute = recompute;
  s.recompute_modules = plan.parallel.recompute_modules;
  s.norms_fused = d.te;
  s.flash_attention = d.flash;
  s.attention_dropout = d.dropout;
  s.hidden_dropout = d.dropout;
  s.bytes_per_element = d.e;
  if (d.mla) {
    s.mla = true;
    s.q_lora_rank = d.q_lora;
    s.kv_lora_rank = d.kv_lora;
    s.qk_head_dim = d.qk_dim;
    s.qk_pos_emb_head_dim = d.rope_dim;
    s.v_head_dim = d.v_dim;
  }
  if (moe && plan.model.moe) {
    s.moe = true;
    s.num_experts = d.experts;
    s.topk = d.topk;
    s.moe_ffn_hidden = d.moe_ffn;
    s.shared_ffn_hidden = d.shared_ffn;
    s.etp = d.etp;
  }
  return s;
}

// Elements a low-precision layer quantizes per micro-batch on this GPU (Transformer Engine's
// linears): forward, each GEMM's input (QKV and FC1 on this GPU's own tokens, before the
// sequence-parallel all-gather that then carries the quantized tensor; the projection's and FC2's
// inputs; the experts' dispatched tokens and FC2 inputs); backward, each GEMM's output gradient.
struct LowPrecisionElems {
  double fwd = 0, bwd = 0;
};
LowPrecisionElems quantized_elems(const Ctx& c, bool moe) {
  const PlanDims& d = c.d;
  const double tok = c.dbl(d.tokens), tok_r = c.tokens_r(), h = c.dbl(d.h);
  LowPrecisionElems q;
  q.fwd = tok_r * h + tok * c.dbl(d.q_w);              // QKV input, projection input
  q.bwd = tok * c.dbl(d.q_w + 2 * d.kv_w) + tok * h;   // QKV and projection output grads
  auto mlp = [&](double tokens, double f) {            // FC1 (gated: 2f wide) and FC2
    q.fwd += tokens * f;                               // FC2 input (FC1's is added apart)
    q.bwd += tokens * c.dbl(d.gate) * f + tokens * h;  // FC1 and FC2 output gradients
  };
  if (!moe) {
    q.fwd += tok_r * h;
    mlp(tok, c.dbl(d.ffn / d.t));
  } else {
    const MoeShape m = moe_shape(c);
    q.fwd += m.routed * h;  // the experts' FC1 input
    mlp(m.routed, c.dbl(m.f_local));
    if (d.shared_ffn > 0) {
      q.fwd += tok_r * h;
      mlp(tok, c.dbl(d.shared_ffn / d.t));
    }
  }
  return q;
}

// Selective recompute (TransformerConfig.recompute_modules): the forwards run again before the
// layer's backward, module by module as transformer_layer.py, moe_layer.py, experts.py and
// multi_latent_attention.py checkpoint them. core_attn: the attention core; layernorm: the norms
// that are modules of their own (every norm in Megatron's local spec; with Transformer Engine's
// fused LayerNormLinear only the MoE pre-MLP norm); mla_up_proj: MLA's up projections and RoPE;
// mlp: a dense layer's MLP (with Transformer Engine, its fused norm too); moe: the whole MoE
// layer (router, dispatch, experts, shared experts, combine); otherwise moe_act: the experts'
// activation function, shared_experts: the shared experts' MLP.
void selective_recompute_forward(const Ctx& c, const AttentionTimes& at, bool moe, Pass& p) {
  const PlanDims& d = c.d;
  const uint32_t m = c.plan.parallel.recompute_modules;
  if (m & kRecomputeCoreAttn) attention_forward(at, p);
  if (m & kRecomputeLayernorm) {
    if (!d.te) norm_forward(c, p, "input_norm");
    if (!d.te || moe) norm_forward(c, p, "pre_mlp_norm");
  }
  if ((m & kRecomputeMlaUpProj) && d.mla) {
    const int64_t T = d.tokens, heads = d.a / d.t;
    if (d.q_lora > 0) p.add("q_up", Cat::kCompute, c.gemm(T, d.q_w, d.q_lora, GemmPass::kForward));
    p.add("kv_up", Cat::kCompute,
          c.gemm(T, heads * (d.qk_dim + d.v_dim), d.kv_lora, GemmPass::kForward));
    p.add("rope", Cat::kCompute,
          c.mem(2.0 * c.dbl(d.e) * c.dbl(T) * c.dbl((heads + 1) * d.rope_dim)));
  }
  if (!moe && (m & kRecomputeMlp)) {
    if (d.te) norm_forward(c, p, "pre_mlp_norm");
    mlp_forward(c, p, d.ffn);
  }
  if (!moe) return;
  if (m & kRecomputeMoe) return moe_forward(c, p);
  if (m & kRecomputeMoeAct) {
    const MoeShape ms = moe_shape(c);
    p.add("expert_activation", Cat::kCompute,
          activation_forward_ns(c, ms.routed, c.dbl(ms.f_local)));
  }
  if ((m & kRecomputeSharedExperts) && d.shared_ffn > 0) mlp_forward(c, p, d.shared_ffn);
}

void build_layer(const Ctx& c, const AttentionTimes& at, bool moe, LayerCosts& l) {
  const PlanDims& d = c.d;
  // Forward.
  attention_block_forward(c, at, l.fwd);
  norm_forward(c, l.fwd, "pre_mlp_norm");
  if (moe)
    moe_forward(c, l.fwd);
  else
    mlp_forward(c, l.fwd, d.ffn);
  bias_dropout_add_forward(c, l.fwd);
  attention_forward(at, l.attn_fwd);
  if (c.plan.parallel.recompute == Recompute::kSelective)
    selective_recompute_forward(c, at, moe, l.recompute_fwd);

  // Backward, in reverse.
  BackwardPasses bp{l.bwd, l.bwd_input, l.bwd_weight};
  bias_dropout_add_backward(c, l.bwd);
  bias_dropout_add_backward(c, l.bwd_input);
  if (moe)
    moe_backward(c, bp);
  else
    mlp_backward(c, bp, d.ffn);
  norm_backward(c, l.bwd, "pre_mlp_norm_bwd");
  norm_backward(c, l.bwd_input, "pre_mlp_norm_bwd");
  attention_block_backward(c, at, bp);

  const LayerShard shard = layer_shard(c.plan.model, c.plan.parallel, moe);  // as the executor
  l.dense_params = shard.dense;
  l.expert_params = shard.expert;
  if (c.lp) {
    l.lp_gemm_params = shard.gemm_dense + shard.gemm_expert;
    const LowPrecisionElems q = quantized_elems(c, moe);
    const TrainingConfig& t = c.plan.training;
    l.fwd.add("quantize", Cat::kCompute, c.mem(cost::quantize_bytes(t, q.fwd)));
    bp.add_b("quantize_bwd", Cat::kCompute, c.mem(cost::quantize_bytes(t, q.bwd)));
  }
  if (!d.fused)  // --no-gradient-accumulation-fusion: main_grad += grad, every micro-batch
    bp.add_w("grad_accumulate", Cat::kCompute,
             c.mem(kGradAccumulateBytesPerParam * c.dbl(l.dense_params + l.expert_params)));

  // Memory.
  const Recompute rc =
      c.plan.parallel.recompute == Recompute::kSelective ? Recompute::kSelective : Recompute::kNone;
  auto shape = [&](Recompute r) {
    cost::LayerActivationShape s = activation_shape(c.plan, d, moe, r);
    if (c.lp) s.gemm_input_bytes = quantized_bytes_per_element(c.plan.training);
    return s;
  };
  l.act_bytes = cost::layer_activation_bytes(shape(rc)).total();
  l.act_full_bytes = cost::layer_activation_bytes(shape(Recompute::kNone)).total();
  l.ckpt_bytes = cost::layer_activation_bytes(shape(Recompute::kFull)).total();
  const double e = c.dbl(d.e);
  double w_in = 2 * c.x_bytes() + e * c.dbl(d.tokens) * c.dbl(d.q_w);  // QKV, FC1/router, proj
  double ffn_elems = c.dbl(d.tokens) * c.dbl(d.ffn / d.t);
  if (moe) {
    const MoeShape m = moe_shape(c);
    w_in += e * m.routed_mean * c.dbl(d.h);  // expert FC1 input
    ffn_elems = m.routed_mean * c.dbl(m.f_local) + c.dbl(d.tokens) * c.dbl(d.shared_ffn / d.t);
  }
  w_in += e * ffn_elems;  // FC2 inputs
  l.weight_input_bytes = std::llround(w_in);
  // Zero-bubble W needs the output gradients of the same GEMMs, kept from B: QKV (q + 2 kv
  // columns), the projection and FC2 (this rank's sequence shard, gathered again in W), FC1.
  double w_dy = e * c.dbl(d.tokens) * c.dbl(d.q_w + 2 * d.kv_w) + 2 * c.x_bytes();
  w_dy += e * ffn_elems * c.dbl(d.gate);
  if (moe) w_dy += e * moe_shape(c).routed_mean * c.dbl(d.h);  // the expert FC2 outputs' grad
  l.weight_dy_bytes = std::llround(w_dy);
  const double score_bytes =
      d.flash ? 0.0 : e * c.dbl(d.a / d.t) * c.dbl(d.b) * c.dbl(d.sl) * c.dbl(d.s);
  // cp_comm_type all_gather: the gathered K and V live through the attention core, and in the
  // backward the gathered dK and dV beside them until their reduce-scatter (TE's
  // AttnFuncWithCPAndKVAllGather).
  const double gathered_kv = d.cp > 1 && d.cp_comm == CpCommType::kAllGather
                                 ? c.dbl(d.cp) * e * c.dbl(d.tokens) *
                                       (d.mla ? c.dbl(d.q_w + d.kv_w) : 2.0 * c.dbl(d.kv_w))
                                 : 0.0;
  l.ws_fwd_bytes = std::llround(score_bytes + gathered_kv);
  // The MLP's activation gradients: of the activation's output and of fc1's (the executor's GeLU
  // has the latter alone: fc2's input-gradient GEMM applies GeLU's backward in its epilogue).
  const double act_grads = dgelu_in_epilogue(c) ? 1.0 : 2.0;
  double ws_bwd =
      std::max(act_grads * e * ffn_elems * c.dbl(d.gate), 2 * score_bytes + 2 * gathered_kv);
  if (!d.fused) ws_bwd += e * c.dbl(d.h) * c.dbl(d.gate * (moe ? d.moe_ffn / d.etp : d.ffn / d.t));
  l.ws_bwd_bytes = std::llround(ws_bwd);

  // Activation offloading (sim/cost/offload_cost): the bytes the layer moves to the host, and
  // what of the copies the layer's own forward (backward) does not hide, standing for the next
  // layer's forward (the previous layer's backward) that runs beside the copy.
  const TrainingConfig& t = c.plan.training;
  if (t.cpu_offloading_num_layers > 0)  // TE's offload context: every tensor the layer saves
    l.offload_bytes = l.act_bytes;
  else if (t.fine_grained_activation_offloading)
    l.offload_bytes = cost::offloadable_bytes(shape(rc)).of(t.offload_modules);
  if (l.offload_bytes > 0) {
    const double bytes = c.dbl(l.offload_bytes);
    l.offload_fwd.add("activation_offload", Cat::kCompute,
                      cost::exposed_host_copy_ns(c.cluster, bytes, l.fwd.cost.total_ns()), true);
    l.offload_bwd.add("activation_reload", Cat::kCompute,
                      cost::exposed_host_copy_ns(c.cluster, bytes, l.bwd.cost.total_ns()), true);
  }
}

void build_embedding(const Ctx& c, ExtraCosts& x) {
  const PlanDims& d = c.d;
  const ModelSpec& m = c.plan.model;
  const double full = c.full_x_bytes(), xb = c.x_bytes();
  const bool learned = m.position_embedding == PositionEmbedding::kLearned;
  // Vocabulary-parallel lookup over all s/cp·b tokens (plus masking of out-of-range ids with tp),
  // then all-reduce / reduce-scatter over tp; position add and dropout on this GPU's tokens.
  x.fwd.add(
      "embedding", Cat::kCompute,
      c.kern(MemKernel::kEmbeddingForward, c.dbl(d.tokens), c.dbl(d.h), (d.t > 1 ? 4 : 2) * full));
  x.fwd.add(
      d.sp ? "tp_reduce_scatter" : "tp_all_reduce", Cat::kTp,
      c.coll(d.sp ? CollectiveKind::kReduceScatter : CollectiveKind::kAllReduce, full, c.groups.tp),
      true);
  if (d.exec) {  // the position add, one kernel
    if (learned)
      x.fwd.add("position_add", Cat::kCompute,
                c.kern(MemKernel::kAdd, c.tokens_r(), c.dbl(d.h), 3 * xb));
  } else {
    double post = learned ? 3 * xb : 0;
    if (d.dropout) post += 2 * xb + c.tokens_r() * c.dbl(d.h);
    x.fwd.add("position_dropout", Cat::kCompute, c.mem(post));
  }
  // Backward: all-gather of the gradient with sequence parallelism; the embedding's gradient is
  // a dense 16-bit tensor (zeroed, scatter-added) accumulated into the fp32 main gradient.
  x.params = 0;
  for (const ParamTensor& t : embedding_tensors(m, c.plan.parallel)) x.params += t.local_numel();
  for (Pass* p : {&x.bwd, &x.bwd_input}) {
    if (d.sp)
      p->add("tp_all_gather", Cat::kTp, c.coll(CollectiveKind::kAllGather, full, c.groups.tp),
             true);
  }
  int64_t grad_ns = 0;
  if (d.exec) {  // position rows summed over the batch; tokens sorted, rows summed into fp32
    if (learned)
      grad_ns += c.kern(MemKernel::kPositionEmbeddingBackward, c.dbl(d.tokens), c.dbl(d.h), full);
    grad_ns += c.kern(MemKernel::kEmbeddingBackward, c.dbl(d.tokens), c.dbl(d.h), 5 * full, 2);
  } else {
    grad_ns =
        c.mem((learned ? 2 : 1) * 2 * full + (2 + kGradAccumulateBytesPerParam) * c.dbl(x.params));
  }
  x.bwd.add("embedding_bwd", Cat::kCompute, grad_ns);
  x.bwd_weight.add("embedding_bwd", Cat::kCompute, grad_ns);
  x.act_bytes =
      cost::embedding_activation_bytes(activation_shape(c.plan, d, false, Recompute::kNone));
  x.weight_dy_bytes = std::llround(full);  // zero-bubble: the gathered output gradient, B -> W
}

void build_output(const Ctx& c, ExtraCosts& x) {
  const PlanDims& d = c.d;
  const double logits = c.dbl(d.tokens) * c.dbl(d.vocab / d.t);
  norm_forward(c, x.fwd, "final_norm");
  // Megatron's output layer is its own ColumnParallelLinear, not Transformer Engine's: no
  // userbuffer overlap.
  column_forward(c, x.fwd, "tp_all_gather", "logits", d.tokens, d.vocab / d.t, c.groups.tp,
                 GemmPass::kForward, false);
  // The executor computes the loss and dL/dlogits in place in the forward: three kernels over
  // four passes of the logits (max; sum of exponentials; loss and gradient, read and written),
  // as `mplan calibrate` times them; where the vocabulary is not split (tensor parallel 1) the max
  // and the sum share one pass: two kernels, the time of three passes of the four; and from
  // compute capability 9 on, where a row fits a cluster's registers (at most 131072 logits),
  // one kernel that reads and writes each row once: two passes of the four (xent.cu).
  const bool one_pass_stats = d.exec && d.t == 1;
  const bool fused = one_pass_stats && d.vocab <= 131072 && c.gpu.compute_capability >= 9;
  int64_t xent = c.kern(MemKernel::kCrossEntropy, c.dbl(d.tokens), c.dbl(d.vocab / d.t),
                        kCrossEntropyForwardBytesPerLogit * logits,
                        d.exec ? (fused            ? 1
                                  : one_pass_stats ? 2
                                                   : 3)
                               : 1);
  if (one_pass_stats) xent = std::llround((fused ? 0.5 : 0.75) * c.dbl(xent));
  x.fwd.add("cross_entropy", Cat::kCompute, xent);
  // Megatron: three all-reduces of one fp32 value per token over tp (max, predicted logit,
  // sum). The executor: two (the max, then the sum of exponentials with the target's logit).
  const int64_t ar = c.coll(CollectiveKind::kAllReduce, 4.0 * c.dbl(d.tokens), c.groups.tp);
  if (d.exec) {
    x.fwd.add("tp_all_reduce", Cat::kTp, ar, true);
    x.fwd.add("tp_all_reduce", Cat::kTp,
              c.coll(CollectiveKind::kAllReduce, 8.0 * c.dbl(d.tokens), c.groups.tp), true);
  } else {
    x.fwd.add("tp_all_reduce", Cat::kTp, 3 * ar, true);
  }
  BackwardPasses bp{x.bwd, x.bwd_input, x.bwd_weight};
  if (!d.exec)
    bp.add_b("cross_entropy_bwd", Cat::kCompute,
             c.mem(kCrossEntropyBackwardBytesPerLogit * logits));
  column_backward(c, x.bwd, x.bwd_input, x.bwd_weight, "logits_dgrad", "logits_wgrad",
                  "tp_all_gather", d.sp ? "tp_reduce_scatter" : "tp_all_reduce", d.tokens,
                  d.vocab / d.t, c.groups.tp);
  norm_backward(c, x.bwd, "final_norm_bwd");
  norm_backward(c, x.bwd_input, "final_norm_bwd");
  // The final norm and the output weight unless it is the tied embedding of the same stage.
  x.params = 0;
  for (const ParamTensor& t : output_tensors(c.plan.model, c.plan.parallel))
    x.params += t.local_numel();
  if (!d.fused)
    bp.add_w("grad_accumulate", Cat::kCompute,
             c.mem(kGradAccumulateBytesPerParam * c.dbl(d.vocab / d.t * d.h)));
  x.act_bytes = cost::output_layer_activation_bytes(
      activation_shape(c.plan, d, false, Recompute::kNone), d.vocab);
  x.weight_input_bytes = std::llround(c.full_x_bytes());
  x.weight_dy_bytes = std::llround(c.dbl(d.e) * logits);  // zero-bubble: dL/dlogits, B -> W
  if (d.exec) {
    // The executor keeps the 16-bit logits of each micro-batch and overwrites them with
    // dL/dlogits in the forward (exec/model/activations.cpp, head_win.logits), with four fp32
    // values per token (row max, two sums, the token's loss): no fp32 copy and no workspace.
    x.act_bytes += std::llround((c.dbl(d.e) - 4.0) * logits + 16.0 * c.dbl(d.tokens));
    return;
  }
  // Forward: the 16-bit logits before their fp32 copy; backward: the 16-bit logit gradient.
  x.ws_fwd_bytes = std::llround(c.dbl(d.e) * logits);
  x.ws_bwd_bytes = std::llround(c.dbl(d.e) * logits);
}

// Multi-token prediction (megatron/core/transformer/multi_token_prediction.py) on the last
// stage, after the decoder: per block, the enorm and hnorm, eh_proj (column-parallel 2h -> h on
// the gathered tokens), a transformer layer like the last one, and the shared output layer with
// its loss again (the main head's passes repeated). Its parameters and activations join the
// output unit's.
void add_mtp(const Ctx& c, const LayerCosts& layer, ExtraCosts& x) {
  const PlanDims& d = c.d;
  const ModelSpec& m = c.plan.model;
  const ExtraCosts head = x;  // the final norm, logits and loss of the main head
  const int64_t eh = c.gemm(d.tokens, d.h / d.t, 2 * d.h, GemmPass::kForward);
  const int64_t eh_d = c.gemm(d.tokens, 2 * d.h, d.h / d.t, GemmPass::kInputGrad),
                eh_w = c.gemm(d.h / d.t, 2 * d.h, d.tokens, GemmPass::kWeightGrad);
  const ParallelConfig& p = c.plan.parallel;
  const LayerShard shard = layer_shard(m, p, m.is_moe_layer(m.num_layers - 1));
  for (int64_t i = 0; i < m.mtp_num_layers; ++i) {
    norm_forward(c, x.fwd, "mtp_norms");
    norm_forward(c, x.fwd, "mtp_norms");
    x.fwd.add("mtp_eh_proj", Cat::kCompute, eh);
    x.fwd.append(layer.fwd);
    x.fwd.append(head.fwd);
    for (Pass* b : {&x.bwd, &x.bwd_input}) {
      b->append(b == &x.bwd ? head.bwd : head.bwd_input);
      b->append(b == &x.bwd ? layer.bwd : layer.bwd_input);
      b->add("mtp_eh_proj_dgrad", Cat::kCompute, eh_d);
      norm_backward(c, *b, "mtp_norms_bwd");
      norm_backward(c, *b, "mtp_norms_bwd");
    }
    x.bwd.add("mtp_eh_proj_wgrad", Cat::kCompute, eh_w);
    x.bwd_weight.append(head.bwd_weight);
    x.bwd_weight.append(layer.bwd_weight);
    x.bwd_weight.add("mtp_eh_proj_wgrad", Cat::kCompute, eh_w);
    x.act_bytes += layer.act_bytes + head.act_bytes + std::llround(3 * c.full_x_bytes());
    x.weight_input_bytes += layer.weight_input_bytes + head.weight_input_bytes;
    x.weight_dy_bytes += layer.weight_dy_bytes + head.weight_dy_bytes;
    x.params += 3 * d.h * (m.normalization == Normalization::kLayerNorm ? 2 : 1) +
                2 * d.h * d.h / d.t + shard.dense;
    x.expert_params += shard.expert;
  }
  x.ws_fwd_bytes = std::max(x.ws_fwd_bytes, layer.ws_fwd_bytes);
  x.ws_bwd_bytes = std::max(x.ws_bwd_bytes, layer.ws_bwd_bytes);
  // With pp > 1 and untied embeddings the last stage holds the blocks' own word embedding.
  if (p.pp > 1 && !m.tied_embeddings) x.params += d.vocab / d.t * d.h;
}

void reset(LayerCosts& l, bool rec) {
  for (Pass* p : {&l.fwd, &l.bwd, &l.bwd_input, &l.bwd_weight, &l.attn_fwd, &l.recompute_fwd,
                  &l.offload_fwd, &l.offload_bwd})
    p->clear(rec);
  l.offload_bytes = 0;
  l.act_bytes = l.act_full_bytes = l.ckpt_bytes = l.weight_input_bytes = l.weight_dy_bytes = 0;
  l.ws_fwd_bytes = l.ws_bwd_bytes = l.dense_params = l.expert_params = l.lp_gemm_params = 0;
}
void reset(ExtraCosts& x, bool rec) {
  for (Pass* p : {&x.fwd, &x.bwd, &x.bwd_input, &x.bwd_weight}) p->clear(rec);
  x.act_bytes = x.weight_input_bytes = x.weight_dy_bytes = x.ws_fwd_bytes = x.ws_bwd_bytes = 0;
  x.params = x.expert_params = 0;
}

}  // namespace

const LayerCosts& layer_costs_of(const PlanCosts& costs, const Plan& plan, int64_t layer) {
  const bool moe = plan.model.is_moe_layer(layer);
  // A layer both kept in bf16 and of full attention takes the bf16 (sliding-window) costs.
  if (costs.has_bf16_layers && !layer_in_low_precision(plan.training, plan.model.num_layers, layer))
    return moe ? costs.moe_bf16 : costs.dense_bf16;
  if (costs.has_full_attention_layers && !plan.model.is_window_attention_layer(layer))
    return moe ? costs.moe_full : costs.dense_full;
  return moe ? costs.moe : costs.dense;
}

void build_plan_costs(const Plan& plan, const SimOptions& options, const StageGroups& groups,
                      bool record_items, PlanCosts& out) {
  out.dims = plan_dims(plan, options);
  reset(out.dense, record_items);
  reset(out.moe, record_items);
  reset(out.dense_bf16, record_items);
  reset(out.moe_bf16, record_items);
  reset(out.embedding, record_items);
  reset(out.output, record_items);
  reset(out.dense_full, record_items);
  reset(out.moe_full, record_items);
  const Ctx c{plan, plan.cluster, plan.cluster.gpu_for(plan.training.implementation), out.dims,
              groups};
  const ModelSpec& m = plan.model;
  // Sliding-window layers (all, or those window_attn_skip_freq leaves) and full-attention ones.
  const AttentionTimes at = attention_times(c, out.dims.window);
  out.has_full_attention_layers = false;
  for (int64_t l = 0; out.dims.window > 0 && l < m.num_layers; ++l)
    out.has_full_attention_layers =
        out.has_full_attention_layers || !m.is_window_attention_layer(l);
  const AttentionTimes at_full = out.has_full_attention_layers ? attention_times(c, 0) : at;
  const bool any_dense = m.num_moe_layers() < m.num_layers;
  const TrainingConfig& t = plan.training;
  out.has_bf16_layers = false;
  std::optional<GpuSpec> lp_gpu;
  Ctx lc = c;
  if (low_precision(t)) {
    lp_gpu = cost::gemm_gpu(c.gpu, gemm_precision(t));
    lc.gemm_gpu = &*lp_gpu;
    lc.lp = true;
    lc.ag_scale = quantized_bytes_per_element(t) / static_cast<double>(out.dims.e);
    out.has_bf16_layers = t.first_last_layers_bf16;
    if (out.has_bf16_layers) {
      if (any_dense) build_layer(c, at, false, out.dense_bf16);
      if (m.moe) build_layer(c, at, true, out.moe_bf16);
    }
  }
  if (any_dense) build_layer(lc, at, false, out.dense);
  if (m.moe) build_layer(lc, at, true, out.moe);
  if (out.has_full_attention_layers) {
    if (any_dense) build_layer(lc, at_full, false, out.dense_full);
    if (m.moe) build_layer(lc, at_full, true, out.moe_full);
  }
  build_embedding(c, out.embedding);
  build_output(c, out.output);
  if (m.mtp_num_layers > 0) add_mtp(c, layer_costs_of(out, plan, m.num_layers - 1), out.output);
}

}  // namespace mplan::sim
