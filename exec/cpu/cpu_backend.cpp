// CpuBackend: every Backend op on the host. Inputs are read as f32 (bf16 converted exactly),
// products and elementwise math run in f32, row reductions accumulate in f64, and each output
// is rounded to its dtype once (round to nearest even for bf16), where a GPU kernel writes it.
#include "exec/cpu/cpu_backend.hpp"

#include <chrono>

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <vector>

#include "exec/cpu/bf16.hpp"

namespace mplan::exec {

namespace {

using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstMap = Eigen::Map<const RowMat>;

bool is_float(DType t) { return t == DType::kF32 || t == DType::kBF16; }

void check_float(const Tensor& t, const char* what) {
  MPLAN_CHECK(t.data != nullptr || t.numel() == 0, what, ": no data");
  MPLAN_CHECK(is_float(t.dtype), what, ": needs f32 or bf16, got ", to_string(t.dtype));
}

void check_dtype(const Tensor& t, DType d, const char* what) {
  MPLAN_CHECK(t.data != nullptr || t.numel() == 0, what, ": no data");
  MPLAN_CHECK(t.dtype == d, what, ": needs ", to_string(d), ", got ", to_string(t.dtype));
}

void check_numel(const Tensor& t, int64_t n, const char* what) {
  MPLAN_CHECK(t.numel() == n, what, ": needs ", n, " elements, got ", t.numel());
}

// Reads element i of a float tensor as f32.
inline float load(const Tensor& t, int64_t i) {
  return t.dtype == DType::kF32 ? t.as<const float>()[i] : bf16_to_f32(t.as<const uint16_t>()[i]);
}

// Writes v to element i, rounded to the tensor's dtype.
inline void store(const Tensor& t, int64_t i, float v) {
  if (t.dtype == DType::kF32)
    t.as<float>()[i] = v;
  else
    t.as<uint16_t>()[i] = f32_to_bf16(v);
}

// An f32 read view of a float tensor: the data itself when f32, an exact copy when bf16.
class F32View {
 public:
  explicit F32View(const Tensor& t) {
    if (t.dtype == DType::kF32) {
      p_ = t.as<const float>();
    } else {
      buf_.resize(static_cast<size_t>(t.numel()));
      const uint16_t* s = t.as<const uint16_t>();
      for (size_t i = 0; i < buf_.size(); ++i) buf_[i] = bf16_to_f32(s[i]);
      p_ = buf_.data();
    }
  }
  const float* data() const { return p_; }
  float operator[](int64_t i) const { return p_[i]; }

