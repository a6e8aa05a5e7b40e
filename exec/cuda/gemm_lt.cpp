// cuBLASLt plans and calls behind LtGemm (see gemm_lt.hpp for the row-major/column-major swap).
// Storage of each operand in column-major terms: our row-major X (r, c) is X^T (c, r) with
// leading dimension c. cuBLASLt's A is our B, its B our A, its D (n, m) with ld n is our C.
#include "exec/cuda/gemm_lt.hpp"

#include <cublas_api.h>

#include <algorithm>

#include "exec/cuda/cuda_check.hpp"
#include "exec/cuda/kernels.hpp"

namespace mplan::exec::cuda {

struct LtGemm::Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
  cublasLtMatmulAlgo_t algo{};
  ~Plan() {
    if (lc) cublasLtMatrixLayoutDestroy(lc);
    if (lb) cublasLtMatrixLayoutDestroy(lb);
    if (la) cublasLtMatrixLayoutDestroy(la);
    if (desc) cublasLtMatmulDescDestroy(desc);
  }
};

namespace {

cudaDataType_t cuda_type(DType t) {
  switch (t) {
    case DType::kF32:
      return CUDA_R_32F;
    case DType::kBF16:
      return CUDA_R_16BF;
    default:
      MPLAN_CHECK(false, "gemm: unsupported dtype ", to_string(t));
  }
  return CUDA_R_32F;
}

int alignment(const void* p) {
  if (p == nullptr) return 256;
  const auto v = reinterpret_cast<uintptr_t>(p);
  int a = 1;
  while (a < 256 && (v % static_cast<uintptr_t>(a * 2)) == 0) a *= 2;
  return a;
}

void set_desc(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr, const void* v,
              size_t bytes) {
  MPLAN_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(d, attr, v, bytes));
}

bool env_on(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && v[0] != '\0' && v[0] != '0';
}

}  // namespace

LtGemm::LtGemm(void* workspace, size_t workspace_bytes)
    : workspace_(workspace), workspace_bytes_(workspace_bytes) {
  MPLAN_CUBLAS_CHECK(cublasLtCreate(&handle_));
  fuse_epilogues_ = !env_on("MPLAN_NO_GEMM_EPILOGUE");
}

LtGemm::~LtGemm() {
  plans_.clear();
  if (handle_) cublasLtDestroy(handle_);
}

LtGemm::Plan* LtGemm::plan_for(const GemmArgs& g, const Tensor& a, const Tensor& b, const Tensor& c,
                               Epilogue epi, const void* bias, DType bias_t, const void* aux) {
  const Key key{g.trans_a,
                g.trans_b,
                g.m,
                g.n,
                g.k,
                static_cast<int>(a.dtype),
                static_cast<int>(c.dtype),
                static_cast<int>(epi),
                g.beta != 0.0f,
                alignment(a.data),
                alignment(b.data),
                alignment(c.data),
                alignment(bias),
                alignment(aux)};
  auto it = plans_.find(key);
  if (it != plans_.end()) return it->second.get();

  auto p = std::make_unique<Plan>();
  const cudaDataType_t ab_t = cuda_type(a.dtype);
  const cudaDataType_t c_t = cuda_type(c.dtype);
  MPLAN_CUBLAS_CHECK(cublasLtMatmulDescCreate(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t op_a = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;  // cuBLASLt A = our B
  const cublasOperation_t op_b = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;  // cuBLASLt B = our A
  set_desc(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof(op_a));
  set_desc(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof(op_b));
  // Our B: (k, n) row-major = col-major (n, k), ld n; transposed: stored (n, k) = col-major (k, n).
  if (g.trans_b) {
    MPLAN_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->la, ab_t, g.k, g.n, g.k));
  } else {
    MPLAN_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->la, ab_t, g.n, g.k, g.n));
  }
  // Our A: (m, k) row-major = col-major (k, m), ld k; transposed: stored (k, m) = col-major (m, k).
  if (g.trans_a) {
    MPLAN_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->lb, ab_t, g.m, g.k, g.m));
  } else {
    MPLAN_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->lb, ab_t, g.k, g.m, g.k));
  }
  MPLAN_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p->lc, c_t, g.n, g.m, g.n));

  cublasLtEpilogue_t lt_epi = CUBLASLT_EPILOGUE_DEFAULT;
  if (epi == Epilogue::kBias) lt_epi = CUBLASLT_EPILOGUE_BIAS;
  if (epi == Epilogue::kBiasGelu) lt_epi = CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
  if (epi == Epilogue::kDGelu) lt_epi = CUBLASLT_EPILOGUE_DGELU;
  set_desc(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &lt_epi, sizeof(lt_epi));
  if (epi == Epilogue::kBias || epi == Epilogue::kBiasGelu) {
    const int32_t bt = static_cast<int32_t>(cuda_type(bias_t));
    set_desc(p->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof(bt));
    set_desc(p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias));
  }
  if (epi == Epilogue::kBiasGelu || epi == Epilogue::kDGelu) {  // written, or read by DGELU
    const int64_t aux_ld = g.n;
    set_desc(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof(aux));
    set_desc(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld, sizeof(aux_ld));
  }

  cublasLtMatmulPreference_t pref = nullptr;
  MPLAN_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  const uint64_t ws = workspace_bytes_;
  MPLAN_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
  const uint32_t al_a = static_cast<uint32_t>(alignment(b.data));  // cuBLASLt A = our B
  const uint32_t al_b = static_cast<uint32_t>(alignment(a.data));
  const uint32_t al_c = static_cast<uint32_t>(alignment(c.data));
  MPLAN_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al_a, sizeof(al_a)));
  MPLAN_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al_b, sizeof(al_b)));
  MPLAN_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al_c, sizeof(al_c)));
  MPLAN_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al_c, sizeof(al_c)));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(handle_, p->desc, p->la, p->lb, p->lc,
                                                           p->lc, pref, 1, &result, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  Plan* out = nullptr;
  if (st == CUBLAS_STATUS_SUCCESS && found > 0) {
    p->algo = result.algo;
    out = p.get();
    plans_.emplace(key, std::move(p));
  } else {
    MPLAN_CHECK(epi != Epilogue::kNone, "cuBLASLt has no algorithm for gemm m=", g.m, " n=", g.n,
                " k=", g.k, " trans_a=", g.trans_a, " trans_b=", g.trans_b, " (status ",
                cublasGetStatusString(st), ")");
    plans_.emplace(key, nullptr);  // remember: this epilogue runs unfused
  }
  return out;
}

