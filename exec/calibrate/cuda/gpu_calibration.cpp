// `mplan calibrate` on the GPU: timers, the compute measurements and the NCCL measurements.
// Timing: CUDA events around the op, warm-up first, the median of the repeats, each repeat after
// a 256 MiB write that evicts the L2 cache (as exec/cuda/tools/gpu_kernel_bench.cpp); with
// `heat_ms`, GEMMs and attention after that long of 8192^3 GEMMs (the clock a GEMM-only load
// holds under the power limit); NCCL: host time of back-to-back calls after an MPI barrier and a
// stream synchronize, as nccl-tests does.
#include "exec/calibrate/cuda/gpu_calibration.hpp"

#include <cuda_runtime.h>
#include <mpi.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <ctime>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>

#include "exec/cuda/cuda_check.hpp"
#include "exec/cuda/kernels.hpp"
#include "exec/cuda/nccl_comm.hpp"

namespace mplan::exec::calibrate {

using cuda::CudaBackend;

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::string version_text(int v) {  // 12040 -> "12.4"
  return cat(v / 1000, ".", (v % 1000) / 10);
}

std::string kernel_driver_version() {
  std::ifstream f("/proc/driver/nvidia/version");
  std::string line;
  if (f && std::getline(f, line)) {
    // "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build ...":
    // the first word after "Kernel Module" that is a dotted number.
    const auto at = line.find("Kernel Module");
    if (at != std::string::npos) {
      std::istringstream rest(line.substr(at + 13));
      std::string v;
      while (rest >> v)
        if (std::isdigit(static_cast<unsigned char>(v[0])) && v.find('.') != std::string::npos)
          return v;
    }
  }
  return "unknown";
}

void check_time(double v, const std::string& what) {
  if (!(v > 0) || !std::isfinite(v))
    MPLAN_FATAL("calibrate: ", what, ": measured time ", v, " is not positive and finite");
}

// Owns the events and the L2-flush buffer; times functions on the compute stream.
class Timer {
 public:
  Timer(CudaBackend& g, int warmup, int reps)
      : g_(g), s_(g.stream(Stream::kCompute)), warmup_(warmup), reps_(reps) {
    MPLAN_CUDA_CHECK(cudaEventCreate(&start_));
    MPLAN_CUDA_CHECK(cudaEventCreate(&stop_));
    flush_ = g_.alloc(DType::kF32, {64 << 20}, "calibrate-flush");  // 256 MiB
  }
  ~Timer() {
    g_.release(flush_);
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
  }
  Timer(const Timer&) = delete;
  Timer& operator=(const Timer&) = delete;

  void flush(int i) {
    MPLAN_CUDA_CHECK(cudaMemsetAsync(flush_.data, i & 0xff, flush_.bytes(), s_));
  }
  // Milliseconds of one call of fn between two events on the compute stream.
  double once_ms(const std::function<void()>& fn) {
    MPLAN_CUDA_CHECK(cudaEventRecord(start_, s_));
    fn();
    MPLAN_CUDA_CHECK(cudaEventRecord(stop_, s_));
    MPLAN_CUDA_CHECK(cudaEventSynchronize(stop_));
    float t = 0;
    MPLAN_CUDA_CHECK(cudaEventElapsedTime(&t, start_, stop_));
    return t;
  }
  // Median milliseconds of fn over the repeats, each after an L2 flush; with `heated`, the
  // repeats follow the heater (set_heater) with no pause.
  double median_ms(const std::function<void()>& fn, const std::string& what, bool heated = false) {
    for (int i = 0; i < warmup_; ++i) fn();
    if (heated && heater_) heater_();
    std::vector<double> ms;
    for (int i = 0; i < reps_; ++i) {
      flush(i);
      ms.push_back(once_ms(fn));
    }
    const double m = median(ms);
    check_time(m, what);
    return m;
  }
  cudaStream_t stream() const { return s_; }
  Tensor& flush_buffer() { return flush_; }
  void set_heater(std::function<void()> h) { heater_ = std::move(h); }

