// mplan_gpu_bench: one program for a GPU run. First every CUDA op is checked against the CPU
// backend at small sizes (OpChecker::run_all, one line per output with its worst element); then
// the kernels are timed at the reference workload's shapes (gpt3-1.3b, micro-batch 4 × seq 2048:
// T = 8192 tokens, h 2048, 16 heads × 128, ffn 8192, vocab 32000, 1.3 B parameters) with CUDA
// events: warm-up, then the median of repeats, each repeat after a write of 256 MiB that evicts
// the L2 cache. The table gives time, TFLOP/s or GB/s (bytes: each input read once, each output
// written once) and the percentage of the ceilings measured at the start (a 1 GiB device copy, a
// bf16 8192^3 GEMM). Exit status 0 when every check passed. Runs in well under 60 s on an H200.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "exec/cpu/cpu_backend.hpp"
#include "exec/cuda/cuda_backend.hpp"
#include "exec/cuda/cuda_check.hpp"
#include "exec/cuda/kernels.hpp"
#include "exec/cuda/tools/op_checks.hpp"

namespace mplan::exec::cuda {
namespace {

struct Row {
  std::string op, shape;
  double ms = 0;
  double flops = 0;  // useful floating-point operations (0: memory-bound)
  double bytes = 0;  // fewest bytes the op must move
};

class Bench {
 public:
  explicit Bench(CudaBackend& g, int reps) : g_(g), s_(g.stream(Stream::kCompute)), reps_(reps) {
    MPLAN_CUDA_CHECK(cudaEventCreate(&start_));
    MPLAN_CUDA_CHECK(cudaEventCreate(&stop_));
    flush_ = g_.alloc(DType::kF32, {64 << 20}, "bench-flush");  // 256 MiB
  }
  ~Bench() {
    g_.release(flush_);
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
  }

  // Median milliseconds of fn over the repeats, each after an L2 flush.
  double time_ms(const std::function<void()>& fn, int warmup = 2, int reps = -1) {
    if (reps < 0) reps = reps_;
    for (int i = 0; i < warmup; ++i) fn();
    std::vector<float> ms;
    for (int i = 0; i < reps; ++i) {
      MPLAN_CUDA_CHECK(cudaMemsetAsync(flush_.data, i & 0xff, flush_.bytes(), s_));
      MPLAN_CUDA_CHECK(cudaEventRecord(start_, s_));
      fn();
      MPLAN_CUDA_CHECK(cudaEventRecord(stop_, s_));
      MPLAN_CUDA_CHECK(cudaEventSynchronize(stop_));
      float t = 0;
      MPLAN_CUDA_CHECK(cudaEventElapsedTime(&t, start_, stop_));
      ms.push_back(t);
    }
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
  }

  void add(const std::string& op, const std::string& shape, double flops, double bytes,
           const std::function<void()>& fn, int warmup = 2, int reps = -1) {
    Row r{op, shape, time_ms(fn, warmup, reps), flops, bytes};
    std::printf("  timed %-34s %9.3f ms\n", op.c_str(), r.ms);
    std::fflush(stdout);
    rows_.push_back(r);
  }

  Tensor rand(DType t, std::initializer_list<int64_t> shape, float lo = -1, float hi = 1) {
    Tensor x = g_.alloc(t, shape, "bench");
    launch_fill_uniform(x.data, t, x.numel(), seed_++, lo, hi, s_);
    return x;
  }

  const std::vector<Row>& rows() const { return rows_; }
  CudaBackend& gpu() { return g_; }

