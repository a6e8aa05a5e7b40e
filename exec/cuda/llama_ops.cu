// The Llama-family kernels: RMSNorm forward and backward (rows that LayerNorm's one-pass backward
// takes go there; the others: one warp per row for dx and the weight gradient through the ordered
// column partials of reduce.cu), SwiGLU forward and backward, rotary position embedding on the
// packed QKV, and the grouped-query expand / reduce around the multi-head attention kernels.
// Invariant: every reduction has an order fixed by the shape (bitwise reproducible); math in
// f32, each output rounded once to its dtype, as the CPU backend does.
#include <algorithm>
#include <type_traits>

#include "exec/cuda/device_utils.cuh"
#include "exec/cuda/kernels.hpp"

namespace mplan::exec::cuda {
namespace {

constexpr int kWarpsPerBlock = 8;

// One warp per row: rstd = 1 / sqrt(mean(x²) + eps), y = x · rstd · gamma. kVpl > 0 (16-byte
// aligned rows of h % 8 == 0, h <= kVpl·256): the row stays in registers as loaded, kVpl vectors
// of 8 a lane; kVpl == 0: two passes over x. Both add the squares in the same order.
template <class T, int kVpl>
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    rmsnorm_fwd_kernel(const T* __restrict__ x, const T* __restrict__ g, int64_t rows, int64_t h,
                       float eps, bool vec, T* __restrict__ y, float* __restrict__ rstd) {
  const int lane = threadIdx.x & 31;
  const int64_t r = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + (threadIdx.x >> 5);
  if (r >= rows) return;
  const T* xr = x + r * h;
  float ss = 0;
  if constexpr (kVpl > 0) {
    WarpRow<T, kVpl> xw;
    xw.load(xr, h, lane);
    xw.each(h, lane, [&](int64_t, const float(&v)[8]) {
#pragma unroll
      for (int j = 0; j < 8; ++j) ss += v[j] * v[j];
    });
    ss = warp_sum(ss);
    const float rs = rsqrtf(ss / static_cast<float>(h) + eps);
    if (lane == 0) rstd[r] = rs;
    xw.each(h, lane, [&](int64_t c, const float(&v)[8]) {
      float w[8], o[8];
      load8(g + c, w);
#pragma unroll
      for (int j = 0; j < 8; ++j) o[j] = v[j] * rs * w[j];
      store8(y + r * h + c, o);
    });
  } else {
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

// σ(v) = 1 / (1 + 2^(-v·log2 e)) on the MUFU unit alone (ex2 and rcp approximations, relative
// error about 2^-22, far below the bf16 rounding of the outputs): the IEEE division's sequence
// (a reciprocal, Newton steps and a special-case check) took most of the SwiGLU kernels' issue
// slots. v → -inf: 2^+inf = inf, rcp(inf) = 0.
__device__ __forceinline__ float sigmoid_fast(float v) {
  float e, r;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(e) : "f"(v * -1.4426950408889634f));
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(1.0f + e));
  return r;
}

// SwiGLU over rows of [gate | up] (2F) -> F; 8 columns per thread, one row per blockIdx.x (no
// index divisions), column blocks of kThreads · 8 along blockIdx.y.
template <class T>
__global__ void swiglu_fwd_kernel(const T* __restrict__ x, int64_t f, bool vec, T* __restrict__ y) {
  const int64_t r = blockIdx.x;
  const int64_t c = (static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x) * 8;
  if (c >= f) return;
  float g[8], u[8];
  load8_guarded(x + r * 2 * f, c, f, vec, g);
  load8_guarded(x + r * 2 * f + f, c, f, vec, u);
#pragma unroll
  for (int j = 0; j < 8; ++j) g[j] = g[j] * sigmoid_fast(g[j]) * u[j];
  store8_guarded(y + r * f, c, f, vec, g);
}

template <class T>
__global__ void swiglu_bwd_kernel(const T* __restrict__ dy, const T* __restrict__ x, int64_t f,
                                  bool vec, T* __restrict__ dx) {
  const int64_t r = blockIdx.x;
  const int64_t c = (static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x) * 8;
  if (c >= f) return;
  float g[8], u[8], d[8], dg[8], du[8];
  load8_guarded(x + r * 2 * f, c, f, vec, g);
  load8_guarded(x + r * 2 * f + f, c, f, vec, u);
  load8_guarded(dy + r * f, c, f, vec, d);
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const float s = sigmoid_fast(g[j]);
    dg[j] = d[j] * u[j] * (s + g[j] * s * (1.0f - s));
    du[j] = d[j] * g[j] * s;
  }
  store8_guarded(dx + r * 2 * f, c, f, vec, dg);
  store8_guarded(dx + r * 2 * f + f, c, f, vec, du);
}

// Rotary position embedding, in place on the packed QKV rows (token t = position · b + batch; a
// row holds heads Q heads, then groups K heads, then groups V heads, each d wide; the first
// `rotated` = heads + groups of them rotate, only their first rot_dim = 2 · half columns). Pair
// (k, k + half) of a head turns by angle = position · inv_freq[k]:
//   y1 = x1 · cos - x2 · sin,  y2 = x2 · cos + x1 · sin   (sin negated for the inverse),
// math in f32, each output rounded once to T. rope_pair spells out the roundings that nvcc chose
// (FMA contraction) for the original one-thread-per-pair kernel, which differ by dtype, so both
// kernels below give exactly its bits whatever the compiler would contract in their new contexts
// (checked bitwise against the original kernel on an H200, bf16 and f32, forward and inverse).
template <class T>
__device__ __forceinline__ void rope_pair(float x1, float x2, float c, float sn, float& y1,
                                          float& y2) {
  y1 = __fmaf_rn(x1, c, -__fmul_rn(x2, sn));
  if constexpr (std::is_same_v<T, float>) {
    y2 = __fmaf_rn(x2, c, __fmul_rn(x1, sn));
  } else {
    y2 = __fmaf_rn(x1, sn, __fmul_rn(x2, c));
  }
}

// The angle of (position, k) and its sine and cosine, sin negated for the inverse.
__device__ __forceinline__ void rope_sincos(float pos, float inv_freq_k, bool inverse, float& sn,
                                            float& c) {
  const float angle = pos * inv_freq_k;
  sincosf(angle, &sn, &c);
  if (inverse) sn = -sn;
}

// Generic path (any shape, alignment, dtype): one thread per (token, rotated head, pair k).
template <class T>
__global__ void rope_kernel(T* __restrict__ qkv, const float* __restrict__ inv_freq, int64_t tokens,
                            int64_t b, int64_t rotated_heads, int64_t row, int64_t d, int64_t half,
                            bool inverse) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= tokens * rotated_heads * half) return;
  const int64_t k = i % half, head = (i / half) % rotated_heads, t = i / (half * rotated_heads);
  float sn, c;
  rope_sincos(static_cast<float>(t / b), inv_freq[k], inverse, sn, c);
  T* p = qkv + t * row + head * d;
  float y1, y2;
  rope_pair<T>(to_f32(p[k]), to_f32(p[k + half]), c, sn, y1, y2);
  p[k] = from_f32<T>(y1);
  p[k + half] = from_f32<T>(y2);
}