 private:
  CudaBackend& g_;
  cudaStream_t s_;
  int warmup_, reps_;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
  Tensor flush_;
  std::function<void()> heater_;
};

Tensor rand(CudaBackend& g, DType t, std::initializer_list<int64_t> shape, uint64_t seed,
            float lo = -1, float hi = 1) {
  Tensor x = g.alloc(t, shape, "calibrate");
  cuda::launch_fill_uniform(x.data, t, x.numel(), seed, lo, hi, g.stream(Stream::kCompute));
  return x;
}

// ---- GEMMs -----------------------------------------------------------------------------------

// Buffers large enough for every shape; each GEMM takes views of them, as the executor's do:
// fwd x (m, k) · W (n, k)^T -> y (m, n) bf16 (+ bias, + GeLU with aux); dx dy (m, k) · W (k, n)
// -> (m, n) bf16 (dx_dgelu: times gelu'(aux)); dw dy^T (m, k) stored (k, m) · x (k, n) -> (m, n)
// f32, accumulated.
struct GemmBuffers {
  Tensor a, b, c, aux, c32, bias;
};

GemmBuffers gemm_buffers(CudaBackend& g, const std::vector<GemmShape>& shapes) {
  int64_t a = 1, b = 1, c = 1, aux = 1, c32 = 1, n = 1;
  for (const GemmShape& s : shapes) {
    a = std::max(a, s.m * s.k);
    b = std::max(b, s.k * s.n);
    n = std::max(n, s.n);
    if (s.kind == "dw")
      c32 = std::max(c32, s.m * s.n);
    else
      c = std::max(c, s.m * s.n);
    if (s.kind == "fwd_gelu" || s.kind == "dx_dgelu" || s.residual) aux = std::max(aux, s.m * s.n);
  }
  GemmBuffers bufs;
  bufs.a = rand(g, DType::kBF16, {a}, 11);
  bufs.b = rand(g, DType::kBF16, {b}, 12, -0.05f, 0.05f);
  bufs.c = g.alloc(DType::kBF16, {c}, "calibrate");
  bufs.aux = rand(g, DType::kBF16, {aux}, 15, -3, 3);  // a pre-activation, or the residual
  bufs.c32 = rand(g, DType::kF32, {c32}, 13);
  bufs.bias = rand(g, DType::kBF16, {n}, 14);
  return bufs;
}

void release(CudaBackend& g, GemmBuffers& b) {
  for (Tensor* t : {&b.a, &b.b, &b.c, &b.aux, &b.c32, &b.bias}) g.release(*t);
}

// Issues one GEMM of shape s on the buffers.
void run_gemm(CudaBackend& g, const GemmBuffers& b, const GemmShape& s) {
  const Tensor a = make_tensor(b.a.data, DType::kBF16, {s.m * s.k});
  const Tensor w = make_tensor(b.b.data, DType::kBF16, {s.k * s.n});
  if (s.kind == "dw") {
    const GemmArgs args{.trans_a = true, .m = s.m, .n = s.n, .k = s.k, .beta = 1.0f};
    g.gemm(args, a, w, make_tensor(b.c32.data, DType::kF32, {s.m * s.n}));
    return;
  }
  const Tensor c = make_tensor(b.c.data, DType::kBF16, {s.m * s.n});
  if (s.kind == "dx") {
    g.gemm(GemmArgs{.m = s.m, .n = s.n, .k = s.k}, a, w, c);
    return;
  }
  if (s.kind == "dx_dgelu") {
    g.gemm(GemmArgs{.m = s.m, .n = s.n, .k = s.k, .epilogue = Epilogue::kDGelu}, a, w, c, {},
           make_tensor(b.aux.data, DType::kBF16, {s.m * s.n}));
    return;
  }
  const Epilogue epi = s.kind == "fwd_gelu" ? Epilogue::kBiasGelu
                       : s.residual ? (s.bias ? Epilogue::kBiasResidual : Epilogue::kResidual)
                       : s.bias     ? Epilogue::kBias
                                    : Epilogue::kNone;
  const GemmArgs args{.trans_b = true, .m = s.m, .n = s.n, .k = s.k, .epilogue = epi};
  const Tensor bias =
      epilogue_has_bias(epi) ? make_tensor(b.bias.data, DType::kBF16, {s.n}) : Tensor{};
  // aux: written by the GeLU epilogue, read as the residual
  const Tensor aux =
      epilogue_has_aux(epi) ? make_tensor(b.aux.data, DType::kBF16, {s.m * s.n}) : Tensor{};
  g.gemm(args, a, w, c, bias, aux);
}

// Holds the GPU at its power limit for about `ms` milliseconds: back-to-back 8192^3 GEMMs on the
// compute stream, as many as the first one's time says fill `ms`.
class Heater {
 public:
  Heater(CudaBackend& g, Timer& timer, double ms) : g_(g) {
    if (ms <= 0) return;
    b_ = gemm_buffers(g_, {shape_});
    run_gemm(g_, b_, shape_);  // plans the shape
    const double one = timer.once_ms([&] { run_gemm(g_, b_, shape_); });
    check_time(one, "heater GEMM");
    calls_ = std::max(1, static_cast<int>(std::lround(ms / one)));
  }
  ~Heater() {
    if (calls_ > 0) release(g_, b_);
  }
  Heater(const Heater&) = delete;
  Heater& operator=(const Heater&) = delete;
  void operator()() {
    for (int i = 0; i < calls_; ++i) run_gemm(g_, b_, shape_);
  }
  bool on() const { return calls_ > 0; }
  int calls() const { return calls_; }

