// Parameter counts and training FLOPs of a model, counted the way Megatron-LM builds it (GPTModel
// with the local or Transformer Engine layer spec: every weight, bias and norm parameter), per
// layer, per pipeline stage and per rank shard; and the FLOP formulas that Megatron and the
// papers report. Invariant: counts are exact integers; a plan passed in has passed validate().
#pragma once

#include <cstdint>

#include "src/model/model_spec.hpp"
#include "src/parallel/parallel_config.hpp"

namespace mplan {

// Parameters of one transformer layer, unsharded.
struct LayerParams {
  int64_t norms = 0;           // input_layernorm + pre_mlp_layernorm (weight, + bias: LayerNorm)
  int64_t attention = 0;       // linear_qkv + linear_proj, weights and biases
  int64_t mlp = 0;             // dense MLP linear_fc1 + linear_fc2 (0 in an MoE layer)
  int64_t router = 0;          // MoE router weight (+ bias with add_bias_linear); kept in fp32
  int64_t shared_experts = 0;  // MoE shared-expert MLP (sharded over tp like the dense MLP)
  int64_t experts = 0;         // all routed experts (sharded over ep and etp)
  int64_t active_experts = 0;  // the topk routed experts one token passes through
  int64_t total() const { return norms + attention + mlp + router + shared_experts + experts; }
  int64_t non_expert() const { return total() - experts; }
  int64_t active() const { return non_expert() + active_experts; }
  bool operator==(const LayerParams&) const = default;
};

// Layer `layer` (0-based; MoE or dense by the model's layer_freq pattern).
LayerParams layer_params(const ModelSpec& m, int64_t layer);

// The whole model, unsharded. The word embedding and output layer use the vocabulary padded for
// tensor parallel size `tp` (Megatron pads to a multiple of make_vocab_size_divisible_by x tp).
struct ParamCounts {
  int64_t word_embedding = 0;      // padded_vocab x hidden
  int64_t position_embedding = 0;  // max_position_embeddings x hidden (learned positions), else 0
  int64_t transformer_layers = 0;  // all layers
  int64_t final_norm = 0;          // final_layernorm
  int64_t output_layer = 0;        // untied output layer (no bias); 0 when tied
  int64_t expert = 0;              // routed-expert parameters (within transformer_layers)
  int64_t active_expert = 0;       // topk routed experts per layer, summed over MoE layers
  int64_t mtp = 0;  // multi-token prediction blocks (expert parts within `expert` too)
  int64_t total() const {
    return word_embedding + position_embedding + transformer_layers + final_norm + output_layer +
           mtp;
  }
  int64_t non_expert() const { return total() - expert; }
  // Parameters one token passes through (topk experts instead of all).
  int64_t active() const { return total() - expert + active_expert; }
  bool operator==(const ParamCounts&) const = default;
};

ParamCounts count_params(const ModelSpec& m, int64_t tp = 1);

// One multi-token-prediction block (Megatron-LM's MultiTokenPredictionLayer): the enorm and hnorm
// of the embedding and the hidden state, eh_proj (2h -> h, column-parallel, no bias), a
// transformer layer of the last layer's kind (MoE when the last layer is), its final norm. The
// word embedding and the output layer are the model's (shared).
struct MtpParams {
  int64_t norms = 0;    // enorm, hnorm, final_layernorm
  int64_t eh_proj = 0;  // 2h x h
  LayerParams layer;
  int64_t total() const { return norms + eh_proj + layer.total(); }
};
MtpParams mtp_block_params(const ModelSpec& m);

// What one rank of pipeline stage `pp_rank` holds: its layers (all virtual stages), the
// embeddings on the first stage, the final norm and output layer on the last. With tied
// embeddings and pp > 1 the last stage holds its own copy of the output weight (Megatron's
// shared embedding, kept equal by the embedding group), so summing stages can exceed total().
struct StageParams {
  int64_t num_layers = 0;  // transformer layers on the stage
  int64_t embedding = 0;   // word + position embedding (first stage), output layer (last)
  int64_t non_expert = 0;  // everything but routed experts, including `embedding`
  int64_t expert = 0;      // routed experts
  int64_t total() const { return non_expert + expert; }
  bool operator==(const StageParams&) const = default;
};

// Unsharded parameters of pipeline stage `pp_rank` (vocabulary padded for p.tp).
StageParams stage_params(const ModelSpec& m, const ParallelConfig& p, int64_t pp_rank);

// One rank's shard of stage `pp_rank`: column- and row-parallel weights, column-parallel biases
// and the vocabulary split over tp; norms, row-parallel biases, the router and position
// embeddings whole on every tp rank; routed experts: ep splits the experts, etp each expert's
// fc1/fc2 (fc2 bias whole). Megatron prints this number per (tp, pp) rank at start-up.
StageParams rank_params(const ModelSpec& m, const ParallelConfig& p, int64_t pp_rank);

// ---- FLOPs of one iteration over `batch_size` sequences of model.seq_length tokens ----------

// Megatron-LM's num_floating_point_operations (megatron/training/training.py) for a dense or
// MoE GPT with GQA and SwiGLU: 3 x 2 x (GEMM multiply-adds) per token for forward + backward, a
// causal core attention (half the s^2 scores), logits over the vocabulary padded for `tp`;
// multi-latent attention's LoRA projections and core, multi-token prediction's layers, norms,
// eh_proj and extra logits, a per-layer MoE pattern. Sliding windows are not counted (Megatron
// counts every layer's full causal attention). Recomputation is not counted.
double megatron_flops(const ModelSpec& m, int64_t batch_size, int64_t tp = 1);

// Narayanan et al., SC'21, eq. (3), with activation recomputation (4 passes over each layer):
// 96 B s l h^2 (1 + s/(6h) + V/(16 l h)). The published calibration runs use this.
double sc21_eq3_flops(const ModelSpec& m, int64_t batch_size);

// Korthikanti et al., MLSys'23, eq. (7), model FLOPs (no recomputation):
// 72 B s l h^2 (1 + s/(6h) + V/(12 l h)).
double korthikanti_model_flops(const ModelSpec& m, int64_t batch_size);

// Korthikanti et al., MLSys'23, eq. (8), hardware FLOPs with selective recomputation (the
// attention scores computed again): 72 B s l h^2 (1 + s/(3h) + V/(12 l h)).
double korthikanti_selective_hardware_flops(const ModelSpec& m, int64_t batch_size);

}  // namespace mplan