 private:
  const float* p_ = nullptr;
  std::vector<float> buf_;
};

inline float gelu_tanh(float x) {
  constexpr float kC = 0.7978845608028654f;  // sqrt(2 / pi)
  float u = kC * (x + 0.044715f * x * x * x);
  return 0.5f * x * (1.0f + std::tanh(u));
}

inline float gelu_tanh_grad(float x) {
  constexpr float kC = 0.7978845608028654f;
  float u = kC * (x + 0.044715f * x * x * x);
  float t = std::tanh(u);
  return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * kC * (1.0f + 3.0f * 0.044715f * x * x);
}

// The (s, b, heads, d) sizes of an attention call, read from `out` (4-D); the K/V groups from
// qkv's element count (s · b · (heads + 2 groups) · d).
struct AttnDims {
  int64_t s, b, heads, groups, d;
  // Element (si, bi, which = 0/1/2 for Q/K/V, head or group h, di) of qkv: per token the heads'
  // Q, then the groups' K, then the groups' V.
  int64_t qkv_index(int64_t si, int64_t bi, int64_t which, int64_t h, int64_t di) const {
    const int64_t plane = which == 0 ? h : heads + (which - 1) * groups + h;
    return ((si * b + bi) * (heads + 2 * groups) + plane) * d + di;
  }
  int64_t out_index(int64_t si, int64_t bi, int64_t h, int64_t di) const {
    return ((si * b + bi) * heads + h) * d + di;
  }
  int64_t lse_index(int64_t bi, int64_t h, int64_t si) const { return (bi * heads + h) * s + si; }
};

AttnDims attention_dims(const Tensor& qkv, const Tensor& out, const Tensor& lse) {
  MPLAN_CHECK(out.ndim == 4, "attention: out must be (s, b, heads, d), got ", out.ndim, " dims");
  AttnDims a{out.dim(0), out.dim(1), out.dim(2), 0, out.dim(3)};
  a.groups = Backend::attention_groups(qkv, a.s, a.b, a.heads, a.d);
  check_numel(lse, a.b * a.heads * a.s, "attention lse (b, heads, s)");
  check_dtype(lse, DType::kF32, "attention lse");
  check_float(qkv, "attention qkv");
  MPLAN_CHECK(qkv.dtype == out.dtype, "attention: qkv and out dtypes differ");
  return a;
}

// Gathers Q of one (batch, head), or K or V of one (batch, group), into an (s, d) f32 matrix.
void gather_head(const F32View& qkv, const AttnDims& a, int64_t bi, int64_t h, int64_t which,
                 RowMat& m) {
  m.resize(a.s, a.d);
  for (int64_t si = 0; si < a.s; ++si)
    for (int64_t di = 0; di < a.d; ++di) m(si, di) = qkv[a.qkv_index(si, bi, which, h, di)];
}

}  // namespace

// ---- memory ------------------------------------------------------------------------------

CpuBackend::~CpuBackend() {
  for (auto& [ptr, a] : live_) std::free(ptr);
}

Tensor CpuBackend::alloc(DType dtype, std::initializer_list<int64_t> shape, const char* tag) {
  Tensor t = make_tensor(nullptr, dtype, shape);
  size_t bytes = t.bytes();
  size_t rounded = (std::max<size_t>(bytes, 1) + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, rounded);
  MPLAN_CHECK(p != nullptr, "host allocation of ", bytes, " bytes failed (tag ", tag, ")");
  t.data = p;
  live_[p] = Allocation{bytes, tag};
  current_bytes_ += static_cast<int64_t>(bytes);
  peak_bytes_ = std::max(peak_bytes_, current_bytes_);
  TagMemory& m = by_tag_[tag];
  m.current_bytes += static_cast<int64_t>(bytes);
  m.peak_bytes = std::max(m.peak_bytes, m.current_bytes);
  return t;
}

void CpuBackend::release(Tensor& t) {
  if (t.data == nullptr) return;
  auto it = live_.find(t.data);
  MPLAN_CHECK(it != live_.end(), "release of memory this backend did not allocate");
  current_bytes_ -= static_cast<int64_t>(it->second.bytes);
  by_tag_[it->second.tag].current_bytes -= static_cast<int64_t>(it->second.bytes);
  std::free(it->first);
  live_.erase(it);
  t = Tensor{};
}

MemoryStats CpuBackend::memory_stats() const {
  MemoryStats s;
  s.current_bytes = current_bytes_;
  s.peak_bytes = peak_bytes_;
  s.device_peak_bytes = -1;
  return s;
}

void CpuBackend::reset_peak_memory() {
  peak_bytes_ = current_bytes_;
  for (auto& [tag, m] : by_tag_) m.peak_bytes = m.current_bytes;
}

void CpuBackend::upload(Tensor dst, const void* host) {
  if (dst.bytes() > 0) std::memcpy(dst.data, host, dst.bytes());
}

void CpuBackend::download(void* host, Tensor src) {
  if (src.bytes() > 0) std::memcpy(host, src.data, src.bytes());
}

void CpuBackend::copy(Tensor dst, Tensor src) {
  MPLAN_CHECK(dst.dtype == src.dtype, "copy: dtypes differ (", to_string(dst.dtype), " vs ",
              to_string(src.dtype), ")");
  check_numel(dst, src.numel(), "copy dst");
  if (dst.bytes() > 0 && dst.data != src.data) std::memmove(dst.data, src.data, dst.bytes());
}

void CpuBackend::fill(Tensor t, float value) {
  int64_t n = t.numel();
  if (t.dtype == DType::kI32) {
    std::fill_n(t.as<int32_t>(), n, static_cast<int32_t>(value));
  } else if (t.dtype == DType::kF32) {
    std::fill_n(t.as<float>(), n, value);
  } else {
    std::fill_n(t.as<uint16_t>(), n, f32_to_bf16(value));
  }
}

void CpuBackend::cast(Tensor dst, Tensor src) {
  check_float(dst, "cast dst");
  check_float(src, "cast src");
  check_numel(dst, src.numel(), "cast dst");
  int64_t n = src.numel();
  for (int64_t i = 0; i < n; ++i) store(dst, i, load(src, i));
}

// ---- streams -------------------------------------------------------------------------------

Event CpuBackend::record(Stream) { return Event{next_event_++}; }

void CpuBackend::wait(Stream, Event e) {
  MPLAN_CHECK(e.id >= 0 && e.id < next_event_, "wait on an event never recorded: ", e.id);
}

int CpuBackend::mark(Stream) {
  marks_.push_back(std::chrono::duration_cast<std::chrono::nanoseconds>(
                       std::chrono::steady_clock::now().time_since_epoch())
                       .count());
  return static_cast<int>(marks_.size()) - 1;
}

void CpuBackend::read_marks(std::vector<int64_t>& ns) {
  ns.resize(marks_.size());
  for (size_t i = 0; i < marks_.size(); ++i) ns[i] = marks_[i] - marks_[0];
}

// ---- dense math ----------------------------------------------------------------------------

void CpuBackend::gemm(const GemmArgs& g, Tensor a, Tensor b, Tensor c, Tensor bias, Tensor aux) {
  check_float(a, "gemm A");
  check_float(b, "gemm B");
  check_float(c, "gemm C");
  MPLAN_CHECK(a.dtype == b.dtype, "gemm: A and B dtypes differ");
  MPLAN_CHECK(g.m >= 0 && g.n >= 0 && g.k >= 0, "gemm: negative size");
  check_numel(a, g.m * g.k, "gemm A");
  check_numel(b, g.k * g.n, "gemm B");
  check_numel(c, g.m * g.n, "gemm C");
  if (epilogue_has_bias(g.epilogue)) {
    MPLAN_CHECK(g.beta == 0.0f, "gemm: a bias epilogue needs beta = 0");
    check_float(bias, "gemm bias");
    check_numel(bias, g.n, "gemm bias");
  }
  if (epilogue_has_aux(g.epilogue)) {
    check_float(aux, "gemm aux");
    check_numel(aux, g.m * g.n, "gemm aux");
  }
  if (g.epilogue == Epilogue::kDGelu || g.epilogue == Epilogue::kResidual ||
      g.epilogue == Epilogue::kBiasResidual) {
    MPLAN_CHECK(g.alpha == 1.0f && g.beta == 0.0f,
                "gemm: the dgelu and residual epilogues need alpha 1, beta 0");
    MPLAN_CHECK(aux.dtype == c.dtype, "gemm: aux (", to_string(aux.dtype), ") and C (",
                to_string(c.dtype), ") dtypes differ");
  }
  F32View av(a), bv(b);
  ConstMap am(av.data(), g.trans_a ? g.k : g.m, g.trans_a ? g.m : g.k);
  ConstMap bm(bv.data(), g.trans_b ? g.n : g.k, g.trans_b ? g.k : g.n);
  RowMat p(g.m, g.n);
  if (g.k == 0) {
    p.setZero();
  } else if (!g.trans_a && !g.trans_b) {
    p.noalias() = am * bm;
  } else if (g.trans_a && !g.trans_b) {
    p.noalias() = am.transpose() * bm;
  } else if (!g.trans_a && g.trans_b) {
    p.noalias() = am * bm.transpose();
  } else {
    p.noalias() = am.transpose() * bm.transpose();
  }
  const int64_t n = g.n;
  const int64_t total = g.m * g.n;
  switch (g.epilogue) {
    case Epilogue::kNone:
      for (int64_t i = 0; i < total; ++i) {
        float v = g.alpha * p.data()[i];
        if (g.beta != 0.0f) v += g.beta * load(c, i);
        store(c, i, v);
      }
      break;
    case Epilogue::kBias: {
      F32View bs(bias);
      for (int64_t i = 0; i < total; ++i) store(c, i, g.alpha * p.data()[i] + bs[i % n]);
      break;
    }
    case Epilogue::kBiasGelu: {
      F32View bs(bias);
      for (int64_t i = 0; i < total; ++i) {
        float pre = g.alpha * p.data()[i] + bs[i % n];
        store(aux, i, pre);
        store(c, i, gelu_tanh(pre));
      }
      break;
    }
    case Epilogue::kDGelu:
      for (int64_t i = 0; i < total; ++i) store(c, i, p.data()[i] * gelu_tanh_grad(load(aux, i)));
      break;
    case Epilogue::kResidual:  // (aux may be c: each element read before it is written)
      for (int64_t i = 0; i < total; ++i) store(c, i, p.data()[i] + load(aux, i));
      break;
    case Epilogue::kBiasResidual: {
      F32View bs(bias);
      for (int64_t i = 0; i < total; ++i) store(c, i, p.data()[i] + bs[i % n] + load(aux, i));
      break;
    }
  }
}

void CpuBackend::bias_grad_accumulate(Tensor dy, Tensor db) {
  check_float(dy, "bias_grad dy");
  check_dtype(db, DType::kF32, "bias_grad db");
  int64_t n = db.numel();
  MPLAN_CHECK(n > 0 && dy.numel() % n == 0, "bias_grad: dy (", dy.numel(), ") is not rows x n (", n,
              ")");
  int64_t rows = dy.numel() / n;
  std::vector<double> acc(static_cast<size_t>(n), 0.0);
  F32View d(dy);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < n; ++j) acc[static_cast<size_t>(j)] += d[r * n + j];
  float* out = db.as<float>();
  for (int64_t j = 0; j < n; ++j) out[j] += static_cast<float>(acc[static_cast<size_t>(j)]);
}

