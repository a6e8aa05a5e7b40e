// Backend: the tensor operations one GPT training step needs, written once against this
// interface and implemented twice: CpuBackend (exec/cpu, reference, plain loops + Eigen) and
// CudaBackend (exec/cuda, cuBLAS/cuBLASLt + kernels). Invariants every implementation keeps:
// - Row-major tensors; activations laid out (s, b, h) as in Megatron-LM, so a sequence shard
//   (sequence parallel) is one contiguous block of rows. T = s·b tokens.
// - Activations and weights in `act` precision (bf16 on GPUs; f32 allowed for CPU tests);
//   master weights, main gradients and optimizer state in f32. Accumulating ops (beta = 1,
//   "accumulate" in the name) add into f32 buffers; everything else overwrites.
// - Deterministic: the same inputs give bitwise the same outputs (no float atomics).
// - Ops run in order on the backend's compute stream; comm ops (exec/comm.hpp) run on the
//   stream they are given; record()/wait() order work across streams like CUDA events.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "src/common/error.hpp"

namespace mplan::exec {

enum class DType : uint8_t { kF32, kBF16, kI32 };
size_t dtype_size(DType t);
const char* to_string(DType t);

// A non-owning view of backend memory with a shape (up to 4 dims, row-major, contiguous).
struct Tensor {
  void* data = nullptr;
  DType dtype = DType::kF32;
  std::array<int64_t, 4> shape{0, 0, 0, 0};
  int ndim = 0;

  int64_t numel() const;
  size_t bytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype); }
  int64_t dim(int i) const { return shape[static_cast<size_t>(i)]; }
  // Rows × columns when viewed as a matrix whose last dim is the columns.
  int64_t rows() const { return ndim == 0 ? 0 : numel() / shape[static_cast<size_t>(ndim - 1)]; }
  int64_t cols() const { return ndim == 0 ? 0 : shape[static_cast<size_t>(ndim - 1)]; }
  template <class T>
  T* as() const {
    return static_cast<T*>(data);
  }
  // Same memory, another shape with the same element count.
  Tensor view(std::initializer_list<int64_t> new_shape) const;
  // Rows [row_begin, row_begin + n) of the matrix view (rows() × cols()): contiguous.
  Tensor rows_slice(int64_t row_begin, int64_t n) const;
  // Elements [offset, offset + n) as a 1-D tensor.
  Tensor flat_slice(int64_t offset, int64_t n) const;
};

Tensor make_tensor(void* data, DType dtype, std::initializer_list<int64_t> shape);

// Which stream an op or a collective is issued on. kCompute runs the model; kComm carries the
// data-parallel gradient reduction so it overlaps with backward compute.
enum class Stream : uint8_t { kCompute = 0, kComm = 1 };

// A point in a stream's work that another stream can wait for (a CUDA event).
struct Event {
  int id = -1;
};

enum class Epilogue : uint8_t {
  kNone,      // C = alpha·op(A)·op(B) + beta·C
  kBias,      // C = op(A)·op(B) + bias            (bias: (n) act dtype; beta must be 0)
  kBiasGelu,  // aux = op(A)·op(B) + bias; C = gelu_tanh(aux)   (aux: same shape as C)
  // GeLU's backward after the GEMM that gives its output's gradient: C = op(A)·op(B) ∘
  // gelu_tanh'(aux), aux read (same shape and dtype as C: the pre-activation kBiasGelu saved);
  // no bias; alpha must be 1 and beta 0.
  kDGelu,
  // The residual add after a row-parallel linear that needs no reduction (tensor parallel 1):
  // C = op(A)·op(B) [+ bias] + aux, aux read (same shape and dtype as C; it may be C itself), the
  // sum rounded once; alpha must be 1 and beta 0.
  kResidual,
  kBiasResidual,
};
// Whether the epilogue adds a bias (n, act dtype), and whether it reads or writes aux.
constexpr bool epilogue_has_bias(Epilogue e) {
  return e == Epilogue::kBias || e == Epilogue::kBiasGelu || e == Epilogue::kBiasResidual;
}
constexpr bool epilogue_has_aux(Epilogue e) {
  return e == Epilogue::kBiasGelu || e == Epilogue::kDGelu || e == Epilogue::kResidual ||
         e == Epilogue::kBiasResidual;
}

struct GemmArgs {
  bool trans_a = false;  // A is stored (k, m) and used transposed
  bool trans_b = false;  // B is stored (n, k) and used transposed
  int64_t m = 0, n = 0, k = 0;
  float alpha = 1.0f;
  float beta = 0.0f;  // beta = 1 with an f32 C accumulates (weight gradients)
  Epilogue epilogue = Epilogue::kNone;
};

