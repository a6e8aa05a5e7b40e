// GptBlocks: the GPT's forward, input-gradient and weight-gradient math over Backend and the
// tensor-parallel Comm (layout (s, b, h); the residual stream holds this rank's sequence shard
// with sequence parallelism).
#include "exec/model/gpt_blocks.hpp"

#include <algorithm>
#include <cmath>

#include "exec/parallel/grad_sync.hpp"
#include "src/common/error.hpp"

namespace mplan::exec {

namespace {
GemmArgs gemm_args(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float beta = 0.0f,
                   Epilogue e = Epilogue::kNone) {
  return {
      .trans_a = trans_a, .trans_b = trans_b, .m = m, .n = n, .k = k, .beta = beta, .epilogue = e};
}
}  // namespace

GptBlocks::GptBlocks(const GptDims& d, const ParamLayout& params, Tensor weights, Tensor grads,
                     Backend& be, Comm& tp, Workspace& ws, Tracer* tracer)
    : d_(d),
      params_(params),
      weights_(weights),
      grads_(grads),
      be_(be),
      tp_(tp),
      ws_(ws),
      tracer_(tracer),
      stale_(params.specs.size(), 0) {}

Tensor GptBlocks::weight(int i) const {
  const ParamSpec& p = params_.specs.at(static_cast<size_t>(i));
  Tensor t = weights_.flat_slice(p.offset, p.local_numel());
  return p.ndim == 2 ? t.view({p.local_rows, p.local_cols}) : t;
}

Tensor GptBlocks::grad(int i) const {
  const ParamSpec& p = params_.specs.at(static_cast<size_t>(i));
  Tensor t = grads_.flat_slice(p.offset, p.local_numel());
  return p.ndim == 2 ? t.view({p.local_rows, p.local_cols}) : t;
}

void GptBlocks::begin_grads() { std::fill(stale_.begin(), stale_.end(), 1); }

void GptBlocks::settle_grads() {
  for (size_t i = 0; i < stale_.size(); ++i) grad_acc(static_cast<int>(i));
}

bool GptBlocks::take_stale(int i) {
  char& s = stale_.at(static_cast<size_t>(i));
  const bool was = s != 0;
  s = 0;
  return was;
}

float GptBlocks::grad_beta(int i) { return take_stale(i) ? 0.0f : 1.0f; }

Tensor GptBlocks::grad_acc(int i) {
  const Tensor g = grad(i);
  if (take_stale(i)) be_.fill(g, 0.0f);
  return g;
}

void GptBlocks::mark(GradSync* sync, int param) {
  if (sync != nullptr && param >= 0) sync->mark_final(param);
}

float GptBlocks::attn_scale() const { return 1.0f / std::sqrt(static_cast<float>(d_.head_dim)); }

template <class F>
void GptBlocks::traced(const char* what, F&& f) {
  if (tracer_ == nullptr) return f();
  TraceSpan s;
  s.name = layer_ >= 0 ? cat("L", layer_, " ", what) : std::string(what);
  s.kind = SpanKind::kTp;
  s.begin = tracer_->mark(Stream::kCompute);
  f();
  s.end = tracer_->mark(Stream::kCompute);
  op_mark_ = s.end;  // the next kernel starts after the collective
  tracer_->add(std::move(s));
}

void GptBlocks::op_start() {
  if (tracer_ != nullptr && tracer_->ops()) op_mark_ = tracer_->mark(Stream::kCompute);
}

void GptBlocks::op_done(const char* name) {
  if (tracer_ == nullptr || !tracer_->ops()) return;
  TraceSpan s;
  const char* re = recomputing_ ? "re " : "";
  s.name = layer_ >= 0 ? cat("L", layer_, " ", re, name) : cat(re, name);
  s.kind = SpanKind::kOp;
  s.begin = op_mark_ >= 0 ? op_mark_ : tracer_->mark(Stream::kCompute);
  s.end = tracer_->mark(Stream::kCompute);
  op_mark_ = s.end;
  tracer_->add(std::move(s));
}

// ---- tensor-parallel communication --------------------------------------------------------------

Tensor GptBlocks::gather_sequence(Tensor shard, Tensor scratch) {
  if (!d_.sp()) return shard;
  traced("tp_all_gather", [&] { tp_.all_gather(shard, scratch, Stream::kCompute); });
  return scratch;
}

Tensor GptBlocks::reduce_partial(Tensor partial, Tensor shard_out) {
  if (d_.tp == 1) return partial;
  if (!d_.sp()) {
    traced("tp_all_reduce", [&] { tp_.all_reduce(partial, ReduceOp::kSum, Stream::kCompute); });
    return partial;
  }
  traced("tp_reduce_scatter", [&] { tp_.reduce_scatter(partial, shard_out, Stream::kCompute); });
  return shard_out;
}

void GptBlocks::row_forward(Tensor x, int w, int b, Tensor resid, Tensor out, const char* name) {
  const int64_t T = d_.tokens(), h = d_.hidden;
  const int64_t k = x.numel() / T;
  if (d_.tp == 1) {  // nothing to reduce: the residual add is the GEMM's epilogue
    const Epilogue e = b >= 0 ? Epilogue::kBiasResidual : Epilogue::kResidual;
    be_.gemm(gemm_args(false, true, T, h, k, 0.0f, e), x, weight(w), out,
             b >= 0 ? weight(b) : Tensor{}, resid);
    op_done(name);
    return;
  }
  if (d_.tp_rank == 0 && b >= 0)
    be_.gemm(gemm_args(false, true, T, h, k, 0.0f, Epilogue::kBias), x, weight(w), ws_.partial,
             weight(b));
  else
    be_.gemm(gemm_args(false, true, T, h, k), x, weight(w), ws_.partial);
  op_done(name);
  be_.add(out, resid, reduce_partial(ws_.partial, ws_.reduced));
  op_done("residual_add");
}

void GptBlocks::row_weight_grad(Tensor dy, Tensor x, int w, const char* name) {
  const int64_t T = d_.tokens(), h = d_.hidden;
  const int64_t k = x.numel() / T;
  be_.gemm(gemm_args(true, false, h, k, T, grad_beta(w)), dy, x, grad(w));  // dW += dy^T x
  op_done(name);
}

void GptBlocks::row_input_grad(Tensor dy, int w, Tensor dx, const char* name, Epilogue e,
                               Tensor aux) {
  const int64_t T = d_.tokens(), h = d_.hidden;
  const int64_t k = dx.numel() / T;
  be_.gemm(gemm_args(false, false, T, k, h, 0.0f, e), dy, weight(w), dx, {}, aux);  // dx = dy W
  op_done(name);
}

// ---- embedding ----------------------------------------------------------------------------------

void GptBlocks::embedding_forward(const ChunkParams& c, Tensor tokens, Tensor out) {
  MPLAN_CHECK(tokens.dtype == DType::kI32 && tokens.numel() == d_.tokens(),
              "tokens must be (s, b) i32 with ", d_.tokens(), " elements");
  layer_ = -1;
  op_start();
  // Vocab-parallel embedding: each rank looks up its vocabulary rows, the TP sum completes it.
  if (d_.tp == 1) {
    be_.embedding_forward(tokens, weight(c.wte), 0, out);
    op_done("embedding");
  } else if (!d_.sp()) {
    be_.embedding_forward(tokens, weight(c.wte), d_.vocab_start(), out);
    op_done("embedding");
    traced("tp_all_reduce", [&] { tp_.all_reduce(out, ReduceOp::kSum, Stream::kCompute); });
  } else {
    be_.embedding_forward(tokens, weight(c.wte), d_.vocab_start(), ws_.partial);
    op_done("embedding");
    traced("tp_reduce_scatter", [&] { tp_.reduce_scatter(ws_.partial, out, Stream::kCompute); });
  }
  if (c.wpe >= 0) {
    be_.add_position_embedding(out, weight(c.wpe), d_.seq_offset());
    op_done("position_add");
  }
}

void GptBlocks::embedding_backward(const ChunkParams& c, Tensor tokens, Tensor d_out, Tensor keep,
                                   GradSync* sync) {
  layer_ = -1;
  op_start();
  // The full-sequence gradient (gathered with SP) feeds both tables.
  Tensor dx0 = gather_sequence(d_out, ws_.d_gathered);
  if (keep.data != nullptr) {
    be_.copy(keep, dx0);
    return;
  }
  embedding_weight_grad(c, tokens, dx0, sync);
}

void GptBlocks::embedding_weight_grad(const ChunkParams& c, Tensor tokens, Tensor d_full,
                                      GradSync* sync) {
  layer_ = -1;
  op_start();
  if (c.wpe >= 0) {
    be_.position_embedding_backward(d_full, grad_acc(c.wpe), 0);
    mark(sync, c.wpe);
  }
  be_.embedding_backward(tokens, d_full, d_.vocab_start(), grad_acc(c.wte));
  op_done("embedding_bwd");
  mark(sync, c.wte);
}

// ---- transformer layer --------------------------------------------------------------------------

void GptBlocks::norm_forward(Tensor x, int w, int b, Tensor y, Tensor mean, Tensor rstd) {
  if (d_.rmsnorm)
    be_.rmsnorm_forward(x, weight(w), kLayerNormEps, y, rstd);
  else
    be_.layernorm_forward(x, weight(w), weight(b), kLayerNormEps, y, mean, rstd);
}

void GptBlocks::norm_backward_add(Tensor dy, Tensor x, int w, int b, Tensor mean, Tensor rstd,
                                  Tensor dres, int dres_bias) {
  const Tensor colsum = dres_bias >= 0 ? grad_acc(dres_bias) : Tensor{};
  if (d_.rmsnorm)
    be_.rmsnorm_backward_add(dy, x, weight(w), rstd, ws_.d_norm, grad_acc(w), dres, colsum);
  else
    be_.layernorm_backward_add(dy, x, weight(w), mean, rstd, ws_.d_norm, grad_acc(w), grad_acc(b),
                               dres, colsum);
}

Tensor GptBlocks::gemm_bias(int b) const { return b >= 0 ? weight(b) : Tensor{}; }

// Multi-head or grouped-query: the backend reads each head's K/V group from qkv as the QKV GEMM
// wrote it (no expanded copy).
void GptBlocks::attention_forward(const LayerMain& m, Tensor ctx, Tensor lse) {
  be_.attention_forward(m.qkv, ctx, lse, attn_scale());
  op_done("attention");
}

// The bias gradient comes with the attention backward's results, unless RoPE then rotates them
// back: the bias gradient sums the gradient of the QKV GEMM's output.
void GptBlocks::attention_backward(const LayerMain& m, Tensor ctx, Tensor lse, Tensor d_qkv,
                                   Tensor d_qkv_bias) {
  be_.attention_backward(m.qkv, ctx, ws_.d_ctx, lse, attn_scale(), d_qkv,
                         d_.rope ? Tensor{} : d_qkv_bias);
  op_done("attention_bwd");
  // The gradient of the rotated Q and K -> of the QKV GEMM's output.
  if (d_.rope) {
    be_.rope(d_qkv, d_.heads_local(), d_.groups_local(), d_.rot_dim, d_.rotary_base, true);
    op_done("rope_bwd");
    if (d_qkv_bias.data != nullptr) {
      be_.bias_grad_accumulate(d_qkv, d_qkv_bias);
      op_done("bias_grad");
    }
  }
}

void GptBlocks::layer_forward(const LayerRef& r, Tensor x_out) {
  const LayerParams& p = *r.p;
  const LayerMain& m = r.a.main;
  const LayerWeightInputs& w = r.a.win;
  const int64_t T = d_.tokens(), h = d_.hidden;
  const int64_t qkv_cols = d_.qkv_heads_local() * d_.head_dim;
  layer_ = r.layer;
  op_start();
  norm_forward(r.x, p.ln1_w, p.ln1_b, w.y1, m.ln1_mean, m.ln1_rstd);
  op_done("input_norm");
  Tensor y1 = gather_sequence(w.y1, ws_.gathered);
  be_.gemm(
      gemm_args(false, true, T, qkv_cols, h, 0.0f, d_.bias ? Epilogue::kBias : Epilogue::kNone), y1,
      weight(p.qkv_w), m.qkv, gemm_bias(p.qkv_b));
  op_done("qkv");
  if (d_.rope) {
    be_.rope(m.qkv, d_.heads_local(), d_.groups_local(), d_.rot_dim, d_.rotary_base, false);
    op_done("rope");
  }
  attention_forward(m, w.ctx, m.lse.data != nullptr ? m.lse : ws_.att_lse);
  row_forward(w.ctx, p.proj_w, p.proj_b, r.x, m.x_mid, "proj");
  norm_forward(m.x_mid, p.ln2_w, p.ln2_b, w.y2, m.ln2_mean, m.ln2_rstd);
  op_done("pre_mlp_norm");
  Tensor y2 = gather_sequence(w.y2, ws_.gathered);
  if (d_.gated) {  // fc1 -> [gate | up], then silu(gate) · up
    be_.gemm(gemm_args(false, true, T, d_.fc1_local(), h, 0.0f,
                       d_.bias ? Epilogue::kBias : Epilogue::kNone),
             y2, weight(p.fc1_w), m.fc1_pre, gemm_bias(p.fc1_b));
    op_done("fc1");
    be_.swiglu_forward(m.fc1_pre, w.fc1_act);
    op_done("activation");
  } else if (d_.bias) {
    be_.gemm(gemm_args(false, true, T, d_.ffn_local(), h, 0.0f, Epilogue::kBiasGelu), y2,
             weight(p.fc1_w), w.fc1_act, weight(p.fc1_b), m.fc1_pre);
    op_done("fc1");
  } else {
    be_.gemm(gemm_args(false, true, T, d_.ffn_local(), h), y2, weight(p.fc1_w), m.fc1_pre);
    op_done("fc1");
    be_.gelu_forward(m.fc1_pre, w.fc1_act);
    op_done("activation");
  }
  row_forward(w.fc1_act, p.fc2_w, p.fc2_b, m.x_mid, x_out, "fc2");
}

// fc2's input gradient through the activation: d_pre = dL/d(fc1 output) from the gathered
// d_out; with `bias_grad`, fc1's bias gradient too. GeLU's backward runs in the GEMM's epilogue
// (kDGelu, on the pre-activation the forward saved); SwiGLU's is a kernel of its own on d_h.
void GptBlocks::mlp_input_grad(const LayerMain& m, const LayerParams& p, Tensor d_out, Tensor d_pre,
                               bool bias_grad) {
  if (d_.gated) {
    row_input_grad(d_out, p.fc2_w, ws_.d_h, "fc2_dgrad");
    be_.swiglu_backward(ws_.d_h, m.fc1_pre, d_pre);
    op_done("activation_bwd");
  } else {
    row_input_grad(d_out, p.fc2_w, d_pre, "fc2_dgrad", Epilogue::kDGelu, m.fc1_pre);
  }
  if (bias_grad && p.fc1_b >= 0) {
    be_.bias_grad_accumulate(d_pre, grad_acc(p.fc1_b));
    op_done("bias_grad");
  }
}

void GptBlocks::layer_backward(const LayerRef& r, Tensor d_res, bool split, GradSync* sync) {
  const LayerParams& p = *r.p;
  const LayerMain& m = r.a.main;
  const LayerWeightInputs& w = r.a.win;
  const LayerOutputGrads& dy = r.a.dy;
  const int64_t T = d_.tokens(), h = d_.hidden;
  const int64_t qkv_cols = d_.qkv_heads_local() * d_.head_dim;
  layer_ = r.layer;
  op_start();
  // d_res holds dL/d(output). MLP: out = x_mid + fc2(act(fc1(norm2(x_mid)))).
  Tensor d_out = gather_sequence(d_res, ws_.d_gathered);  // (s, b, h), once for both GEMMs
  // fc2's and proj's bias gradients are taken by the next norm's backward, which reads d_res
  // anyway (also when B and W are split: the same sums, so the split run stays bitwise the plain
  // one).
  if (split) {
    be_.copy(dy.d_fc2, d_res);
    op_done("copy");
  } else {
    row_weight_grad(d_out, w.fc1_act, p.fc2_w, "fc2_wgrad");
    mark(sync, p.fc2_w);
  }
  Tensor d_pre = split ? dy.d_fc1 : ws_.d_pre;
  mlp_input_grad(m, p, d_out, d_pre, !split);
  if (!split) {
    Tensor y2 = gather_sequence(w.y2, ws_.gathered);
    be_.gemm(gemm_args(true, false, d_.fc1_local(), h, T, grad_beta(p.fc1_w)), d_pre, y2,
             grad(p.fc1_w));
    op_done("fc1_wgrad");
    mark(sync, p.fc1_b);
    mark(sync, p.fc1_w);
  }
  be_.gemm(gemm_args(false, false, T, h, d_.fc1_local()), d_pre, weight(p.fc1_w), ws_.partial);
  op_done("fc1_dgrad");
  Tensor dy2 = reduce_partial(ws_.partial, ws_.reduced);
  norm_backward_add(dy2, m.x_mid, p.ln2_w, p.ln2_b, m.ln2_mean, m.ln2_rstd, d_res,
                    p.fc2_b);  // d_res: dL/dx_mid
  op_done("pre_mlp_norm_bwd");
  if (!split) {
    mark(sync, p.fc2_b);
    mark(sync, p.ln2_b);
    mark(sync, p.ln2_w);
  }
  // Attention: x_mid = x + proj(attention(rope(qkv(norm1(x))))).
  d_out = gather_sequence(d_res, ws_.d_gathered);
  if (split) {
    be_.copy(dy.d_proj, d_res);
    op_done("copy");
  } else {
    row_weight_grad(d_out, w.ctx, p.proj_w, "proj_wgrad");
    mark(sync, p.proj_w);
  }
  row_input_grad(d_out, p.proj_w, ws_.d_ctx, "proj_dgrad");
  Tensor ctx = w.ctx, lse = m.lse;
  if (lse.data == nullptr) {  // selective recompute: the attention core runs again
    set_recomputing(true);
    attention_forward(m, ws_.att_ctx, ws_.att_lse);
    set_recomputing(false);
    ctx = ws_.att_ctx;
    lse = ws_.att_lse;
  }
  Tensor d_qkv = split ? dy.d_qkv : ws_.d_qkv;
  // QKV's bias gradient, the column sums of d_qkv, comes with the attention backward (in B also
  // when B and W are split: a backend may take it from its kernels' registers).
  attention_backward(m, ctx, lse, d_qkv, p.qkv_b >= 0 ? grad_acc(p.qkv_b) : Tensor{});
  if (!split) {
    Tensor y1 = gather_sequence(w.y1, ws_.gathered);
    be_.gemm(gemm_args(true, false, qkv_cols, h, T, grad_beta(p.qkv_w)), d_qkv, y1, grad(p.qkv_w));
    op_done("qkv_wgrad");
    mark(sync, p.qkv_b);
    mark(sync, p.qkv_w);
  }
  be_.gemm(gemm_args(false, false, T, h, qkv_cols), d_qkv, weight(p.qkv_w), ws_.partial);
  op_done("qkv_dgrad");
  Tensor dy1 = reduce_partial(ws_.partial, ws_.reduced);
  norm_backward_add(dy1, r.x, p.ln1_w, p.ln1_b, m.ln1_mean, m.ln1_rstd, d_res,
                    p.proj_b);  // d_res: dL/dx
  op_done("input_norm_bwd");
  if (!split) {
    mark(sync, p.proj_b);
    mark(sync, p.ln1_b);
    mark(sync, p.ln1_w);
  }
}

void GptBlocks::layer_weight_grad(const LayerRef& r, GradSync* sync) {
  const LayerParams& p = *r.p;
  const LayerWeightInputs& w = r.a.win;
  const LayerOutputGrads& dy = r.a.dy;
  const int64_t T = d_.tokens(), h = d_.hidden;
  layer_ = r.layer;
  op_start();
  // (fc2's and proj's bias gradients came with B's norm backwards.)
  row_weight_grad(gather_sequence(dy.d_fc2, ws_.d_gathered), w.fc1_act, p.fc2_w, "fc2_wgrad");
  if (p.fc1_b >= 0) {
    be_.bias_grad_accumulate(dy.d_fc1, grad_acc(p.fc1_b));
    op_done("bias_grad");
  }
  Tensor y2 = gather_sequence(w.y2, ws_.gathered);
  be_.gemm(gemm_args(true, false, d_.fc1_local(), h, T, grad_beta(p.fc1_w)), dy.d_fc1, y2,
           grad(p.fc1_w));
  op_done("fc1_wgrad");
  row_weight_grad(gather_sequence(dy.d_proj, ws_.d_gathered), w.ctx, p.proj_w, "proj_wgrad");
  // (QKV's bias gradient came with B's attention backward.)
  Tensor y1 = gather_sequence(w.y1, ws_.gathered);
  be_.gemm(gemm_args(true, false, d_.qkv_heads_local() * d_.head_dim, h, T, grad_beta(p.qkv_w)),
           dy.d_qkv, y1, grad(p.qkv_w));
  op_done("qkv_wgrad");
  // The norms' gradients were accumulated in B (fused with their input gradients).
  for (int i : {p.fc2_b, p.fc2_w, p.fc1_b, p.fc1_w, p.ln2_b, p.ln2_w, p.proj_b, p.proj_w, p.qkv_b,
                p.qkv_w, p.ln1_b, p.ln1_w})
    mark(sync, i);
}

// ---- head ---------------------------------------------------------------------------------------

void GptBlocks::head_forward(const ChunkParams& c, const HeadMain& hm, const HeadWeightInputs& w,
                             Tensor targets, float grad_scale, Tensor loss_sum, bool loss_only) {
  MPLAN_CHECK(targets.dtype == DType::kI32 && targets.numel() == d_.tokens(),
              "targets must be (s, b) i32 with ", d_.tokens(), " elements");
  layer_ = -1;
  op_start();
  norm_forward(hm.x, c.lnf_w, c.lnf_b, w.yf, hm.lnf_mean, hm.lnf_rstd);
  op_done("final_norm");
  // Output layer (tied to the word embedding, or its copy on the last stage): column-parallel
  // over the vocabulary.
  Tensor yf = gather_sequence(w.yf, ws_.gathered);
  be_.gemm(gemm_args(false, true, d_.tokens(), d_.vocab_local(), d_.hidden), yf, weight(c.output),
           w.logits);
  op_done("logits");
  // Vocab-parallel cross-entropy: global max, then global sum of exp and target logit (one pass
  // over the logits for both where the vocabulary is not split), then the loss and the gradient
  // in place. Where the vocabulary is not split and the gradient is wanted, all three in one call
  // (the backend may read and write the logits once).
  if (d_.tp == 1 && !loss_only) {
    be_.xent_max_stats_loss_and_grad(w.logits, targets, d_.vocab_start(), hm.row_max, hm.stats,
                                     grad_scale, hm.token_loss);
  } else {
    if (d_.tp == 1) {
      be_.xent_local_max_and_stats(w.logits, targets, d_.vocab_start(), hm.row_max, hm.stats);
    } else {
      be_.xent_local_max(w.logits, hm.row_max);
      traced("tp_all_reduce",
             [&] { tp_.all_reduce(hm.row_max, ReduceOp::kMax, Stream::kCompute); });
      be_.xent_local_stats(w.logits, targets, d_.vocab_start(), hm.row_max, hm.stats);
      traced("tp_all_reduce", [&] { tp_.all_reduce(hm.stats, ReduceOp::kSum, Stream::kCompute); });
    }
    // Loss only: an empty (T, 0) view of the logits receives the (absent) gradient.
    const Tensor dlogits = loss_only ? w.logits.flat_slice(0, 0).view({d_.tokens(), 0}) : w.logits;
    be_.xent_loss_and_grad(dlogits, targets, d_.vocab_start(), hm.row_max, hm.stats, grad_scale,
                           hm.token_loss);
  }
  be_.sum(hm.token_loss, loss_sum, /*accumulate=*/true);
  op_done("cross_entropy");
}

void GptBlocks::head_backward(const ChunkParams& c, const HeadMain& hm, const HeadWeightInputs& w,
                              Tensor d_x, bool split, GradSync* sync) {
  layer_ = -1;
  op_start();
  // logits = yf · W^T: dW += dlogits^T · yf; dyf = dlogits · W, TP-reduced.
  if (!split) head_weight_grad(c, w, sync, /*mark_norm=*/false);
  be_.gemm(gemm_args(false, false, d_.tokens(), d_.hidden, d_.vocab_local()), w.logits,
           weight(c.output), ws_.partial);
  op_done("logits_dgrad");
  Tensor dyf = reduce_partial(ws_.partial, ws_.reduced);
  if (d_.rmsnorm)
    be_.rmsnorm_backward(dyf, hm.x, weight(c.lnf_w), hm.lnf_rstd, d_x, grad_acc(c.lnf_w));
  else
    be_.layernorm_backward(dyf, hm.x, weight(c.lnf_w), hm.lnf_mean, hm.lnf_rstd, d_x,
                           grad_acc(c.lnf_w), grad_acc(c.lnf_b));
  op_done("final_norm_bwd");
  if (!split) {
    mark(sync, c.lnf_b);
    mark(sync, c.lnf_w);
  }
}

void GptBlocks::head_weight_grad(const ChunkParams& c, const HeadWeightInputs& w, GradSync* sync,
                                 bool mark_norm) {
  layer_ = -1;
  op_start();
  Tensor yf = gather_sequence(w.yf, ws_.gathered);
  be_.gemm(gemm_args(true, false, d_.vocab_local(), d_.hidden, d_.tokens(), grad_beta(c.output)),
           w.logits, yf, grad(c.output));
  op_done("logits_wgrad");
  // The tied word embedding of this chunk is final only after the embedding's backward.
  if (c.output != c.wte) mark(sync, c.output);
  if (mark_norm) {  // zero-bubble: its gradient was accumulated in B
    mark(sync, c.lnf_b);
    mark(sync, c.lnf_w);
  }
}

}  // namespace mplan::exec