void CpuBackend::add(Tensor out, Tensor a, Tensor b) {
  check_float(out, "add out");
  check_float(a, "add a");
  check_float(b, "add b");
  MPLAN_CHECK(a.dtype == out.dtype && b.dtype == out.dtype, "add: dtypes differ");
  check_numel(a, out.numel(), "add a");
  check_numel(b, out.numel(), "add b");
  int64_t n = out.numel();
  for (int64_t i = 0; i < n; ++i) store(out, i, load(a, i) + load(b, i));
}

void CpuBackend::scale(Tensor t, float factor) {
  check_float(t, "scale");
  int64_t n = t.numel();
  for (int64_t i = 0; i < n; ++i) store(t, i, load(t, i) * factor);
}

void CpuBackend::gelu_forward(Tensor x, Tensor y) {
  check_float(x, "gelu x");
  check_float(y, "gelu y");
  check_numel(y, x.numel(), "gelu y");
  int64_t n = x.numel();
  for (int64_t i = 0; i < n; ++i) store(y, i, gelu_tanh(load(x, i)));
}

void CpuBackend::gelu_backward(Tensor dy, Tensor x, Tensor dx) {
  check_float(dy, "gelu dy");
  check_float(x, "gelu x");
  check_float(dx, "gelu dx");
  check_numel(x, dy.numel(), "gelu x");
  check_numel(dx, dy.numel(), "gelu dx");
  int64_t n = dy.numel();
  for (int64_t i = 0; i < n; ++i) store(dx, i, load(dy, i) * gelu_tanh_grad(load(x, i)));
}

// ---- normalization -------------------------------------------------------------------------

