// Optimizer: owned runs over the flat buffers, master initialization, grad-norm contributions
// and the AdamW step.
#include "exec/parallel/optimizer.hpp"

#include <algorithm>

#include "src/common/error.hpp"

namespace mplan::exec {

namespace {

// The pieces of the owned ranges covered by parameters `keep` accepts, merged where consecutive
// pieces of one range share `key` (only alignment gaps, zero everywhere, lie between them).
template <class Key, class Keep>
std::vector<Optimizer::Run> make_runs(const ParamLayout& params,
                                      const std::vector<ShardRange>& owned, Key key, Keep keep) {
  // Parameters by offset.
  std::vector<const ParamSpec*> by_offset;
  for (const ParamSpec& p : params.specs) by_offset.push_back(&p);
  std::sort(by_offset.begin(), by_offset.end(),
            [](const ParamSpec* a, const ParamSpec* b) { return a->offset < b->offset; });
  std::vector<Optimizer::Run> runs;
  int64_t packed_base = 0;
  for (const ShardRange& r : owned) {
    bool open = false;
    for (const ParamSpec* p : by_offset) {
      const int64_t b = std::max(r.begin, p->offset);
      const int64_t e = std::min(r.end, p->offset + p->local_numel());
      if (b >= e) continue;
      if (!keep(*p)) {
        open = false;
        continue;
      }
      const bool k = key(*p);
      const int64_t packed = packed_base + (b - r.begin);
      if (open && runs.back().weight_decay == k) {
        runs.back().numel = e - runs.back().offset;
      } else {
        runs.push_back({b, packed, e - b, k});
        open = true;
      }
    }
    packed_base += r.end - r.begin;
  }
  return runs;
}

}  // namespace

Optimizer::Optimizer(const ParamLayout& params, int64_t tp_rank, std::vector<ShardRange> owned,
                     Tensor weights, Tensor grads, Backend& backend, const OptimizerConfig& config,
                     const ParamInit& init)
    : be_(backend), cfg_(config), owned_(std::move(owned)), weights_(weights), grads_(grads) {
  MPLAN_CHECK(grads.numel() == params.total_elems && weights.numel() == params.total_elems,
              "optimizer buffers must hold ", params.total_elems, " elements");
  int64_t last = 0;
  for (const ShardRange& r : owned_) {
    MPLAN_CHECK(r.begin >= last && r.end >= r.begin && r.end <= params.total_elems,
                "owned ranges must be sorted and disjoint");
    last = r.end;
    owned_elems_ += r.end - r.begin;
  }
  master_ = be_.alloc(DType::kF32, {owned_elems_}, "master_weights");
  m_ = be_.alloc(DType::kF32, {owned_elems_}, "optimizer");
  v_ = be_.alloc(DType::kF32, {owned_elems_}, "optimizer");
  be_.fill(master_, 0.0f);
  be_.fill(m_, 0.0f);
  be_.fill(v_, 0.0f);
  adam_runs_ = make_runs(
      params, owned_, [](const ParamSpec& p) { return p.weight_decay; },
      [](const ParamSpec&) { return true; });
  // Megatron: param_is_not_tensor_parallel_duplicate (sharded, or TP rank 0) and
  // param_is_not_shared (the tied embedding counted once, on the first stage).
  norm_runs_ = make_runs(
      params, owned_, [](const ParamSpec&) { return false; },
      [tp_rank](const ParamSpec& p) {
        return (!p.tp_duplicated || tp_rank == 0) && !p.shared_copy;
      });
  // Master weights of the owned elements, parameter by parameter.
  std::vector<float> host;
  int64_t packed_base = 0;
  for (const ShardRange& r : owned_) {
    for (const ParamSpec& p : params.specs) {
      const int64_t b = std::max(r.begin, p.offset);
      const int64_t e = std::min(r.end, p.offset + p.local_numel());
      if (b >= e) continue;
      host.resize(static_cast<size_t>(e - b));
      init(p, b - p.offset, e - p.offset, host.data());
      be_.upload(master_.flat_slice(packed_base + (b - r.begin), e - b), host.data());
    }
    packed_base += r.end - r.begin;
  }
}

Optimizer::~Optimizer() {
  be_.release(master_);
  be_.release(m_);
  be_.release(v_);
}

int64_t Optimizer::packed_of(int64_t flat) const {
  int64_t base = 0;
  for (const ShardRange& r : owned_) {
    if (flat >= r.begin && flat < r.end) return base + flat - r.begin;
    base += r.end - r.begin;
  }
  return -1;
}

void Optimizer::grad_sum_squares(Tensor out) {
  for (const Run& r : norm_runs_)
    be_.sum_squares_accumulate(grads_.flat_slice(r.offset, r.numel), out);
}

float Optimizer::clip_coefficient(double grad_norm) const {
  if (cfg_.clip_grad <= 0) return 1.0f;
  double c = static_cast<double>(cfg_.clip_grad) / (grad_norm + 1e-6);
  return c < 1.0 ? static_cast<float>(c) : 1.0f;
}

void Optimizer::step(int64_t step, float grad_scale) { this->step(step, grad_scale, cfg_.lr); }

void Optimizer::step(int64_t step, float grad_scale, float lr) {
  for (const Run& r : adam_runs_) {
    Backend::AdamW hp{
        lr,         cfg_.beta1, cfg_.beta2, cfg_.eps, r.weight_decay ? cfg_.weight_decay : 0.0f,
        grad_scale, step};
    be_.adamw(hp, master_.flat_slice(r.packed, r.numel), grads_.flat_slice(r.offset, r.numel),
              m_.flat_slice(r.packed, r.numel), v_.flat_slice(r.packed, r.numel),
              weights_.flat_slice(r.offset, r.numel));
  }
}

}  // namespace mplan::exec
