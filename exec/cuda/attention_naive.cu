// Reference attention kernels: one warp per query row (forward, dQ) or key row (dK, dV), f32
// math throughout, no tensor cores and no tiling; any d <= 128, bf16 or f32. Slow but simple
// enough to trust: selected with MPLAN_NAIVE_ATTENTION=1, and used for shapes or dtypes the
// tensor-core kernels do not take. Also the per-row dsum = dot(dO, O) shared by both paths (bf16
// rows of head dim 64 or 128 by a vectorised kernel).
// Deterministic: every sum runs in a fixed order (lane-strided partials, then a warp tree).
#include <cmath>

#include "exec/cuda/device_utils.cuh"
#include "exec/cuda/kernels.hpp"

namespace mplan::exec::cuda {
namespace {

constexpr int kMaxPerLane = 4;  // d <= 128

struct NaiveDims {
  int64_t s, b, heads, groups, d;
  // Element offset of query head hh's Q (slot 0) or of its group's K or V (slot 1, 2) at (row,
  // bi) in qkv (s, b, heads + 2 groups, d).
  __device__ int64_t qkv(int64_t row, int64_t bi, int slot, int64_t hh) const {
    const int64_t plane = slot == 0 ? hh : heads + (slot - 1) * groups + hh / (heads / groups);
    return ((row * b + bi) * (heads + 2 * groups) + plane) * d;
  }
  // Element offset of (row, bi, hh, 0) in out (s, b, heads, d).
  __device__ int64_t out(int64_t row, int64_t bi, int64_t hh) const {
    return ((row * b + bi) * heads + hh) * d;
  }
};

template <class T>
__device__ __forceinline__ void load_row(const T* p, int64_t d, float (&v)[kMaxPerLane]) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int i = 0; i < kMaxPerLane; ++i) {
    const int64_t c = lane + 32 * i;
    v[i] = c < d ? to_f32(p[c]) : 0.0f;
  }
}
template <class T>
__device__ __forceinline__ void store_row(T* p, int64_t d, const float (&v)[kMaxPerLane],
                                          float mul) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int i = 0; i < kMaxPerLane; ++i) {
    const int64_t c = lane + 32 * i;
    if (c < d) p[c] = from_f32<T>(v[i] * mul);
  }
}
__device__ __forceinline__ float dot_row(const float (&a)[kMaxPerLane],
                                         const float (&b)[kMaxPerLane]) {
  float s = 0.0f;
#pragma unroll
  for (int i = 0; i < kMaxPerLane; ++i) s += a[i] * b[i];
  return warp_sum(s);
}

// grid (s, b·heads), one warp: query row blockIdx.x.
template <class T>
__global__ void naive_fwd_kernel(const T* __restrict__ qkv, T* __restrict__ out,
                                 float* __restrict__ lse, NaiveDims dm, float scale) {
  const int64_t i = blockIdx.x, bh = blockIdx.y;
  const int64_t bi = bh / dm.heads, hh = bh % dm.heads;
  float q[kMaxPerLane], acc[kMaxPerLane] = {0, 0, 0, 0};
  load_row(qkv + dm.qkv(i, bi, 0, hh), dm.d, q);
  float m = -INFINITY, l = 0.0f;
  for (int64_t j = 0; j <= i; ++j) {
    float k[kMaxPerLane], v[kMaxPerLane];
    load_row(qkv + dm.qkv(j, bi, 1, hh), dm.d, k);
    load_row(qkv + dm.qkv(j, bi, 2, hh), dm.d, v);
    const float sc = dot_row(q, k) * scale;
    const float m_new = fmaxf(m, sc);
    const float corr = expf(m - m_new);
    const float p = expf(sc - m_new);
    l = l * corr + p;
#pragma unroll
    for (int e = 0; e < kMaxPerLane; ++e) acc[e] = acc[e] * corr + p * v[e];
    m = m_new;
  }
  store_row(out + dm.out(i, bi, hh), dm.d, acc, 1.0f / l);
  if ((threadIdx.x & 31) == 0) lse[bh * dm.s + i] = m + logf(l);
}