 private:
  CudaBackend& g_;
  cudaStream_t s_;
  int reps_;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
  Tensor flush_;
  uint64_t seed_ = 12345;
  std::vector<Row> rows_;
};

std::string dims(std::initializer_list<int64_t> d) {
  std::ostringstream os;
  for (int64_t v : d) os << (os.tellp() > 0 ? "x" : "") << v;
  return os.str();
}

// The reference workload (gpt3-1.3b, micro-batch 4, sequence 2048, bf16).
constexpr int64_t kB = 4, kS = 2048, kT = kB * kS, kH = 2048, kHeads = 16, kD = 128, kF = 8192,
                  kV = 32000;
// 24 layers of 12h^2 + 13h, token and position embeddings, final layernorm.
constexpr int64_t kParams = 24 * (12 * kH * kH + 13 * kH) + kV * kH + kS * kH + 2 * kH;

void bench_gemms(Bench& b) {
  CudaBackend& g = b.gpu();
  const DType bf = DType::kBF16;
  struct Lin {
    const char* name;
    int64_t in, out;
    Epilogue epi;
    bool dgelu;  // the input gradient also with GeLU's backward in its epilogue (fc2)
  };
  const Lin lins[] = {{"qkv", kH, 3 * kH, Epilogue::kBias, false},
                      {"proj", kH, kH, Epilogue::kBias, false},
                      {"fc1", kH, kF, Epilogue::kBiasGelu, false},
                      {"fc2", kF, kH, Epilogue::kBias, true},
                      {"logits", kH, kV, Epilogue::kNone, false}};
  for (const Lin& l : lins) {
    Tensor x = b.rand(bf, {kT, l.in});
    Tensor w = b.rand(bf, {l.out, l.in}, -0.05f, 0.05f);
    Tensor bias = b.rand(bf, {l.out});
    Tensor y = g.alloc(bf, {kT, l.out}, "bench");
    Tensor aux = l.epi == Epilogue::kBiasGelu ? g.alloc(bf, {kT, l.out}, "bench") : Tensor{};
    Tensor dy = b.rand(bf, {kT, l.out});
    Tensor dx = g.alloc(bf, {kT, l.in}, "bench");
    Tensor dw = b.rand(DType::kF32, {l.out, l.in});
    const double fl = 2.0 * kT * l.in * l.out;
    const GemmArgs fwd{.trans_b = true, .m = kT, .n = l.out, .k = l.in, .epilogue = l.epi};
    const char* epi = l.epi == Epilogue::kBias       ? " +bias"
                      : l.epi == Epilogue::kBiasGelu ? " +bias+gelu"
                                                     : "";
    const std::string shape = mplan::cat("m", kT, " n", l.out, " k", l.in);
    b.add(mplan::cat("gemm ", l.name, " fwd", epi), shape, fl, 0,
          [&] { g.gemm(fwd, x, w, y, bias, aux); });
    if (l.epi == Epilogue::kBiasGelu) {
      g.set_fuse_gemm_epilogues(false);
      b.add(mplan::cat("gemm ", l.name, " fwd", epi, " unfused"), shape, fl, 0,
            [&] { g.gemm(fwd, x, w, y, bias, aux); });
      g.set_fuse_gemm_epilogues(true);
    }
    if (l.out == kH) {  // a row-parallel linear at tensor parallel 1: the residual add fused
      Tensor resid = b.rand(bf, {kT, kH});
      const GemmArgs res{
          .trans_b = true, .m = kT, .n = l.out, .k = l.in, .epilogue = Epilogue::kBiasResidual};
      b.add(mplan::cat("gemm ", l.name, " fwd +bias+residual"), shape, fl, 0,
            [&] { g.gemm(res, x, w, y, bias, resid); });
      g.release(resid);
    }
    const GemmArgs dgrad{.m = kT, .n = l.in, .k = l.out};  // dx (T, in) = dy (T, out) · W (out, in)
    b.add(mplan::cat("gemm ", l.name, " bwd dx"), dims({kT, l.in, l.out}), fl, 0,
          [&] { g.gemm(dgrad, dy, w, dx); });
    if (l.dgelu) {  // dx = (dy · W) ∘ gelu'(pre), pre: fc1's saved pre-activation (T, in)
      Tensor pre = b.rand(bf, {kT, l.in}, -3, 3);
      const GemmArgs dgelu{.m = kT, .n = l.in, .k = l.out, .epilogue = Epilogue::kDGelu};
      b.add(mplan::cat("gemm ", l.name, " bwd dx +dgelu"), dims({kT, l.in, l.out}), fl, 0,
            [&] { g.gemm(dgelu, dy, w, dx, {}, pre); });
      g.set_fuse_gemm_epilogues(false);
      b.add(mplan::cat("gemm ", l.name, " bwd dx +dgelu unfused"), dims({kT, l.in, l.out}), fl, 0,
            [&] { g.gemm(dgelu, dy, w, dx, {}, pre); });
      g.set_fuse_gemm_epilogues(true);
      g.release(pre);
    }
    // dW (out, in) += dy^T (out, T) · x (T, in), f32
    const GemmArgs wgrad{.trans_a = true, .m = l.out, .n = l.in, .k = kT, .beta = 1.0f};
    b.add(mplan::cat("gemm ", l.name, " bwd dW (f32 +=)"), dims({l.out, l.in, kT}), fl, 0,
          [&] { g.gemm(wgrad, dy, x, dw); });
    for (Tensor* t : {&x, &w, &bias, &y, &aux, &dy, &dx, &dw}) g.release(*t);
  }
}

// Attention at the reference shape and at Llama 3's long-sequence shape (32 query heads over 8
// key/value groups, which the backend expands to 32 heads before these kernels), with each kernel
// family: the best for the device (wgmma on Hopper), the mma.sync kernels, the reference ones.
void bench_attention(Bench& b) {
  CudaBackend& g = b.gpu();
  const DType bf = DType::kBF16;
  struct Shape {
    const char* name;
    int64_t b, s, heads, groups, d;
    bool reference;  // also time the (slow) reference kernels
  };
  // The reference workload's; issue 12's long grouped-query shape; head dim 64 as multi-head and
  // as the Llama-family 1.2 B model's attention (32 heads, 8 groups, sequence 4096).
  const Shape shapes[] = {{"b4 s2048 h16 d128 causal", kB, kS, kHeads, kHeads, kD, true},
                          {"b1 s8192 h32 (GQA 8 groups) d128 causal", 1, 8192, 32, 8, 128, false},
                          {"b4 s2048 h32 d64 causal", 4, 2048, 32, 32, 64, false},
                          {"b2 s4096 h32 (GQA 8 groups) d64 causal", 2, 4096, 32, 8, 64, false}};
  for (const Shape& sh : shapes) {
    const int64_t planes = sh.heads + 2 * sh.groups;
    Tensor qkv = b.rand(bf, {sh.s, sh.b, planes, sh.d}, -2, 2);
    Tensor out = g.alloc(bf, {sh.s, sh.b, sh.heads, sh.d}, "bench");
    Tensor lse = g.alloc(DType::kF32, {sh.b, sh.heads, sh.s}, "bench");
    Tensor dout = b.rand(bf, {sh.s, sh.b, sh.heads, sh.d});
    Tensor dqkv = g.alloc(bf, {sh.s, sh.b, planes, sh.d}, "bench");
    Tensor colsum = b.rand(DType::kF32, {planes * sh.d});
    const float scale = 1.0f / std::sqrt(static_cast<float>(sh.d));
    // Causal-useful FLOPs: forward 2 GEMMs of 2·s·s·d over the lower triangle; backward 2.5×.
    const double fwd_fl = 2.0 * 2.0 * sh.s * sh.s * sh.d * sh.b * sh.heads / 2.0;
    struct Family {
      AttentionKernels k;
      const char* tag;
    };
    for (const Family f : {Family{AttentionKernels::kBest, ""},
                           Family{AttentionKernels::kFlash2, " (mma.sync kernels)"},
                           Family{AttentionKernels::kReference, " (reference kernels)"}}) {
      const bool ref = f.k == AttentionKernels::kReference;
      if (ref && !sh.reference) continue;
      g.set_attention_kernels(f.k);
      const int warm = ref ? 1 : 2, reps = ref ? 3 : -1;
      b.add(
          mplan::cat("attention fwd", f.tag), sh.name, fwd_fl, 0,
          [&] { g.attention_forward(qkv, out, lse, scale); }, warm, reps);
      b.add(
          mplan::cat("attention bwd", f.tag), sh.name, 2.5 * fwd_fl, 0,
          [&] { g.attention_backward(qkv, out, dout, lse, scale, dqkv); }, warm, reps);
      if (ref) continue;
      // With QKV's bias gradient (dqkv's column sums): from the kernels' registers where they
      // can (Hopper, one head chunk), else the backward and then the bias gradient's kernel; on
      // Hopper that path too, for comparison (the memory bench times the sum alone: "qkv").
      b.add(
          mplan::cat("attention bwd + bias grad", f.tag), sh.name, 2.5 * fwd_fl, 0,
          [&] { g.attention_backward(qkv, out, dout, lse, scale, dqkv, colsum); }, warm, reps);
      if (f.k != AttentionKernels::kBest) continue;
      g.set_attention_bias_grad_fused(false);
      b.add(
          "attention bwd, then bias grad", sh.name, 2.5 * fwd_fl, 0,
          [&] { g.attention_backward(qkv, out, dout, lse, scale, dqkv, colsum); }, warm, reps);
      g.set_attention_bias_grad_fused(true);
    }
    g.set_attention_kernels(AttentionKernels::kBest);
    for (Tensor* t : {&qkv, &out, &lse, &dout, &dqkv, &colsum}) g.release(*t);
  }
}

void bench_memory_bound(Bench& b) {
  CudaBackend& g = b.gpu();
  const DType bf = DType::kBF16;
  const double e = 2.0;  // bytes per bf16
  {
    Tensor x = b.rand(bf, {kT, kH}, -3, 3), y = g.alloc(bf, {kT, kH}, "bench");
    Tensor gamma = b.rand(bf, {kH}, 0.5f, 1.5f), beta = b.rand(bf, {kH});
    Tensor mean = g.alloc(DType::kF32, {kT}, "bench"), rstd = g.alloc(DType::kF32, {kT}, "bench");
    Tensor dy = b.rand(bf, {kT, kH}), dx = g.alloc(bf, {kT, kH}, "bench");
    Tensor dg = b.rand(DType::kF32, {kH}), db = b.rand(DType::kF32, {kH});
    b.add("layernorm fwd", dims({kT, kH}), 0, 2 * kT * kH * e,
          [&] { g.layernorm_forward(x, gamma, beta, 1e-5f, y, mean, rstd); });
    b.add("layernorm bwd (dx, dgamma, dbeta)", dims({kT, kH}), 0, 3 * kT * kH * e,
          [&] { g.layernorm_backward(dy, x, gamma, mean, rstd, dx, dg, db); });
    b.add("add (residual)", dims({kT, kH}), 0, 3 * kT * kH * e, [&] { g.add(y, x, dy); });
    Tensor dres = b.rand(bf, {kT, kH});
    b.add("layernorm bwd + residual add (fused)", dims({kT, kH}), 0, 4 * kT * kH * e,
          [&] { g.layernorm_backward_add(dy, x, gamma, mean, rstd, dx, dg, db, dres); });
    Tensor dbias = b.rand(DType::kF32, {kH});
    b.add("layernorm bwd + residual add + its column sums", dims({kT, kH}), 0, 4 * kT * kH * e,
          [&] { g.layernorm_backward_add(dy, x, gamma, mean, rstd, dx, dg, db, dres, dbias); });
    // RMSNorm (the Llama-family norm) at the same shape: its backward on the same one-pass kernel.
    b.add("rmsnorm fwd", dims({kT, kH}), 0, 2 * kT * kH * e,
          [&] { g.rmsnorm_forward(x, gamma, 1e-5f, y, rstd); });
    b.add("rmsnorm bwd (dx, dgamma)", dims({kT, kH}), 0, 3 * kT * kH * e,
          [&] { g.rmsnorm_backward(dy, x, gamma, rstd, dx, dg); });
    b.add("rmsnorm bwd + residual add (fused)", dims({kT, kH}), 0, 4 * kT * kH * e,
          [&] { g.rmsnorm_backward_add(dy, x, gamma, rstd, dx, dg, dres); });
    for (Tensor* t : {&x, &y, &gamma, &beta, &mean, &rstd, &dy, &dx, &dg, &db, &dres, &dbias})
      g.release(*t);
  }
  {
    // SwiGLU over [gate | up] (2F columns) at the reference token count and F = kF.
    Tensor x = b.rand(bf, {kT, 2 * kF}, -3, 3), y = g.alloc(bf, {kT, kF}, "bench");
    Tensor dy = b.rand(bf, {kT, kF}), dx = g.alloc(bf, {kT, 2 * kF}, "bench");
    b.add("swiglu fwd", dims({kT, kF}), 0, 3 * kT * kF * e, [&] { g.swiglu_forward(x, y); });
    b.add("swiglu bwd", dims({kT, kF}), 0, 5 * kT * kF * e, [&] { g.swiglu_backward(dy, x, dx); });
    for (Tensor* t : {&x, &y, &dy, &dx}) g.release(*t);
  }
  {
    Tensor x = b.rand(bf, {kT, kF}, -3, 3), y = g.alloc(bf, {kT, kF}, "bench");
    Tensor dy = b.rand(bf, {kT, kF}), dx = g.alloc(bf, {kT, kF}, "bench");
    Tensor db = b.rand(DType::kF32, {kF});
    b.add("gelu fwd", dims({kT, kF}), 0, 2 * kT * kF * e, [&] { g.gelu_forward(x, y); });
    b.add("gelu bwd", dims({kT, kF}), 0, 3 * kT * kF * e, [&] { g.gelu_backward(dy, x, dx); });
    // The bias gradients of fc1, QKV and proj/fc2: as cuBLASLt's ones^T · dY (the default), then
    // by the column-sum kernel.
    Tensor dyq = dy.flat_slice(0, kT * 3 * kH).view({kT, 3 * kH}), dbq = db.flat_slice(0, 3 * kH);
    Tensor dyh = dy.flat_slice(0, kT * kH).view({kT, kH}), dbh = db.flat_slice(0, kH);
    for (bool by_gemm : {true, false}) {
      g.set_bias_grad_by_gemm(by_gemm);
      const std::string how = by_gemm ? "" : ", kernel";
      b.add("bias_grad (fc1" + how + ")", dims({kT, kF}), 0, kT * kF * e,
            [&] { g.bias_grad_accumulate(dy, db); });
      b.add("bias_grad (qkv" + how + ")", dims({kT, 3 * kH}), 0, kT * 3 * kH * e,
            [&] { g.bias_grad_accumulate(dyq, dbq); });
      b.add("bias_grad (proj, fc2" + how + ")", dims({kT, kH}), 0, kT * kH * e,
            [&] { g.bias_grad_accumulate(dyh, dbh); });
    }
    g.set_bias_grad_by_gemm(true);
    for (Tensor* t : {&x, &y, &dy, &dx, &db}) g.release(*t);
  }
  {
    // RoPE in place at the Llama-family 1.2 B model's shape: sequence 4096, batch 2, 32 heads,
    // 8 query groups, head dim 64, all of it rotated; Q and K read and written.
    const int64_t s = 4096, bt = 2, heads = 32, groups = 8, d = 64;
    Tensor qkv = b.rand(bf, {s, bt, heads + 2 * groups, d});
    b.add("rope (Llama 1.2B qkv)", dims({s * bt, (heads + groups) * d}), 0,
          2 * s * bt * (heads + groups) * d * e,
          [&] { g.rope(qkv, heads, groups, d, 500000.0f, false); });
    g.release(qkv);
  }
  {
    std::vector<int32_t> ids(static_cast<size_t>(kT));
    std::mt19937 gen(5);
    std::uniform_int_distribution<int32_t> u(0, kV - 1);
    for (auto& v : ids) v = u(gen);
    Tensor tok = g.alloc(DType::kI32, {kT}, "bench");
    g.upload(tok, ids.data());
    Tensor wte = b.rand(bf, {kV, kH}), out = g.alloc(bf, {kT, kH}, "bench");
    Tensor dout = b.rand(bf, {kT, kH}), dwte = b.rand(DType::kF32, {kV, kH});
    b.add("embedding fwd (gather)", dims({kT, kH}), 0, 2 * kT * kH * e,
          [&] { g.embedding_forward(tok, wte, 0, out); });
    b.add("embedding bwd (sort + row sums)", dims({kT, kH}), 0, kT * kH * (e + 8.0),
          [&] { g.embedding_backward(tok, dout, 0, dwte); });
    Tensor x3 = out.view({kS, kB, kH}), wpe = b.rand(bf, {kS, kH}),
           dwpe = b.rand(DType::kF32, {kS, kH});
    b.add("position embedding fwd", dims({kS, kB, kH}), 0, (2 * kT + kS) * kH * e,
          [&] { g.add_position_embedding(x3, wpe, 0); });
    b.add("position embedding bwd", dims({kS, kB, kH}), 0, kT * kH * e + 2 * kS * kH * 4.0, [&] {
      g.position_embedding_backward(dout.view({kS, kB, kH}), dwpe, 0);
    });
    for (Tensor* t : {&tok, &wte, &out, &dout, &dwte, &wpe, &dwpe}) g.release(*t);
  }
  {
    Tensor logits = b.rand(bf, {kT, kV}, -8, 8);
    Tensor tgt = g.alloc(DType::kI32, {kT}, "bench");
    std::vector<int32_t> ids(static_cast<size_t>(kT));
    for (int64_t i = 0; i < kT; ++i)
      ids[static_cast<size_t>(i)] = static_cast<int32_t>((i * 7919) % kV);
    g.upload(tgt, ids.data());
    Tensor mx = g.alloc(DType::kF32, {kT}, "bench"), st = g.alloc(DType::kF32, {2, kT}, "bench");
    Tensor loss = g.alloc(DType::kF32, {kT}, "bench"), one = g.alloc(DType::kF32, {1}, "bench");
    const double lb = static_cast<double>(kT) * kV * e;
    b.add("xent 1: row max", dims({kT, kV}), 0, lb, [&] { g.xent_local_max(logits, mx); });
    b.add("xent 2: sum exp + target", dims({kT, kV}), 0, lb,
          [&] { g.xent_local_stats(logits, tgt, 0, mx, st); });
    b.add("xent 1+2 in one pass (tp 1)", dims({kT, kV}), 0, lb,
          [&] { g.xent_local_max_and_stats(logits, tgt, 0, mx, st); });
    // In place: every repeat turns the logits into gradients of the previous ones (same cost).
    b.add("xent 3: loss + grad (in place)", dims({kT, kV}), 0, 2 * lb,
          [&] { g.xent_loss_and_grad(logits, tgt, 0, mx, st, 1.0f / kT, loss); });
    // All three in one call (tensor parallel 1): the fused kernel, one read and one write of the
    // logits (clusters of 2 CTAs a row here, of 8 at Llama 3's vocabulary of 128256), then the
    // steps' two kernels (two reads and a write) for comparison. Bytes: one read and one write.
    auto steps123 = [&](Tensor lg, int64_t v) {
      const bool was = g.xent_fused();
      for (bool on : {true, false}) {
        g.set_xent_fused(on);
        b.add(g.xent_fused() ? "xent 1+2+3 fused (tp 1)" : "xent 1+2+3, two kernels (tp 1)",
              dims({kT, v}), 0, 2.0 * kT * v * e,
              [&] { g.xent_max_stats_loss_and_grad(lg, tgt, 0, mx, st, 1.0f / kT, loss); });
      }
      g.set_xent_fused(was);
    };
    steps123(logits, kV);
    b.add("sum (loss)", dims({kT}), 0, kT * 4.0, [&] { g.sum(loss, one, false); });
    g.release(logits);
    constexpr int64_t kVLlama3 = 128256;
    Tensor wide = b.rand(bf, {kT, kVLlama3}, -8, 8);
    steps123(wide, kVLlama3);
    for (Tensor* t : {&wide, &tgt, &mx, &st, &loss, &one}) g.release(*t);
  }
  {
    // The optimizer over all 1.3 B parameters: f32 master, grad, m, v and the bf16 copy.
    Tensor p = b.rand(DType::kF32, {kParams}), gr = b.rand(DType::kF32, {kParams}, -1e-3f, 1e-3f);
    Tensor m = b.rand(DType::kF32, {kParams}, -1e-4f, 1e-4f);
    Tensor v = b.rand(DType::kF32, {kParams}, 0.0f, 1e-6f);
    Tensor pa = g.alloc(bf, {kParams}, "bench"), one = g.alloc(DType::kF32, {1}, "bench");
    g.fill(one, 0.0f);
    Backend::AdamW hp{1e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 1.0f, 10};
    b.add(
        "grad norm (sum of squares, f32)", dims({kParams}), 0, kParams * 4.0,
        [&] { g.sum_squares_accumulate(gr, one); }, 1, 5);
    b.add(
        "adamw (f32 master + bf16 copy)", dims({kParams}), 0, kParams * (16.0 + 12.0 + 2.0),
        [&] { g.adamw(hp, p, gr, m, v, pa); }, 1, 5);
    b.add(
        "cast f32 -> bf16 (weights)", dims({kParams}), 0, kParams * 6.0, [&] { g.cast(pa, p); }, 1,
        5);
    for (Tensor* t : {&p, &gr, &m, &v, &pa, &one}) g.release(*t);
  }
}

struct Ceilings {
  double copy_gbps = 0, gemm_tflops = 0;
};

Ceilings measure_ceilings(Bench& b) {
  CudaBackend& g = b.gpu();
  Ceilings c;
  const int64_t n = int64_t{1} << 29;  // 1 GiB of bf16
  Tensor src = b.rand(DType::kBF16, {n}), dst = g.alloc(DType::kBF16, {n}, "bench");
  const double ms = b.time_ms([&] { g.copy(dst, src); }, 2, 10);
  c.copy_gbps = 2.0 * static_cast<double>(src.bytes()) / (ms * 1e6);
  g.release(src);
  g.release(dst);
  const int64_t k = 8192;
  Tensor a = b.rand(DType::kBF16, {k, k}), bm = b.rand(DType::kBF16, {k, k});
  Tensor out = g.alloc(DType::kBF16, {k, k}, "bench");
  const GemmArgs ga{.m = k, .n = k, .k = k};
  const double gms = b.time_ms([&] { g.gemm(ga, a, bm, out); }, 3, 10);
  c.gemm_tflops = 2.0 * k * k * k / (gms * 1e9);
  for (Tensor* t : {&a, &bm, &out}) g.release(*t);
  return c;
}

void print_table(const std::vector<Row>& rows, const Ceilings& measured, double ref_tflops,
                 double ref_gbps) {
  std::printf("\n%-36s %-26s %10s %10s %10s %7s\n", "op", "shape", "ms", "TFLOP/s", "GB/s",
              "% ceil");
  for (const Row& r : rows) {
    const double tf = r.flops > 0 ? r.flops / (r.ms * 1e9) : 0;
    const double gb = r.bytes > 0 ? r.bytes / (r.ms * 1e6) : 0;
    const double pct = r.flops > 0 ? 100 * tf / ref_tflops : 100 * gb / ref_gbps;
    std::printf("%-36s %-26s %10.3f %10s %10s %6.1f%%\n", r.op.c_str(), r.shape.c_str(), r.ms,
                tf > 0 ? std::to_string(static_cast<int>(std::lround(tf))).c_str() : "-",
                gb > 0 ? std::to_string(static_cast<int>(std::lround(gb))).c_str() : "-", pct);
  }
  std::printf(
      "ceilings: %.0f TFLOP/s bf16 dense, %.0f GB/s copy (H200 reference); measured here: "
      "%.0f TFLOP/s (bf16 GEMM 8192^3, random data), %.0f GB/s (1 GiB device copy)\n",
      ref_tflops, ref_gbps, measured.gemm_tflops, measured.copy_gbps);
}

int run(int argc, char** argv) {
  bool checks = true, timings = true;
  std::string only;  // time one group: gemm, attention or memory
  int device = 0, reps = 20;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--checks-only") {
      timings = false;
    } else if (a == "--no-checks") {
      checks = false;
    } else if (a == "--device" && i + 1 < argc) {
      device = std::atoi(argv[++i]);
    } else if (a == "--only" && i + 1 < argc) {
      only = argv[++i];
    } else if (a == "--reps" && i + 1 < argc) {
      reps = std::max(1, std::atoi(argv[++i]));
    } else {
      std::printf(
          "usage: mplan_gpu_bench [--checks-only | --no-checks] [--only gemm|attention|memory]\n"
          "                       [--device N] [--reps N]\n"
          "  Checks every CUDA op against the CPU backend, then times the kernels at the\n"
          "  reference workload's shapes. Env: MPLAN_NAIVE_ATTENTION=1 (reference attention\n"
          "  kernels everywhere), MPLAN_NO_GEMM_EPILOGUE=1 (unfused GEMM epilogues),\n"
          "  MPLAN_ATTN_FWD_SUB=32 (attention forward with two 32-key softmax updates),\n"
          "  MPLAN_ATTENTION=flash2 (the mma.sync attention kernels on Hopper too),\n"
          "  MPLAN_GEMM_TUNE=1 (time cuBLASLt's candidate GEMM algorithms, keep the fastest).\n");
      return a == "--help" || a == "-h" ? 0 : 2;
    }
  }
  if (cuda_device_count() == 0) {
    std::fprintf(stderr, "mplan_gpu_bench: no CUDA device visible\n");
    return 2;
  }
  const auto t0 = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  CudaBackend gpu(device);
  std::printf("mplan_gpu_bench on %s\n", gpu.name().c_str());
  int failed = 0;
  if (checks) {
    CpuBackend cpu;
    OpChecker chk(gpu, cpu, 20261120);
    chk.run_all();
    for (const CheckResult& r : chk.results()) {
      std::printf("%s\n", r.describe().c_str());
      if (!r.pass) ++failed;
    }
    std::printf("checks: %zu compared, %d failed (%.1f s)\n", chk.results().size(), failed,
                elapsed());
    std::fflush(stdout);
  }
  if (timings) {
    Bench b(gpu, reps);
    const Ceilings c = measure_ceilings(b);
    if (only.empty() || only == "gemm") bench_gemms(b);
    if (only.empty() || only == "attention") bench_attention(b);
    if (only.empty() || only == "memory") bench_memory_bound(b);
    print_table(b.rows(), c, 790.0, 4300.0);
    const CudaBackend::DeviceMemory dm = gpu.device_memory();
    std::printf("device memory: peak used %.1f GiB of %.1f GiB\n",
                static_cast<double>(dm.used_peak_bytes) / (1 << 30),
                static_cast<double>(dm.total_bytes) / (1 << 30));
  }
  if (checks)
    std::printf("checks: %s (%d failed)\n", failed == 0 ? "ALL PASSED" : "FAILURES", failed);
  std::printf("total %.1f s\n", elapsed());
  return failed == 0 ? 0 : 1;
}

}  // namespace
}  // namespace mplan::exec::cuda

int main(int argc, char** argv) { return mplan::exec::cuda::run(argc, argv); }
