// CudaBackend: the Backend (exec/backend.hpp) on one CUDA device: cuBLASLt GEMMs, the kernels of
// exec/cuda/*.cu, a compute and a comm stream, events from a pool, and counted device memory.
// Invariants: every op is enqueued on the compute stream (comm ops go through NcclComm on the
// stream they name); memory comes from cudaMalloc only in alloc() and in the scratch arena, which
// grows on first use and is then reused, so a training step after the first allocates nothing;
// reserve_scratch() sizes it ahead. Activations bf16 or f32; master weights, grads, optimizer f32.
#pragma once

#include <cuda_runtime.h>

#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "exec/backend.hpp"
#include "exec/cuda/kernels.hpp"

namespace mplan::exec::cuda {

class LtGemm;

class CudaBackend final : public Backend {
 public:
  // Makes `device` current for the calling thread and sets up streams, cuBLASLt and workspace.
  explicit CudaBackend(int device);
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  std::string name() const override;

  Tensor alloc(DType dtype, std::initializer_list<int64_t> shape, const char* tag) override;
  void release(Tensor& t) override;
  MemoryStats memory_stats() const override;
  void reset_peak_memory() override;
  void upload(Tensor dst, const void* host) override;
  void download(void* host, Tensor src) override;
  void copy(Tensor dst, Tensor src) override;
  void fill(Tensor t, float value) override;
  void cast(Tensor dst, Tensor src) override;

  Event record(Stream s) override;
  void wait(Stream s, Event e) override;
  void synchronize() override;
  int mark(Stream s) override;
  bool mark_done(int id) override;
  void read_marks(std::vector<int64_t>& ns) override;
  void clear_marks() override;
  void reuse_marks(int n) override;
  bool can_capture() const override { return true; }
  void begin_capture() override;
  int end_capture() override;
  bool replay(int id) override;

  void gemm(const GemmArgs& g, Tensor a, Tensor b, Tensor c, Tensor bias = {},
            Tensor aux = {}) override;
  void bias_grad_accumulate(Tensor dy, Tensor db) override;
  void add(Tensor out, Tensor a, Tensor b) override;
  void scale(Tensor t, float factor) override;
  void gelu_forward(Tensor x, Tensor y) override;
  void gelu_backward(Tensor dy, Tensor x, Tensor dx) override;

  void layernorm_forward(Tensor x, Tensor gamma, Tensor beta, float eps, Tensor y, Tensor mean,
                         Tensor rstd) override;
  void layernorm_backward(Tensor dy, Tensor x, Tensor gamma, Tensor mean, Tensor rstd, Tensor dx,
                          Tensor dgamma, Tensor dbeta) override;
  void layernorm_backward_add(Tensor dy, Tensor x, Tensor gamma, Tensor mean, Tensor rstd,
                              Tensor dx, Tensor dgamma, Tensor dbeta, Tensor dres,
                              Tensor dres_colsum = {}) override;

  void rmsnorm_forward(Tensor x, Tensor gamma, float eps, Tensor y, Tensor rstd) override;
  void rmsnorm_backward(Tensor dy, Tensor x, Tensor gamma, Tensor rstd, Tensor dx,
                        Tensor dgamma) override;
  void rmsnorm_backward_add(Tensor dy, Tensor x, Tensor gamma, Tensor rstd, Tensor dx,
                            Tensor dgamma, Tensor dres, Tensor dres_colsum = {}) override;
  void swiglu_forward(Tensor x, Tensor y) override;
  void swiglu_backward(Tensor dy, Tensor x, Tensor dx) override;
  void rope(Tensor qkv, int64_t heads, int64_t groups, int64_t rot_dim, float base,
            bool inverse) override;

  void attention_forward(Tensor qkv, Tensor out, Tensor lse, float scale) override;
  void attention_backward(Tensor qkv, Tensor out, Tensor dout, Tensor lse, float scale, Tensor dqkv,
                          Tensor dqkv_colsum = {}) override;

  void embedding_forward(Tensor tokens, Tensor wte, int64_t vocab_start, Tensor out) override;
  void embedding_backward(Tensor tokens, Tensor dout, int64_t vocab_start, Tensor dwte) override;
  void add_position_embedding(Tensor x, Tensor wpe, int64_t s_offset) override;
  void position_embedding_backward(Tensor dx, Tensor dwpe, int64_t s_offset) override;

  void xent_local_max(Tensor logits, Tensor row_max) override;
  void xent_local_stats(Tensor logits, Tensor targets, int64_t vocab_start, Tensor row_max,
                        Tensor stats) override;
  void xent_local_max_and_stats(Tensor logits, Tensor targets, int64_t vocab_start, Tensor row_max,
                                Tensor stats) override;
  void xent_loss_and_grad(Tensor logits, Tensor targets, int64_t vocab_start, Tensor row_max,
                          Tensor stats, float grad_scale, Tensor loss) override;
  // One kernel reading and writing the logits once (xent.cu's fused path) where it applies
  // (xent_fused(), bf16 or f32, rows of a multiple of 8 columns, 16-byte aligned, at most
  // 131072 columns), else Backend's two steps.
  void xent_max_stats_loss_and_grad(Tensor logits, Tensor targets, int64_t vocab_start,
                                    Tensor row_max, Tensor stats, float grad_scale,
                                    Tensor loss) override;
  void sum(Tensor x, Tensor out, bool accumulate) override;

  void sum_squares_accumulate(Tensor x, Tensor out) override;
  void adamw(const AdamW& hp, Tensor param, Tensor grad, Tensor m, Tensor v,
             Tensor param_act) override;