// Vector path (half % 8 == 0, d % 8 == 0, 16-byte aligned qkv and inv_freq; either dtype). The
// generic kernel is slow from 2-byte accesses, 64-bit index divisions and one sincosf per element.
// Here a thread owns 8 consecutive pairs k0..k0+7 of one token and every kLanes-th rotated head
// (lane, lane + kLanes, ...): it computes those 8 sines and cosines once, in registers, and applies
// them to all its heads, each head one 16-byte access for x1 = p[k0..k0+7] and one for
// x2 = p[k0+half..k0+half+7] (two each for f32), kUnroll heads loaded before any is written. The
// sines cost rotated / kLanes (10 for Llama's 32 + 8 heads) times fewer than in the generic kernel
// and hide under the memory traffic, so no cos/sin table and no scratch memory are needed. The
// angle and sincosf calls are the generic kernel's, and so is rope_pair: the same bits. Consecutive
// threads take consecutive k groups, then lanes, then tokens: a warp's accesses fill whole 32-byte
// sectors. Indices are 32-bit where the launcher checks that they fit. On an H200 (tokens 8192,
// 40 rotated heads, d = rot_dim = 64, bf16): 26 us with a cold L2 and 20 us warm, vs 80 us before.
constexpr int kRopeLanes = 4, kRopeUnroll = 2;