// grid (s, b·heads): dQ of query row blockIdx.x.
template <class T>
__global__ void naive_dq_kernel(const T* __restrict__ qkv, const T* __restrict__ dout,
                                const float* __restrict__ lse, const float* __restrict__ dsum,
                                T* __restrict__ dqkv, NaiveDims dm, float scale) {
  const int64_t i = blockIdx.x, bh = blockIdx.y;
  const int64_t bi = bh / dm.heads, hh = bh % dm.heads;
  float q[kMaxPerLane], g[kMaxPerLane], acc[kMaxPerLane] = {0, 0, 0, 0};
  load_row(qkv + dm.qkv(i, bi, 0, hh), dm.d, q);
  load_row(dout + dm.out(i, bi, hh), dm.d, g);
  const float li = lse[bh * dm.s + i], di = dsum[bh * dm.s + i];
  for (int64_t j = 0; j <= i; ++j) {
    float k[kMaxPerLane], v[kMaxPerLane];
    load_row(qkv + dm.qkv(j, bi, 1, hh), dm.d, k);
    load_row(qkv + dm.qkv(j, bi, 2, hh), dm.d, v);
    const float p = expf(dot_row(q, k) * scale - li);
    const float ds = p * (dot_row(g, v) - di);
#pragma unroll
    for (int e = 0; e < kMaxPerLane; ++e) acc[e] += ds * k[e];
  }
  store_row(dqkv + dm.qkv(i, bi, 0, hh), dm.d, acc, scale);
}

// grid (s, b·groups): dK and dV of key row blockIdx.x of one K/V group, summed over the group's
// heads in order.
template <class T>
__global__ void naive_dkdv_kernel(const T* __restrict__ qkv, const T* __restrict__ dout,
                                  const float* __restrict__ lse, const float* __restrict__ dsum,
                                  T* __restrict__ dqkv, NaiveDims dm, float scale) {
  const int64_t j = blockIdx.x, bg = blockIdx.y;
  const int64_t bi = bg / dm.groups, per = dm.heads / dm.groups;
  const int64_t h0 = (bg % dm.groups) * per;  // the group's first head
  float k[kMaxPerLane], v[kMaxPerLane];
  float dk[kMaxPerLane] = {0, 0, 0, 0}, dv[kMaxPerLane] = {0, 0, 0, 0};
  load_row(qkv + dm.qkv(j, bi, 1, h0), dm.d, k);
  load_row(qkv + dm.qkv(j, bi, 2, h0), dm.d, v);
  for (int64_t hh = h0; hh < h0 + per; ++hh) {
    const int64_t bh = bi * dm.heads + hh;
    for (int64_t i = j; i < dm.s; ++i) {
      float q[kMaxPerLane], g[kMaxPerLane];
      load_row(qkv + dm.qkv(i, bi, 0, hh), dm.d, q);
      load_row(dout + dm.out(i, bi, hh), dm.d, g);
      const float p = expf(dot_row(q, k) * scale - lse[bh * dm.s + i]);
      const float ds = p * (dot_row(g, v) - dsum[bh * dm.s + i]);
#pragma unroll
      for (int e = 0; e < kMaxPerLane; ++e) {
        dv[e] += p * g[e];
        dk[e] += ds * q[e];
      }
    }
  }
  store_row(dqkv + dm.qkv(j, bi, 1, h0), dm.d, dk, scale);
  store_row(dqkv + dm.qkv(j, bi, 2, h0), dm.d, dv, 1.0f);
}

// dsum(bh, i) = dot(dout row, out row): one warp per (bh, i), 8 warps per block.
constexpr int kDsumWarps = 8;
template <class T>
__global__ void __launch_bounds__(kDsumWarps * 32)
    dsum_kernel(const T* __restrict__ out, const T* __restrict__ dout, float* __restrict__ dsum,
                NaiveDims dm) {
  const int64_t r = static_cast<int64_t>(blockIdx.x) * kDsumWarps + (threadIdx.x >> 5);
  if (r >= dm.b * dm.heads * dm.s) return;
  const int64_t bh = r / dm.s, i = r % dm.s;
  const int64_t bi = bh / dm.heads, hh = bh % dm.heads;
  float o[kMaxPerLane], g[kMaxPerLane];
  load_row(out + dm.out(i, bi, hh), dm.d, o);
  load_row(dout + dm.out(i, bi, hh), dm.d, g);
  const float v = dot_row(o, g);
  if ((threadIdx.x & 31) == 0) dsum[r] = v;
}