  // ---- CUDA specifics ----------------------------------------------------------------------
  int device() const { return device_; }
  cudaStream_t stream(Stream s) const { return s == Stream::kCompute ? compute_ : comm_; }
  // Current and peak bytes of each alloc() tag ("scratch" and "cublas-workspace" included).
  struct TagMemory {
    int64_t current_bytes = 0;
    int64_t peak_bytes = 0;
  };
  std::map<std::string, TagMemory> memory_by_tag() const;
  // What the device reports now (cudaMemGetInfo), for every process and library on it.
  struct DeviceMemory {
    int64_t total_bytes = 0;
    int64_t used_bytes = 0;
    int64_t used_peak_bytes = 0;  // highest used_bytes seen at an alloc() or a stats call
  };
  DeviceMemory device_memory() const;
  // Grows the scratch arena to at least `bytes` now (ops grow it on first use otherwise).
  void reserve_scratch(size_t bytes);
  // The attention kernels (kernels.hpp): the best for the device by default; MPLAN_ATTENTION=
  // flash2 keeps the mma.sync kernels on Hopper, MPLAN_ATTENTION=reference (or
  // MPLAN_NAIVE_ATTENTION=1) the reference kernels.
  AttentionKernels attention_kernels() const { return attention_kernels_; }
  void set_attention_kernels(AttentionKernels k) { attention_kernels_ = k; }
  bool naive_attention() const { return attention_kernels_ == AttentionKernels::kReference; }
  void set_naive_attention(bool on) {
    attention_kernels_ = on ? AttentionKernels::kReference : AttentionKernels::kBest;
  }
  // cuBLASLt epilogues fused (default) or run as separate kernels (MPLAN_NO_GEMM_EPILOGUE=1).
  void set_fuse_gemm_epilogues(bool on);
  // Time cuBLASLt's candidate algorithms per GEMM shape and keep the fastest (gemm_lt.hpp); on
  // with MPLAN_GEMM_TUNE=1, off by default.
  void set_tune_gemms(bool on);
  // GEMM plans whose algorithm was chosen by timing (set_tune_gemms / MPLAN_GEMM_TUNE).
  size_t timed_gemm_plans() const;
  // xent_max_stats_loss_and_grad's fused kernel on (default, where the device has compute
  // capability 9 or more) or off (MPLAN_NO_XENT_FUSION=1: the two kernels of the steps).
  bool xent_fused() const { return xent_fused_; }
  void set_xent_fused(bool on) { xent_fused_ = on && xent_fused_supported_; }
  // bias_grad_accumulate of 16-bit gradients as cuBLASLt's product ones^T · dY (default), or by
  // the column-sum kernel (false; f32 gradients always).
  void set_bias_grad_by_gemm(bool on) { bias_grad_by_gemm_ = on; }
  // attention_backward's column sums from the Hopper kernel's registers where it can (default),
  // or always by bias_grad_accumulate after the backward (false; MPLAN_NO_ATTENTION_BIAS_GRAD=1).
  void set_attention_bias_grad_fused(bool on) { attention_bias_grad_fused_ = on; }

 private:
  void* device_alloc(size_t bytes, const std::string& tag);
  void device_free(void* p);
  void* scratch(size_t bytes);  // the arena, at least `bytes` large
  void sample_device_memory() const;

  int device_ = 0;
  std::string device_name_;
  cudaStream_t compute_ = nullptr;
  cudaStream_t comm_ = nullptr;
  std::vector<cudaEvent_t> events_;  // a ring; slots are created on first use
  // Timing events: mark i is timing_events_[i] (created on first use, kept for reuse); the
  // mutex guards the deque against mark_done() from another thread.
  std::deque<cudaEvent_t> timing_events_;
  int num_marks_ = 0;
  bool capturing_ = false;  // between begin_capture() and end_capture()
  // Recorded graphs by id (null once forgotten), each with the count of device_free() calls
  // before its recording: a later release may have freed memory it uses.
  struct Graph {
    cudaGraphExec_t exec = nullptr;
    uint64_t frees = 0;
  };
  std::vector<Graph> graphs_;
  uint64_t frees_ = 0;  // device_free() calls so far
  mutable std::mutex marks_mutex_;
  size_t next_event_ = 0;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
  std::unique_ptr<LtGemm> gemm_;
  void* scratch_ = nullptr;
  size_t scratch_bytes_ = 0;
  bool xent_fused_supported_ = false;
  bool xent_fused_ = false;
  AttentionKernels attention_kernels_ = AttentionKernels::kBest;
  bool bias_grad_by_gemm_ = true;
  bool attention_bias_grad_fused_ = true;
  Tensor ones_;  // bf16 ones, as many as the most rows a bias gradient has summed
  // RoPE inverse frequencies on the device, per (rot_dim, base).
  std::map<std::pair<int64_t, float>, float*> rope_tables_;

  struct Allocation {
    size_t bytes;
    std::string tag;
  };
  std::map<void*, Allocation> allocations_;
  std::map<std::string, TagMemory> by_tag_;
  int64_t current_bytes_ = 0;
  int64_t peak_bytes_ = 0;
  mutable int64_t device_used_peak_bytes_ = 0;
};

}  // namespace mplan::exec::cuda

namespace mplan::exec {

// The CUDA backend on `device` (a cuda::CudaBackend).
std::unique_ptr<Backend> make_cuda_backend(int device);

// Number of visible CUDA devices; 0 when there is no driver or no device (never aborts).
int cuda_device_count();

// Free memory on `device` now (cudaMemGetInfo; makes the device current), for the fit check
// before anything is allocated.
int64_t cuda_free_bytes(int device);

}  // namespace mplan::exec
