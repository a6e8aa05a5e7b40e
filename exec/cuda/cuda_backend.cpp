// CudaBackend: argument checks, memory accounting, streams and events, and dispatch to cuBLASLt
// (gemm_lt.cpp) and the kernel launchers (kernels.hpp). Shapes are checked with MPLAN_CHECK (a
// mismatch is a bug in the caller); CUDA failures abort the job through MPLAN_CUDA_CHECK.
#include "exec/cuda/cuda_backend.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "exec/cuda/cuda_check.hpp"
#include "exec/cuda/gemm_lt.hpp"
#include "exec/cuda/kernels.hpp"
#include "exec/env_flag.hpp"

namespace mplan::exec::cuda {
namespace {

constexpr size_t kEventPool = 4096;
constexpr size_t kWorkspaceBytes = size_t{32} << 20;  // cuBLASLt workspace (Hopper: 32 MiB)
constexpr size_t kScratchGranule = size_t{1} << 20;

bool is_act(DType t) { return t == DType::kF32 || t == DType::kBF16; }

std::string shape_str(const Tensor& t) {
  std::string s = "(";
  for (int i = 0; i < t.ndim; ++i) s += (i ? ", " : "") + std::to_string(t.dim(i));
  return s + ") " + to_string(t.dtype);
}

// (s, b, heads, d) of an attention call, from out (s, b, heads, d) or else lse (b, heads, s);
// the K/V groups from qkv's element count, s · b · (heads + 2 groups) · d.
AttentionShape attention_shape(const Tensor& qkv, const Tensor& out, const Tensor& lse) {
  AttentionShape sh{};
  if (out.ndim == 4) {
    sh = {out.dim(0), out.dim(1), out.dim(2), 0, out.dim(3)};
  } else {
    MPLAN_CHECK(lse.ndim == 3, "attention: out must be (s, b, heads, d) or lse (b, heads, s); got ",
                shape_str(out), " and ", shape_str(lse));
    sh.b = lse.dim(0);
    sh.heads = lse.dim(1);
    sh.s = lse.dim(2);
    MPLAN_CHECK(sh.s * sh.b * sh.heads > 0, "attention: empty lse ", shape_str(lse));
    sh.d = out.numel() / (sh.s * sh.b * sh.heads);
  }
  MPLAN_CHECK(out.numel() == sh.s * sh.b * sh.heads * sh.d, "attention: out ", shape_str(out));
  sh.groups = Backend::attention_groups(qkv, sh.s, sh.b, sh.heads, sh.d);
  MPLAN_CHECK(lse.numel() == sh.b * sh.heads * sh.s && lse.dtype == DType::kF32, "attention: lse ",
              shape_str(lse));
  MPLAN_CHECK(qkv.dtype == out.dtype && is_act(qkv.dtype), "attention: dtypes");
  return sh;
}

}  // namespace

CudaBackend::CudaBackend(int device) : device_(device) {
  MPLAN_CUDA_CHECK(cudaSetDevice(device));
  cudaDeviceProp prop{};
  MPLAN_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  device_name_ = prop.name;
  // Cross-entropy's fused kernel (thread-block clusters) from compute capability 9 on;
  // MPLAN_NO_XENT_FUSION=1 keeps the kernels of the three steps.
  xent_fused_supported_ = xent_fused_supported(device);
  xent_fused_ = xent_fused_supported_ && !env_flag("MPLAN_NO_XENT_FUSION");
  int least = 0, greatest = 0;
  MPLAN_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  MPLAN_CUDA_CHECK(cudaStreamCreateWithPriority(&compute_, cudaStreamNonBlocking, least));
  // Gradient reductions run beside backward compute; a higher priority lets their kernels start
  // as soon as a bucket is ready.
  MPLAN_CUDA_CHECK(cudaStreamCreateWithPriority(&comm_, cudaStreamNonBlocking, greatest));
  events_.assign(kEventPool, nullptr);
  workspace_bytes_ = kWorkspaceBytes;
  workspace_ = device_alloc(workspace_bytes_, "cublas-workspace");
  gemm_ = std::make_unique<LtGemm>(workspace_, workspace_bytes_);
  if (env_flag("MPLAN_NAIVE_ATTENTION")) attention_kernels_ = AttentionKernels::kReference;
  attention_bias_grad_fused_ = !env_flag("MPLAN_NO_ATTENTION_BIAS_GRAD");
  if (const char* e = std::getenv("MPLAN_ATTENTION")) {
    const std::string v = e;
    if (v == "flash2") attention_kernels_ = AttentionKernels::kFlash2;
    if (v == "reference") attention_kernels_ = AttentionKernels::kReference;
  }
}

CudaBackend::~CudaBackend() {
  cudaSetDevice(device_);
  cudaStreamSynchronize(compute_);
  cudaStreamSynchronize(comm_);
  gemm_.reset();
  for (auto& [p, a] : allocations_) cudaFree(p);
  allocations_.clear();
  for (cudaEvent_t e : events_)
    if (e) cudaEventDestroy(e);
  for (cudaEvent_t e : timing_events_) cudaEventDestroy(e);
  for (Graph& g : graphs_)
    if (g.exec) cudaGraphExecDestroy(g.exec);
  if (comm_) cudaStreamDestroy(comm_);
  if (compute_) cudaStreamDestroy(compute_);
}

std::string CudaBackend::name() const {
  return "cuda:" + std::to_string(device_) + " (" + device_name_ + ")";
}

// ---- memory ----------------------------------------------------------------------------------

void* CudaBackend::device_alloc(size_t bytes, const std::string& tag) {
  void* p = nullptr;
  MPLAN_CUDA_CHECK(cudaMalloc(&p, std::max<size_t>(bytes, 1)));
  allocations_[p] = {bytes, tag};
  TagMemory& tm = by_tag_[tag];
  tm.current_bytes += static_cast<int64_t>(bytes);
  tm.peak_bytes = std::max(tm.peak_bytes, tm.current_bytes);
  current_bytes_ += static_cast<int64_t>(bytes);
  peak_bytes_ = std::max(peak_bytes_, current_bytes_);
  sample_device_memory();
  return p;
}

void CudaBackend::device_free(void* p) {
  auto it = allocations_.find(p);
  MPLAN_CHECK(it != allocations_.end(), "release of memory this backend did not allocate");
  MPLAN_CUDA_CHECK(cudaFree(p));
  ++frees_;
  by_tag_[it->second.tag].current_bytes -= static_cast<int64_t>(it->second.bytes);
  current_bytes_ -= static_cast<int64_t>(it->second.bytes);
  allocations_.erase(it);
}

Tensor CudaBackend::alloc(DType dtype, std::initializer_list<int64_t> shape, const char* tag) {
  MPLAN_CHECK(shape.size() >= 1 && shape.size() <= 4, "alloc: 1 to 4 dims, got ", shape.size());
  Tensor t;
  t.dtype = dtype;
  t.ndim = static_cast<int>(shape.size());
  int64_t n = 1;
  int i = 0;
  for (int64_t d : shape) {
    MPLAN_CHECK(d >= 0, "alloc: negative dim ", d);
    t.shape[static_cast<size_t>(i++)] = d;
    n *= d;
  }
  t.data = device_alloc(static_cast<size_t>(n) * dtype_size(dtype), tag ? tag : "untagged");
  return t;
}

void CudaBackend::release(Tensor& t) {
  if (t.data == nullptr) return;
  device_free(t.data);
  t.data = nullptr;
}

void CudaBackend::sample_device_memory() const {
  size_t free_b = 0, total_b = 0;
  MPLAN_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  device_used_peak_bytes_ =
      std::max(device_used_peak_bytes_, static_cast<int64_t>(total_b - free_b));
}

MemoryStats CudaBackend::memory_stats() const {
  sample_device_memory();
  MemoryStats m;
  m.current_bytes = current_bytes_;
  m.peak_bytes = peak_bytes_;
  m.device_peak_bytes = device_used_peak_bytes_;
  return m;
}

void CudaBackend::reset_peak_memory() {
  peak_bytes_ = current_bytes_;
  for (auto& [tag, tm] : by_tag_) tm.peak_bytes = tm.current_bytes;
  device_used_peak_bytes_ = 0;
  sample_device_memory();
}

std::map<std::string, CudaBackend::TagMemory> CudaBackend::memory_by_tag() const { return by_tag_; }

CudaBackend::DeviceMemory CudaBackend::device_memory() const {
  size_t free_b = 0, total_b = 0;
  MPLAN_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  sample_device_memory();
  return {static_cast<int64_t>(total_b), static_cast<int64_t>(total_b - free_b),
          device_used_peak_bytes_};
}

void CudaBackend::reserve_scratch(size_t bytes) { scratch(bytes); }

void* CudaBackend::scratch(size_t bytes) {
  if (bytes <= scratch_bytes_ && scratch_ != nullptr) return scratch_;
  const size_t grown =
      (std::max(bytes, scratch_bytes_) + kScratchGranule - 1) / kScratchGranule * kScratchGranule;
  if (scratch_ != nullptr) {
    MPLAN_CUDA_CHECK(cudaDeviceSynchronize());  // earlier ops may still use the old arena
    device_free(scratch_);
  }
  scratch_ = device_alloc(grown, "scratch");
  scratch_bytes_ = grown;
  return scratch_;
}

void CudaBackend::set_fuse_gemm_epilogues(bool on) { gemm_->set_fuse_epilogues(on); }
void CudaBackend::set_tune_gemms(bool on) { gemm_->set_tune(on); }
size_t CudaBackend::timed_gemm_plans() const { return gemm_->timed_plans(); }

void CudaBackend::upload(Tensor dst, const void* host) {
  if (dst.bytes() == 0) return;
  MPLAN_CUDA_CHECK(cudaMemcpyAsync(dst.data, host, dst.bytes(), cudaMemcpyHostToDevice, compute_));
  MPLAN_CUDA_CHECK(cudaStreamSynchronize(compute_));  // `host` may go away after we return
}

void CudaBackend::download(void* host, Tensor src) {
  if (src.bytes() == 0) return;
  MPLAN_CUDA_CHECK(cudaMemcpyAsync(host, src.data, src.bytes(), cudaMemcpyDeviceToHost, compute_));
  MPLAN_CUDA_CHECK(cudaStreamSynchronize(compute_));
}

void CudaBackend::copy(Tensor dst, Tensor src) {
  MPLAN_CHECK(dst.dtype == src.dtype && dst.numel() == src.numel(), "copy: ", shape_str(dst),
              " <- ", shape_str(src));
  if (dst.bytes() == 0 || dst.data == src.data) return;
  MPLAN_CUDA_CHECK(
      cudaMemcpyAsync(dst.data, src.data, dst.bytes(), cudaMemcpyDeviceToDevice, compute_));
}

void CudaBackend::fill(Tensor t, float value) {
  launch_fill(t.data, t.dtype, t.numel(), value, compute_);
}

void CudaBackend::cast(Tensor dst, Tensor src) {
  MPLAN_CHECK(dst.numel() == src.numel() && is_act(dst.dtype) && is_act(src.dtype),
              "cast: ", shape_str(dst), " <- ", shape_str(src));
  launch_cast(dst.data, dst.dtype, src.data, src.dtype, dst.numel(), compute_);
}

// ---- streams -----------------------------------------------------------------------------------

Event CudaBackend::record(Stream s) {
  const size_t id = next_event_++ % kEventPool;
  if (events_[id] == nullptr)
    MPLAN_CUDA_CHECK(cudaEventCreateWithFlags(&events_[id], cudaEventDisableTiming));
  MPLAN_CUDA_CHECK(cudaEventRecord(events_[id], stream(s)));
  return Event{static_cast<int>(id)};
}

void CudaBackend::wait(Stream s, Event e) {
  MPLAN_CHECK(e.id >= 0 && static_cast<size_t>(e.id) < kEventPool && events_[e.id] != nullptr,
              "wait on an event that was never recorded: ", e.id);
  MPLAN_CUDA_CHECK(cudaStreamWaitEvent(stream(s), events_[static_cast<size_t>(e.id)], 0));
}

void CudaBackend::synchronize() {
  MPLAN_CUDA_CHECK(cudaStreamSynchronize(compute_));
  MPLAN_CUDA_CHECK(cudaStreamSynchronize(comm_));
}

int CudaBackend::mark(Stream s) {
  if (static_cast<size_t>(num_marks_) == timing_events_.size()) {
    cudaEvent_t e = nullptr;
    MPLAN_CUDA_CHECK(cudaEventCreate(&e));
    std::lock_guard<std::mutex> lock(marks_mutex_);
    timing_events_.push_back(e);
  }
  cudaEvent_t e = timing_events_[static_cast<size_t>(num_marks_)];
  // In a capture, an event record node that each replay takes again.
  if (capturing_)
    MPLAN_CUDA_CHECK(cudaEventRecordWithFlags(e, stream(s), cudaEventRecordExternal));
  else
    MPLAN_CUDA_CHECK(cudaEventRecord(e, stream(s)));
  return num_marks_++;
}

bool CudaBackend::mark_done(int id) {
  cudaEvent_t e = nullptr;
  {
    std::lock_guard<std::mutex> lock(marks_mutex_);
    if (id < 0 || static_cast<size_t>(id) >= timing_events_.size()) return false;
    e = timing_events_[static_cast<size_t>(id)];
  }
  return cudaEventQuery(e) == cudaSuccess;
}

void CudaBackend::read_marks(std::vector<int64_t>& ns) {
  ns.assign(static_cast<size_t>(num_marks_), 0);
  for (int i = 1; i < num_marks_; ++i) {
    float ms = 0;
    MPLAN_CUDA_CHECK(
        cudaEventElapsedTime(&ms, timing_events_[0], timing_events_[static_cast<size_t>(i)]));
    ns[static_cast<size_t>(i)] = static_cast<int64_t>(static_cast<double>(ms) * 1e6);
  }
}

void CudaBackend::clear_marks() { num_marks_ = 0; }

void CudaBackend::reuse_marks(int n) {
  MPLAN_CHECK(n >= 0 && static_cast<size_t>(n) <= timing_events_.size(), "reuse_marks(", n, ") of ",
              timing_events_.size());
  num_marks_ = n;
}

// ---- iteration graphs --------------------------------------------------------------------------

void CudaBackend::begin_capture() {
  MPLAN_CHECK(!capturing_, "begin_capture inside a capture");
  MPLAN_CUDA_CHECK(cudaStreamBeginCapture(compute_, cudaStreamCaptureModeThreadLocal));
  capturing_ = true;
}

int CudaBackend::end_capture() {
  MPLAN_CHECK(capturing_, "end_capture without begin_capture");
  capturing_ = false;
  cudaGraph_t g = nullptr;
  if (cudaStreamEndCapture(compute_, &g) != cudaSuccess || g == nullptr) {
    (void)cudaGetLastError();
    if (g != nullptr) cudaGraphDestroy(g);
    return -1;
  }
  cudaGraphExec_t exec = nullptr;
  const cudaError_t st = cudaGraphInstantiate(&exec, g, 0);
  cudaGraphDestroy(g);
  if (st != cudaSuccess) {
    (void)cudaGetLastError();
    return -1;
  }
  graphs_.push_back({exec, frees_});
  return static_cast<int>(graphs_.size()) - 1;
}

bool CudaBackend::replay(int id) {
  MPLAN_CHECK(id >= 0 && static_cast<size_t>(id) < graphs_.size() &&
                  graphs_[static_cast<size_t>(id)].exec != nullptr,
              "replay of graph ", id, ", which was never recorded or is forgotten");
  Graph& g = graphs_[static_cast<size_t>(id)];
  if (g.frees != frees_) {
    MPLAN_CUDA_CHECK(cudaGraphExecDestroy(g.exec));
    g.exec = nullptr;
    return false;
  }
  MPLAN_CUDA_CHECK(cudaGraphLaunch(g.exec, compute_));
  return true;
}

// ---- dense math ---------------------------------------------------------------------------------

void CudaBackend::gemm(const GemmArgs& g, Tensor a, Tensor b, Tensor c, Tensor bias, Tensor aux) {
  MPLAN_CHECK(a.numel() == g.m * g.k && b.numel() == g.k * g.n && c.numel() == g.m * g.n,
              "gemm m=", g.m, " n=", g.n, " k=", g.k, ": a ", shape_str(a), " b ", shape_str(b),
              " c ", shape_str(c));
  MPLAN_CHECK(
      a.dtype == b.dtype && is_act(a.dtype) && (c.dtype == a.dtype || c.dtype == DType::kF32),
      "gemm dtypes: a ", to_string(a.dtype), " b ", to_string(b.dtype), " c ", to_string(c.dtype));
  if (g.epilogue != Epilogue::kNone)
    MPLAN_CHECK(g.beta == 0.0f && g.alpha == 1.0f, "gemm epilogue needs alpha 1 and beta 0");
  if (epilogue_has_bias(g.epilogue))
    MPLAN_CHECK(bias.numel() == g.n && is_act(bias.dtype), "gemm bias ", shape_str(bias));
  if (epilogue_has_aux(g.epilogue))
    MPLAN_CHECK(aux.numel() == c.numel() && aux.dtype == c.dtype, "gemm aux ", shape_str(aux));
  gemm_->run(g, a, b, c, bias, aux, compute_);
}

// A bf16 dY's column sums as the product db (1, n) += ones (1, rows) · dY (rows, n), f32
// accumulation in cuBLASLt (a GEMV-shaped GEMM reading dY once, at about the bandwidth of a
// copy), or the column-sum kernel (reduce.cu).
void CudaBackend::bias_grad_accumulate(Tensor dy, Tensor db) {
  const int64_t n = db.numel();
  MPLAN_CHECK(db.dtype == DType::kF32 && n > 0 && dy.numel() % n == 0 && is_act(dy.dtype),
              "bias_grad: dy ", shape_str(dy), " db ", shape_str(db));
  const int64_t rows = dy.numel() / n;
  if (bias_grad_by_gemm_ && dy.dtype == DType::kBF16 && rows > 0) {
    if (ones_.numel() < rows) {
      if (ones_.data != nullptr) {
        MPLAN_CUDA_CHECK(cudaStreamSynchronize(compute_));  // earlier sums may still read them
        release(ones_);
      }
      ones_ = alloc(DType::kBF16, {rows}, "bias-grad-ones");
      fill(ones_, 1.0f);
    }
    const GemmArgs g{.m = 1, .n = n, .k = rows, .beta = 1.0f};
    gemm(g, ones_.flat_slice(0, rows), dy.view({rows, n}), db.view({1, n}));
    return;
  }
  void* s = scratch(column_sum_scratch_bytes(rows, n));
  launch_column_sum_accumulate(dy.data, dy.dtype, rows, n, db.as<float>(), s, compute_);
}

void CudaBackend::add(Tensor out, Tensor a, Tensor b) {
  MPLAN_CHECK(out.numel() == a.numel() && a.numel() == b.numel() && out.dtype == a.dtype &&
                  a.dtype == b.dtype,
              "add: ", shape_str(out), " = ", shape_str(a), " + ", shape_str(b));
  launch_add(out.data, a.data, b.data, out.dtype, out.numel(), compute_);
}

void CudaBackend::scale(Tensor t, float factor) {
  launch_scale(t.data, t.dtype, t.numel(), factor, compute_);
}

void CudaBackend::gelu_forward(Tensor x, Tensor y) {
  MPLAN_CHECK(x.numel() == y.numel() && x.dtype == y.dtype, "gelu: ", shape_str(x), " -> ",
              shape_str(y));
  launch_gelu_forward(x.data, y.data, x.dtype, x.numel(), compute_);
}

void CudaBackend::gelu_backward(Tensor dy, Tensor x, Tensor dx) {
  MPLAN_CHECK(dy.numel() == x.numel() && dx.numel() == x.numel() && dy.dtype == x.dtype &&
                  dx.dtype == x.dtype,
              "gelu_backward: ", shape_str(dy), " ", shape_str(x), " ", shape_str(dx));
  launch_gelu_backward(dy.data, x.data, dx.data, x.dtype, x.numel(), compute_);
}

// ---- normalization ------------------------------------------------------------------------------

void CudaBackend::layernorm_forward(Tensor x, Tensor gamma, Tensor beta, float eps, Tensor y,
                                    Tensor mean, Tensor rstd) {
  const int64_t h = gamma.numel();
  MPLAN_CHECK(h > 0 && x.numel() % h == 0, "layernorm_forward: x ", shape_str(x), " h ", h);
  const int64_t rows = x.numel() / h;
  MPLAN_CHECK(gamma.numel() == h && beta.numel() == h && y.numel() == x.numel() &&
                  mean.numel() == rows && rstd.numel() == rows && gamma.dtype == x.dtype &&
                  beta.dtype == x.dtype && y.dtype == x.dtype && mean.dtype == DType::kF32 &&
                  rstd.dtype == DType::kF32,
              "layernorm_forward: x ", shape_str(x), " gamma ", shape_str(gamma), " y ",
              shape_str(y), " mean ", shape_str(mean));
  launch_layernorm_forward(x.data, gamma.data, beta.data, x.dtype, rows, h, eps, y.data,
                           mean.as<float>(), rstd.as<float>(), compute_);
}

namespace {
// The shapes and dtypes the layernorm backward needs (dx: where dL/dx goes); the row count.
int64_t layernorm_backward_rows(const char* op, Tensor dy, Tensor x, Tensor gamma, Tensor mean,
                                Tensor rstd, Tensor dx, Tensor dgamma, Tensor dbeta) {
  const int64_t h = gamma.numel();
  MPLAN_CHECK(h > 0 && x.numel() % h == 0, op, ": x ", shape_str(x), " h ", h);
  const int64_t rows = x.numel() / h;
  MPLAN_CHECK(dy.numel() == x.numel() && dx.numel() == x.numel() && mean.numel() == rows &&
                  rstd.numel() == rows && dgamma.numel() == h && dbeta.numel() == h &&
                  dy.dtype == x.dtype && dx.dtype == x.dtype && gamma.dtype == x.dtype &&
                  dgamma.dtype == DType::kF32 && dbeta.dtype == DType::kF32,
              op, ": x ", shape_str(x), " dy ", shape_str(dy), " dx ", shape_str(dx), " dgamma ",
              shape_str(dgamma));
  return rows;
}
}  // namespace

void CudaBackend::layernorm_backward(Tensor dy, Tensor x, Tensor gamma, Tensor mean, Tensor rstd,
                                     Tensor dx, Tensor dgamma, Tensor dbeta) {
  const int64_t h = gamma.numel();
  const int64_t rows =
      layernorm_backward_rows("layernorm_backward", dy, x, gamma, mean, rstd, dx, dgamma, dbeta);
  void* s = scratch(layernorm_backward_scratch_bytes(rows, h));
  launch_layernorm_backward(dy.data, x.data, gamma.data, x.dtype, mean.as<float>(),
                            rstd.as<float>(), rows, h, dx.data, dgamma.as<float>(),
                            dbeta.as<float>(), s, compute_);
}

void CudaBackend::layernorm_backward_add(Tensor dy, Tensor x, Tensor gamma, Tensor mean,
                                         Tensor rstd, Tensor dx, Tensor dgamma, Tensor dbeta,
                                         Tensor dres, Tensor dres_colsum) {
  const int64_t h = gamma.numel();
  if (!norm_backward_one_pass_fits(h, x.dtype, dy.data, x.data, gamma.data, dres.data)) {
    Backend::layernorm_backward_add(dy, x, gamma, mean, rstd, dx, dgamma, dbeta, dres, dres_colsum);
    return;
  }
  // dL/dx goes into dres here: the checks take it in the place of dx.
  const int64_t rows = layernorm_backward_rows("layernorm_backward_add", dy, x, gamma, mean, rstd,
                                               dres, dgamma, dbeta);
  const bool colsum = dres_colsum.data != nullptr;
  MPLAN_CHECK(!colsum || (dres_colsum.numel() == h && dres_colsum.dtype == DType::kF32),
              "layernorm_backward_add: dres_colsum ", shape_str(dres_colsum), " for h ", h);
  void* s = scratch(layernorm_backward_scratch_bytes(rows, h));
  launch_layernorm_backward_add(dy.data, x.data, gamma.data, x.dtype, mean.as<float>(),
                                rstd.as<float>(), rows, h, dres.data, dgamma.as<float>(),
                                dbeta.as<float>(), colsum ? dres_colsum.as<float>() : nullptr, s,
                                compute_);
}

// ---- Llama-family layers ------------------------------------------------------------------------

namespace {
int64_t rmsnorm_rows(const char* op, const Tensor& x, const Tensor& gamma, const Tensor& rstd) {
  const int64_t h = gamma.numel();
  MPLAN_CHECK(h > 0 && x.numel() % h == 0 && rstd.numel() == x.numel() / h &&
                  rstd.dtype == DType::kF32 && gamma.dtype == x.dtype && is_act(x.dtype),
              op, ": x ", shape_str(x), " gamma ", shape_str(gamma), " rstd ", shape_str(rstd));
  return x.numel() / h;
}
struct QkvShape {
  int64_t tokens, b, d;
};
QkvShape qkv_shape(const char* op, const Tensor& t, int64_t heads, int64_t groups) {
  MPLAN_CHECK(t.ndim == 4 && heads > 0 && groups > 0 && heads % groups == 0 &&
                  t.dim(2) == heads + 2 * groups && is_act(t.dtype),
              op, ": qkv ", shape_str(t), " heads ", heads, " groups ", groups);
  return {t.dim(0) * t.dim(1), t.dim(1), t.dim(3)};
}
}  // namespace

void CudaBackend::rmsnorm_forward(Tensor x, Tensor gamma, float eps, Tensor y, Tensor rstd) {
  const int64_t rows = rmsnorm_rows("rmsnorm_forward", x, gamma, rstd);
  MPLAN_CHECK(y.numel() == x.numel() && y.dtype == x.dtype, "rmsnorm_forward: y ", shape_str(y));
  launch_rmsnorm_forward(x.data, gamma.data, x.dtype, rows, gamma.numel(), eps, y.data,
                         rstd.as<float>(), compute_);
}

void CudaBackend::rmsnorm_backward(Tensor dy, Tensor x, Tensor gamma, Tensor rstd, Tensor dx,
                                   Tensor dgamma) {
  const int64_t rows = rmsnorm_rows("rmsnorm_backward", x, gamma, rstd);
  const int64_t h = gamma.numel();
  MPLAN_CHECK(dy.numel() == x.numel() && dx.numel() == x.numel() && dy.dtype == x.dtype &&
                  dx.dtype == x.dtype && dgamma.numel() == h && dgamma.dtype == DType::kF32,
              "rmsnorm_backward: dy ", shape_str(dy), " dx ", shape_str(dx));
  void* s = scratch(rmsnorm_backward_scratch_bytes(rows, h));
  launch_rmsnorm_backward(dy.data, x.data, gamma.data, x.dtype, rstd.as<float>(), rows, h, dx.data,
                          nullptr, dgamma.as<float>(), s, compute_);
}

void CudaBackend::rmsnorm_backward_add(Tensor dy, Tensor x, Tensor gamma, Tensor rstd, Tensor,
                                       Tensor dgamma, Tensor dres, Tensor dres_colsum) {
  // (The one-pass kernel sums resid's columns for LayerNorm only: no Llama-family preset has
  // biases.)
  if (dres_colsum.data != nullptr) bias_grad_accumulate(dres, dres_colsum);
  const int64_t rows = rmsnorm_rows("rmsnorm_backward_add", x, gamma, rstd);
  const int64_t h = gamma.numel();
  MPLAN_CHECK(dy.numel() == x.numel() && dres.numel() == x.numel() && dy.dtype == x.dtype &&
                  dres.dtype == x.dtype && dgamma.numel() == h && dgamma.dtype == DType::kF32,
              "rmsnorm_backward_add: dy ", shape_str(dy), " dres ", shape_str(dres));
  void* s = scratch(rmsnorm_backward_scratch_bytes(rows, h));
  launch_rmsnorm_backward(dy.data, x.data, gamma.data, x.dtype, rstd.as<float>(), rows, h, nullptr,
                          dres.data, dgamma.as<float>(), s, compute_);
}

void CudaBackend::swiglu_forward(Tensor x, Tensor y) {
  MPLAN_CHECK(is_act(x.dtype) && y.dtype == x.dtype && x.numel() == 2 * y.numel(),
              "swiglu_forward: x ", shape_str(x), " y ", shape_str(y));
  launch_swiglu_forward(x.data, x.dtype, y.rows(), y.cols(), y.data, compute_);
}

void CudaBackend::swiglu_backward(Tensor dy, Tensor x, Tensor dx) {
  MPLAN_CHECK(is_act(x.dtype) && dy.dtype == x.dtype && dx.dtype == x.dtype &&
                  x.numel() == 2 * dy.numel() && dx.numel() == x.numel(),
              "swiglu_backward: dy ", shape_str(dy), " x ", shape_str(x), " dx ", shape_str(dx));
  launch_swiglu_backward(dy.data, x.data, x.dtype, dy.rows(), dy.cols(), dx.data, compute_);
}

void CudaBackend::rope(Tensor qkv, int64_t heads, int64_t groups, int64_t rot_dim, float base,
                       bool inverse) {
  const QkvShape q = qkv_shape("rope", qkv, heads, groups);
  MPLAN_CHECK(rot_dim > 0 && rot_dim % 2 == 0 && rot_dim <= q.d, "rope: rot_dim ", rot_dim);
  float*& table = rope_tables_[{rot_dim, base}];
  if (table == nullptr) {  // Megatron's f32 inverse frequencies, computed once per shape
    std::vector<float> inv(static_cast<size_t>(rot_dim / 2));
    for (size_t i = 0; i < inv.size(); ++i)
      inv[i] = static_cast<float>(
          1.0 / std::pow(static_cast<double>(base), static_cast<double>(2 * i) / rot_dim));
    table = static_cast<float*>(device_alloc(inv.size() * sizeof(float), "rope"));
    MPLAN_CUDA_CHECK(
        cudaMemcpy(table, inv.data(), inv.size() * sizeof(float), cudaMemcpyHostToDevice));
  }
  launch_rope(qkv.data, qkv.dtype, q.tokens, q.b, heads, groups, q.d, rot_dim, table, inverse,
              compute_);
}

// ---- attention ----------------------------------------------------------------------------------

void CudaBackend::attention_forward(Tensor qkv, Tensor out, Tensor lse, float scale) {
  const AttentionShape sh = attention_shape(qkv, out, lse);
  launch_attention_forward(sh, qkv.data, out.data, lse.as<float>(), scale, qkv.dtype,
                           attention_kernels_, compute_);
}

void CudaBackend::attention_backward(Tensor qkv, Tensor out, Tensor dout, Tensor lse, float scale,
                                     Tensor dqkv, Tensor dqkv_colsum) {
  const AttentionShape sh = attention_shape(qkv, out, lse);
  MPLAN_CHECK(dout.numel() == out.numel() && dout.dtype == out.dtype &&
                  dqkv.numel() == qkv.numel() && dqkv.dtype == qkv.dtype,
              "attention_backward: dout ", shape_str(dout), " dqkv ", shape_str(dqkv));
  const bool colsum = dqkv_colsum.data != nullptr;
  MPLAN_CHECK(!colsum || (dqkv_colsum.dtype == DType::kF32 &&
                          dqkv_colsum.numel() == (sh.heads + 2 * sh.groups) * sh.d),
              "attention_backward: dqkv_colsum ", shape_str(dqkv_colsum));
  void* s = scratch(attention_backward_scratch_bytes(sh));
  const bool fused = colsum && attention_bias_grad_fused_;
  const bool summed = launch_attention_backward(
      sh, qkv.data, out.data, dout.data, lse.as<float>(), scale, dqkv.data, qkv.dtype,
      attention_kernels_, s, fused ? dqkv_colsum.as<float>() : nullptr, compute_);
  if (colsum && !summed) bias_grad_accumulate(dqkv, dqkv_colsum);
}

// ---- embeddings ---------------------------------------------------------------------------------

void CudaBackend::embedding_forward(Tensor tokens, Tensor wte, int64_t vocab_start, Tensor out) {
  const int64_t n_tok = tokens.numel(), h = wte.cols();
  MPLAN_CHECK(tokens.dtype == DType::kI32 && out.numel() == n_tok * h && out.dtype == wte.dtype &&
                  is_act(wte.dtype),
              "embedding_forward: tokens ", shape_str(tokens), " wte ", shape_str(wte), " out ",
              shape_str(out));
  launch_embedding_forward(tokens.as<int32_t>(), n_tok, wte.data, wte.dtype, wte.rows(), h,
                           vocab_start, out.data, compute_);
}

void CudaBackend::embedding_backward(Tensor tokens, Tensor dout, int64_t vocab_start, Tensor dwte) {
  const int64_t n_tok = tokens.numel(), h = dwte.cols(), vocab_local = dwte.rows();
  MPLAN_CHECK(tokens.dtype == DType::kI32 && dout.numel() == n_tok * h &&
                  dwte.dtype == DType::kF32 && is_act(dout.dtype),
              "embedding_backward: tokens ", shape_str(tokens), " dout ", shape_str(dout), " dwte ",
              shape_str(dwte));
  const size_t bytes = embedding_backward_scratch_bytes(n_tok, vocab_local);
  void* s = scratch(bytes);
  launch_embedding_backward(tokens.as<int32_t>(), n_tok, dout.data, dout.dtype, vocab_local, h,
                            vocab_start, dwte.as<float>(), s, scratch_bytes_, compute_);
}

void CudaBackend::add_position_embedding(Tensor x, Tensor wpe, int64_t s_offset) {
  MPLAN_CHECK(x.ndim == 3 && wpe.cols() == x.dim(2) && wpe.dtype == x.dtype && s_offset >= 0 &&
                  s_offset + x.dim(0) <= wpe.rows(),
              "add_position_embedding: x ", shape_str(x), " wpe ", shape_str(wpe), " s_offset ",
              s_offset);
  launch_add_position_embedding(x.data, x.dtype, x.dim(0), x.dim(1), x.dim(2), wpe.data, s_offset,
                                compute_);
}

void CudaBackend::position_embedding_backward(Tensor dx, Tensor dwpe, int64_t s_offset) {
  MPLAN_CHECK(dx.ndim == 3 && dwpe.cols() == dx.dim(2) && dwpe.dtype == DType::kF32 &&
                  s_offset >= 0 && s_offset + dx.dim(0) <= dwpe.rows(),
              "position_embedding_backward: dx ", shape_str(dx), " dwpe ", shape_str(dwpe),
              " s_offset ", s_offset);
  launch_position_embedding_backward(dx.data, dx.dtype, dx.dim(0), dx.dim(1), dx.dim(2),
                                     dwpe.as<float>(), s_offset, compute_);
}

// ---- cross-entropy ------------------------------------------------------------------------------

void CudaBackend::xent_local_max(Tensor logits, Tensor row_max) {
  const int64_t rows = row_max.numel();
  MPLAN_CHECK(rows > 0 && logits.numel() % rows == 0 && row_max.dtype == DType::kF32 &&
                  is_act(logits.dtype),
              "xent_local_max: logits ", shape_str(logits), " row_max ", shape_str(row_max));
  launch_xent_local_max(logits.data, logits.dtype, rows, logits.numel() / rows, row_max.as<float>(),
                        compute_);
}

void CudaBackend::xent_local_stats(Tensor logits, Tensor targets, int64_t vocab_start,
                                   Tensor row_max, Tensor stats) {
  const int64_t rows = targets.numel();
  MPLAN_CHECK(rows > 0 && logits.numel() % rows == 0 && targets.dtype == DType::kI32 &&
                  row_max.numel() == rows && stats.numel() == 2 * rows &&
                  stats.dtype == DType::kF32 && is_act(logits.dtype),
              "xent_local_stats: logits ", shape_str(logits), " stats ", shape_str(stats));
  launch_xent_local_stats(logits.data, logits.dtype, rows, logits.numel() / rows,
                          targets.as<int32_t>(), vocab_start, row_max.as<float>(),
                          stats.as<float>(), compute_);
}

void CudaBackend::xent_local_max_and_stats(Tensor logits, Tensor targets, int64_t vocab_start,
                                           Tensor row_max, Tensor stats) {
  const int64_t rows = targets.numel();
  MPLAN_CHECK(rows > 0 && logits.numel() % rows == 0 && targets.dtype == DType::kI32 &&
                  row_max.numel() == rows && row_max.dtype == DType::kF32 &&
                  stats.numel() == 2 * rows && stats.dtype == DType::kF32 && is_act(logits.dtype),
              "xent_local_max_and_stats: logits ", shape_str(logits), " row_max ",
              shape_str(row_max), " stats ", shape_str(stats));
  launch_xent_local_max_and_stats(logits.data, logits.dtype, rows, logits.numel() / rows,
                                  targets.as<int32_t>(), vocab_start, row_max.as<float>(),
                                  stats.as<float>(), compute_);
}

void CudaBackend::xent_loss_and_grad(Tensor logits, Tensor targets, int64_t vocab_start,
                                     Tensor row_max, Tensor stats, float grad_scale, Tensor loss) {
  const int64_t rows = targets.numel();
  MPLAN_CHECK(rows > 0 && logits.numel() % rows == 0 && targets.dtype == DType::kI32 &&
                  row_max.numel() == rows && stats.numel() == 2 * rows && loss.numel() == rows &&
                  loss.dtype == DType::kF32 && is_act(logits.dtype),
              "xent_loss_and_grad: logits ", shape_str(logits), " loss ", shape_str(loss));
  launch_xent_loss_and_grad(logits.data, logits.dtype, rows, logits.numel() / rows,
                            targets.as<int32_t>(), vocab_start, row_max.as<float>(),
                            stats.as<float>(), grad_scale, loss.as<float>(), compute_);
}

void CudaBackend::xent_max_stats_loss_and_grad(Tensor logits, Tensor targets, int64_t vocab_start,
                                               Tensor row_max, Tensor stats, float grad_scale,
                                               Tensor loss) {
  const int64_t rows = targets.numel();
  MPLAN_CHECK(rows > 0 && logits.numel() % rows == 0 && targets.dtype == DType::kI32 &&
                  row_max.numel() == rows && row_max.dtype == DType::kF32 &&
                  stats.numel() == 2 * rows && stats.dtype == DType::kF32 && loss.numel() == rows &&
                  loss.dtype == DType::kF32 && is_act(logits.dtype),
              "xent_max_stats_loss_and_grad: logits ", shape_str(logits), " row_max ",
              shape_str(row_max), " stats ", shape_str(stats), " loss ", shape_str(loss));
  if (xent_fused_ && launch_xent_fused(logits.data, logits.dtype, rows, logits.numel() / rows,
                                       targets.as<int32_t>(), vocab_start, row_max.as<float>(),
                                       stats.as<float>(), grad_scale, loss.as<float>(), compute_))
    return;
  Backend::xent_max_stats_loss_and_grad(logits, targets, vocab_start, row_max, stats, grad_scale,
                                        loss);
}

void CudaBackend::sum(Tensor x, Tensor out, bool accumulate) {
  MPLAN_CHECK(x.dtype == DType::kF32 && out.dtype == DType::kF32 && out.numel() == 1, "sum: x ",
              shape_str(x), " out ", shape_str(out));
  void* s = scratch(vector_sum_scratch_bytes(x.numel()));
  launch_vector_sum(x.as<float>(), x.numel(), out.as<float>(), accumulate, false, s, compute_);
}

// ---- optimizer ----------------------------------------------------------------------------------

void CudaBackend::sum_squares_accumulate(Tensor x, Tensor out) {
  MPLAN_CHECK(x.dtype == DType::kF32 && out.dtype == DType::kF32 && out.numel() == 1,
              "sum_squares: x ", shape_str(x), " out ", shape_str(out));
  void* s = scratch(vector_sum_scratch_bytes(x.numel()));
  launch_vector_sum(x.as<float>(), x.numel(), out.as<float>(), true, true, s, compute_);
}

void CudaBackend::adamw(const AdamW& hp, Tensor param, Tensor grad, Tensor m, Tensor v,
                        Tensor param_act) {
  const int64_t n = param.numel();
  MPLAN_CHECK(param.dtype == DType::kF32 && grad.dtype == DType::kF32 && m.dtype == DType::kF32 &&
                  v.dtype == DType::kF32 && grad.numel() == n && m.numel() == n && v.numel() == n,
              "adamw: param ", shape_str(param), " grad ", shape_str(grad));
  MPLAN_CHECK(hp.step >= 1, "adamw: step ", hp.step);
  if (param_act.data != nullptr)
    MPLAN_CHECK(param_act.numel() == n && is_act(param_act.dtype), "adamw: param_act ",
                shape_str(param_act));
  const double bc1 = 1.0 - std::pow(static_cast<double>(hp.beta1), static_cast<double>(hp.step));
  const double bc2 = 1.0 - std::pow(static_cast<double>(hp.beta2), static_cast<double>(hp.step));
  AdamWArgs a{};
  a.beta1 = hp.beta1;
  a.beta2 = hp.beta2;
  a.eps = hp.eps;
  a.grad_scale = hp.grad_scale;
  a.decay = hp.weight_decay > 0 ? 1.0f - hp.lr * hp.weight_decay : 1.0f;
  a.step_size = static_cast<float>(static_cast<double>(hp.lr) / bc1);
  a.bc2_sqrt = static_cast<float>(std::sqrt(bc2));
  launch_adamw(a, param.as<float>(), grad.as<float>(), m.as<float>(), v.as<float>(), param_act.data,
               param_act.data ? param_act.dtype : DType::kBF16, n, compute_);
}

}  // namespace mplan::exec::cuda

namespace mplan::exec {

std::unique_ptr<Backend> make_cuda_backend(int device) {
  return std::make_unique<cuda::CudaBackend>(device);
}

int64_t cuda_free_bytes(int device) {
  MPLAN_CUDA_CHECK(cudaSetDevice(device));
  size_t free_b = 0, total_b = 0;
  MPLAN_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  return static_cast<int64_t>(free_b);
}

int cuda_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no device" error
    return 0;
  }
  return n;
}

}  // namespace mplan::exec
