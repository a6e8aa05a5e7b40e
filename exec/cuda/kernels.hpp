// Host-side launchers of the CUDA kernels behind CudaBackend (exec/cuda/*.cu). Plain pointers and
// sizes, no Tensor: each launcher enqueues its kernels on `stream`, checks the launch and never
// allocates; ops that need temporary memory say how much through a *_scratch_bytes function and
// take it as `scratch` (the backend's setup-time arena). Activation dtype `t` is kF32 or kBF16.
// Reductions are deterministic: partial results per fixed block, then a second ordered pass.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "exec/backend.hpp"

namespace mplan::exec::cuda {

// ---- elementwise (elementwise.cu) ------------------------------------------------------------
void launch_fill(void* p, DType t, int64_t n, float value, cudaStream_t stream);
// p[i] = lo + (hi - lo)·u(seed, i) with u a counter-based hash in [0, 1): reproducible random
// data generated on the device (benchmarks and tests; never zeros, which time faster).
void launch_fill_uniform(void* p, DType t, int64_t n, uint64_t seed, float lo, float hi,
                         cudaStream_t stream);
// dst = src converted (f32 <-> bf16, or a copy when the dtypes match).
void launch_cast(void* dst, DType dst_t, const void* src, DType src_t, int64_t n,
                 cudaStream_t stream);
void launch_add(void* out, const void* a, const void* b, DType t, int64_t n, cudaStream_t stream);
void launch_scale(void* p, DType t, int64_t n, float factor, cudaStream_t stream);
void launch_gelu_forward(const void* x, void* y, DType t, int64_t n, cudaStream_t stream);
void launch_gelu_backward(const void* dy, const void* x, void* dx, DType t, int64_t n,
                          cudaStream_t stream);
// c(rows, cols) += bias(cols) broadcast over rows (the unfused GEMM bias epilogue).
void launch_bias_add(void* c, DType c_t, const void* bias, DType bias_t, int64_t rows, int64_t cols,
                     cudaStream_t stream);

// ---- reductions (reduce.cu) ----------------------------------------------------------------
// Column sums of a (rows, cols) matrix in two passes: partials (parts, cols) f32, then an ordered
// sum over parts added into out(cols) f32. parts is a function of rows only.
int64_t column_parts(int64_t rows);
size_t column_sum_scratch_bytes(int64_t rows, int64_t cols);
void launch_column_sum_accumulate(const void* x, DType t, int64_t rows, int64_t cols, float* out,
                                  void* scratch, cudaStream_t stream);
// out(cols) += sum over p of partials(p, cols), p in order.
void launch_column_partials_finalize(const float* partials, int64_t parts, int64_t cols, float* out,
                                     cudaStream_t stream);
// out[0] = (accumulate ? out[0] : 0) + sum x  /  out[0] += sum x^2. x: n f32.
size_t vector_sum_scratch_bytes(int64_t n);
void launch_vector_sum(const float* x, int64_t n, float* out, bool accumulate, bool squares,
                       void* scratch, cudaStream_t stream);

// ---- Llama-family layers (llama_ops.cu) ------------------------------------------------------
void launch_rmsnorm_forward(const void* x, const void* gamma, DType t, int64_t rows, int64_t h,
                            float eps, void* y, float* rstd, cudaStream_t stream);
size_t rmsnorm_backward_scratch_bytes(int64_t rows, int64_t h);
// dL/dx into dx, or (dres given, dx unused) added into dres after rounding; dgamma += its sums.
void launch_rmsnorm_backward(const void* dy, const void* x, const void* gamma, DType t,
                             const float* rstd, int64_t rows, int64_t h, void* dx, void* dres,
                             float* dgamma, void* scratch, cudaStream_t stream);
void launch_swiglu_forward(const void* x, DType t, int64_t rows, int64_t f, void* y,
                           cudaStream_t stream);
void launch_swiglu_backward(const void* dy, const void* x, DType t, int64_t rows, int64_t f,
                            void* dx, cudaStream_t stream);
// inv_freq: rot_dim / 2 f32 on the device.
void launch_rope(void* qkv, DType t, int64_t tokens, int64_t b, int64_t heads, int64_t groups,
                 int64_t d, int64_t rot_dim, const float* inv_freq, bool inverse,
                 cudaStream_t stream);

// ---- layernorm, and RMSNorm's one-pass backward (layernorm.cu) -----------------------------
void launch_layernorm_forward(const void* x, const void* gamma, const void* beta, DType t,
                              int64_t rows, int64_t h, float eps, void* y, float* mean, float* rstd,
                              cudaStream_t stream);
size_t layernorm_backward_scratch_bytes(int64_t rows, int64_t h);
void launch_layernorm_backward(const void* dy, const void* x, const void* gamma, DType t,
                               const float* mean, const float* rstd, int64_t rows, int64_t h,
                               void* dx, float* dgamma, float* dbeta, void* scratch,
                               cudaStream_t stream);
// Whether the one-pass backward (LayerNorm's or RMSNorm's) takes rows of h columns of t with
// these pointers (out: dx or dres): 16-byte aligned, h % 8 == 0 and h within its register
// budget. Else LayerNorm's add runs as launch_layernorm_backward and an add, and RMSNorm's
// backward takes its two-kernel path.
bool norm_backward_one_pass_fits(int64_t h, DType t, const void* dy, const void* x,
                                 const void* gamma, const void* out);
// dres = dres + bf16/f32-rounded dL/dx in the one-pass kernel (norm_backward_one_pass_fits);
// with dres_colsum (h f32, may be null), also dres_colsum += the column sums of dres as it was
// before the add, from the values the kernel loads anyway.
void launch_layernorm_backward_add(const void* dy, const void* x, const void* gamma, DType t,
                                   const float* mean, const float* rstd, int64_t rows, int64_t h,
                                   void* dres, float* dgamma, float* dbeta, float* dres_colsum,
                                   void* scratch, cudaStream_t stream);
// RMSNorm's backward on the same one-pass kernel (no mean, no dbeta), for the rows it takes
// (norm_backward_one_pass_fits). dx = (resid ? resid + rounded dL/dx : dL/dx); resid may be dx
// itself. dgamma += its sums.
size_t rmsnorm_backward_one_pass_scratch_bytes(int64_t rows, int64_t h);
void launch_rmsnorm_backward_one_pass(const void* dy, const void* x, const void* gamma, DType t,
                                      const float* rstd, int64_t rows, int64_t h, void* dx,
                                      const void* resid, float* dgamma, void* scratch,
                                      cudaStream_t stream);

// ---- embeddings (embedding.cu) --------------------------------------------------------------
// tokens (T) i32; wte (vocab_local, h) t; out (T, h) t.
void launch_embedding_forward(const int32_t* tokens, int64_t num_tokens, const void* wte, DType t,
                              int64_t vocab_local, int64_t h, int64_t vocab_start, void* out,
                              cudaStream_t stream);
size_t embedding_backward_scratch_bytes(int64_t num_tokens, int64_t vocab_local);
// dwte (vocab_local, h) f32 += dout rows, per vocabulary row in increasing token order.
void launch_embedding_backward(const int32_t* tokens, int64_t num_tokens, const void* dout, DType t,
                               int64_t vocab_local, int64_t h, int64_t vocab_start, float* dwte,
                               void* scratch, size_t scratch_bytes, cudaStream_t stream);
// x (s, b, h) t += wpe(s_offset + s) ; wpe (S, h) t.
void launch_add_position_embedding(void* x, DType t, int64_t s, int64_t b, int64_t h,
                                   const void* wpe, int64_t s_offset, cudaStream_t stream);
// dwpe(s_offset + s) f32 += sum over b of dx(s, b), b in order.
void launch_position_embedding_backward(const void* dx, DType t, int64_t s, int64_t b, int64_t h,
                                        float* dwpe, int64_t s_offset, cudaStream_t stream);

// ---- vocab-parallel cross-entropy (xent.cu) ------------------------------------------------
void launch_xent_local_max(const void* logits, DType t, int64_t rows, int64_t cols, float* row_max,
                           cudaStream_t stream);
void launch_xent_local_stats(const void* logits, DType t, int64_t rows, int64_t cols,
                             const int32_t* targets, int64_t vocab_start, const float* row_max,
                             float* stats, cudaStream_t stream);
// Both of the above in one pass where the local max is the global one (tensor parallel 1).
void launch_xent_local_max_and_stats(const void* logits, DType t, int64_t rows, int64_t cols,
                                     const int32_t* targets, int64_t vocab_start, float* row_max,
                                     float* stats, cudaStream_t stream);
void launch_xent_loss_and_grad(void* logits, DType t, int64_t rows, int64_t cols,
                               const int32_t* targets, int64_t vocab_start, const float* row_max,
                               const float* stats, float grad_scale, float* loss,
                               cudaStream_t stream);
// Whether the device can run launch_xent_fused (compute capability 9 or more, and sm_90 code for
// it in this build).
bool xent_fused_supported(int device);
// All three steps where nothing is reduced between them (tensor parallel 1): row_max, stats and
// loss as the launchers above write them, and the gradient in place of the logits, in one read
// and one write of the logits (thread-block clusters; only where xent_fused_supported). Returns
// false, launching nothing, where the row does not fit: cols % 8 != 0, logits not 16-byte
// aligned, cols > 131072, or a dtype other than bf16 and f32.
bool launch_xent_fused(void* logits, DType t, int64_t rows, int64_t cols, const int32_t* targets,
                       int64_t vocab_start, float* row_max, float* stats, float grad_scale,
                       float* loss, cudaStream_t stream);

// ---- optimizer (adamw.cu) -------------------------------------------------------------------
// As torch.optim.AdamW (and the CPU backend): p *= decay; m, v updated with g = grad·grad_scale;
// p -= step_size · m / (sqrt(v) / bc2_sqrt + eps). Host-side factors computed in double:
// decay = 1 - lr·wd (1 without decay), step_size = lr / (1 - beta1^step),
// bc2_sqrt = sqrt(1 - beta2^step).
struct AdamWArgs {
  float beta1, beta2, eps, grad_scale;
  float decay, step_size, bc2_sqrt;
};
// param_act may be null; its dtype is act_t.
void launch_adamw(const AdamWArgs& a, float* param, const float* grad, float* m, float* v,
                  void* param_act, DType act_t, int64_t n, cudaStream_t stream);

// ---- attention (attention.cu, attention_naive.cu) ---------------------------------------------
// One tensor-parallel shard of causal self-attention; see Backend::attention_forward.
// qkv (s, b, heads + 2 groups, d) t (per token the heads' Q, the groups' K, the groups' V; query
// head h uses group h / (heads / groups)); out (s, b, heads, d) t; lse (b, heads, s) f32.
struct AttentionShape {
  int64_t s, b, heads, groups, d;
};
// Which attention kernels run: kBest is Hopper's wgmma kernels (attention_hopper.cu) on devices
// of compute capability 9.0 and head dims 64 or 128, the mma.sync kernels (attention.cu)
// elsewhere; kFlash2 always the mma.sync ones; kReference the one-warp-per-row f32 kernels
// (attention_naive.cu). Shapes or dtypes a family does not handle fall back to the next.
enum class AttentionKernels { kBest, kFlash2, kReference };
// True when the tensor-core kernels handle this shape and dtype (bf16, d % 8 == 0, d <= 128).
bool attention_fast_supported(const AttentionShape& sh, DType t);
void launch_attention_forward(const AttentionShape& sh, const void* qkv, void* out, float* lse,
                              float scale, DType t, AttentionKernels kernels, cudaStream_t stream);
// scratch: attention_backward_scratch_bytes (the per-row dot(dO, O), (b, heads, s) f32, then the
// tensor-core paths' f32 dQ sums (per-split partials, or the Hopper kernels' accumulator and
// counters) and head chunks' dK, dV partials, and the Hopper kernels' column-sum parts; a function
// of the shape only).
size_t attention_backward_scratch_bytes(const AttentionShape& sh);
// colsum ((heads + 2 groups)·d f32, or nullptr): dqkv's column sums (the QKV layer's bias
// gradient) to add from the kernels' registers; returns whether they were added (the Hopper
// kernels with one head chunk), else the caller sums dqkv itself.
bool launch_attention_backward(const AttentionShape& sh, const void* qkv, const void* out,
                               const void* dout, const float* lse, float scale, void* dqkv, DType t,
                               AttentionKernels kernels, void* scratch, float* colsum,
                               cudaStream_t stream);

// The reference kernels (one warp per row, f32 math, no tensor cores):
// AttentionKernels::kReference.
void launch_attention_forward_naive(const AttentionShape& sh, const void* qkv, void* out,
                                    float* lse, float scale, DType t, cudaStream_t stream);
void launch_attention_backward_naive(const AttentionShape& sh, const void* qkv, const void* dout,
                                     const float* lse, const float* dsum, float scale, void* dqkv,
                                     DType t, cudaStream_t stream);
// dsum (b, heads, s) f32 = sum over d of dout * out, per row (shared by both backward paths).
void launch_attention_dsum(const AttentionShape& sh, const void* out, const void* dout, float* dsum,
                           DType t, cudaStream_t stream);

}  // namespace mplan::exec::cuda
