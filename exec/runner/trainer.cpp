// Trainer: the per-iteration sequence (upload data, micro-batches, gradient reductions, norm,
// clipping, AdamW) and the checks that refuse plans the executor cannot run yet.
#include "exec/runner/trainer.hpp"

#include <cmath>

#include "exec/model/gpt_dims.hpp"
#include "src/common/error.hpp"

namespace mplan::exec {

void check_executable(const Plan& plan) {
  const ParallelConfig& p = plan.parallel;
  if (p.pp != 1)
    throw Error(cat("parallel.pp: pipeline execution is not supported yet (pp = ", p.pp, ")"));
  if (p.vpp != 1)
    throw Error(
        cat("parallel.vpp: virtual pipeline stages are not supported yet (vpp = ", p.vpp, ")"));
  if (p.cp != 1)
    throw Error(cat("parallel.cp: context parallelism is not supported yet (cp = ", p.cp, ")"));
  if (p.ep != 1)
    throw Error(cat("parallel.ep: expert parallelism is not supported yet (ep = ", p.ep, ")"));
  if (p.distributed_optimizer)
    throw Error("parallel.distributed_optimizer: the distributed optimizer is not supported yet");
  if (p.recompute != Recompute::kNone)
    throw Error(cat("parallel.recompute: activation recomputation is not supported yet (",
                    to_string(p.recompute), ")"));
  if (p.order != "tp-cp-ep-dp-pp")
    throw Error(cat("parallel.order: the executor supports the default order tp-cp-ep-dp-pp, got ",
                    p.order));
  if (plan.training.precision == Precision::kFp16)
    throw Error("training.precision: fp16 (with loss scaling) is not supported; use bf16 or fp32");
  if (plan.training.rampup_batch_size)
    throw Error("training.rampup_batch_size: batch-size rampup is not supported by the executor");
  gpt_dims(plan.model, p.micro_batch_size, p.tp, 0, p.sequence_parallel);  // model checks
}

DType act_dtype_of(const Plan& plan) {
  return plan.training.precision == Precision::kFp32 ? DType::kF32 : DType::kBF16;
}

Trainer::Trainer(const Plan& plan, Backend& backend, CommWorld& world, const TrainerOptions& o)
    : be_(backend), tp_(world.group("tp")), dp_(world.group("dp")) {
  check_executable(plan);
  const ParallelConfig& p = plan.parallel;
  MPLAN_CHECK(tp_.size() == p.tp && dp_.size() == p.dp, "groups tp ", tp_.size(), " dp ",
              dp_.size(), " do not match the plan (tp ", p.tp, ", dp ", p.dp, ")");
  num_micro_ = p.global_batch_size / (p.micro_batch_size * p.dp);
  GptDims dims = gpt_dims(plan.model, p.micro_batch_size, p.tp, tp_.rank(), p.sequence_parallel);
  data_.seed = o.seed;
  data_.vocab = plan.model.vocab_size;
  data_.seq = dims.seq;
  data_.micro_batch = dims.micro_batch;
  data_.num_microbatches = num_micro_;
  data_.dp = p.dp;
  data_.dp_rank = dp_.rank();
  int64_t bucket = o.bucket_elems > 0 ? o.bucket_elems : default_bucket_elems(p.dp);
  if (!p.overlap_grad_reduce) bucket = 0;  // Megatron: one bucket, reduced after backward
  model_ = std::make_unique<GptModel>(dims, o.act, be_, tp_, dp_, o.seed,
                                      plan.training.init_method_std, bucket);
  OptimizerConfig oc;
  oc.lr = static_cast<float>(plan.training.lr);
  oc.beta1 = static_cast<float>(plan.training.adam_beta1);
  oc.beta2 = static_cast<float>(plan.training.adam_beta2);
  oc.eps = static_cast<float>(plan.training.adam_eps);
  oc.weight_decay = static_cast<float>(plan.training.weight_decay);
  oc.clip_grad = static_cast<float>(plan.training.clip_grad);
  optimizer_ = std::make_unique<Optimizer>(model_->params(), dims.tp_rank, model_->master(),
                                           model_->weights(), model_->grads(), be_, oc);
  inputs_ = be_.alloc(DType::kI32, {num_micro_, dims.seq, dims.micro_batch}, "data");
  targets_ = be_.alloc(DType::kI32, {num_micro_, dims.seq, dims.micro_batch}, "data");
  scalars_ = be_.alloc(DType::kF32, {2}, "data");
}

Trainer::~Trainer() {
  optimizer_.reset();
  model_.reset();
  be_.release(inputs_);
  be_.release(targets_);
  be_.release(scalars_);
}

StepResult Trainer::step(bool apply_update) {
  const GptDims& d = model_->dims();
  // The iteration's tokens go up before any compute is queued: no host wait inside the step.
  data_.fill(iteration_, host_inputs_, host_targets_);
  be_.upload(inputs_, host_inputs_.data());
  be_.upload(targets_, host_targets_.data());
  ++iteration_;

  const float grad_scale =
      1.0f / static_cast<float>(d.tokens() * num_micro_ * static_cast<int64_t>(dp_.size()));
  model_->zero_grads();
  be_.fill(scalars_, 0.0f);
  Tensor loss_sum = scalars_.flat_slice(0, 1), sum_sq = scalars_.flat_slice(1, 1);
  const int64_t T = d.tokens();
  for (int64_t k = 0; k < num_micro_; ++k) {
    Tensor tok = inputs_.flat_slice(k * T, T).view({d.seq, d.micro_batch});
    Tensor tgt = targets_.flat_slice(k * T, T).view({d.seq, d.micro_batch});
    model_->forward(tok);
    model_->backward(tok, tgt, grad_scale, /*reduce_grads=*/k == num_micro_ - 1, loss_sum);
  }
  model_->finish_grads();
  optimizer_->grad_sum_squares(sum_sq);
  if (tp_.size() > 1) tp_.all_reduce(sum_sq, ReduceOp::kSum, Stream::kCompute);
  if (dp_.size() > 1) dp_.all_reduce(loss_sum, ReduceOp::kSum, Stream::kCompute);
  float host[2];
  be_.download(host, scalars_);  // the one host wait of the iteration

  StepResult r;
  r.loss = static_cast<double>(host[0]) /
           static_cast<double>(T * num_micro_ * static_cast<int64_t>(dp_.size()));
  r.grad_norm = std::sqrt(static_cast<double>(host[1]));
  r.clip_coefficient = optimizer_->clip_coefficient(r.grad_norm);
  if (apply_update) optimizer_->step(++updates_, r.clip_coefficient);
  return r;
}

}  // namespace mplan::exec