// Per-rank accounting of what the backend allocated (the executor's own accounting).
struct MemoryStats {
  int64_t current_bytes = 0;
  int64_t peak_bytes = 0;
  int64_t device_peak_bytes = -1;  // what the device itself reports (-1: not available)
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;

  // ---- memory -----------------------------------------------------------------------------
  // Uninitialized memory for `shape`; counted in memory_stats() under `tag` until release().
  virtual Tensor alloc(DType dtype, std::initializer_list<int64_t> shape, const char* tag) = 0;
  virtual void release(Tensor& t) = 0;
  virtual MemoryStats memory_stats() const = 0;
  virtual void reset_peak_memory() = 0;
  virtual void upload(Tensor dst, const void* host) = 0;  // dst.bytes() from host
  virtual void download(void* host, Tensor src) = 0;      // src.bytes() to host (synchronizes)
  virtual void copy(Tensor dst, Tensor src) = 0;          // same dtype and numel
  virtual void fill(Tensor t, float value) = 0;           // any float dtype; I32 from (int)value
  virtual void cast(Tensor dst, Tensor src) = 0;          // f32 <-> bf16, same numel

  // ---- streams -----------------------------------------------------------------------------
  virtual Event record(Stream s) = 0;        // an event at the current end of stream s
  virtual void wait(Stream s, Event e) = 0;  // later work on s waits for e
  virtual void synchronize() = 0;            // host waits for all streams

  // ---- timing (traces, the measured breakdown, the watchdog) ---------------------------------
  // A timestamp taken when stream s reaches this point; returns its id (0, 1, ... since the
  // last clear_marks()). Cheap enough to place around every schedule action and collective.
  virtual int mark(Stream s) = 0;
  // Whether stream s has passed mark `id` (always true on synchronous backends). Thread-safe
  // against mark() on the calling thread of the backend (the watchdog asks from its own thread).
  virtual bool mark_done(int id) = 0;
  // Times of marks [0, n) in ns after mark 0, once they are done (call after synchronize()).
  virtual void read_marks(std::vector<int64_t>& ns) = 0;
  virtual void clear_marks() = 0;
  // Marks [0, n) stand as they are (taken again by a graph's replay, begin_capture below); the
  // next mark() returns n. n <= the marks taken since the last clear_marks(), or where marks
  // outlive it (the CUDA backend's events) the most ever taken.
  virtual void reuse_marks(int n) = 0;

  // ---- iteration graphs (CUDA graphs) --------------------------------------------------------
  // Between begin_capture() and end_capture() the work queued on the streams is recorded, not
  // run (marks included: a replay takes them again); end_capture() returns the graph's id, or -1
  // where the recording failed (nothing of it ran). replay(id) queues the recorded work on the
  // compute stream and returns true, or returns false (queuing nothing, the graph forgotten)
  // where memory the recording used has been released since. Operands are the pointers and
  // values of the recording: a replay reads and writes the same buffers. Backends without
  // graphs answer can_capture() false.
  virtual bool can_capture() const { return false; }
  virtual void begin_capture() {}
  virtual int end_capture() { return -1; }
  virtual bool replay(int /*id*/) { return false; }

  // ---- dense math ----------------------------------------------------------------------------
  // C(m, n) = alpha · op(A) · op(B) + beta · C with op(A) (m, k), op(B) (k, n); A and B in act
  // dtype, C in act dtype or f32; accumulation in f32. bias/aux used per the epilogue.
  virtual void gemm(const GemmArgs& g, Tensor a, Tensor b, Tensor c, Tensor bias = {},
                    Tensor aux = {}) = 0;
  // db(n) += column sums of dy (rows × n); db f32.
  virtual void bias_grad_accumulate(Tensor dy, Tensor db) = 0;
  // out = a + b, elementwise, same dtype and numel.
  virtual void add(Tensor out, Tensor a, Tensor b) = 0;
  // t *= factor (f32 or act dtype).
  virtual void scale(Tensor t, float factor) = 0;
  // y = gelu_tanh(x); dx = dy · gelu_tanh'(x).
  virtual void gelu_forward(Tensor x, Tensor y) = 0;
  virtual void gelu_backward(Tensor dy, Tensor x, Tensor dx) = 0;

