// OpChecker (op_checks.hpp): the checks, their shapes and their tolerances. Inputs are uniform
// random values drawn fresh for every check; both backends get identical bits. Where an op
// consumes another op's output (attention backward, the cross-entropy steps), both backends are
// fed the CPU's values so that each op is judged on its own.
#include "exec/cuda/tools/op_checks.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <sstream>

#include "exec/cuda/cuda_backend.hpp"
#include "exec/host_values.hpp"

namespace mplan::exec::cuda {
namespace {

// Attention: the GPU rounds P and dS to bf16 (2^-9 relative) before the second GEMM of each
// pair, as FlashAttention does; dK and dQ sum up to s such terms with cancellation, so single
// elements near zero stray by a few percent of the rms while the relative L2 error stays ~3e-3.
// The largest strays are dQ elements of the first query rows (a handful of keys whose dS terms
// nearly cancel) in the checks of millions of elements: up to 7.4 % of the rms measured (s 520,
// d 64), hence 10 %; a wrong tile or row moves the relative L2 error (bound 1.5e-2) and its
// elements by the order of the rms. Inputs are O(1); the floor covers gradients that are zero
// but for rounding noise (s = 1).
constexpr Tolerance kAttnTol{2.5e-2, 1e-1, 1.5e-2, 1e-3};
// Small-magnitude f32 results (loss sums, gradient norms) from long sums: f32 partials vs f64.
constexpr Tolerance kSumTol{1e-5, 1e-6, 1e-5};
// f32 outputs of GEMMs and of reductions over bf16 inputs.
constexpr Tolerance kF32AccTol{1e-4, 1e-4, 1e-5};

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

const char* dt(DType t) { return to_string(t); }

}  // namespace

std::string CheckResult::describe() const {
  std::ostringstream os;
  os << (pass ? "PASS " : "FAIL ") << name << "  n=" << numel << "  rel_l2=" << fmt("%.2e", rel_l2);
  if (nan_count > 0) os << "  NaN/unwritten=" << nan_count;
  if (worst_index >= 0)
    os << "  worst[" << worst_index << "] got=" << fmt("%.6g", worst_got)
       << " ref=" << fmt("%.6g", worst_ref) << " (" << fmt("%.2f", worst_ratio) << "x tol)";
  return os.str();
}

OpChecker::OpChecker(CudaBackend& gpu, Backend& cpu, uint64_t seed)
    : gpu_(gpu), cpu_(cpu), rng_(seed) {}

OpChecker::Pair OpChecker::alloc(DType d, std::initializer_list<int64_t> shape) {
  return {gpu_.alloc(d, shape, "check"), cpu_.alloc(d, shape, "check")};
}

void OpChecker::release(Pair& p) {
  gpu_.release(p.gpu);
  cpu_.release(p.cpu);
}

void OpChecker::set(Pair& p, const std::vector<float>& host) {
  upload_values(gpu_, p.gpu, host);
  upload_values(cpu_, p.cpu, host);
}

std::vector<float> OpChecker::random(int64_t n, float lo, float hi) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = dist(rng_);
  return v;
}

OpChecker::Pair OpChecker::random_pair(DType d, std::initializer_list<int64_t> shape, float lo,
                                       float hi) {
  Pair p = alloc(d, shape);
  set(p, random(p.gpu.numel(), lo, hi));
  return p;
}

void OpChecker::poison(Pair& p) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  gpu_.fill(p.gpu, nan);
  cpu_.fill(p.cpu, nan);
}

std::vector<float> OpChecker::read_gpu(const Pair& p) { return download_values(gpu_, p.gpu); }
std::vector<float> OpChecker::read_cpu(const Pair& p) { return download_values(cpu_, p.cpu); }

bool OpChecker::compare_values(const std::string& name, const std::vector<float>& got,
                               const std::vector<float>& ref, const Tolerance& tol) {
  CheckResult r;
  r.name = name;
  r.numel = static_cast<int64_t>(ref.size());
  double ss_ref = 0, ss_diff = 0;
  for (size_t i = 0; i < ref.size(); ++i)
    if (std::isfinite(ref[i])) ss_ref += static_cast<double>(ref[i]) * ref[i];
  const double rms = ref.empty() ? 0 : std::sqrt(ss_ref / static_cast<double>(ref.size()));
  const double atol = std::max(tol.atol_rel * rms, tol.atol_abs) + 1e-30;
  bool ok = got.size() == ref.size();
  for (size_t i = 0; ok && i < ref.size(); ++i) {
    const double g = got[i], f = ref[i];
    if (std::isnan(g) != std::isnan(f)) {
      ++r.nan_count;
      if (r.worst_ratio != INFINITY) {
        r.worst_ratio = INFINITY;
        r.worst_index = static_cast<int64_t>(i);
        r.worst_got = g;
        r.worst_ref = f;
      }
      continue;
    }
    if (std::isnan(f)) continue;
    const double diff = std::abs(g - f);
    ss_diff += diff * diff;
    const double ratio = diff / (atol + tol.rtol * std::abs(f));
    if (ratio > r.worst_ratio || r.worst_index < 0) {
      r.worst_ratio = ratio;
      r.worst_index = static_cast<int64_t>(i);
      r.worst_got = g;
      r.worst_ref = f;
    }
  }
  r.rel_l2 = ss_ref > 0 ? std::sqrt(ss_diff / ss_ref) : std::sqrt(ss_diff);
  const double rms_diff = ref.empty() ? 0 : std::sqrt(ss_diff / static_cast<double>(ref.size()));
  r.pass = ok && r.nan_count == 0 && r.worst_ratio <= 1.0 &&
           (r.rel_l2 <= tol.rel_l2_max || rms_diff <= tol.atol_abs);
  results_.push_back(r);
  return r.pass;
}

bool OpChecker::compare(const std::string& name, const Pair& p, const Tolerance& tol) {
  return compare_values(name, read_gpu(p), read_cpu(p), tol);
}

bool OpChecker::bitwise_same(const std::string& name, const std::vector<float>& a,
                             const std::vector<float>& b) {
  CheckResult r;
  r.name = name;
  r.numel = static_cast<int64_t>(a.size());
  int64_t differing = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0) {
      if (differing++ == 0) {
        r.worst_index = static_cast<int64_t>(i);
        r.worst_got = a[i];
        r.worst_ref = b[i];
        r.worst_ratio = INFINITY;
      }
    }
  }
  r.rel_l2 = static_cast<double>(differing);  // reported as the count of differing elements
  r.pass = a.size() == b.size() && differing == 0;
  results_.push_back(r);
  return r.pass;
}

// ---- checks ----------------------------------------------------------------------------------

