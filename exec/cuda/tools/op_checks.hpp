// OpChecker: every CudaBackend op against the CpuBackend on fresh random inputs, shared by the
// GPU tests (tests/exec/cuda) and mplan_gpu_bench. Each check uploads the same host data to both
// backends (same dtypes, so both round outputs to bf16 at the same points), poisons outputs with
// NaN (accumulated outputs get random initial values instead), runs the op on both and compares
// every output element: pass when no element is NaN and |got - ref| <= atol + rtol·|ref| with
// atol = max(atol_rel · rms(ref), atol_abs), and ||got - ref|| / ||ref|| <= rel_l2_max (or the
// rms of the difference within atol_abs). Tolerances per check are stated where the check is
// defined (op_checks.cpp).
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "exec/backend.hpp"

namespace mplan::exec::cuda {

class CudaBackend;

struct Tolerance {
  double rtol;
  double atol_rel;      // absolute tolerance as a fraction of the reference's rms
  double rel_l2_max;    // bound on ||got - ref|| / ||ref||
  double atol_abs = 0;  // absolute floor, for references that are only rounding noise
};

// bf16 outputs: one bf16 rounding step (2^-8 relative) apart plus accumulation-order effects.
inline constexpr Tolerance kBf16Tol{1.6e-2, 1e-2, 1e-2};
// f32 outputs computed from the same inputs in a different summation order.
inline constexpr Tolerance kF32Tol{1e-4, 1e-5, 1e-5};

struct CheckResult {
  std::string name;  // op, shape and output, e.g. "gemm NT m=64 n=48 k=40 c=f32 beta=1: c"
  int64_t numel = 0;
  double rel_l2 = 0;
  int64_t worst_index = -1;  // element with the largest |got - ref| / (atol + rtol·|ref|)
  double worst_got = 0, worst_ref = 0, worst_ratio = 0;
  int64_t nan_count = 0;  // elements not written (still NaN) or NaN where the reference is not
  bool pass = false;
  std::string describe() const;  // one line: PASS/FAIL, name, rel_l2, worst element
};

class OpChecker {
 public:
  OpChecker(CudaBackend& gpu, Backend& cpu, uint64_t seed);

  // Each check appends one result per compared output and returns whether all of them passed.
  bool gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, DType act, DType c_dtype,
            float alpha, float beta);
  bool gemm_epilogue(Epilogue epi, int64_t m, int64_t n, int64_t k, bool fused);
  // The GeLU-backward epilogue (kDGelu) on an input-gradient GEMM dy (m, k) · W (k, n), aux the
  // pre-activation (m, n); fused (cuBLASLt DGELU) or the plain GEMM then the gelu_backward kernel.
  bool gemm_dgelu(int64_t m, int64_t n, int64_t k, DType act, bool fused);
  bool bias_grad(int64_t rows, int64_t n, DType act);
  bool elementwise(int64_t n, DType act);  // fill, copy, cast both ways, add, scale, gelu fwd/bwd
  // Forward, backward and layernorm_backward_add (against the CPU, and bitwise against the GPU's
  // layernorm_backward followed by add).
  bool layernorm(int64_t rows, int64_t h, DType act);
  // RMSNorm forward, backward, and the residual form (against the CPU, and bitwise against the
  // GPU's backward followed by add).
  bool rmsnorm(int64_t rows, int64_t h, DType act);
  bool swiglu(int64_t rows, int64_t f, DType act);
  // RoPE forward and inverse on qkv (s, b, heads + 2 groups, d).
  bool rope(int64_t s, int64_t b, int64_t heads, int64_t groups, int64_t d, int64_t rot_dim,
            DType act);
  // qkv (s, b, heads + 2 groups, d) (groups == heads: multi-head); naive selects the reference
  // kernels on the GPU.
  bool attention(int64_t s, int64_t b, int64_t heads, int64_t groups, int64_t d, DType act,
                 bool naive);
  bool embedding(int64_t num_tokens, int64_t vocab_local, int64_t vocab_start, int64_t h, DType act,
                 bool repeat_ids);
  bool position_embedding(int64_t s, int64_t b, int64_t h, int64_t max_s, int64_t s_offset,
                          DType act);
  bool cross_entropy(int64_t rows, int64_t cols, int64_t vocab_start, int64_t vocab_total,
                     DType act);
  bool sums(int64_t n);
  bool adamw(int64_t n, bool with_act, float weight_decay);
  // The same op twice on the same inputs gives bitwise the same outputs.
  bool determinism(int64_t s, int64_t b, int64_t heads, int64_t groups, int64_t d);

  // Every check above at small sizes (the bench's correctness pass).
  bool run_all();

  const std::vector<CheckResult>& results() const { return results_; }
  void clear() { results_.clear(); }

 private:
  struct Pair {  // the same logical tensor on both backends
    Tensor gpu, cpu;
  };
  Pair alloc(DType dt, std::initializer_list<int64_t> shape);
  void release(Pair& p);
  void set(Pair& p, const std::vector<float>& host);  // host values, rounded to p's dtype
  std::vector<float> random(int64_t n, float lo, float hi);
  Pair random_pair(DType dt, std::initializer_list<int64_t> shape, float lo = -1, float hi = 1);
  void poison(Pair& p);
  std::vector<float> read_gpu(const Pair& p);
  std::vector<float> read_cpu(const Pair& p);
  bool compare(const std::string& name, const Pair& p, const Tolerance& tol);
  bool compare_values(const std::string& name, const std::vector<float>& got,
                      const std::vector<float>& ref, const Tolerance& tol);
  bool bitwise_same(const std::string& name, const std::vector<float>& a,
                    const std::vector<float>& b);

  CudaBackend& gpu_;
  Backend& cpu_;
  std::mt19937_64 rng_;
  std::vector<CheckResult> results_;
};

}  // namespace mplan::exec::cuda
