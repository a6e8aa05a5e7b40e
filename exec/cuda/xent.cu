// Vocab-parallel softmax cross-entropy in Megatron's three steps (the caller all-reduces between
// them): local row max; local sum of exp(logit - max) and the target's logit when this shard
// holds it; then the loss and, in place of the logits, (softmax - onehot) · grad_scale.
// One block per row, 16-byte loads; block reductions in a fixed order. Where nothing is reduced
// between the first two steps (tensor parallel 1), one pass gives both: each thread keeps a
// running max and its sum of exponents relative to it (rescaled when the max grows), then the
// block takes the max and adds the rescaled sums (FlashAttention's online softmax), which saves a
// pass over the logits.
//
// Fused (tensor parallel 1, sm_90): all three steps in one kernel that reads each row once and
// writes it once, where the two kernels above read it twice and write it once (the logits are
// T x V, 2 GB at 8192 x 128256, so the kernels are bound by memory). A row is split among a
// thread-block cluster of C CTAs (1, 2, 4 or 8, the fewest whose registers hold the row); each
// CTA keeps its contiguous slice in registers (kFusedVecs vectors of 8 a thread, loaded at once),
// takes its max and its sum of exponents, and the C partial (max, sum) pairs and the target's
// logit go through distributed shared memory. Every CTA combines them in rank order (the same
// bits in each), then writes (softmax - onehot) · grad_scale from its registers. Rank 0 writes
// row_max, stats and the loss as the three steps do.
#include <cooperative_groups.h>

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

// A cluster of C CTAs per row (blockIdx.x = row · C + rank). The row's 8-column vectors are split
// into C slices of `slice` vectors (the last one shorter); thread t of a CTA holds the slice's
// vectors t + kThreads·k, k < kFusedVecs. cols % 8 == 0, the row 16-byte aligned, and
// slice <= kThreads · kFusedVecs (the launcher's choice of C).
constexpr int kFusedVecs = 8;  // bf16: 32 registers of values a thread, 16384 columns a CTA

template <class T, int C>
__global__ void __launch_bounds__(kThreads)
    xent_fused_kernel(T* __restrict__ logits, int64_t rows, int cols, int slice,
                      const int32_t* __restrict__ targets, int64_t vocab_start, float grad_scale,
                      float* __restrict__ row_max, float* __restrict__ stats,
                      float* __restrict__ loss) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  namespace cg = cooperative_groups;
  __shared__ float scratch[32];
  __shared__ float4 part;  // this CTA's (max, sum of exp(logit - max), target logit or 0)
  const int64_t r = blockIdx.x / C;
  const int rank = C == 1 ? 0 : static_cast<int>(cg::this_cluster().block_rank());
  T* row = logits + r * cols;
  const int v0 = rank * slice;  // first vector of this CTA's slice
  const int nv = min(slice, cols / 8 - v0);
  const int tid = threadIdx.x;

  Raw8<T> raw[kFusedVecs];
