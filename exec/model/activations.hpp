// Activations one micro-batch keeps from its forward to its backward (and, with zero-bubble
// schedules, to its weight-gradient pass), per model chunk, under each recomputation mode as the
// simulator costs them (sim/plan_sim/chunk_costs): every tensor of a layer (none); the same less
// the attention core's saved log-sum-exp, recomputed with the attention in backward
// (selective); only the input of each recomputed group of layers (full: uniform groups of
// recompute_num_layers, or the chunk's first recompute_num_layers layers one by one, block).
// Slots are taken from pools when a micro-batch's forward (or its receive) starts — zero-bubble's
// output gradients when its B starts — and returned when its backward (or W) ends; the pools grow
// in the first iteration, then only reuse. A pool serves every chunk of the stage whose slots
// have its layout, so a stage holds as many slots as passes are in flight at once over all its
// chunks (as a caching allocator reuses what a backward frees), not the sum of each chunk's peak.
// Layout (s, b, h) throughout; s_l = s/tp rows of the residual stream with sequence parallelism.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "exec/backend.hpp"
#include "exec/model/gpt_dims.hpp"
#include "src/parallel/parallel_config.hpp"

namespace mplan::exec {

// The parts of a layer's activations, by who needs them.
struct LayerMain {            // the backward's inputs
  Tensor x;                   // (s_l, b, h) act: the layer input (the checkpoint under full)
  Tensor ln1_mean, ln1_rstd;  // (T_l) f32 (no mean with RMSNorm)
  Tensor qkv;                 // (s, b, (heads + 2·groups)/tp, d) act: Q, K, V (RoPE applied)
  Tensor lse;                 // (b, heads/tp, s) f32 (none under selective: recomputed)
  Tensor x_mid;               // (s_l, b, h) act: residual after attention
  Tensor ln2_mean, ln2_rstd;  // (T_l) f32
  Tensor fc1_pre;             // (s, b, ffn/tp) act: fc1 output + bias (GeLU input); SwiGLU:
                              // (s, b, 2·ffn/tp), [gate | up]
};
struct LayerWeightInputs {  // inputs of the weight-gradient GEMMs (kept until W when split)
  Tensor y1;       // (s_l, b, h) act: input_layernorm output (QKV input, this rank's shard)
  Tensor ctx;      // (s, b, heads/tp, d) act: attention output (proj input)
  Tensor y2;       // (s_l, b, h) act: pre_mlp_layernorm output (fc1 input)
  Tensor fc1_act;  // (s, b, ffn/tp) act: GeLU output (fc2 input)
};
struct LayerOutputGrads {  // zero-bubble only: output gradients of the weight GEMMs, B -> W
  Tensor d_qkv;            // (s, b, 3·heads/tp, d) act
  Tensor d_proj;           // (s_l, b, h) act: gradient of the projection output (this rank's shard)
  Tensor d_fc1;            // (s, b, ffn/tp) act: gradient of fc1's output (pre-activation)
  Tensor d_fc2;            // (s_l, b, h) act: gradient of fc2's output
};
// Everything one layer's passes use, assembled from a slot, the W slot or the workspace.
struct LayerActs {
  LayerMain main;
  LayerWeightInputs win;
  LayerOutputGrads dy;
};

// The last chunk's head: final norm, output layer, loss.
struct HeadMain {
  Tensor x;                           // (s_l, b, h) act: final-norm input (the last layer's output)
  Tensor lnf_mean, lnf_rstd;          // (T_l) f32
  Tensor row_max, stats, token_loss;  // (T), (2, T), (T) f32
};
struct HeadWeightInputs {
  Tensor yf;      // (s_l, b, h) act: final-norm output
  Tensor logits;  // (T, V/tp) act: logits, then dL/dlogits (computed with the loss in forward)
};

// How a chunk stores each layer.
enum class LayerStorage : uint8_t {
  kFull,        // everything (no recompute, selective)
  kCheckpoint,  // only the input; the group starting here is recomputed in backward
  kNone,        // nothing: inside a recomputed group
};

struct ChunkShape {
  int64_t num_layers = 0;
  bool has_embedding = false, has_output = false;
  bool selective = false;             // attention core recomputed
  bool split_backward = false;        // zero-bubble: W separate from B
  std::vector<LayerStorage> storage;  // per local layer
  // Full recompute: the group of local layer i is [group_first[i], group_last[i]].
  std::vector<int32_t> group_first, group_last;
  int64_t max_group = 0;  // layers recomputed together at most (the workspace's size)
};

// The storage of each layer of a chunk of `num_layers` layers under the plan's recomputation.
ChunkShape chunk_shape(const ParallelConfig& p, int64_t num_layers, bool has_embedding,
                       bool has_output, bool split_backward);

// One micro-batch's slots.
struct MainSlot {
  std::vector<LayerMain> layers;
  std::vector<LayerWeightInputs> win;  // without split: the weight-GEMM inputs (kFull layers)
};
struct HeadSlot {  // the chunk with the output layer: its head, from the forward to the backward
  HeadMain head;
  HeadWeightInputs head_win;  // without split
};
struct WeightSlot {                    // zero-bubble: what W needs from the forward (or B) until W
  std::vector<LayerWeightInputs> win;  // every layer (recomputed ones written in B)
  HeadWeightInputs head_win;
};
struct GradSlot {  // zero-bubble: the output gradients B computes for W, from B until W
  std::vector<LayerOutputGrads> dy;
};

// Free slots of one layout.
template <class Slot>
struct SlotPool {
  std::deque<Slot> slots;  // deque: references stay valid as the pool grows
  std::vector<int> free;
};

// A stage's pools by layout (ChunkActivations names the layouts), shared by its chunks.
class SlotPools {
 public:
  template <class Slot>
  std::shared_ptr<SlotPool<Slot>> get(const std::string& layout) {
    std::shared_ptr<void>& p = pools_[layout];
    if (!p) p = std::make_shared<SlotPool<Slot>>();
    return std::static_pointer_cast<SlotPool<Slot>>(p);
  }

