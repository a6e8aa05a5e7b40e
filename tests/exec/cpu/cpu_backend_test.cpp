// CpuBackend against straightforward f64 references written here (naive loops), finite
// differences of those references for the backward ops, and hand-derived values (bf16 rounding,
// one AdamW step). Every op is run in f32 and, where it has act-dtype tensors, in bf16.
#include "exec/cpu/cpu_backend.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "tests/exec/support/test_tensors.hpp"

namespace mplan::exec {
namespace {

using testing::all_close;
using testing::make;
using testing::randn;
using testing::read;
using testing::rounded;

class CpuBackendTest : public ::testing::TestWithParam<DType> {
 protected:
  CpuBackend be;
  DType act() const { return GetParam(); }
  bool bf16() const { return act() == DType::kBF16; }
  // One rounding of an act-dtype output on top of f32 arithmetic.
  double rtol() const { return bf16() ? 1.0 / 128 : 2e-5; }
};

double gelu_ref(double x) {
  return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
}

// Central difference of f at x along every coordinate.
std::vector<double> numeric_grad(std::function<double(const std::vector<double>&)> f,
                                 std::vector<double> x, double eps = 1e-6) {
  std::vector<double> g(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    double keep = x[i];
    x[i] = keep + eps;
    double up = f(x);
    x[i] = keep - eps;
    double down = f(x);
    x[i] = keep;
    g[i] = (up - down) / (2 * eps);
  }
  return g;
}

std::vector<double> to_double(const std::vector<float>& v) { return {v.begin(), v.end()}; }

// ---- bf16 ------------------------------------------------------------------------------------

TEST(Bf16, RoundsToNearestEven) {
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(f32_to_bf16(1.0f + 0x1.0p-8f), 0x3f80);               // tie -> even (down)
  EXPECT_EQ(f32_to_bf16(1.0f + 3 * 0x1.0p-8f), 0x3f82);           // tie -> even (up)
  EXPECT_EQ(f32_to_bf16(1.0f + 0x1.0p-8f + 0x1.0p-20f), 0x3f81);  // above the tie
  EXPECT_EQ(f32_to_bf16(-2.0f), 0xc000);
  EXPECT_EQ(f32_to_bf16(INFINITY), 0x7f80);
  EXPECT_EQ(f32_to_bf16(3.4028235e38f), 0x7f80);  // largest float rounds up to infinity
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(NAN))));
  EXPECT_EQ(bf16_to_f32(0x4049), 3.140625f);
}

// ---- memory ----------------------------------------------------------------------------------

TEST(CpuBackendMemory, CountsCurrentAndPeakByTag) {
  CpuBackend be;
  Tensor a = be.alloc(DType::kF32, {10, 10}, "weights");    // 400 bytes
  Tensor b = be.alloc(DType::kBF16, {100}, "activations");  // 200 bytes
  EXPECT_EQ(be.memory_stats().current_bytes, 600);
  be.release(b);
  EXPECT_EQ(b.data, nullptr);
  Tensor c = be.alloc(DType::kI32, {25}, "activations");  // 100 bytes
  MemoryStats s = be.memory_stats();
  EXPECT_EQ(s.current_bytes, 500);
  EXPECT_EQ(s.peak_bytes, 600);
  EXPECT_EQ(s.device_peak_bytes, -1);
  EXPECT_EQ(be.memory_by_tag().at("activations").current_bytes, 100);
  EXPECT_EQ(be.memory_by_tag().at("activations").peak_bytes, 200);
  EXPECT_EQ(be.memory_by_tag().at("weights").peak_bytes, 400);
  be.reset_peak_memory();
  EXPECT_EQ(be.memory_stats().peak_bytes, 500);
  be.release(a);
  be.release(c);
  EXPECT_EQ(be.memory_stats().current_bytes, 0);
}

TEST(CpuBackendMemory, FillCastCopy) {
  CpuBackend be;
  Tensor f = make(be, DType::kF32, {3}, {1.0f, 1.00390625f, -3.3f});
  Tensor h = be.alloc(DType::kBF16, {3}, "t");
  be.cast(h, f);
  EXPECT_EQ(read(be, h), (std::vector<float>{1.0f, 1.0f, round_to_bf16(-3.3f)}));
  Tensor g = be.alloc(DType::kF32, {3}, "t");
  be.cast(g, h);
  EXPECT_EQ(read(be, g), read(be, h));
  be.fill(g, 2.5f);
  EXPECT_EQ(read(be, g), (std::vector<float>{2.5f, 2.5f, 2.5f}));
  Tensor i = be.alloc(DType::kI32, {2}, "t");
  be.fill(i, 7.0f);
  EXPECT_EQ(read(be, i), (std::vector<float>{7, 7}));
  be.copy(g, f);
  EXPECT_EQ(read(be, g), read(be, f));
}

// ---- GEMM ------------------------------------------------------------------------------------

struct GemmCase {
  bool ta, tb;
  Epilogue e;
  float alpha, beta;
  bool f32_out;
};

