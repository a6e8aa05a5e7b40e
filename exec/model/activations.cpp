// ChunkActivations: which tensors a chunk keeps per micro-batch, and the slot pools.
#include "exec/model/activations.hpp"

#include <algorithm>
#include <optional>

#include "src/common/error.hpp"
#include "src/model/recompute_group.hpp"

namespace mplan::exec {

ChunkShape chunk_shape(const ParallelConfig& p, int64_t num_layers, bool has_embedding,
                       bool has_output, bool split_backward) {
  ChunkShape c;
  c.num_layers = num_layers;
  c.has_embedding = has_embedding;
  c.has_output = has_output;
  c.selective = p.recompute == Recompute::kSelective;
  c.split_backward = split_backward;
  const size_t n = static_cast<size_t>(num_layers);
  c.storage.assign(n, LayerStorage::kFull);
  c.group_first.assign(n, -1);
  c.group_last.assign(n, -1);
  for (int64_t i = 0; i < num_layers; ++i) {
    // Full recomputation's groups (src/model/recompute_group): each keeps only its input.
    const std::optional<RecomputeGroup> g = full_recompute_group(p, num_layers, i);
    if (!g) continue;
    const size_t k = static_cast<size_t>(i);
    c.group_first[k] = static_cast<int32_t>(g->first);
    c.group_last[k] = static_cast<int32_t>(g->last);
    c.storage[k] = i == g->first ? LayerStorage::kCheckpoint : LayerStorage::kNone;
    c.max_group = std::max(c.max_group, g->size());
  }
  return c;
}

ChunkActivations::ChunkActivations(const ChunkShape& shape, const GptDims& d, DType act,
                                   Backend& be)
    : shape_(shape), d_(d), act_(act), be_(be) {}

ChunkActivations::~ChunkActivations() {
  for (Tensor& t : owned_) be_.release(t);
}

Tensor ChunkActivations::alloc(DType t, std::initializer_list<int64_t> shape) {
  owned_.push_back(be_.alloc(t, shape, "activations"));
  return owned_.back();
}

LayerWeightInputs ChunkActivations::new_win() {
  const int64_t s = d_.seq, b = d_.micro_batch, h = d_.hidden, sl = d_.seq_local();
  LayerWeightInputs w;
  w.y1 = alloc(act_, {sl, b, h});
  w.ctx = alloc(act_, {s, b, d_.heads_local(), d_.head_dim});
  w.y2 = alloc(act_, {sl, b, h});
  w.fc1_act = alloc(act_, {s, b, d_.ffn_local()});
  return w;
}

MainSlot ChunkActivations::new_main() {
  const int64_t s = d_.seq, b = d_.micro_batch, h = d_.hidden, sl = d_.seq_local();
  const int64_t T = d_.tokens(), Tl = d_.tokens_local(), hl = d_.heads_local();
  MainSlot m;
  m.layers.resize(static_cast<size_t>(shape_.num_layers));
  if (!shape_.split_backward) m.win.resize(m.layers.size());
  for (size_t i = 0; i < m.layers.size(); ++i) {
    LayerMain& l = m.layers[i];
    if (shape_.storage[i] == LayerStorage::kNone) continue;
    l.x = alloc(act_, {sl, b, h});
    if (shape_.storage[i] == LayerStorage::kCheckpoint) continue;
    if (!d_.rmsnorm) l.ln1_mean = alloc(DType::kF32, {Tl});
    l.ln1_rstd = alloc(DType::kF32, {Tl});
    l.qkv = alloc(act_, {s, b, d_.qkv_heads_local(), d_.head_dim});
    if (!shape_.selective) l.lse = alloc(DType::kF32, {b, hl, s});
    l.x_mid = alloc(act_, {sl, b, h});
    if (!d_.rmsnorm) l.ln2_mean = alloc(DType::kF32, {Tl});
    l.ln2_rstd = alloc(DType::kF32, {Tl});
    l.fc1_pre = alloc(act_, {s, b, d_.fc1_local()});
    if (!shape_.split_backward) m.win[i] = new_win();
  }
  if (shape_.has_output) {
    m.head.x = alloc(act_, {sl, b, h});
    if (!d_.rmsnorm) m.head.lnf_mean = alloc(DType::kF32, {Tl});
    m.head.lnf_rstd = alloc(DType::kF32, {Tl});
    m.head.row_max = alloc(DType::kF32, {T});
    m.head.stats = alloc(DType::kF32, {2, T});
    m.head.token_loss = alloc(DType::kF32, {T});
    if (!shape_.split_backward) {
      m.head_win.yf = alloc(act_, {sl, b, h});
      m.head_win.logits = alloc(act_, {T, d_.vocab_local()});
    }
  }
  return m;
}

WeightSlot ChunkActivations::new_weight() {
  const int64_t s = d_.seq, b = d_.micro_batch, h = d_.hidden, sl = d_.seq_local();
  WeightSlot w;
  for (int64_t i = 0; i < shape_.num_layers; ++i) {
    w.win.push_back(new_win());
    LayerOutputGrads g;
    g.d_qkv = alloc(act_, {s, b, d_.qkv_heads_local(), d_.head_dim});
    g.d_proj = alloc(act_, {sl, b, h});
    g.d_fc1 = alloc(act_, {s, b, d_.fc1_local()});
    g.d_fc2 = alloc(act_, {sl, b, h});
    w.dy.push_back(g);
  }
  if (shape_.has_output) {
    w.head_win.yf = alloc(act_, {sl, b, h});
    w.head_win.logits = alloc(act_, {d_.tokens(), d_.vocab_local()});
  }
  if (shape_.has_embedding) w.d_emb = alloc(act_, {s, b, h});
  return w;
}

MainSlot& ChunkActivations::main(int64_t mb) {
  auto it = main_of_.find(mb);
  if (it != main_of_.end()) return main_[static_cast<size_t>(it->second)];
  int idx;
  if (!free_main_.empty()) {
    idx = free_main_.back();
    free_main_.pop_back();
  } else {
    main_.push_back(new_main());
    idx = static_cast<int>(main_.size()) - 1;
  }
  main_of_[mb] = idx;
  return main_[static_cast<size_t>(idx)];
}

WeightSlot& ChunkActivations::weight(int64_t mb) {
  MPLAN_CHECK(shape_.split_backward, "weight slots exist only with a split backward");
  auto it = weight_of_.find(mb);
  if (it != weight_of_.end()) return weight_[static_cast<size_t>(it->second)];
  int idx;
  if (!free_weight_.empty()) {
    idx = free_weight_.back();
    free_weight_.pop_back();
  } else {
    weight_.push_back(new_weight());
    idx = static_cast<int>(weight_.size()) - 1;
  }
  weight_of_[mb] = idx;
  return weight_[static_cast<size_t>(idx)];
}

void ChunkActivations::release_main(int64_t mb) {
  auto it = main_of_.find(mb);
  MPLAN_CHECK(it != main_of_.end(), "micro-batch ", mb, " holds no activation slot");
  free_main_.push_back(it->second);
  main_of_.erase(it);
}

void ChunkActivations::release_weight(int64_t mb) {
  auto it = weight_of_.find(mb);
  MPLAN_CHECK(it != weight_of_.end(), "micro-batch ", mb, " holds no weight-gradient slot");
  free_weight_.push_back(it->second);
  weight_of_.erase(it);
}

}  // namespace mplan::exec
