// Vocab-parallel softmax cross-entropy in Megatron's three steps (the caller all-reduces between
// them): local row max; local sum of exp(logit - max) and the target's logit when this shard
// holds it; then the loss and, in place of the logits, (softmax - onehot) · grad_scale.
// One block per row, 16-byte loads; block reductions in a fixed order. Where nothing is reduced
// between the first two steps (tensor parallel 1), one pass gives both: each thread keeps a
// running max and its sum of exponents relative to it (rescaled when the max grows), then the
// block takes the max and adds the rescaled sums (FlashAttention's online softmax), which saves a
// pass over the logits.
#include "exec/cuda/device_utils.cuh"
#include "exec/cuda/kernels.hpp"

namespace mplan::exec::cuda {
namespace {

constexpr int kThreads = 256;

// e^x as 2^(x·log2 e) on the MUFU unit alone (results below 2^-126 flushed to zero, which no sum
// of at least 1 notices): expf's accurate sequence made the sum-of-exponentials passes bound by
// the ALU, not by memory. Relative error about 2^-22 plus |x|·2^-24 from the scaling.
__device__ __forceinline__ float exp_fast(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x * 1.4426950408889634f));
  return y;
}

template <class T>
__global__ void __launch_bounds__(kThreads)
    xent_max_kernel(const T* __restrict__ logits, int64_t cols, bool vec,
                    float* __restrict__ row_max) {
  __shared__ float scratch[32];
  const T* row = logits + static_cast<int64_t>(blockIdx.x) * cols;
  float m = -INFINITY;
  for (int64_t c0 = static_cast<int64_t>(threadIdx.x) * 8; c0 < cols; c0 += kThreads * 8) {
    float v[8];
    load8_guarded(row, c0, cols, vec, v);
#pragma unroll
    for (int j = 0; j < 8; ++j)
      if (c0 + j < cols) m = fmaxf(m, v[j]);
  }
  m = block_max(m, scratch);
  if (threadIdx.x == 0) row_max[blockIdx.x] = m;
}

template <class T>
__global__ void __launch_bounds__(kThreads)
    xent_stats_kernel(const T* __restrict__ logits, int64_t rows, int64_t cols,
                      const int32_t* __restrict__ targets, int64_t vocab_start,
                      const float* __restrict__ row_max, bool vec, float* __restrict__ stats) {
  __shared__ float scratch[32];
  const int64_t r = blockIdx.x;
  const T* row = logits + r * cols;
  const float m = row_max[r];
  float s = 0.0f;
  for (int64_t c0 = static_cast<int64_t>(threadIdx.x) * 8; c0 < cols; c0 += kThreads * 8) {
    float v[8];
    load8_guarded(row, c0, cols, vec, v);
#pragma unroll
    for (int j = 0; j < 8; ++j)
      if (c0 + j < cols) s += exp_fast(v[j] - m);
  }
  s = block_sum(s, scratch);
  if (threadIdx.x == 0) {
    const int64_t tl = static_cast<int64_t>(targets[r]) - vocab_start;
    stats[r] = s;
    stats[rows + r] = (tl >= 0 && tl < cols) ? to_f32(row[tl]) : 0.0f;
  }
}

template <class T>
__global__ void __launch_bounds__(kThreads)
    xent_max_stats_kernel(const T* __restrict__ logits, int64_t rows, int64_t cols,
                          const int32_t* __restrict__ targets, int64_t vocab_start, bool vec,
                          float* __restrict__ row_max, float* __restrict__ stats) {
  __shared__ float scratch[32];
  const int64_t r = blockIdx.x;
  const T* row = logits + r * cols;
  float m = -INFINITY, s = 0.0f;
  for (int64_t c0 = static_cast<int64_t>(threadIdx.x) * 8; c0 < cols; c0 += kThreads * 8) {
    float v[8];
    load8_guarded(row, c0, cols, vec, v);
    float cm = m;
#pragma unroll
    for (int j = 0; j < 8; ++j)
      if (c0 + j < cols) cm = fmaxf(cm, v[j]);
    if (cm != m) {  // (m = -inf only before the first value: s is 0 then)
      s *= exp_fast(m - cm);
      m = cm;
    }
#pragma unroll
    for (int j = 0; j < 8; ++j)
      if (c0 + j < cols) s += exp_fast(v[j] - m);
  }
  const float bm = block_max(m, scratch);
  s = block_sum(m == -INFINITY ? 0.0f : s * exp_fast(m - bm), scratch);
  if (threadIdx.x == 0) {
    const int64_t tl = static_cast<int64_t>(targets[r]) - vocab_start;
    row_max[r] = bm;
    stats[r] = s;
    stats[rows + r] = (tl >= 0 && tl < cols) ? to_f32(row[tl]) : 0.0f;
  }
}