TEST_P(CpuBackendTest, GemmAllTransposesAndEpilogues) {
  const int64_t m = 7, n = 5, k = 9;
  std::vector<GemmCase> cases;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) cases.push_back({ta, tb, Epilogue::kNone, 1.0f, 0.0f, false});
  cases.push_back({true, false, Epilogue::kNone, 0.5f, 1.0f, true});  // weight-grad accumulate
  cases.push_back({false, true, Epilogue::kBias, 1.0f, 0.0f, false});
  cases.push_back({false, true, Epilogue::kBiasGelu, 1.0f, 0.0f, false});
  uint32_t seed = 1;
  for (const GemmCase& c : cases) {
    SCOPED_TRACE(::testing::Message() << "ta " << c.ta << " tb " << c.tb << " epilogue "
                                      << static_cast<int>(c.e) << " beta " << c.beta);
    auto av = rounded(randn(m * k, seed++), act()), bv = rounded(randn(k * n, seed++), act());
    auto cv = randn(m * n, seed++), biasv = rounded(randn(n, seed++), act());
    DType cd = c.f32_out ? DType::kF32 : act();
    Tensor a = c.ta ? make(be, act(), {k, m}, av) : make(be, act(), {m, k}, av);
    Tensor b = c.tb ? make(be, act(), {n, k}, bv) : make(be, act(), {k, n}, bv);
    Tensor ct = make(be, cd, {m, n}, cv);
    cv = rounded(cv, cd);
    Tensor bias = make(be, act(), {n}, biasv);
    Tensor aux = be.alloc(act(), {m, n}, "t");
    GemmArgs g{c.ta, c.tb, m, n, k, c.alpha, c.beta, c.e};
    be.gemm(g, a, b, ct, bias, aux);
    std::vector<double> want(m * n), pre(m * n);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0;
        for (int64_t p = 0; p < k; ++p) {
          double x = c.ta ? av[p * m + i] : av[i * k + p];
          double y = c.tb ? bv[j * k + p] : bv[p * n + j];
          acc += x * y;
        }
        double v = c.alpha * acc + c.beta * cv[i * n + j];
        if (c.e != Epilogue::kNone) v += biasv[j];
        pre[i * n + j] = v;
        want[i * n + j] = c.e == Epilogue::kBiasGelu ? gelu_ref(v) : v;
      }
    double tol = c.f32_out ? 2e-5 : rtol();
    EXPECT_TRUE(all_close(read(be, ct), want, tol, 1e-4));
    if (c.e == Epilogue::kBiasGelu) {
      EXPECT_TRUE(all_close(read(be, aux), pre, rtol(), 1e-4));
    }
  }
}

// kDGelu: C = (A·B) ∘ gelu'(aux), GeLU's backward in the epilogue of the GEMM that gives its
// output's gradient. Against the plain GEMM followed by gelu_backward (bitwise in f32, where the
// product is stored unrounded; in bf16 one rounding fewer than the two passes) and an f64
// reference with gelu' by central differences.
TEST_P(CpuBackendTest, DGeluEpilogueIsGemmThenGeluBackward) {
  const int64_t m = 7, n = 6, k = 9;
  auto av = rounded(randn(m * k, 31), act()), bv = rounded(randn(k * n, 32), act());
  auto xv = rounded(randn(m * n, 33, 2.0f), act());
  Tensor a = make(be, act(), {m, k}, av), b = make(be, act(), {k, n}, bv);
  Tensor aux = make(be, act(), {m, n}, xv);
  Tensor c = be.alloc(act(), {m, n}, "t"), dh = be.alloc(act(), {m, n}, "t");
  Tensor dx = be.alloc(act(), {m, n}, "t");
  be.gemm({.m = m, .n = n, .k = k, .epilogue = Epilogue::kDGelu}, a, b, c, {}, aux);
  be.gemm({.m = m, .n = n, .k = k}, a, b, dh);
  be.gelu_backward(dh, aux, dx);
  const std::vector<float> got = read(be, c), two_pass = read(be, dx);
  if (!bf16()) {
    EXPECT_EQ(got, two_pass);
  }
  EXPECT_TRUE(all_close(got, to_double(two_pass), bf16() ? 2 * rtol() : 0.0, 1e-6));
  std::vector<double> want(m * n);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0;
      for (int64_t p = 0; p < k; ++p) acc += double(av[i * k + p]) * bv[p * n + j];
      const double x = xv[i * n + j];
      want[i * n + j] = acc * (gelu_ref(x + 1e-6) - gelu_ref(x - 1e-6)) / 2e-6;
    }
  EXPECT_TRUE(all_close(got, want, rtol(), 1e-4));
  // The contract's checks: no accumulation, aux of C's dtype.
  EXPECT_THROW(be.gemm({.m = m, .n = n, .k = k, .beta = 1.0f, .epilogue = Epilogue::kDGelu}, a, b,
                       c, {}, aux),
               InternalError);
  Tensor aux_other = be.alloc(bf16() ? DType::kF32 : DType::kBF16, {m, n}, "t");
  EXPECT_THROW(
      be.gemm({.m = m, .n = n, .k = k, .epilogue = Epilogue::kDGelu}, a, b, c, {}, aux_other),
      InternalError);
}