bool OpChecker::gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, DType act,
                     DType c_dtype, float alpha, float beta) {
  Pair a = trans_a ? random_pair(act, {k, m}) : random_pair(act, {m, k});
  Pair b = trans_b ? random_pair(act, {n, k}) : random_pair(act, {k, n});
  Pair c = alloc(c_dtype, {m, n});
  if (beta != 0.0f) {
    set(c, random(m * n, -1, 1));
  } else {
    poison(c);
  }
  const GemmArgs g{
      .trans_a = trans_a, .trans_b = trans_b, .m = m, .n = n, .k = k, .alpha = alpha, .beta = beta};
  gpu_.gemm(g, a.gpu, b.gpu, c.gpu);
  cpu_.gemm(g, a.cpu, b.cpu, c.cpu);
  std::ostringstream name;
  name << "gemm " << (trans_a ? 'T' : 'N') << (trans_b ? 'T' : 'N') << " m=" << m << " n=" << n
       << " k=" << k << " " << dt(act) << "->" << dt(c_dtype) << " alpha=" << alpha
       << " beta=" << beta;
  const bool ok = compare(name.str(), c, c_dtype == DType::kF32 ? kF32AccTol : kBf16Tol);
  release(a);
  release(b);
  release(c);
  return ok;
}

bool OpChecker::gemm_epilogue(Epilogue epi, int64_t m, int64_t n, int64_t k, bool fused) {
  const DType act = DType::kBF16;
  Pair a = random_pair(act, {m, k});
  Pair b = random_pair(act, {n, k});  // (n, k) used transposed, as a Linear layer's weight
  Pair bias = random_pair(act, {n});
  const bool residual = epi == Epilogue::kResidual || epi == Epilogue::kBiasResidual;
  Pair c = alloc(act, {m, n});
  Pair aux = residual ? random_pair(act, {m, n}, -4, 4) : alloc(act, {m, n});  // read / written
  poison(c);
  if (!residual) poison(aux);
  const GemmArgs g{.trans_b = true, .m = m, .n = n, .k = k, .epilogue = epi};
  gpu_.set_fuse_gemm_epilogues(fused);
  gpu_.gemm(g, a.gpu, b.gpu, c.gpu, bias.gpu, aux.gpu);
  gpu_.set_fuse_gemm_epilogues(true);
  cpu_.gemm(g, a.cpu, b.cpu, c.cpu, bias.cpu, aux.cpu);
  std::ostringstream name;
  name << "gemm NT+"
       << (epi == Epilogue::kBias       ? "bias"
           : epi == Epilogue::kBiasGelu ? "bias+gelu"
           : epi == Epilogue::kResidual ? "residual"
                                        : "bias+residual")
       << (fused ? " (fused)" : " (unfused)") << " m=" << m << " n=" << n << " k=" << k;
  bool ok = compare(name.str() + ": c", c, kBf16Tol);
  if (epi == Epilogue::kBiasGelu) ok = compare(name.str() + ": aux", aux, kBf16Tol) && ok;
  release(a);
  release(b);
  release(bias);
  release(c);
  release(aux);
  return ok;
}

bool OpChecker::gemm_dgelu(int64_t m, int64_t n, int64_t k, DType act, bool fused) {
  Pair a = random_pair(act, {m, k});
  Pair b = random_pair(act, {k, n});
  Pair aux = random_pair(act, {m, n}, -3.0f, 3.0f);  // the pre-activation: gelu' over its range
  Pair c = alloc(act, {m, n});
  poison(c);
  const GemmArgs g{.m = m, .n = n, .k = k, .epilogue = Epilogue::kDGelu};
  gpu_.set_fuse_gemm_epilogues(fused);
  gpu_.gemm(g, a.gpu, b.gpu, c.gpu, {}, aux.gpu);
  gpu_.set_fuse_gemm_epilogues(true);
  cpu_.gemm(g, a.cpu, b.cpu, c.cpu, {}, aux.cpu);
  std::ostringstream name;
  name << "gemm NN+dgelu" << (fused ? " (fused)" : " (unfused)") << " m=" << m << " n=" << n
       << " k=" << k << " " << dt(act) << ": c";
  // bf16's tolerance for f32 outputs too: the fused gelu' is cuBLASLt's own (its tanh need not
  // be as exact as tanhf); a wrong operand or aux layout is off by far more.
  const bool ok = compare(name.str(), c, kBf16Tol);
  for (Pair* p : {&a, &b, &aux, &c}) release(*p);
  return ok;
}

bool OpChecker::bias_grad(int64_t rows, int64_t n, DType act) {
  bool ok = true;
  for (bool by_gemm : {true, false}) {  // cuBLASLt's ones^T · dY (bf16), the column-sum kernel
    Pair dy = random_pair(act, {rows, n});
    Pair db = random_pair(DType::kF32, {n});
    gpu_.set_bias_grad_by_gemm(by_gemm);
    gpu_.bias_grad_accumulate(dy.gpu, db.gpu);
    gpu_.set_bias_grad_by_gemm(true);
    cpu_.bias_grad_accumulate(dy.cpu, db.cpu);
    std::ostringstream name;
    name << "bias_grad_accumulate" << (by_gemm ? "" : " (kernel)") << " rows=" << rows << " n=" << n
         << " " << dt(act);
    ok = compare(name.str(), db, kF32AccTol) && ok;
    release(dy);
    release(db);
  }
  return ok;
}

bool OpChecker::elementwise(int64_t n, DType act) {
  const std::string sfx = " n=" + std::to_string(n) + " " + dt(act);
  bool ok = true;
  Pair x = random_pair(act, {n}, -4, 4);
  Pair y = random_pair(act, {n});
  Pair out = alloc(act, {n});

  poison(out);
  gpu_.fill(out.gpu, 0.8125f);
  cpu_.fill(out.cpu, 0.8125f);
  ok = compare("fill" + sfx, out, kBf16Tol) && ok;

  poison(out);
  gpu_.copy(out.gpu, x.gpu);
  cpu_.copy(out.cpu, x.cpu);
  ok = compare("copy" + sfx, out, kF32Tol) && ok;

  const DType other = act == DType::kF32 ? DType::kBF16 : DType::kF32;
  Pair o2 = alloc(other, {n});
  poison(o2);
  gpu_.cast(o2.gpu, x.gpu);
  cpu_.cast(o2.cpu, x.cpu);
  ok = compare(std::string("cast ") + dt(act) + "->" + dt(other) + sfx, o2, kF32Tol) && ok;
  release(o2);

  poison(out);
  gpu_.add(out.gpu, x.gpu, y.gpu);
  cpu_.add(out.cpu, x.cpu, y.cpu);
  ok = compare("add" + sfx, out, kBf16Tol) && ok;

  gpu_.copy(out.gpu, x.gpu);
  cpu_.copy(out.cpu, x.cpu);
  gpu_.scale(out.gpu, -0.37f);
  cpu_.scale(out.cpu, -0.37f);
  ok = compare("scale" + sfx, out, kBf16Tol) && ok;

  poison(out);
  gpu_.gelu_forward(x.gpu, out.gpu);
  cpu_.gelu_forward(x.cpu, out.cpu);
  ok = compare("gelu_forward" + sfx, out, kBf16Tol) && ok;

  poison(out);
  gpu_.gelu_backward(y.gpu, x.gpu, out.gpu);
  cpu_.gelu_backward(y.cpu, x.cpu, out.cpu);
  ok = compare("gelu_backward" + sfx, out, kBf16Tol) && ok;

  Pair i32 = alloc(DType::kI32, {n});
  gpu_.fill(i32.gpu, 7.0f);
  cpu_.fill(i32.cpu, 7.0f);
  ok = compare("fill i32 n=" + std::to_string(n), i32, kF32Tol) && ok;
  release(i32);

  release(x);
  release(y);
  release(out);
  return ok;
}

