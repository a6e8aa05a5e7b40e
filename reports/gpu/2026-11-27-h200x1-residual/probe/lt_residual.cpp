// Probe: cuBLASLt row-major C(m,n) = A(m,k)·W(n,k)^T + bias [+ R] (bf16), as LtGemm lays it out.
// For each shape: the heuristic's candidates with beta 0 (D only) and with beta 1 (C = R != D),
// each candidate's reduction scheme, status and median time; also with the reduction mask NONE.
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdio>
#include <vector>
#define CK(x)                                                         \
  do {                                                                \
    auto e = (x);                                                     \
    if (e != 0) {                                                     \
      std::printf("error %d at %s:%d\n", (int)e, __FILE__, __LINE__); \
    }                                                                 \
  } while (0)
struct Sh {
  const char* name;
  int m, n, k;
};
int main() {
  cublasLtHandle_t h;
  CK(cublasLtCreate(&h));
  size_t ws_bytes = 32u << 20;
  void* ws;
  CK(cudaMalloc(&ws, ws_bytes));
  Sh shapes[] = {{"small", 64, 96, 48},
                 {"mid", 300, 200, 72},
                 {"proj", 8192, 2048, 2048},
                 {"fc2", 8192, 2048, 8192},
                 {"llama-fc2", 8192, 2048, 8192}};
  for (const Sh& s : shapes) {
    void *a, *w, *bias, *r, *d;
    CK(cudaMalloc(&a, (size_t)s.m * s.k * 2));
    CK(cudaMalloc(&w, (size_t)s.n * s.k * 2));
    CK(cudaMalloc(&bias, (size_t)s.n * 2));
    CK(cudaMalloc(&r, (size_t)s.m * s.n * 2));
    CK(cudaMalloc(&d, (size_t)s.m * s.n * 2));
    CK(cudaMemset(a, 0, (size_t)s.m * s.k * 2));
    CK(cudaMemset(w, 0, (size_t)s.n * s.k * 2));
    CK(cudaMemset(bias, 0, s.n * 2));
    CK(cudaMemset(r, 0, (size_t)s.m * s.n * 2));
    for (int mode = 0; mode < 3;
         ++mode) {  // 0: beta 0; 1: beta 1, C = R; 2: beta 1, reduction NONE
      cublasLtMatmulDesc_t desc;
      CK(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
      cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
      CK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
      CK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
      const bool use_bias = s.name[0] != 'l';
      cublasLtEpilogue_t epi = use_bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
      CK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
      if (use_bias) {
        int32_t bt = CUDA_R_16BF;
        CK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt,
                                          sizeof bt));
        CK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                          sizeof bias));
      }
      cublasLtMatrixLayout_t la, lb, lc;
      CK(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, s.k, s.n, s.k));
      CK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, s.k, s.m, s.k));
      CK(cublasLtMatrixLayoutCreate(&lc, CUDA_R_16BF, s.n, s.m, s.n));
      cublasLtMatmulPreference_t pref;
      CK(cublasLtMatmulPreferenceCreate(&pref));
      uint64_t wsb = ws_bytes;
      CK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb,
                                              sizeof wsb));
      if (mode == 2) {
        uint32_t mask = CUBLASLT_REDUCTION_SCHEME_NONE;
        CK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
                                                &mask, sizeof mask));
      }
      cublasLtMatmulHeuristicResult_t res[8];
      int found = 0;
      CK(cublasLtMatmulAlgoGetHeuristic(h, desc, la, lb, lc, lc, pref, 8, res, &found));
      const float alpha = 1.0f, beta = mode ? 1.0f : 0.0f;
      void* cin = mode ? r : d;
      for (int i = 0; i < found; ++i) {
        int red = -1, splitk = -1, tile = -1, id = -1;
        size_t sz;
        cublasLtMatmulAlgoConfigGetAttribute(&res[i].algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME,
                                             &red, sizeof red, &sz);
        cublasLtMatmulAlgoConfigGetAttribute(&res[i].algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splitk,
                                             sizeof splitk, &sz);
        cublasLtMatmulAlgoConfigGetAttribute(&res[i].algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile,
                                             sizeof tile, &sz);
        cublasLtMatmulAlgoConfigGetAttribute(&res[i].algo, CUBLASLT_ALGO_CONFIG_ID, &id, sizeof id,
                                             &sz);
        cudaEvent_t e0, e1;
        cudaEventCreate(&e0);
        cudaEventCreate(&e1);
        std::vector<float> t;
        int st = 0;
        for (int rep = 0; rep < 8; ++rep) {
          cudaEventRecord(e0);
          st = cublasLtMatmul(h, desc, &alpha, w, la, a, lb, &beta, cin, lc, d, lc, &res[i].algo,
                              ws, ws_bytes, 0);
          cudaEventRecord(e1);
          cudaEventSynchronize(e1);
          float ms;
          cudaEventElapsedTime(&ms, e0, e1);
          if (rep > 1) t.push_back(ms);
          if (st) break;
        }
        std::sort(t.begin(), t.end());
        std::printf(
            "%-9s mode %d cand %d algo %d tile %d splitk %d red %d status %d median %.4f ms\n",
            s.name, mode, i, id, tile, splitk, red, st, t.empty() ? -1.0 : t[t.size() / 2]);
      }
      cudaGetLastError();
      cublasLtMatmulPreferenceDestroy(pref);
      cublasLtMatrixLayoutDestroy(la);
      cublasLtMatrixLayoutDestroy(lb);
      cublasLtMatrixLayoutDestroy(lc);
      cublasLtMatmulDescDestroy(desc);
    }
    cudaFree(a);
    cudaFree(w);
    cudaFree(bias);
    cudaFree(r);
    cudaFree(d);
  }
  return 0;
}
