// Trainer: one rank's training loop for any dense GPT plan the executor runs — tensor, sequence,
// pipeline (gpipe, 1f1b, interleaved with virtual stages, zb-h1) and data parallelism, the plain
// or the distributed optimizer, recomputation, both rank orders and batch-size ramp-up. Each
// shared fact comes from src/: the micro-batch count of every iteration (src/batch), the
// schedule (src/schedule), the layer ranges and tensors (src/model), the buckets
// (src/parallel/grad_buckets), the groups (src/parallel/rank_grid). An iteration: the rank's
// schedule actions (PipelineRunner), the data-parallel reductions overlapped with the last
// backward, then Megatron's finalize_model_grads (sequence-parallel norm gradients over tp, the
// tied embedding over the embedding group), the gradient norm, clipping, AdamW and, with the
// distributed optimizer, the parameter all-gather. The host waits once per iteration, to read
// the loss and the gradient norm together (clipping needs it).
// Loss scaling is Megatron's: mean over the tokens of a micro-batch, / micro-batches, / dp.
// Data comes from a TokenSource by consumed samples (each data-parallel rank reads only its own
// samples, so every layout sees the same global batch); the learning rate of each step from an
// LrSchedule at the samples consumed before it (or the plan's constant lr). evaluate() runs a
// forward-only schedule through the same pipeline machinery (Megatron's forward_only=True).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <vector>

#include "exec/backend.hpp"
#include "exec/comm.hpp"
#include "exec/data/lr_schedule.hpp"
#include "exec/data/token_source.hpp"
#include "exec/model/stage_model.hpp"
#include "exec/parallel/grad_sync.hpp"
#include "exec/parallel/optimizer.hpp"
#include "exec/runner/pipeline_runner.hpp"
#include "exec/tracer.hpp"
#include "src/batch/microbatch_calculator.hpp"
#include "src/plan/plan.hpp"
#include "src/schedule/schedule.hpp"

namespace mplan::exec {

// Throws mplan::Error (naming the field) when the executor cannot run `plan`: context or expert
// parallelism, fp16, fp8 / fp4, bf16 main gradients (grads_in_fp32 false), optimizer state in a
// dtype other than fp32 (the precision-aware optimizer), Megatron-FSDP, partial distributed
// optimizers, or a model that is not a GPT of the reference kind (a valid plan is assumed: call
// validate() first). Nothing is allocated before it.
void check_executable(const Plan& plan);

// The activation dtype of a plan's precision (bf16 -> bf16, fp32 -> f32).
DType act_dtype_of(const Plan& plan);

// The communication groups the trainer uses of world rank `world_rank`, from RankGrid (Megatron's
// member order): "tp", "dp", "pp", "mp" (tp x pp, Megatron's model-parallel group), "embedding"
// (first and last stage; a group of one on the other stages, so every rank builds the same kinds)
// and "world".
GroupMembers trainer_groups(const ParallelConfig& parallel, int world_rank);

struct TrainerOptions {
  DType act = DType::kBF16;
  uint64_t seed = 1234;      // weights (and the synthetic tokens)
  int64_t bucket_elems = 0;  // data-parallel bucket size in parameters; 0: Megatron's rule
  bool trace = true;         // timing marks around every action (traces, breakdown, watchdog)
  bool trace_ops = false;    // and around every kernel of a pass (--trace-level ops)
  // Training samples by global index; null: synthetic tokens from `seed` (SyntheticTokenSource,
  // the benchmark data). Its samples must be seq_length + 1 tokens.
  std::shared_ptr<const TokenSource> data = nullptr;
  // The learning rate of each step; none: the plan's constant training.lr.
  std::optional<LrSchedule> lr_schedule = std::nullopt;
};

struct StepResult {
  double loss = 0;       // mean per-token loss of the global batch
  double grad_norm = 0;  // global L2 norm of the gradient, before clipping
  float clip_coefficient = 1;
  double lr = 0;                  // the learning rate of this step's update
  int64_t num_microbatches = 0;   // of this iteration (ramp-up changes it)
  int64_t global_batch_size = 0;  // samples of this iteration
};

struct EvalResult {
  double loss = 0;      // mean per-token loss over every evaluated sample
  int64_t samples = 0;  // samples evaluated (iterations · global batch)
};

class Trainer {
 public:
  // `world` must hold the groups of trainer_groups() of this rank.
  Trainer(const Plan& plan, Backend& backend, CommWorld& world, const TrainerOptions& options);
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  // One iteration. Without `apply_update` the gradients are computed (and reduced) but the
  // weights stay as they were: what tests compare across layouts.
  StepResult step(bool apply_update = true);
  // Megatron's evaluate(): `iterations` batches of the plan's (final) global batch size from
  // `source`, starting at global sample `first_sample`, forward only (a forward-only schedule,
  // StageModel's forward-only mode: no gradient buffer is touched). Every rank gets the loss.
  EvalResult evaluate(const TokenSource& source, int64_t first_sample, int64_t iterations);