template <class T, int kLanes = kRopeLanes, int kUnroll = kRopeUnroll>
__global__ void rope_vec8_kernel(T* __restrict__ qkv, const float* __restrict__ inv_freq,
                                 uint32_t units, uint32_t k_groups, uint32_t b, int rotated_heads,
                                 int64_t row, int d, int half, bool inverse) {
  const uint32_t u = blockIdx.x * blockDim.x + threadIdx.x;
  if (u >= units) return;
  const uint32_t kg = u % k_groups, rest = u / k_groups;
  const int lane = static_cast<int>(rest % kLanes);
  const uint32_t t = rest / kLanes;
  const int k0 = static_cast<int>(kg) * 8;
  const float pos = static_cast<float>(t / b);
  const float4 f0 = __ldg(reinterpret_cast<const float4*>(inv_freq + k0));
  const float4 f1 = __ldg(reinterpret_cast<const float4*>(inv_freq + k0) + 1);
  const float f[8] = {f0.x, f0.y, f0.z, f0.w, f1.x, f1.y, f1.z, f1.w};
  float sn[8], c[8];
#pragma unroll
  for (int j = 0; j < 8; ++j) rope_sincos(pos, f[j], inverse, sn[j], c[j]);
  T* p = qkv + static_cast<int64_t>(t) * row + k0;
  for (int h0 = lane; h0 < rotated_heads; h0 += kLanes * kUnroll) {
    Raw8<T> r1[kUnroll], r2[kUnroll];
#pragma unroll
    for (int i = 0; i < kUnroll; ++i) {
      const int h = h0 + i * kLanes;
      if (h < rotated_heads) {
        r1[i] = ld_raw8(p + h * d);
        r2[i] = ld_raw8(p + h * d + half);
      }
    }
#pragma unroll
    for (int i = 0; i < kUnroll; ++i) {
      const int h = h0 + i * kLanes;
      if (h < rotated_heads) {
        float x1[8], x2[8], y1[8], y2[8];
        unpack8(r1[i], x1);
        unpack8(r2[i], x2);
#pragma unroll
        for (int j = 0; j < 8; ++j) rope_pair<T>(x1[j], x2[j], c[j], sn[j], y1[j], y2[j]);
        store8(p + h * d, y1);
        store8(p + h * d + half, y2);
      }
    }
  }
}

constexpr int kThreads = 256;

}  // namespace

void launch_rmsnorm_forward(const void* x, const void* gamma, DType t, int64_t rows, int64_t h,
                            float eps, void* y, float* rstd, cudaStream_t stream) {
  if (rows <= 0) return;
  const bool vec = aligned16(x) && aligned16(gamma) && aligned16(y) && h % 8 == 0;
  dispatch_act(t, [&](auto tag) {
    using T = decltype(tag);
    dispatch_vpl(h, vec, [&](auto vpl) {
      rmsnorm_fwd_kernel<T, decltype(vpl)::value>
          <<<blocks_for(rows, kWarpsPerBlock), kWarpsPerBlock * 32, 0, stream>>>(
              static_cast<const T*>(x), static_cast<const T*>(gamma), rows, h, eps, vec,
              static_cast<T*>(y), rstd);
    });
  });
  MPLAN_CUDA_LAUNCH_CHECK();
}

size_t rmsnorm_backward_scratch_bytes(int64_t rows, int64_t h) {
  return std::max(column_sum_scratch_bytes(rows, h),
                  rmsnorm_backward_one_pass_scratch_bytes(rows, h));
}

