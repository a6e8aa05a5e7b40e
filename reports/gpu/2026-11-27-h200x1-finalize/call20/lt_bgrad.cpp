// Throwaway: cuBLASLt BGRADB (wgrad + bias grad) and DGELU_BGRAD (dgrad + dgelu + bias grad) against the plain epilogues.
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cstdio>
#include <vector>
#include <algorithm>
#define CK(x) do { auto e_ = (x); if ((int)e_ != 0) { printf("ERR %s:%d %d\n", __FILE__, __LINE__, (int)e_); } } while (0)
static cublasLtHandle_t h; static void* ws; static size_t wsb = 64 << 20;
static cudaEvent_t e0, e1;
struct G { cublasLtMatmulDesc_t d; cublasLtMatrixLayout_t la, lb, lc, ld; cublasLtMatmulAlgo_t algo; bool ok; };
// ours: C(m,n) = op(A) op(B) row-major; cublas A = our B, cublas B = our A.
G plan(bool ta, bool tb, long m, long n, long k, cudaDataType_t ct, cudaDataType_t dt, cublasLtEpilogue_t epi, void* bias, int bias_t, void* aux) {
  G g{}; CK(cublasLtMatmulDescCreate(&g.d, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  cublasOperation_t oa = tb ? CUBLAS_OP_T : CUBLAS_OP_N, ob = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
  CK(cublasLtMatmulDescSetAttribute(g.d, CUBLASLT_MATMUL_DESC_TRANSA, &oa, sizeof oa));
  CK(cublasLtMatmulDescSetAttribute(g.d, CUBLASLT_MATMUL_DESC_TRANSB, &ob, sizeof ob));
  if (tb) CK(cublasLtMatrixLayoutCreate(&g.la, CUDA_R_16BF, k, n, k)); else CK(cublasLtMatrixLayoutCreate(&g.la, CUDA_R_16BF, n, k, n));
  if (ta) CK(cublasLtMatrixLayoutCreate(&g.lb, CUDA_R_16BF, m, k, m)); else CK(cublasLtMatrixLayoutCreate(&g.lb, CUDA_R_16BF, k, m, k));
  CK(cublasLtMatrixLayoutCreate(&g.lc, ct, n, m, n));
  CK(cublasLtMatrixLayoutCreate(&g.ld, dt, n, m, n));
  CK(cublasLtMatmulDescSetAttribute(g.d, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
  if (bias) { CK(cublasLtMatmulDescSetAttribute(g.d, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
    if (bias_t >= 0) { int32_t bt = bias_t; CK(cublasLtMatmulDescSetAttribute(g.d, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof bt)); } }
  if (aux) { long ald = n; CK(cublasLtMatmulDescSetAttribute(g.d, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof aux));
    CK(cublasLtMatmulDescSetAttribute(g.d, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ald, sizeof ald)); }
  cublasLtMatmulPreference_t p; CK(cublasLtMatmulPreferenceCreate(&p));
  uint64_t w = wsb; CK(cublasLtMatmulPreferenceSetAttribute(p, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &w, sizeof w));
  cublasLtMatmulHeuristicResult_t r{}; int found = 0;
  auto st = cublasLtMatmulAlgoGetHeuristic(h, g.d, g.la, g.lb, g.lc, g.ld, p, 1, &r, &found);
  g.ok = st == CUBLAS_STATUS_SUCCESS && found > 0; g.algo = r.algo;
  if (!g.ok) printf("  (no algorithm: status %d found %d)\n", (int)st, found);
  return g;
}
float run(G& g, void* A, void* B, void* C, float beta) {
  float alpha = 1.f; std::vector<float> ms;
  for (int i = 0; i < 23; ++i) {
    cudaEventRecord(e0);
    CK(cublasLtMatmul(h, g.d, &alpha, B, g.la, A, g.lb, &beta, C, g.lc, C, g.ld, &g.algo, ws, wsb, 0));
    cudaEventRecord(e1); cudaEventSynchronize(e1); float t; cudaEventElapsedTime(&t, e0, e1); if (i >= 3) ms.push_back(t * 1000);
  }
  std::sort(ms.begin(), ms.end()); return ms[ms.size() / 2];
}
int main() {
  CK(cublasLtCreate(&h)); cudaMalloc(&ws, wsb); cudaEventCreate(&e0); cudaEventCreate(&e1);
  const long T = 8192;
  void *dy, *x, *cf, *bias, *aux, *cb;
  cudaMalloc(&dy, T * 8192 * 2); cudaMalloc(&x, T * 8192 * 2); cudaMalloc(&cf, 8192L * 8192 * 4); cudaMalloc(&bias, 8192 * 4);
  cudaMalloc(&aux, T * 8192 * 2); cudaMalloc(&cb, T * 8192 * 2);
  // random-ish bf16 data
  std::vector<__nv_bfloat16> hbuf(T * 8192); unsigned s = 1; for (auto& v : hbuf) { s = s * 1664525u + 1013904223u; v = __float2bfloat16(((s >> 9) & 0xffff) / 65536.0f - 0.5f); }
  cudaMemcpy(dy, hbuf.data(), T * 8192 * 2, cudaMemcpyHostToDevice); cudaMemcpy(x, hbuf.data(), T * 8192 * 2, cudaMemcpyHostToDevice);
  cudaMemcpy(aux, hbuf.data(), T * 8192 * 2, cudaMemcpyHostToDevice); cudaMemset(cf, 0, 8192L * 8192 * 4);
  struct W { const char* name; long N, K; } ws_[] = {{"fc1_wgrad", 8192, 2048}, {"qkv_wgrad", 6144, 2048}, {"fc2_wgrad", 2048, 8192}, {"proj_wgrad", 2048, 2048}};
  for (auto& w : ws_) {
    for (int rep = 0; rep < 2; ++rep) {
      G p0 = plan(true, false, w.N, w.K, T, CUDA_R_32F, CUDA_R_32F, CUBLASLT_EPILOGUE_DEFAULT, nullptr, -1, nullptr);
      float t0 = run(p0, dy, x, cf, 1.f);
      G p1 = plan(true, false, w.N, w.K, T, CUDA_R_32F, CUDA_R_32F, CUBLASLT_EPILOGUE_BGRADB, bias, CUDA_R_32F, nullptr);
      float t1 = p1.ok ? run(p1, dy, x, cf, 1.f) : -1;
      G p2 = plan(true, false, w.N, w.K, T, CUDA_R_32F, CUDA_R_32F, CUBLASLT_EPILOGUE_BGRADB, bias, CUDA_R_16BF, nullptr);
      float t2 = p2.ok ? run(p2, dy, x, cf, 1.f) : -1;
      printf("%-11s m=%ld n=%ld k=%ld  plain %.1f us  BGRADB(f32 bias) %.1f us  BGRADB(bf16 bias) %.1f us\n", w.name, w.N, w.K, T, t0, t1, t2);
    }
  }
  // check BGRADB's bias = column sums of dy (first few)
  {
    G p1 = plan(true, false, 2048, 2048, T, CUDA_R_32F, CUDA_R_32F, CUBLASLT_EPILOGUE_BGRADB, bias, CUDA_R_32F, nullptr);
    if (p1.ok) { run(p1, dy, x, cf, 1.f); std::vector<float> hb(4); cudaMemcpy(hb.data(), bias, 16, cudaMemcpyDeviceToHost);
      for (int c = 0; c < 4; ++c) { double ref = 0; for (long t = 0; t < T; ++t) ref += __bfloat162float(hbuf[t * 2048 + c]); printf("bias[%d] %.4f ref %.4f\n", c, hb[c], ref); } }
  }
  for (int rep = 0; rep < 2; ++rep) {
    G p0 = plan(false, false, T, 8192, 2048, CUDA_R_16BF, CUDA_R_16BF, CUBLASLT_EPILOGUE_DGELU, nullptr, -1, aux);
    float t0 = run(p0, dy, x, cb, 0.f);
    G p1 = plan(false, false, T, 8192, 2048, CUDA_R_16BF, CUDA_R_16BF, CUBLASLT_EPILOGUE_DGELU_BGRAD, bias, CUDA_R_32F, aux);
    float t1 = p1.ok ? run(p1, dy, x, cb, 0.f) : -1;
    G p2 = plan(false, false, T, 8192, 2048, CUDA_R_16BF, CUDA_R_16BF, CUBLASLT_EPILOGUE_DGELU_BGRAD, bias, CUDA_R_16BF, aux);
    float t2 = p2.ok ? run(p2, dy, x, cb, 0.f) : -1;
    printf("fc2_dgrad   DGELU %.1f us  DGELU_BGRAD(f32 bias) %.1f us  (bf16 bias) %.1f us\n", t0, t1, t2);
  }
  return 0;
}