void CpuBackend::layernorm_forward(Tensor x, Tensor gamma, Tensor beta, float eps, Tensor y,
                                   Tensor mean, Tensor rstd) {
  check_float(x, "layernorm x");
  check_float(y, "layernorm y");
  check_float(gamma, "layernorm gamma");
  check_float(beta, "layernorm beta");
  check_dtype(mean, DType::kF32, "layernorm mean");
  check_dtype(rstd, DType::kF32, "layernorm rstd");
  int64_t h = gamma.numel();
  MPLAN_CHECK(h > 0 && x.numel() % h == 0, "layernorm: x (", x.numel(), ") is not T x h (", h, ")");
  int64_t rows = x.numel() / h;
  check_numel(beta, h, "layernorm beta");
  check_numel(y, x.numel(), "layernorm y");
  check_numel(mean, rows, "layernorm mean");
  check_numel(rstd, rows, "layernorm rstd");
  F32View g(gamma), bt(beta);
  std::vector<float> row(static_cast<size_t>(h));
  for (int64_t r = 0; r < rows; ++r) {
    double s = 0;
    for (int64_t j = 0; j < h; ++j) {
      row[static_cast<size_t>(j)] = load(x, r * h + j);
      s += row[static_cast<size_t>(j)];
    }
    float mu = static_cast<float>(s / static_cast<double>(h));
    double var = 0;
    for (int64_t j = 0; j < h; ++j) {
      double dlt = static_cast<double>(row[static_cast<size_t>(j)]) - mu;
      var += dlt * dlt;
    }
    float rs = static_cast<float>(1.0 / std::sqrt(var / static_cast<double>(h) + eps));
    mean.as<float>()[r] = mu;
    rstd.as<float>()[r] = rs;
    for (int64_t j = 0; j < h; ++j)
      store(y, r * h + j, (row[static_cast<size_t>(j)] - mu) * rs * g[j] + bt[j]);
  }
}

void CpuBackend::layernorm_backward(Tensor dy, Tensor x, Tensor gamma, Tensor mean, Tensor rstd,
                                    Tensor dx, Tensor dgamma, Tensor dbeta) {
  check_float(dy, "layernorm dy");
  check_float(x, "layernorm x");
  check_float(gamma, "layernorm gamma");
  check_float(dx, "layernorm dx");
  check_dtype(mean, DType::kF32, "layernorm mean");
  check_dtype(rstd, DType::kF32, "layernorm rstd");
  check_dtype(dgamma, DType::kF32, "layernorm dgamma");
  check_dtype(dbeta, DType::kF32, "layernorm dbeta");
  int64_t h = gamma.numel();
  MPLAN_CHECK(h > 0 && x.numel() % h == 0, "layernorm: x is not T x h");
  int64_t rows = x.numel() / h;
  check_numel(dy, x.numel(), "layernorm dy");
  check_numel(dx, x.numel(), "layernorm dx");
  check_numel(mean, rows, "layernorm mean");
  check_numel(rstd, rows, "layernorm rstd");
  check_numel(dgamma, h, "layernorm dgamma");
  check_numel(dbeta, h, "layernorm dbeta");
  F32View g(gamma);
  std::vector<double> dg(static_cast<size_t>(h), 0.0), dbt(static_cast<size_t>(h), 0.0);
  std::vector<float> xhat(static_cast<size_t>(h)), dxhat(static_cast<size_t>(h));
  for (int64_t r = 0; r < rows; ++r) {
    float mu = mean.as<const float>()[r];
    float rs = rstd.as<const float>()[r];
    double sum_dxhat = 0, sum_dxhat_xhat = 0;
    for (int64_t j = 0; j < h; ++j) {
      size_t k = static_cast<size_t>(j);
      float d = load(dy, r * h + j);
      xhat[k] = (load(x, r * h + j) - mu) * rs;
      dxhat[k] = d * g[j];
      sum_dxhat += dxhat[k];
      sum_dxhat_xhat += static_cast<double>(dxhat[k]) * xhat[k];
      dg[k] += static_cast<double>(d) * xhat[k];
      dbt[k] += d;
    }
    float m1 = static_cast<float>(sum_dxhat / static_cast<double>(h));
    float m2 = static_cast<float>(sum_dxhat_xhat / static_cast<double>(h));
    for (int64_t j = 0; j < h; ++j) {
      size_t k = static_cast<size_t>(j);
      store(dx, r * h + j, rs * (dxhat[k] - m1 - xhat[k] * m2));
    }
  }
  for (int64_t j = 0; j < h; ++j) {
    dgamma.as<float>()[j] += static_cast<float>(dg[static_cast<size_t>(j)]);
    dbeta.as<float>()[j] += static_cast<float>(dbt[static_cast<size_t>(j)]);
  }
}

// ---- Llama-family layers -------------------------------------------------------------------

void CpuBackend::rmsnorm_forward(Tensor x, Tensor gamma, float eps, Tensor y, Tensor rstd) {
  check_float(x, "rmsnorm x");
  check_float(y, "rmsnorm y");
  check_float(gamma, "rmsnorm gamma");
  check_dtype(rstd, DType::kF32, "rmsnorm rstd");
  const int64_t h = gamma.numel();
  MPLAN_CHECK(h > 0 && x.numel() % h == 0, "rmsnorm: x (", x.numel(), ") is not T x h (", h, ")");
  const int64_t rows = x.numel() / h;
  check_numel(y, x.numel(), "rmsnorm y");
  check_numel(rstd, rows, "rmsnorm rstd");
  F32View g(gamma);
  for (int64_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (int64_t j = 0; j < h; ++j) {
      const double v = load(x, r * h + j);
      ss += v * v;
    }
    const float rs = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(h) + eps));
    rstd.as<float>()[r] = rs;
    for (int64_t j = 0; j < h; ++j) store(y, r * h + j, load(x, r * h + j) * rs * g[j]);
  }
}

