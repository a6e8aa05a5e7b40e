// ParamLayout: where one rank's parameters live. The tensors come from src/model/tensor_layout
// (the same list the simulator counts); each model chunk (virtual stage) has its own region of
// the rank's flat buffers (act-dtype weights, f32 gradients), laid out as Megatron's
// _ParamAndGradBuffer does: parameters in reverse order, each start aligned to kParamAlignElems,
// cut into gradient buckets by src/parallel/grad_buckets (padded for the distributed optimizer).
// Invariant: every offset is a multiple of kParamAlignElems; gaps are zero in every buffer; the
// buckets of all chunks tile [0, total_elems) in order.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "exec/model/gpt_dims.hpp"
#include "src/model/tensor_layout.hpp"
#include "src/parallel/parallel_config.hpp"

namespace mplan::exec {

inline constexpr int64_t kParamAlignElems = 64;  // 256 bytes of f32, 128 of bf16

struct ParamSpec {
  std::string name;  // Megatron's name, e.g. "decoder.layers.0.self_attention.linear_qkv.weight"
  TensorRole role = TensorRole::kWordEmbedding;
  int64_t layer = -1;  // global layer index, -1 outside layers
  int chunk = 0;       // model chunk on this rank
  int ndim = 2;        // 1 for biases and norms
  int64_t rows = 0;    // full size
  int64_t cols = 1;
  ShardKind shard = ShardKind::kReplicated;
  InitKind init = InitKind::kZero;
  bool weight_decay = false;      // Megatron: decay all but biases and 1-D (norm) parameters
  bool tp_duplicated = false;     // identical on every TP rank: counted once in the grad norm
  bool sp_grad_reduce = false;    // under sequence parallelism its grad is summed over TP
  bool shared_embedding = false;  // a tied embedding split over stages (own bucket, all-reduced)
  bool shared_copy = false;       // the last stage's copy of it (not in the gradient norm)
  int64_t model_index = 0;        // position in the whole model's parameter order (init seed)
  std::array<int64_t, 3> block_rows{0, 0, 0};  // kBlockRows: full rows of each block
  int64_t local_rows = 0;                      // this rank's shard
  int64_t local_cols = 1;
  int64_t offset = 0;  // of the shard in the flat buffers, elements
  int64_t local_numel() const { return local_rows * local_cols; }
};

// Indices into ParamLayout::specs of one transformer layer's parameters.
struct LayerParams {
  int ln1_w = -1, ln1_b = -1, proj_w = -1, proj_b = -1, qkv_w = -1, qkv_b = -1;
  int ln2_w = -1, ln2_b = -1, fc1_w = -1, fc1_b = -1, fc2_w = -1, fc2_b = -1;
};

// A contiguous range of one chunk's gradient buffer reduced as one data-parallel collective.
struct GradBucket {
  int chunk = 0;
  int64_t offset = 0;       // elements of the flat buffers [offset, offset + numel)
  int64_t numel = 0;        // a multiple of dp with the distributed optimizer
  std::vector<int> params;  // indices into ParamLayout::specs, in backward order
};

struct ChunkParams {
  int64_t first_layer = 0, num_layers = 0;  // global layer range (src/model/layer_range)
  bool has_embedding = false;               // first virtual stage: word (+ position) embedding
  bool has_output = false;                  // last virtual stage: final norm, output, loss
  int wte = -1, wpe = -1, lnf_w = -1, lnf_b = -1;
  int output = -1;  // the output weight: wte of this chunk when tied and pp = 1, else its own
  std::vector<LayerParams> layers;
  std::vector<int> params;               // this chunk's parameters in Megatron's order
  int64_t begin = 0, end = 0;            // the chunk's region of the flat buffers
  int bucket_begin = 0, bucket_end = 0;  // into ParamLayout::buckets (completion order)
};

struct ParamLayout {
  std::vector<ParamSpec> specs;  // chunk 0's parameters first, Megatron's order within a chunk
  std::vector<ChunkParams> chunks;
  std::vector<GradBucket> buckets;
  int64_t total_elems = 0;  // length of each flat buffer
};

// The layout of pipeline rank `pp_rank` (the same on every tensor- and data-parallel rank of the
// stage). Bucket sizes follow src/parallel/grad_buckets for `p`; bucket_elems_override > 0
// replaces them on every chunk (tests), < 0 keeps one bucket per chunk.
ParamLayout make_param_layout(const ModelSpec& m, const ParallelConfig& p, int64_t pp_rank,
                              int64_t bucket_elems_override = 0);

// Full-tensor index (row-major) of element i of `spec`'s local shard on `d`'s tp rank.
int64_t full_index(const ParamSpec& spec, const GptDims& d, int64_t local_index);

// Writes the initial values of elements [begin, end) of `spec`'s local shard to out[0, end-begin):
// element e of the full tensor gets std·init_normal(seed, model_index, e) (or 0 / 1), whatever
// the layout.
void init_param_shard(const ParamSpec& spec, const GptDims& d, uint64_t seed,
                      double init_method_std, int64_t begin, int64_t end, float* out);

}  // namespace mplan::exec
