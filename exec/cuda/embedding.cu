// Vocab-parallel token embedding (forward and deterministic backward) and learned position
// embedding. The token-embedding gradient sorts (local id, token index) pairs with CUB's stable
// radix sort, then one block per run of equal ids adds that run's rows into dwte in increasing
// token order: no atomics, the same f32 summation order as a sequential loop over tokens.
#include <cub/device/device_radix_sort.cuh>

#include "exec/cuda/device_utils.cuh"
#include "exec/cuda/kernels.hpp"

namespace mplan::exec::cuda {
namespace {

constexpr int kThreads = 256;

// out(t, :) = wte(tokens(t) - vocab_start, :) or 0. One thread per 8 columns of one token.
template <class T>
__global__ void embedding_forward_kernel(const int32_t* __restrict__ tokens, int64_t num_tokens,
                                         const T* __restrict__ wte, int64_t vocab_local, int64_t h,
                                         int64_t vocab_start, bool vec, T* __restrict__ out) {
  const int64_t groups = (h + 7) / 8;
  const int64_t g = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (g >= num_tokens * groups) return;
  const int64_t t = g / groups, c0 = (g % groups) * 8;
  const int64_t id = static_cast<int64_t>(tokens[t]) - vocab_start;
  float v[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  if (id >= 0 && id < vocab_local) load8_guarded(wte + id * h, c0, h, vec, v);
  store8_guarded(out + t * h, c0, h, vec, v);
}

__global__ void embedding_keys_kernel(const int32_t* __restrict__ tokens, int64_t num_tokens,
                                      int64_t vocab_local, int64_t vocab_start,
                                      uint32_t* __restrict__ keys, int32_t* __restrict__ vals) {
  const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= num_tokens) return;
  const int64_t id = static_cast<int64_t>(tokens[t]) - vocab_start;
  keys[t] = (id >= 0 && id < vocab_local) ? static_cast<uint32_t>(id)
                                          : static_cast<uint32_t>(vocab_local);  // sentinel last
  vals[t] = static_cast<int32_t>(t);
}

// Block (p, col block): when sorted position p starts a run of one local id, adds the run's
// dout rows (in token order) into dwte(id). Threads own 8 columns each.
template <class T>
__global__ void embedding_accumulate_kernel(const uint32_t* __restrict__ keys,
                                            const int32_t* __restrict__ vals, int64_t num_tokens,
                                            const T* __restrict__ dout, int64_t vocab_local,
                                            int64_t h, bool vec, float* __restrict__ dwte) {
  const int64_t p = blockIdx.x;
  const uint32_t key = keys[p];
  if (key >= static_cast<uint64_t>(vocab_local)) return;
  if (p > 0 && keys[p - 1] == key) return;
  const int64_t c0 = (static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x) * 8;
  if (c0 >= h) return;
  float* row = dwte + static_cast<int64_t>(key) * h;
  const bool fvec = vec && c0 + 8 <= h;
  float acc[8];
  load8_guarded(row, c0, h, fvec, acc);
  for (int64_t q = p; q < num_tokens && keys[q] == key; ++q) {
    float v[8];
    load8_guarded(dout + static_cast<int64_t>(vals[q]) * h, c0, h, fvec, v);
#pragma unroll
    for (int j = 0; j < 8; ++j) acc[j] += v[j];
  }
  store8_guarded(row, c0, h, fvec, acc);
}

template <class T>
__global__ void add_position_kernel(T* __restrict__ x, int64_t s, int64_t b, int64_t h,
                                    const T* __restrict__ wpe, int64_t s_offset, bool vec) {
  const int64_t groups = (h + 7) / 8;
  const int64_t g = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (g >= s * b * groups) return;
  const int64_t row = g / groups, c0 = (g % groups) * 8;
  const int64_t si = row / b;
  float v[8], w[8];
  load8_guarded(x + row * h, c0, h, vec, v);
  load8_guarded(wpe + (s_offset + si) * h, c0, h, vec, w);
#pragma unroll
  for (int j = 0; j < 8; ++j) v[j] += w[j];
  store8_guarded(x + row * h, c0, h, vec, v);
}

template <class T>
__global__ void position_backward_kernel(const T* __restrict__ dx, int64_t s, int64_t b, int64_t h,
                                         float* __restrict__ dwpe, int64_t s_offset, bool vec) {
  const int64_t groups = (h + 7) / 8;
  const int64_t g = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (g >= s * groups) return;
  const int64_t si = g / groups, c0 = (g % groups) * 8;
  float* row = dwpe + (s_offset + si) * h;
  float acc[8];
  load8_guarded(row, c0, h, vec, acc);
  for (int64_t bi = 0; bi < b; ++bi) {
    float v[8];
    load8_guarded(dx + (si * b + bi) * h, c0, h, vec, v);
#pragma unroll
    for (int j = 0; j < 8; ++j) acc[j] += v[j];
  }
  store8_guarded(row, c0, h, vec, acc);
}

int radix_end_bit(int64_t vocab_local) {
  int bits = 1;
  while ((int64_t{1} << bits) <= vocab_local) ++bits;  // keys are in [0, vocab_local]
  return bits;
}

size_t cub_sort_bytes(int64_t num_tokens, int64_t vocab_local) {
  size_t bytes = 0;
  MPLAN_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(
      nullptr, bytes, static_cast<const uint32_t*>(nullptr), static_cast<uint32_t*>(nullptr),
      static_cast<const int32_t*>(nullptr), static_cast<int32_t*>(nullptr),
      static_cast<int>(num_tokens), 0, radix_end_bit(vocab_local)));
  return bytes;
}

size_t round_up(size_t n) { return (n + 255) / 256 * 256; }

}  // namespace