// The same dsum for bf16 rows of d = 8 · kTpr (16-byte aligned): kTpr threads per row, 8 columns
// each by one 16-byte load of each tensor, then a shuffle tree over the row's threads. Rows are
// taken in memory order (out is (s, b·heads, d): row r is token r / (b·heads) of (batch, head)
// r % (b·heads)), so a warp reads 512 contiguous bytes of each tensor.
template <int kTpr>
__global__ void __launch_bounds__(256)
    dsum_bf16_kernel(const bf16* __restrict__ out, const bf16* __restrict__ dout,
                     float* __restrict__ dsum, int64_t rows, int64_t n_bh, int64_t s) {
  const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t r = t / kTpr;
  const int64_t off = t * 8;  // = r · d + (t % kTpr) · 8
  float acc = 0.0f;
  if (r < rows) {
    float o[8], g[8];
    load8(out + off, o);
    load8(dout + off, g);
#pragma unroll
    for (int e = 0; e < 8; ++e) acc = fmaf(o[e], g[e], acc);
  }
#pragma unroll
  for (int m = kTpr / 2; m > 0; m >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, m);
  if (r < rows && t % kTpr == 0) dsum[(r % n_bh) * s + r / n_bh] = acc;
}

NaiveDims naive_dims(const AttentionShape& sh) {
  MPLAN_CHECK(sh.d >= 1 && sh.d <= 32 * kMaxPerLane, "attention: head dim ", sh.d,
              " not in [1, 128]");
  MPLAN_CHECK(sh.s < 0x7fffffff && sh.b * sh.heads <= 65535,
              "attention (reference kernels): grid too large: s=", sh.s,
              " b*heads=", sh.b * sh.heads);
  MPLAN_CHECK(sh.groups >= 1 && sh.heads % sh.groups == 0, "attention: ", sh.groups,
              " K/V groups do not divide ", sh.heads, " heads");
  return {sh.s, sh.b, sh.heads, sh.groups, sh.d};
}

dim3 row_grid(const AttentionShape& sh) {
  return dim3(static_cast<unsigned>(sh.s), static_cast<unsigned>(sh.b * sh.heads));
}

}  // namespace

void launch_attention_forward_naive(const AttentionShape& sh, const void* qkv, void* out,
                                    float* lse, float scale, DType t, cudaStream_t stream) {
  const NaiveDims dm = naive_dims(sh);
  dispatch_act(t, [&](auto tag) {
    using T = decltype(tag);
    naive_fwd_kernel<T><<<row_grid(sh), 32, 0, stream>>>(static_cast<const T*>(qkv),
                                                         static_cast<T*>(out), lse, dm, scale);
  });
  MPLAN_CUDA_LAUNCH_CHECK();
}

void launch_attention_backward_naive(const AttentionShape& sh, const void* qkv, const void* dout,
                                     const float* lse, const float* dsum, float scale, void* dqkv,
                                     DType t, cudaStream_t stream) {
  const NaiveDims dm = naive_dims(sh);
  dispatch_act(t, [&](auto tag) {
    using T = decltype(tag);
    naive_dq_kernel<T><<<row_grid(sh), 32, 0, stream>>>(static_cast<const T*>(qkv),
                                                        static_cast<const T*>(dout), lse, dsum,
                                                        static_cast<T*>(dqkv), dm, scale);
    MPLAN_CUDA_LAUNCH_CHECK();
    naive_dkdv_kernel<T>
        <<<dim3(static_cast<unsigned>(sh.s), static_cast<unsigned>(sh.b * sh.groups)), 32, 0,
           stream>>>(static_cast<const T*>(qkv), static_cast<const T*>(dout), lse, dsum,
                     static_cast<T*>(dqkv), dm, scale);
    MPLAN_CUDA_LAUNCH_CHECK();
  });
}

void launch_attention_dsum(const AttentionShape& sh, const void* out, const void* dout, float* dsum,
                           DType t, cudaStream_t stream) {
  const NaiveDims dm = naive_dims(sh);
  if (t == DType::kBF16 && (sh.d == 64 || sh.d == 128) && aligned16(out) && aligned16(dout)) {
    const int64_t rows = sh.b * sh.heads * sh.s;
    auto run = [&](auto kernel) {  // sh.d / 8 threads per row
      kernel<<<blocks_for(rows * (sh.d / 8), 256), 256, 0, stream>>>(
          static_cast<const bf16*>(out), static_cast<const bf16*>(dout), dsum, rows,
          sh.b * sh.heads, sh.s);
    };
    if (sh.d == 64) {
      run(dsum_bf16_kernel<8>);
    } else {
      run(dsum_bf16_kernel<16>);
    }
    MPLAN_CUDA_LAUNCH_CHECK();
    return;
  }
  dispatch_act(t, [&](auto tag) {
    using T = decltype(tag);
    dsum_kernel<T><<<blocks_for(sh.b * sh.heads * sh.s, kDsumWarps), kDsumWarps * 32, 0, stream>>>(
        static_cast<const T*>(out), static_cast<const T*>(dout), dsum, dm);
  });
  MPLAN_CUDA_LAUNCH_CHECK();
}

}  // namespace mplan::exec::cuda