void CpuBackend::rmsnorm_backward(Tensor dy, Tensor x, Tensor gamma, Tensor rstd, Tensor dx,
                                  Tensor dgamma) {
  check_float(dy, "rmsnorm dy");
  check_float(x, "rmsnorm x");
  check_float(gamma, "rmsnorm gamma");
  check_float(dx, "rmsnorm dx");
  check_dtype(rstd, DType::kF32, "rmsnorm rstd");
  check_dtype(dgamma, DType::kF32, "rmsnorm dgamma");
  const int64_t h = gamma.numel();
  MPLAN_CHECK(h > 0 && x.numel() % h == 0, "rmsnorm: x is not T x h");
  const int64_t rows = x.numel() / h;
  check_numel(dy, x.numel(), "rmsnorm dy");
  check_numel(dx, x.numel(), "rmsnorm dx");
  check_numel(rstd, rows, "rmsnorm rstd");
  check_numel(dgamma, h, "rmsnorm dgamma");
  F32View g(gamma);
  std::vector<double> dg(static_cast<size_t>(h), 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    const float rs = rstd.as<const float>()[r];
    // dx_j = rs·g_j·dy_j - rs³·x_j/h · sum_k g_k·dy_k·x_k.
    double dot = 0;
    for (int64_t j = 0; j < h; ++j) {
      const float d = load(dy, r * h + j), xv = load(x, r * h + j);
      dot += static_cast<double>(g[j] * d) * xv;
      dg[static_cast<size_t>(j)] += static_cast<double>(d) * (xv * rs);
    }
    const float c = static_cast<float>(dot / static_cast<double>(h)) * rs * rs * rs;
    for (int64_t j = 0; j < h; ++j)
      store(dx, r * h + j, rs * g[j] * load(dy, r * h + j) - c * load(x, r * h + j));
  }
  for (int64_t j = 0; j < h; ++j)
    dgamma.as<float>()[j] += static_cast<float>(dg[static_cast<size_t>(j)]);
}

namespace {
inline float sigmoid(float v) { return 1.0f / (1.0f + std::exp(-v)); }

// (s, b, heads + 2 groups, d) of a packed QKV tensor.
struct QkvDims {
  int64_t tokens, heads, groups, d;
  int64_t row() const { return (heads + 2 * groups) * d; }
};
QkvDims qkv_dims(const Tensor& t, int64_t heads, int64_t groups, const char* what) {
  MPLAN_CHECK(t.ndim == 4 && heads > 0 && groups > 0 && heads % groups == 0 &&
                  t.dim(2) == heads + 2 * groups,
              what, ": qkv must be (s, b, heads + 2 groups, d), heads ", heads, " groups ", groups);
  return {t.dim(0) * t.dim(1), heads, groups, t.dim(3)};
}
}  // namespace

void CpuBackend::swiglu_forward(Tensor x, Tensor y) {
  check_float(x, "swiglu x");
  check_float(y, "swiglu y");
  const int64_t f = y.cols(), rows = y.rows();
  check_numel(x, 2 * f * rows, "swiglu x (T, 2F)");
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < f; ++j) {
      const float g = load(x, r * 2 * f + j), u = load(x, r * 2 * f + f + j);
      store(y, r * f + j, g * sigmoid(g) * u);
    }
}

void CpuBackend::swiglu_backward(Tensor dy, Tensor x, Tensor dx) {
  check_float(dy, "swiglu dy");
  check_float(x, "swiglu x");
  check_float(dx, "swiglu dx");
  const int64_t f = dy.cols(), rows = dy.rows();
  check_numel(x, 2 * f * rows, "swiglu x (T, 2F)");
  check_numel(dx, 2 * f * rows, "swiglu dx (T, 2F)");
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < f; ++j) {
      const float g = load(x, r * 2 * f + j), u = load(x, r * 2 * f + f + j);
      const float d = load(dy, r * f + j), sg = sigmoid(g);
      store(dx, r * 2 * f + j, d * u * (sg + g * sg * (1.0f - sg)));
      store(dx, r * 2 * f + f + j, d * g * sg);
    }
}

void CpuBackend::rope(Tensor qkv, int64_t heads, int64_t groups, int64_t rot_dim, float base,
                      bool inverse) {
  check_float(qkv, "rope qkv");
  const QkvDims q = qkv_dims(qkv, heads, groups, "rope");
  MPLAN_CHECK(rot_dim > 0 && rot_dim % 2 == 0 && rot_dim <= q.d, "rope: rot_dim ", rot_dim,
              " for head dim ", q.d);
  const int64_t half = rot_dim / 2, b = qkv.dim(1);
  // Megatron's rotary frequencies: f32 inverse frequencies, f32 angles.
  std::vector<float> inv(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i)
    inv[static_cast<size_t>(i)] = static_cast<float>(
        1.0 / std::pow(static_cast<double>(base), static_cast<double>(2 * i) / rot_dim));
  for (int64_t t = 0; t < q.tokens; ++t) {
    const float pos = static_cast<float>(t / b);  // (s, b): the sequence index
    for (int64_t i = 0; i < half; ++i) {
      const float angle = pos * inv[static_cast<size_t>(i)];
      const float c = static_cast<float>(std::cos(static_cast<double>(angle)));
      float sn = static_cast<float>(std::sin(static_cast<double>(angle)));
      if (inverse) sn = -sn;
      for (int64_t hd = 0; hd < heads + groups; ++hd) {  // Q heads, then K groups
        const int64_t at = t * q.row() + hd * q.d;
        const float x1 = load(qkv, at + i), x2 = load(qkv, at + half + i);
        store(qkv, at + i, x1 * c - x2 * sn);
        store(qkv, at + half + i, x2 * c + x1 * sn);
      }
    }
  }
}