 private:
  CudaBackend& g_;
  const GemmShape shape_{8192, 8192, 8192, "fwd", "heater", false};
  GemmBuffers b_;
  int calls_ = 0;
};

std::string shape_text(const GemmShape& s) {
  return cat(s.layer, " ", s.kind, " m", s.m, " n", s.n, " k", s.k);
}

void measure_gemms(CudaBackend& g, Timer& timer, const CalibrationSettings& s, Measurements& m,
                   std::ostream& log) {
  const auto t0 = Clock::now();
  GemmBuffers b = gemm_buffers(g, s.gemms);
  for (const GemmShape& shape : s.gemms) {
    const double ms = timer.median_ms([&] { run_gemm(g, b, shape); }, shape_text(shape), true);
    m.gemms.push_back({shape, ms});
  }
  release(g, b);
  log << "  GEMMs: " << s.gemms.size() << " shapes in " << seconds_since(t0) << " s\n"
      << std::flush;
}

// ---- attention ---------------------------------------------------------------------------------

void measure_attention(CudaBackend& g, Timer& timer, const CalibrationSettings& s, Measurements& m,
                       std::ostream& log) {
  const auto t0 = Clock::now();
  for (const AttentionShape& a : s.attention) {
    const DType bf = DType::kBF16;
    Tensor qkv = rand(g, bf, {a.seq, a.batch, 3 * a.heads, a.head_dim}, 21, -2, 2);
    Tensor out = g.alloc(bf, {a.seq, a.batch, a.heads, a.head_dim}, "calibrate");
    Tensor lse = g.alloc(DType::kF32, {a.batch, a.heads, a.seq}, "calibrate");
    Tensor dout = rand(g, bf, {a.seq, a.batch, a.heads, a.head_dim}, 22);
    Tensor dqkv = g.alloc(bf, {a.seq, a.batch, 3 * a.heads, a.head_dim}, "calibrate");
    const float scale = 1.0f / std::sqrt(static_cast<float>(a.head_dim));
    const std::string what =
        cat("attention b", a.batch, " heads", a.heads, " s", a.seq, " d", a.head_dim);
    const double fwd =
        timer.median_ms([&] { g.attention_forward(qkv, out, lse, scale); }, what + " fwd", true);
    const double bwd = timer.median_ms(
        [&] { g.attention_backward(qkv, out, dout, lse, scale, dqkv); }, what + " bwd", true);
    m.attention.push_back({a, fwd, bwd});
    for (Tensor* t : {&qkv, &out, &lse, &dout, &dqkv}) g.release(*t);
  }
  log << "  attention: " << s.attention.size() << " shapes in " << seconds_since(t0) << " s\n"
      << std::flush;
}

// ---- memory-bound kernels ----------------------------------------------------------------------

// The four norms (LayerNorm and RMSNorm, forward and backward) over rows x h: row-wise kernels
// whose rate depends on the row width, so each sample carries it.
void measure_norms(CudaBackend& g, Timer& timer, int64_t rows, int64_t h, Measurements& m) {
  const DType bf = DType::kBF16;
  const double e = 2.0, rh = static_cast<double>(rows * h);
  const std::string shape = cat(rows, "x", h);
  Tensor x = rand(g, bf, {rows, h}, 81, -3, 3), y = g.alloc(bf, {rows, h}, "calibrate");
  Tensor dy = rand(g, bf, {rows, h}, 82), dx = g.alloc(bf, {rows, h}, "calibrate");
  Tensor gamma = rand(g, bf, {h}, 83, 0.5f, 1.5f), beta = rand(g, bf, {h}, 84);
  Tensor mean = g.alloc(DType::kF32, {rows}, "calibrate");
  Tensor rstd = g.alloc(DType::kF32, {rows}, "calibrate");
  Tensor dg = rand(g, DType::kF32, {h}, 85), db = rand(g, DType::kF32, {h}, 86);
  auto add = [&](const char* kind, double bytes, const std::function<void()>& fn) {
    m.memory_bound.push_back({kind, shape, bytes, timer.median_ms(fn, cat(kind, " ", shape)), h});
  };
  add("layernorm_forward", 2 * rh * e,
      [&] { g.layernorm_forward(x, gamma, beta, 1e-5f, y, mean, rstd); });
  add("layernorm_backward", 3 * rh * e,
      [&] { g.layernorm_backward(dy, x, gamma, mean, rstd, dx, dg, db); });
  add("rmsnorm_forward", 2 * rh * e, [&] { g.rmsnorm_forward(x, gamma, 1e-5f, y, rstd); });
  add("rmsnorm_backward", 3 * rh * e, [&] { g.rmsnorm_backward(dy, x, gamma, rstd, dx, dg); });
  for (Tensor* t : {&x, &y, &dy, &dx, &gamma, &beta, &mean, &rstd, &dg, &db}) g.release(*t);
}

void measure_memory_bound(CudaBackend& g, Timer& timer, const CalibrationSettings& s,
                          Measurements& m, std::ostream& log) {
  const auto t0 = Clock::now();
  const DType bf = DType::kBF16;
  const double e = 2.0;
  const int64_t h = kDefaultMemoryWidth;
  for (const int64_t rows : s.memory_rows) {
    const int64_t n = rows * h;
    const double rh = static_cast<double>(n);
    const std::string shape = cat(rows, "x", h);
    auto add = [&](const char* kind, double bytes, const std::function<void()>& fn,
                   const std::string& sh) {
      m.memory_bound.push_back({kind, sh, bytes, timer.median_ms(fn, cat(kind, " ", sh))});
    };
    {
      Tensor x = rand(g, bf, {rows, h}, 31, -3, 3), y = g.alloc(bf, {rows, h}, "calibrate");
      Tensor dy = rand(g, bf, {rows, h}, 32), dx = g.alloc(bf, {rows, h}, "calibrate");
      Tensor db = rand(g, DType::kF32, {h}, 36);
      add(
          "copy", 2 * rh * e, [&] { g.copy(y, x); }, shape);
      add(
          "add", 3 * rh * e, [&] { g.add(y, x, dy); }, shape);
      add(
          "fill", rh * e, [&] { g.fill(y, 0.5f); }, shape);
      measure_norms(g, timer, rows, h, m);
      add(
          "gelu_forward", 2 * rh * e, [&] { g.gelu_forward(x, y); }, shape);
      add(
          "gelu_backward", 3 * rh * e, [&] { g.gelu_backward(dy, x, dx); }, shape);
      add(
          "bias_grad", rh * e, [&] { g.bias_grad_accumulate(dy, db); }, shape);
      for (Tensor* t : {&x, &y, &dy, &dx, &db}) g.release(*t);
    }
    {
      // SwiGLU over an FFN width of h: x (rows, 2h) -> y (rows, h).
      Tensor x = rand(g, bf, {rows, 2 * h}, 41, -3, 3), y = g.alloc(bf, {rows, h}, "calibrate");
      Tensor dy = rand(g, bf, {rows, h}, 42), dx = g.alloc(bf, {rows, 2 * h}, "calibrate");
      add(
          "swiglu_forward", 3 * rh * e, [&] { g.swiglu_forward(x, y); }, shape);
      add(
          "swiglu_backward", 5 * rh * e, [&] { g.swiglu_backward(dy, x, dx); }, shape);
      for (Tensor* t : {&x, &y, &dy, &dx}) g.release(*t);
    }
    {
      // Llama-style attention input: 32 query heads, 8 groups, head dim 128 per token.
      const int64_t heads = 32, groups = 8, d = 128;
      Tensor qkv = rand(g, bf, {rows, 1, heads + 2 * groups, d}, 51);
      const std::string sh = cat(rows, "x", heads, "+2x", groups, "x", d);
      add(
          "rope", 2 * e * static_cast<double>(rows * (heads + groups) * d),
          [&] { g.rope(qkv, heads, groups, d, 500000.0f, false); }, sh);
      g.release(qkv);
    }
    {
      const int64_t vocab = 32000;
      std::vector<int32_t> ids(static_cast<size_t>(rows));
      std::mt19937 gen(5);
      std::uniform_int_distribution<int32_t> u(0, vocab - 1);
      for (auto& v : ids) v = u(gen);
      Tensor tok = g.alloc(DType::kI32, {rows, 1}, "calibrate");
      g.upload(tok, ids.data());
      Tensor wte = rand(g, bf, {vocab, h}, 61), out = g.alloc(bf, {rows, 1, h}, "calibrate");
      Tensor dout = rand(g, bf, {rows, 1, h}, 62), dwte = rand(g, DType::kF32, {vocab, h}, 63);
      Tensor dwpe = rand(g, DType::kF32, {rows, h}, 64);
      add(
          "embedding_forward", 2 * rh * e, [&] { g.embedding_forward(tok, wte, 0, out); }, shape);
      add(
          "embedding_backward", rh * (e + 8.0), [&] { g.embedding_backward(tok, dout, 0, dwte); },
          shape);
      add(
          "position_embedding_backward", rh * e + 2 * rh * 4.0,
          [&] { g.position_embedding_backward(dout, dwpe, 0); }, shape);
      g.release(wte);
      g.release(dwte);
      // Cross-entropy over 32000 logits per row: the three steps of one loss.
      Tensor logits = rand(g, bf, {rows, vocab}, 65, -8, 8);
      Tensor mx = g.alloc(DType::kF32, {rows}, "calibrate");
      Tensor st = g.alloc(DType::kF32, {2, rows}, "calibrate");
      Tensor loss = g.alloc(DType::kF32, {rows}, "calibrate");
      const double lb = static_cast<double>(rows) * vocab * e;
      add(
          "cross_entropy", 4 * lb,
          [&] {
            g.xent_local_max(logits, mx);
            g.xent_local_stats(logits, tok, 0, mx, st);
            g.xent_loss_and_grad(logits, tok, 0, mx, st, 1.0f / static_cast<float>(rows), loss);
          },
          cat(rows, "x", vocab));
      for (Tensor* t : {&tok, &out, &dout, &dwpe, &logits, &mx, &st, &loss}) g.release(*t);
    }
    {
      // The optimizer over n parameters: f32 master, grad, m, v and the bf16 copy.
      Tensor p = rand(g, DType::kF32, {n}, 71), gr = rand(g, DType::kF32, {n}, 72, -1e-3f, 1e-3f);
      Tensor mm = rand(g, DType::kF32, {n}, 73, -1e-4f, 1e-4f);
      Tensor v = rand(g, DType::kF32, {n}, 74, 0.0f, 1e-6f);
      Tensor pa = g.alloc(bf, {n}, "calibrate"), one = g.alloc(DType::kF32, {1}, "calibrate");
      g.fill(one, 0.0f);
      const Backend::AdamW hp{1e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 1.0f, 10};
      add(
          "adamw", rh * (16.0 + 12.0 + 2.0), [&] { g.adamw(hp, p, gr, mm, v, pa); }, cat(n));
      add(
          "grad_norm", rh * 4.0, [&] { g.sum_squares_accumulate(gr, one); }, cat(n));
      for (Tensor* t : {&p, &gr, &mm, &v, &pa, &one}) g.release(*t);
    }
  }
  // The norms at the models' other widths, over the same byte range.
  for (const int64_t w : s.memory_widths)
    for (const int64_t rows : s.memory_rows) measure_norms(g, timer, rows * h / w, w, m);
  log << "  memory-bound kernels: " << m.memory_bound.size() << " timings in " << seconds_since(t0)
      << " s\n"
      << std::flush;
}

// ---- overhead and sustained clock -------------------------------------------------------------

void measure_overhead(CudaBackend& g, Timer& timer, Measurements& m, std::ostream& log) {
  const cudaStream_t s = timer.stream();
  Tensor one = g.alloc(DType::kF32, {1}, "calibrate");
  auto tiny = [&] { cuda::launch_fill(one.data, DType::kF32, 1, 0.0f, s); };
  for (int i = 0; i < 20; ++i) tiny();
  MPLAN_CUDA_CHECK(cudaStreamSynchronize(s));
  OverheadSample o;
  // One tiny kernel alone between two events.
  std::vector<double> alone;
  for (int i = 0; i < 51; ++i) alone.push_back(timer.once_ms(tiny) * 1e3);
  o.kernel_min_us = median(alone);
  // Back to back: 100 tiny kernels queued behind 1 ms of memsets, so the GPU never waits for the
  // host; the events bracket only the kernels.
  const int n = 100;
  std::vector<double> b2b;
  for (int r = 0; r < 7; ++r) {
    for (int i = 0; i < 16; ++i) timer.flush(i);
    b2b.push_back(timer.once_ms([&] {
      for (int i = 0; i < n; ++i) tiny();
    }) * 1e3 / n);
  }
  o.kernel_overhead_us = median(b2b);
  // Host time to issue: batches of 200 launches (below the launch queue's depth), synchronized.
  std::vector<double> host;
  for (int r = 0; r < 7; ++r) {
    MPLAN_CUDA_CHECK(cudaStreamSynchronize(s));
    const auto t0 = Clock::now();
    for (int i = 0; i < 200; ++i) tiny();
    host.push_back(seconds_since(t0) * 1e6 / 200);
    MPLAN_CUDA_CHECK(cudaStreamSynchronize(s));
  }
  o.host_kernel_us = median(host);
  GemmShape small{256, 256, 256, "fwd", "square", false};
  GemmBuffers b = gemm_buffers(g, {small});
  run_gemm(g, b, small);  // plans the shape
  std::vector<double> host_gemm;
  for (int r = 0; r < 7; ++r) {
    MPLAN_CUDA_CHECK(cudaStreamSynchronize(s));
    const auto t0 = Clock::now();
    for (int i = 0; i < 200; ++i) run_gemm(g, b, small);
    host_gemm.push_back(seconds_since(t0) * 1e6 / 200);
    MPLAN_CUDA_CHECK(cudaStreamSynchronize(s));
  }
  o.host_gemm_us = median(host_gemm);
  release(g, b);
  g.release(one);
  o.host_overhead_us = 0.5 * (o.host_kernel_us + o.host_gemm_us);
  check_time(o.kernel_min_us, "tiny kernel alone");
  check_time(o.kernel_overhead_us, "tiny kernels back to back");
  check_time(o.host_overhead_us, "host issue time");
  m.overhead = o;
  log << "  overhead: kernel " << o.kernel_overhead_us << " us back to back, " << o.kernel_min_us
      << " us alone, host " << o.host_overhead_us << " us per op\n"
      << std::flush;
}

void measure_sustained(CudaBackend& g, const CalibrationSettings& s, Measurements& m,
                       std::ostream& log) {
  const GemmShape shape{8192, 8192, 8192, "fwd", "square", false};
  GemmBuffers b = gemm_buffers(g, {shape});
  const cudaStream_t st = g.stream(Stream::kCompute);
  cudaEvent_t e0, e1;
  MPLAN_CUDA_CHECK(cudaEventCreate(&e0));
  MPLAN_CUDA_CHECK(cudaEventCreate(&e1));
  SustainedSample out;
  out.shape = shape;
  const auto t0 = Clock::now();
  const int seconds = std::max(2, static_cast<int>(std::lround(s.sustained_seconds)));
  for (int sec = 0; sec < seconds; ++sec) {
    // Batches of 10 GEMMs, synchronized, until this second of wall time is over.
    int64_t calls = 0;
    double gpu_ms = 0;
    while (seconds_since(t0) < sec + 1.0) {
      MPLAN_CUDA_CHECK(cudaEventRecord(e0, st));
      for (int i = 0; i < 10; ++i) run_gemm(g, b, shape);
      MPLAN_CUDA_CHECK(cudaEventRecord(e1, st));
      MPLAN_CUDA_CHECK(cudaEventSynchronize(e1));
      float ms = 0;
      MPLAN_CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
      gpu_ms += ms;
      calls += 10;
    }
    check_time(gpu_ms, "sustained GEMM");
    out.tflops_per_second.push_back(static_cast<double>(calls) * shape.flops() / (gpu_ms * 1e9));
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  release(g, b);
  m.sustained = out;
  log << "  sustained: " << out.first_tflops() << " TFLOP/s in the first second, "
      << out.last_tflops() << " in the last of " << seconds << "\n"
      << std::flush;
}

// ---- NCCL --------------------------------------------------------------------------------------

// Issues one collective of nccl-tests size `bytes` (bf16) on stream st.
void issue(Collective op, ncclComm_t comm, int rank, int ranks, const Tensor& send,
           const Tensor& recv, double bytes, cudaStream_t st) {
  const size_t e = 2;
  const size_t total = static_cast<size_t>(bytes) / e;  // elements of S
  const size_t per = std::max<size_t>(1, total / static_cast<size_t>(ranks));
  switch (op) {
    case Collective::kAllReduce:
      MPLAN_NCCL_CHECK(ncclAllReduce(send.data, recv.data, std::max<size_t>(1, total), ncclBfloat16,
                                     ncclSum, comm, st));
      break;
    case Collective::kAllGather:
      MPLAN_NCCL_CHECK(ncclAllGather(send.data, recv.data, per, ncclBfloat16, comm, st));
      break;
    case Collective::kReduceScatter:
      MPLAN_NCCL_CHECK(
          ncclReduceScatter(send.data, recv.data, per, ncclBfloat16, ncclSum, comm, st));
      break;
    case Collective::kAllToAll: {
      MPLAN_NCCL_CHECK(ncclGroupStart());
      for (int p = 0; p < ranks; ++p) {
        char* sp = static_cast<char*>(send.data) + static_cast<size_t>(p) * per * e;
        char* rp = static_cast<char*>(recv.data) + static_cast<size_t>(p) * per * e;
        MPLAN_NCCL_CHECK(ncclSend(sp, per, ncclBfloat16, p, comm, st));
        MPLAN_NCCL_CHECK(ncclRecv(rp, per, ncclBfloat16, p, comm, st));
      }
      MPLAN_NCCL_CHECK(ncclGroupEnd());
      break;
    }
    case Collective::kSendRecv:
      if (rank == 0)
        MPLAN_NCCL_CHECK(
            ncclSend(send.data, std::max<size_t>(1, total), ncclBfloat16, 1, comm, st));
      else if (rank == 1)
        MPLAN_NCCL_CHECK(
            ncclRecv(recv.data, std::max<size_t>(1, total), ncclBfloat16, 0, comm, st));
      break;
  }
}

// The size nccl-tests reports for what issue() moves.
double effective_bytes(Collective op, int ranks, double bytes) {
  const double total = std::max(1.0, std::floor(bytes / 2));
  const double per = std::max(1.0, std::floor(total / ranks));
  switch (op) {
    case Collective::kAllReduce:
    case Collective::kSendRecv:
      return total * 2;
    default:
      return per * ranks * 2;
  }
}

}  // namespace

Environment gpu_environment(int device, const std::string& host) {
  Environment env;
  cudaDeviceProp prop{};
  MPLAN_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  env.gpu_name = prop.name;
  int v = 0;
  MPLAN_CUDA_CHECK(cudaRuntimeGetVersion(&v));
  env.cuda_runtime = version_text(v);
  MPLAN_CUDA_CHECK(cudaDriverGetVersion(&v));
  env.cuda_driver = version_text(v);
  env.driver = kernel_driver_version();
  int nv = 0;
  MPLAN_NCCL_CHECK(ncclGetVersion(&nv));
  env.nccl = cat(nv / 10000, ".", (nv / 100) % 100, ".", nv % 100);
  char date[32];
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", &tm);
  env.date = date;
  env.host = host;
  return env;
}

void measure_compute(CudaBackend& g, const CalibrationSettings& s, Measurements& m,
                     std::ostream& log) {
  Timer timer(g, s.warmup, s.reps);
  measure_overhead(g, timer, m, log);
  Heater heater(g, timer, s.heat_ms);
  if (heater.on()) {
    timer.set_heater([&] { heater(); });
    log << "  heater: " << heater.calls() << " GEMMs of 8192^3 (about " << s.heat_ms
        << " ms) before each GEMM and attention shape\n"
        << std::flush;
  }
  measure_gemms(g, timer, s, m, log);
  measure_attention(g, timer, s, m, log);
  measure_memory_bound(g, timer, s, m, log);
  measure_sustained(g, s, m, log);
  MPLAN_CUDA_CHECK(cudaDeviceSynchronize());
}

ncclComm_t make_world_nccl(int rank, int ranks) {
  cuda::disable_nvls_unless_set();
  ncclUniqueId id;
  if (rank == 0) MPLAN_NCCL_CHECK(ncclGetUniqueId(&id));
  MPLAN_MPI_CHECK(MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD));
  ncclComm_t comm = nullptr;
  MPLAN_NCCL_CHECK(ncclCommInitRank(&comm, ranks, id, rank));
  return comm;
}