 private:
  std::map<std::string, std::shared_ptr<void>> pools_;  // the layout names the slot type
};

// One chunk's slots, keyed by micro-batch, taken from the stage's pools.
class ChunkActivations {
 public:
  ChunkActivations(const ChunkShape& shape, const GptDims& d, DType act, Backend& be,
                   SlotPools& pools);
  ~ChunkActivations();
  ChunkActivations(const ChunkActivations&) = delete;
  ChunkActivations& operator=(const ChunkActivations&) = delete;

  const ChunkShape& shape() const { return shape_; }
  // The slot of micro-batch `mb`, taken from its pool on first use.
  MainSlot& main(int64_t mb);
  HeadSlot& head(int64_t mb);      // has_output only
  WeightSlot& weight(int64_t mb);  // split_backward only
  GradSlot& grad(int64_t mb);      // split_backward only
  // Zero-bubble, the chunk with the embedding: its output gradient (s, b, h) act (gathered with
  // SP), from B until W.
  Tensor& embedding_grad(int64_t mb);
  bool holds_main(int64_t mb) const { return main_.of.count(mb) > 0; }
  void release_main(int64_t mb);    // with the head's
  void release_weight(int64_t mb);  // with the output gradients'
  // Slots ever allocated in this chunk's pools (their peak occupancy, over the chunks sharing
  // them).
  size_t main_slots() const { return main_.pool->slots.size(); }
  size_t weight_slots() const { return weight_.pool ? weight_.pool->slots.size() : 0; }

 private:
  template <class Slot>
  struct Taken {  // this chunk's micro-batches' slots in one pool
    std::shared_ptr<SlotPool<Slot>> pool;
    std::unordered_map<int64_t, int> of;
  };
  template <class Slot, class Make>
  Slot& take(Taken<Slot>& t, int64_t mb, Make make);
  template <class Slot>
  void give_back(Taken<Slot>& t, int64_t mb, const char* what);

  Tensor alloc(DType t, std::initializer_list<int64_t> shape);
  MainSlot new_main();
  HeadSlot new_head();
  WeightSlot new_weight();
  GradSlot new_grad();
  LayerWeightInputs new_win();

  ChunkShape shape_;
  GptDims d_;
  DType act_;
  Backend& be_;
  std::vector<Tensor> owned_;  // the tensors of the slots this chunk created
  Taken<MainSlot> main_;
  Taken<HeadSlot> head_;
  Taken<WeightSlot> weight_;
  Taken<GradSlot> grad_;
  Taken<Tensor> embedding_grad_;
};

}  // namespace mplan::exec
