// The Llama-family kernels: RMSNorm forward and backward (the weight gradient through the ordered
// column partials of reduce.cu), SwiGLU forward and backward, rotary position embedding on the
// packed QKV, and the grouped-query expand / reduce around the multi-head attention kernels.
// Invariant: every reduction has an order fixed by the shape (bitwise reproducible); math in
// f32, each output rounded once to its dtype, as the CPU backend does.
#include <algorithm>

#include "exec/cuda/device_utils.cuh"
#include "exec/cuda/kernels.hpp"

namespace mplan::exec::cuda {
namespace {

constexpr int kWarpsPerBlock = 8;

// One warp per row: rstd = 1 / sqrt(mean(x²) + eps), y = x · rstd · gamma.
template <class T>
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    rmsnorm_fwd_kernel(const T* __restrict__ x, const T* __restrict__ g, int64_t rows, int64_t h,
                       float eps, bool vec, T* __restrict__ y, float* __restrict__ rstd) {
  const int lane = threadIdx.x & 31;
  const int64_t r = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + (threadIdx.x >> 5);
  if (r >= rows) return;
  const T* xr = x + r * h;
  float ss = 0;
  for (int64_t c = lane * 8; c < h; c += 32 * 8) {
    float v[8];
    load8_guarded(xr, c, h, vec, v);
#pragma unroll
    for (int j = 0; j < 8; ++j) ss += v[j] * v[j];
  }
  ss = warp_sum(ss);
  const float rs = rsqrtf(ss / static_cast<float>(h) + eps);
  if (lane == 0) rstd[r] = rs;
  for (int64_t c = lane * 8; c < h; c += 32 * 8) {
    float v[8], w[8];
    load8_guarded(xr, c, h, vec, v);
    load8_guarded(g, c, h, vec, w);
#pragma unroll
    for (int j = 0; j < 8; ++j) v[j] = v[j] * rs * w[j];
    store8_guarded(y + r * h, c, h, vec, v);
  }
}

// One warp per row: dx = rs·g·dy - rs³·x/h · Σ g·dy·x; with `add`, dres += dx (rounded first).
template <class T>
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    rmsnorm_bwd_dx_kernel(const T* __restrict__ dy, const T* __restrict__ x,
                          const T* __restrict__ g, const float* __restrict__ rstd, int64_t rows,
                          int64_t h, bool vec, T* __restrict__ dx, T* __restrict__ dres) {
  const int lane = threadIdx.x & 31;
  const int64_t r = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + (threadIdx.x >> 5);
  if (r >= rows) return;
  const T *dyr = dy + r * h, *xr = x + r * h;
  float dot = 0;
  for (int64_t c = lane * 8; c < h; c += 32 * 8) {
    float d[8], v[8], w[8];
    load8_guarded(dyr, c, h, vec, d);
    load8_guarded(xr, c, h, vec, v);
    load8_guarded(g, c, h, vec, w);
#pragma unroll
    for (int j = 0; j < 8; ++j) dot += w[j] * d[j] * v[j];
  }
  dot = warp_sum(dot);
  const float rs = rstd[r];
  const float k = dot / static_cast<float>(h) * rs * rs * rs;
  for (int64_t c = lane * 8; c < h; c += 32 * 8) {
    float d[8], v[8], w[8];
    load8_guarded(dyr, c, h, vec, d);
    load8_guarded(xr, c, h, vec, v);
    load8_guarded(g, c, h, vec, w);
#pragma unroll
    for (int j = 0; j < 8; ++j) d[j] = rs * w[j] * d[j] - k * v[j];
    if (dres == nullptr) {
      store8_guarded(dx + r * h, c, h, vec, d);
    } else {
      float a[8];
      load8_guarded(dres + r * h, c, h, vec, a);
#pragma unroll
      for (int j = 0; j < 8; ++j) a[j] += to_f32(from_f32<T>(d[j]));
      store8_guarded(dres + r * h, c, h, vec, a);
    }
  }
}

// dgamma partials: partials[p][c] = Σ over rows of part p of dy·x·rstd (column tiles of 256).
constexpr int kColGroups = 32, kRowLanes = 8, kTileCols = kColGroups * 8;

template <class T>
__global__ void __launch_bounds__(kColGroups* kRowLanes)
    rmsnorm_dgamma_partials_kernel(const T* __restrict__ dy, const T* __restrict__ x,
                                   const float* __restrict__ rstd, int64_t rows, int64_t h,
                                   int64_t rows_per_part, bool vec, float* __restrict__ partials) {
  __shared__ float tile[kRowLanes][kTileCols];
  const int64_t c0 = (static_cast<int64_t>(blockIdx.x) * kColGroups + threadIdx.x) * 8;
  const int64_t r_begin = static_cast<int64_t>(blockIdx.y) * rows_per_part;
  const int64_t r_end = min(rows, r_begin + rows_per_part);
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  if (c0 < h) {
    for (int64_t r = r_begin + threadIdx.y; r < r_end; r += kRowLanes) {
      float d[8], v[8];
      load8_guarded(dy + r * h, c0, h, vec, d);
      load8_guarded(x + r * h, c0, h, vec, v);
      const float rs = rstd[r];
#pragma unroll
      for (int j = 0; j < 8; ++j) acc[j] += d[j] * (v[j] * rs);
    }
  }
#pragma unroll
  for (int j = 0; j < 8; ++j) tile[threadIdx.y][threadIdx.x * 8 + j] = acc[j];
  __syncthreads();
  const int t = threadIdx.y * kColGroups + threadIdx.x;
  const int64_t c = static_cast<int64_t>(blockIdx.x) * kTileCols + t;
  if (c < h) {
    float s = tile[0][t];
#pragma unroll
    for (int yy = 1; yy < kRowLanes; ++yy) s += tile[yy][t];
    partials[static_cast<int64_t>(blockIdx.y) * h + c] = s;
  }
}

__device__ __forceinline__ float sigmoidf(float v) { return 1.0f / (1.0f + __expf(-v)); }

// SwiGLU over rows of [gate | up] (2F) -> F; 8 columns per thread.
template <class T>
__global__ void swiglu_fwd_kernel(const T* __restrict__ x, int64_t rows, int64_t f, bool vec,
                                  T* __restrict__ y) {
  const int64_t groups = (f + 7) / 8;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= rows * groups) return;
  const int64_t r = i / groups, c = (i % groups) * 8;
  float g[8], u[8];
  load8_guarded(x + r * 2 * f, c, f, vec, g);
  load8_guarded(x + r * 2 * f + f, c, f, vec, u);
#pragma unroll
  for (int j = 0; j < 8; ++j) g[j] = g[j] * sigmoidf(g[j]) * u[j];
  store8_guarded(y + r * f, c, f, vec, g);
}

template <class T>
__global__ void swiglu_bwd_kernel(const T* __restrict__ dy, const T* __restrict__ x, int64_t rows,
                                  int64_t f, bool vec, T* __restrict__ dx) {
  const int64_t groups = (f + 7) / 8;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= rows * groups) return;
  const int64_t r = i / groups, c = (i % groups) * 8;
  float g[8], u[8], d[8], dg[8], du[8];
  load8_guarded(x + r * 2 * f, c, f, vec, g);
  load8_guarded(x + r * 2 * f + f, c, f, vec, u);
  load8_guarded(dy + r * f, c, f, vec, d);
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const float s = sigmoidf(g[j]);
    dg[j] = d[j] * u[j] * (s + g[j] * s * (1.0f - s));
    du[j] = d[j] * g[j] * s;
  }
  store8_guarded(dx + r * 2 * f, c, f, vec, dg);
  store8_guarded(dx + r * 2 * f + f, c, f, vec, du);
}