template <class T>
__global__ void __launch_bounds__(kThreads)
    xent_grad_kernel(T* __restrict__ logits, int64_t rows, int64_t cols,
                     const int32_t* __restrict__ targets, int64_t vocab_start,
                     const float* __restrict__ row_max, const float* __restrict__ stats,
                     float grad_scale, bool vec, float* __restrict__ loss) {
  const int64_t r = blockIdx.x;
  T* row = logits + r * cols;
  const float m = row_max[r];
  const float sumexp = stats[r];
  const float inv = 1.0f / sumexp;
  const int64_t tl = static_cast<int64_t>(targets[r]) - vocab_start;
  if (threadIdx.x == 0) loss[r] = logf(sumexp) + m - stats[rows + r];
  for (int64_t c0 = static_cast<int64_t>(threadIdx.x) * 8; c0 < cols; c0 += kThreads * 8) {
    float v[8];
    load8_guarded(row, c0, cols, vec, v);
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const float p = exp_fast(v[j] - m) * inv;
      v[j] = (p - (c0 + j == tl ? 1.0f : 0.0f)) * grad_scale;
    }
    store8_guarded(row, c0, cols, vec, v);
  }
}

// One block per row: the launchers' shared checks and dtype dispatch; launch(tag, grid, vec).
template <class Launch>
void per_row(const void* logits, DType t, int64_t rows, int64_t cols, Launch&& launch) {
  if (rows <= 0) return;
  MPLAN_CHECK(rows < 0x7fffffff, "xent: rows=", rows);
  const bool vec = aligned16(logits) && cols % 8 == 0;
  dispatch_act(t, [&](auto tag) { launch(tag, static_cast<unsigned>(rows), vec); });
  MPLAN_CUDA_LAUNCH_CHECK();
}

}  // namespace

void launch_xent_local_max(const void* logits, DType t, int64_t rows, int64_t cols, float* row_max,
                           cudaStream_t stream) {
  per_row(logits, t, rows, cols, [&](auto tag, unsigned grid, bool vec) {
    using T = decltype(tag);
    xent_max_kernel<T>
        <<<grid, kThreads, 0, stream>>>(static_cast<const T*>(logits), cols, vec, row_max);
  });
}

void launch_xent_local_stats(const void* logits, DType t, int64_t rows, int64_t cols,
                             const int32_t* targets, int64_t vocab_start, const float* row_max,
                             float* stats, cudaStream_t stream) {
  per_row(logits, t, rows, cols, [&](auto tag, unsigned grid, bool vec) {
    using T = decltype(tag);
    xent_stats_kernel<T><<<grid, kThreads, 0, stream>>>(static_cast<const T*>(logits), rows, cols,
                                                        targets, vocab_start, row_max, vec, stats);
  });
}

void launch_xent_local_max_and_stats(const void* logits, DType t, int64_t rows, int64_t cols,
                                     const int32_t* targets, int64_t vocab_start, float* row_max,
                                     float* stats, cudaStream_t stream) {
  per_row(logits, t, rows, cols, [&](auto tag, unsigned grid, bool vec) {
    using T = decltype(tag);
    xent_max_stats_kernel<T><<<grid, kThreads, 0, stream>>>(
        static_cast<const T*>(logits), rows, cols, targets, vocab_start, vec, row_max, stats);
  });
}

void launch_xent_loss_and_grad(void* logits, DType t, int64_t rows, int64_t cols,
                               const int32_t* targets, int64_t vocab_start, const float* row_max,
                               const float* stats, float grad_scale, float* loss,
                               cudaStream_t stream) {
  per_row(logits, t, rows, cols, [&](auto tag, unsigned grid, bool vec) {
    using T = decltype(tag);
    xent_grad_kernel<T><<<grid, kThreads, 0, stream>>>(static_cast<T*>(logits), rows, cols, targets,
                                                       vocab_start, row_max, stats, grad_scale, vec,
                                                       loss);
  });
}

}  // namespace mplan::exec::cuda