#pragma unroll
  for (int k = 0; k < kFusedVecs; ++k) {
    const int lv = tid + kThreads * k;
    if (lv < nv) raw[k] = ld_raw8(row + static_cast<int64_t>(v0 + lv) * 8);
  }
  // f(first column, its 8 values) over this thread's vectors, as held.
  const auto each_vector = [&](auto&& f) {
#pragma unroll
    for (int k = 0; k < kFusedVecs; ++k) {
      const int lv = tid + kThreads * k;
      if (lv < nv) {
        float v[8];
        unpack8(raw[k], v);
        f((v0 + lv) * 8, v);
      }
    }
  };
  // The target's column relative to this shard (-1 when another shard holds it). Its logit is
  // part.z of the CTA whose slice holds it (written by the thread holding it), else 0.
  const int64_t tl64 = static_cast<int64_t>(targets[r]) - vocab_start;
  const int tl = (tl64 >= 0 && tl64 < cols) ? static_cast<int>(tl64) : -1;
  const int tv = tl >= 0 ? tl / 8 - v0 : -1;  // vector index within the slice
  if (tid == 0 && !(tv >= 0 && tv < nv)) part.z = 0.0f;

  float m = -INFINITY;
  each_vector([&](int, const float(&v)[8]) {
#pragma unroll
    for (int j = 0; j < 8; ++j) m = fmaxf(m, v[j]);
  });
  m = block_max(m, scratch);
  float s = 0.0f;
  each_vector([&](int c0, const float(&v)[8]) {
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      s += exp_fast(v[j] - m);
      if (c0 + j == tl) part.z = v[j];
    }
  });
  s = block_sum(s, scratch);
  if (tid == 0) {
    part.x = m;
    part.y = s;
  }

  // The row's max, sum and target logit from the C parts, in rank order.
  float rm = -INFINITY, rs = 0.0f, rt = 0.0f;
  if constexpr (C == 1) {
    __syncthreads();
    rm = part.x;
    rs = part.y;
    rt = part.z;
  } else {
    cg::cluster_group cluster = cg::this_cluster();
    cluster.sync();  // every CTA's part written
    float4 p[C];
#pragma unroll
    for (int q = 0; q < C; ++q) {
      p[q] = *cluster.map_shared_rank(&part, q);
      rm = fmaxf(rm, p[q].x);
    }
#pragma unroll
    for (int q = 0; q < C; ++q) {
      rs += p[q].x == -INFINITY ? 0.0f : p[q].y * exp_fast(p[q].x - rm);
      rt += p[q].z;  // one rank holds the target, the others add 0
    }
    // This CTA is done with the others' shared memory; it waits (at the end) until they are
    // done with its own.
    cluster.barrier_arrive();
  }
  if (rank == 0 && tid == 0) {
    row_max[r] = rm;
    stats[r] = rs;
    stats[rows + r] = rt;
    loss[r] = logf(rs) + rm - rt;
  }

  const float inv = 1.0f / rs;
  each_vector([&](int c0, const float(&v)[8]) {
    float g[8];
#pragma unroll
    for (int j = 0; j < 8; ++j)
      g[j] = (exp_fast(v[j] - rm) * inv - (c0 + j == tl ? 1.0f : 0.0f)) * grad_scale;
    store8(row + c0, g);
  });
  if constexpr (C > 1) cg::this_cluster().barrier_wait();
#else
  __trap();  // launched only where xent_fused_supported() (sm_90 code)
#endif
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

bool xent_fused_supported(int device) {
  int major = 0;
  MPLAN_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  if (major < 9) return false;
  // The kernel's code for this device must come from sm_90 or later (a build for older
  // architectures only would run their PTX, which has no cluster code).
  cudaFuncAttributes a{};
  if (cudaFuncGetAttributes(&a, xent_fused_kernel<bf16, 8>) != cudaSuccess) {
    (void)cudaGetLastError();  // no code for this device: the steps' kernels
    return false;
  }
  return a.ptxVersion >= 90 && a.binaryVersion >= 90;
}

bool launch_xent_fused(void* logits, DType t, int64_t rows, int64_t cols, const int32_t* targets,
                       int64_t vocab_start, float* row_max, float* stats, float grad_scale,
                       float* loss, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0 || cols % 8 != 0 || !aligned16(logits)) return false;
  if (t != DType::kBF16 && t != DType::kF32) return false;
  // The fewest CTAs whose registers hold the row's vectors.
  const int64_t per_cta = int64_t{kThreads} * kFusedVecs;
  const int64_t need = (cols / 8 + per_cta - 1) / per_cta;
  const int c = need <= 1 ? 1 : need <= 2 ? 2 : need <= 4 ? 4 : need <= 8 ? 8 : 0;
  if (c == 0 || rows * c > 0x7fffffff) return false;
  const int slice = static_cast<int>((cols / 8 + c - 1) / c);
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(static_cast<unsigned>(rows * c));
  cfg.blockDim = dim3(kThreads);
  cfg.dynamicSmemBytes = 0;
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = static_cast<unsigned>(c);
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  auto launch = [&](auto tag, auto cc) {
    using T = decltype(tag);
    MPLAN_CUDA_CHECK(cudaLaunchKernelEx(
        &cfg, xent_fused_kernel<T, decltype(cc)::value>, static_cast<T*>(logits), rows,
        static_cast<int>(cols), slice, targets, vocab_start, grad_scale, row_max, stats, loss));
  };
  dispatch_act(t, [&](auto tag) {
    switch (c) {
      case 1:
        launch(tag, std::integral_constant<int, 1>{});
        break;
      case 2:
        launch(tag, std::integral_constant<int, 2>{});
        break;
      case 4:
        launch(tag, std::integral_constant<int, 4>{});
        break;
      default:
        launch(tag, std::integral_constant<int, 8>{});
        break;
    }
  });
  return true;
}

}  // namespace mplan::exec::cuda
