// Tensor layout: the parameter tensors Megatron-LM's GPTModel builds, in model.parameters() order,
// with how each is sharded over tensor- and expert-parallel ranks, initialized and decayed — for
// one layer, one model chunk (virtual stage) or one pipeline rank. The one owner of "what a rank
// holds": the executor allocates exactly these tensors, the simulator and the memory model count
// them (rank_params, the layer costs). Invariant: local sizes are exact shards (callers pass a
// plan validate() accepts); no strings are built unless a name is asked for.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "src/model/model_spec.hpp"
#include "src/parallel/parallel_config.hpp"

namespace mplan {

// Which part of the full tensor (rows x cols, row-major; 1-D tensors have cols = 1) a rank of a
// tensor-parallel group of size `ways` holds.
enum class ShardKind : uint8_t {
  kReplicated,  // the whole tensor on every rank
  kRows,        // rows [r·R/n, (r+1)·R/n): column-parallel outputs, vocabulary rows
  kBlockRows,   // in each row block (Q, K, V of a QKV weight; gate, up of SwiGLU's fc1), its
                // r-th 1/n: QKV by heads (query groups for K and V), fc1 by columns of each half
  kCols,        // columns [r·C/n, (r+1)·C/n): row-parallel weights
};

enum class InitKind : uint8_t {
  kNormal,        // N(0, init_method_std)
  kScaledNormal,  // N(0, init_method_std / sqrt(2·num_layers)): output projections
  kZero,
  kOne,
};

// Where a tensor sits in the model (for names and for the executor's bookkeeping).
enum class TensorRole : uint8_t {
  kWordEmbedding,      // embedding.word_embeddings.weight (first stage)
  kPositionEmbedding,  // embedding.position_embeddings.weight (first stage, learned positions)
  kInputNormWeight,
  kInputNormBias,
  kProjWeight,
  kProjBias,
  kQkvWeight,
  kQkvBias,
  kMlpNormWeight,
  kMlpNormBias,
  kFc1Weight,
  kFc1Bias,
  kFc2Weight,
  kFc2Bias,
  kRouterWeight,
  kRouterBias,
  kSharedFc1Weight,
  kSharedFc1Bias,
  kSharedFc2Weight,
  kSharedFc2Bias,
  kExpertFc1Weight,
  kExpertFc1Bias,
  kExpertFc2Weight,
  kExpertFc2Bias,
  kFinalNormWeight,
  kFinalNormBias,
  kOutputWeight,  // output_layer.weight: untied, or the last stage's copy of a tied embedding
  // Multi-latent attention (MLASelfAttention), in place of linear_qkv: the down projections are
  // duplicated on every tensor-parallel rank, the up projections column-parallel.
  kQDownWeight,  // linear_q_down_proj (q_lora_rank > 0): h -> q_lora_rank
  kQDownBias,
  kQNormWeight,  // q_layernorm over the query latent
  kQUpWeight,    // linear_q_up_proj: q_lora_rank -> heads x (qk_head_dim + qk_pos_emb_head_dim)
  kQUpBias,
  kQProjWeight,  // linear_q_proj (q_lora_rank 0): h -> heads x (qk_head_dim + qk_pos_emb_head_dim)
  kQProjBias,
  kKvDownWeight,  // linear_kv_down_proj: h -> kv_lora_rank + qk_pos_emb_head_dim
  kKvDownBias,
  kKvNormWeight,  // kv_layernorm over the key/value latent
  kKvUpWeight,    // linear_kv_up_proj: kv_lora_rank -> heads x (qk_head_dim + v_head_dim)
  kKvUpBias,
};

struct ParamTensor {
  TensorRole role = TensorRole::kWordEmbedding;
  int64_t layer = -1;  // global layer index for layer tensors, -1 otherwise
  int ndim = 2;        // 1 for biases and norms
  int64_t rows = 0;    // full size
  int64_t cols = 1;
  ShardKind shard = ShardKind::kReplicated;
  int64_t shard_ways = 1;  // tp, or etp for routed experts
  InitKind init = InitKind::kZero;
  bool weight_decay = false;    // Megatron: all but biases and 1-D (norm) parameters
  bool tp_duplicated = false;   // identical on every tensor-parallel rank (counted once in norms)
  bool sp_grad_reduce = false;  // under sequence parallelism its gradient is summed over tp
  bool expert = false;          // routed-expert parameter (reduced over the expert-dp group)
  // A tied embedding split over pipeline stages (pp > 1): the first stage's word embedding and
  // the last stage's copy (Megatron's shared_embedding), kept equal by an all-reduce of their
  // gradients; each sits in a gradient bucket of its own with the distributed optimizer.
  bool shared_embedding = false;
  // The last stage's copy (Megatron's `shared`): left out of the gradient norm.
  bool shared_copy = false;
  int64_t copies = 1;  // routed experts: this many local experts of this shape
  // kBlockRows: the full rows of each block, in order (unused blocks 0); they add up to rows.
  std::array<int64_t, 3> block_rows{0, 0, 0};
  int64_t local_rows = 0, local_cols = 1;  // one copy's shard on a rank
  // Index of the tensor in the whole model's parameter order (pp = 1); the shared copy takes the
  // word embedding's. Seeds the initialization, so every layout initializes the same model.
  int64_t model_index = 0;

  int64_t numel() const { return rows * cols; }
  int64_t local_numel() const { return copies * local_rows * local_cols; }
};

// Megatron's parameter name, e.g. "decoder.layers.3.self_attention.linear_qkv.weight".
std::string tensor_name(const ParamTensor& t);

// The tensors of layer `layer` on one rank of `p` (tp, ep, etp shards), in Megatron's order:
// input_layernorm, self_attention.linear_proj, self_attention.linear_qkv, pre_mlp_layernorm,
// then mlp.linear_fc1, mlp.linear_fc2 (dense) or mlp.router, shared experts, experts (MoE).
std::vector<ParamTensor> layer_tensors(const ModelSpec& m, const ParallelConfig& p, int64_t layer);

// The tensors of model chunk `chunk` (virtual stage chunk·pp + pp_rank) on one rank: the
// embeddings on the first virtual stage, its layers, then the final norm and the output layer on
// the last (the output layer only when untied, or tied with pp > 1: the shared copy).
std::vector<ParamTensor> chunk_tensors(const ModelSpec& m, const ParallelConfig& p, int64_t pp_rank,
                                       int64_t chunk);

// The first virtual stage's embeddings (word; position with learned positions) and the last
// virtual stage's final norm and output layer (untied, or the shared copy when tied with pp > 1).
std::vector<ParamTensor> embedding_tensors(const ModelSpec& m, const ParallelConfig& p);
std::vector<ParamTensor> output_tensors(const ModelSpec& m, const ParallelConfig& p);

// Parameters of one layer of the dense or MoE kind on one rank: non-expert and routed-expert.
struct LayerShard {
  int64_t dense = 0;
  int64_t expert = 0;
  // Of these, the weights of the GEMMs (linear_qkv, linear_proj, fc1, fc2 of the MLP, the shared
  // and the routed experts): what fp8 / fp4 quantize. Not norms, biases or the router.
  int64_t gemm_dense = 0;
  int64_t gemm_expert = 0;
};
// True for the weight of a GEMM that Transformer Engine runs in fp8 / fp4 (see LayerShard).
bool is_gemm_weight(TensorRole r);
LayerShard layer_shard(const ModelSpec& m, const ParallelConfig& p, bool moe);

}  // namespace mplan