// One thread per (token, head of Q or K, pair i): rotate (i, i + half) by pos · inv_freq[i].
template <class T>
__global__ void rope_kernel(T* __restrict__ qkv, const float* __restrict__ inv_freq, int64_t tokens,
                            int64_t b, int64_t rotated_heads, int64_t row, int64_t d, int64_t half,
                            bool inverse) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= tokens * rotated_heads * half) return;
  const int64_t k = i % half, head = (i / half) % rotated_heads, t = i / (half * rotated_heads);
  const float pos = static_cast<float>(t / b);
  const float angle = pos * inv_freq[k];
  float sn, c;
  sincosf(angle, &sn, &c);
  if (inverse) sn = -sn;
  T* p = qkv + t * row + head * d;
  const float x1 = to_f32(p[k]), x2 = to_f32(p[k + half]);
  p[k] = from_f32<T>(x1 * c - x2 * sn);
  p[k + half] = from_f32<T>(x2 * c + x1 * sn);
}

constexpr int kThreads = 256;

}  // namespace

void launch_rmsnorm_forward(const void* x, const void* gamma, DType t, int64_t rows, int64_t h,
                            float eps, void* y, float* rstd, cudaStream_t stream) {
  if (rows <= 0) return;
  const bool vec = aligned16(x) && aligned16(gamma) && aligned16(y) && h % 8 == 0;
  dispatch_act(t, [&](auto tag) {
    using T = decltype(tag);
    rmsnorm_fwd_kernel<T><<<blocks_for(rows, kWarpsPerBlock), kWarpsPerBlock * 32, 0, stream>>>(
        static_cast<const T*>(x), static_cast<const T*>(gamma), rows, h, eps, vec,
        static_cast<T*>(y), rstd);
  });
  MPLAN_CUDA_LAUNCH_CHECK();
}