// ---- attention -----------------------------------------------------------------------------

void CpuBackend::attention_forward(Tensor qkv, Tensor out, Tensor lse, float scale) {
  AttnDims a = attention_dims(qkv, out, lse);
  F32View in(qkv);
  RowMat q, k, v;
  RowMat sc(a.s, a.s), o;
  const int64_t per = a.heads / a.groups;
  for (int64_t bi = 0; bi < a.b; ++bi) {
    for (int64_t h = 0; h < a.heads; ++h) {
      gather_head(in, a, bi, h, 0, q);
      gather_head(in, a, bi, h / per, 1, k);
      gather_head(in, a, bi, h / per, 2, v);
      sc.noalias() = q * k.transpose();
      for (int64_t i = 0; i < a.s; ++i) {
        float mx = -std::numeric_limits<float>::infinity();
        for (int64_t j = 0; j <= i; ++j) {
          sc(i, j) *= scale;
          mx = std::max(mx, sc(i, j));
        }
        double l = 0;
        for (int64_t j = 0; j <= i; ++j) {
          sc(i, j) = std::exp(sc(i, j) - mx);
          l += sc(i, j);
        }
        float inv = static_cast<float>(1.0 / l);
        for (int64_t j = 0; j <= i; ++j) sc(i, j) *= inv;
        for (int64_t j = i + 1; j < a.s; ++j) sc(i, j) = 0.0f;
        lse.as<float>()[a.lse_index(bi, h, i)] = mx + static_cast<float>(std::log(l));
      }
      o.noalias() = sc * v;
      for (int64_t si = 0; si < a.s; ++si)
        for (int64_t di = 0; di < a.d; ++di) store(out, a.out_index(si, bi, h, di), o(si, di));
    }
  }
}

// Grouped-query attention: the gradients of a group's K and V are the sums over its heads, added
// in head order. The column sums, when asked for, are bias_grad_accumulate's of the result.
void CpuBackend::attention_backward(Tensor qkv, Tensor out, Tensor dout, Tensor lse, float scale,
                                    Tensor dqkv, Tensor dqkv_colsum) {
  AttnDims a = attention_dims(qkv, out, lse);
  check_numel(dout, out.numel(), "attention dout");
  check_numel(dqkv, qkv.numel(), "attention dqkv");
  check_float(dout, "attention dout");
  check_float(dqkv, "attention dqkv");
  F32View in(qkv), o_all(out), do_all(dout);
  RowMat q, k, v, o(a.s, a.d), dO(a.s, a.d);
  RowMat p(a.s, a.s), dp(a.s, a.s), dq, dk_sum, dv_sum;
  std::vector<float> delta(static_cast<size_t>(a.s));
  const int64_t per = a.heads / a.groups;
  for (int64_t bi = 0; bi < a.b; ++bi) {
    for (int64_t gi = 0; gi < a.groups; ++gi) {
      gather_head(in, a, bi, gi, 1, k);
      gather_head(in, a, bi, gi, 2, v);
      dk_sum.setZero(a.s, a.d);
      dv_sum.setZero(a.s, a.d);
      for (int64_t h = gi * per; h < (gi + 1) * per; ++h) {
        gather_head(in, a, bi, h, 0, q);
        for (int64_t si = 0; si < a.s; ++si) {
          double dsum = 0;
          for (int64_t di = 0; di < a.d; ++di) {
            o(si, di) = o_all[a.out_index(si, bi, h, di)];
            dO(si, di) = do_all[a.out_index(si, bi, h, di)];
            dsum += static_cast<double>(o(si, di)) * dO(si, di);
          }
          delta[static_cast<size_t>(si)] = static_cast<float>(dsum);
        }
        // Probabilities recomputed from the saved log-sum-exp of each row.
        p.noalias() = q * k.transpose();
        for (int64_t i = 0; i < a.s; ++i) {
          float l = lse.as<const float>()[a.lse_index(bi, h, i)];
          for (int64_t j = 0; j <= i; ++j) p(i, j) = std::exp(p(i, j) * scale - l);
          for (int64_t j = i + 1; j < a.s; ++j) p(i, j) = 0.0f;
        }
        dp.noalias() = dO * v.transpose();
        // dS = P ∘ (dP − δ), stored in dp.
        for (int64_t i = 0; i < a.s; ++i) {
          float di = delta[static_cast<size_t>(i)];
          for (int64_t j = 0; j <= i; ++j) dp(i, j) = p(i, j) * (dp(i, j) - di);
          for (int64_t j = i + 1; j < a.s; ++j) dp(i, j) = 0.0f;
        }
        dq.noalias() = dp * k;
        dk_sum.noalias() += dp.transpose() * q;
        dv_sum.noalias() += p.transpose() * dO;
        for (int64_t si = 0; si < a.s; ++si)
          for (int64_t di = 0; di < a.d; ++di)
            store(dqkv, a.qkv_index(si, bi, 0, h, di), scale * dq(si, di));
      }
      for (int64_t si = 0; si < a.s; ++si) {
        for (int64_t di = 0; di < a.d; ++di) {
          store(dqkv, a.qkv_index(si, bi, 1, gi, di), scale * dk_sum(si, di));
          store(dqkv, a.qkv_index(si, bi, 2, gi, di), dv_sum(si, di));
        }
      }
    }
  }
  if (dqkv_colsum.data != nullptr) {
    check_numel(dqkv_colsum, (a.heads + 2 * a.groups) * a.d, "attention dqkv_colsum");
    bias_grad_accumulate(dqkv, dqkv_colsum);
  }
}

