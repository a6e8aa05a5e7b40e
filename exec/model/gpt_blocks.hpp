// GptBlocks: the math of the GPT's pieces — embedding, transformer layer, head (final norm,
// output layer, vocab-parallel cross-entropy) — forward, input-gradient and weight-gradient
// passes, with Megatron-LM's tensor and sequence parallelism, written once against Backend and
// Comm. Column-parallel (QKV by heads inside each of Q, K, V; FC1; the output layer by
// vocabulary): input replicated (all-gathered with SP), output sharded; backward reduces the input
// gradient over TP (all-reduce, or reduce-scatter with SP). Row-parallel (projection, FC2): input
// sharded, output reduced over TP; the bias is added once after the sum (by TP rank 0 into its
// partial sum, the same number) and its gradient comes from the reduced output gradient.
// Invariant: every tensor-parallel collective is issued on the compute stream in program order,
// the same on every member; weight gradients accumulate (+=) into the f32 gradient buffer.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "exec/backend.hpp"
#include "exec/comm.hpp"
#include "exec/model/activations.hpp"
#include "exec/model/gpt_dims.hpp"
#include "exec/model/param_layout.hpp"
#include "exec/tracer.hpp"

namespace mplan::exec {

class GradSync;

inline constexpr float kLayerNormEps = 1e-5f;  // Megatron's --layernorm-epsilon default

// Scratch shared by every pass of one rank (one pass runs at a time).
struct Workspace {
  Tensor gathered;    // (s, b, h) act: sequence-parallel all-gather target
  Tensor partial;     // (s, b, h) act: row-parallel / embedding output before the TP reduction
  Tensor reduced;     // (s_l, b, h) act: reduce-scatter target (SP)
  Tensor d_norm;      // (s_l, b, h) act: gradient through a norm
  Tensor d_gathered;  // (s, b, h) act: all-gathered output gradient (SP)
  Tensor d_ctx;       // (s, b, heads/tp, d) act
  Tensor d_qkv;       // (s, b, (heads + 2·groups)/tp, d) act
  Tensor d_h;         // (s, b, ffn/tp) act: gradient of SwiGLU's output (GeLU's: none)
  Tensor d_pre;       // (s, b, fc1 width/tp) act: gradient of fc1's output
  Tensor att_ctx;     // (s, b, heads/tp, d) act: selective recompute's attention output
  Tensor att_lse;     // (b, heads/tp, s) f32: its log-sum-exp (also full recompute's)
  // Full recompute: the activations of one group of layers rebuilt before its backward.
  std::vector<LayerMain> rc_main;
  std::vector<LayerWeightInputs> rc_win;
  Tensor rc_out;  // (s_l, b, h) act: the group's output, not needed again
};

// What one layer reads: its parameters, input, and where its activations are.
struct LayerRef {
  const LayerParams* p = nullptr;
  int64_t layer = -1;  // global index (names in traces)
  Tensor x;            // (s_l, b, h) act: input
  LayerActs a;
};

class GptBlocks {
 public:
  GptBlocks(const GptDims& d, const ParamLayout& params, Tensor weights, Tensor grads, Backend& be,
            Comm& tp, Workspace& ws, Tracer* tracer);

  Tensor weight(int i) const;
  // Parameter i's gradient as it is (read it only after settle_grads()).
  Tensor grad(int i) const;
  // Gradients add up over an iteration's micro-batches, and the first write of an iteration
  // overwrites instead of adding, so no fill of the whole buffer is needed before it:
  // begin_grads() marks every gradient stale; a GEMM writer takes grad_beta (0 for the first
  // write, else 1), an adding writer grad_acc (zeroed first where stale); settle_grads() zeroes
  // the gradients no one wrote. The results are those of a zeroed buffer bit for bit (0 + x = x).
  void begin_grads();
  void settle_grads();
  // Trace names (--trace-level ops) of the forward kernels that follow: a recomputation's
  // ("re qkv") or not.
  void set_recomputing(bool on) { recomputing_ = on; }

  // ---- embedding (first chunk) ----
  // out (s_l, b, h) = word embedding of tokens (s, b) i32 (+ position embedding), TP-reduced.
  void embedding_forward(const ChunkParams& c, Tensor tokens, Tensor out);
  // From d_out (s_l, b, h), the gradient of the embedding's output: the word and position
  // embedding gradients (whole backward), or only the gathered gradient into `keep` (s, b, h)
  // for the weight pass when `keep` is given.
  void embedding_backward(const ChunkParams& c, Tensor tokens, Tensor d_out, Tensor keep,
                          GradSync* sync);
  void embedding_weight_grad(const ChunkParams& c, Tensor tokens, Tensor d_full, GradSync* sync);

  // ---- transformer layer ----
  // x_out = layer(r.x); activations into r.a (lse into ws.att_lse when r.a.main.lse is empty).
  void layer_forward(const LayerRef& r, Tensor x_out);
  // d_res: in dL/d(output), out dL/d(input). split: input gradients only (the weight GEMMs'
  // output gradients stored into r.a.dy); else weight gradients too, marked final on `sync`.
  void layer_backward(const LayerRef& r, Tensor d_res, bool split, GradSync* sync);
  void layer_weight_grad(const LayerRef& r, GradSync* sync);