void measure_nccl(CudaBackend& g, ncclComm_t comm, int rank, int ranks,
                  const CalibrationSettings& s, Measurements& m, std::ostream& log) {
  const auto t0 = Clock::now();
  const cudaStream_t st = g.stream(Stream::kComm);
  double largest = 8;
  for (double b : s.nccl_bytes) largest = std::max(largest, b);
  const int64_t elems = static_cast<int64_t>(largest / 2) + ranks;
  Tensor send = rand(g, DType::kBF16, {elems}, 81), recv = rand(g, DType::kBF16, {elems}, 82);
  MPLAN_CUDA_CHECK(cudaDeviceSynchronize());
  const Collective ops[] = {Collective::kAllReduce, Collective::kAllGather,
                            Collective::kReduceScatter, Collective::kAllToAll,
                            Collective::kSendRecv};
  for (Collective op : ops) {
    for (double bytes : s.nccl_bytes) {
      const int iters = bytes >= (256 << 20) ? 5 : 20;
      for (int i = 0; i < 2; ++i) issue(op, comm, rank, ranks, send, recv, bytes, st);
      MPLAN_CUDA_CHECK(cudaStreamSynchronize(st));
      std::vector<double> per_call;
      for (int r = 0; r < s.reps; ++r) {
        MPLAN_MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
        const auto c0 = Clock::now();
        for (int i = 0; i < iters; ++i) issue(op, comm, rank, ranks, send, recv, bytes, st);
        MPLAN_CUDA_CHECK(cudaStreamSynchronize(st));
        per_call.push_back(seconds_since(c0) / iters);
      }
      double mine = median(per_call), slowest = 0;
      if (op == Collective::kSendRecv && rank > 1) mine = 0;  // not a member of the transfer
      MPLAN_MPI_CHECK(MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
      check_time(slowest, cat(to_string(op), " of ", bytes, " bytes"));
      m.collectives.push_back({op, op == Collective::kSendRecv ? 2 : ranks,
                               effective_bytes(op, ranks, bytes), slowest});
    }
  }
  // Compute beside communication: an 8192^3 GEMM on the compute stream, alone and while 256 MiB
  // all-reduces run on the comm stream (every rank issues the same all-reduces).
  const GemmShape shape{8192, 8192, 8192, "fwd", "square", false};
  GemmBuffers b = gemm_buffers(g, {shape});
  Timer timer(g, 2, s.reps);
  OverlapSample o;
  o.shape = shape;
  o.bytes = 256.0 * (1 << 20);
  std::vector<double> alone;
  for (int i = 0; i < 2; ++i) run_gemm(g, b, shape);
  for (int r = 0; r < s.reps; ++r) alone.push_back(timer.once_ms([&] { run_gemm(g, b, shape); }));
  o.gemm_alone_ms = median(alone);
  double ar_s = 0;
  for (const CollectiveSample& c : m.collectives)
    if (c.op == Collective::kAllReduce && c.bytes <= o.bytes) ar_s = c.seconds;
  // Enough all-reduces to cover every GEMM, the same count on every rank.
  double need = (s.reps + 2) * o.gemm_alone_ms * 1e-3 / std::max(ar_s, 1e-4) + 2;
  MPLAN_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &need, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
  const int comms = std::min(1000, static_cast<int>(std::ceil(need)));
  MPLAN_MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
  for (int i = 0; i < comms; ++i)
    issue(Collective::kAllReduce, comm, rank, ranks, send, recv, o.bytes, st);
  std::vector<double> beside;
  run_gemm(g, b, shape);  // the first GEMM starts as the all-reduces do
  for (int r = 0; r < s.reps; ++r) beside.push_back(timer.once_ms([&] { run_gemm(g, b, shape); }));
  MPLAN_CUDA_CHECK(cudaStreamSynchronize(st));
  o.gemm_with_comm_ms = median(beside);
  check_time(o.gemm_alone_ms, "overlap GEMM alone");
  check_time(o.gemm_with_comm_ms, "overlap GEMM beside all-reduce");
  release(g, b);
  g.release(send);
  g.release(recv);
  if (rank == 0) m.overlap = o;
  MPLAN_MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
  log << "  NCCL: " << m.collectives.size() << " timings on " << ranks << " ranks in "
      << seconds_since(t0) << " s; GEMM beside all-reduce " << o.gemm_with_comm_ms / o.gemm_alone_ms
      << " x alone\n"
      << std::flush;
}

}  // namespace mplan::exec::calibrate