size_t rmsnorm_backward_scratch_bytes(int64_t rows, int64_t h) {
  return column_sum_scratch_bytes(rows, h);
}

void launch_rmsnorm_backward(const void* dy, const void* x, const void* gamma, DType t,
                             const float* rstd, int64_t rows, int64_t h, void* dx, void* dres,
                             float* dgamma, void* scratch, cudaStream_t stream) {
  if (rows <= 0) return;
  const bool vec = aligned16(dy) && aligned16(x) && aligned16(gamma) &&
                   (dx == nullptr || aligned16(dx)) && (dres == nullptr || aligned16(dres)) &&
                   h % 8 == 0;
  const int64_t parts = column_parts(rows);
  const int64_t rows_per_part = (rows + parts - 1) / parts;
  float* partials = static_cast<float*>(scratch);
  dispatch_act(t, [&](auto tag) {
    using T = decltype(tag);
    rmsnorm_bwd_dx_kernel<T><<<blocks_for(rows, kWarpsPerBlock), kWarpsPerBlock * 32, 0, stream>>>(
        static_cast<const T*>(dy), static_cast<const T*>(x), static_cast<const T*>(gamma), rstd,
        rows, h, vec, static_cast<T*>(dx), static_cast<T*>(dres));
    MPLAN_CUDA_LAUNCH_CHECK();
    dim3 grid(blocks_for(h, kTileCols), static_cast<unsigned>(parts));
    rmsnorm_dgamma_partials_kernel<T><<<grid, dim3(kColGroups, kRowLanes), 0, stream>>>(
        static_cast<const T*>(dy), static_cast<const T*>(x), rstd, rows, h, rows_per_part, vec,
        partials);
  });
  MPLAN_CUDA_LAUNCH_CHECK();
  launch_column_partials_finalize(partials, parts, h, dgamma, stream);
}

void launch_swiglu_forward(const void* x, DType t, int64_t rows, int64_t f, void* y,
                           cudaStream_t stream) {
  if (rows <= 0 || f <= 0) return;
  const bool vec = aligned16(x) && aligned16(y) && f % 8 == 0;
  const int64_t n = rows * ((f + 7) / 8);
  dispatch_act(t, [&](auto tag) {
    using T = decltype(tag);
    swiglu_fwd_kernel<T><<<blocks_for(n, kThreads), kThreads, 0, stream>>>(
        static_cast<const T*>(x), rows, f, vec, static_cast<T*>(y));
  });
  MPLAN_CUDA_LAUNCH_CHECK();
}

void launch_swiglu_backward(const void* dy, const void* x, DType t, int64_t rows, int64_t f,
                            void* dx, cudaStream_t stream) {
  if (rows <= 0 || f <= 0) return;
  const bool vec = aligned16(dy) && aligned16(x) && aligned16(dx) && f % 8 == 0;
  const int64_t n = rows * ((f + 7) / 8);
  dispatch_act(t, [&](auto tag) {
    using T = decltype(tag);
    swiglu_bwd_kernel<T><<<blocks_for(n, kThreads), kThreads, 0, stream>>>(
        static_cast<const T*>(dy), static_cast<const T*>(x), rows, f, vec, static_cast<T*>(dx));
  });
  MPLAN_CUDA_LAUNCH_CHECK();
}

void launch_rope(void* qkv, DType t, int64_t tokens, int64_t b, int64_t heads, int64_t groups,
                 int64_t d, int64_t rot_dim, const float* inv_freq, bool inverse,
                 cudaStream_t stream) {
  const int64_t half = rot_dim / 2, rotated = heads + groups;
  const int64_t n = tokens * rotated * half;
  if (n <= 0) return;
  dispatch_act(t, [&](auto tag) {
    using T = decltype(tag);
    rope_kernel<T><<<blocks_for(n, kThreads), kThreads, 0, stream>>>(
        static_cast<T*>(qkv), inv_freq, tokens, b, rotated, (heads + 2 * groups) * d, d, half,
        inverse);
  });
  MPLAN_CUDA_LAUNCH_CHECK();
}

}  // namespace mplan::exec::cuda
