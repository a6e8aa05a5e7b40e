// GptParams: the parameters of the GPT in Megatron-LM's order (model.parameters(): embedding,
// position embedding, per layer input_layernorm, linear_proj, linear_qkv, pre_mlp_layernorm,
// linear_fc1, linear_fc2 (weight, bias each), final_layernorm), with how each is sharded over
// tensor-parallel ranks, initialized and decayed, and where its local shard lives in the flat
// buffers (master f32, act-dtype copy, f32 gradient, Adam m and v all share these offsets).
// Invariant: every offset is a multiple of kParamAlignElems; gaps are zero in every buffer.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "exec/model/gpt_dims.hpp"

namespace mplan::exec {

inline constexpr int64_t kParamAlignElems = 64;  // 256 bytes of f32, 128 of bf16

// Which part of the full tensor (rows × cols, row-major; 1-D tensors have cols = 1) a
// tensor-parallel rank holds.
enum class ShardKind : uint8_t {
  kReplicated,  // the whole tensor on every rank
  kRows,        // rows [r·R/tp, (r+1)·R/tp): column-parallel outputs, vocabulary rows
  kQkvRows,     // in each of the 3 row blocks (Q, K, V) of R/3 rows, its r-th 1/tp: by heads
  kCols,        // columns [r·C/tp, (r+1)·C/tp): row-parallel weights
};

enum class InitKind : uint8_t {
  kNormal,        // N(0, init_method_std)
  kScaledNormal,  // N(0, init_method_std / sqrt(2·num_layers)): output projections
  kZero,
  kOne,
};

struct ParamSpec {
  std::string name;  // Megatron's name, e.g. "decoder.layers.0.self_attention.linear_qkv.weight"
  int ndim = 2;      // 1 for biases and norms
  int64_t rows = 0;  // full size
  int64_t cols = 1;
  ShardKind shard = ShardKind::kReplicated;
  InitKind init = InitKind::kZero;
  bool weight_decay = false;    // Megatron: decay all but biases and 1-D (norm) parameters
  bool tp_duplicated = false;   // identical on every TP rank: counted once in the grad norm
  bool sp_grad_reduce = false;  // under sequence parallelism its grad is summed over TP
  int64_t local_rows = 0;       // this rank's shard
  int64_t local_cols = 1;
  int64_t offset = 0;  // of the shard in the flat buffers, elements
  int64_t local_numel() const { return local_rows * local_cols; }
};

// Indices into GptParams::specs of one transformer layer's parameters.
struct LayerParams {
  int ln1_w, ln1_b, proj_w, proj_b, qkv_w, qkv_b, ln2_w, ln2_b, fc1_w, fc1_b, fc2_w, fc2_b;
};

struct GptParams {
  std::vector<ParamSpec> specs;  // Megatron's parameter order
  int wte = 0, wpe = 0, lnf_w = 0, lnf_b = 0;
  std::vector<LayerParams> layers;
  int64_t total_elems = 0;  // length of each flat buffer
};

GptParams make_gpt_params(const GptDims& d);

// Full-tensor index (row-major) of element i of `spec`'s local shard on `d`'s tp rank.
int64_t full_index(const ParamSpec& spec, const GptDims& d, int64_t local_index);

// Writes the initial values of elements [begin, end) of `spec`'s local shard to out[0, end-begin):
// element e of the full tensor gets std·init_normal(seed, param_index, e) (or 0 / 1), whatever
// the layout.
void init_param_shard(const ParamSpec& spec, int param_index, const GptDims& d, uint64_t seed,
                      double init_method_std, int64_t begin, int64_t end, float* out);

}  // namespace mplan::exec
