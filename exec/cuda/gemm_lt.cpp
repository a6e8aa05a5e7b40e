// cuBLASLt plans and calls behind LtGemm (see gemm_lt.hpp for the row-major/column-major swap).
// Storage of each operand in column-major terms: our row-major X (r, c) is X^T (c, r) with
// leading dimension c. cuBLASLt's A is our B, its B our A, its D (n, m) with ld n is our C.
#include "exec/cuda/gemm_lt.hpp"

#include <cublas_api.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "exec/cuda/cuda_check.hpp"
#include "exec/cuda/kernels.hpp"

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

bool env_on(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && v[0] != '\0' && v[0] != '0';
}

constexpr int kCandidates = 16;  // heuristic results asked for when tuning

// The chosen algorithm per (device, plan key), process-wide: every LtGemm of the process (one
// per backend) uses a shape's choice once one of them has timed it or read it from a file.
template <class Key>
struct AlgoChoices {
  std::mutex mu;
  std::map<std::pair<int, Key>, cublasLtMatmulAlgo_t> algo;
  std::map<std::pair<int, Key>, std::pair<double, double>> us;  // chosen, heuristic's first
  std::set<std::pair<int, std::string>> files_read;             // (device, path)
  std::set<int> heated;                                         // devices
};
template <class Key>
AlgoChoices<Key>& algo_choices() {
  static AlgoChoices<Key> t;
  return t;
}

int current_device() {
  int dev = 0;
  MPLAN_CUDA_CHECK(cudaGetDevice(&dev));
  return dev;
}

std::string device_name(int dev) {
  cudaDeviceProp prop{};
  MPLAN_CUDA_CHECK(cudaGetDeviceProperties(&prop, dev));
  return prop.name;
}

bool same_algo(const cublasLtMatmulAlgo_t& x, const cublasLtMatmulAlgo_t& y) {
  return std::memcmp(x.data, y.data, sizeof(x.data)) == 0;
}

template <class T>
T algo_config(const cublasLtMatmulAlgo_t& a, cublasLtMatmulAlgoConfigAttributes_t attr) {
  T v{};
  size_t written = 0;
  if (cublasLtMatmulAlgoConfigGetAttribute(&a, attr, &v, sizeof(v), &written) !=
      CUBLAS_STATUS_SUCCESS)
    return T{};
  return v;
}

// Mean ms a call of `reps` back-to-back calls (-1 where cuBLASLt refuses the algorithm).
template <class Run>
float time_calls(Run&& run, int reps, cudaStream_t stream, cudaEvent_t e0, cudaEvent_t e1) {
  MPLAN_CUDA_CHECK(cudaEventRecord(e0, stream));
  for (int i = 0; i < reps; ++i)
    if (!run()) return -1.0f;
  MPLAN_CUDA_CHECK(cudaEventRecord(e1, stream));
  MPLAN_CUDA_CHECK(cudaEventSynchronize(e1));
  float ms = 0;
  MPLAN_CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
  return ms / static_cast<float>(reps);
}

}  // namespace

LtGemm::LtGemm(void* workspace, size_t workspace_bytes)
    : workspace_(workspace), workspace_bytes_(workspace_bytes) {
  MPLAN_CUBLAS_CHECK(cublasLtCreate(&handle_));
  fuse_epilogues_ = !env_on("MPLAN_NO_GEMM_EPILOGUE");
  tune_ = env_on("MPLAN_GEMM_TUNE");
  if (const char* f = std::getenv("MPLAN_GEMM_ALGOS"); f != nullptr && f[0] != '\0')
    set_algos_file(f);
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
    p->key = key;
    p->settled = !tune_;
    // A choice made earlier in the process (timed, or read from MPLAN_GEMM_ALGOS' file), where
    // cuBLASLt still accepts it for this plan.
    AlgoChoices<Key>& t = algo_choices<Key>();
    const std::lock_guard<std::mutex> lock(t.mu);
    const auto hit = t.algo.find({current_device(), key});
    if (hit != t.algo.end() && algo_accepted(*p, hit->second)) {
      p->algo = hit->second;
      p->settled = true;
      ++chosen_plans_;
    } else if (!p->settled) {
      add_cluster_variants(*p);
      p->settled = p->candidates.size() == 1;
    }
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
  if (!p.settled) tune(p, g, a, b, c, beta, stream, c_in);
  const float alpha = g.alpha;
  MPLAN_CUBLAS_CHECK(cublasLtMatmul(handle_, p.desc, &alpha, b.data, p.la, a.data, p.lb, &beta,
                                    c_in, p.lc, c.data, p.lc, &p.algo, workspace_, workspace_bytes_,
                                    stream));
}

