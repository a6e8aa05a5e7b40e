// Scratch bench (not part of the repo): bitwise check of the new rope against the original kernel
// and timings. Includes llama_ops.cu as-is.
#include "exec/cuda/llama_ops.cu"

#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace mplan::detail {
void check_failed(const char* f, int l, const char* c, const std::string& m) {
  fprintf(stderr, "CHECK %s:%d %s %s\n", f, l, c, m.c_str());
  abort();
}
}  // namespace mplan::detail
namespace mplan::exec {
const char* to_string(DType) { return "dtype"; }
void fatal_abort(const char* f, int l, const std::string& w) {
  fprintf(stderr, "FATAL %s:%d %s\n", f, l, w.c_str());
  abort();
}
namespace cuda {
int64_t column_parts(int64_t) { return 1; }
size_t column_sum_scratch_bytes(int64_t, int64_t) { return 0; }
void launch_column_partials_finalize(const float*, int64_t, int64_t, float*, cudaStream_t) {}
}  // namespace cuda
}  // namespace mplan::exec

using namespace mplan::exec::cuda;
using mplan::exec::DType;

// The original kernel, verbatim.
template <class T>
__global__ void rope_kernel_orig(T* __restrict__ qkv, const float* __restrict__ inv_freq,
                                 int64_t tokens, int64_t b, int64_t rotated_heads, int64_t row,
                                 int64_t d, int64_t half, bool inverse) {
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
// Explicit contraction variants of the original, to learn which one ptxas picked.
template <class T, int kMode>
__global__ void rope_kernel_mode(T* __restrict__ qkv, const float* __restrict__ inv_freq,
                                 int64_t tokens, int64_t b, int64_t rotated_heads, int64_t row,
                                 int64_t d, int64_t half, bool inverse) {
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
  float y1;
  if (kMode == 0) y1 = __fmaf_rn(x1, c, -__fmul_rn(x2, sn));
  if (kMode == 1) y1 = __fmaf_rn(-x2, sn, __fmul_rn(x1, c));
  if (kMode == 2) y1 = __fsub_rn(__fmul_rn(x1, c), __fmul_rn(x2, sn));
  p[k] = from_f32<T>(y1);
  p[k + half] = from_f32<T>(__fmaf_rn(x1, sn, __fmul_rn(x2, c)));
}

__global__ void flush_kernel(float* p, int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) p[i] += 1.0f;
}

#define CK(x)                                                              \
  do {                                                                     \
    cudaError_t e = (x);                                                   \
    if (e != cudaSuccess) {                                                \
      fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); \
      exit(1);                                                             \
    }                                                                      \
  } while (0)

struct Shape {
  int64_t s, b, heads, groups, d, rot;
  bool f32;
  int offset;  // elements of misalignment
};

std::vector<float> inv_freq_host(int64_t rot, float base) {
  std::vector<float> inv(rot / 2);
  for (size_t i = 0; i < inv.size(); ++i)
    inv[i] = static_cast<float>(1.0 / std::pow(double(base), double(2 * i) / rot));
  return inv;
}

template <class T, class K>
void launch_ref(K kern, T* q, const float* inv, const Shape& sh, bool inverse) {
  const int64_t tokens = sh.s * sh.b, half = sh.rot / 2, rotated = sh.heads + sh.groups;
  const int64_t n = tokens * rotated * half;
  kern<<<blocks_for(n, 256), 256>>>(q, inv, tokens, sh.b, rotated, (sh.heads + 2 * sh.groups) * sh.d,
                                    sh.d, half, inverse);
}

