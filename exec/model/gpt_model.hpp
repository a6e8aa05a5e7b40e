// GptModel: one rank's share of the GPT (Megatron-LM's tensor and sequence parallelism), written
// once against Backend and Comm. It owns the parameters (f32 master, act-dtype copy, f32 grads)
// and the activations of ONE micro-batch, all allocated at construction: a step allocates nothing.
// Layout (s, b, h) throughout; the residual stream holds this rank's sequence shard with sequence
// parallelism (s/tp rows), the full sequence otherwise. Tensor-parallel comm is issued on the
// compute stream in program order; data-parallel buckets go through DpGradSync on the comm stream.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "exec/backend.hpp"
#include "exec/comm.hpp"
#include "exec/model/gpt_dims.hpp"
#include "exec/model/gpt_params.hpp"
#include "exec/parallel/grad_sync.hpp"

namespace mplan::exec {

inline constexpr float kLayerNormEps = 1e-5f;  // Megatron's --layernorm-epsilon default

class GptModel {
 public:
  // Allocates everything and initializes the weights from `seed` (init_param_shard).
  // `tp` is this rank's tensor-parallel group (size == dims.tp), `dp` its data-parallel group.
  GptModel(const GptDims& dims, DType act, Backend& backend, Comm& tp, Comm& dp, uint64_t seed,
           double init_method_std, int64_t bucket_elems);
  ~GptModel();
  GptModel(const GptModel&) = delete;
  GptModel& operator=(const GptModel&) = delete;

  // Forward of one micro-batch: tokens (s, b) i32 -> logits (s·b, V/tp) act.
  void forward(Tensor tokens);
  // Loss of the last forward and its backward. targets (s, b) i32. Adds the sum of the per-token
  // losses to loss_sum (1) f32; gradients are accumulated (+=) into grads() with dL/dlogit scaled
  // by grad_scale. With reduce_grads, data-parallel buckets are reduced as they become final.
  void backward(Tensor tokens, Tensor targets, float grad_scale, bool reduce_grads,
                Tensor loss_sum);
  // After the last backward of a step: waits for the data-parallel reductions and, with sequence
  // parallelism, sums the norm and row-parallel-bias gradients over the tensor-parallel group.
  void finish_grads();
  void zero_grads();

  const GptDims& dims() const { return dims_; }
  const GptParams& params() const { return params_; }
  DType act_dtype() const { return act_; }
  // Flat buffers (GptParams offsets): master (f32), act-dtype copy, gradients (f32).
  Tensor master() const { return master_; }
  Tensor weights() const { return weights_; }
  Tensor grads() const { return grads_; }
  // Views of parameter `i` in those buffers, shaped (local_rows, local_cols) or (local_rows).
  Tensor master_param(int i) const { return param_view(master_, i); }
  Tensor weight(int i) const { return param_view(weights_, i); }
  Tensor grad(int i) const { return param_view(grads_, i); }
  // Logits of the last forward, (s·b, V/tp) act (overwritten by their gradient in backward).
  Tensor logits() const { return logits_; }
  const DpGradSync& grad_sync() const { return *grad_sync_; }
  // Re-derives the act-dtype copy from the master weights (after changing master()).
  void refresh_weights();

 private:
  struct Layer {
    Tensor ln1_mean, ln1_rstd;  // (T_l) f32
    Tensor y1;                  // (s_l, b, h) act: input_layernorm output (this rank's shard)
    Tensor qkv;                 // (s, b, 3·heads/tp, d) act
    Tensor ctx;                 // (s, b, heads/tp, d) act: attention output
    Tensor lse;                 // (b, heads/tp, s) f32
    Tensor x_mid;               // (s_l, b, h) act: residual after attention
    Tensor ln2_mean, ln2_rstd;  // (T_l) f32
    Tensor y2;                  // (s_l, b, h) act: pre_mlp_layernorm output
    Tensor fc1_pre;             // (s, b, ffn/tp) act: fc1 output + bias (GeLU input)
    Tensor fc1_act;             // (s, b, ffn/tp) act: GeLU output (fc2 input)
  };

  Tensor param_view(Tensor buf, int i) const;
  Tensor alloc(DType t, std::initializer_list<int64_t> shape, const char* tag);
  void init_weights(uint64_t seed, double init_method_std);
  void layer_forward(int64_t l);
  void layer_backward(int64_t l);
  // Column-parallel input: the full sequence of `shard` (all-gather into gathered_ with SP).
  Tensor gather_sequence(Tensor shard, Tensor scratch);
  // Row-parallel output / column-parallel input-gradient: the TP sum of `partial` (s, b, h),
  // as this rank's sequence shard with SP (reduce-scatter into `shard_out`) or in place.
  Tensor reduce_partial(Tensor partial, Tensor shard_out);
  // Column-parallel linear backward: the weight grad and the partial input gradient (the caller
  // accumulates the bias grad, fused with the GeLU backward where there is one).
  void column_backward(Tensor dy, Tensor x_full, int w, Tensor dx_partial);
  // Row-parallel linear forward into partial_ (bias added once, by TP rank 0), then reduced.
  Tensor row_forward(Tensor x, int w, int b);
  void row_backward(Tensor dy_shard, Tensor x, int w, int b, Tensor dx);

  GptDims dims_;
  DType act_;
  Backend& be_;
  Comm& tp_;
  GptParams params_;
  std::vector<Tensor> owned_;

  Tensor master_, weights_, grads_;
  // Residual stream: x_[l] is the input of layer l, x_[L] the input of the final norm.
  std::vector<Tensor> x_;  // (s_l, b, h) act each
  std::vector<Layer> layers_;
  Tensor lnf_mean_, lnf_rstd_, yf_;  // final_layernorm stats (T_l) f32 and output (s_l, b, h)
  Tensor logits_;                    // (T, V/tp) act
  Tensor row_max_, xent_stats_, token_loss_;  // (T), (2, T), (T) f32
  // Scratch shared by all layers (one micro-batch, reused in order).
  Tensor gathered_;     // (s, b, h) act: sequence-parallel all-gather target
  Tensor partial_;      // (s, b, h) act: row-parallel / embedding output before the TP reduction
  Tensor reduced_;      // (s_l, b, h) act: reduce-scatter target (SP)
  Tensor d_res_;        // (s_l, b, h) act: gradient of the residual stream
  Tensor d_norm_;       // (s_l, b, h) act: gradient through a norm
  Tensor d_gathered_;   // (s, b, h) act: all-gathered output gradient (SP)
  Tensor d_ctx_;        // (s, b, heads/tp, d) act
  Tensor d_qkv_;        // (s, b, 3·heads/tp, d) act
  Tensor d_h_, d_pre_;  // (s, b, ffn/tp) act
  Tensor sp_stage_;     // (n) f32: grads summed over TP under sequence parallelism
  std::unique_ptr<DpGradSync> grad_sync_;
};

}  // namespace mplan::exec