  // ---- head (last chunk): final norm, output layer, loss ----
  // From x (s_l, b, h): logits, the per-token loss (summed into loss_sum (1) f32) and, in place of
  // the logits, dL/dlogits · grad_scale — or, loss_only (evaluation), the loss alone: the logits
  // stay as they are.
  void head_forward(const ChunkParams& c, const HeadMain& h, const HeadWeightInputs& w,
                    Tensor targets, float grad_scale, Tensor loss_sum, bool loss_only = false);
  // d_x (s_l, b, h) = dL/dx; the output weight's gradient too unless split.
  void head_backward(const ChunkParams& c, const HeadMain& h, const HeadWeightInputs& w, Tensor d_x,
                     bool split, GradSync* sync);
  // dW_out += dlogits^T · yf; with mark_norm the final norm's parameters are marked final too.
  void head_weight_grad(const ChunkParams& c, const HeadWeightInputs& w, GradSync* sync,
                        bool mark_norm);

 private:
  void mark(GradSync* sync, int param);
  bool take_stale(int i);  // whether param i's gradient was stale; it is not any more
  float grad_beta(int i);  // 0 where param i's gradient was stale, else 1
  Tensor grad_acc(int i);  // grad(i), zeroed first where stale
  // Column-parallel input: the full sequence of `shard` (all-gather into `scratch` with SP).
  Tensor gather_sequence(Tensor shard, Tensor scratch);
  // Row-parallel output / column-parallel input-gradient: the TP sum of `partial` (s, b, h),
  // as this rank's sequence shard with SP (reduce-scatter into `shard_out`) or in place.
  Tensor reduce_partial(Tensor partial, Tensor shard_out);
  // out = resid + x·W^T (+ b) through a row-parallel linear (weight w, bias b or -1): at tensor
  // parallel 1 one GEMM with the residual epilogue (the sum rounded once); else the GEMM's
  // partial sums reduced over tensor parallel, then added ("residual_add").
  void row_forward(Tensor x, int w, int b, Tensor resid, Tensor out, const char* name);
  // The norm of the model (LayerNorm or RMSNorm; b, mean unused with RMSNorm).
  void norm_forward(Tensor x, int w, int b, Tensor y, Tensor mean, Tensor rstd);
  // dres += the norm's input gradient; with dres_bias >= 0, that bias's gradient += the column
  // sums of dres as it came in (the row-parallel layer before the norm's output gradient), which
  // the fused LayerNorm backward takes from its own loads.
  void norm_backward_add(Tensor dy, Tensor x, int w, int b, Tensor mean, Tensor rstd, Tensor dres,
                         int dres_bias = -1);
  Tensor gemm_bias(int b) const;  // the bias view, or empty without biases
  // Core attention on the layer's packed QKV (grouped-query: over K, V expanded per head), and
  // its backward into d_qkv, the gradient of the QKV GEMM's output (RoPE undone).
  void attention_forward(const LayerMain& m, Tensor ctx, Tensor lse);
  // d_qkv_bias (or none): += d_qkv's column sums, QKV's bias gradient.
  void attention_backward(const LayerMain& m, Tensor ctx, Tensor lse, Tensor d_qkv,
                          Tensor d_qkv_bias);
  void mlp_input_grad(const LayerMain& m, const LayerParams& p, Tensor d_out, Tensor d_pre,
                      bool bias_grad);
  // A row-parallel weight gradient from the gathered output gradient dy (s, b, h; the shard
  // itself without sequence parallelism). (Its bias gradient comes with the next norm's backward:
  // norm_backward_add.)
  void row_weight_grad(Tensor dy, Tensor x, int w, const char* name);
  // Row-parallel input gradient: dx = dy · W, dy gathered; the epilogue (kDGelu: with aux) per
  // Backend::gemm.
  void row_input_grad(Tensor dy, int w, Tensor dx, const char* name, Epilogue e = Epilogue::kNone,
                      Tensor aux = {});
  float attn_scale() const;
  template <class F>
  void traced(const char* what, F&& f);
  // --trace-level ops: op_start() marks the start of a stretch of kernels; op_done(name) after
  // the kernels of one simulator item records them as a span named as the simulator names it
  // ("L<layer> <name>", "re " before a recomputed forward's). No-ops without ops tracing.
  void op_start();
  void op_done(const char* name);

  const GptDims& d_;
  const ParamLayout& params_;
  Tensor weights_, grads_;
  Backend& be_;
  Comm& tp_;
  Workspace& ws_;
  Tracer* tracer_;
  std::vector<char> stale_;  // per parameter: its gradient not yet written this iteration
  int64_t layer_ = -1;       // the layer being run (trace names)
  int op_mark_ = -1;         // the end of the last traced kernel (ops tracing)
  bool recomputing_ = false;
};

}  // namespace mplan::exec
