// Standalone check/bench: old (HEAD) vs new layernorm backward. Not part of the repo.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "exec/cuda/kernels.hpp"

using mplan::exec::DType;
#define DECL_NS(NS)                                                                        \
  namespace mplan::exec::NS {                                                              \
  size_t layernorm_backward_scratch_bytes(int64_t rows, int64_t h);                        \
  void launch_layernorm_backward(const void*, const void*, const void*, DType, const float*, \
                                 const float*, int64_t, int64_t, void*, float*, float*, void*, \
                                 cudaStream_t);                                            \
  void launch_layernorm_backward_add(const void*, const void*, const void*, DType,          \
                                     const float*, const float*, int64_t, int64_t, void*,   \
                                     float*, float*, void*, cudaStream_t);                  \
  }
DECL_NS(cuda_old)
DECL_NS(cuda_v1)
DECL_NS(cuda_NP)
struct Ver {
  const char* name;
  size_t (*scratch)(int64_t, int64_t);
  void (*bwd)(const void*, const void*, const void*, DType, const float*, const float*, int64_t,
              int64_t, void*, float*, float*, void*, cudaStream_t);
  void (*bwd_add)(const void*, const void*, const void*, DType, const float*, const float*,
                  int64_t, int64_t, void*, float*, float*, void*, cudaStream_t);
};
#define VER(NAME, NS)                                                                  \
  Ver {                                                                                \
    NAME, &mplan::exec::NS::layernorm_backward_scratch_bytes,                          \
        &mplan::exec::NS::launch_layernorm_backward, &mplan::exec::NS::launch_layernorm_backward_add \
  }
static std::vector<Ver> g_vers;
namespace nw = mplan::exec::cuda;

#define CK(x)                                                                   \
  do {                                                                          \
    cudaError_t e = (x);                                                        \
    if (e != cudaSuccess) {                                                     \
      printf("CUDA error %s at %s:%d\n", cudaGetErrorString(e), __FILE__, __LINE__); \
      exit(1);                                                                  \
    }                                                                           \
  } while (0)

__device__ float hash_u(uint64_t seed, uint64_t i) {
  uint64_t z = seed * 0x9E3779B97F4A7C15ull + i * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return (z >> 40) * (1.0f / 16777216.0f);
}
__global__ void fill_k(void* p, int bf, int64_t n, uint64_t seed, float lo, float hi) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    float v = lo + (hi - lo) * hash_u(seed, i);
    if (bf) static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(v);
    else static_cast<float*>(p)[i] = v;
  }
}
static void fill(void* p, bool bf, int64_t n, uint64_t seed, float lo, float hi) {
  fill_k<<<1024, 256>>>(p, bf, n, seed, lo, hi);
  CK(cudaGetLastError());
}


struct Bufs {
  int64_t rows, h;
  bool bf;
  size_t es;
  int nv;
  char *dy, *x, *gamma, *beta, *y, *res0;
  float *mean, *rstd;
  std::vector<char*> dxv;
  std::vector<float*> dgv, dbv;
  std::vector<void*> scr;
  Bufs(int64_t r, int64_t hh, bool b, int off) : rows(r), h(hh), bf(b), es(b ? 2 : 4) {
    nv = (int)g_vers.size();
    size_t n = r * hh + 64, bytes = n * es;
    auto al = [&](size_t by) { void* p; CK(cudaMalloc(&p, by)); return (char*)p; };
    dy = al(bytes) + off * es; x = al(bytes) + off * es; gamma = al(hh * es + 64) + off * es;
    beta = al(hh * es + 64); y = al(bytes); res0 = al(bytes) + off * es;
    mean = (float*)al(r * 4); rstd = (float*)al(r * 4);
    for (auto& v : g_vers) {
      dxv.push_back(al(bytes) + off * es);
      dgv.push_back((float*)al(hh * 4)); dbv.push_back((float*)al(hh * 4));
      scr.push_back(al(v.scratch(r, hh)));
    }
    fill(dy, bf, r * hh, 1, -1, 1); fill(x, bf, r * hh, 2, -2, 3);
    fill(gamma, bf, hh, 3, 0.5, 1.5); fill(beta, bf, hh, 4, -1, 1);
    fill(res0, bf, r * hh, 5, -1, 1);
    nw::launch_layernorm_forward(x, gamma, beta, bf ? DType::kBF16 : DType::kF32, r, hh, 1e-5f, y,
                                 mean, rstd, 0);
    CK(cudaDeviceSynchronize());
  }
  DType t() const { return bf ? DType::kBF16 : DType::kF32; }
  void run(int v, bool resid) {
    auto& V = g_vers[v];
    (resid ? V.bwd_add : V.bwd)(dy, x, gamma, t(), mean, rstd, rows, h, dxv[v], dgv[v], dbv[v],
                                scr[v], 0);
  }
  void reset_dx() {
    for (auto p : dxv) CK(cudaMemcpy(p, res0, rows * h * es, cudaMemcpyDeviceToDevice));
  }
};

