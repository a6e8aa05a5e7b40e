// LtGemm: row-major GEMMs C(m, n) = alpha·op(A)·op(B) + beta·C through cuBLASLt, with the bias,
// bias+GeLU and GeLU-backward epilogues fused when cuBLASLt has an algorithm for them, and the
// residual ones as cuBLASLt's C input (aux, beta 1) beside its D output (our C). Row-major C
// is the column-major C^T = op(B)^T·op(A)^T, so A and B swap places in every cuBLASLt call.
// Invariant: a shape (with its dtypes, transposes, epilogue and pointer alignments) is planned
// once: descriptors, layouts and the heuristic's algorithm are cached and reused, so a call after
// the first costs no heuristic query and no allocation; the same algorithm gives the same bits.
// MPLAN_GEMM_TUNE=1 (off by default): the first call of a shape whose C it overwrites (beta 0)
// times cuBLASLt's candidate algorithms (up to 8) on its own operands and keeps the fastest for
// the process; results stay reproducible within a process, not between processes (a choice may
// change with timing noise), which is why it is not the default.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <map>
#include <memory>
#include <tuple>

#include "exec/backend.hpp"

namespace mplan::exec::cuda {

class LtGemm {
 public:
  // workspace: device memory owned by the caller, used by every GEMM issued on one stream.
  LtGemm(void* workspace, size_t workspace_bytes);
  ~LtGemm();
  LtGemm(const LtGemm&) = delete;
  LtGemm& operator=(const LtGemm&) = delete;

  // Backend::gemm semantics. When an epilogue has no fused algorithm (or fuse_epilogues is
  // false) it runs as a plain GEMM followed by the bias / GeLU / GeLU-backward kernels.
  void run(const GemmArgs& g, const Tensor& a, const Tensor& b, const Tensor& c, const Tensor& bias,
           const Tensor& aux, cudaStream_t stream);

  void set_fuse_epilogues(bool on) { fuse_epilogues_ = on; }
  // Shapes planned from now on (a plan keeps its choice).
  void set_tune(bool on) { tune_ = on; }
  size_t cached_plans() const { return plans_.size(); }
  // Plans whose algorithm this LtGemm chose by timing (MPLAN_GEMM_TUNE).
  size_t timed_plans() const { return timed_plans_; }

 private:
  struct Plan;
  // trans_a, trans_b, m, n, k, ab dtype, c dtype, epilogue, beta != 0, alignments of a, b, c,
  // bias, aux (bytes, capped at 256).
  using Key = std::tuple<bool, bool, int64_t, int64_t, int64_t, int, int, int, bool, int, int, int,
                         int, int>;
  // The cached plan for a call, or nullptr when cuBLASLt has no algorithm for it.
  // c_in: cuBLASLt's C where beta != 0 (null: our C; the residual epilogues: aux).
  Plan* plan_for(const GemmArgs& g, const Tensor& a, const Tensor& b, const Tensor& c, Epilogue epi,
                 const void* bias, DType bias_t, const void* aux, const void* c_in = nullptr);
  void matmul(Plan& p, const GemmArgs& g, const Tensor& a, const Tensor& b, const Tensor& c,
              float beta, const void* bias, const void* aux, cudaStream_t stream,
              const void* c_in = nullptr);
  void tune(Plan& p, const GemmArgs& g, const Tensor& a, const Tensor& b, const Tensor& c,
            float beta, cudaStream_t stream, const void* c_in);

  cublasLtHandle_t handle_ = nullptr;
  void* workspace_;
  size_t workspace_bytes_;
  bool fuse_epilogues_ = true;
  bool tune_ = false;  // MPLAN_GEMM_TUNE
  size_t timed_plans_ = 0;
  std::map<Key, std::unique_ptr<Plan>> plans_;
};

}  // namespace mplan::exec::cuda
