// Optimizer: runs of parameters over the flat buffers (alignment gaps are zero everywhere, so a
// run may span them), grad-norm contributions and the AdamW step.
#include "exec/parallel/optimizer.hpp"

#include "src/common/error.hpp"

namespace mplan::exec {

namespace {
// Merges consecutive parameters with equal `key` into runs [first offset, end of last).
template <class Key, class Keep>
std::vector<Optimizer::Run> make_runs(const GptParams& params, Key key, Keep keep) {
  std::vector<Optimizer::Run> runs;
  int64_t end = 0;
  for (const ParamSpec& p : params.specs) {
    if (!keep(p)) continue;
    bool k = key(p);
    // Adjacent: only the alignment gap (< kParamAlignElems) since the last kept parameter.
    if (!runs.empty() && runs.back().weight_decay == k && p.offset < end + kParamAlignElems) {
      runs.back().numel = p.offset + p.local_numel() - runs.back().offset;
    } else {
      runs.push_back({p.offset, p.local_numel(), k});
    }
    end = p.offset + p.local_numel();
  }
  return runs;
}
}  // namespace

Optimizer::Optimizer(const GptParams& params, int64_t tp_rank, Tensor master, Tensor weights,
                     Tensor grads, Backend& backend, const OptimizerConfig& config)
    : be_(backend), cfg_(config), master_(master), weights_(weights), grads_(grads) {
  MPLAN_CHECK(master.numel() == params.total_elems && grads.numel() == params.total_elems &&
                  weights.numel() == params.total_elems,
              "optimizer buffers must hold ", params.total_elems, " elements");
  m_ = be_.alloc(DType::kF32, {params.total_elems}, "optimizer");
  v_ = be_.alloc(DType::kF32, {params.total_elems}, "optimizer");
  be_.fill(m_, 0.0f);
  be_.fill(v_, 0.0f);
  adam_runs_ = make_runs(
      params, [](const ParamSpec& p) { return p.weight_decay; },
      [](const ParamSpec&) { return true; });
  // Megatron: param_is_not_tensor_parallel_duplicate -> sharded, or TP rank 0.
  norm_runs_ = make_runs(
      params, [](const ParamSpec&) { return false; },
      [tp_rank](const ParamSpec& p) { return !p.tp_duplicated || tp_rank == 0; });
}

Optimizer::~Optimizer() {
  be_.release(m_);
  be_.release(v_);
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

void Optimizer::step(int64_t step, float grad_scale) {
  for (const Run& r : adam_runs_) {
    Backend::AdamW hp{
        cfg_.lr,    cfg_.beta1, cfg_.beta2, cfg_.eps, r.weight_decay ? cfg_.weight_decay : 0.0f,
        grad_scale, step};
    be_.adamw(hp, master_.flat_slice(r.offset, r.numel), grads_.flat_slice(r.offset, r.numel),
              m_.flat_slice(r.offset, r.numel), v_.flat_slice(r.offset, r.numel),
              weights_.flat_slice(r.offset, r.numel));
  }
}

}  // namespace mplan::exec
