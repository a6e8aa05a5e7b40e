// Throwaway: how much faster than cuBLASLt's first heuristic choice is the best of its top candidates, per GEMM of the models.
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cstdio>
#include <vector>
#include <algorithm>
#define CK(x) do { auto e_ = (x); if ((int)e_ != 0) { printf("ERR %s:%d %d\n", __FILE__, __LINE__, (int)e_); } } while (0)
static cublasLtHandle_t h; static void* ws; static size_t wsb = 64 << 20; static cudaEvent_t e0, e1;
struct Case { const char* name; bool ta, tb; long m, n, k; bool f32c; cublasLtEpilogue_t epi; };
int main() {
  CK(cublasLtCreate(&h)); cudaMalloc(&ws, wsb); cudaEventCreate(&e0); cudaEventCreate(&e1);
  const size_t big = 8192L * 128256 * 2;  // largest operand
  void *A, *B, *C, *bias, *aux;
  cudaMalloc(&A, big); cudaMalloc(&B, big); cudaMalloc(&C, 2 * big); cudaMalloc(&bias, 1 << 20); cudaMalloc(&aux, big);
  { std::vector<__nv_bfloat16> hb(1 << 24); unsigned s = 7; for (auto& v : hb) { s = s * 1664525u + 1013904223u; v = __float2bfloat16(((s >> 9) & 0xffff) / 65536.0f - 0.5f); }
    for (size_t off = 0; off < big; off += hb.size() * 2) { size_t n = std::min(hb.size() * 2, big - off); cudaMemcpy((char*)A + off, hb.data(), n, cudaMemcpyHostToDevice); cudaMemcpy((char*)B + off, hb.data(), n, cudaMemcpyHostToDevice); cudaMemcpy((char*)aux + off, hb.data(), n, cudaMemcpyHostToDevice); }
    cudaMemset(bias, 0, 1 << 20); cudaMemset(C, 0, 2 * big); }
  const long T = 8192;
  Case cs[] = {
    {"gpt fc1 (bias+gelu aux)", false, true, T, 8192, 2048, false, CUBLASLT_EPILOGUE_GELU_AUX_BIAS},
    {"gpt fc1 shape, plain", false, true, T, 8192, 2048, false, CUBLASLT_EPILOGUE_DEFAULT},
    {"gpt fc2 (bias)", false, true, T, 2048, 8192, false, CUBLASLT_EPILOGUE_BIAS},
    {"gpt fc2_dgrad (dgelu)", false, false, T, 8192, 2048, false, CUBLASLT_EPILOGUE_DGELU},
    {"gpt fc2_dgrad shape, plain", false, false, T, 8192, 2048, false, CUBLASLT_EPILOGUE_DEFAULT},
    {"gpt fc1_dgrad", false, false, T, 2048, 8192, false, CUBLASLT_EPILOGUE_DEFAULT},
    {"gpt fc1_wgrad", true, false, 8192, 2048, T, true, CUBLASLT_EPILOGUE_DEFAULT},
    {"gpt fc2_wgrad", true, false, 2048, 8192, T, true, CUBLASLT_EPILOGUE_DEFAULT},
    {"gpt qkv (bias)", false, true, T, 6144, 2048, false, CUBLASLT_EPILOGUE_BIAS},
    {"gpt qkv_dgrad", false, false, T, 2048, 6144, false, CUBLASLT_EPILOGUE_DEFAULT},
    {"gpt qkv_wgrad", true, false, 6144, 2048, T, true, CUBLASLT_EPILOGUE_DEFAULT},
    {"gpt proj (bias)", false, true, T, 2048, 2048, false, CUBLASLT_EPILOGUE_BIAS},
    {"llama fc1", false, true, T, 16384, 2048, false, CUBLASLT_EPILOGUE_DEFAULT},
    {"llama fc1_dgrad", false, false, T, 2048, 16384, false, CUBLASLT_EPILOGUE_DEFAULT},
    {"llama fc1_wgrad", true, false, 16384, 2048, T, true, CUBLASLT_EPILOGUE_DEFAULT},
    {"llama qkv", false, true, T, 3072, 2048, false, CUBLASLT_EPILOGUE_DEFAULT},
    {"llama logits", false, true, T, 128256, 2048, false, CUBLASLT_EPILOGUE_DEFAULT},
    {"llama logits_dgrad", false, false, T, 2048, 128256, false, CUBLASLT_EPILOGUE_DEFAULT},
    {"llama logits_wgrad", true, false, 128256, 2048, T, true, CUBLASLT_EPILOGUE_DEFAULT},
  };
  for (auto& c : cs) {
    cublasLtMatmulDesc_t d; CK(cublasLtMatmulDescCreate(&d, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasOperation_t oa = c.tb ? CUBLAS_OP_T : CUBLAS_OP_N, ob = c.ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    CK(cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_TRANSA, &oa, sizeof oa));
    CK(cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_TRANSB, &ob, sizeof ob));
    cublasLtMatrixLayout_t la, lb, lc;
    if (c.tb) CK(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, c.k, c.n, c.k)); else CK(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, c.n, c.k, c.n));
    if (c.ta) CK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, c.m, c.k, c.m)); else CK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, c.k, c.m, c.k));
    CK(cublasLtMatrixLayoutCreate(&lc, c.f32c ? CUDA_R_32F : CUDA_R_16BF, c.n, c.m, c.n));
    CK(cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_EPILOGUE, &c.epi, sizeof c.epi));
    if (c.epi == CUBLASLT_EPILOGUE_BIAS || c.epi == CUBLASLT_EPILOGUE_GELU_AUX_BIAS) {
      int32_t bt = CUDA_R_16BF; CK(cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof bt));
      CK(cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias)); }
    if (c.epi == CUBLASLT_EPILOGUE_GELU_AUX_BIAS || c.epi == CUBLASLT_EPILOGUE_DGELU) { long ald = c.n;
      CK(cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof aux));
      CK(cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ald, sizeof ald)); }
    cublasLtMatmulPreference_t p; CK(cublasLtMatmulPreferenceCreate(&p));
    uint64_t w = wsb; CK(cublasLtMatmulPreferenceSetAttribute(p, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &w, sizeof w));
    cublasLtMatmulHeuristicResult_t r[32]; int found = 0;
    CK(cublasLtMatmulAlgoGetHeuristic(h, d, la, lb, lc, lc, p, 32, r, &found));
    const float alpha = 1.f, beta = c.f32c ? 1.f : 0.f;
    std::vector<std::pair<float, int>> res;
    const double fl = 2.0 * c.m * c.n * c.k;
    for (int i = 0; i < found; ++i) {
      if (r[i].state != CUBLAS_STATUS_SUCCESS) continue;
      std::vector<float> ms; bool bad = false;
      for (int rep = 0; rep < 9 && !bad; ++rep) {
        cudaEventRecord(e0);
        if (cublasLtMatmul(h, d, &alpha, B, la, A, lb, &beta, C, lc, C, lc, &r[i].algo, ws, wsb, 0) != CUBLAS_STATUS_SUCCESS) bad = true;
        cudaEventRecord(e1); cudaEventSynchronize(e1); float t; cudaEventElapsedTime(&t, e0, e1); if (rep >= 2) ms.push_back(t * 1000);
      }
      if (bad || cudaGetLastError() != cudaSuccess) continue;
      std::sort(ms.begin(), ms.end()); res.push_back({ms[ms.size() / 2], i});
    }
    float first = -1; for (auto& x : res) if (x.second == 0) first = x.first;
    std::sort(res.begin(), res.end());
    printf("%-28s m=%-6ld n=%-6ld k=%-6ld cands %2d  heuristic#0 %8.1f us (%4.0f TF)  best #%d %8.1f us (%4.0f TF)  ratio %.3f\n", c.name, c.m, c.n, c.k, found, first, fl / first / 1e6, res.empty() ? -1 : res[0].second, res.empty() ? -1.f : res[0].first, res.empty() ? 0 : fl / res[0].first / 1e6, res.empty() ? 0 : res[0].first / first);
    fflush(stdout);
  }
  return 0;
}
