// mplan_gemm_sweep: cuBLASLt's candidate algorithms for a model's GEMM shapes, each timed under
// sustained load (the GPU held busy first, then each candidate run back to back for a fixed
// time), so that the comparison is made at the clocks a training step runs at (a power-capped
// GPU lowers its clock under long GEMM runs; a choice timed on a cool GPU may not be the best at
// the cap). Prints one line per (shape, candidate): its configuration (tile, stages, cluster,
// swizzle, split-k), the first call's time, the sustained time and the ratio to the heuristic's
// first choice (the executor's default). An experiment tool: nothing here changes the executor.
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "exec/cuda/gemm_lt.hpp"
#include "exec/cuda/kernels.hpp"

namespace {

#define CK(x)                                                                     \
  do {                                                                            \
    cudaError_t e_ = (x);                                                         \
    if (e_ != cudaSuccess) {                                                      \
      std::fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); \
      std::exit(1);                                                               \
    }                                                                             \
  } while (0)
#define CL(x)                                                                               \
  do {                                                                                      \
    cublasStatus_t s_ = (x);                                                                \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                                      \
      std::fprintf(stderr, "%s:%d cublasLt status %d\n", __FILE__, __LINE__, int(s_));       \
      std::exit(1);                                                                         \
    }                                                                                       \
  } while (0)

// A row-major GEMM C(m, n) = op(A)·op(B) + beta·C as the executor issues it (LtGemm's mapping:
// cuBLASLt's A is our B, its B our A, its D (n, m) column-major our C).
struct Shape {
  std::string name;
  bool trans_a, trans_b;
  int64_t m, n, k;
  bool beta_one;  // accumulate (weight gradients: f32 C) or add a residual (bf16 C)
  bool c_f32;
};

std::vector<Shape> model_shapes(const std::string& model) {
  // tokens of a micro-batch, hidden, MLP (fc1 out), fc2 in, attention out (q+k+v), vocabulary
  int64_t t = 8192, h = 2048, f1 = 16384, f2 = 8192, qkv = 3072, v = 128256;
  if (model == "gpt") f1 = 8192, f2 = 8192, qkv = 6144, v = 32000;
  struct Lin {
    const char* name;
    int64_t in, out;
    bool residual;
  };
  const Lin lins[] = {{"qkv", h, qkv, false},
                      {"proj", h, h, true},
                      {"fc1", h, f1, false},
                      {"fc2", f2, h, true},
                      {"logits", h, v, false}};
  std::vector<Shape> s;
  for (const Lin& l : lins) {
    s.push_back({std::string(l.name) + " fwd", false, true, t, l.out, l.in, l.residual, false});
    s.push_back({std::string(l.name) + " dgrad", false, false, t, l.in, l.out, false, false});
    s.push_back({std::string(l.name) + " wgrad", true, false, l.out, l.in, t, true, true});
  }
  return s;
}

template <class T>
T cfg(const cublasLtMatmulAlgo_t& a, cublasLtMatmulAlgoConfigAttributes_t attr) {
  T v{};
  size_t w = 0;
  if (cublasLtMatmulAlgoConfigGetAttribute(&a, attr, &v, sizeof(v), &w) != CUBLAS_STATUS_SUCCESS)
    return T{};
  return v;
}

using mplan::exec::cuda::describe_algo;

struct Op {
  cublasLtHandle_t lt = nullptr;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
  void *a = nullptr, *b = nullptr, *c = nullptr, *ws = nullptr;
  size_t ws_bytes = 0;
  float beta = 0.0f;
  cudaStream_t s = nullptr;
  bool run(const cublasLtMatmulAlgo_t& algo) const {
    const float alpha = 1.0f;
    return cublasLtMatmul(lt, desc, &alpha, b, la, a, lb, &beta, c, lc, c, lc, &algo, ws, ws_bytes,
                          s) == CUBLAS_STATUS_SUCCESS;
  }
};