void launch_rmsnorm_backward(const void* dy, const void* x, const void* gamma, DType t,
                             const float* rstd, int64_t rows, int64_t h, void* dx, void* dres,
                             float* dgamma, void* scratch, cudaStream_t stream) {
  if (rows <= 0) return;
  void* out = dres != nullptr ? dres : dx;
  if (norm_backward_one_pass_fits(h, t, dy, x, gamma, out)) {
    launch_rmsnorm_backward_one_pass(dy, x, gamma, t, rstd, rows, h, out, dres, dgamma, scratch,
                                     stream);
    return;
  }
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

// A block per (row, kThreads · 8 columns).
static dim3 swiglu_grid(int64_t rows, int64_t f) {
  const int64_t col_blocks = (f + kThreads * 8 - 1) / (kThreads * 8);
  MPLAN_CHECK(rows < (int64_t{1} << 31) && col_blocks < 65536, "swiglu: rows ", rows, ", f ", f);
  return dim3(static_cast<unsigned>(rows), static_cast<unsigned>(col_blocks));
}

void launch_swiglu_forward(const void* x, DType t, int64_t rows, int64_t f, void* y,
                           cudaStream_t stream) {
  if (rows <= 0 || f <= 0) return;
  const bool vec = aligned16(x) && aligned16(y) && f % 8 == 0;
  const dim3 grid = swiglu_grid(rows, f);
  dispatch_act(t, [&](auto tag) {
    using T = decltype(tag);
    swiglu_fwd_kernel<T>
        <<<grid, kThreads, 0, stream>>>(static_cast<const T*>(x), f, vec, static_cast<T*>(y));
  });
  MPLAN_CUDA_LAUNCH_CHECK();
}

void launch_swiglu_backward(const void* dy, const void* x, DType t, int64_t rows, int64_t f,
                            void* dx, cudaStream_t stream) {
  if (rows <= 0 || f <= 0) return;
  const bool vec = aligned16(dy) && aligned16(x) && aligned16(dx) && f % 8 == 0;
  const dim3 grid = swiglu_grid(rows, f);
  dispatch_act(t, [&](auto tag) {
    using T = decltype(tag);
    swiglu_bwd_kernel<T><<<grid, kThreads, 0, stream>>>(
        static_cast<const T*>(dy), static_cast<const T*>(x), f, vec, static_cast<T*>(dx));
  });
  MPLAN_CUDA_LAUNCH_CHECK();
}

void launch_rope(void* qkv, DType t, int64_t tokens, int64_t b, int64_t heads, int64_t groups,
                 int64_t d, int64_t rot_dim, const float* inv_freq, bool inverse,
                 cudaStream_t stream) {
  const int64_t half = rot_dim / 2, rotated = heads + groups, row = (heads + 2 * groups) * d;
  const int64_t n = tokens * rotated * half;
  if (n <= 0) return;
  const int64_t k_groups = half / 8, units = tokens * kRopeLanes * k_groups;
  const bool vec = half % 8 == 0 && d % 8 == 0 && aligned16(qkv) && aligned16(inv_freq) &&
                   units < (int64_t{1} << 31) && b < (int64_t{1} << 31) && row < (int64_t{1} << 31);
  dispatch_act(t, [&](auto tag) {
    using T = decltype(tag);
    if (vec) {
      rope_vec8_kernel<T><<<blocks_for(units, kThreads), kThreads, 0, stream>>>(
          static_cast<T*>(qkv), inv_freq, static_cast<uint32_t>(units),
          static_cast<uint32_t>(k_groups), static_cast<uint32_t>(b), static_cast<int>(rotated), row,
          static_cast<int>(d), static_cast<int>(half), inverse);
    } else {
      rope_kernel<T><<<blocks_for(n, kThreads), kThreads, 0, stream>>>(
          static_cast<T*>(qkv), inv_freq, tokens, b, rotated, row, d, half, inverse);
    }
  });
  MPLAN_CUDA_LAUNCH_CHECK();
}

}  // namespace mplan::exec::cuda