// kResidual / kBiasResidual: C = A·B^T [+ bias] + aux, rounded once, against an f64 reference;
// aux may be C itself (in place); the contract's checks as kDGelu's.
TEST_P(CpuBackendTest, ResidualEpiloguesAddAuxAndRoundOnce) {
  const int64_t m = 6, n = 5, k = 8;
  auto av = rounded(randn(m * k, 41), act()), bv = rounded(randn(n * k, 42), act());
  auto rv = rounded(randn(m * n, 43, 3.0f), act()), biasv = rounded(randn(n, 44), act());
  Tensor a = make(be, act(), {m, k}, av), b = make(be, act(), {n, k}, bv);
  Tensor bias = make(be, act(), {n}, biasv);
  for (Epilogue e : {Epilogue::kResidual, Epilogue::kBiasResidual}) {
    for (bool in_place : {false, true}) {
      SCOPED_TRACE(::testing::Message()
                   << "epilogue " << static_cast<int>(e) << " in place " << in_place);
      Tensor aux = make(be, act(), {m, n}, rv);
      Tensor c = in_place ? aux : be.alloc(act(), {m, n}, "t");
      be.gemm({.trans_b = true, .m = m, .n = n, .k = k, .epilogue = e}, a, b, c, bias, aux);
      std::vector<double> want(m * n);
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          double acc = 0;
          for (int64_t p = 0; p < k; ++p) acc += double(av[i * k + p]) * bv[j * k + p];
          if (e == Epilogue::kBiasResidual) acc += biasv[j];
          want[i * n + j] = acc + rv[i * n + j];
        }
      // One rounding of the sum: within half an ulp of the exact value (plus f32 sums).
      EXPECT_TRUE(all_close(read(be, c), want, rtol(), 1e-5));
      if (!in_place) {  // aux only read
        EXPECT_EQ(read(be, aux), rv);
      }
    }
  }
  Tensor c = be.alloc(act(), {m, n}, "t"), aux = be.alloc(act(), {m, n}, "t");
  EXPECT_THROW(
      be.gemm(
          {.trans_b = true, .m = m, .n = n, .k = k, .beta = 1.0f, .epilogue = Epilogue::kResidual},
          a, b, c, {}, aux),
      InternalError);
  Tensor aux_other = be.alloc(bf16() ? DType::kF32 : DType::kBF16, {m, n}, "t");
  EXPECT_THROW(be.gemm({.trans_b = true, .m = m, .n = n, .k = k, .epilogue = Epilogue::kResidual},
                       a, b, c, {}, aux_other),
               InternalError);
}

TEST_P(CpuBackendTest, BiasGradAccumulatesColumnSums) {
  auto dy = rounded(randn(6 * 4, 3), act());
  Tensor t = make(be, act(), {6, 4}, dy);
  Tensor db = make(be, DType::kF32, {4}, {1, 2, 3, 4});
  be.bias_grad_accumulate(t, db);
  std::vector<double> want{1, 2, 3, 4};
  for (int r = 0; r < 6; ++r)
    for (int j = 0; j < 4; ++j) want[j] += dy[r * 4 + j];
  EXPECT_TRUE(all_close(read(be, db), want, 1e-6, 1e-6));
}

TEST_P(CpuBackendTest, AddScaleGelu) {
  auto x = rounded(randn(50, 4, 2.0f), act()), y = rounded(randn(50, 5), act());
  Tensor a = make(be, act(), {50}, x), b = make(be, act(), {50}, y);
  Tensor out = be.alloc(act(), {50}, "t");
  be.add(out, a, b);
  std::vector<double> sum(50), scaled(50), gelu(50), dgelu(50);
  for (int i = 0; i < 50; ++i) sum[i] = double(x[i]) + y[i];
  EXPECT_TRUE(all_close(read(be, out), sum, rtol(), 1e-6));
  be.scale(b, -0.25f);
  for (int i = 0; i < 50; ++i) scaled[i] = -0.25 * y[i];
  EXPECT_TRUE(all_close(read(be, b), scaled, rtol(), 1e-7));
  be.gelu_forward(a, out);
  for (int i = 0; i < 50; ++i) gelu[i] = gelu_ref(x[i]);
  EXPECT_TRUE(all_close(read(be, out), gelu, rtol(), 1e-6));
  // Backward: dy · gelu'(x), gelu' by central differences of the f64 reference.
  Tensor dy = make(be, act(), {50}, y);
  be.gelu_backward(dy, a, out);
  for (int i = 0; i < 50; ++i)
    dgelu[i] = y[i] * (gelu_ref(x[i] + 1e-6) - gelu_ref(x[i] - 1e-6)) / 2e-6;
  EXPECT_TRUE(all_close(read(be, out), dgelu, rtol(), 1e-5));
}

// ---- layernorm -------------------------------------------------------------------------------

std::vector<double> layernorm_ref(const std::vector<double>& x, const std::vector<double>& g,
                                  const std::vector<double>& b, int64_t rows, int64_t h) {
  std::vector<double> y(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    double mu = 0, var = 0;
    for (int64_t j = 0; j < h; ++j) mu += x[r * h + j];
    mu /= h;
    for (int64_t j = 0; j < h; ++j) var += (x[r * h + j] - mu) * (x[r * h + j] - mu);
    var /= h;
    for (int64_t j = 0; j < h; ++j)
      y[r * h + j] = (x[r * h + j] - mu) / std::sqrt(var + 1e-5) * g[j] + b[j];
  }
  return y;
}

