// cuBLASLt plans and calls behind LtGemm (see gemm_lt.hpp for the row-major/column-major swap).
// Storage of each operand in column-major terms: our row-major X (r, c) is X^T (c, r) with
// leading dimension c. cuBLASLt's A is our B, its B our A, its D (n, m) with ld n is our C.
#include "exec/cuda/gemm_lt.hpp"

#include <cublas_api.h>

#include <algorithm>
#include <mutex>
#include <vector>

#include "exec/cuda/cuda_check.hpp"
#include "exec/cuda/kernels.hpp"
#include "exec/env_flag.hpp"

namespace mplan::exec::cuda {

struct LtGemm::Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
  cublasLtMatmulAlgo_t algo{};
  std::vector<cublasLtMatmulAlgo_t> candidates;  // the heuristic's, in its order (algo: [0])
  bool settled = false;                          // algo is final (tuned, or tuning off)
  Key key{};
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

constexpr int kCandidates = 8;  // heuristic results asked for (cuBLASLt returns up to 8 here)

// The tuned choice per (device, plan key): an index into the heuristic's candidates, whose order
// is a function of the shape, so every LtGemm of the process (one per backend) picks the same
// algorithm for a shape once one of them has timed it.
template <class Key>
struct TunedChoices {
  std::mutex mu;
  std::map<std::pair<int, Key>, int> index;
};
template <class Key>
TunedChoices<Key>& tuned_choices() {
  static TunedChoices<Key> t;
  return t;
}

}  // namespace

LtGemm::LtGemm(void* workspace, size_t workspace_bytes)
    : workspace_(workspace), workspace_bytes_(workspace_bytes) {
  MPLAN_CUBLAS_CHECK(cublasLtCreate(&handle_));
  fuse_epilogues_ = !env_flag("MPLAN_NO_GEMM_EPILOGUE");
  tune_ = env_flag("MPLAN_GEMM_TUNE");
}

LtGemm::~LtGemm() {
  plans_.clear();
  if (handle_) cublasLtDestroy(handle_);
}

LtGemm::Plan* LtGemm::plan_for(const GemmArgs& g, const Tensor& a, const Tensor& b, const Tensor& c,
                               Epilogue epi, const void* bias, DType bias_t, const void* aux,
                               const void* c_in) {
  // C (read where beta != 0: c_in, else our C) and D (our C) planned at the smaller alignment.
  const int c_align = std::min(alignment(c.data), alignment(c_in != nullptr ? c_in : c.data));
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
                c_align,
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

  // The residual epilogues: cuBLASLt's C (beta 1) is aux, its D our C.
  cublasLtEpilogue_t lt_epi = CUBLASLT_EPILOGUE_DEFAULT;
  if (epi == Epilogue::kBias || epi == Epilogue::kBiasResidual) lt_epi = CUBLASLT_EPILOGUE_BIAS;
  if (epi == Epilogue::kBiasGelu) lt_epi = CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
  if (epi == Epilogue::kDGelu) lt_epi = CUBLASLT_EPILOGUE_DGELU;
  set_desc(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &lt_epi, sizeof(lt_epi));
  if (epi == Epilogue::kBias || epi == Epilogue::kBiasGelu || epi == Epilogue::kBiasResidual) {
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
  const uint32_t al_c = static_cast<uint32_t>(c_align);  // C and D
  MPLAN_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al_a, sizeof(al_a)));
  MPLAN_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al_b, sizeof(al_b)));
  MPLAN_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al_c, sizeof(al_c)));
  MPLAN_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al_c, sizeof(al_c)));
  cublasLtMatmulHeuristicResult_t results[kCandidates]{};
  int found = 0;
  const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(
      handle_, p->desc, p->la, p->lb, p->lc, p->lc, pref, tune_ ? kCandidates : 1, results, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  Plan* out = nullptr;
  if (st == CUBLAS_STATUS_SUCCESS && found > 0) {
    for (int i = 0; i < found; ++i)
      if (results[i].state == CUBLAS_STATUS_SUCCESS) p->candidates.push_back(results[i].algo);
    if (p->candidates.empty()) p->candidates.push_back(results[0].algo);
    p->algo = p->candidates[0];
    // Only a call that overwrites C (beta 0) can be run again to time it; others keep [0].
    p->settled = !tune_ || p->candidates.size() == 1 || g.beta != 0.0f;
    if (!p->settled) {
      TunedChoices<Key>& t = tuned_choices<Key>();
      int dev = 0;
      MPLAN_CUDA_CHECK(cudaGetDevice(&dev));
      const std::lock_guard<std::mutex> lock(t.mu);
      const auto hit = t.index.find({dev, key});
      if (hit != t.index.end()) {
        p->algo = p->candidates[static_cast<size_t>(hit->second)];
        p->settled = true;
      }
    }
    p->key = key;
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
                    float beta, const void* bias, const void* aux, cudaStream_t stream,
                    const void* c_in) {
  if (bias != nullptr) set_desc(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias));
  if (aux != nullptr)
    set_desc(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof(aux));
  if (c_in == nullptr) c_in = c.data;
  // (Not where C is also an input: the trials would overwrite it before the call reads it. Plans
  // that read C, beta != 0, the residual ones too, are settled untuned.)
  if (!p.settled && c.data != a.data && c.data != b.data && c.data != aux)
    tune(p, g, a, b, c, beta, stream, c_in);
  const float alpha = g.alpha;
  MPLAN_CUBLAS_CHECK(cublasLtMatmul(handle_, p.desc, &alpha, b.data, p.la, a.data, p.lb, &beta,
                                    c_in, p.lc, c.data, p.lc, &p.algo, workspace_, workspace_bytes_,
                                    stream));
}