bool LtGemm::algo_accepted(const Plan& p, const cublasLtMatmulAlgo_t& algo) const {
  cublasLtMatmulHeuristicResult_t r{};
  return cublasLtMatmulAlgoCheck(handle_, p.desc, p.la, p.lb, p.lc, p.lc, &algo, &r) ==
             CUBLAS_STATUS_SUCCESS &&
         r.workspaceSize <= workspace_bytes_;
}

// The heuristic's first choice with the other cluster shapes of one and two blocks, where
// cuBLASLt accepts them (they are not always among its own candidates).
void LtGemm::add_cluster_variants(Plan& p) const {
  const uint16_t first =
      algo_config<uint16_t>(p.candidates[0], CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID);
  for (uint16_t shape :
       {uint16_t{CUBLASLT_CLUSTER_SHAPE_1x1x1}, uint16_t{CUBLASLT_CLUSTER_SHAPE_2x1x1},
        uint16_t{CUBLASLT_CLUSTER_SHAPE_1x2x1}}) {
    if (shape == first) continue;
    cublasLtMatmulAlgo_t v = p.candidates[0];
    if (cublasLtMatmulAlgoConfigSetAttribute(&v, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, &shape,
                                             sizeof(shape)) != CUBLAS_STATUS_SUCCESS ||
        !algo_accepted(p, v))
      continue;
    bool seen = false;
    for (const auto& c : p.candidates) seen = seen || same_algo(c, v);
    if (!seen) p.candidates.push_back(v);
  }
}