static int g_fail = 0;
static bool cmp(const char* what, const void* a, const void* b, size_t bytes) {
  std::vector<char> ha(bytes), hb(bytes);
  CK(cudaMemcpy(ha.data(), a, bytes, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(hb.data(), b, bytes, cudaMemcpyDeviceToHost));
  if (memcmp(ha.data(), hb.data(), bytes) == 0) return true;
  size_t first = 0;
  while (ha[first] == hb[first]) ++first;
  printf("    MISMATCH %s at byte %zu of %zu\n", what, first, bytes);
  return false;
}

static void check(int64_t rows, int64_t h, bool bf, bool resid, int off = 0) {
  Bufs b(rows, h, bf, off);
  std::string res;
  bool all = true;
  for (int v = 1; v < b.nv; ++v) {
    bool ok = true;
    for (int rep = 0; rep < 2; ++rep) {
      b.reset_dx();
      for (int u : {0, v}) {
        CK(cudaMemset(b.dgv[u], 0, h * 4));
        CK(cudaMemset(b.dbv[u], 0, h * 4));
      }
      b.run(0, resid);
      b.run(v, resid);
      CK(cudaDeviceSynchronize());
      ok &= cmp("dx", b.dxv[0], b.dxv[v], rows * h * b.es);
      ok &= cmp("dgamma", b.dgv[0], b.dgv[v], h * 4);
      ok &= cmp("dbeta", b.dbv[0], b.dbv[v], h * 4);
    }
    res += std::string(" ") + g_vers[v].name + (ok ? ":same" : ":DIFFER");
    all &= ok;
  }
  std::vector<float> dg(h);
  CK(cudaMemcpy(dg.data(), b.dgv[0], h * 4, cudaMemcpyDeviceToHost));
  double s = 0; bool fin = true;
  for (float v : dg) { s += std::fabs(v); fin &= std::isfinite(v); }
  printf("check rows=%6ld h=%6ld %s resid=%d off=%d :%s (|dg|=%.3g%s)\n", (long)rows, (long)h,
         bf ? "bf16" : "f32 ", resid, off, res.c_str(), s, fin ? "" : " NONFINITE");
  if (!all || !fin || s == 0) ++g_fail;
}

static void bench(int64_t rows, int64_t h, bool bf, bool resid, int reps) {
  Bufs b(rows, h, bf, 0);
  b.reset_dx();
  void* flush; size_t fl = 256ull << 20; CK(cudaMalloc(&flush, fl));
  cudaEvent_t e0, e1, e2; CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1)); CK(cudaEventCreate(&e2));
  std::vector<std::vector<float>> t(b.nv), tf(b.nv);
  for (int w = 0; w < 3; ++w) for (int v = 0; v < b.nv; ++v) b.run(v, resid);
  const int64_t parts = std::max<int64_t>(1, std::min<int64_t>(512, (rows + 15) / 16));
  for (int r = 0; r < reps; ++r) {
    for (int v = 0; v < b.nv; ++v) {
      CK(cudaMemsetAsync(flush, r & 0xff, fl, 0));
      CK(cudaEventRecord(e0, 0));
      b.run(v, resid);
      CK(cudaEventRecord(e1, 0));
      // the finalize again, hot (as in the call): its share of the total
      nw::launch_column_partials_finalize((float*)b.scr[v], parts, h, b.dgv[v], 0);
      nw::launch_column_partials_finalize((float*)b.scr[v] + parts * h, parts, h, b.dbv[v], 0);
      CK(cudaEventRecord(e2, 0));
      CK(cudaEventSynchronize(e2));
      float ms; CK(cudaEventElapsedTime(&ms, e0, e1)); t[v].push_back(ms * 1000);
      CK(cudaEventElapsedTime(&ms, e1, e2)); tf[v].push_back(ms * 1000);
    }
  }
  auto med = [](std::vector<float> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2]; };
  const double bytes = (resid ? 4.0 : 3.0) * rows * h * b.es;
  for (int v = 0; v < b.nv; ++v) {
    const double m = med(t[v]), f = med(tf[v]);
    printf("bench rows=%ld h=%ld %s resid=%d %-4s: total %6.1f us (min %6.1f), hot finalize %4.1f "
           "-> kernel ~%6.1f us, %.2f TB/s\n", (long)rows, (long)h, bf ? "bf16" : "f32", resid,
           g_vers[v].name, m, *std::min_element(t[v].begin(), t[v].end()), f, m - f,
           bytes / ((m - f) * 1e-6) / 1e12);
  }
  CK(cudaFree(flush));
}

