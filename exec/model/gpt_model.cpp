// GptModel: forward and backward of the GPT with Megatron-LM's tensor parallelism.
// Column-parallel (QKV by heads inside each of Q, K, V; FC1; the tied output layer by vocabulary):
// input replicated (gathered with SP), output sharded; backward reduces the input gradient over TP
// (all-reduce, or reduce-scatter with SP). Row-parallel (projection, FC2): input sharded, output
// reduced over TP (all-reduce, or reduce-scatter with SP); the bias is added once after the sum
// (here: by TP rank 0 into its partial sum, which is the same number) and its gradient comes from
// the reduced output gradient. Vocab-parallel embedding and cross-entropy (max and sums over TP).
#include "exec/model/gpt_model.hpp"

#include <algorithm>
#include <cmath>
#include <thread>

#include "src/common/error.hpp"

namespace mplan::exec {

namespace {
GemmArgs gemm_args(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float beta = 0.0f,
                   Epilogue e = Epilogue::kNone) {
  return {
      .trans_a = trans_a, .trans_b = trans_b, .m = m, .n = n, .k = k, .beta = beta, .epilogue = e};
}
}  // namespace

GptModel::GptModel(const GptDims& dims, DType act, Backend& backend, Comm& tp, Comm& dp,
                   uint64_t seed, double init_method_std, int64_t bucket_elems)
    : dims_(dims), act_(act), be_(backend), tp_(tp), params_(make_gpt_params(dims)) {
  MPLAN_CHECK(act == DType::kF32 || act == DType::kBF16, "activations must be f32 or bf16");
  MPLAN_CHECK(tp.size() == dims.tp && tp.rank() == dims.tp_rank, "tp group (rank ", tp.rank(),
              " of ", tp.size(), ") does not match the dims (", dims.tp_rank, " of ", dims.tp, ")");
  const GptDims& d = dims_;
  const int64_t s = d.seq, b = d.micro_batch, h = d.hidden, sl = d.seq_local();
  const int64_t T = d.tokens(), Tl = d.tokens_local();
  const int64_t hl = d.heads_local(), hd = d.head_dim, fl = d.ffn_local();

  master_ = alloc(DType::kF32, {params_.total_elems}, "master_weights");
  weights_ = alloc(act, {params_.total_elems}, "weights");
  grads_ = alloc(DType::kF32, {params_.total_elems}, "grads");
  be_.fill(grads_, 0.0f);

  x_.resize(static_cast<size_t>(d.layers + 1));
  for (auto& x : x_) x = alloc(act, {sl, b, h}, "activations");
  layers_.resize(static_cast<size_t>(d.layers));
  for (Layer& a : layers_) {
    a.ln1_mean = alloc(DType::kF32, {Tl}, "activations");
    a.ln1_rstd = alloc(DType::kF32, {Tl}, "activations");
    a.y1 = alloc(act, {sl, b, h}, "activations");
    a.qkv = alloc(act, {s, b, 3 * hl, hd}, "activations");
    a.ctx = alloc(act, {s, b, hl, hd}, "activations");
    a.lse = alloc(DType::kF32, {b, hl, s}, "activations");
    a.x_mid = alloc(act, {sl, b, h}, "activations");
    a.ln2_mean = alloc(DType::kF32, {Tl}, "activations");
    a.ln2_rstd = alloc(DType::kF32, {Tl}, "activations");
    a.y2 = alloc(act, {sl, b, h}, "activations");
    a.fc1_pre = alloc(act, {s, b, fl}, "activations");
    a.fc1_act = alloc(act, {s, b, fl}, "activations");
  }
  lnf_mean_ = alloc(DType::kF32, {Tl}, "activations");
  lnf_rstd_ = alloc(DType::kF32, {Tl}, "activations");
  yf_ = alloc(act, {sl, b, h}, "activations");
  logits_ = alloc(act, {T, d.vocab_local()}, "activations");
  row_max_ = alloc(DType::kF32, {T}, "activations");
  xent_stats_ = alloc(DType::kF32, {2, T}, "activations");
  token_loss_ = alloc(DType::kF32, {T}, "activations");

  if (d.sp()) {
    gathered_ = alloc(act, {s, b, h}, "workspace");
    reduced_ = alloc(act, {sl, b, h}, "workspace");
    d_gathered_ = alloc(act, {s, b, h}, "workspace");
  }
  partial_ = alloc(act, {s, b, h}, "workspace");
  d_res_ = alloc(act, {sl, b, h}, "workspace");
  d_norm_ = alloc(act, {sl, b, h}, "workspace");
  d_ctx_ = alloc(act, {s, b, hl, hd}, "workspace");
  d_qkv_ = alloc(act, {s, b, 3 * hl, hd}, "workspace");
  d_h_ = alloc(act, {s, b, fl}, "workspace");
  d_pre_ = alloc(act, {s, b, fl}, "workspace");
  if (d.sp()) {
    int64_t n = 0;
    for (const ParamSpec& p : params_.specs)
      if (p.sp_grad_reduce) n += p.local_numel();
    sp_stage_ = alloc(DType::kF32, {n}, "workspace");
  }
  grad_sync_ = std::make_unique<DpGradSync>(params_, grads_, be_, dp, bucket_elems);
  init_weights(seed, init_method_std);
}

GptModel::~GptModel() {
  for (Tensor& t : owned_) be_.release(t);
}

Tensor GptModel::alloc(DType t, std::initializer_list<int64_t> shape, const char* tag) {
  owned_.push_back(be_.alloc(t, shape, tag));
  return owned_.back();
}

Tensor GptModel::param_view(Tensor buf, int i) const {
  const ParamSpec& p = params_.specs.at(static_cast<size_t>(i));
  Tensor t = buf.flat_slice(p.offset, p.local_numel());
  return p.ndim == 2 ? t.view({p.local_rows, p.local_cols}) : t;
}

void GptModel::init_weights(uint64_t seed, double init_method_std) {
  be_.fill(master_, 0.0f);
  std::vector<float> host;
  unsigned hw = std::max(1u, std::min(16u, std::thread::hardware_concurrency()));
  for (size_t i = 0; i < params_.specs.size(); ++i) {
    const ParamSpec& p = params_.specs[i];
    int64_t n = p.local_numel();
    host.resize(static_cast<size_t>(n));
    int64_t chunks = n >= (int64_t{1} << 20) ? hw : 1;
    std::vector<std::thread> pool;
    for (int64_t c = 0; c < chunks; ++c) {
      int64_t lo = n * c / chunks, hi = n * (c + 1) / chunks;
      auto work = [&, lo, hi] {
        init_param_shard(p, static_cast<int>(i), dims_, seed, init_method_std, lo, hi,
                         host.data() + lo);
      };
      if (chunks == 1)
        work();
      else
        pool.emplace_back(work);
    }
    for (auto& t : pool) t.join();
    be_.upload(master_.flat_slice(p.offset, n), host.data());
  }
  refresh_weights();
}

void GptModel::refresh_weights() {
  if (act_ == DType::kF32)
    be_.copy(weights_, master_);
  else
    be_.cast(weights_, master_);
}

void GptModel::zero_grads() { be_.fill(grads_, 0.0f); }

// ---- tensor-parallel communication ------------------------------------------------------------

Tensor GptModel::gather_sequence(Tensor shard, Tensor scratch) {
  if (!dims_.sp()) return shard;
  tp_.all_gather(shard, scratch, Stream::kCompute);
  return scratch;
}

Tensor GptModel::reduce_partial(Tensor partial, Tensor shard_out) {
  if (dims_.tp == 1) return partial;
  if (!dims_.sp()) {
    tp_.all_reduce(partial, ReduceOp::kSum, Stream::kCompute);
    return partial;
  }
  tp_.reduce_scatter(partial, shard_out, Stream::kCompute);
  return shard_out;
}

Tensor GptModel::row_forward(Tensor x, int w, int b) {
  const int64_t T = dims_.tokens(), h = dims_.hidden;
  const int64_t k = x.numel() / T;
  if (dims_.tp_rank == 0)
    be_.gemm(gemm_args(false, true, T, h, k, 0.0f, Epilogue::kBias), x, weight(w), partial_,
             weight(b));
  else
    be_.gemm(gemm_args(false, true, T, h, k), x, weight(w), partial_);
  return reduce_partial(partial_, reduced_);
}

void GptModel::row_backward(Tensor dy_shard, Tensor x, int w, int b, Tensor dx) {
  const int64_t T = dims_.tokens(), h = dims_.hidden;
  const int64_t k = x.numel() / T;
  be_.bias_grad_accumulate(dy_shard, grad(b));
  Tensor dy = gather_sequence(dy_shard, d_gathered_);               // (s, b, h)
  be_.gemm(gemm_args(true, false, h, k, T, 1.0f), dy, x, grad(w));  // dW (h, k) += dy^T x
  be_.gemm(gemm_args(false, false, T, k, h), dy, weight(w), dx);    // dx (T, k) = dy W
}

void GptModel::column_backward(Tensor dy, Tensor x_full, int w, Tensor dx_partial) {
  const int64_t T = dims_.tokens(), h = dims_.hidden;
  const int64_t n = dy.numel() / T;
  be_.gemm(gemm_args(true, false, n, h, T, 1.0f), dy, x_full, grad(w));   // dW (n, h) += dy^T x
  be_.gemm(gemm_args(false, false, T, h, n), dy, weight(w), dx_partial);  // (T, h) = dy W
}

// ---- forward ----------------------------------------------------------------------------------

void GptModel::forward(Tensor tokens) {
  const GptDims& d = dims_;
  MPLAN_CHECK(tokens.dtype == DType::kI32 && tokens.numel() == d.tokens(),
              "tokens must be (s, b) "
              "i32 with ",
              d.tokens(), " elements");
  // Vocab-parallel embedding: each rank looks up its vocabulary rows, the TP sum completes it.
  Tensor x0 = x_[0];
  if (d.tp == 1) {
    be_.embedding_forward(tokens, weight(params_.wte), 0, x0);
  } else if (!d.sp()) {
    be_.embedding_forward(tokens, weight(params_.wte), d.vocab_start(), x0);
    tp_.all_reduce(x0, ReduceOp::kSum, Stream::kCompute);
  } else {
    be_.embedding_forward(tokens, weight(params_.wte), d.vocab_start(), partial_);
    tp_.reduce_scatter(partial_, x0, Stream::kCompute);
  }
  be_.add_position_embedding(x0, weight(params_.wpe), d.seq_offset());
  for (int64_t l = 0; l < d.layers; ++l) layer_forward(l);
  be_.layernorm_forward(x_[static_cast<size_t>(d.layers)], weight(params_.lnf_w),
                        weight(params_.lnf_b), kLayerNormEps, yf_, lnf_mean_, lnf_rstd_);
  // Output layer tied to the word embedding: column-parallel over the vocabulary.
  Tensor yf = gather_sequence(yf_, gathered_);
  be_.gemm(gemm_args(false, true, d.tokens(), d.vocab_local(), d.hidden), yf, weight(params_.wte),
           logits_);
}

void GptModel::layer_forward(int64_t l) {
  const GptDims& d = dims_;
  Layer& a = layers_[static_cast<size_t>(l)];
  const LayerParams& p = params_.layers[static_cast<size_t>(l)];
  const int64_t T = d.tokens(), h = d.hidden;
  be_.layernorm_forward(x_[static_cast<size_t>(l)], weight(p.ln1_w), weight(p.ln1_b), kLayerNormEps,
                        a.y1, a.ln1_mean, a.ln1_rstd);
  Tensor y1 = gather_sequence(a.y1, gathered_);
  be_.gemm(gemm_args(false, true, T, 3 * d.attn_local(), h, 0.0f, Epilogue::kBias), y1,
           weight(p.qkv_w), a.qkv, weight(p.qkv_b));
  be_.attention_forward(a.qkv, a.ctx, a.lse, 1.0f / std::sqrt(static_cast<float>(d.head_dim)));
  Tensor attn = row_forward(a.ctx, p.proj_w, p.proj_b);
  be_.add(a.x_mid, x_[static_cast<size_t>(l)], attn);
  be_.layernorm_forward(a.x_mid, weight(p.ln2_w), weight(p.ln2_b), kLayerNormEps, a.y2, a.ln2_mean,
                        a.ln2_rstd);
  Tensor y2 = gather_sequence(a.y2, gathered_);
  be_.gemm(gemm_args(false, true, T, d.ffn_local(), h, 0.0f, Epilogue::kBiasGelu), y2,
           weight(p.fc1_w), a.fc1_act, weight(p.fc1_b), a.fc1_pre);
  Tensor mlp = row_forward(a.fc1_act, p.fc2_w, p.fc2_b);
  be_.add(x_[static_cast<size_t>(l + 1)], a.x_mid, mlp);
}

// ---- backward ---------------------------------------------------------------------------------

void GptModel::backward(Tensor tokens, Tensor targets, float grad_scale, bool reduce_grads,
                        Tensor loss_sum) {
  const GptDims& d = dims_;
  MPLAN_CHECK(targets.dtype == DType::kI32 && targets.numel() == d.tokens(),
              "targets must be (s, b) i32 with ", d.tokens(), " elements");
  DpGradSync& sync = *grad_sync_;
  sync.begin_backward(reduce_grads);
  // Vocab-parallel cross-entropy: global max, then global sum of exp and target logit.
  be_.xent_local_max(logits_, row_max_);
  if (d.tp > 1) tp_.all_reduce(row_max_, ReduceOp::kMax, Stream::kCompute);
  be_.xent_local_stats(logits_, targets, d.vocab_start(), row_max_, xent_stats_);
  if (d.tp > 1) tp_.all_reduce(xent_stats_, ReduceOp::kSum, Stream::kCompute);
  be_.xent_loss_and_grad(logits_, targets, d.vocab_start(), row_max_, xent_stats_, grad_scale,
                         token_loss_);
  be_.sum(token_loss_, loss_sum, /*accumulate=*/true);

  // Output layer (logits = yf · wte^T): dwte += dlogits^T · yf; dyf = dlogits · wte, TP-reduced.
  Tensor yf = gather_sequence(yf_, gathered_);
  be_.gemm(gemm_args(true, false, d.vocab_local(), d.hidden, d.tokens(), 1.0f), logits_, yf,
           grad(params_.wte));
  be_.gemm(gemm_args(false, false, d.tokens(), d.hidden, d.vocab_local()), logits_,
           weight(params_.wte), partial_);
  Tensor dyf = reduce_partial(partial_, reduced_);
  be_.layernorm_backward(dyf, x_[static_cast<size_t>(d.layers)], weight(params_.lnf_w), lnf_mean_,
                         lnf_rstd_, d_res_, grad(params_.lnf_w), grad(params_.lnf_b));
  sync.mark_final(params_.lnf_b);
  sync.mark_final(params_.lnf_w);

  for (int64_t l = d.layers - 1; l >= 0; --l) layer_backward(l);

  // Embedding: the full-sequence gradient (gathered with SP) feeds both tables.
  Tensor dx0 = gather_sequence(d_res_, d_gathered_);
  be_.position_embedding_backward(dx0, grad(params_.wpe), 0);
  sync.mark_final(params_.wpe);
  be_.embedding_backward(tokens, dx0, d.vocab_start(), grad(params_.wte));
  sync.mark_final(params_.wte);
}

void GptModel::layer_backward(int64_t l) {
  const GptDims& d = dims_;
  Layer& a = layers_[static_cast<size_t>(l)];
  const LayerParams& p = params_.layers[static_cast<size_t>(l)];
  DpGradSync& sync = *grad_sync_;
  // d_res_ holds dL/dx_[l+1]. MLP: x_[l+1] = x_mid + fc2(gelu(fc1(ln2(x_mid)))).
  row_backward(d_res_, a.fc1_act, p.fc2_w, p.fc2_b, d_h_);
  sync.mark_final(p.fc2_b);
  sync.mark_final(p.fc2_w);
  be_.gelu_backward_bias_grad(d_h_, a.fc1_pre, d_pre_, grad(p.fc1_b));
  Tensor y2 = gather_sequence(a.y2, gathered_);
  column_backward(d_pre_, y2, p.fc1_w, partial_);
  sync.mark_final(p.fc1_b);
  sync.mark_final(p.fc1_w);
  Tensor dy2 = reduce_partial(partial_, reduced_);
  be_.layernorm_backward_add(dy2, a.x_mid, weight(p.ln2_w), a.ln2_mean, a.ln2_rstd, d_norm_,
                             grad(p.ln2_w), grad(p.ln2_b), d_res_);  // d_res_: dL/dx_mid
  sync.mark_final(p.ln2_b);
  sync.mark_final(p.ln2_w);
  // Attention: x_mid = x_[l] + proj(attention(qkv(ln1(x_[l])))).
  row_backward(d_res_, a.ctx, p.proj_w, p.proj_b, d_ctx_);
  sync.mark_final(p.proj_b);
  sync.mark_final(p.proj_w);
  be_.attention_backward(a.qkv, a.ctx, d_ctx_, a.lse,
                         1.0f / std::sqrt(static_cast<float>(d.head_dim)), d_qkv_);
  be_.bias_grad_accumulate(d_qkv_, grad(p.qkv_b));
  Tensor y1 = gather_sequence(a.y1, gathered_);
  column_backward(d_qkv_, y1, p.qkv_w, partial_);
  sync.mark_final(p.qkv_b);
  sync.mark_final(p.qkv_w);
  Tensor dy1 = reduce_partial(partial_, reduced_);
  be_.layernorm_backward_add(dy1, x_[static_cast<size_t>(l)], weight(p.ln1_w), a.ln1_mean,
                             a.ln1_rstd, d_norm_, grad(p.ln1_w), grad(p.ln1_b),
                             d_res_);  // d_res_: dL/dx_[l]
  sync.mark_final(p.ln1_b);
  sync.mark_final(p.ln1_w);
}

void GptModel::finish_grads() {
  grad_sync_->finish();
  if (!dims_.sp()) return;
  // Sequence parallelism: norms and row-parallel biases saw only this rank's tokens.
  int64_t at = 0;
  for (size_t i = 0; i < params_.specs.size(); ++i) {
    const ParamSpec& p = params_.specs[i];
    if (!p.sp_grad_reduce) continue;
    be_.copy(sp_stage_.flat_slice(at, p.local_numel()),
             grads_.flat_slice(p.offset, p.local_numel()));
    at += p.local_numel();
  }
  tp_.all_reduce(sp_stage_, ReduceOp::kSum, Stream::kCompute);
  at = 0;
  for (size_t i = 0; i < params_.specs.size(); ++i) {
    const ParamSpec& p = params_.specs[i];
    if (!p.sp_grad_reduce) continue;
    be_.copy(grads_.flat_slice(p.offset, p.local_numel()),
             sp_stage_.flat_slice(at, p.local_numel()));
    at += p.local_numel();
  }
}

}  // namespace mplan::exec
