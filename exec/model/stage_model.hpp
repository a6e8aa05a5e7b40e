// StageModel: one rank's share of the GPT — the model chunks of its pipeline stage (layer ranges
// from src/model/layer_range, as the simulator splits them; the embedding on the first virtual
// stage, the final norm, output layer and loss on the last), sharded over its tensor-parallel
// group — with the act-dtype weights and f32 gradients of all its chunks in two flat buffers
// (exec/model/param_layout). It runs the passes a pipeline schedule names: forward, backward
// (or, for zero-bubble schedules, the input-gradient pass B and the weight-gradient pass W) of
// one micro-batch on one chunk, keeping each micro-batch's activations from its forward to its
// backward under the plan's recomputation (exec/model/activations). Stage-to-stage tensors are
// (s_l, b, h) act buffers: the runner receives into forward_input() / backward_grad_input() and
// sends what take_forward_output() / take_backward_output() return, then gives them back.
// Invariant: weights are initialized from the seed at full size, then sharded, so every layout
// trains the same model; after the first iteration a step allocates nothing.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "exec/backend.hpp"
#include "exec/comm.hpp"
#include "exec/model/activations.hpp"
#include "exec/model/gpt_blocks.hpp"
#include "exec/model/gpt_dims.hpp"
#include "exec/model/param_layout.hpp"
#include "exec/tracer.hpp"
#include "src/model/model_spec.hpp"
#include "src/parallel/parallel_config.hpp"

namespace mplan::exec {

class GradSync;

struct StageSpec {
  ModelSpec model;
  ParallelConfig parallel;
  int64_t pp_rank = 0;
  int64_t tp_rank = 0;
  DType act = DType::kBF16;
  bool split_backward = false;  // the schedule separates B and W (zero-bubble)
  uint64_t seed = 1234;
  double init_method_std = 0.02;
  int64_t bucket_elems = 0;  // > 0: every chunk's bucket size (tests); < 0: one bucket per chunk
};

class StageModel {
 public:
  // Allocates the weights and gradients and initializes the weights (act-dtype copy) from the
  // seed. `tp` is this rank's tensor-parallel group; `tracer` (may be null) records the
  // tensor-parallel collectives.
  StageModel(const StageSpec& spec, Backend& backend, Comm& tp, Tracer* tracer);
  ~StageModel();
  StageModel(const StageModel&) = delete;
  StageModel& operator=(const StageModel&) = delete;

  int num_chunks() const { return static_cast<int>(params_.chunks.size()); }
  const GptDims& dims() const { return dims_; }
  const ParamLayout& params() const { return params_; }
  const ChunkParams& chunk(int c) const { return params_.chunks.at(static_cast<size_t>(c)); }
  DType act_dtype() const { return act_; }
  Tensor weights() const { return weights_; }
  Tensor grads() const { return grads_; }
  Tensor weight(int i) const { return blocks_->weight(i); }
  Tensor grad(int i) const { return blocks_->grad(i); }
  // The initial f32 values of elements [begin, end) of parameter `spec` (the optimizer's master).
  void init_values(const ParamSpec& spec, int64_t begin, int64_t end, float* out) const;
  // An iteration's gradients: begin_grads() starts one (every gradient counts as zero, the
  // buffer is not filled: each gradient's first write overwrites it, see GptBlocks::begin_grads);
  // settle_grads() after its last backward zeroes those no one wrote. Read grads() only after it.
  void begin_grads();
  void settle_grads();

  // Evaluation (Megatron's forward_only): forward() computes the loss without writing dL/dlogits
  // and gives the micro-batch's activation slots back as soon as its F ends; no gradient buffer
  // is touched. Run a forward-only schedule (src/schedule) in this mode.
  void set_forward_only(bool on) { forward_only_ = on; }
  bool forward_only() const { return forward_only_; }

  // ---- passes ----
  // Where F(c, mb)'s input is received (chunks without the embedding).
  Tensor forward_input(int c, int64_t mb);
  // F(c, mb): tokens (s, b) i32 feed the embedding (first chunk); targets (s, b) i32 the loss
  // (last chunk), whose per-token sum is added to loss_sum (1) f32 and whose gradient is scaled
  // by grad_scale. `params` (may be null) gates each layer on its parameters' all-gather.
  void forward(int c, int64_t mb, Tensor tokens, Tensor targets, float grad_scale, Tensor loss_sum,
               GradSync* params);
  // The output of F(c, mb) to send (chunks without the head); give it back with release().
  Tensor take_forward_output(int c, int64_t mb);
  // Where B(c, mb)'s output gradient is received (chunks without the head).
  Tensor backward_grad_input(int c, int64_t mb);
  // B(c, mb): the whole backward, or only input gradients when split_backward. `sync` (may be
  // null) is told which parameter gradients became final (the step's last pass of the chunk).
  void backward(int c, int64_t mb, Tensor tokens, GradSync* sync);
  // The input gradient of B(c, mb) to send (chunks without the embedding); give it back.
  Tensor take_backward_output(int c, int64_t mb);
  // W(c, mb) (split_backward): the weight gradients.
  void weight_grad(int c, int64_t mb, Tensor tokens, GradSync* sync);
  // A stage-to-stage buffer is free again (its send was issued).
  void release(Tensor t);

  // The head's final-norm output and logits buffer of micro-batch mb (last chunk, between its
  // forward and backward; checks and tools).
  HeadWeightInputs head_inputs(int c, int64_t mb);
  // Activation slots each chunk's pool holds (its peak number of micro-batches in flight).
  std::vector<size_t> activation_slots() const;

 private:
  Tensor alloc(DType t, std::initializer_list<int64_t> shape, const char* tag);
  void init_weights(uint64_t seed, double init_method_std);
  Tensor acquire_buffer();
  // The activations of local layer i of chunk c for a pass: its slot, zero-bubble's W slot and
  // output-gradient slot (B only), whether it is a recomputation.
  LayerRef layer_ref(int c, int64_t i, MainSlot& s, WeightSlot* w, GradSlot* g,
                     bool recomputing) const;
  void wait_params(const LayerParams& lp, GradSync* params);

  StageSpec spec_;
  GptDims dims_;
  DType act_;
  Backend& be_;
  Comm& tp_;
  ParamLayout params_;
  std::vector<Tensor> owned_;
  Tensor weights_, grads_;
  Workspace ws_;
  std::unique_ptr<GptBlocks> blocks_;
  SlotPools pools_;  // the chunks' slots, shared by chunks of one layout
  std::vector<std::unique_ptr<ChunkActivations>> acts_;
  std::vector<Tensor> free_buffers_;
  std::map<std::pair<int, int64_t>, Tensor> fwd_out_, bwd_in_, bwd_out_;
  uint64_t seed_ = 0;
  double init_std_ = 0;
  bool forward_only_ = false;
};

}  // namespace mplan::exec