int main(int argc, char** argv) {
  g_vers = {VER("old", cuda_old), VER("new", cuda)};
  cudaDeviceProp p; CK(cudaGetDeviceProperties(&p, 0));
  printf("device %s, %d SMs\n", p.name, p.multiProcessorCount);
  if (argc > 1 && !strcmp(argv[1], "small")) {
    check(17, 2048, true, true); check(300, 2048, true, false); check(3, 512, true, true);
    check(41, 512, true, false); check(1, 2048, true, false);
    printf("checks: %d failed\n", g_fail);
    return g_fail ? 1 : 0;
  }
  const bool only_bench = argc > 1 && !strcmp(argv[1], "bench");
  if (!only_bench) {
    check(8192, 2048, true, false); check(8192, 2048, true, true); check(8193, 2048, true, true);
    check(1000, 2048, true, false); check(17, 2048, true, true); check(1, 2048, true, true);
    check(3, 512, true, true); check(37, 256, true, false); check(100, 768, true, true);
    check(50, 1024, true, false); check(64, 4096, true, true); check(9, 8192, true, false);
    check(5, 16384, true, true); check(33, 1000, true, true); check(40, 520, true, false);
    check(7, 100, true, false); check(16, 2048, true, false, 1); check(2, 8, true, true);
    check(9000, 2040, true, true); check(20000, 512, true, false);
    check(8192, 1024, false, true); check(300, 2048, false, false); check(20, 512, false, true);
    check(20, 200, false, false); check(11, 4096, false, true); check(3, 8192, false, false);
    check(13, 40, false, true); check(4097, 1024, false, false); check(1, 8, false, true);
    check(7, 100, false, false); check(16, 2048, false, false, 1); check(9001, 1000, false, true);
    printf("checks: %d failed\n", g_fail);
  }
  const int reps = only_bench && argc > 2 ? atoi(argv[2]) : 25;
  bench(8192, 2048, true, true, reps);
  bench(8192, 2048, true, false, reps);
  if (!only_bench) {
    bench(8192, 1024, true, true, reps);
    bench(8192, 768, true, true, reps);
    bench(8192, 512, true, true, reps);
    bench(8192, 4096, true, true, reps);
    bench(8192, 1024, false, true, reps);
    bench(8192, 2048, false, true, reps);
    bench(32768, 2048, true, true, 10);
  }
  return g_fail ? 1 : 0;
}
