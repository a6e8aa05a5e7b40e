// Elementwise kernels: fill (constant or hashed uniform), cast, add, scale, GeLU (tanh)
// forward/backward, and the row bias add used when a GEMM epilogue is not fused. Each thread
// handles 8 consecutive elements with 16-byte accesses when every pointer is 16-byte aligned;
// the tail (and misaligned views) take the scalar path. Math in f32; one rounding to the output.
#include "exec/cuda/device_utils.cuh"
#include "exec/cuda/kernels.hpp"

namespace mplan::exec::cuda {
namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ int64_t first_elem() {
  return (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * 8;
}

template <class T>
__global__ void fill_kernel(T* p, int64_t n, float value, bool vec) {
  const int64_t i0 = first_elem();
  if (i0 >= n) return;
  float v[8];
#pragma unroll
  for (int j = 0; j < 8; ++j) v[j] = value;
  store8_guarded(p, i0, n, vec, v);
}

__global__ void fill_i32_kernel(int32_t* p, int64_t n, int32_t value) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) p[i] = value;
}

__device__ __forceinline__ float hash_uniform(uint64_t seed, int64_t i) {
  uint64_t z = seed + 0x9e3779b97f4a7c15ull * static_cast<uint64_t>(i + 1);  // splitmix64
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return static_cast<float>(z >> 40) * (1.0f / 16777216.0f);  // 24 bits -> [0, 1)
}

template <class T>
__global__ void fill_uniform_kernel(T* p, int64_t n, uint64_t seed, float lo, float hi, bool vec) {
  const int64_t i0 = first_elem();
  if (i0 >= n) return;
  float v[8];
#pragma unroll
  for (int j = 0; j < 8; ++j) v[j] = lo + (hi - lo) * hash_uniform(seed, i0 + j);
  store8_guarded(p, i0, n, vec, v);
}

template <class D, class S>
__global__ void cast_kernel(D* dst, const S* src, int64_t n, bool vec) {
  const int64_t i0 = first_elem();
  if (i0 >= n) return;
  float v[8];
  load8_guarded(src, i0, n, vec, v);
  store8_guarded(dst, i0, n, vec, v);
}

template <class T>
__global__ void add_kernel(T* out, const T* a, const T* b, int64_t n, bool vec) {
  const int64_t i0 = first_elem();
  if (i0 >= n) return;
  float x[8], y[8];
  load8_guarded(a, i0, n, vec, x);
  load8_guarded(b, i0, n, vec, y);
#pragma unroll
  for (int j = 0; j < 8; ++j) x[j] += y[j];
  store8_guarded(out, i0, n, vec, x);
}

template <class T>
__global__ void scale_kernel(T* p, int64_t n, float factor, bool vec) {
  const int64_t i0 = first_elem();
  if (i0 >= n) return;
  float x[8];
  load8_guarded(p, i0, n, vec, x);
#pragma unroll
  for (int j = 0; j < 8; ++j) x[j] *= factor;
  store8_guarded(p, i0, n, vec, x);
}

template <class T>
__global__ void gelu_forward_kernel(const T* x, T* y, int64_t n, bool vec) {
  const int64_t i0 = first_elem();
  if (i0 >= n) return;
  float v[8];
  load8_guarded(x, i0, n, vec, v);
#pragma unroll
  for (int j = 0; j < 8; ++j) v[j] = gelu_tanh(v[j]);
  store8_guarded(y, i0, n, vec, v);
}

template <class T>
__global__ void gelu_backward_kernel(const T* dy, const T* x, T* dx, int64_t n, bool vec) {
  const int64_t i0 = first_elem();
  if (i0 >= n) return;
  float g[8], v[8];
  load8_guarded(dy, i0, n, vec, g);
  load8_guarded(x, i0, n, vec, v);
#pragma unroll
  for (int j = 0; j < 8; ++j) g[j] *= gelu_tanh_grad(v[j]);
  store8_guarded(dx, i0, n, vec, g);
}

// c (rows, cols) += bias (cols). One thread per 8 columns of one row; vec needs cols % 8 == 0.
template <class C, class B>
__global__ void bias_add_kernel(C* c, const B* bias, int64_t rows, int64_t cols, bool vec) {
  const int64_t groups = (cols + 7) / 8;
  const int64_t g = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (g >= rows * groups) return;
  const int64_t r = g / groups, c0 = (g % groups) * 8;
  float x[8], bv[8];
  load8_guarded(c + r * cols, c0, cols, vec, x);
  load8_guarded(bias, c0, cols, vec, bv);
#pragma unroll
  for (int j = 0; j < 8; ++j) x[j] += bv[j];
  store8_guarded(c + r * cols, c0, cols, vec, x);
}