bool OpChecker::layernorm(int64_t rows, int64_t h, DType act) {
  const std::string sfx =
      " rows=" + std::to_string(rows) + " h=" + std::to_string(h) + " " + dt(act);
  Pair x = alloc(act, {rows, h});
  {
    // Rows with an offset and a spread of their own, as activations have.
    std::vector<float> v = random(rows * h, -1, 1);
    for (int64_t r = 0; r < rows; ++r) {
      const float off = static_cast<float>(r % 7) - 3.0f, mul = 0.5f + static_cast<float>(r % 5);
      for (int64_t j = 0; j < h; ++j) v[r * h + j] = off + mul * v[r * h + j];
    }
    set(x, v);
  }
  Pair gamma = random_pair(act, {h}, 0.5f, 1.5f);
  Pair beta = random_pair(act, {h});
  Pair y = alloc(act, {rows, h});
  Pair mean = alloc(DType::kF32, {rows});
  Pair rstd = alloc(DType::kF32, {rows});
  poison(y);
  poison(mean);
  poison(rstd);
  gpu_.layernorm_forward(x.gpu, gamma.gpu, beta.gpu, 1e-5f, y.gpu, mean.gpu, rstd.gpu);
  cpu_.layernorm_forward(x.cpu, gamma.cpu, beta.cpu, 1e-5f, y.cpu, mean.cpu, rstd.cpu);
  bool ok = compare("layernorm_forward" + sfx + ": y", y, kBf16Tol);
  ok = compare("layernorm_forward" + sfx + ": mean", mean, kF32AccTol) && ok;
  ok = compare("layernorm_forward" + sfx + ": rstd", rstd, kF32AccTol) && ok;

  // Backward from the CPU's saved statistics on both sides.
  set(mean, read_cpu(mean));
  set(rstd, read_cpu(rstd));
  Pair dy = random_pair(act, {rows, h});
  Pair dx = alloc(act, {rows, h});
  Pair dgamma = random_pair(DType::kF32, {h});
  Pair dbeta = random_pair(DType::kF32, {h});
  poison(dx);
  gpu_.layernorm_backward(dy.gpu, x.gpu, gamma.gpu, mean.gpu, rstd.gpu, dx.gpu, dgamma.gpu,
                          dbeta.gpu);
  cpu_.layernorm_backward(dy.cpu, x.cpu, gamma.cpu, mean.cpu, rstd.cpu, dx.cpu, dgamma.cpu,
                          dbeta.cpu);
  ok = compare("layernorm_backward" + sfx + ": dx", dx, kBf16Tol) && ok;
  ok = compare("layernorm_backward" + sfx + ": dgamma", dgamma, kF32AccTol) && ok;
  ok = compare("layernorm_backward" + sfx + ": dbeta", dbeta, kF32AccTol) && ok;

  // The residual add fused in: dres += dx, against the CPU and against the GPU's two passes.
  Pair dres = random_pair(act, {rows, h});
  const std::vector<float> dres0 = read_cpu(dres), dg0 = read_gpu(dgamma), db0 = read_gpu(dbeta);
  set(dgamma, dg0);  // both sides start from the same accumulators
  set(dbeta, db0);
  gpu_.layernorm_backward_add(dy.gpu, x.gpu, gamma.gpu, mean.gpu, rstd.gpu, dx.gpu, dgamma.gpu,
                              dbeta.gpu, dres.gpu);
  cpu_.layernorm_backward_add(dy.cpu, x.cpu, gamma.cpu, mean.cpu, rstd.cpu, dx.cpu, dgamma.cpu,
                              dbeta.cpu, dres.cpu);
  ok = compare("layernorm_backward_add" + sfx + ": dres", dres, kBf16Tol) && ok;
  ok = compare("layernorm_backward_add" + sfx + ": dgamma", dgamma, kF32AccTol) && ok;
  const std::vector<float> fused = read_gpu(dres), fused_dg = read_gpu(dgamma);
  set(dres, dres0);
  set(dgamma, dg0);
  set(dbeta, db0);
  gpu_.layernorm_backward(dy.gpu, x.gpu, gamma.gpu, mean.gpu, rstd.gpu, dx.gpu, dgamma.gpu,
                          dbeta.gpu);
  gpu_.add(dres.gpu, dres.gpu, dx.gpu);
  ok = bitwise_same("layernorm_backward_add" + sfx + ": dres = unfused", fused, read_gpu(dres)) &&
       ok;
  ok = bitwise_same("layernorm_backward_add" + sfx + ": dgamma = unfused", fused_dg,
                    read_gpu(dgamma)) &&
       ok;

  // With dres's column sums (the row-parallel bias gradient) from the same pass: against the CPU
  // (bias_grad_accumulate, then the backward) and, for dres and dgamma, the same bits as without.
  Pair dbias = random_pair(DType::kF32, {h});
  set(dres, dres0);
  set(dgamma, dg0);
  set(dbeta, db0);
  gpu_.layernorm_backward_add(dy.gpu, x.gpu, gamma.gpu, mean.gpu, rstd.gpu, dx.gpu, dgamma.gpu,
                              dbeta.gpu, dres.gpu, dbias.gpu);
  cpu_.layernorm_backward_add(dy.cpu, x.cpu, gamma.cpu, mean.cpu, rstd.cpu, dx.cpu, dgamma.cpu,
                              dbeta.cpu, dres.cpu, dbias.cpu);
  ok = compare("layernorm_backward_add + colsum" + sfx + ": dbias", dbias, kF32AccTol) && ok;
  ok = compare("layernorm_backward_add + colsum" + sfx + ": dbeta", dbeta, kF32AccTol) && ok;
  ok = bitwise_same("layernorm_backward_add + colsum" + sfx + ": dres = without", fused,
                    read_gpu(dres)) &&
       ok;
  ok = bitwise_same("layernorm_backward_add + colsum" + sfx + ": dgamma = without", fused_dg,
                    read_gpu(dgamma)) &&
       ok;
  for (Pair* p : {&x, &gamma, &beta, &y, &mean, &rstd, &dy, &dx, &dgamma, &dbeta, &dres, &dbias})
    release(*p);
  return ok;
}

