// TrainingLoop: Megatron-LM's pretrain() around the Trainer — the data (TrainingData), the
// learning rate of every step (LrSchedule), a checkpoint loaded before the first step, then
// iterations from there: every log_interval a Megatron log line; every eval_interval an
// evaluation of eval_iters batches of the validation split (forward only) continuing where the
// last one stopped; every save_interval a checkpoint. At the end of training (iteration
// train_iters) the validation split once more, a final checkpoint and the test split — Megatron's
// order; a run that stops earlier (max_iterations, a segment of a longer run) saves and stops.
// Timing: an iteration lasts from its start to the next one's (the host waits once inside each
// step); before an evaluation or a save the device is synchronized, so neither counts in it.
// Printing happens on world rank 0 only, through the `print` callback.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "exec/runner/checkpoint.hpp"
#include "exec/runner/metrics_log.hpp"
#include "exec/runner/trainer.hpp"
#include "exec/runner/training_data.hpp"

namespace mplan::exec {

struct LoopOptions {
  int64_t train_iters = 0;      // the run's length (>= 1)
  int64_t max_iterations = -1;  // iterations in this call; -1: up to train_iters
  int64_t log_interval = 1;
  std::optional<LrSchedule> lr_schedule;  // none: the plan's constant lr (benchmarks)
  std::optional<CheckpointInfo> load;     // found by find_checkpoint before allocation
  std::string save;                       // "" : no checkpoints
  int64_t save_interval = 0;
  std::string tensorboard_dir;  // "" : no metrics files
  TrainerOptions trainer;       // act, seed, buckets, tracing (data and lr are filled in here)
  std::function<void(const std::string&)> print;  // rank 0's lines (with '\n'); null: quiet
  SaveHooks save_hooks;                           // tests
};

struct IterationRecord {
  int64_t iteration = 0;  // 1-based, as Megatron counts (after the step)
  double loss = 0, grad_norm = 0;
  double lr = 0;  // the learning rate of this iteration's update
  int64_t microbatches = 0, global_batch = 0;
  int64_t consumed_samples = 0;  // after the iteration
  double seconds = 0;            // this rank's wall time of the iteration
};

struct EvalRecord {
  int64_t iteration = 0;
  std::string split;   // "valid" or "test"
  std::string prefix;  // Megatron's: "iteration 200", "the end of training for val data", ...
  double loss = 0;
  int64_t samples = 0;
  int64_t first_sample = 0;  // of the split, where this evaluation started
};

// Spans of one traced iteration, copied out of the Tracer (which forgets them at the next step).
struct TraceSnapshot {
  std::vector<TraceSpan> spans;
  std::vector<int64_t> begin_ns, end_ns;
  std::vector<Tracer::Timed> timed() const;
};

struct TrainingResult {
  int64_t start_iteration = 0;  // where this call began (a loaded checkpoint's iteration, or 0)
  std::vector<IterationRecord> iterations;
  std::vector<EvalRecord> evaluations;
  std::vector<std::string> saved;  // checkpoint directories written
  bool reached_end = false;        // iteration train_iters was reached
  TraceSnapshot last_trace;        // the last training iteration
};

class TrainingLoop {
 public:
  // Builds the Trainer over `data` and loads `options.load` into it.
  TrainingLoop(const Plan& plan, TrainingData data, Backend& backend, CommWorld& world,
               LoopOptions options);
  ~TrainingLoop();
  TrainingLoop(const TrainingLoop&) = delete;
  TrainingLoop& operator=(const TrainingLoop&) = delete;

  Trainer& trainer() { return *trainer_; }
  const TrainingData& data() const { return data_; }
  int64_t consumed_valid_samples() const { return consumed_valid_; }
  // Runs the iterations of this call, with the evaluations and checkpoints they reach.
  TrainingResult run();

 private:
  void print(const std::string& s) const;
  void evaluate(const TokenSource& source, const std::string& split, const std::string& prefix,
                int64_t first_sample, TrainingResult& result);
  void save(TrainingResult& result);
  CheckpointState state() const;

  Plan plan_;
  TrainingData data_;
  Backend& be_;
  CommWorld& world_;
  LoopOptions o_;
  std::unique_ptr<Trainer> trainer_;
  std::unique_ptr<MetricsLog> metrics_;
  int64_t consumed_valid_ = 0;
  int64_t last_saved_ = -1;
};

}  // namespace mplan::exec