TEST_P(CpuBackendTest, LayerNormForwardAndBackward) {
  const int64_t rows = 5, h = 8;
  auto xv = rounded(randn(rows * h, 11, 3.0f), act());
  for (auto& v : xv) v = rounded({v + 1.5f}, act())[0];  // nonzero mean
  auto gv = rounded(randn(h, 12), act()), bv = rounded(randn(h, 13), act());
  auto dyv = rounded(randn(rows * h, 14), act());
  Tensor x = make(be, act(), {rows, h}, xv), g = make(be, act(), {h}, gv),
         b = make(be, act(), {h}, bv);
  Tensor y = be.alloc(act(), {rows, h}, "t");
  Tensor mean = be.alloc(DType::kF32, {rows}, "t"), rstd = be.alloc(DType::kF32, {rows}, "t");
  be.layernorm_forward(x, g, b, 1e-5f, y, mean, rstd);
  auto want = layernorm_ref(to_double(xv), to_double(gv), to_double(bv), rows, h);
  EXPECT_TRUE(all_close(read(be, y), want, rtol(), 1e-5));

  Tensor dy = make(be, act(), {rows, h}, dyv), dx = be.alloc(act(), {rows, h}, "t");
  Tensor dg = make(be, DType::kF32, {h}, std::vector<float>(h, 0.5f));
  Tensor db = make(be, DType::kF32, {h}, std::vector<float>(h, -1.0f));
  be.layernorm_backward(dy, x, g, mean, rstd, dx, dg, db);
  // L = sum(dy · LN(x, g, b)); gradients by central differences of the f64 reference.
  auto loss = [&](const std::vector<double>& xx, const std::vector<double>& gg,
                  const std::vector<double>& bb) {
    auto yy = layernorm_ref(xx, gg, bb, rows, h);
    double l = 0;
    for (size_t i = 0; i < yy.size(); ++i) l += yy[i] * dyv[i];
    return l;
  };
  auto X = to_double(xv), G = to_double(gv), B = to_double(bv);
  auto dx_num = numeric_grad([&](const std::vector<double>& v) { return loss(v, G, B); }, X);
  auto dg_num = numeric_grad([&](const std::vector<double>& v) { return loss(X, v, B); }, G);
  auto db_num = numeric_grad([&](const std::vector<double>& v) { return loss(X, G, v); }, B);
  for (auto& v : dg_num) v += 0.5;
  for (auto& v : db_num) v -= 1.0;
  EXPECT_TRUE(all_close(read(be, dx), dx_num, rtol(), 1e-4));
  EXPECT_TRUE(all_close(read(be, dg), dg_num, 1e-4, 1e-4));
  EXPECT_TRUE(all_close(read(be, db), db_num, 1e-4, 1e-4));
}

// ---- Llama-family layers ---------------------------------------------------------------------

std::vector<double> rmsnorm_ref(const std::vector<double>& x, const std::vector<double>& g,
                                int64_t rows, int64_t h) {
  std::vector<double> y(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (int64_t j = 0; j < h; ++j) ss += x[r * h + j] * x[r * h + j];
    const double rs = 1 / std::sqrt(ss / h + 1e-5);
    for (int64_t j = 0; j < h; ++j) y[r * h + j] = x[r * h + j] * rs * g[j];
  }
  return y;
}

TEST_P(CpuBackendTest, RmsNormForwardAndBackward) {
  const int64_t rows = 5, h = 8;
  auto xv = rounded(randn(rows * h, 21, 2.0f), act());
  auto gv = rounded(randn(h, 22), act()), dyv = rounded(randn(rows * h, 23), act());
  Tensor x = make(be, act(), {rows, h}, xv), g = make(be, act(), {h}, gv);
  Tensor y = be.alloc(act(), {rows, h}, "t"), rstd = be.alloc(DType::kF32, {rows}, "t");
  be.rmsnorm_forward(x, g, 1e-5f, y, rstd);
  EXPECT_TRUE(
      all_close(read(be, y), rmsnorm_ref(to_double(xv), to_double(gv), rows, h), rtol(), 1e-5));
  Tensor dy = make(be, act(), {rows, h}, dyv), dx = be.alloc(act(), {rows, h}, "t");
  Tensor dg = make(be, DType::kF32, {h}, std::vector<float>(h, 0.25f));
  be.rmsnorm_backward(dy, x, g, rstd, dx, dg);
  auto loss = [&](const std::vector<double>& xx, const std::vector<double>& gg) {
    auto yy = rmsnorm_ref(xx, gg, rows, h);
    double l = 0;
    for (size_t i = 0; i < yy.size(); ++i) l += yy[i] * dyv[i];
    return l;
  };
  auto X = to_double(xv), G = to_double(gv);
  auto dx_num = numeric_grad([&](const std::vector<double>& v) { return loss(v, G); }, X);
  auto dg_num = numeric_grad([&](const std::vector<double>& v) { return loss(X, v); }, G);
  for (auto& v : dg_num) v += 0.25;
  EXPECT_TRUE(all_close(read(be, dx), dx_num, rtol(), 1e-4));
  EXPECT_TRUE(all_close(read(be, dg), dg_num, 1e-4, 1e-4));
  // The residual form adds the same dx (rounded) into dres.
  Tensor dres = make(be, act(), {rows, h}, std::vector<float>(rows * h, 1.0f));
  Tensor scratch = be.alloc(act(), {rows, h}, "t");
  be.rmsnorm_backward_add(dy, x, g, rstd, scratch, dg, dres);
  auto got = read(be, dres), d = read(be, dx);
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], rounded({1.0f + d[i]}, act())[0]) << i;
}

TEST_P(CpuBackendTest, SwigluForwardAndBackward) {
  const int64_t rows = 3, f = 4;
  auto xv = rounded(randn(rows * 2 * f, 31, 1.5f), act()),
       dyv = rounded(randn(rows * f, 32), act());
  Tensor x = make(be, act(), {rows, 2 * f}, xv), y = be.alloc(act(), {rows, f}, "t");
  be.swiglu_forward(x, y);
  auto ref = [&](const std::vector<double>& xx) {
    std::vector<double> out(static_cast<size_t>(rows * f));
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < f; ++j) {
        const double g = xx[r * 2 * f + j], u = xx[r * 2 * f + f + j];
        out[r * f + j] = g / (1 + std::exp(-g)) * u;
      }
    return out;
  };
  EXPECT_TRUE(all_close(read(be, y), ref(to_double(xv)), rtol(), 1e-6));
  Tensor dy = make(be, act(), {rows, f}, dyv), dx = be.alloc(act(), {rows, 2 * f}, "t");
  be.swiglu_backward(dy, x, dx);
  auto dx_num = numeric_grad(
      [&](const std::vector<double>& v) {
        auto yy = ref(v);
        double l = 0;
        for (size_t i = 0; i < yy.size(); ++i) l += yy[i] * dyv[i];
        return l;
      },
      to_double(xv));
  EXPECT_TRUE(all_close(read(be, dx), dx_num, rtol(), 1e-5));
}