bool OpChecker::attention(int64_t s, int64_t b, int64_t heads, int64_t groups, int64_t d, DType act,
                          bool naive) {
  std::ostringstream nm;
  nm << "attention s=" << s << " b=" << b << " heads=" << heads << " groups=" << groups
     << " d=" << d << " " << dt(act) << (naive ? " (reference kernels)" : "");
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  const int64_t planes = heads + 2 * groups;
  Pair qkv = random_pair(act, {s, b, planes, d}, -2, 2);
  Pair out = alloc(act, {s, b, heads, d});
  Pair lse = alloc(DType::kF32, {b, heads, s});
  poison(out);
  poison(lse);
  const AttentionKernels was = gpu_.attention_kernels();  // the fast family under test
  if (naive) gpu_.set_attention_kernels(AttentionKernels::kReference);
  gpu_.attention_forward(qkv.gpu, out.gpu, lse.gpu, scale);
  cpu_.attention_forward(qkv.cpu, out.cpu, lse.cpu, scale);
  bool ok = compare(nm.str() + ": forward out", out, kAttnTol);
  ok = compare(nm.str() + ": forward lse", lse, kF32AccTol) && ok;

  set(out, read_cpu(out));
  set(lse, read_cpu(lse));
  Pair dout = random_pair(act, {s, b, heads, d});
  Pair dqkv = alloc(act, {s, b, planes, d});
  poison(dqkv);
  // With the column sums (QKV's bias gradient, added into non-zero values): the Hopper kernels
  // take them from their registers, the others sum dqkv after.
  Pair colsum = random_pair(DType::kF32, {planes * d});
  const std::vector<float> colsum0 = read_cpu(colsum);
  gpu_.attention_backward(qkv.gpu, out.gpu, dout.gpu, lse.gpu, scale, dqkv.gpu, colsum.gpu);
  cpu_.attention_backward(qkv.cpu, out.cpu, dout.cpu, lse.cpu, scale, dqkv.cpu, colsum.cpu);
  gpu_.set_attention_kernels(was);
  // Compare dQ, dK and dV separately: their magnitudes differ.
  const std::vector<float> got = read_gpu(dqkv), ref = read_cpu(dqkv);
  const char* part[3] = {"dq", "dk", "dv"};
  for (int w = 0; w < 3; ++w) {
    std::vector<float> g, r;
    const int64_t first = w == 0 ? 0 : heads + (w - 1) * groups, count = w == 0 ? heads : groups;
    for (int64_t row = 0; row < s * b; ++row)
      for (int64_t i = 0; i < count * d; ++i) {
        const size_t at = static_cast<size_t>((row * planes + first) * d + i);
        g.push_back(got[at]);
        r.push_back(ref[at]);
      }
    ok = compare_values(nm.str() + ": backward " + part[w], g, r, kAttnTol) && ok;
  }
  // The column sums: those of the GPU's own dqkv (f64 on the host; only the order of the f32
  // additions differs), and the CPU's within the attention tolerance.
  std::vector<double> sums(colsum0.begin(), colsum0.end());
  for (int64_t row = 0; row < s * b; ++row)
    for (int64_t c = 0; c < planes * d; ++c)
      sums[static_cast<size_t>(c)] += got[static_cast<size_t>(row * planes * d + c)];
  ok = compare_values(nm.str() + ": backward column sums = dqkv's", read_gpu(colsum),
                      std::vector<float>(sums.begin(), sums.end()), kF32AccTol) &&
       ok;
  ok = compare(nm.str() + ": backward column sums", colsum, kAttnTol) && ok;
  for (Pair* p : {&qkv, &out, &lse, &dout, &dqkv, &colsum}) release(*p);
  return ok;
}

bool OpChecker::embedding(int64_t num_tokens, int64_t vocab_local, int64_t vocab_start, int64_t h,
                          DType act, bool repeat_ids) {
  std::ostringstream nm;
  nm << "embedding T=" << num_tokens << " V_local=" << vocab_local << " start=" << vocab_start
     << " h=" << h << " " << dt(act) << (repeat_ids ? " (few distinct ids)" : "");
  Pair tokens = alloc(DType::kI32, {num_tokens});
  {
    // Ids over [0, vocab_start + vocab_local + 7): some fall outside this shard on both sides.
    const int64_t hi = repeat_ids ? vocab_start + 3 : vocab_start + vocab_local + 7;
    std::uniform_int_distribution<int64_t> dist(repeat_ids ? vocab_start : 0, hi - 1);
    std::vector<float> ids(static_cast<size_t>(num_tokens));
    for (auto& v : ids) v = static_cast<float>(dist(rng_));
    set(tokens, ids);
  }
  Pair wte = random_pair(act, {vocab_local, h});
  Pair out = alloc(act, {num_tokens, h});
  poison(out);
  gpu_.embedding_forward(tokens.gpu, wte.gpu, vocab_start, out.gpu);
  cpu_.embedding_forward(tokens.cpu, wte.cpu, vocab_start, out.cpu);
  bool ok = compare(nm.str() + ": forward", out, kF32Tol);
  Pair dout = random_pair(act, {num_tokens, h});
  Pair dwte = random_pair(DType::kF32, {vocab_local, h});
  gpu_.embedding_backward(tokens.gpu, dout.gpu, vocab_start, dwte.gpu);
  cpu_.embedding_backward(tokens.cpu, dout.cpu, vocab_start, dwte.cpu);
  ok = compare(nm.str() + ": backward dwte", dwte, kF32AccTol) && ok;
  for (Pair* p : {&tokens, &wte, &out, &dout, &dwte}) release(*p);
  return ok;
}

