// CpuBackend: the reference implementation of Backend on the host (plain loops + Eigen GEMMs).
// Every op computes in f32 (reductions in f64) and rounds its outputs to the tensor's dtype once,
// where a GPU kernel would write them; single-threaded, so results are bitwise reproducible.
// Streams are synchronous here: record() and wait() only keep the call order.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "exec/backend.hpp"

namespace mplan::exec {

// Bytes allocated under one tag (e.g. "grads", "activations").
struct TagMemory {
  int64_t current_bytes = 0;
  int64_t peak_bytes = 0;
};

class CpuBackend final : public Backend {
 public:
  CpuBackend() = default;
  ~CpuBackend() override;
  CpuBackend(const CpuBackend&) = delete;
  CpuBackend& operator=(const CpuBackend&) = delete;

  std::string name() const override { return "cpu"; }

  Tensor alloc(DType dtype, std::initializer_list<int64_t> shape, const char* tag) override;
  void release(Tensor& t) override;
  MemoryStats memory_stats() const override;
  void reset_peak_memory() override;
  // Current and peak bytes of each tag (the peak of a tag is its own, not at the global peak).
  const std::map<std::string, TagMemory>& memory_by_tag() const { return by_tag_; }
  void upload(Tensor dst, const void* host) override;
  void download(void* host, Tensor src) override;
  void copy(Tensor dst, Tensor src) override;
  void fill(Tensor t, float value) override;
  void cast(Tensor dst, Tensor src) override;

  Event record(Stream s) override;
  void wait(Stream s, Event e) override;
  void synchronize() override {}
  int mark(Stream s) override;
  bool mark_done(int) override { return true; }
  void read_marks(std::vector<int64_t>& ns) override;
  void clear_marks() override { marks_.clear(); }
  void reuse_marks(int n) override {
    MPLAN_CHECK(n >= 0 && static_cast<size_t>(n) <= marks_.size(), "reuse_marks(", n, ")");
    marks_.resize(static_cast<size_t>(n));
  }

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

  void rmsnorm_forward(Tensor x, Tensor gamma, float eps, Tensor y, Tensor rstd) override;
  void rmsnorm_backward(Tensor dy, Tensor x, Tensor gamma, Tensor rstd, Tensor dx,
                        Tensor dgamma) override;
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
  void xent_loss_and_grad(Tensor logits, Tensor targets, int64_t vocab_start, Tensor row_max,
                          Tensor stats, float grad_scale, Tensor loss) override;
  void sum(Tensor x, Tensor out, bool accumulate) override;

  void sum_squares_accumulate(Tensor x, Tensor out) override;
  void adamw(const AdamW& hp, Tensor param, Tensor grad, Tensor m, Tensor v,
             Tensor param_act) override;

 private:
  struct Allocation {
    size_t bytes;
    std::string tag;
  };
  std::map<void*, Allocation> live_;
  std::map<std::string, TagMemory> by_tag_;
  int64_t current_bytes_ = 0;
  int64_t peak_bytes_ = 0;
  int next_event_ = 0;
  std::vector<int64_t> marks_;  // steady-clock ns of each mark
};

}  // namespace mplan::exec