void launch_embedding_forward(const int32_t* tokens, int64_t num_tokens, const void* wte, DType t,
                              int64_t vocab_local, int64_t h, int64_t vocab_start, void* out,
                              cudaStream_t stream) {
  if (num_tokens <= 0 || h <= 0) return;
  const bool vec = aligned16(wte) && aligned16(out) && h % 8 == 0;
  const int64_t work = num_tokens * ((h + 7) / 8);
  dispatch_act(t, [&](auto tag) {
    using T = decltype(tag);
    embedding_forward_kernel<T><<<blocks_for(work, kThreads), kThreads, 0, stream>>>(
        tokens, num_tokens, static_cast<const T*>(wte), vocab_local, h, vocab_start, vec,
        static_cast<T*>(out));
  });
  MPLAN_CUDA_LAUNCH_CHECK();
}

size_t embedding_backward_scratch_bytes(int64_t num_tokens, int64_t vocab_local) {
  const size_t ints = round_up(static_cast<size_t>(num_tokens) * sizeof(int32_t));
  return 4 * ints + round_up(cub_sort_bytes(num_tokens, vocab_local));
}

void launch_embedding_backward(const int32_t* tokens, int64_t num_tokens, const void* dout, DType t,
                               int64_t vocab_local, int64_t h, int64_t vocab_start, float* dwte,
                               void* scratch, size_t scratch_bytes, cudaStream_t stream) {
  if (num_tokens <= 0 || h <= 0) return;
  MPLAN_CHECK(num_tokens < (int64_t{1} << 31) && vocab_local < (int64_t{1} << 31) - 1,
              "embedding_backward: sizes beyond int32");
  MPLAN_CHECK(scratch_bytes >= embedding_backward_scratch_bytes(num_tokens, vocab_local),
              "embedding_backward: scratch too small");
  const size_t ints = round_up(static_cast<size_t>(num_tokens) * sizeof(int32_t));
  char* base = static_cast<char*>(scratch);
  uint32_t* keys_in = reinterpret_cast<uint32_t*>(base);
  int32_t* vals_in = reinterpret_cast<int32_t*>(base + ints);
  uint32_t* keys_out = reinterpret_cast<uint32_t*>(base + 2 * ints);
  int32_t* vals_out = reinterpret_cast<int32_t*>(base + 3 * ints);
  void* temp = base + 4 * ints;
  size_t temp_bytes = scratch_bytes - 4 * ints;

  embedding_keys_kernel<<<blocks_for(num_tokens, kThreads), kThreads, 0, stream>>>(
      tokens, num_tokens, vocab_local, vocab_start, keys_in, vals_in);
  MPLAN_CUDA_LAUNCH_CHECK();
  MPLAN_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp, temp_bytes, keys_in, keys_out, vals_in,
                                                   vals_out, static_cast<int>(num_tokens), 0,
                                                   radix_end_bit(vocab_local), stream));
  const bool vec = aligned16(dout) && aligned16(dwte) && h % 8 == 0;
  dim3 grid(static_cast<unsigned>(num_tokens), blocks_for((h + 7) / 8, kThreads));
  dispatch_act(t, [&](auto tag) {
    using T = decltype(tag);
    embedding_accumulate_kernel<T><<<grid, kThreads, 0, stream>>>(
        keys_out, vals_out, num_tokens, static_cast<const T*>(dout), vocab_local, h, vec, dwte);
  });
  MPLAN_CUDA_LAUNCH_CHECK();
}

void launch_add_position_embedding(void* x, DType t, int64_t s, int64_t b, int64_t h,
                                   const void* wpe, int64_t s_offset, cudaStream_t stream) {
  if (s <= 0 || b <= 0 || h <= 0) return;
  const bool vec = aligned16(x) && aligned16(wpe) && h % 8 == 0;
  const int64_t work = s * b * ((h + 7) / 8);
  dispatch_act(t, [&](auto tag) {
    using T = decltype(tag);
    add_position_kernel<T><<<blocks_for(work, kThreads), kThreads, 0, stream>>>(
        static_cast<T*>(x), s, b, h, static_cast<const T*>(wpe), s_offset, vec);
  });
  MPLAN_CUDA_LAUNCH_CHECK();
}

void launch_position_embedding_backward(const void* dx, DType t, int64_t s, int64_t b, int64_t h,
                                        float* dwpe, int64_t s_offset, cudaStream_t stream) {
  if (s <= 0 || b <= 0 || h <= 0) return;
  const bool vec = aligned16(dx) && aligned16(dwpe) && h % 8 == 0;
  const int64_t work = s * ((h + 7) / 8);
  dispatch_act(t, [&](auto tag) {
    using T = decltype(tag);
    position_backward_kernel<T><<<blocks_for(work, kThreads), kThreads, 0, stream>>>(
        static_cast<const T*>(dx), s, b, h, dwpe, s_offset, vec);
  });
  MPLAN_CUDA_LAUNCH_CHECK();
}

}  // namespace mplan::exec::cuda