bool OpChecker::position_embedding(int64_t s, int64_t b, int64_t h, int64_t max_s, int64_t s_offset,
                                   DType act) {
  std::ostringstream nm;
  nm << "position_embedding s=" << s << " b=" << b << " h=" << h << " S=" << max_s
     << " offset=" << s_offset << " " << dt(act);
  Pair x = random_pair(act, {s, b, h});
  Pair wpe = random_pair(act, {max_s, h});
  gpu_.add_position_embedding(x.gpu, wpe.gpu, s_offset);
  cpu_.add_position_embedding(x.cpu, wpe.cpu, s_offset);
  bool ok = compare(nm.str() + ": forward", x, kBf16Tol);
  Pair dx = random_pair(act, {s, b, h});
  Pair dwpe = random_pair(DType::kF32, {max_s, h});
  gpu_.position_embedding_backward(dx.gpu, dwpe.gpu, s_offset);
  cpu_.position_embedding_backward(dx.cpu, dwpe.cpu, s_offset);
  ok = compare(nm.str() + ": backward dwpe", dwpe, kF32AccTol) && ok;
  for (Pair* p : {&x, &wpe, &dx, &dwpe}) release(*p);
  return ok;
}

bool OpChecker::cross_entropy(int64_t rows, int64_t cols, int64_t vocab_start, int64_t vocab_total,
                              DType act) {
  std::ostringstream nm;
  nm << "cross_entropy rows=" << rows << " V_local=" << cols << " start=" << vocab_start << " "
     << dt(act);
  Pair logits = random_pair(act, {rows, cols}, -8, 8);
  Pair targets = alloc(DType::kI32, {rows});
  {
    std::uniform_int_distribution<int64_t> dist(0, vocab_total - 1);
    std::vector<float> t(static_cast<size_t>(rows));
    for (auto& v : t) v = static_cast<float>(dist(rng_));
    set(targets, t);
  }
  Pair row_max = alloc(DType::kF32, {rows});
  poison(row_max);
  gpu_.xent_local_max(logits.gpu, row_max.gpu);
  cpu_.xent_local_max(logits.cpu, row_max.cpu);
  bool ok = compare(nm.str() + ": local max", row_max, kF32Tol);
  // Both steps in one pass (tensor parallel 1) against the CPU's two.
  {
    Pair stats1 = alloc(DType::kF32, {2, rows});
    poison(stats1);
    poison(row_max);
    gpu_.xent_local_max_and_stats(logits.gpu, targets.gpu, vocab_start, row_max.gpu, stats1.gpu);
    cpu_.xent_local_max_and_stats(logits.cpu, targets.cpu, vocab_start, row_max.cpu, stats1.cpu);
    ok = compare(nm.str() + ": one-pass max", row_max, kF32Tol) && ok;
    ok = compare(nm.str() + ": one-pass stats", stats1, kF32AccTol) && ok;
    release(stats1);
  }
  // All three steps in one call (tensor parallel 1) on a copy of the logits, against the CPU's
  // steps: the fused kernel where the device has it and the row fits (the GPU's two kernels
  // otherwise), then with it off; and the fused kernel twice on the same logits, bitwise.
  {
    const std::vector<float> host = read_cpu(logits);
    const bool was = gpu_.xent_fused();
    std::vector<float> fused_grad, fused_loss;
    for (bool on : {true, false}) {
      gpu_.set_xent_fused(on);
      const std::string fn =
          nm.str() + ": 1+2+3 (fused kernel " + (gpu_.xent_fused() ? "on" : "off") + ")";
      Pair lg = alloc(act, {rows, cols});
      set(lg, host);
      Pair mx = alloc(DType::kF32, {rows}), st = alloc(DType::kF32, {2, rows});
      Pair ls = alloc(DType::kF32, {rows});
      for (Pair* p : {&mx, &st, &ls}) poison(*p);
      gpu_.xent_max_stats_loss_and_grad(lg.gpu, targets.gpu, vocab_start, mx.gpu, st.gpu, 0.125f,
                                        ls.gpu);
      cpu_.xent_max_stats_loss_and_grad(lg.cpu, targets.cpu, vocab_start, mx.cpu, st.cpu, 0.125f,
                                        ls.cpu);
      ok = compare(fn + " max", mx, kF32Tol) && ok;
      ok = compare(fn + " stats", st, kF32AccTol) && ok;
      ok = compare(fn + " loss", ls, kF32AccTol) && ok;
      ok = compare(fn + " grad (in place)", lg, kBf16Tol) && ok;
      if (on && gpu_.xent_fused()) {
        fused_grad = read_gpu(lg);
        fused_loss = read_gpu(ls);
        set(lg, host);
        gpu_.xent_max_stats_loss_and_grad(lg.gpu, targets.gpu, vocab_start, mx.gpu, st.gpu, 0.125f,
                                          ls.gpu);
        ok = bitwise_same(fn + " grad, twice", read_gpu(lg), fused_grad) && ok;
        ok = bitwise_same(fn + " loss, twice", read_gpu(ls), fused_loss) && ok;
      }
      for (Pair* p : {&lg, &mx, &st, &ls}) release(*p);
    }
    gpu_.set_xent_fused(was);
  }
  // A "global" max a little above the local one, as after the all-reduce over shards.
  std::vector<float> gmax = read_cpu(row_max);
  for (auto& v : gmax) v += 0.75f;
  set(row_max, gmax);
  Pair stats = alloc(DType::kF32, {2, rows});
  poison(stats);
  gpu_.xent_local_stats(logits.gpu, targets.gpu, vocab_start, row_max.gpu, stats.gpu);
  cpu_.xent_local_stats(logits.cpu, targets.cpu, vocab_start, row_max.cpu, stats.cpu);
  ok = compare(nm.str() + ": local stats", stats, kF32AccTol) && ok;
  // "Global" stats: a larger sum (other shards) and the CPU's target logits.
  std::vector<float> gstats = read_cpu(stats);
  for (int64_t r = 0; r < rows; ++r) gstats[static_cast<size_t>(r)] *= 1.5f;
  set(stats, gstats);
  Pair loss = alloc(DType::kF32, {rows});
  poison(loss);
  gpu_.xent_loss_and_grad(logits.gpu, targets.gpu, vocab_start, row_max.gpu, stats.gpu, 0.125f,
                          loss.gpu);
  cpu_.xent_loss_and_grad(logits.cpu, targets.cpu, vocab_start, row_max.cpu, stats.cpu, 0.125f,
                          loss.cpu);
  ok = compare(nm.str() + ": loss", loss, kF32AccTol) && ok;
  ok = compare(nm.str() + ": grad (in place)", logits, kBf16Tol) && ok;
  for (Pair* p : {&logits, &targets, &row_max, &stats, &loss}) release(*p);
  return ok;
}