  // The learning rate of a step taken after `consumed_samples` samples.
  double lr_at(int64_t consumed_samples) const;
  // Resuming from a checkpoint: the counters of a run that stopped after `iterations`.
  void restore_counters(int64_t iterations, int64_t consumed_samples, int64_t optimizer_steps);

  int64_t iterations_done() const { return iteration_; }
  int64_t consumed_samples() const { return consumed_; }
  int64_t optimizer_steps() const { return updates_; }
  const TokenSource& data() const { return *data_; }
  const std::optional<LrSchedule>& lr_schedule() const { return lr_schedule_; }
  // The micro-batch count of the next iteration.
  int64_t num_microbatches() const;
  const Plan& plan() const { return plan_; }
  Backend& backend() { return be_; }
  CommWorld& world() { return world_; }
  int64_t pp_rank() const { return pp_rank_; }
  StageModel& model() { return *model_; }
  Optimizer& optimizer() { return *optimizer_; }
  GradSync& grad_sync() { return *sync_; }
  Tracer* tracer() { return tracer_.get(); }
  Progress& progress() { return progress_; }
  const Schedule& schedule(int64_t microbatches, bool forward_only = false);

 private:
  void queue_iteration(const Schedule& sched, const IterationBatch& batch);
  void run_iteration(int64_t M, const Schedule& sched, const IterationBatch& batch);
  void finalize_grads();
  void reduce_scalars();

  Plan plan_;
  Backend& be_;
  CommWorld& world_;
  Comm& tp_;
  Comm& dp_;
  Comm& pp_;
  int64_t pp_rank_ = 0;
  bool embedding_member_ = false;
  int64_t iteration_ = 0;  // iterations started
  int64_t consumed_ = 0;   // samples consumed (Megatron's consumed_train_samples)
  int64_t updates_ = 0;    // optimizer steps taken
  MicrobatchCalculator batches_;
  std::map<std::pair<int64_t, bool>, Schedule> schedules_;  // by micro-batches, forward_only
  std::shared_ptr<const TokenSource> data_;
  std::optional<LrSchedule> lr_schedule_;
  std::unique_ptr<Tracer> tracer_;
  Progress progress_;
  std::unique_ptr<StageModel> model_;
  std::unique_ptr<GradSync> sync_;
  std::unique_ptr<Optimizer> optimizer_;
  std::unique_ptr<PipelineRunner> runner_;
  Tensor inputs_, targets_;  // (M, s, b) i32: one iteration's micro-batches
  int64_t data_capacity_ = 0;
  Tensor scalars_;   // (2) f32: [0] sum of token losses, [1] sum of squared grads
  Tensor sp_stage_;  // f32: gradients summed over tp under sequence parallelism
  std::vector<int32_t> host_inputs_, host_targets_;
  // Iteration graphs (backends that record them, one rank; MPLAN_CUDA_GRAPH=0 turns them off):
  // the iteration's device work from the gradients' start to the reduced scalars, recorded once
  // per micro-batch count after one iteration of that count ran directly in this process (its
  // GEMM plans, tables and scratch made), and replayed after.
  struct CapturedIteration {
    int graph = -1;
    int64_t iteration = 0;         // the iteration recorded (0-based)
    std::vector<TraceSpan> spans;  // the tracer's spans and marks of the recording
    int marks = 0;
  };
  bool graphs_ = false;
  std::set<int64_t> ran_directly_;                 // micro-batch counts run without a graph
  std::map<int64_t, CapturedIteration> captured_;  // by micro-batches
};

}  // namespace mplan::exec