void LtGemm::matmul(Plan& p, const GemmArgs& g, const Tensor& a, const Tensor& b, const Tensor& c,
                    float beta, const void* bias, const void* aux, cudaStream_t stream) {
  if (bias != nullptr) set_desc(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias));
  if (aux != nullptr)
    set_desc(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof(aux));
  const float alpha = g.alpha;
  MPLAN_CUBLAS_CHECK(cublasLtMatmul(handle_, p.desc, &alpha, b.data, p.la, a.data, p.lb, &beta,
                                    c.data, p.lc, c.data, p.lc, &p.algo, workspace_,
                                    workspace_bytes_, stream));
}

void LtGemm::run(const GemmArgs& g, const Tensor& a, const Tensor& b, const Tensor& c,
                 const Tensor& bias, const Tensor& aux, cudaStream_t stream) {
  if (g.m == 0 || g.n == 0) return;
  if (g.k == 0) {  // C = beta·C (no product)
    MPLAN_CHECK(g.epilogue == Epilogue::kNone, "gemm: k = 0 with an epilogue");
    if (g.beta == 0.0f) {
      launch_fill(c.data, c.dtype, c.numel(), 0.0f, stream);
    } else if (g.beta != 1.0f) {
      launch_scale(c.data, c.dtype, c.numel(), g.beta, stream);
    }
    return;
  }
  const bool has_aux = g.epilogue == Epilogue::kBiasGelu || g.epilogue == Epilogue::kDGelu;
  if (g.epilogue != Epilogue::kNone && fuse_epilogues_ &&
      (g.epilogue == Epilogue::kBias || (aux.dtype == c.dtype && g.n % 8 == 0))) {
    const void* aux_p = has_aux ? aux.data : nullptr;
    if (Plan* p = plan_for(g, a, b, c, g.epilogue, bias.data, bias.dtype, aux_p)) {
      matmul(*p, g, a, b, c, g.beta, bias.data, aux_p, stream);
      return;
    }
  }
  // Plain GEMM, then the epilogue (if any) as separate kernels.
  if (g.epilogue == Epilogue::kBiasGelu) {
    Plan* p = plan_for(g, a, b, aux, Epilogue::kNone, nullptr, DType::kF32, nullptr);
    matmul(*p, g, a, b, aux, 0.0f, nullptr, nullptr, stream);
    launch_bias_add(aux.data, aux.dtype, bias.data, bias.dtype, g.m, g.n, stream);
    launch_gelu_forward(aux.data, c.data, c.dtype, c.numel(), stream);
    return;
  }
  Plan* p = plan_for(g, a, b, c, Epilogue::kNone, nullptr, DType::kF32, nullptr);
  matmul(*p, g, a, b, c, g.epilogue == Epilogue::kNone ? g.beta : 0.0f, nullptr, nullptr, stream);
  if (g.epilogue == Epilogue::kBias)
    launch_bias_add(c.data, c.dtype, bias.data, bias.dtype, g.m, g.n, stream);
  if (g.epilogue == Epilogue::kDGelu)  // in place: C = C · gelu'(aux), C rounded once before
    launch_gelu_backward(c.data, aux.data, c.data, c.dtype, c.numel(), stream);
}

}  // namespace mplan::exec::cuda