bool OpChecker::sums(int64_t n) {
  const std::string sfx = " n=" + std::to_string(n);
  Pair x = random_pair(DType::kF32, {n});
  Pair out = alloc(DType::kF32, {1});
  poison(out);
  gpu_.sum(x.gpu, out.gpu, false);
  cpu_.sum(x.cpu, out.cpu, false);
  // A sum of n values of [-1, 1] is ~sqrt(n/3): its f32 rounding error is a few ulps of the
  // terms' partial sums, relative to which the tolerance is stated.
  bool ok = compare_values("sum" + sfx, read_gpu(out), read_cpu(out),
                           Tolerance{1e-5 * std::sqrt(static_cast<double>(n)), 1e-6, 1.0});
  set(out, {2.5f});
  gpu_.sum(x.gpu, out.gpu, true);
  cpu_.sum(x.cpu, out.cpu, true);
  ok = compare_values("sum (accumulate)" + sfx, read_gpu(out), read_cpu(out),
                      Tolerance{1e-5 * std::sqrt(static_cast<double>(n)), 1e-6, 1.0}) &&
       ok;
  set(out, {1.25f});
  gpu_.sum_squares_accumulate(x.gpu, out.gpu);
  cpu_.sum_squares_accumulate(x.cpu, out.cpu);
  ok = compare("sum_squares_accumulate" + sfx, out, kSumTol) && ok;
  release(x);
  release(out);
  return ok;
}

bool OpChecker::adamw(int64_t n, bool with_act, float weight_decay) {
  std::ostringstream nm;
  nm << "adamw n=" << n << " wd=" << weight_decay << (with_act ? " (+bf16 copy)" : "");
  Pair p = random_pair(DType::kF32, {n});
  Pair g = random_pair(DType::kF32, {n});
  Pair m = random_pair(DType::kF32, {n}, -0.1f, 0.1f);
  Pair v = random_pair(DType::kF32, {n}, 0.0f, 0.01f);
  Pair act = alloc(DType::kBF16, {with_act ? n : 1});
  poison(act);
  Backend::AdamW hp{1e-3f, 0.9f, 0.95f, 1e-8f, weight_decay, 0.5f, 3};
  gpu_.adamw(hp, p.gpu, g.gpu, m.gpu, v.gpu, with_act ? act.gpu : Tensor{});
  cpu_.adamw(hp, p.cpu, g.cpu, m.cpu, v.cpu, with_act ? act.cpu : Tensor{});
  bool ok = compare(nm.str() + ": param", p, kF32AccTol);
  ok = compare(nm.str() + ": m", m, kF32AccTol) && ok;
  ok = compare(nm.str() + ": v", v, kF32AccTol) && ok;
  if (with_act) ok = compare(nm.str() + ": bf16 copy", act, kBf16Tol) && ok;
  for (Pair* q : {&p, &g, &m, &v, &act}) release(*q);
  return ok;
}

bool OpChecker::determinism(int64_t s, int64_t b, int64_t heads, int64_t groups, int64_t d) {
  std::ostringstream nm;
  nm << " s=" << s << " b=" << b << " heads=" << heads << " groups=" << groups << " d=" << d;
  const DType act = DType::kBF16;
  const int64_t h = heads * d, T = s * b, planes = heads + 2 * groups;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  Pair qkv = random_pair(act, {s, b, planes, d}, -2, 2);
  Pair out = alloc(act, {s, b, heads, d});
  Pair lse = alloc(DType::kF32, {b, heads, s});
  Pair dout = random_pair(act, {s, b, heads, d});
  Pair dqkv = alloc(act, {s, b, planes, d});
  Pair x = random_pair(act, {T, h});
  Pair gamma = random_pair(act, {h});
  Pair mean = alloc(DType::kF32, {T});
  Pair rstd = alloc(DType::kF32, {T});
  Pair dgamma = alloc(DType::kF32, {h});
  Pair dbeta = alloc(DType::kF32, {h});
  Pair dx = alloc(act, {T, h});
  Pair tokens = alloc(DType::kI32, {T});
  {
    std::uniform_int_distribution<int> dist(0, 15);  // many repeats
    std::vector<float> ids(static_cast<size_t>(T));
    for (auto& v : ids) v = static_cast<float>(dist(rng_));
    set(tokens, ids);
  }
  Pair dwte = alloc(DType::kF32, {16, h});
  Pair total = alloc(DType::kF32, {1});
  Pair colsum = alloc(DType::kF32, {planes * d});
  std::vector<float> runs[2][8];
  for (int run = 0; run < 2; ++run) {
    gpu_.attention_forward(qkv.gpu, out.gpu, lse.gpu, scale);
    gpu_.fill(colsum.gpu, 0.0f);
    gpu_.attention_backward(qkv.gpu, out.gpu, dout.gpu, lse.gpu, scale, dqkv.gpu, colsum.gpu);
    gpu_.layernorm_forward(x.gpu, gamma.gpu, gamma.gpu, 1e-5f, dx.gpu, mean.gpu, rstd.gpu);
    gpu_.fill(dgamma.gpu, 0.0f);
    gpu_.fill(dbeta.gpu, 0.0f);
    gpu_.layernorm_backward(x.gpu, x.gpu, gamma.gpu, mean.gpu, rstd.gpu, dx.gpu, dgamma.gpu,
                            dbeta.gpu);
    gpu_.fill(dwte.gpu, 0.0f);
    gpu_.embedding_backward(tokens.gpu, x.gpu, 0, dwte.gpu);
    gpu_.fill(total.gpu, 0.0f);
    gpu_.sum_squares_accumulate(dwte.gpu, total.gpu);
    runs[run][0] = read_gpu(out);
    runs[run][1] = read_gpu(lse);
    runs[run][2] = read_gpu(dqkv);
    runs[run][3] = read_gpu(dx);
    runs[run][4] = read_gpu(dgamma);
    runs[run][5] = read_gpu(dwte);
    runs[run][6] = read_gpu(total);
    runs[run][7] = read_gpu(colsum);
  }
  const char* what[8] = {
      "attention out",    "attention lse",  "attention dqkv", "layernorm dx",
      "layernorm dgamma", "embedding dwte", "sum_squares",    "attention dqkv column sums"};
  bool ok = true;
  for (int i = 0; i < 8; ++i)
    ok = bitwise_same(std::string("determinism ") + what[i] + nm.str(), runs[0][i], runs[1][i]) &&
         ok;
  for (Pair* p : {&qkv, &out, &lse, &dout, &dqkv, &x, &gamma, &mean, &rstd, &dgamma, &dbeta, &dx,
                  &tokens, &dwte, &total, &colsum})
    release(*p);
  return ok;
}

