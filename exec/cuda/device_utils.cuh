// Device helpers shared by the kernels: 16-byte vector loads/stores of bf16 or f32 into f32
// registers, warp and block reductions. Invariant: every reduction combines values in an order
// fixed by thread indices only, so results are bitwise reproducible run to run.
#pragma once

#include <type_traits>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "exec/backend.hpp"
#include "exec/cuda/cuda_check.hpp"

// After a <<<>>> launch: a bad launch configuration aborts the job at once (errors while the
// kernel runs surface at the next checked synchronizing call).
#define MPLAN_CUDA_LAUNCH_CHECK() MPLAN_CUDA_CHECK(cudaGetLastError())

namespace mplan::exec::cuda {

using bf16 = __nv_bfloat16;

// kN elements of T fill one 16-byte vector.
template <class T>
struct Vec16;
template <>
struct Vec16<float> {
  static constexpr int kN = 4;
};
template <>
struct Vec16<bf16> {
  static constexpr int kN = 8;
};

__device__ __forceinline__ float to_f32(float x) { return x; }
__device__ __forceinline__ float to_f32(bf16 x) { return __bfloat162float(x); }
template <class T>
__device__ __forceinline__ T from_f32(float x);
template <>
__device__ __forceinline__ float from_f32<float>(float x) {
  return x;
}
template <>
__device__ __forceinline__ bf16 from_f32<bf16>(float x) {
  return __float2bfloat16_rn(x);
}

// Unpacks one raw 16-byte vector into f32 values.
__device__ __forceinline__ void unpack(const uint4& raw, float (&out)[4]) {
  out[0] = __uint_as_float(raw.x);
  out[1] = __uint_as_float(raw.y);
  out[2] = __uint_as_float(raw.z);
  out[3] = __uint_as_float(raw.w);
}
__device__ __forceinline__ void unpack(const uint4& raw, float (&out)[8]) {
  const uint32_t w[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    // bf16 -> f32 is exact: the bf16 bits are the high half of the f32.
    out[2 * i] = __uint_as_float(w[i] << 16);
    out[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
  }
}
__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);  // .x (low 16 bits) = lo
  return *reinterpret_cast<uint32_t*>(&v);
}
__device__ __forceinline__ uint4 pack(const float (&v)[4]) {
  return make_uint4(__float_as_uint(v[0]), __float_as_uint(v[1]), __float_as_uint(v[2]),
                    __float_as_uint(v[3]));
}
__device__ __forceinline__ uint4 pack(const float (&v)[8]) {
  return make_uint4(pack_bf16x2(v[0], v[1]), pack_bf16x2(v[2], v[3]), pack_bf16x2(v[4], v[5]),
                    pack_bf16x2(v[6], v[7]));
}

// Loads/stores Vec16<T>::kN elements at p (16-byte aligned) as f32.
template <class T>
__device__ __forceinline__ void load_vec(const T* p, float (&out)[Vec16<T>::kN]) {
  unpack(*reinterpret_cast<const uint4*>(p), out);
}
template <class T>
__device__ __forceinline__ void store_vec(T* p, const float (&v)[Vec16<T>::kN]) {
  *reinterpret_cast<uint4*>(p) = pack(v);
}

// 8 elements of T as raw 16-byte words (bf16: one uint4; f32: two), kept packed in registers and
// unpacked to f32 when used. p must be 16-byte aligned.
template <class T>
struct Raw8 {
  uint4 w[sizeof(T) / 2];
};
template <class T>
__device__ __forceinline__ Raw8<T> ld_raw8(const T* p) {
  Raw8<T> r;
#pragma unroll
  for (int i = 0; i < int(sizeof(T) / 2); ++i) r.w[i] = reinterpret_cast<const uint4*>(p)[i];
  return r;
}
__device__ __forceinline__ void unpack8(const Raw8<bf16>& r, float (&v)[8]) { unpack(r.w[0], v); }
__device__ __forceinline__ void unpack8(const Raw8<float>& r, float (&v)[8]) {
  float a[4], b[4];
  unpack(r.w[0], a);
  unpack(r.w[1], b);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    v[i] = a[i];
    v[4 + i] = b[i];
  }
}
template <class T>
__device__ __forceinline__ void load8(const T* p, float (&v)[8]) {
  unpack8(ld_raw8(p), v);
}