// ---- embeddings ----------------------------------------------------------------------------

void CpuBackend::embedding_forward(Tensor tokens, Tensor wte, int64_t vocab_start, Tensor out) {
  check_dtype(tokens, DType::kI32, "embedding tokens");
  check_float(wte, "embedding wte");
  check_float(out, "embedding out");
  MPLAN_CHECK(wte.ndim == 2, "embedding: wte must be (V/tp, h)");
  int64_t rows = wte.dim(0), h = wte.dim(1), n = tokens.numel();
  check_numel(out, n * h, "embedding out");
  for (int64_t t = 0; t < n; ++t) {
    int64_t local = static_cast<int64_t>(tokens.as<const int32_t>()[t]) - vocab_start;
    bool here = local >= 0 && local < rows;
    for (int64_t j = 0; j < h; ++j) store(out, t * h + j, here ? load(wte, local * h + j) : 0.0f);
  }
}

void CpuBackend::embedding_backward(Tensor tokens, Tensor dout, int64_t vocab_start, Tensor dwte) {
  check_dtype(tokens, DType::kI32, "embedding tokens");
  check_float(dout, "embedding dout");
  check_dtype(dwte, DType::kF32, "embedding dwte");
  MPLAN_CHECK(dwte.ndim == 2, "embedding: dwte must be (V/tp, h)");
  int64_t rows = dwte.dim(0), h = dwte.dim(1), n = tokens.numel();
  check_numel(dout, n * h, "embedding dout");
  float* g = dwte.as<float>();
  for (int64_t t = 0; t < n; ++t) {
    int64_t local = static_cast<int64_t>(tokens.as<const int32_t>()[t]) - vocab_start;
    if (local < 0 || local >= rows) continue;
    for (int64_t j = 0; j < h; ++j) g[local * h + j] += load(dout, t * h + j);
  }
}

void CpuBackend::add_position_embedding(Tensor x, Tensor wpe, int64_t s_offset) {
  check_float(x, "position x");
  check_float(wpe, "position wpe");
  MPLAN_CHECK(x.ndim == 3 && wpe.ndim == 2, "position: x (s, b, h) and wpe (S, h) expected");
  int64_t s = x.dim(0), b = x.dim(1), h = x.dim(2);
  MPLAN_CHECK(wpe.dim(1) == h && s_offset >= 0 && s_offset + s <= wpe.dim(0), "position: rows [",
              s_offset, ", ", s_offset + s, ") of wpe (", wpe.dim(0), ")");
  for (int64_t si = 0; si < s; ++si)
    for (int64_t bi = 0; bi < b; ++bi)
      for (int64_t j = 0; j < h; ++j) {
        int64_t i = (si * b + bi) * h + j;
        store(x, i, load(x, i) + load(wpe, (s_offset + si) * h + j));
      }
}

void CpuBackend::position_embedding_backward(Tensor dx, Tensor dwpe, int64_t s_offset) {
  check_float(dx, "position dx");
  check_dtype(dwpe, DType::kF32, "position dwpe");
  MPLAN_CHECK(dx.ndim == 3 && dwpe.ndim == 2, "position: dx (s, b, h) and dwpe (S, h) expected");
  int64_t s = dx.dim(0), b = dx.dim(1), h = dx.dim(2);
  MPLAN_CHECK(dwpe.dim(1) == h && s_offset >= 0 && s_offset + s <= dwpe.dim(0), "position: rows [",
              s_offset, ", ", s_offset + s, ") of dwpe (", dwpe.dim(0), ")");
  float* g = dwpe.as<float>();
  for (int64_t si = 0; si < s; ++si)
    for (int64_t j = 0; j < h; ++j) {
      double acc = 0;
      for (int64_t bi = 0; bi < b; ++bi) acc += load(dx, (si * b + bi) * h + j);
      g[(s_offset + si) * h + j] += static_cast<float>(acc);
    }
}

// ---- vocab-parallel cross-entropy ----------------------------------------------------------

void CpuBackend::xent_local_max(Tensor logits, Tensor row_max) {
  check_float(logits, "xent logits");
  check_dtype(row_max, DType::kF32, "xent row_max");
  int64_t rows = row_max.numel();
  MPLAN_CHECK(rows > 0 && logits.numel() % rows == 0, "xent: logits is not T x V/tp");
  int64_t v = logits.numel() / rows;
  for (int64_t r = 0; r < rows; ++r) {
    float mx = -std::numeric_limits<float>::infinity();
    for (int64_t j = 0; j < v; ++j) mx = std::max(mx, load(logits, r * v + j));
    row_max.as<float>()[r] = mx;
  }
}

