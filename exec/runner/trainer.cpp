// Trainer: the per-iteration sequence (data, the schedule's passes, gradient reductions,
// finalize, norm, clipping, AdamW, parameter gathers) and the checks that refuse plans the
// executor cannot run.
#include "exec/runner/trainer.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>

#include "exec/data/synthetic_token_source.hpp"
#include "exec/env_flag.hpp"
#include "exec/model/gpt_dims.hpp"
#include "exec/runner/step_clock.hpp"
#include "src/common/error.hpp"
#include "src/model/layer_range.hpp"
#include "src/parallel/rank_grid.hpp"
#include "src/plan/plan_rules.hpp"

namespace mplan::exec {

void check_executable(const Plan& plan) {
  const ParallelConfig& p = plan.parallel;
  if (p.cp != 1)
    throw Error(
        cat("parallel.cp: context parallelism is not supported by the executor (cp = ", p.cp, ")"));
  if (p.ep != 1)
    throw Error(
        cat("parallel.ep: expert parallelism is not supported by the executor (ep = ", p.ep, ")"));
  if (plan.training.precision == Precision::kFp16)
    throw Error("training.precision: fp16 (with loss scaling) is not supported; use bf16 or fp32");
  // The executor accumulates and reduces gradients in f32 and keeps f32 master weights and Adam
  // moments: a plan asking for less would run, but not as it says.
  if (plan.training.precision != Precision::kFp32 && !plan.training.grads_in_fp32)
    throw Error(
        "training.grads_in_fp32: bf16 main gradients (Megatron's --grad-reduce-in-bf16) are not "
        "supported by the executor, which accumulates and reduces gradients in fp32; set it to "
        "true");
  const OptimizerPrecision& op = plan.training.optimizer_precision;
  for (const auto& [field, dtype] : {std::pair{"main_params_dtype", op.main_params_dtype},
                                     std::pair{"exp_avg_dtype", op.exp_avg_dtype},
                                     std::pair{"exp_avg_sq_dtype", op.exp_avg_sq_dtype}})
    if (dtype != OptimStateDtype::kFp32)
      throw Error(cat("training.", field, ": ", to_string(dtype),
                      " (Megatron's precision-aware optimizer) is not supported by the executor, "
                      "which keeps master weights and Adam moments in fp32; use fp32"));
  if (plan.training.fp8_format != Fp8Format::kNone || plan.training.fp4_format != Fp4Format::kNone)
    throw Error(cat(plan.training.fp8_format != Fp8Format::kNone ? "training.fp8_format"
                                                                 : "training.fp4_format",
                    ": fp8 / fp4 GEMMs are not supported by the executor (the simulator and the "
                    "Megatron-LM export take them); use bf16"));
  if (plan.model.mla || plan.model.mtp_num_layers > 0 || plan.model.window_size)
    throw Error(cat(plan.model.mla                  ? "model.mla: multi-latent attention"
                    : plan.model.mtp_num_layers > 0 ? "model.mtp_num_layers: multi-token prediction"
                                                    : "model.window_size: sliding-window attention",
                    " is not supported by the executor (the simulator and the Megatron-LM export "
                    "take it)"));
  if (p.tp_comm_overlap)
    throw Error(
        "parallel.tp_comm_overlap: the executor runs sequence parallelism's all-gathers and "
        "reduce-scatters beside no GEMM (the simulator and the Megatron-LM export take the "
        "overlap); set it false");
  if (p.use_megatron_fsdp)
    throw Error(
        "parallel.use_megatron_fsdp: Megatron-FSDP is not supported by the executor (it runs "
        "the distributed optimizer: distributed_optimizer without use_megatron_fsdp)");
  if (p.num_distributed_optimizer_instances != 1)
    throw Error(
        cat("parallel.num_distributed_optimizer_instances: partial distributed optimizers "
            "are not supported by the executor (got ",
            p.num_distributed_optimizer_instances, ")"));
  if (p.recompute == Recompute::kSelective && p.recompute_modules != kRecomputeCoreAttn)
    throw Error(
        "parallel.recompute_modules: the executor's selective recompute runs the attention core "
        "alone (core_attn, Megatron's default); the simulator and the Megatron-LM export take the "
        "others");
  if (plan.training.optimizer_cpu_offload)
    throw Error(
        "training.optimizer_cpu_offload: the executor runs the optimizer on the GPU (the simulator "
        "and the Megatron-LM export take the offload)");
  if (p.overlap_p2p_comm && p.schedule == ScheduleKind::kInterleaved)
    throw Error(
        "parallel.overlap_p2p_comm: the executor's pipeline sends and receives block the passes "
        "(the simulator and the Megatron-LM export take the overlap); set it false");
  if (plan.training.cpu_offloading_num_layers > 0)
    throw Error(
        "training.cpu_offloading_num_layers: the executor keeps activations on the GPU (the "
        "simulator and the Megatron-LM export take the offload)");
  if (plan.training.fine_grained_activation_offloading)
    throw Error(
        "training.fine_grained_activation_offloading: the executor keeps activations on the GPU "
        "(the simulator and the Megatron-LM export take the offload)");
  gpt_dims(plan.model, p.micro_batch_size, p.tp, 0, p.sequence_parallel);  // model checks
  for (int64_t s = 0; s < p.pp; ++s)
    for (int64_t c = 0; c < p.vpp; ++c)
      if (chunk_layers(plan.model.num_layers, p, s, c).count < 1)
        throw Error(cat("parallel: pipeline stage ", s, " chunk ", c,
                        " has no transformer layer; the executor needs at least one per chunk"));
}

DType act_dtype_of(const Plan& plan) {
  return plan.training.precision == Precision::kFp32 ? DType::kF32 : DType::kBF16;
}

GroupMembers trainer_groups(const ParallelConfig& parallel, int world_rank) {
  RankGrid grid(parallel);
  RankGroupMap all = grid.groups_of_rank(world_rank);
  GroupMembers g;
  for (const char* kind : {"tp", "dp", "pp"}) g[kind] = all.at(kind);
  g["mp"] = all.at("tp-pp");
  auto emb = all.find("embedding");
  g["embedding"] = emb != all.end() ? emb->second : std::vector<int>{world_rank};
  std::vector<int> world(static_cast<size_t>(grid.world_size()));
  std::iota(world.begin(), world.end(), 0);
  g["world"] = world;
  return g;
}

namespace {

// Every token must index the model's vocabulary (data made for another tokenizer would not).
void check_tokens(const std::vector<int32_t>& tokens, int64_t vocab, int64_t first_sample) {
  for (int32_t t : tokens)
    if (t < 0 || t >= vocab)
      throw Error(cat("--data-path: token ", t, " in the batch starting at sample ", first_sample,
                      " is outside the model's vocabulary [0, ", vocab,
                      "): the data was made for another tokenizer"));
}

MicrobatchSpec batch_spec(const Plan& plan) {
  const ParallelConfig& p = plan.parallel;
  return {p.global_batch_size, p.micro_batch_size, p.dp, plan.training.rampup_batch_size, false};
}

}  // namespace

Trainer::Trainer(const Plan& plan, Backend& backend, CommWorld& world, const TrainerOptions& o)
    : plan_(plan),
      be_(backend),
      world_(world),
      tp_(world.group("tp")),
      dp_(world.group("dp")),
      pp_(world.group("pp")),
      batches_(batch_spec(plan)) {
  check_executable(plan);
  // Iteration graphs on one rank only: over NCCL a distributed-optimizer run's recording failed
  // and pipeline runs hung at exit (exec/runner/README.md).
  graphs_ = be_.can_capture() && world.world_size() == 1 &&
            env_flag("MPLAN_CUDA_GRAPH", /*default_value=*/true);
  const ParallelConfig& p = plan.parallel;
  MPLAN_CHECK(tp_.size() == p.tp && dp_.size() == p.dp && pp_.size() == p.pp, "groups tp ",
              tp_.size(), " dp ", dp_.size(), " pp ", pp_.size(), " do not match the plan (tp ",
              p.tp, ", dp ", p.dp, ", pp ", p.pp, ")");
  pp_rank_ = pp_.rank();
  embedding_member_ = world.group("embedding").size() > 1;
  if (o.trace) {
    tracer_ = std::make_unique<Tracer>(be_);
    tracer_->set_ops(o.trace_ops);
  }

  // The largest micro-batch count of the run (ramp-up grows it to the final batch).
  int64_t max_micro = 0;
  for (const RampStep& st : batches_.ramp_steps())
    max_micro = std::max(max_micro, st.state.num_microbatches);
  const Schedule& first = schedule(num_microbatches());

  StageSpec ss;
  ss.model = plan.model;
  ss.parallel = p;
  ss.pp_rank = pp_rank_;
  ss.tp_rank = tp_.rank();
  ss.act = o.act;
  ss.split_backward = first.split_backward;
  ss.seed = o.seed;
  ss.init_method_std = plan.training.init_method_std;
  ss.bucket_elems = o.bucket_elems;
  model_ = std::make_unique<StageModel>(ss, be_, tp_, tracer_.get());
  const GptDims& d = model_->dims();

  data_ = o.data
              ? o.data
              : std::make_shared<const SyntheticTokenSource>(o.seed, plan.model.vocab_size, d.seq);
  MPLAN_CHECK(data_->sample_tokens() == d.seq + 1, "the data's samples have ",
              data_->sample_tokens(), " tokens; the model needs seq_length + 1 = ", d.seq + 1);
  lr_schedule_ = o.lr_schedule;

  sync_ = std::make_unique<GradSync>(model_->params(), model_->grads(), be_, dp_,
                                     p.overlap_grad_reduce, p.distributed_optimizer, tracer_.get());
  std::vector<ShardRange> owned;
  if (p.distributed_optimizer) {
    for (const GradBucket& b : model_->params().buckets)
      owned.push_back(bucket_shard(b, dp_.rank(), dp_.size()));
  } else {
    owned.push_back({0, model_->params().total_elems});
  }
  OptimizerConfig oc;
  oc.lr = static_cast<float>(plan.training.lr);
  oc.beta1 = static_cast<float>(plan.training.adam_beta1);
  oc.beta2 = static_cast<float>(plan.training.adam_beta2);
  oc.eps = static_cast<float>(plan.training.adam_eps);
  oc.weight_decay = static_cast<float>(plan.training.weight_decay);
  oc.clip_grad = static_cast<float>(plan.training.clip_grad);
  const StageModel& m = *model_;
  optimizer_ = std::make_unique<Optimizer>(
      m.params(), d.tp_rank, owned, m.weights(), m.grads(), be_, oc,
      [&m](const ParamSpec& s, int64_t b, int64_t e, float* out) { m.init_values(s, b, e, out); });
  runner_ = std::make_unique<PipelineRunner>(*model_, pp_, tracer_.get(), &progress_);

  // Evaluation runs the final batch size (Megatron's evaluate()).
  max_micro =
      std::max(max_micro, mplan::num_microbatches(p.global_batch_size, p.micro_batch_size, p.dp));
  data_capacity_ = max_micro;
  inputs_ = be_.alloc(DType::kI32, {max_micro, d.seq, d.micro_batch}, "data");
  targets_ = be_.alloc(DType::kI32, {max_micro, d.seq, d.micro_batch}, "data");
  scalars_ = be_.alloc(DType::kF32, {2}, "data");
  if (d.sp()) {
    int64_t n = 0;
    for (const ParamSpec& s : m.params().specs)
      if (s.sp_grad_reduce) n += s.local_numel();
    sp_stage_ = be_.alloc(DType::kF32, {n}, "workspace");
  }
}

Trainer::~Trainer() {
  runner_.reset();
  optimizer_.reset();
  sync_.reset();
  model_.reset();
  for (Tensor* t : {&inputs_, &targets_, &scalars_, &sp_stage_})
    if (t->data != nullptr) be_.release(*t);
}

int64_t Trainer::num_microbatches() const { return batches_.at(consumed_).num_microbatches; }

double Trainer::lr_at(int64_t consumed_samples) const {
  return lr_schedule_ ? lr_schedule_->at_samples(static_cast<double>(consumed_samples))
                      : plan_.training.lr;
}

void Trainer::restore_counters(int64_t iterations, int64_t consumed_samples,
                               int64_t optimizer_steps) {
  MPLAN_CHECK(iterations >= 0 && consumed_samples >= 0 && optimizer_steps >= 0,
              "negative counters");
  iteration_ = iterations;
  consumed_ = consumed_samples;
  updates_ = optimizer_steps;
}

const Schedule& Trainer::schedule(int64_t microbatches, bool forward_only) {
  auto it = schedules_.find({microbatches, forward_only});
  if (it != schedules_.end()) return it->second;
  ScheduleSpec spec = schedule_spec_of(plan_, microbatches);
  spec.forward_only = forward_only;
  return schedules_.emplace(std::pair{microbatches, forward_only}, make_schedule(spec))
      .first->second;
}

void Trainer::finalize_grads() {
  sync_->finish();
  const ParamLayout& params = model_->params();
  const Tensor grads = model_->grads();
  // Sequence parallelism: norms and row-parallel biases saw only this rank's tokens.
  if (sp_stage_.data != nullptr) {
    TraceSpan span;
    span.name = "sp_norm_ar";
    span.kind = SpanKind::kTp;
    auto reduce = [&] {
      int64_t at = 0;
      for (const ParamSpec& s : params.specs) {
        if (!s.sp_grad_reduce) continue;
        be_.copy(sp_stage_.flat_slice(at, s.local_numel()),
                 grads.flat_slice(s.offset, s.local_numel()));
        at += s.local_numel();
      }
      tp_.all_reduce(sp_stage_, ReduceOp::kSum, Stream::kCompute);
      at = 0;
      for (const ParamSpec& s : params.specs) {
        if (!s.sp_grad_reduce) continue;
        be_.copy(grads.flat_slice(s.offset, s.local_numel()),
                 sp_stage_.flat_slice(at, s.local_numel()));
        at += s.local_numel();
      }
    };
    if (tracer_)
      tracer_->around(std::move(span), reduce);
    else
      reduce();
  }
  // Tied embeddings with pp > 1: the first stage's word embedding and the last stage's copy get
  // the sum of both gradients (Megatron's _allreduce_word_embedding_grads).
  if (embedding_member_ && plan_.model.tied_embeddings && plan_.parallel.pp > 1) {
    int param = -1;
    if (pp_rank_ == 0) param = params.chunks.front().wte;
    if (pp_rank_ == plan_.parallel.pp - 1) param = params.chunks.back().output;
    MPLAN_CHECK(param >= 0, "embedding group member without an embedding");
    TraceSpan span;
    span.name = "embedding_ar";
    span.kind = SpanKind::kDpExposed;
    auto reduce = [&] {
      world_.group("embedding")
          .all_reduce(model_->grad(param).view({model_->grad(param).numel()}), ReduceOp::kSum,
                      Stream::kCompute);
    };
    if (tracer_)
      tracer_->around(std::move(span), reduce);
    else
      reduce();
  }
}

void Trainer::reduce_scalars() {
  // The loss: counted once per data-parallel replica (tensor-parallel rank 0 of the last stage).
  if (tp_.rank() != 0) be_.fill(scalars_.flat_slice(0, 1), 0.0f);
  Tensor sum_sq = scalars_.flat_slice(1, 1);
  TraceSpan span;
  span.name = "grad_norm_ar";
  span.kind = SpanKind::kOptimizer;
  auto reduce = [&] {
    optimizer_->grad_sum_squares(sum_sq);
    if (plan_.parallel.distributed_optimizer) {
      // Shards of different data-parallel ranks hold different gradients: sum over everyone.
      Comm& all = world_.group("world");
      if (all.size() > 1) all.all_reduce(scalars_, ReduceOp::kSum, Stream::kCompute);
      return;
    }
    Comm& mp = world_.group("mp");
    if (mp.size() > 1) mp.all_reduce(scalars_, ReduceOp::kSum, Stream::kCompute);
    if (dp_.size() > 1) dp_.all_reduce(scalars_.flat_slice(0, 1), ReduceOp::kSum, Stream::kCompute);
  };
  if (tracer_)
    tracer_->around(std::move(span), reduce);
  else
    reduce();
}

// The iteration's device work up to the reduced loss and squared gradient norm, queued op by op.
void Trainer::queue_iteration(const Schedule& sched, const IterationBatch& batch) {
  model_->begin_grads();
  be_.fill(scalars_, 0.0f);
  sync_->begin_step();
  runner_->run(sched, pp_rank_, batch, *sync_, iteration_);
  model_->settle_grads();
  progress_.set(cat("iteration ", iteration_, ": gradient reductions and the optimizer"));
  finalize_grads();
  reduce_scalars();
}

// queue_iteration's work of an iteration of M micro-batches: replayed from its graph, recorded
// into one (after a direct run of M in this process), or queued directly.
void Trainer::run_iteration(int64_t M, const Schedule& sched, const IterationBatch& batch) {
  if (const auto captured = captured_.find(M); captured != captured_.end()) {
    progress_.set(cat("iteration ", iteration_, ": a replay of iteration ",
                      captured->second.iteration, "'s graph"));
    // The spans and marks of the recording stand for this replay's.
    if (tracer_) tracer_->restore(captured->second.spans, captured->second.marks);
    if (be_.replay(captured->second.graph)) return;
    captured_.erase(captured);  // memory it used was released: record anew
  }
  if (tracer_) tracer_->clear();
  if (!graphs_ || ran_directly_.count(M) == 0) {
    queue_iteration(sched, batch);
    ran_directly_.insert(M);
    return;
  }
  // A CUDA call the recording refuses ends the job (cuda_check.hpp): this line says what ran.
  std::fprintf(stderr,
               "iteration graphs: recording iteration %lld (%lld micro-batches; "
               "MPLAN_CUDA_GRAPH=0 runs iterations without graphs)\n",
               static_cast<long long>(iteration_ + 1), static_cast<long long>(M));
  be_.begin_capture();
  int marks = 0;
  try {
    queue_iteration(sched, batch);
    if (tracer_) marks = tracer_->mark(Stream::kCompute) + 1;
  } catch (const std::exception& e) {
    (void)be_.end_capture();
    throw Error(cat("iteration ", iteration_ + 1, ": recording the iteration graph: ", e.what(),
                    " (MPLAN_CUDA_GRAPH=0 runs iterations without graphs)"));
  }
  const int graph = be_.end_capture();
  if (graph < 0) {  // nothing of the recording ran: run the iteration directly, and from now on
    graphs_ = false;
    std::fprintf(stderr, "iteration graphs: the recording failed; iterations run directly\n");
    if (tracer_) tracer_->clear();
    queue_iteration(sched, batch);
    return;
  }
  CapturedIteration& c = captured_[M];
  c.graph = graph;
  c.iteration = iteration_;
  if (tracer_) c.spans = tracer_->spans();
  c.marks = marks;
  MPLAN_CHECK(be_.replay(graph), "a graph refused right after its recording");
  std::fprintf(stderr, "iteration graphs: iteration %lld recorded (%lld micro-batches)\n",
               static_cast<long long>(iteration_ + 1), static_cast<long long>(M));
}

StepResult Trainer::step(bool apply_update) {
  StepClock clock;
  const GptDims& d = model_->dims();
  const BatchState state = batches_.at(consumed_);
  const int64_t M = state.num_microbatches;
  MPLAN_CHECK(M >= 1 && M <= data_capacity_, "iteration of ", M, " micro-batches (capacity ",
              data_capacity_, ")");
  const Schedule& sched = schedule(M);

  // The iteration's tokens go up before any compute is queued: no host wait inside the step.
  fill_batch(*data_, consumed_, d.micro_batch, M, plan_.parallel.dp, dp_.rank(), host_inputs_,
             host_targets_);
  check_tokens(host_inputs_, plan_.model.vocab_size, consumed_);
  check_tokens(host_targets_, plan_.model.vocab_size, consumed_);
  clock.at("data");
  const double lr = lr_at(consumed_);
  const int64_t T = d.tokens();
  Tensor inputs = inputs_.flat_slice(0, M * T), targets = targets_.flat_slice(0, M * T);
  be_.upload(inputs, host_inputs_.data());
  be_.upload(targets, host_targets_.data());
  clock.at("uploaded");

  IterationBatch batch;
  batch.tokens = inputs;
  batch.targets = targets;
  batch.grad_scale = 1.0f / static_cast<float>(T * M * static_cast<int64_t>(dp_.size()));
  batch.loss_sum = scalars_.flat_slice(0, 1);
  run_iteration(M, sched, batch);
  clock.at("queued");
  ++iteration_;
  consumed_ += state.running_global_batch_size;
  float host[2];
  be_.download(host, scalars_);  // the one host wait of the iteration
  clock.at("synced");

  StepResult r;
  r.lr = lr;
  r.num_microbatches = M;
  r.global_batch_size = state.running_global_batch_size;
  r.loss =
      static_cast<double>(host[0]) / static_cast<double>(T * M * static_cast<int64_t>(dp_.size()));
  r.grad_norm = std::sqrt(static_cast<double>(host[1]));
  r.clip_coefficient = optimizer_->clip_coefficient(r.grad_norm);
  if (apply_update) {
    TraceSpan span;
    span.name = "optimizer";
    span.kind = SpanKind::kOptimizer;
    const int64_t step_no = ++updates_;
    auto update = [&] { optimizer_->step(step_no, r.clip_coefficient, static_cast<float>(lr)); };
    if (tracer_)
      tracer_->around(std::move(span), update);
    else
      update();
    if (plan_.parallel.distributed_optimizer)
      sync_->gather_params(model_->weights(), plan_.parallel.overlap_param_gather);
  }
  clock.at("updated");
  return r;
}

EvalResult Trainer::evaluate(const TokenSource& source, int64_t first_sample, int64_t iterations) {
  const GptDims& d = model_->dims();
  const ParallelConfig& p = plan_.parallel;
  const int64_t M = mplan::num_microbatches(p.global_batch_size, p.micro_batch_size, p.dp);
  const int64_t T = d.tokens();
  MPLAN_CHECK(M >= 1 && M <= data_capacity_ && iterations >= 0, "evaluation of ", iterations, " x ",
              M, " micro-batches");
  MPLAN_CHECK(source.sample_tokens() == d.seq + 1, "evaluation samples of ", source.sample_tokens(),
              " tokens");
  const Schedule& sched = schedule(M, /*forward_only=*/true);
  Tensor inputs = inputs_.flat_slice(0, M * T), targets = targets_.flat_slice(0, M * T);
  IterationBatch batch;
  batch.tokens = inputs;
  batch.targets = targets;
  batch.grad_scale = 0.0f;  // no gradient is written in forward-only mode
  batch.loss_sum = scalars_.flat_slice(0, 1);
  model_->set_forward_only(true);
  double sum = 0;
  for (int64_t k = 0; k < iterations; ++k) {
    fill_batch(source, first_sample + k * p.global_batch_size, d.micro_batch, M, p.dp, dp_.rank(),
               host_inputs_, host_targets_);
    check_tokens(host_inputs_, plan_.model.vocab_size, first_sample + k * p.global_batch_size);
    check_tokens(host_targets_, plan_.model.vocab_size, first_sample + k * p.global_batch_size);
    be_.upload(inputs, host_inputs_.data());
    be_.upload(targets, host_targets_.data());
    be_.fill(scalars_, 0.0f);
    runner_->run(sched, pp_rank_, batch, *sync_, iteration_);
    progress_.set(cat("evaluation batch ", k, " after iteration ", iteration_, ": the loss"));
    // Counted once per data-parallel replica, as in training (reduce_scalars).
    Tensor loss = scalars_.flat_slice(0, 1);
    if (tp_.rank() != 0) be_.fill(loss, 0.0f);
    Comm& mp = world_.group("mp");
    if (mp.size() > 1) mp.all_reduce(loss, ReduceOp::kSum, Stream::kCompute);
    if (dp_.size() > 1) dp_.all_reduce(loss, ReduceOp::kSum, Stream::kCompute);
    float host = 0;
    be_.download(&host, loss);
    sum += static_cast<double>(host);
  }
  model_->set_forward_only(false);
  EvalResult r;
  r.samples = iterations * p.global_batch_size;
  const double tokens = static_cast<double>(T * M * p.dp * iterations);
  r.loss = iterations > 0 ? sum / tokens : 0.0;
  return r;
}

}  // namespace mplan::exec