// A row of h columns (16-byte aligned, h % 8 == 0, h <= kVpl·256) held by one warp as loaded:
// lane l keeps the 16-byte words at columns (l + 32·i)·8, i < kVpl, those below h (16-bit values
// packed two a register: half the registers of floats).
template <class T, int kVpl>
struct WarpRow {
  Raw8<T> raw[kVpl];
  __device__ __forceinline__ void load(const T* row, int64_t h, int lane) {
#pragma unroll
    for (int i = 0; i < kVpl; ++i) {
      const int64_t c = (lane + 32 * i) * 8;
      if (c < h) raw[i] = ld_raw8(row + c);
    }
  }
  // f(c, v) for each of the lane's vectors in order: c its first column, v its values as f32.
  template <class F>
  __device__ __forceinline__ void each(int64_t h, int lane, F&& f) const {
#pragma unroll
    for (int i = 0; i < kVpl; ++i) {
      const int64_t c = (lane + 32 * i) * 8;
      if (c < h) {
        float v[8];
        unpack8(raw[i], v);
        f(c, v);
      }
    }
  }
};
__device__ __forceinline__ void store8(bf16* p, const float (&v)[8]) {
  *reinterpret_cast<uint4*>(p) = pack(v);
}
__device__ __forceinline__ void store8(float* p, const float (&v)[8]) {
  const float a[4] = {v[0], v[1], v[2], v[3]};
  const float b[4] = {v[4], v[5], v[6], v[7]};
  reinterpret_cast<uint4*>(p)[0] = pack(a);
  reinterpret_cast<uint4*>(p)[1] = pack(b);
}
// Loads up to 8 elements [i0, min(i0 + 8, n)) of p, zero beyond n; vectorized when `vec`
// (16-byte aligned base and i0 + 8 <= n).
template <class T>
__device__ __forceinline__ void load8_guarded(const T* p, int64_t i0, int64_t n, bool vec,
                                              float (&v)[8]) {
  if (vec && i0 + 8 <= n) {
    load8(p + i0, v);
  } else {
#pragma unroll
    for (int j = 0; j < 8; ++j) v[j] = i0 + j < n ? to_f32(p[i0 + j]) : 0.0f;
  }
}
template <class T>
__device__ __forceinline__ void store8_guarded(T* p, int64_t i0, int64_t n, bool vec,
                                               const float (&v)[8]) {
  if (vec && i0 + 8 <= n) {
    store8(p + i0, v);
  } else {
#pragma unroll
    for (int j = 0; j < 8; ++j)
      if (i0 + j < n) p[i0 + j] = from_f32<T>(v[j]);
  }
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Block-wide sum / max for blockDim.x a multiple of 32 (<= 1024); every thread gets the result.
// `scratch` holds 32 floats; the call ends with the scratch free for reuse.
__device__ __forceinline__ float block_sum(float v, float* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
  v = warp_sum(v);
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float t = lane < nwarps ? scratch[lane] : 0.0f;
  t = warp_sum(t);
  __syncthreads();
  return t;
}
__device__ __forceinline__ float block_max(float v, float* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
  v = warp_max(v);
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float t = lane < nwarps ? scratch[lane] : -INFINITY;
  t = warp_max(t);
  __syncthreads();
  return t;
}

__device__ __forceinline__ float gelu_tanh(float x) {
  const float k0 = 0.7978845608028654f;  // sqrt(2/pi)
  const float k1 = 0.044715f;
  return 0.5f * x * (1.0f + tanhf(k0 * (x + k1 * x * x * x)));
}
__device__ __forceinline__ float gelu_tanh_grad(float x) {
  const float k0 = 0.7978845608028654f;
  const float k1 = 0.044715f;
  const float t = tanhf(k0 * (x + k1 * x * x * x));
  return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * k0 * (1.0f + 3.0f * k1 * x * x);
}

// ---- host side ------------------------------------------------------------------------------
inline bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

// Calls f(T{}) with T = float or bf16 for an activation dtype.
template <class F>
void dispatch_act(DType t, F&& f) {
  if (t == DType::kF32) {
    f(float{});
  } else if (t == DType::kBF16) {
    f(bf16{});
  } else {
    MPLAN_CHECK(false, "expected an f32 or bf16 tensor, got ", to_string(t));
  }
}

// Rows of h columns held in registers by one warp, kVpl vectors of 8 a lane (h <= kVpl·256):
// calls f(integral_constant<int, kVpl>) with the smallest of 1, 2, 4, 8 that fits, or with 0
// (a generic loop) where the rows are not 16-byte aligned (vec_ok), h % 8 != 0 or h > 2048.
template <class F>
void dispatch_vpl(int64_t h, bool vec_ok, F&& f) {
  const int64_t need = (h + 255) / 256;
  if (!vec_ok || h % 8 != 0 || need > 8) {
    f(std::integral_constant<int, 0>{});
  } else if (need <= 1) {
    f(std::integral_constant<int, 1>{});
  } else if (need <= 2) {
    f(std::integral_constant<int, 2>{});
  } else if (need <= 4) {
    f(std::integral_constant<int, 4>{});
  } else {
    f(std::integral_constant<int, 8>{});
  }
}

inline unsigned blocks_for(int64_t work_items, int threads_per_block) {
  const int64_t b = (work_items + threads_per_block - 1) / threads_per_block;
  MPLAN_CHECK(b >= 0 && b <= 0x7fffffff, "grid too large: ", b);
  return static_cast<unsigned>(b < 1 ? 1 : b);
}

}  // namespace mplan::exec::cuda