  // ---- normalization -------------------------------------------------------------------------
  // x, y: (T, h) act; gamma, beta: (h) act; mean, rstd: (T) f32 saved for backward.
  virtual void layernorm_forward(Tensor x, Tensor gamma, Tensor beta, float eps, Tensor y,
                                 Tensor mean, Tensor rstd) = 0;
  // dx = dL/dx (overwrites); dgamma, dbeta: (h) f32, accumulated (+=).
  virtual void layernorm_backward(Tensor dy, Tensor x, Tensor gamma, Tensor mean, Tensor rstd,
                                  Tensor dx, Tensor dgamma, Tensor dbeta) = 0;
  // dres = dres + dL/dx (the residual stream's gradient), dx rounded to the act dtype before the
  // add; dx: scratch of dres's shape, which a backend that fuses the add may leave untouched.
  // With dres_colsum ((h) f32): also dres_colsum += the column sums of dres as it was before the
  // add (the bias gradient of the row-parallel layer whose output gradient dres is), which a
  // backend may take from the loads of its fused add. The default runs bias_grad_accumulate,
  // layernorm_backward into dx, then add.
  virtual void layernorm_backward_add(Tensor dy, Tensor x, Tensor gamma, Tensor mean, Tensor rstd,
                                      Tensor dx, Tensor dgamma, Tensor dbeta, Tensor dres,
                                      Tensor dres_colsum = {});

  // ---- Llama-family layers -------------------------------------------------------------------
  // RMSNorm: y = x · rstd · gamma with rstd(T) = 1 / sqrt(mean(x²) + eps) saved f32.
  virtual void rmsnorm_forward(Tensor x, Tensor gamma, float eps, Tensor y, Tensor rstd) = 0;
  // dx = dL/dx (overwrites); dgamma (h) f32 accumulated (+=).
  virtual void rmsnorm_backward(Tensor dy, Tensor x, Tensor gamma, Tensor rstd, Tensor dx,
                                Tensor dgamma) = 0;
  // dres = dres + dL/dx, dx rounded to the act dtype before the add; dres_colsum as
  // layernorm_backward_add's.
  virtual void rmsnorm_backward_add(Tensor dy, Tensor x, Tensor gamma, Tensor rstd, Tensor dx,
                                    Tensor dgamma, Tensor dres, Tensor dres_colsum = {});
  // SwiGLU: x (T, 2F) holds [gate | up] in each row (fc1's output, Megatron's layout);
  // y (T, F) = silu(gate) · up.
  virtual void swiglu_forward(Tensor x, Tensor y) = 0;
  // dx (T, 2F) = [dgate | dup] from dy (T, F) and x.
  virtual void swiglu_backward(Tensor dy, Tensor x, Tensor dx) = 0;
  // Rotary position embedding in place on qkv (s, b, heads + 2·groups, d): the Q and K heads of
  // position p (the sequence index) rotated in the first rot_dim dims by angle
  // p · base^(-2i / rot_dim) on the pairs (i, i + rot_dim/2) (Megatron's and Llama's rotate-half
  // form); V untouched. inverse: the transpose (rotation by -angle), for gradients.
  virtual void rope(Tensor qkv, int64_t heads, int64_t groups, int64_t rot_dim, float base,
                    bool inverse) = 0;

  // ---- attention -----------------------------------------------------------------------------
  // Causal self-attention for one tensor-parallel shard of heads, multi-head or grouped-query.
  // qkv: (s, b, heads + 2·groups, d) act: per token the heads' Q, then the groups' K, then the
  // groups' V, as the column-parallel QKV GEMM writes them; query head h attends with K/V group
  // h / (heads / groups). groups == heads is multi-head attention, (s, b, 3, heads, d).
  // A Tensor has at most 4 dims: qkv and dqkv may be any view of that element count; s, b,
  // heads and d are read from `out` (4-D), groups from qkv's element count (it must divide
  // heads). out: (s, b, heads, d) act. lse: (b, heads, s) f32 log-sum-exp of each softmax row,
  // saved so backward recomputes probabilities without storing the s×s scores.
  // scale = 1/sqrt(d).
  virtual void attention_forward(Tensor qkv, Tensor out, Tensor lse, float scale) = 0;
  // The K/V groups of an attention call, from qkv's element count s · b · (heads + 2 groups) · d;
  // throws unless that form holds with groups dividing heads. Both backends read them so.
  static int64_t attention_groups(const Tensor& qkv, int64_t s, int64_t b, int64_t heads,
                                  int64_t d);
  // dqkv: qkv's layout, overwritten with dQ, dK, dV (a group's dK and dV summed over its heads).
  // With dqkv_colsum (((heads + 2·groups)·d) f32): also dqkv_colsum += the column sums of dqkv as
  // (s·b, (heads + 2·groups)·d) rows (the QKV layer's bias gradient), which a backend may add
  // from its kernels' registers (the same values as bias_grad_accumulate(dqkv, dqkv_colsum), in
  // another order).
  virtual void attention_backward(Tensor qkv, Tensor out, Tensor dout, Tensor lse, float scale,
                                  Tensor dqkv, Tensor dqkv_colsum = {}) = 0;