TEST_P(CpuBackendTest, RopeRotatesQAndKByPositionAndItsInverseUndoesIt) {
  // s 3, b 2, 2 heads in 1 group (Q Q K V per token), d 4: pairs (0, 2) and (1, 3) of token
  // position p turn by p·1 and p·0.01 (base 10000, 2i/d = 0, 1/2).
  const int64_t s = 3, b = 2, heads = 2, groups = 1, d = 4;
  auto v = rounded(randn(s * b * 4 * d, 41), act());
  Tensor qkv = make(be, act(), {s, b, heads + 2 * groups, d}, v);
  be.rope(qkv, heads, groups, d, 10000.0f, false);
  auto got = read(be, qkv);
  for (int64_t t = 0; t < s * b; ++t) {
    const double p = static_cast<double>(t / b);
    for (int64_t hd = 0; hd < 4; ++hd)
      for (int64_t i = 0; i < 2; ++i) {
        const int64_t at = (t * 4 + hd) * d;
        const double a = p * (i == 0 ? 1.0 : 0.01), x1 = v[at + i], x2 = v[at + i + 2];
        const bool rotated = hd < 3;  // Q heads and the K group; V untouched
        const double want1 = rotated ? x1 * std::cos(a) - x2 * std::sin(a) : x1;
        const double want2 = rotated ? x2 * std::cos(a) + x1 * std::sin(a) : x2;
        EXPECT_NEAR(got[at + i], want1, rtol() * 4 + 1e-6) << t << " " << hd << " " << i;
        EXPECT_NEAR(got[at + i + 2], want2, rtol() * 4 + 1e-6) << t << " " << hd << " " << i;
      }
  }
  be.rope(qkv, heads, groups, d, 10000.0f, true);
  EXPECT_TRUE(all_close(read(be, qkv), v, bf16() ? 2.0 / 128 : 1e-6, 1e-6));
}

// ---- attention -------------------------------------------------------------------------------

// g: K/V groups (0: multi-head). qkv (s, b, h + 2 groups, d): the heads' Q, the groups' K, V.
struct AttnShape {
  int64_t s, b, h, d, g = 0;
  int64_t groups() const { return g > 0 ? g : h; }
  int64_t planes() const { return h + 2 * groups(); }
  int64_t qkv_size() const { return s * b * planes() * d; }
  // Element di of query head hh's Q (w = 0), or of its group's K or V (w = 1, 2).
  int64_t qkv(int64_t si, int64_t bi, int64_t w, int64_t hh, int64_t di) const {
    const int64_t plane = w == 0 ? hh : h + (w - 1) * groups() + hh / (h / groups());
    return ((si * b + bi) * planes() + plane) * d + di;
  }
  int64_t out(int64_t si, int64_t bi, int64_t hh, int64_t di) const {
    return ((si * b + bi) * h + hh) * d + di;
  }
};

// Naive causal softmax attention in f64; also returns each row's log-sum-exp (b, h, s).
std::vector<double> attention_ref(const std::vector<double>& qkv, const AttnShape& a, double scale,
                                  std::vector<double>* lse = nullptr) {
  std::vector<double> out(a.s * a.b * a.h * a.d, 0.0);
  if (lse) lse->assign(a.b * a.h * a.s, 0.0);
  for (int64_t bi = 0; bi < a.b; ++bi)
    for (int64_t hh = 0; hh < a.h; ++hh)
      for (int64_t i = 0; i < a.s; ++i) {
        std::vector<double> sc(i + 1);
        double mx = -1e300;
        for (int64_t j = 0; j <= i; ++j) {
          double dot = 0;
          for (int64_t di = 0; di < a.d; ++di)
            dot += qkv[a.qkv(i, bi, 0, hh, di)] * qkv[a.qkv(j, bi, 1, hh, di)];
          sc[j] = dot * scale;
          mx = std::max(mx, sc[j]);
        }
        double z = 0;
        for (auto& v : sc) z += std::exp(v - mx);
        if (lse) (*lse)[(bi * a.h + hh) * a.s + i] = mx + std::log(z);
        for (int64_t j = 0; j <= i; ++j)
          for (int64_t di = 0; di < a.d; ++di)
            out[a.out(i, bi, hh, di)] += std::exp(sc[j] - mx) / z * qkv[a.qkv(j, bi, 2, hh, di)];
      }
  return out;
}

TEST_P(CpuBackendTest, AttentionForwardSavesLogSumExp) {
  AttnShape a{6, 2, 3, 4};
  const float scale = 0.5f;
  auto qv = rounded(randn(a.qkv_size(), 21), act());
  Tensor qkv = make(be, act(), {a.s, a.b, a.planes(), a.d}, qv);
  Tensor out = be.alloc(act(), {a.s, a.b, a.h, a.d}, "t");
  Tensor lse = be.alloc(DType::kF32, {a.b, a.h, a.s}, "t");
  be.attention_forward(qkv, out, lse, scale);
  std::vector<double> lse_want;
  auto want = attention_ref(to_double(qv), a, scale, &lse_want);
  EXPECT_TRUE(all_close(read(be, out), want, rtol(), 1e-5));
  EXPECT_TRUE(all_close(read(be, lse), lse_want, 1e-5, 1e-5));
  // Causality: the first query sees only itself, so its output is its own V.
  auto o = read(be, out);
  for (int64_t di = 0; di < a.d; ++di)
    EXPECT_FLOAT_EQ(o[a.out(0, 1, 2, di)], qv[a.qkv(0, 1, 2, 2, di)]);
}

