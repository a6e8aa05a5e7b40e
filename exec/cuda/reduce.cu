// Deterministic reductions: column sums of a matrix (bias gradients; the second pass of the
// layernorm weight gradients) and the sum / sum of squares of a vector (loss, gradient norm).
// Invariant: two passes with a partition fixed by the shape alone (never by timing or by
// atomics): per-block partials in f32, then one ordered pass that adds them into the output.
#include <algorithm>

#include "exec/cuda/device_utils.cuh"
#include "exec/cuda/kernels.hpp"

namespace mplan::exec::cuda {
namespace {

// Column-sum tile: 32 column groups of 8 (256 columns) × 8 row lanes.
constexpr int kColGroups = 32;
constexpr int kRowLanes = 8;
constexpr int kTileCols = kColGroups * 8;

template <class T>
__global__ void __launch_bounds__(kColGroups* kRowLanes)
    column_partials_kernel(const T* x, int64_t rows, int64_t cols, int64_t rows_per_part, bool vec,
                           float* partials) {
  __shared__ float tile[kRowLanes][kTileCols];
  const int64_t c0 = (static_cast<int64_t>(blockIdx.x) * kColGroups + threadIdx.x) * 8;
  const int64_t r_begin = static_cast<int64_t>(blockIdx.y) * rows_per_part;
  const int64_t r_end = min(rows, r_begin + rows_per_part);
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  if (c0 < cols && vec) {
    // kBatch rows' 16-byte loads issued before any is added, kept packed as loaded (one load in
    // flight a thread left the kernel waiting on memory latency); the additions keep the rows'
    // order, so the sums are those of the plain loop below.
    constexpr int kBatch = 8;
    for (int64_t r0 = r_begin + threadIdx.y; r0 < r_end; r0 += kBatch * kRowLanes) {
      Raw8<T> raw[kBatch];
#pragma unroll
      for (int k = 0; k < kBatch; ++k) {
        const int64_t r = r0 + k * kRowLanes;
        if (r < r_end) raw[k] = ld_raw8(x + r * cols + c0);
      }
#pragma unroll
      for (int k = 0; k < kBatch; ++k) {
        if (r0 + k * kRowLanes < r_end) {
          float v[8];
          unpack8(raw[k], v);
#pragma unroll
          for (int j = 0; j < 8; ++j) acc[j] += v[j];
        }
      }
    }
  } else if (c0 < cols) {
    for (int64_t r = r_begin + threadIdx.y; r < r_end; r += kRowLanes) {
      float v[8];
      load8_guarded(x + r * cols, c0, cols, vec, v);
#pragma unroll
      for (int j = 0; j < 8; ++j) acc[j] += v[j];
    }
  }
#pragma unroll
  for (int j = 0; j < 8; ++j) tile[threadIdx.y][threadIdx.x * 8 + j] = acc[j];
  __syncthreads();
  const int t = threadIdx.y * kColGroups + threadIdx.x;  // 0..255: one column of the tile each
  const int64_t c = static_cast<int64_t>(blockIdx.x) * kTileCols + t;
  if (c < cols) {
    float s = tile[0][t];
#pragma unroll
    for (int y = 1; y < kRowLanes; ++y) s += tile[y][t];
    partials[static_cast<int64_t>(blockIdx.y) * cols + c] = s;
  }
}

// out[c] += Σ_p partials[p][c]. A block takes 32 columns; its 32 warps sum fixed 32nds of the
// parts (each warp one column per lane, parts in order), then one lane per column adds the 32
// slices in order: a fixed order whatever the device. A lane issues kFinBatch parts' loads before
// it adds any (in order, so the sums are those of the plain loop). With one column per lane the
// grid is small (h / 32 blocks), so the pass is bound by memory latency, not bandwidth: the norms'
// 512 parts of h = 2048 (4 MB) are one batch of loads a lane (with 8 warps, four batches one after
// another).
constexpr int kFinCols = 32;
constexpr int kFinSlices = 32;
constexpr int kFinBatch = 16;

__global__ void __launch_bounds__(kFinCols* kFinSlices)
    column_finalize_kernel(const float* __restrict__ partials, int64_t parts, int64_t cols,
                           float* __restrict__ out) {
  __shared__ float slice_sum[kFinSlices][kFinCols];
  const int lane = threadIdx.x & 31, slice = threadIdx.x >> 5;
  const int64_t c = static_cast<int64_t>(blockIdx.x) * kFinCols + lane;
  const int64_t per = (parts + kFinSlices - 1) / kFinSlices;
  const int64_t p0 = slice * per, p1 = min(parts, p0 + per);
  float s = 0.0f;
  if (c < cols) {
    int64_t p = p0;
    for (; p + kFinBatch <= p1; p += kFinBatch) {
      float v[kFinBatch];
#pragma unroll
      for (int k = 0; k < kFinBatch; ++k) v[k] = partials[(p + k) * cols + c];
#pragma unroll
      for (int k = 0; k < kFinBatch; ++k) s += v[k];
    }
    for (; p < p1; ++p) s += partials[p * cols + c];
  }
  slice_sum[slice][lane] = s;
  __syncthreads();
  if (slice == 0 && c < cols) {
    float t = slice_sum[0][lane];
#pragma unroll
    for (int k = 1; k < kFinSlices; ++k) t += slice_sum[k][lane];
    out[c] += t;
  }
}

constexpr int kSumThreads = 256;
constexpr int64_t kSumMaxBlocks = 1024;

int64_t vector_sum_blocks(int64_t n) {
  const int64_t per_block = kSumThreads * 16;  // at least 16 elements per thread
  return std::max<int64_t>(1, std::min<int64_t>(kSumMaxBlocks, (n + per_block - 1) / per_block));
}

template <bool kSquares>
__global__ void __launch_bounds__(kSumThreads)
    vector_partials_kernel(const float* x, int64_t n, bool vec, float* partials) {
  __shared__ float scratch[32];
  float acc = 0.0f;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t tid = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (vec) {
    const int64_t nv = n / 4;
    const float4* x4 = reinterpret_cast<const float4*>(x);
    for (int64_t i = tid; i < nv; i += stride) {
      const float4 v = x4[i];
      acc += kSquares ? v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w : v.x + v.y + v.z + v.w;
    }
    for (int64_t i = nv * 4 + tid; i < n; i += stride) acc += kSquares ? x[i] * x[i] : x[i];
  } else {
    for (int64_t i = tid; i < n; i += stride) acc += kSquares ? x[i] * x[i] : x[i];
  }
  const float total = block_sum(acc, scratch);
  if (threadIdx.x == 0) partials[blockIdx.x] = total;
}

__global__ void __launch_bounds__(1024)
    vector_finalize_kernel(const float* partials, int64_t parts, float* out, bool accumulate) {
  __shared__ float scratch[32];
  float acc = 0.0f;
  for (int64_t p = threadIdx.x; p < parts; p += blockDim.x) acc += partials[p];
  const float total = block_sum(acc, scratch);
  if (threadIdx.x == 0) out[0] = (accumulate ? out[0] : 0.0f) + total;
}

}  // namespace

int64_t column_parts(int64_t rows) {
  return std::max<int64_t>(1, std::min<int64_t>(128, (rows + 63) / 64));
}

size_t column_sum_scratch_bytes(int64_t rows, int64_t cols) {
  return static_cast<size_t>(column_parts(rows) * cols) * sizeof(float);
}

void launch_column_partials_finalize(const float* partials, int64_t parts, int64_t cols, float* out,
                                     cudaStream_t stream) {
  column_finalize_kernel<<<blocks_for(cols, kFinCols), kFinCols * kFinSlices, 0, stream>>>(
      partials, parts, cols, out);
  MPLAN_CUDA_LAUNCH_CHECK();
}

void launch_column_sum_accumulate(const void* x, DType t, int64_t rows, int64_t cols, float* out,
                                  void* scratch, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return;
  const int64_t parts = column_parts(rows);
  const int64_t rows_per_part = (rows + parts - 1) / parts;
  float* partials = static_cast<float*>(scratch);
  const bool vec = aligned16(x) && cols % 8 == 0;
  dim3 grid(blocks_for(cols, kTileCols), static_cast<unsigned>(parts));
  dim3 block(kColGroups, kRowLanes);
  dispatch_act(t, [&](auto tag) {
    using T = decltype(tag);
    column_partials_kernel<T><<<grid, block, 0, stream>>>(static_cast<const T*>(x), rows, cols,
                                                          rows_per_part, vec, partials);
  });
  MPLAN_CUDA_LAUNCH_CHECK();
  launch_column_partials_finalize(partials, parts, cols, out, stream);
}

size_t vector_sum_scratch_bytes(int64_t n) {
  return static_cast<size_t>(vector_sum_blocks(n)) * sizeof(float);
}

void launch_vector_sum(const float* x, int64_t n, float* out, bool accumulate, bool squares,
                       void* scratch, cudaStream_t stream) {
  const int64_t blocks = vector_sum_blocks(n);
  float* partials = static_cast<float*>(scratch);
  const bool vec = aligned16(x);
  if (n > 0) {
    if (squares) {
      vector_partials_kernel<true><<<blocks, kSumThreads, 0, stream>>>(x, n, vec, partials);
    } else {
      vector_partials_kernel<false><<<blocks, kSumThreads, 0, stream>>>(x, n, vec, partials);
    }
    MPLAN_CUDA_LAUNCH_CHECK();
  }
  vector_finalize_kernel<<<1, 1024, 0, stream>>>(partials, n > 0 ? blocks : 0, out, accumulate);
  MPLAN_CUDA_LAUNCH_CHECK();
}

}  // namespace mplan::exec::cuda