// MPLAN_GEMM_TUNE: each candidate runs on the call's own operands (beta is 0, so the call after
// the trials writes C, and aux, afresh), once to warm up and three times timed; the fastest by
// median is kept for the process. A candidate cuBLASLt refuses at run time is skipped.
void LtGemm::tune(Plan& p, const GemmArgs& g, const Tensor& a, const Tensor& b, const Tensor& c,
                  float beta, cudaStream_t stream, const void* c_in) {
  cudaEvent_t ev[2];
  MPLAN_CUDA_CHECK(cudaEventCreate(&ev[0]));
  MPLAN_CUDA_CHECK(cudaEventCreate(&ev[1]));
  const float alpha = g.alpha;
  float best_ms = 0.0f;
  int best = -1;  // the fastest candidate cuBLASLt ran
  for (size_t i = 0; i < p.candidates.size(); ++i) {
    float times[3] = {0, 0, 0};
    bool ok = true;
    for (int rep = 0; rep < 4 && ok; ++rep) {
      MPLAN_CUDA_CHECK(cudaEventRecord(ev[0], stream));
      ok = cublasLtMatmul(handle_, p.desc, &alpha, b.data, p.la, a.data, p.lb, &beta, c_in, p.lc,
                          c.data, p.lc, &p.candidates[i], workspace_, workspace_bytes_,
                          stream) == CUBLAS_STATUS_SUCCESS;
      MPLAN_CUDA_CHECK(cudaEventRecord(ev[1], stream));
      MPLAN_CUDA_CHECK(cudaEventSynchronize(ev[1]));
      if (rep > 0) MPLAN_CUDA_CHECK(cudaEventElapsedTime(&times[rep - 1], ev[0], ev[1]));
    }
    std::sort(times, times + 3);
    if (ok && (best < 0 || times[1] < best_ms)) {
      best_ms = times[1];
      best = static_cast<int>(i);
    }
  }
  cudaEventDestroy(ev[0]);
  cudaEventDestroy(ev[1]);
  if (best < 0) best = 0;  // none ran: the heuristic's first, as untuned
  ++timed_plans_;
  TunedChoices<Key>& t = tuned_choices<Key>();
  int dev = 0;
  MPLAN_CUDA_CHECK(cudaGetDevice(&dev));
  const std::lock_guard<std::mutex> lock(t.mu);
  // The first process-wide choice for the key stays (another LtGemm may have timed it meanwhile).
  const auto chosen = t.index.emplace(std::make_pair(dev, p.key), best).first;
  p.algo = p.candidates[static_cast<size_t>(chosen->second)];
  p.settled = true;
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
  // The residual epilogues: cuBLASLt's C is aux, read with beta 1 (its D is our C).
  const bool residual = g.epilogue == Epilogue::kResidual || g.epilogue == Epilogue::kBiasResidual;
  GemmArgs gr = g;
  if (residual) gr.beta = 1.0f;
  const bool has_aux = g.epilogue == Epilogue::kBiasGelu || g.epilogue == Epilogue::kDGelu;
  if (g.epilogue != Epilogue::kNone && fuse_epilogues_ &&
      (g.epilogue == Epilogue::kBias || residual || (aux.dtype == c.dtype && g.n % 8 == 0))) {
    const void* aux_p = has_aux ? aux.data : nullptr;
    const void* c_in = residual ? aux.data : nullptr;
    // (A bias pointer set where the epilogue adds none makes cuBLASLt refuse the call.)
    const void* bias_p = epilogue_has_bias(g.epilogue) ? bias.data : nullptr;
    if (Plan* p = plan_for(gr, a, b, c, g.epilogue, bias_p, bias.dtype, aux_p, c_in)) {
      matmul(*p, gr, a, b, c, gr.beta, bias_p, aux_p, stream, c_in);
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
  // (The residual epilogues: C = A·B + aux by beta 1, then the bias: two roundings.)
  const void* c_in = residual ? aux.data : nullptr;
  Plan* p = plan_for(gr, a, b, c, Epilogue::kNone, nullptr, DType::kF32, nullptr, c_in);
  matmul(*p, gr, a, b, c, g.epilogue == Epilogue::kNone || residual ? gr.beta : 0.0f, nullptr,
         nullptr, stream, c_in);
  if (g.epilogue == Epilogue::kBias || g.epilogue == Epilogue::kBiasResidual)
    launch_bias_add(c.data, c.dtype, bias.data, bias.dtype, g.m, g.n, stream);
  if (g.epilogue == Epilogue::kDGelu)  // in place: C = C · gelu'(aux), C rounded once before
    launch_gelu_backward(c.data, aux.data, c.data, c.dtype, c.numel(), stream);
}

}  // namespace mplan::exec::cuda