// Multi-head (g = 0) and grouped-query shapes: a group's dK and dV sum over its heads.
void check_attention_backward(Backend& be, DType act, bool bf16, const AttnShape& a, float scale) {
  auto qv = rounded(randn(a.qkv_size(), 31), act);
  auto dov = rounded(randn(a.s * a.b * a.h * a.d, 32), act);
  Tensor qkv = make(be, act, {a.s, a.b, a.planes(), a.d}, qv);
  Tensor out = be.alloc(act, {a.s, a.b, a.h, a.d}, "t");
  Tensor lse = be.alloc(DType::kF32, {a.b, a.h, a.s}, "t");
  be.attention_forward(qkv, out, lse, scale);
  std::vector<double> lse_want;
  auto out_want = attention_ref(to_double(qv), a, scale, &lse_want);
  EXPECT_TRUE(all_close(read(be, out), out_want, bf16 ? 1e-2 : 1e-5, 1e-5));
  EXPECT_TRUE(all_close(read(be, lse), lse_want, 1e-5, 1e-5));
  Tensor dout = make(be, act, {a.s, a.b, a.h, a.d}, dov);
  Tensor dqkv = be.alloc(act, {a.s, a.b, a.planes(), a.d}, "t");
  be.attention_backward(qkv, out, dout, lse, scale, dqkv);
  auto loss = [&](const std::vector<double>& x) {
    auto o = attention_ref(x, a, scale);
    double l = 0;
    for (size_t i = 0; i < o.size(); ++i) l += o[i] * dov[i];
    return l;
  };
  auto want = numeric_grad(loss, to_double(qv));
  // bf16: the saved output is rounded, so delta = rowsum(dO · O) carries its error.
  EXPECT_TRUE(all_close(read(be, dqkv), want, bf16 ? 2e-2 : 1e-4, bf16 ? 2e-2 : 1e-5));

  // With the column sums (QKV's bias gradient): dqkv the same, and the sums added into their
  // tensor's values are those of dqkv's rows (s·b of (heads + 2 groups)·d).
  const int64_t width = a.planes() * a.d;
  std::vector<float> start(static_cast<size_t>(width));
  for (int64_t c = 0; c < width; ++c) start[static_cast<size_t>(c)] = 0.25f * static_cast<float>(c);
  Tensor colsum = make(be, DType::kF32, {width}, start);
  Tensor dqkv2 = be.alloc(act, {a.s, a.b, a.planes(), a.d}, "t");
  be.attention_backward(qkv, out, dout, lse, scale, dqkv2, colsum);
  const std::vector<float> got = read(be, dqkv2);
  EXPECT_EQ(got, read(be, dqkv));
  std::vector<double> sums(start.begin(), start.end());
  for (size_t i = 0; i < got.size(); ++i) sums[i % static_cast<size_t>(width)] += got[i];
  EXPECT_TRUE(all_close(read(be, colsum), sums, 1e-6, 1e-6));
}

TEST_P(CpuBackendTest, AttentionBackwardMatchesFiniteDifferences) {
  check_attention_backward(be, act(), bf16(), AttnShape{5, 2, 2, 3}, 0.6f);
}

TEST_P(CpuBackendTest, GroupedQueryAttentionMatchesFiniteDifferences) {
  check_attention_backward(be, act(), bf16(), AttnShape{5, 2, 4, 3, 2}, 0.6f);  // 2 heads a group
  check_attention_backward(be, act(), bf16(), AttnShape{4, 1, 3, 2, 1}, 0.7f);  // one K/V head
}

TEST_P(CpuBackendTest, GroupedQueryAttentionEqualsMultiHeadWithRepeatedKeys) {
  // Repeating each group's K and V for its heads gives multi-head attention's output.
  const AttnShape gqa{6, 2, 4, 3, 2}, mha{6, 2, 4, 3};
  auto gv = rounded(randn(gqa.qkv_size(), 33), act());
  std::vector<float> mv(static_cast<size_t>(mha.qkv_size()));
  for (int64_t si = 0; si < gqa.s; ++si)
    for (int64_t bi = 0; bi < gqa.b; ++bi)
      for (int64_t w = 0; w < 3; ++w)
        for (int64_t hh = 0; hh < gqa.h; ++hh)
          for (int64_t di = 0; di < gqa.d; ++di)
            mv[mha.qkv(si, bi, w, hh, di)] = gv[gqa.qkv(si, bi, w, hh, di)];
  Tensor lse = be.alloc(DType::kF32, {gqa.b, gqa.h, gqa.s}, "t");
  Tensor out_g = be.alloc(act(), {gqa.s, gqa.b, gqa.h, gqa.d}, "t");
  Tensor out_m = be.alloc(act(), {gqa.s, gqa.b, gqa.h, gqa.d}, "t");
  be.attention_forward(make(be, act(), {gqa.s, gqa.b, gqa.planes(), gqa.d}, gv), out_g, lse, 0.5f);
  be.attention_forward(make(be, act(), {mha.s, mha.b, mha.planes(), mha.d}, mv), out_m, lse, 0.5f);
  EXPECT_EQ(read(be, out_g), read(be, out_m));
}