bool OpChecker::rmsnorm(int64_t rows, int64_t h, DType act) {
  const std::string sfx =
      " rows=" + std::to_string(rows) + " h=" + std::to_string(h) + " " + dt(act);
  Pair x = random_pair(act, {rows, h}, -2, 2);
  Pair gamma = random_pair(act, {h}, 0.5f, 1.5f);
  Pair y = alloc(act, {rows, h});
  Pair rstd = alloc(DType::kF32, {rows});
  poison(y);
  poison(rstd);
  gpu_.rmsnorm_forward(x.gpu, gamma.gpu, 1e-5f, y.gpu, rstd.gpu);
  cpu_.rmsnorm_forward(x.cpu, gamma.cpu, 1e-5f, y.cpu, rstd.cpu);
  bool ok = compare("rmsnorm_forward" + sfx + ": y", y, kBf16Tol);
  ok = compare("rmsnorm_forward" + sfx + ": rstd", rstd, kF32AccTol) && ok;
  set(rstd, read_cpu(rstd));  // the backward from the same statistics on both sides
  Pair dy = random_pair(act, {rows, h});
  Pair dx = alloc(act, {rows, h});
  Pair dgamma = random_pair(DType::kF32, {h});
  poison(dx);
  gpu_.rmsnorm_backward(dy.gpu, x.gpu, gamma.gpu, rstd.gpu, dx.gpu, dgamma.gpu);
  cpu_.rmsnorm_backward(dy.cpu, x.cpu, gamma.cpu, rstd.cpu, dx.cpu, dgamma.cpu);
  ok = compare("rmsnorm_backward" + sfx + ": dx", dx, kBf16Tol) && ok;
  ok = compare("rmsnorm_backward" + sfx + ": dgamma", dgamma, kF32AccTol) && ok;
  Pair dres = random_pair(act, {rows, h});
  const std::vector<float> dres0 = read_cpu(dres), dg0 = read_gpu(dgamma);
  set(dgamma, dg0);
  gpu_.rmsnorm_backward_add(dy.gpu, x.gpu, gamma.gpu, rstd.gpu, dx.gpu, dgamma.gpu, dres.gpu);
  cpu_.rmsnorm_backward_add(dy.cpu, x.cpu, gamma.cpu, rstd.cpu, dx.cpu, dgamma.cpu, dres.cpu);
  ok = compare("rmsnorm_backward_add" + sfx + ": dres", dres, kBf16Tol) && ok;
  ok = compare("rmsnorm_backward_add" + sfx + ": dgamma", dgamma, kF32AccTol) && ok;
  const std::vector<float> fused = read_gpu(dres), fused_dg = read_gpu(dgamma);
  set(dres, dres0);
  set(dgamma, dg0);
  gpu_.rmsnorm_backward(dy.gpu, x.gpu, gamma.gpu, rstd.gpu, dx.gpu, dgamma.gpu);
  gpu_.add(dres.gpu, dres.gpu, dx.gpu);
  ok = bitwise_same("rmsnorm_backward_add" + sfx + ": dres = unfused", fused, read_gpu(dres)) && ok;
  ok = bitwise_same("rmsnorm_backward_add" + sfx + ": dgamma = unfused", fused_dg,
                    read_gpu(dgamma)) &&
       ok;
  for (Pair* p : {&x, &gamma, &y, &rstd, &dy, &dx, &dgamma, &dres}) release(*p);
  return ok;
}

bool OpChecker::swiglu(int64_t rows, int64_t f, DType act) {
  const std::string sfx =
      " rows=" + std::to_string(rows) + " f=" + std::to_string(f) + " " + dt(act);
  Pair x = random_pair(act, {rows, 2 * f}, -3, 3);
  Pair y = alloc(act, {rows, f});
  poison(y);
  gpu_.swiglu_forward(x.gpu, y.gpu);
  cpu_.swiglu_forward(x.cpu, y.cpu);
  bool ok = compare("swiglu_forward" + sfx + ": y", y, kBf16Tol);
  Pair dy = random_pair(act, {rows, f});
  Pair dx = alloc(act, {rows, 2 * f});
  poison(dx);
  gpu_.swiglu_backward(dy.gpu, x.gpu, dx.gpu);
  cpu_.swiglu_backward(dy.cpu, x.cpu, dx.cpu);
  ok = compare("swiglu_backward" + sfx + ": dx", dx, kBf16Tol) && ok;
  for (Pair* p : {&x, &y, &dy, &dx}) release(*p);
  return ok;
}

bool OpChecker::rope(int64_t s, int64_t b, int64_t heads, int64_t groups, int64_t d,
                     int64_t rot_dim, DType act) {
  const std::string sfx = " s=" + std::to_string(s) + " b=" + std::to_string(b) +
                          " heads=" + std::to_string(heads) + " groups=" + std::to_string(groups) +
                          " d=" + std::to_string(d) + " rot=" + std::to_string(rot_dim) + " " +
                          dt(act);
  Pair qkv = random_pair(act, {s, b, heads + 2 * groups, d});
  const std::vector<float> before = read_cpu(qkv);
  gpu_.rope(qkv.gpu, heads, groups, rot_dim, 500000.0f, false);
  cpu_.rope(qkv.cpu, heads, groups, rot_dim, 500000.0f, false);
  bool ok = compare("rope" + sfx + ": qkv", qkv, kBf16Tol);
  set(qkv, before);
  gpu_.rope(qkv.gpu, heads, groups, rot_dim, 500000.0f, true);
  cpu_.rope(qkv.cpu, heads, groups, rot_dim, 500000.0f, true);
  ok = compare("rope inverse" + sfx + ": qkv", qkv, kBf16Tol) && ok;
  release(qkv);
  return ok;
}