void CpuBackend::xent_local_stats(Tensor logits, Tensor targets, int64_t vocab_start,
                                  Tensor row_max, Tensor stats) {
  check_float(logits, "xent logits");
  check_dtype(targets, DType::kI32, "xent targets");
  check_dtype(row_max, DType::kF32, "xent row_max");
  check_dtype(stats, DType::kF32, "xent stats");
  int64_t rows = targets.numel();
  MPLAN_CHECK(rows > 0 && logits.numel() % rows == 0, "xent: logits is not T x V/tp");
  check_numel(row_max, rows, "xent row_max");
  check_numel(stats, 2 * rows, "xent stats");
  int64_t v = logits.numel() / rows;
  float* st = stats.as<float>();
  for (int64_t r = 0; r < rows; ++r) {
    float mx = row_max.as<const float>()[r];
    double s = 0;
    for (int64_t j = 0; j < v; ++j) s += std::exp(load(logits, r * v + j) - mx);
    int64_t local = static_cast<int64_t>(targets.as<const int32_t>()[r]) - vocab_start;
    st[r] = static_cast<float>(s);
    st[rows + r] = (local >= 0 && local < v) ? load(logits, r * v + local) : 0.0f;
  }
}

void CpuBackend::xent_loss_and_grad(Tensor logits, Tensor targets, int64_t vocab_start,
                                    Tensor row_max, Tensor stats, float grad_scale, Tensor loss) {
  check_float(logits, "xent logits");
  check_dtype(targets, DType::kI32, "xent targets");
  check_dtype(row_max, DType::kF32, "xent row_max");
  check_dtype(stats, DType::kF32, "xent stats");
  check_dtype(loss, DType::kF32, "xent loss");
  int64_t rows = targets.numel();
  MPLAN_CHECK(rows > 0 && logits.numel() % rows == 0, "xent: logits is not T x V/tp");
  check_numel(row_max, rows, "xent row_max");
  check_numel(stats, 2 * rows, "xent stats");
  check_numel(loss, rows, "xent loss");
  int64_t v = logits.numel() / rows;
  const float* st = stats.as<const float>();
  for (int64_t r = 0; r < rows; ++r) {
    float mx = row_max.as<const float>()[r];
    float sumexp = st[r];
    loss.as<float>()[r] = std::log(sumexp) + mx - st[rows + r];
    int64_t local = static_cast<int64_t>(targets.as<const int32_t>()[r]) - vocab_start;
    float inv = 1.0f / sumexp;
    for (int64_t j = 0; j < v; ++j) {
      int64_t i = r * v + j;
      float p = std::exp(load(logits, i) - mx) * inv;
      if (j == local) p -= 1.0f;
      store(logits, i, p * grad_scale);
    }
  }
}

void CpuBackend::sum(Tensor x, Tensor out, bool accumulate) {
  check_dtype(x, DType::kF32, "sum x");
  check_dtype(out, DType::kF32, "sum out");
  check_numel(out, 1, "sum out");
  double s = 0;
  int64_t n = x.numel();
  for (int64_t i = 0; i < n; ++i) s += x.as<const float>()[i];
  float* o = out.as<float>();
  *o = accumulate ? *o + static_cast<float>(s) : static_cast<float>(s);
}

// ---- optimizer -----------------------------------------------------------------------------

void CpuBackend::sum_squares_accumulate(Tensor x, Tensor out) {
  check_dtype(x, DType::kF32, "sum_squares x");
  check_dtype(out, DType::kF32, "sum_squares out");
  check_numel(out, 1, "sum_squares out");
  double s = 0;
  int64_t n = x.numel();
  const float* p = x.as<const float>();
  for (int64_t i = 0; i < n; ++i) s += static_cast<double>(p[i]) * p[i];
  *out.as<float>() += static_cast<float>(s);
}

void CpuBackend::adamw(const AdamW& hp, Tensor param, Tensor grad, Tensor m, Tensor v,
                       Tensor param_act) {
  check_dtype(param, DType::kF32, "adamw param");
  check_dtype(grad, DType::kF32, "adamw grad");
  check_dtype(m, DType::kF32, "adamw m");
  check_dtype(v, DType::kF32, "adamw v");
  int64_t n = param.numel();
  check_numel(grad, n, "adamw grad");
  check_numel(m, n, "adamw m");
  check_numel(v, n, "adamw v");
  bool write_act = param_act.data != nullptr;
  if (write_act) {
    check_float(param_act, "adamw param_act");
    check_numel(param_act, n, "adamw param_act");
  }
  MPLAN_CHECK(hp.step >= 1, "adamw: step must be >= 1, got ", hp.step);
  // As torch.optim.AdamW: decoupled decay first, then the bias-corrected Adam update.
  double bc1 = 1.0 - std::pow(static_cast<double>(hp.beta1), static_cast<double>(hp.step));
  double bc2 = 1.0 - std::pow(static_cast<double>(hp.beta2), static_cast<double>(hp.step));
  float step_size = static_cast<float>(static_cast<double>(hp.lr) / bc1);
  float bc2_sqrt = static_cast<float>(std::sqrt(bc2));
  float decay = hp.weight_decay > 0 ? 1.0f - hp.lr * hp.weight_decay : 1.0f;
  float* p = param.as<float>();
  const float* g = grad.as<const float>();
  float* mm = m.as<float>();
  float* vv = v.as<float>();
  for (int64_t i = 0; i < n; ++i) {
    float gi = g[i] * hp.grad_scale;
    float pi = p[i] * decay;
    mm[i] = hp.beta1 * mm[i] + (1.0f - hp.beta1) * gi;
    vv[i] = hp.beta2 * vv[i] + (1.0f - hp.beta2) * gi * gi;
    float denom = std::sqrt(vv[i]) / bc2_sqrt + hp.eps;
    pi -= step_size * (mm[i] / denom);
    p[i] = pi;
    if (write_act) store(param_act, i, pi);
  }
}

std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<CpuBackend>(); }

}  // namespace mplan::exec