TEST_P(CpuBackendTest, AttentionRejectsGroupsThatDoNotDivideHeads) {
  // 4 heads with qkv of 4 + 2·3 planes: 3 groups do not divide 4 heads.
  Tensor qkv = be.alloc(act(), {2, 1, 10, 8}, "t");
  Tensor out = be.alloc(act(), {2, 1, 4, 8}, "t");
  Tensor lse = be.alloc(DType::kF32, {1, 4, 2}, "t");
  EXPECT_THROW(be.attention_forward(qkv, out, lse, 0.5f), InternalError);
  Tensor odd = be.alloc(act(), {2, 1, 7, 8}, "t");  // 4 + 3 planes: not heads + 2 groups
  EXPECT_THROW(be.attention_forward(odd, out, lse, 0.5f), InternalError);
}

// ---- embeddings ------------------------------------------------------------------------------

TEST_P(CpuBackendTest, VocabParallelEmbeddingForwardBackward) {
  const int64_t s = 3, b = 2, h = 4, vocab = 6;
  std::vector<float> tok{0, 5, 2, 3, 3, 1};  // (s, b)
  auto wv = rounded(randn(vocab * h, 41), act());
  Tensor tokens = make(be, DType::kI32, {s, b}, tok);
  // Two shards of 3 rows; their outputs sum to the full lookup.
  std::vector<float> total(s * b * h, 0.0f);
  for (int64_t shard = 0; shard < 2; ++shard) {
    std::vector<float> part(wv.begin() + shard * 3 * h, wv.begin() + (shard + 1) * 3 * h);
    Tensor w = make(be, act(), {3, h}, part);
    Tensor out = be.alloc(act(), {s, b, h}, "t");
    be.embedding_forward(tokens, w, shard * 3, out);
    auto o = read(be, out);
    for (size_t i = 0; i < o.size(); ++i) total[i] += o[i];
  }
  std::vector<float> want(s * b * h);
  for (int64_t t = 0; t < s * b; ++t)
    for (int64_t j = 0; j < h; ++j) want[t * h + j] = wv[static_cast<int64_t>(tok[t]) * h + j];
  EXPECT_EQ(total, want);

  auto dov = rounded(randn(s * b * h, 42), act());
  Tensor dout = make(be, act(), {s, b, h}, dov);
  Tensor dw = make(be, DType::kF32, {3, h}, std::vector<float>(3 * h, 0.0f));
  be.embedding_backward(tokens, dout, 3, dw);  // rows 3..5: tokens 5, 3, 3
  std::vector<double> dw_want(3 * h, 0.0);
  for (int64_t t = 0; t < s * b; ++t)
    if (tok[t] >= 3)
      for (int64_t j = 0; j < h; ++j)
        dw_want[(static_cast<int64_t>(tok[t]) - 3) * h + j] += dov[t * h + j];
  EXPECT_TRUE(all_close(read(be, dw), dw_want, 1e-6, 1e-6));
}

TEST_P(CpuBackendTest, PositionEmbeddingWithSequenceOffset) {
  const int64_t s = 2, b = 3, h = 2, S = 5, off = 2;
  auto xv = rounded(randn(s * b * h, 51), act()), pv = rounded(randn(S * h, 52), act());
  Tensor x = make(be, act(), {s, b, h}, xv), wpe = make(be, act(), {S, h}, pv);
  be.add_position_embedding(x, wpe, off);
  std::vector<double> want(s * b * h);
  for (int64_t si = 0; si < s; ++si)
    for (int64_t bi = 0; bi < b; ++bi)
      for (int64_t j = 0; j < h; ++j)
        want[(si * b + bi) * h + j] = double(xv[(si * b + bi) * h + j]) + pv[(off + si) * h + j];
  EXPECT_TRUE(all_close(read(be, x), want, rtol(), 1e-6));
  Tensor dwpe = make(be, DType::kF32, {S, h}, std::vector<float>(S * h, 0.0f));
  Tensor dx = make(be, act(), {s, b, h}, xv);
  be.position_embedding_backward(dx, dwpe, off);
  std::vector<double> dwant(S * h, 0.0);
  for (int64_t si = 0; si < s; ++si)
    for (int64_t bi = 0; bi < b; ++bi)
      for (int64_t j = 0; j < h; ++j) dwant[(off + si) * h + j] += xv[(si * b + bi) * h + j];
  EXPECT_TRUE(all_close(read(be, dwpe), dwant, 1e-6, 1e-6));
}

// ---- cross-entropy ---------------------------------------------------------------------------