unsigned grid8(int64_t n) { return blocks_for((n + 7) / 8, kThreads); }

}  // namespace

void launch_fill(void* p, DType t, int64_t n, float value, cudaStream_t stream) {
  if (n <= 0) return;
  if (t == DType::kI32) {
    fill_i32_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream>>>(static_cast<int32_t*>(p), n,
                                                                      static_cast<int32_t>(value));
  } else {
    dispatch_act(t, [&](auto tag) {
      using T = decltype(tag);
      fill_kernel<T><<<grid8(n), kThreads, 0, stream>>>(static_cast<T*>(p), n, value, aligned16(p));
    });
  }
  MPLAN_CUDA_LAUNCH_CHECK();
}

void launch_fill_uniform(void* p, DType t, int64_t n, uint64_t seed, float lo, float hi,
                         cudaStream_t stream) {
  if (n <= 0) return;
  dispatch_act(t, [&](auto tag) {
    using T = decltype(tag);
    fill_uniform_kernel<T>
        <<<grid8(n), kThreads, 0, stream>>>(static_cast<T*>(p), n, seed, lo, hi, aligned16(p));
  });
  MPLAN_CUDA_LAUNCH_CHECK();
}

void launch_cast(void* dst, DType dst_t, const void* src, DType src_t, int64_t n,
                 cudaStream_t stream) {
  if (n <= 0) return;
  const bool vec = aligned16(dst) && aligned16(src);
  dispatch_act(dst_t, [&](auto dtag) {
    using D = decltype(dtag);
    dispatch_act(src_t, [&](auto stag) {
      using S = decltype(stag);
      cast_kernel<D, S><<<grid8(n), kThreads, 0, stream>>>(static_cast<D*>(dst),
                                                           static_cast<const S*>(src), n, vec);
    });
  });
  MPLAN_CUDA_LAUNCH_CHECK();
}

void launch_add(void* out, const void* a, const void* b, DType t, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  const bool vec = aligned16(out) && aligned16(a) && aligned16(b);
  dispatch_act(t, [&](auto tag) {
    using T = decltype(tag);
    add_kernel<T><<<grid8(n), kThreads, 0, stream>>>(static_cast<T*>(out), static_cast<const T*>(a),
                                                     static_cast<const T*>(b), n, vec);
  });
  MPLAN_CUDA_LAUNCH_CHECK();
}

void launch_scale(void* p, DType t, int64_t n, float factor, cudaStream_t stream) {
  if (n <= 0) return;
  dispatch_act(t, [&](auto tag) {
    using T = decltype(tag);
    scale_kernel<T><<<grid8(n), kThreads, 0, stream>>>(static_cast<T*>(p), n, factor, aligned16(p));
  });
  MPLAN_CUDA_LAUNCH_CHECK();
}

void launch_gelu_forward(const void* x, void* y, DType t, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  const bool vec = aligned16(x) && aligned16(y);
  dispatch_act(t, [&](auto tag) {
    using T = decltype(tag);
    gelu_forward_kernel<T>
        <<<grid8(n), kThreads, 0, stream>>>(static_cast<const T*>(x), static_cast<T*>(y), n, vec);
  });
  MPLAN_CUDA_LAUNCH_CHECK();
}

void launch_gelu_backward(const void* dy, const void* x, void* dx, DType t, int64_t n,
                          cudaStream_t stream) {
  if (n <= 0) return;
  const bool vec = aligned16(dy) && aligned16(x) && aligned16(dx);
  dispatch_act(t, [&](auto tag) {
    using T = decltype(tag);
    gelu_backward_kernel<T><<<grid8(n), kThreads, 0, stream>>>(
        static_cast<const T*>(dy), static_cast<const T*>(x), static_cast<T*>(dx), n, vec);
  });
  MPLAN_CUDA_LAUNCH_CHECK();
}

void launch_bias_add(void* c, DType c_t, const void* bias, DType bias_t, int64_t rows, int64_t cols,
                     cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return;
  const bool vec = aligned16(c) && aligned16(bias) && cols % 8 == 0;
  const int64_t work = rows * ((cols + 7) / 8);
  dispatch_act(c_t, [&](auto ctag) {
    using C = decltype(ctag);
    dispatch_act(bias_t, [&](auto btag) {
      using B = decltype(btag);
      bias_add_kernel<C, B><<<blocks_for(work, kThreads), kThreads, 0, stream>>>(
          static_cast<C*>(c), static_cast<const B*>(bias), rows, cols, vec);
    });
  });
  MPLAN_CUDA_LAUNCH_CHECK();
}

}  // namespace mplan::exec::cuda