int main(int argc, char** argv) {
  std::vector<Shape> shapes = {
      {4096, 2, 32, 8, 64, 64, false, 0}, {256, 2, 8, 2, 128, 128, false, 0},
      {100, 1, 4, 4, 64, 32, false, 0},   {33, 2, 6, 3, 40, 40, true, 0},
      {33, 3, 6, 3, 64, 48, true, 0},     {7, 5, 3, 1, 16, 16, false, 0},
      {4096, 2, 32, 8, 64, 64, true, 0},  {37, 3, 32, 8, 64, 64, false, 0},
      {37, 3, 32, 8, 64, 64, false, 1},   {50, 4, 12, 4, 128, 64, false, 0},
      {1000, 1, 2, 2, 8, 8, false, 0},    {19, 2, 5, 5, 80, 80, false, 0},
      {4096, 2, 32, 8, 64, 64, false, 0},
  };
  std::mt19937 rng(123);
  bool all_ok = true;
  for (size_t si = 0; si < shapes.size(); ++si) {
    const Shape& sh = shapes[si];
    const int64_t tokens = sh.s * sh.b, row = (sh.heads + 2 * sh.groups) * sh.d;
    const size_t es = sh.f32 ? 4 : 2;
    const size_t n = tokens * row + sh.offset;
    std::vector<uint8_t> host(n * es);
    std::normal_distribution<float> nd(0.f, 2.f);
    for (size_t i = 0; i < n; ++i) {
      float v = nd(rng);
      if (sh.f32) memcpy(&host[i * 4], &v, 4);
      else { bf16 h = __float2bfloat16_rn(v); memcpy(&host[i * 2], &h, 2); }
    }
    auto inv = inv_freq_host(sh.rot, si % 2 ? 10000.f : 500000.f);
    float* dinv;
    CK(cudaMalloc(&dinv, inv.size() * 4));
    CK(cudaMemcpy(dinv, inv.data(), inv.size() * 4, cudaMemcpyHostToDevice));
    void *a, *bbuf;
    CK(cudaMalloc(&a, n * es));
    CK(cudaMalloc(&bbuf, n * es));
    std::vector<uint8_t> ha(n * es), hb(n * es);
    for (int inverse = 0; inverse < 2; ++inverse) {
      for (int mode = -1; mode < 3; ++mode) {
        CK(cudaMemcpy(a, host.data(), n * es, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(bbuf, host.data(), n * es, cudaMemcpyHostToDevice));
        if (sh.f32) {
          float* pa = (float*)a + sh.offset;
          float* pb = (float*)bbuf + sh.offset;
          launch_ref(rope_kernel_orig<float>, pa, dinv, sh, inverse);
          if (mode < 0) launch_rope(pb, DType::kF32, tokens, sh.b, sh.heads, sh.groups, sh.d, sh.rot, dinv, inverse, 0);
          if (mode == 0) launch_ref(rope_kernel_mode<float, 0>, pb, dinv, sh, inverse);
          if (mode == 1) launch_ref(rope_kernel_mode<float, 1>, pb, dinv, sh, inverse);
          if (mode == 2) launch_ref(rope_kernel_mode<float, 2>, pb, dinv, sh, inverse);
        } else {
          bf16* pa = (bf16*)a + sh.offset;
          bf16* pb = (bf16*)bbuf + sh.offset;
          launch_ref(rope_kernel_orig<bf16>, pa, dinv, sh, inverse);
          if (mode < 0) launch_rope(pb, DType::kBF16, tokens, sh.b, sh.heads, sh.groups, sh.d, sh.rot, dinv, inverse, 0);
          if (mode == 0) launch_ref(rope_kernel_mode<bf16, 0>, pb, dinv, sh, inverse);
          if (mode == 1) launch_ref(rope_kernel_mode<bf16, 1>, pb, dinv, sh, inverse);
          if (mode == 2) launch_ref(rope_kernel_mode<bf16, 2>, pb, dinv, sh, inverse);
        }
        CK(cudaDeviceSynchronize());
        CK(cudaMemcpy(ha.data(), a, n * es, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(hb.data(), bbuf, n * es, cudaMemcpyDeviceToHost));
        size_t diff = 0, changed = 0;
        for (size_t i = 0; i < n; ++i) {
          diff += memcmp(&ha[i * es], &hb[i * es], es) != 0;
          changed += memcmp(&ha[i * es], &host[i * es], es) != 0;
        }
        printf("shape %zu s=%ld b=%ld h=%ld g=%ld d=%ld rot=%ld %s off=%d inv=%d %s: %zu diffs (%zu changed)\n",
               si, sh.s, sh.b, sh.heads, sh.groups, sh.d, sh.rot, sh.f32 ? "f32" : "bf16", sh.offset,
               inverse, mode < 0 ? "NEW " : ("mode" + std::to_string(mode)).c_str(), diff, changed);
        if (mode < 0 && diff) all_ok = false;
      }
    }
    CK(cudaFree(a));
    CK(cudaFree(bbuf));
    CK(cudaFree(dinv));
  }
  printf(all_ok ? "BITWISE OK\n" : "BITWISE MISMATCH\n");

  // Timings, Llama shape.
  const Shape sh{4096, 2, 32, 8, 64, 64, false, 0};
  const int64_t tokens = sh.s * sh.b, row = (sh.heads + 2 * sh.groups) * sh.d;
  bf16* q;
  CK(cudaMalloc(&q, tokens * row * 2));
  CK(cudaMemset(q, 0, tokens * row * 2));
  auto inv = inv_freq_host(sh.rot, 500000.f);
  float* dinv;
  CK(cudaMalloc(&dinv, inv.size() * 4));
  CK(cudaMemcpy(dinv, inv.data(), inv.size() * 4, cudaMemcpyHostToDevice));
  const int64_t nflush = 256 << 20;
  float* fl;
  CK(cudaMalloc(&fl, nflush * 4));
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  auto time = [&](const char* name, auto&& f) {
    for (int flush = 0; flush < 2; ++flush) {
      float tot = 0, best = 1e9;
      const int iters = 30;
      for (int it = 0; it < iters + 3; ++it) {
        if (flush) flush_kernel<<<blocks_for(nflush, 256), 256>>>(fl, nflush);
        cudaEventRecord(e0);
        f(it & 1);
        cudaEventRecord(e1);
        CK(cudaEventSynchronize(e1));
        float ms;
        cudaEventElapsedTime(&ms, e0, e1);
        if (it >= 3) { tot += ms; best = std::min(best, ms); }
      }
      printf("%-28s %s: mean %.1f us, best %.1f us\n", name, flush ? "cold L2" : "warm   ",
             tot / iters * 1000, best * 1000);
    }
  };
  const int64_t half = sh.rot / 2, rotated = sh.heads + sh.groups, kg = half / 8;
  time("orig", [&](bool inv_) { launch_ref(rope_kernel_orig<bf16>, q, dinv, sh, inv_); });
  time("launch_rope (new)", [&](bool inv_) {
    launch_rope(q, DType::kBF16, tokens, sh.b, sh.heads, sh.groups, sh.d, sh.rot, dinv, inv_, 0);
  });
#define VARIANT(L, U)                                                                       \
  time("vec8 lanes=" #L " unroll=" #U, [&](bool inv_) {                                     \
    const int64_t units = tokens * L * kg;                                                  \
    rope_vec8_kernel<bf16, L, U><<<blocks_for(units, 256), 256>>>(                          \
        q, dinv, (uint32_t)units, (uint32_t)kg, (uint32_t)sh.b, (int)rotated, row, (int)sh.d, \
        (int)half, inv_);                                                                   \
  });
  VARIANT(1, 4) VARIANT(2, 2) VARIANT(2, 4) VARIANT(4, 1) VARIANT(4, 2) VARIANT(4, 5)
  VARIANT(8, 1) VARIANT(8, 5) VARIANT(5, 4) VARIANT(10, 2) VARIANT(20, 1) VARIANT(40, 1)
  CK(cudaGetLastError());
  return 0;
}