TEST_P(CpuBackendTest, VocabParallelCrossEntropyOverTwoShards) {
  const int64_t T = 4, V = 6, Vl = 3;
  auto lv = rounded(randn(T * V, 61, 2.0f), act());
  std::vector<float> tgt{0, 5, 3, 2};
  const float gs = 0.25f;
  // Megatron's three steps on two vocabulary shards, the "communication" done by hand.
  std::vector<Tensor> logits;
  Tensor targets = make(be, DType::kI32, {T}, tgt);
  std::vector<float> gmax(T, -INFINITY), gstats(2 * T, 0.0f);
  std::vector<Tensor> maxes, stats;
  for (int64_t r = 0; r < 2; ++r) {
    std::vector<float> part(T * Vl);
    for (int64_t t = 0; t < T; ++t)
      for (int64_t j = 0; j < Vl; ++j) part[t * Vl + j] = lv[t * V + r * Vl + j];
    logits.push_back(make(be, act(), {T, Vl}, part));
    maxes.push_back(be.alloc(DType::kF32, {T}, "t"));
    be.xent_local_max(logits[r], maxes[r]);
    auto m = read(be, maxes[r]);
    for (int64_t t = 0; t < T; ++t) gmax[t] = std::max(gmax[t], m[t]);
  }
  std::vector<Tensor> loss;
  for (int64_t r = 0; r < 2; ++r) {
    Tensor gm = make(be, DType::kF32, {T}, gmax);
    stats.push_back(be.alloc(DType::kF32, {2, T}, "t"));
    be.xent_local_stats(logits[r], targets, r * Vl, gm, stats[r]);
    auto st = read(be, stats[r]);
    for (int64_t i = 0; i < 2 * T; ++i) gstats[i] += st[i];
  }
  std::vector<double> want_loss(T), want_grad(T * V);
  for (int64_t t = 0; t < T; ++t) {
    double z = 0;
    for (int64_t j = 0; j < V; ++j) z += std::exp(double(lv[t * V + j]));
    want_loss[t] = std::log(z) - lv[t * V + static_cast<int64_t>(tgt[t])];
    for (int64_t j = 0; j < V; ++j)
      want_grad[t * V + j] = gs * (std::exp(double(lv[t * V + j])) / z - (j == tgt[t] ? 1 : 0));
  }
  for (int64_t r = 0; r < 2; ++r) {
    Tensor gm = make(be, DType::kF32, {T}, gmax), gst = make(be, DType::kF32, {2, T}, gstats);
    Tensor l = be.alloc(DType::kF32, {T}, "t");
    be.xent_loss_and_grad(logits[r], targets, r * Vl, gm, gst, gs, l);
    EXPECT_TRUE(all_close(read(be, l), want_loss, 1e-5, 1e-5));
    auto g = read(be, logits[r]);
    std::vector<double> gw(T * Vl);
    for (int64_t t = 0; t < T; ++t)
      for (int64_t j = 0; j < Vl; ++j) gw[t * Vl + j] = want_grad[t * V + r * Vl + j];
    EXPECT_TRUE(all_close(g, gw, rtol(), 1e-6));
    Tensor total = make(be, DType::kF32, {1}, {10.0f});
    be.sum(l, total, true);
    double s = 10;
    for (auto v : want_loss) s += v;
    EXPECT_NEAR(read(be, total)[0], s, 1e-4);
    be.sum(l, total, false);
    EXPECT_NEAR(read(be, total)[0], s - 10, 1e-4);
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CpuBackendTest, ::testing::Values(DType::kF32, DType::kBF16),
                         [](const auto& info) { return std::string(to_string(info.param)); });

// ---- optimizer -------------------------------------------------------------------------------

TEST(CpuBackendOptimizer, SumSquaresAccumulates) {
  CpuBackend be;
  Tensor x = make(be, DType::kF32, {3}, {1, -2, 3});
  Tensor out = make(be, DType::kF32, {1}, {0.5f});
  be.sum_squares_accumulate(x, out);
  EXPECT_FLOAT_EQ(read(be, out)[0], 14.5f);
}

TEST(CpuBackendOptimizer, FirstAdamWStepMovesByLrTimesSign) {
  // Step 1: m̂ = g, v̂ = g², so the update is lr·g/(|g| + eps) ≈ lr·sign(g); decay first.
  CpuBackend be;
  const float lr = 0.01f, wd = 0.1f, eps = 1e-8f;
  Tensor p = make(be, DType::kF32, {3}, {1.0f, -2.0f, 0.5f});
  Tensor g = make(be, DType::kF32, {3}, {4.0f, -1.0f, 0.0f});
  Tensor m = make(be, DType::kF32, {3}, {0, 0, 0}), v = make(be, DType::kF32, {3}, {0, 0, 0});
  Tensor act = be.alloc(DType::kBF16, {3}, "t");
  be.adamw({lr, 0.9f, 0.95f, eps, wd, 0.5f, 1}, p, g, m, v, act);
  auto pv = read(be, p);
  EXPECT_NEAR(pv[0], 1.0 * (1 - lr * wd) - lr, 1e-6);
  EXPECT_NEAR(pv[1], -2.0 * (1 - lr * wd) + lr, 1e-6);
  EXPECT_NEAR(pv[2], 0.5 * (1 - lr * wd), 1e-6);  // zero gradient: decay only
  EXPECT_NEAR(read(be, m)[0], 0.1 * 2.0, 1e-6);   // (1 - beta1) · g · grad_scale
  EXPECT_NEAR(read(be, v)[0], 0.05 * 4.0, 1e-6);  // (1 - beta2) · (g · grad_scale)²
  EXPECT_EQ(read(be, act), rounded(pv, DType::kBF16));
  // Step 2 with the same gradient: m̂ = v̂^½ = |g| again, so again lr·sign(g).
  be.adamw({lr, 0.9f, 0.95f, eps, 0.0f, 0.5f, 2}, p, g, m, v, Tensor{});
  EXPECT_NEAR(read(be, p)[0], pv[0] - lr, 1e-6);
}

TEST(CpuBackendDeterminism, SameInputsGiveBitwiseSameOutputs) {
  CpuBackend be;
  AttnShape a{8, 2, 2, 4};
  auto qv = randn(a.s * a.b * 3 * a.h * a.d, 71);
  Tensor qkv = make(be, DType::kBF16, {a.s, a.b, 3 * a.h, a.d}, qv);
  std::vector<std::vector<float>> outs;
  for (int rep = 0; rep < 2; ++rep) {
    Tensor out = be.alloc(DType::kBF16, {a.s, a.b, a.h, a.d}, "t");
    Tensor lse = be.alloc(DType::kF32, {a.b, a.h, a.s}, "t");
    Tensor dq = be.alloc(DType::kBF16, {a.s, a.b, 3 * a.h, a.d}, "t");
    be.attention_forward(qkv, out, lse, 0.5f);
    be.attention_backward(qkv, out, out, lse, 0.5f, dq);
    outs.push_back(read(be, dq));
  }
  EXPECT_EQ(outs[0], outs[1]);
}

}  // namespace
}  // namespace mplan::exec