double now_ms() {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Mean ms a call over back-to-back calls lasting about `ms` (after `warm` untimed calls).
double sustained_ms(const Op& op, const cublasLtMatmulAlgo_t& algo, double ms, double* first_ms,
                    cudaEvent_t e0, cudaEvent_t e1) {
  CK(cudaEventRecord(e0, op.s));
  if (!op.run(algo)) return -1;
  CK(cudaEventRecord(e1, op.s));
  CK(cudaEventSynchronize(e1));
  float f = 0;
  CK(cudaEventElapsedTime(&f, e0, e1));
  if (first_ms) *first_ms = f;
  const int reps = std::max(3, static_cast<int>(ms / std::max(0.01f, f)));
  for (int i = 0; i < 3; ++i) op.run(algo);
  CK(cudaEventRecord(e0, op.s));
  for (int i = 0; i < reps; ++i) op.run(algo);
  CK(cudaEventRecord(e1, op.s));
  CK(cudaEventSynchronize(e1));
  CK(cudaEventElapsedTime(&f, e0, e1));
  return f / reps;
}

}  // namespace

int main(int argc, char** argv) {
  std::string model = "llama", only;
  double ms = 250, heat_ms = 2000;
  int want = 16;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "mplan_gemm_sweep: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--model") {
      model = next();
    } else if (a == "--only") {
      only = next();
    } else if (a == "--ms") {
      ms = std::atof(next());
    } else if (a == "--heat-ms") {
      heat_ms = std::atof(next());
    } else if (a == "--candidates") {
      want = std::atoi(next());
    } else {
      std::printf(
          "usage: mplan_gemm_sweep [--model llama|gpt] [--only SUBSTRING] [--ms 250]\n"
          "                        [--heat-ms 2000] [--candidates 16]\n"
          "  Times cuBLASLt's candidate algorithms for the model's GEMMs (a micro-batch of 8192\n"
          "  tokens, bf16) under sustained load; prints each candidate's configuration and its\n"
          "  sustained time against the heuristic's first choice.\n");
      return a == "--help" || a == "-h" ? 0 : 2;
    }
  }
  if (model != "llama" && model != "gpt") {
    std::fprintf(stderr, "mplan_gemm_sweep: --model must be llama or gpt\n");
    return 2;
  }
  cudaStream_t s;
  CK(cudaStreamCreate(&s));
  cublasLtHandle_t lt;
  CL(cublasLtCreate(&lt));
  const size_t ws_bytes = 64ull << 20;
  void* ws;
  CK(cudaMalloc(&ws, ws_bytes));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  using mplan::exec::DType;
  const double t0 = now_ms();
  for (const Shape& sh : model_shapes(model)) {
    if (!only.empty() && sh.name.find(only) == std::string::npos) continue;
    void *a, *b, *c;
    const int64_t na = sh.m * sh.k, nb = sh.k * sh.n, nc = sh.m * sh.n;
    CK(cudaMalloc(&a, na * 2));
    CK(cudaMalloc(&b, nb * 2));
    CK(cudaMalloc(&c, nc * (sh.c_f32 ? 4 : 2)));
    mplan::exec::cuda::launch_fill_uniform(a, DType::kBF16, na, 1, -1.0f, 1.0f, s);
    mplan::exec::cuda::launch_fill_uniform(b, DType::kBF16, nb, 2, -0.05f, 0.05f, s);
    mplan::exec::cuda::launch_fill_uniform(c, sh.c_f32 ? DType::kF32 : DType::kBF16, nc, 3, -1.0f,
                                           1.0f, s);
    Op op;
    op.lt = lt, op.a = a, op.b = b, op.c = c, op.ws = ws, op.ws_bytes = ws_bytes, op.s = s;
    op.beta = sh.beta_one ? 1.0f : 0.0f;
    CL(cublasLtMatmulDescCreate(&op.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t ta = sh.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t tb = sh.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    CL(cublasLtMatmulDescSetAttribute(op.desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
    CL(cublasLtMatmulDescSetAttribute(op.desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
    if (sh.trans_b) {
      CL(cublasLtMatrixLayoutCreate(&op.la, CUDA_R_16BF, sh.k, sh.n, sh.k));
    } else {
      CL(cublasLtMatrixLayoutCreate(&op.la, CUDA_R_16BF, sh.n, sh.k, sh.n));
    }
    if (sh.trans_a) {
      CL(cublasLtMatrixLayoutCreate(&op.lb, CUDA_R_16BF, sh.m, sh.k, sh.m));
    } else {
      CL(cublasLtMatrixLayoutCreate(&op.lb, CUDA_R_16BF, sh.k, sh.m, sh.k));
    }
    CL(cublasLtMatrixLayoutCreate(&op.lc, sh.c_f32 ? CUDA_R_32F : CUDA_R_16BF, sh.n, sh.m, sh.n));
    cublasLtMatmulPreference_t pref;
    CL(cublasLtMatmulPreferenceCreate(&pref));
    const uint64_t wsb = ws_bytes;
    CL(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb,
                                            sizeof(wsb)));
    std::vector<cublasLtMatmulHeuristicResult_t> res(static_cast<size_t>(want));
    int found = 0;
    CL(cublasLtMatmulAlgoGetHeuristic(lt, op.desc, op.la, op.lb, op.lc, op.lc, pref, want,
                                      res.data(), &found));
    cublasLtMatmulPreferenceDestroy(pref);
    std::vector<cublasLtMatmulAlgo_t> cands;
    for (int i = 0; i < found; ++i)
      if (res[static_cast<size_t>(i)].state == CUBLAS_STATUS_SUCCESS)
        cands.push_back(res[static_cast<size_t>(i)].algo);
    // The first choice with other cluster shapes (when cuBLASLt accepts them).
    if (!cands.empty()) {
      const uint16_t shapes[] = {CUBLASLT_CLUSTER_SHAPE_1x1x1, CUBLASLT_CLUSTER_SHAPE_2x1x1,
                                 CUBLASLT_CLUSTER_SHAPE_1x2x1, CUBLASLT_CLUSTER_SHAPE_2x2x1,
                                 CUBLASLT_CLUSTER_SHAPE_4x1x1, CUBLASLT_CLUSTER_SHAPE_1x4x1};
      const uint16_t first = cfg<uint16_t>(cands[0], CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID);
      for (uint16_t cs : shapes) {
        if (cs == first) continue;
        cublasLtMatmulAlgo_t v = cands[0];
        if (cublasLtMatmulAlgoConfigSetAttribute(&v, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, &cs,
                                                 sizeof(cs)) != CUBLAS_STATUS_SUCCESS)
          continue;
        cublasLtMatmulHeuristicResult_t chk{};
        if (cublasLtMatmulAlgoCheck(lt, op.desc, op.la, op.lb, op.lc, op.lc, &v, &chk) !=
                CUBLAS_STATUS_SUCCESS ||
            chk.workspaceSize > ws_bytes)
          continue;
        cands.push_back(v);
      }
    }
    const double flop = 2.0 * sh.m * sh.n * sh.k;
    std::printf("== %s  m %lld n %lld k %lld%s  (%zu candidates, %d from the heuristic)\n",
                sh.name.c_str(), (long long)sh.m, (long long)sh.n, (long long)sh.k,
                sh.c_f32 ? "  f32 C +=" : (sh.beta_one ? "  + residual" : ""), cands.size(), found);
    if (cands.empty()) continue;
    // Heat: the first choice for heat_ms, so that every candidate runs at the sustained clock.
    sustained_ms(op, cands[0], heat_ms, nullptr, e0, e1);
    double base = 0;
    for (size_t i = 0; i <= cands.size(); ++i) {
      const size_t ci = i == cands.size() ? 0 : i;  // the first choice again at the end
      double first = 0;
      const double m = sustained_ms(op, cands[ci], ms, &first, e0, e1);
      if (m < 0) {
        std::printf("  [%2zu] %s  refused at run time\n", ci, describe_algo(cands[ci]).c_str());
        continue;
      }
      if (i == 0) base = m;
      std::printf("  [%2zu]%s %s  first %8.1f us  sustained %8.1f us  %6.1f TFLOP/s  %.4f  t %.1f s\n",
                  ci, i == cands.size() ? "*" : " ", describe_algo(cands[ci]).c_str(), first * 1e3,
                  m * 1e3, flop / (m * 1e9), m / base, (now_ms() - t0) / 1e3);
    }
    std::fflush(stdout);
    cublasLtMatrixLayoutDestroy(op.lc);
    cublasLtMatrixLayoutDestroy(op.lb);
    cublasLtMatrixLayoutDestroy(op.la);
    cublasLtMatmulDescDestroy(op.desc);
    CK(cudaFree(a));
    CK(cudaFree(b));
    CK(cudaFree(c));
  }
  return 0;
}
