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

namespace {

// The layouts, each named by everything its slot's tensors depend on besides the stage's dims.
std::string storage_text(const ChunkShape& s) {
  std::string out;
  for (LayerStorage k : s.storage) out.push_back(static_cast<char>('0' + static_cast<int>(k)));
  return out;
}

}  // namespace

ChunkActivations::ChunkActivations(const ChunkShape& shape, const GptDims& d, DType act,
                                   Backend& be, SlotPools& pools)
    : shape_(shape), d_(d), act_(act), be_(be) {
  const std::string layers =
      cat(storage_text(shape), " selective ", shape.selective, " split ", shape.split_backward);
  main_.pool = pools.get<MainSlot>(cat("main ", layers));
  if (shape.has_output) head_.pool = pools.get<HeadSlot>(cat("head split ", shape.split_backward));
  if (shape.split_backward) {
    weight_.pool =
        pools.get<WeightSlot>(cat("weight ", shape.num_layers, " head ", shape.has_output));
    grad_.pool = pools.get<GradSlot>(cat("grad ", shape.num_layers));
    if (shape.has_embedding) embedding_grad_.pool = pools.get<Tensor>("embedding grad");
  }
}

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
  const int64_t Tl = d_.tokens_local(), hl = d_.heads_local();
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
  return m;
}

HeadSlot ChunkActivations::new_head() {
  const int64_t b = d_.micro_batch, h = d_.hidden, sl = d_.seq_local();
  const int64_t T = d_.tokens(), Tl = d_.tokens_local();
  HeadSlot m;
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
  return m;
}

WeightSlot ChunkActivations::new_weight() {
  const int64_t b = d_.micro_batch, h = d_.hidden, sl = d_.seq_local();
  WeightSlot w;
  for (int64_t i = 0; i < shape_.num_layers; ++i) w.win.push_back(new_win());
  if (shape_.has_output) {
    w.head_win.yf = alloc(act_, {sl, b, h});
    w.head_win.logits = alloc(act_, {d_.tokens(), d_.vocab_local()});
  }
  return w;
}

GradSlot ChunkActivations::new_grad() {
  const int64_t s = d_.seq, b = d_.micro_batch, h = d_.hidden, sl = d_.seq_local();
  GradSlot g;
  for (int64_t i = 0; i < shape_.num_layers; ++i) {
    LayerOutputGrads dy;
    dy.d_qkv = alloc(act_, {s, b, d_.qkv_heads_local(), d_.head_dim});
    dy.d_proj = alloc(act_, {sl, b, h});
    dy.d_fc1 = alloc(act_, {s, b, d_.fc1_local()});
    dy.d_fc2 = alloc(act_, {sl, b, h});
    g.dy.push_back(dy);
  }
  return g;
}

template <class Slot, class Make>
Slot& ChunkActivations::take(Taken<Slot>& t, int64_t mb, Make make) {
  auto it = t.of.find(mb);
  if (it != t.of.end()) return t.pool->slots[static_cast<size_t>(it->second)];
  int idx;
  if (!t.pool->free.empty()) {
    idx = t.pool->free.back();
    t.pool->free.pop_back();
  } else {
    t.pool->slots.push_back(make());
    idx = static_cast<int>(t.pool->slots.size()) - 1;
  }
  t.of[mb] = idx;
  return t.pool->slots[static_cast<size_t>(idx)];
}

template <class Slot>
void ChunkActivations::give_back(Taken<Slot>& t, int64_t mb, const char* what) {
  auto it = t.of.find(mb);
  MPLAN_CHECK(it != t.of.end(), "micro-batch ", mb, " holds no ", what, " slot");
  t.pool->free.push_back(it->second);
  t.of.erase(it);
}

MainSlot& ChunkActivations::main(int64_t mb) {
  return take(main_, mb, [&] { return new_main(); });
}

HeadSlot& ChunkActivations::head(int64_t mb) {
  MPLAN_CHECK(shape_.has_output, "head slots exist only on the chunk with the output layer");
  return take(head_, mb, [&] { return new_head(); });
}

WeightSlot& ChunkActivations::weight(int64_t mb) {
  MPLAN_CHECK(shape_.split_backward, "weight slots exist only with a split backward");
  return take(weight_, mb, [&] { return new_weight(); });
}

GradSlot& ChunkActivations::grad(int64_t mb) {
  MPLAN_CHECK(shape_.split_backward, "output-gradient slots exist only with a split backward");
  return take(grad_, mb, [&] { return new_grad(); });
}

Tensor& ChunkActivations::embedding_grad(int64_t mb) {
  MPLAN_CHECK(shape_.split_backward && shape_.has_embedding,
              "an embedding gradient slot exists only on the embedding's chunk with a split "
              "backward");
  return take(embedding_grad_, mb, [&] {
    return alloc(act_, {d_.seq, d_.micro_batch, d_.hidden});
  });
}

void ChunkActivations::release_main(int64_t mb) {
  give_back(main_, mb, "activation");
  if (shape_.has_output && head_.of.count(mb) > 0) give_back(head_, mb, "head");
}

void ChunkActivations::release_weight(int64_t mb) {
  give_back(weight_, mb, "weight-gradient");
  if (grad_.of.count(mb) > 0) give_back(grad_, mb, "output-gradient");
  if (embedding_grad_.of.count(mb) > 0) give_back(embedding_grad_, mb, "embedding-gradient");
}

}  // namespace mplan::exec