  // ---- embeddings ------------------------------------------------------------------------------
  // Vocab-parallel lookup: out(t) = wte(tokens(t) - vocab_start) when the token falls in this
  // shard [vocab_start, vocab_start + wte.rows), else 0. tokens: (s, b) i32; wte: (V/tp, h) act;
  // out: (s, b, h) act.
  virtual void embedding_forward(Tensor tokens, Tensor wte, int64_t vocab_start, Tensor out) = 0;
  // dwte(v) += sum of dout(t) over tokens t with tokens(t) - vocab_start == v; dwte f32.
  // Deterministic (fixed summation order).
  virtual void embedding_backward(Tensor tokens, Tensor dout, int64_t vocab_start, Tensor dwte) = 0;
  // x(s, b, :) += wpe(s_offset + s, :); x: (s, b, h) act, wpe: (S, h) act.
  virtual void add_position_embedding(Tensor x, Tensor wpe, int64_t s_offset) = 0;
  // dwpe(s_offset + s, :) += sum over b of dx(s, b, :); dwpe f32.
  virtual void position_embedding_backward(Tensor dx, Tensor dwpe, int64_t s_offset) = 0;

  // ---- vocab-parallel cross-entropy (Megatron's three steps; comm between them) -------------
  // logits: (T, V/tp) act for vocabulary [vocab_start, vocab_start + V/tp); targets: (T) i32.
  // 1) row_max(T) f32 = max over the local vocabulary.
  virtual void xent_local_max(Tensor logits, Tensor row_max) = 0;
  // 2) given the global row_max, stats(2, T) f32: stats[0] = sum exp(logit - max) locally,
  //    stats[1] = logit of the target when it is local, else 0.
  virtual void xent_local_stats(Tensor logits, Tensor targets, int64_t vocab_start, Tensor row_max,
                                Tensor stats) = 0;
  // 1) and 2) together where nothing is reduced between them (tensor parallel 1: the local max is
  //    the global one); a backend may do it in one pass over the logits (rounding may differ
  //    from the two steps' by the order of the sum's terms).
  virtual void xent_local_max_and_stats(Tensor logits, Tensor targets, int64_t vocab_start,
                                        Tensor row_max, Tensor stats) {
    xent_local_max(logits, row_max);
    xent_local_stats(logits, targets, vocab_start, row_max, stats);
  }
  // 3) with global stats: loss(T) f32 = log(sumexp) + max - target_logit; logits overwritten
  //    in place by dL/dlogits · grad_scale = (softmax - onehot(target)) · grad_scale. An empty
  //    (T, 0) logits view computes the loss alone (evaluation) and writes no gradient.
  virtual void xent_loss_and_grad(Tensor logits, Tensor targets, int64_t vocab_start,
                                  Tensor row_max, Tensor stats, float grad_scale, Tensor loss) = 0;
  // Steps 1-3 where nothing is reduced between them (tensor parallel 1): row_max, stats and loss
  //    as the steps write them, and the gradient in place of the logits (not empty). A backend
  //    may read the logits once and write them once (rounding may differ from the steps' by the
  //    order of the sum's terms).
  virtual void xent_max_stats_loss_and_grad(Tensor logits, Tensor targets, int64_t vocab_start,
                                            Tensor row_max, Tensor stats, float grad_scale,
                                            Tensor loss) {
    xent_local_max_and_stats(logits, targets, vocab_start, row_max, stats);
    xent_loss_and_grad(logits, targets, vocab_start, row_max, stats, grad_scale, loss);
  }
  // Sum of a f32 vector into out(1) f32 (+= when accumulate).
  virtual void sum(Tensor x, Tensor out, bool accumulate) = 0;

  // ---- optimizer ---------------------------------------------------------------------------
  // out(1) f32 += sum of squares of x (f32).
  virtual void sum_squares_accumulate(Tensor x, Tensor out) = 0;
  // One AdamW step (decoupled weight decay, bias correction with `step` >= 1) on f32 master
  // weights `param` with f32 `grad` pre-multiplied by grad_scale; writes the act-dtype copy
  // `param_act` (may be empty). m, v: f32 state. weight_decay applies when > 0.
  struct AdamW {
    float lr, beta1, beta2, eps, weight_decay, grad_scale;
    int64_t step;
  };
  virtual void adamw(const AdamW& hp, Tensor param, Tensor grad, Tensor m, Tensor v,
                     Tensor param_act) = 0;
};

// The CPU reference backend (always available where the executor is built).
std::unique_ptr<Backend> make_cpu_backend();

}  // namespace mplan::exec