bool OpChecker::run_all() {
  const DType bf = DType::kBF16, f32 = DType::kF32;
  bool ok = true;
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb) {
      ok = gemm(ta, tb, 96, 80, 72, bf, bf, 1.0f, 0.0f) && ok;
      ok = gemm(ta, tb, 96, 80, 72, bf, f32, 1.0f, 1.0f) && ok;
    }
  ok = gemm(false, true, 33, 17, 9, bf, bf, 0.5f, 0.0f) && ok;
  ok = gemm(false, false, 40, 24, 56, f32, f32, 1.0f, 0.0f) && ok;
  ok = gemm(true, false, 64, 48, 128, bf, f32, 1.0f, 1.0f) && ok;
  for (bool fused : {true, false}) {
    ok = gemm_epilogue(Epilogue::kBias, 64, 96, 48, fused) && ok;
    ok = gemm_epilogue(Epilogue::kBiasGelu, 64, 96, 48, fused) && ok;
    ok = gemm_epilogue(Epilogue::kResidual, 64, 96, 48, fused) && ok;
    ok = gemm_epilogue(Epilogue::kBiasResidual, 64, 96, 48, fused) && ok;
    ok = gemm_epilogue(Epilogue::kBiasResidual, 300, 200, 72, fused) && ok;
    ok = gemm_dgelu(64, 96, 48, bf, fused) && ok;
    ok = gemm_dgelu(300, 200, 72, bf, fused) && ok;
    ok = gemm_dgelu(33, 50, 24, bf, fused) && ok;  // n % 8 != 0: never fused
    ok = gemm_dgelu(40, 24, 56, f32, fused) && ok;
  }
  ok = bias_grad(300, 96, bf) && ok;
  ok = bias_grad(20000, 264, bf) && ok;  // 157 rows a part: the batched loads' several rounds
  ok = bias_grad(77, 50, f32) && ok;
  ok = elementwise(1000, bf) && ok;
  ok = elementwise(1003, f32) && ok;
  ok = layernorm(64, 2048, bf) && ok;
  ok = layernorm(50, 96, bf) && ok;
  ok = layernorm(20, 100, bf) && ok;  // h % 8 != 0: the generic kernels
  ok = layernorm(9, 3000, bf) && ok;  // 4 warps per row, some lanes without columns
  ok = layernorm(33, 256, f32) && ok;
  ok = layernorm(1000, 2048, bf) && ok;  // 63 row parts of the one-pass backward
  // 282 row parts, more than the pipelined backward's resident blocks on a 132-SM GPU (264): a
  // block takes two parts, its pipeline running on from the first into the second.
  ok = layernorm(4500, 2048, bf) && ok;
  ok = layernorm(20, 12288, bf) && ok;  // 8 warps per row, 96 KB of shared memory
  ok = layernorm(3001, 384, bf) && ok;  // pipelined with a warp per row, a short last part
  // RMSNorm's backward on LayerNorm's one-pass kernel: the same shapes' paths as above.
  ok = rmsnorm(64, 2048, bf) && ok;
  ok = rmsnorm(1000, 4096, bf) && ok;  // several row parts of the weight gradient
  ok = rmsnorm(4500, 2048, bf) && ok;  // pipelined, a block taking two parts
  ok = rmsnorm(9, 3000, bf) && ok;     // 4 warps per row, some lanes without columns
  ok = rmsnorm(3001, 384, bf) && ok;   // pipelined with a warp per row, a short last part
  ok = rmsnorm(20, 16384, bf) && ok;   // 8 warps per row, 64 KB of shared memory
  ok = rmsnorm(20, 100, bf) && ok;     // h % 8 != 0: the scalar path
  ok = rmsnorm(33, 256, f32) && ok;
  ok = swiglu(300, 5632, bf) && ok;
  ok = swiglu(17, 13, bf) && ok;  // f % 8 != 0
  ok = swiglu(40, 64, f32) && ok;
  ok = rope(256, 2, 8, 2, 128, 128, bf) && ok;
  ok = rope(100, 1, 4, 4, 64, 32, bf) && ok;  // rotary share 1/2, multi-head
  ok = rope(33, 2, 6, 3, 40, 40, f32) && ok;
  ok = rope(300, 2, 32, 8, 64, 64, bf) && ok;  // Llama's heads and groups
  for (bool naive : {false, true}) {
    ok = attention(128, 2, 2, 2, 128, bf, naive) && ok;
    ok = attention(200, 1, 3, 3, 64, bf, naive) && ok;
    ok = attention(77, 2, 1, 1, 40, bf, naive) && ok;
    ok = attention(300, 1, 2, 2, 128, bf, naive) && ok;
    ok = attention(1, 1, 1, 1, 8, bf, naive) && ok;
    // Grouped-query: dK and dV summed over each group's heads.
    ok = attention(300, 2, 8, 2, 128, bf, naive) && ok;
    ok = attention(257, 1, 6, 3, 64, bf, naive) && ok;
    ok = attention(100, 2, 4, 1, 40, bf, naive) && ok;
  }
  ok = attention(65, 1, 2, 2, 24, f32, true) && ok;
  ok = attention(65, 1, 4, 2, 24, f32, true) && ok;
  // b·heads 140 > 132: a backward block takes several key blocks (dQ partial sums added).
  ok = attention(384, 2, 70, 70, 64, bf, false) && ok;
  // Grouped-query backward plans (attention.cu's bwd_plan): heads dealt one per chunk, dK and dV
  // added by the finalize (these two and the loop's); whole groups per block, dK and dV summed in
  // registers over 2 heads (the next two).
  ok = attention(640, 2, 32, 8, 128, bf, false) && ok;
  ok = attention(520, 1, 32, 4, 64, bf, false) && ok;
  ok = attention(100, 33, 8, 4, 64, bf, false) && ok;
  ok = attention(64, 33, 8, 4, 128, bf, false) && ok;
  ok = embedding(300, 50, 10, 64, bf, false) && ok;
  ok = embedding(100, 20, 0, 20, f32, false) && ok;
  ok = embedding(257, 40, 5, 32, bf, true) && ok;
  ok = position_embedding(7, 3, 24, 16, 5, bf) && ok;
  ok = position_embedding(5, 2, 10, 5, 0, f32) && ok;
  ok = cross_entropy(37, 1000, 1000, 3000, bf) && ok;
  ok = cross_entropy(11, 1001, 0, 2002, bf) && ok;  // cols % 8 != 0: the scalar path
  ok = cross_entropy(13, 256, 256, 512, f32) && ok;
  ok = cross_entropy(9, 50257, 0, 50257, bf) && ok;  // GPT-2's vocabulary: many chunks a thread
  // The fused kernel's clusters of 2, 4 and 8 CTAs (last slices shorter in the first two), in
  // f32 at the widest row it holds, and a row too wide for it (the two kernels).
  ok = cross_entropy(12, 32008, 0, 32008, bf) && ok;
  ok = cross_entropy(10, 50312, 50312, 100624, bf) && ok;
  ok = cross_entropy(16, 128256, 0, 128256, bf) && ok;
  ok = cross_entropy(4, 131072, 0, 131072, f32) && ok;
  ok = cross_entropy(3, 131080, 0, 131080, bf) && ok;
  ok = sums(100003) && ok;
  ok = sums(5) && ok;
  ok = adamw(1003, true, 0.1f) && ok;
  ok = adamw(4096, false, 0.0f) && ok;
  ok = determinism(192, 2, 2, 2, 128) && ok;
  ok = determinism(384, 2, 70, 70, 64) && ok;
  ok = determinism(384, 2, 8, 2, 128) && ok;  // dK, dV summed over a group's heads
  return ok;
}

}  // namespace mplan::exec::cuda