// MPLAN_GEMM_TUNE: the candidates are timed at the clock a training step runs at. The GPU is
// held busy first (the heuristic's choice for a second, once per process), then every candidate
// runs back to back for about kWindowMs, in turn, kRounds times; a candidate's time is its
// median over the rounds, and one is kept only where it beats the heuristic's first by 1 %. (A
// power-capped GPU lowers its clock under long GEMM runs, and a candidate timed on a cool GPU
// may draw the power its neighbours need.) The trials write into a scratch copy of C, so a call
// that reads C (accumulating weight gradients, residual adds) is tuned too and sees its own C.
void LtGemm::tune(Plan& p, const GemmArgs& g, const Tensor& a, const Tensor& b, const Tensor& c,
                  float beta, cudaStream_t stream, const void* c_in) {
  constexpr double kHeatMs = 1000, kWindowMs = 30;
  constexpr int kRounds = 3;
  void* scratch = nullptr;
  MPLAN_CUDA_CHECK(cudaMalloc(&scratch, std::max<size_t>(c.bytes(), 256)));
  MPLAN_CUDA_CHECK(cudaMemsetAsync(scratch, 0, c.bytes(), stream));
  const void* trial_c = c_in == c.data ? scratch : c_in;
  cudaEvent_t e0 = nullptr, e1 = nullptr;
  MPLAN_CUDA_CHECK(cudaEventCreate(&e0));
  MPLAN_CUDA_CHECK(cudaEventCreate(&e1));
  const float alpha = g.alpha;
  auto run_with = [&](const cublasLtMatmulAlgo_t& algo) {
    return cublasLtMatmul(handle_, p.desc, &alpha, b.data, p.la, a.data, p.lb, &beta, trial_c, p.lc,
                          scratch, p.lc, &algo, workspace_, workspace_bytes_,
                          stream) == CUBLAS_STATUS_SUCCESS;
  };
  const int dev = current_device();
  AlgoChoices<Key>& t = algo_choices<Key>();
  bool heat = false;
  {
    const std::lock_guard<std::mutex> lock(t.mu);
    heat = t.heated.insert(dev).second;
  }
  const size_t n = p.candidates.size();
  std::vector<int> reps(n, 0);  // 0: refused at run time
  for (size_t i = 0; i < n; ++i) {
    const auto& algo = p.candidates[i];
    if (time_calls([&] { return run_with(algo); }, 1, stream, e0, e1) < 0) continue;  // loads it
    const float ms = time_calls([&] { return run_with(algo); }, 1, stream, e0, e1);
    if (ms > 0) reps[i] = std::max(2, static_cast<int>(kWindowMs / ms));
    if (i == 0 && heat && ms > 0)
      time_calls([&] { return run_with(algo); }, std::max(1, static_cast<int>(kHeatMs / ms)),
                 stream, e0, e1);
  }
  std::vector<std::vector<float>> times(n);
  for (int r = 0; r < kRounds; ++r)
    for (size_t i = 0; i < n; ++i) {
      if (reps[i] == 0) continue;
      const auto& algo = p.candidates[i];
      const float ms = time_calls([&] { return run_with(algo); }, reps[i], stream, e0, e1);
      if (ms < 0) {
        reps[i] = 0;
        continue;
      }
      times[i].push_back(ms);
    }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  MPLAN_CUDA_CHECK(cudaFree(scratch));  // (synchronises: the trials are done)
  std::vector<double> median(n, -1.0);
  for (size_t i = 0; i < n; ++i) {
    if (reps[i] == 0 || times[i].empty()) continue;
    std::sort(times[i].begin(), times[i].end());
    median[i] = times[i][times[i].size() / 2];
  }
  size_t best = 0;
  for (size_t i = 1; i < n; ++i)
    if (median[i] > 0 && (median[best] < 0 || median[i] < median[best])) best = i;
  if (median[0] > 0 && median[best] > 0.99 * median[0]) best = 0;
  ++timed_plans_;
  {
    const std::lock_guard<std::mutex> lock(t.mu);
    // The first process-wide choice for the key stays (another LtGemm may have timed it meanwhile).
    const auto chosen = t.algo.emplace(std::make_pair(dev, p.key), p.candidates[best]).first;
    t.us.emplace(std::make_pair(dev, p.key), std::make_pair(median[best] * 1e3, median[0] * 1e3));
    p.algo = chosen->second;
  }
  p.settled = true;
  std::fprintf(stderr,
               "mplan: gemm m=%lld n=%lld k=%lld trans_a=%d trans_b=%d epilogue=%d beta=%g: "
               "candidate %zu of %zu (%s) %.1f us, the heuristic's first %.1f us\n",
               static_cast<long long>(g.m), static_cast<long long>(g.n),
               static_cast<long long>(g.k), int(g.trans_a), int(g.trans_b), std::get<7>(p.key),
               double(beta), best, n, describe_algo(p.algo).c_str(), median[best] * 1e3,
               median[0] * 1e3);
  if (!algos_file_.empty()) save_algos_file();
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

std::string describe_algo(const cublasLtMatmulAlgo_t& a) {
  static const char* const kTiles[] = {
      "undefined", "8x8",     "8x16",    "16x8",    "8x32",    "16x16",  "32x8",
      "8x64",      "16x32",   "32x16",   "64x8",    "32x32",   "32x64",  "64x32",
      "32x128",    "64x64",   "128x32",  "64x128",  "128x64",  "64x256", "128x128",
      "256x64",    "64x512",  "128x256", "256x128", "512x64",  "64x96",  "96x64",
      "96x128",    "128x160", "160x128", "192x128", "128x192", "128x96"};
  const auto tile = algo_config<uint32_t>(a, CUBLASLT_ALGO_CONFIG_TILE_ID);
  const auto cluster = algo_config<uint16_t>(a, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID);
  static const char* const kClusters[] = {"auto", "?",   "1x1", "2x1", "4x1", "1x2",
                                          "2x2",  "4x2", "1x4", "2x4", "4x4"};
  const std::string tile_s = tile < std::size(kTiles) ? kTiles[tile] : "id " + std::to_string(tile);
  const std::string cluster_s =
      cluster < std::size(kClusters) ? kClusters[cluster] : "id " + std::to_string(cluster);
  char buf[200];
  std::snprintf(buf, sizeof(buf),
                "algo %d, tile %s, stages %u, cluster %s, swizzle %u, split-k %u, option %u",
                algo_config<int>(a, CUBLASLT_ALGO_CONFIG_ID), tile_s.c_str(),
                algo_config<uint32_t>(a, CUBLASLT_ALGO_CONFIG_STAGES_ID), cluster_s.c_str(),
                algo_config<uint32_t>(a, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING),
                algo_config<uint32_t>(a, CUBLASLT_ALGO_CONFIG_SPLITK_NUM),
                algo_config<uint32_t>(a, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION));
  return buf;
}

namespace {
constexpr const char* kAlgosFormat = "mplan gemm algorithms 1";
}

// MPLAN_GEMM_ALGOS's file: {"format", "device", "cublaslt_version", "gemms": [{"key": the plan
// key's 14 integers, "algo": cublasLtMatmulAlgo_t's 8 words, "config", "us", "heuristic_us"}]}.
// A file written for another device or cuBLASLt version is ignored (with a warning): its
// algorithms are opaque to any other.
void LtGemm::set_algos_file(const std::string& path) {
  algos_file_ = path;
  const int dev = current_device();
  AlgoChoices<Key>& t = algo_choices<Key>();
  const std::lock_guard<std::mutex> lock(t.mu);
  if (!t.files_read.insert({dev, path}).second) return;
  std::ifstream in(path);
  if (!in) return;  // not written yet (MPLAN_GEMM_TUNE=1 writes it)
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const std::exception& e) {
    MPLAN_CHECK(false, "MPLAN_GEMM_ALGOS: ", path, " is not JSON: ", e.what());
  }
  MPLAN_CHECK(j.is_object() && j.value("format", "") == kAlgosFormat && j.contains("gemms") &&
                  j["gemms"].is_array(),
              "MPLAN_GEMM_ALGOS: ", path, " is not a GEMM algorithm file (format \"", kAlgosFormat,
              "\")");
  const std::string dev_name = device_name(dev);
  const auto version = static_cast<int64_t>(cublasLtGetVersion());
  if (j.value("device", "") != dev_name || j.value("cublaslt_version", int64_t{-1}) != version) {
    std::fprintf(stderr,
                 "mplan: MPLAN_GEMM_ALGOS: %s was written for %s with cuBLASLt %lld; this is %s "
                 "with cuBLASLt %lld: ignored (the heuristic's choices are used)\n",
                 path.c_str(), j.value("device", "?").c_str(),
                 static_cast<long long>(j.value("cublaslt_version", int64_t{-1})), dev_name.c_str(),
                 static_cast<long long>(version));
    return;
  }
  for (const auto& e : j["gemms"]) {
    MPLAN_CHECK(e.is_object() && e.contains("key") && e["key"].is_array() &&
                    e["key"].size() == std::tuple_size_v<Key> && e.contains("algo") &&
                    e["algo"].is_array() && e["algo"].size() == 8,
                "MPLAN_GEMM_ALGOS: ", path, ": each entry needs \"key\" (", std::tuple_size_v<Key>,
                " integers) and \"algo\" (8 integers)");
    Key key{};
    size_t i = 0;
    std::apply([&](auto&... f) { ((f = e["key"][i++].get<std::decay_t<decltype(f)>>()), ...); },
               key);
    cublasLtMatmulAlgo_t algo{};
    for (size_t w = 0; w < 8; ++w) algo.data[w] = e["algo"][w].get<uint64_t>();
    t.algo.emplace(std::make_pair(dev, key), algo);
    if (e.contains("us") && e.contains("heuristic_us"))
      t.us.emplace(std::make_pair(dev, key),
                   std::make_pair(e["us"].get<double>(), e["heuristic_us"].get<double>()));
  }
}

