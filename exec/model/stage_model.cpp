// StageModel: allocation and initialization of a rank's chunks, and the F / B / W passes over
// GptBlocks with the activation slots of exec/model/activations.
#include "exec/model/stage_model.hpp"

#include <algorithm>
#include <thread>

#include "exec/cpu/bf16.hpp"
#include "exec/parallel/grad_sync.hpp"
#include "src/common/error.hpp"

namespace mplan::exec {

StageModel::StageModel(const StageSpec& spec, Backend& backend, Comm& tp, Tracer* tracer)
    : spec_(spec),
      dims_(gpt_dims(spec.model, spec.parallel.micro_batch_size, spec.parallel.tp, spec.tp_rank,
                     spec.parallel.sequence_parallel)),
      act_(spec.act),
      be_(backend),
      tp_(tp),
      params_(make_param_layout(spec.model, spec.parallel, spec.pp_rank, spec.bucket_elems)),
      seed_(spec.seed),
      init_std_(spec.init_method_std) {
  MPLAN_CHECK(act_ == DType::kF32 || act_ == DType::kBF16, "activations must be f32 or bf16");
  MPLAN_CHECK(tp.size() == dims_.tp && tp.rank() == dims_.tp_rank, "tp group (rank ", tp.rank(),
              " of ", tp.size(), ") does not match the dims (", dims_.tp_rank, " of ", dims_.tp,
              ")");
  const GptDims& d = dims_;
  const int64_t s = d.seq, b = d.micro_batch, h = d.hidden, sl = d.seq_local();
  const int64_t hl = d.heads_local(), hd = d.head_dim, fl = d.ffn_local();

  weights_ = alloc(act_, {params_.total_elems}, "weights");
  grads_ = alloc(DType::kF32, {params_.total_elems}, "grads");
  be_.fill(grads_, 0.0f);

  // Workspace shared by every pass.
  if (d.sp()) {
    ws_.gathered = alloc(act_, {s, b, h}, "workspace");
    ws_.reduced = alloc(act_, {sl, b, h}, "workspace");
    ws_.d_gathered = alloc(act_, {s, b, h}, "workspace");
  }
  ws_.partial = alloc(act_, {s, b, h}, "workspace");
  ws_.d_norm = alloc(act_, {sl, b, h}, "workspace");
  ws_.d_ctx = alloc(act_, {s, b, hl, hd}, "workspace");
  ws_.d_qkv = alloc(act_, {s, b, d.qkv_heads_local(), hd}, "workspace");
  if (d.gated) ws_.d_h = alloc(act_, {s, b, fl}, "workspace");  // GeLU's: fc2's dgrad epilogue
  ws_.d_pre = alloc(act_, {s, b, d.fc1_local()}, "workspace");
  const ParallelConfig& p = spec.parallel;
  const bool selective = p.recompute == Recompute::kSelective;
  if (selective) ws_.att_ctx = alloc(act_, {s, b, hl, hd}, "workspace");
  ws_.att_lse = alloc(DType::kF32, {b, hl, s}, "workspace");

  int64_t max_group = 0;
  for (const ChunkParams& cp : params_.chunks) {
    MPLAN_CHECK(cp.num_layers >= 1, "a model chunk without layers");
    ChunkShape shape =
        chunk_shape(p, cp.num_layers, cp.has_embedding, cp.has_output, spec.split_backward);
    max_group = std::max(max_group, shape.max_group);
    acts_.push_back(std::make_unique<ChunkActivations>(shape, d, act_, be_, pools_));
  }
  // Full recompute: one group of layers rebuilt at a time (its activations, as a kept layer's).
  for (int64_t k = 0; k < max_group; ++k) {
    LayerMain m;
    m.x = alloc(act_, {sl, b, h}, "recompute");
    if (!d.rmsnorm) m.ln1_mean = alloc(DType::kF32, {d.tokens_local()}, "recompute");
    m.ln1_rstd = alloc(DType::kF32, {d.tokens_local()}, "recompute");
    m.qkv = alloc(act_, {s, b, d.qkv_heads_local(), hd}, "recompute");
    m.lse = alloc(DType::kF32, {b, hl, s}, "recompute");
    m.x_mid = alloc(act_, {sl, b, h}, "recompute");
    if (!d.rmsnorm) m.ln2_mean = alloc(DType::kF32, {d.tokens_local()}, "recompute");
    m.ln2_rstd = alloc(DType::kF32, {d.tokens_local()}, "recompute");
    m.fc1_pre = alloc(act_, {s, b, d.fc1_local()}, "recompute");
    ws_.rc_main.push_back(m);
    LayerWeightInputs w;
    w.y1 = alloc(act_, {sl, b, h}, "recompute");
    w.ctx = alloc(act_, {s, b, hl, hd}, "recompute");
    w.y2 = alloc(act_, {sl, b, h}, "recompute");
    w.fc1_act = alloc(act_, {s, b, fl}, "recompute");
    ws_.rc_win.push_back(w);
  }
  if (max_group > 0) ws_.rc_out = alloc(act_, {sl, b, h}, "recompute");

  blocks_ = std::make_unique<GptBlocks>(dims_, params_, weights_, grads_, be_, tp_, ws_, tracer);
  init_weights(spec.seed, spec.init_method_std);
}

StageModel::~StageModel() {
  acts_.clear();
  for (Tensor& t : owned_) be_.release(t);
  for (Tensor& t : free_buffers_) be_.release(t);
  for (auto* m : {&fwd_out_, &bwd_in_, &bwd_out_})
    for (auto& [key, t] : *m) be_.release(t);
}

Tensor StageModel::alloc(DType t, std::initializer_list<int64_t> shape, const char* tag) {
  owned_.push_back(be_.alloc(t, shape, tag));
  return owned_.back();
}

void StageModel::init_values(const ParamSpec& p, int64_t begin, int64_t end, float* out) const {
  const int64_t n = end - begin;
  const unsigned hw = std::max(1u, std::min(16u, std::thread::hardware_concurrency()));
  const int64_t parts = n >= (int64_t{1} << 20) ? hw : 1;
  if (parts == 1) return init_param_shard(p, dims_, seed_, init_std_, begin, end, out);
  std::vector<std::thread> pool;
  for (int64_t k = 0; k < parts; ++k) {
    const int64_t lo = begin + n * k / parts, hi = begin + n * (k + 1) / parts;
    pool.emplace_back(
        [&, lo, hi] { init_param_shard(p, dims_, seed_, init_std_, lo, hi, out + (lo - begin)); });
  }
  for (auto& t : pool) t.join();
}

void StageModel::init_weights(uint64_t, double) {
  be_.fill(weights_, 0.0f);
  std::vector<float> host;
  std::vector<uint16_t> half;
  for (const ParamSpec& p : params_.specs) {
    const int64_t n = p.local_numel();
    host.resize(static_cast<size_t>(n));
    init_values(p, 0, n, host.data());
    Tensor dst = weights_.flat_slice(p.offset, n);
    if (act_ == DType::kF32) {
      be_.upload(dst, host.data());
    } else {  // the act-dtype copy rounds as Backend::cast does: to nearest even
      half.resize(host.size());
      for (size_t i = 0; i < host.size(); ++i) half[i] = f32_to_bf16(host[i]);
      be_.upload(dst, half.data());
    }
  }
}

void StageModel::begin_grads() { blocks_->begin_grads(); }

void StageModel::settle_grads() { blocks_->settle_grads(); }

Tensor StageModel::acquire_buffer() {
  if (!free_buffers_.empty()) {
    Tensor t = free_buffers_.back();
    free_buffers_.pop_back();
    return t;
  }
  return be_.alloc(act_, {dims_.seq_local(), dims_.micro_batch, dims_.hidden}, "pipeline");
}

void StageModel::release(Tensor t) {
  MPLAN_CHECK(t.data != nullptr, "release of an empty buffer");
  free_buffers_.push_back(t);
}

HeadWeightInputs StageModel::head_inputs(int c, int64_t mb) {
  ChunkActivations& A = *acts_[static_cast<size_t>(c)];
  MPLAN_CHECK(A.shape().has_output && A.holds_main(mb), "no head activations of micro-batch ", mb,
              " on chunk ", c);
  return A.shape().split_backward ? A.weight(mb).head_win : A.head(mb).head_win;
}

std::vector<size_t> StageModel::activation_slots() const {
  std::vector<size_t> out;
  for (const auto& a : acts_) out.push_back(a->main_slots());
  return out;
}

void StageModel::wait_params(const LayerParams& lp, GradSync* params) {
  if (params == nullptr) return;
  for (int i : {lp.ln1_w, lp.ln1_b, lp.proj_w, lp.proj_b, lp.qkv_w, lp.qkv_b, lp.ln2_w, lp.ln2_b,
                lp.fc1_w, lp.fc1_b, lp.fc2_w, lp.fc2_b})
    if (i >= 0) params->wait_param(i);
}

LayerRef StageModel::layer_ref(int c, int64_t i, MainSlot& s, WeightSlot* w, GradSlot* g,
                               bool recomputing) const {
  const ChunkParams& cp = params_.chunks[static_cast<size_t>(c)];
  const ChunkShape& shape = acts_[static_cast<size_t>(c)]->shape();
  const size_t k = static_cast<size_t>(i);
  LayerRef r;
  r.p = &cp.layers[k];
  r.layer = cp.first_layer + i;
  if (shape.storage[k] == LayerStorage::kFull) {
    r.a.main = s.layers[k];
    r.a.win = w != nullptr ? w->win[k] : s.win[k];
    if (g != nullptr) r.a.dy = g->dy[k];
    r.x = s.layers[k].x;
    return r;
  }
  // A recomputed layer: its activations live in the workspace while its group is rebuilt (and,
  // zero-bubble, the weight GEMMs' inputs in the W slot, kept until W).
  const size_t j = static_cast<size_t>(i - shape.group_first[k]);
  r.a.main = ws_.rc_main[j];
  r.a.win = recomputing && w != nullptr ? w->win[k] : ws_.rc_win[j];
  if (g != nullptr) r.a.dy = g->dy[k];
  r.x = shape.storage[k] == LayerStorage::kCheckpoint ? s.layers[k].x : ws_.rc_main[j].x;
  return r;
}

// ---- forward --------------------------------------------------------------------------------

Tensor StageModel::forward_input(int c, int64_t mb) {
  MPLAN_CHECK(!chunk(c).has_embedding, "the first chunk's input is its embedding");
  return acts_[static_cast<size_t>(c)]->main(mb).layers[0].x;
}

void StageModel::forward(int c, int64_t mb, Tensor tokens, Tensor targets, float grad_scale,
                         Tensor loss_sum, GradSync* params) {
  const ChunkParams& cp = chunk(c);
  ChunkActivations& A = *acts_[static_cast<size_t>(c)];
  const ChunkShape& shape = A.shape();
  MainSlot& s = A.main(mb);
  WeightSlot* w = shape.split_backward ? &A.weight(mb) : nullptr;
  if (cp.has_embedding) {
    if (params != nullptr) {
      params->wait_param(cp.wte);
      if (cp.wpe >= 0) params->wait_param(cp.wpe);
    }
    blocks_->embedding_forward(cp, tokens, s.layers[0].x);
  }
  const int64_t n = cp.num_layers;
  for (int64_t i = 0; i < n; ++i) {
    const size_t k = static_cast<size_t>(i);
    Tensor out;
    if (i + 1 < n) {
      const size_t next = k + 1;
      out = shape.storage[next] != LayerStorage::kNone
                ? s.layers[next].x
                : ws_.rc_main[static_cast<size_t>(i + 1 - shape.group_first[next])].x;
    } else if (cp.has_output) {
      out = A.head(mb).head.x;
    } else {
      out = acquire_buffer();
      fwd_out_[{c, mb}] = out;
    }
    wait_params(cp.layers[k], params);
    blocks_->layer_forward(layer_ref(c, i, s, w, nullptr, /*recomputing=*/false), out);
  }
  if (cp.has_output) {
    HeadSlot& hs = A.head(mb);
    if (params != nullptr)
      for (int i : {cp.lnf_w, cp.lnf_b, cp.output})
        if (i >= 0) params->wait_param(i);
    blocks_->head_forward(cp, hs.head, w != nullptr ? w->head_win : hs.head_win, targets,
                          grad_scale, loss_sum, forward_only_);
  }
  if (forward_only_) {  // nothing waits for a backward
    A.release_main(mb);
    if (w != nullptr) A.release_weight(mb);
  }
}

Tensor StageModel::take_forward_output(int c, int64_t mb) {
  auto it = fwd_out_.find({c, mb});
  MPLAN_CHECK(it != fwd_out_.end(), "no forward output of micro-batch ", mb, " on chunk ", c);
  Tensor t = it->second;
  fwd_out_.erase(it);
  return t;
}

// ---- backward -------------------------------------------------------------------------------

Tensor StageModel::backward_grad_input(int c, int64_t mb) {
  MPLAN_CHECK(!chunk(c).has_output, "the last chunk's output gradient comes from its loss");
  auto key = std::make_pair(c, mb);
  MPLAN_CHECK(bwd_in_.count(key) == 0, "gradient of micro-batch ", mb, " received twice");
  return bwd_in_[key] = acquire_buffer();
}

void StageModel::backward(int c, int64_t mb, Tensor tokens, GradSync* sync) {
  const ChunkParams& cp = chunk(c);
  ChunkActivations& A = *acts_[static_cast<size_t>(c)];
  const ChunkShape& shape = A.shape();
  const bool split = shape.split_backward;
  MainSlot& s = A.main(mb);
  WeightSlot* w = split ? &A.weight(mb) : nullptr;
  GradSlot* gs = split ? &A.grad(mb) : nullptr;  // taken now: B writes it, W reads it
  Tensor g;  // the residual stream's gradient, dL/d(output) going backward
  if (cp.has_output) {
    g = acquire_buffer();
    HeadSlot& hs = A.head(mb);
    blocks_->head_backward(cp, hs.head, w != nullptr ? w->head_win : hs.head_win, g, split, sync);
  } else {
    auto it = bwd_in_.find({c, mb});
    MPLAN_CHECK(it != bwd_in_.end(), "no output gradient of micro-batch ", mb, " on chunk ", c);
    g = it->second;
    bwd_in_.erase(it);
  }
  for (int64_t i = cp.num_layers - 1; i >= 0; --i) {
    const size_t k = static_cast<size_t>(i);
    if (shape.storage[k] == LayerStorage::kFull) {
      blocks_->layer_backward(layer_ref(c, i, s, w, gs, false), g, split, sync);
      continue;
    }
    // Full recompute: rebuild the group [first, i] from its checkpoint, then its backward.
    const int64_t first = shape.group_first[k];
    MPLAN_CHECK(shape.group_last[k] == i, "recompute group of layer ", i, " ends at ",
                shape.group_last[k]);
    blocks_->set_recomputing(true);
    for (int64_t j = first; j <= i; ++j) {
      Tensor out = j < i ? ws_.rc_main[static_cast<size_t>(j + 1 - first)].x : ws_.rc_out;
      blocks_->layer_forward(layer_ref(c, j, s, w, gs, /*recomputing=*/true), out);
    }
    blocks_->set_recomputing(false);
    for (int64_t j = i; j >= first; --j)
      blocks_->layer_backward(layer_ref(c, j, s, w, gs, true), g, split, sync);
    i = first;
  }
  if (cp.has_embedding) {
    blocks_->embedding_backward(cp, tokens, g, split ? A.embedding_grad(mb) : Tensor{}, sync);
    release(g);
  } else {
    bwd_out_[{c, mb}] = g;
  }
  A.release_main(mb);
}

Tensor StageModel::take_backward_output(int c, int64_t mb) {
  auto it = bwd_out_.find({c, mb});
  MPLAN_CHECK(it != bwd_out_.end(), "no input gradient of micro-batch ", mb, " on chunk ", c);
  Tensor t = it->second;
  bwd_out_.erase(it);
  return t;
}

void StageModel::weight_grad(int c, int64_t mb, Tensor tokens, GradSync* sync) {
  const ChunkParams& cp = chunk(c);
  ChunkActivations& A = *acts_[static_cast<size_t>(c)];
  MPLAN_CHECK(A.shape().split_backward, "a weight-gradient pass without a split backward");
  WeightSlot& w = A.weight(mb);
  GradSlot& gs = A.grad(mb);
  if (cp.has_output) blocks_->head_weight_grad(cp, w.head_win, sync, /*mark_norm=*/true);
  for (int64_t i = cp.num_layers - 1; i >= 0; --i) {
    const size_t k = static_cast<size_t>(i);
    LayerRef r;
    r.p = &cp.layers[k];
    r.layer = cp.first_layer + i;
    r.a.win = w.win[k];
    r.a.dy = gs.dy[k];
    blocks_->layer_weight_grad(r, sync);
  }
  if (cp.has_embedding) blocks_->embedding_weight_grad(cp, tokens, A.embedding_grad(mb), sync);
  A.release_weight(mb);
}

}  // namespace mplan::exec