void LtGemm::forget_choices() {
  AlgoChoices<Key>& t = algo_choices<Key>();
  const std::lock_guard<std::mutex> lock(t.mu);
  t.algo.clear();
  t.us.clear();
  t.files_read.clear();
}

// Every choice of this device, written whole (to a temporary file, then renamed into place).
void LtGemm::save_algos_file() const {
  const int dev = current_device();
  AlgoChoices<Key>& t = algo_choices<Key>();
  nlohmann::json gemms = nlohmann::json::array();
  {
    const std::lock_guard<std::mutex> lock(t.mu);
    for (const auto& [dk, algo] : t.algo) {
      if (dk.first != dev) continue;
      nlohmann::json key = nlohmann::json::array();
      std::apply([&](const auto&... f) { (key.push_back(f), ...); }, dk.second);
      nlohmann::json words = nlohmann::json::array();
      for (uint64_t w : algo.data) words.push_back(w);
      nlohmann::json e{{"key", key}, {"algo", words}, {"config", describe_algo(algo)}};
      if (const auto u = t.us.find(dk); u != t.us.end()) {
        e["us"] = u->second.first;
        e["heuristic_us"] = u->second.second;
      }
      gemms.push_back(std::move(e));
    }
  }
  const nlohmann::json j{{"format", kAlgosFormat},
                         {"device", device_name(dev)},
                         {"cublaslt_version", static_cast<int64_t>(cublasLtGetVersion())},
                         {"gemms", gemms}};
  const std::string tmp = algos_file_ + ".tmp";
  {
    std::ofstream out(tmp);
    out << j.dump(1) << "\n";
    MPLAN_CHECK(out.good(), "MPLAN_GEMM_ALGOS: cannot write ", tmp);
  }
  MPLAN_CHECK(std::rename(tmp.c_str(), algos_file_.c_str()) == 0, "MPLAN_GEMM_ALGOS: cannot write ",
              algos_file_);
}

}  // namespace mplan::exec::cuda
