// MicrobatchCalculator: micro-batches per iteration from global batch, micro batch and data
// parallel size, constant or with Megatron-LM's batch-size ramp-up (--rampup-batch-size START
// INCR SAMPLES). Invariant: a constructed calculator satisfies every rule Megatron's
// Constant/RampupBatchsizeNumMicroBatchesCalculator asserts at construction, and at() reproduces
// its update() bit for bit (same double division, same truncation).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "src/batch/rampup_batch_size.hpp"

namespace mplan {

// The inputs of Megatron's calculators (megatron/core/num_microbatches_calculator.py).
struct MicrobatchSpec {
  int64_t global_batch_size = 0;               // --global-batch-size (the final one with ramp-up)
  int64_t micro_batch_size = 0;                // --micro-batch-size
  int64_t data_parallel_size = 0;              // data parallel size
  std::optional<RampupBatchSize> rampup;       // --rampup-batch-size START INCR SAMPLES
  bool decrease_batch_size_if_needed = false;  // --decrease-batch-size-if-needed
};

// Which input a broken rule concerns; the caller names it (a CLI flag or a plan field).
enum class BatchField { kGlobalBatch, kMicroBatch, kDataParallel, kRampup, kConsumedSamples };

// Names for the fields in error messages. Defaults: the plan file's field paths.
struct BatchFieldNames {
  const char* global_batch = "parallel.global_batch_size";
  const char* micro_batch = "parallel.micro_batch_size";
  const char* data_parallel = "parallel.dp";
  const char* rampup = "training.rampup_batch_size";
  const char* consumed_samples = "consumed_samples";
  const char* name(BatchField f) const;
};

// A broken rule: the field and the rule in Megatron's words, with the values.
struct BatchRuleError {
  BatchField field;
  std::string message;
};

// The first rule `spec` breaks at construction, in Megatron's order, or nullopt. Allocates only
// when a rule is broken.
std::optional<BatchRuleError> check_microbatch_spec(const MicrobatchSpec& spec);

// The micro-batch count G / (M x D) when every rule of a constant batch holds, else nullopt
// (no allocation): the one count the simulator, the sweep and the executor all use.
std::optional<int64_t> microbatches_if_valid(int64_t global_batch_size, int64_t micro_batch_size,
                                             int64_t data_parallel_size);

// Global batch size (G) / (micro (M) x dp (D)) for a constant batch size; throws Error naming
// `names.global_batch` with Megatron's message when G is not divisible by M x D.
int64_t num_microbatches(int64_t global_batch_size, int64_t micro_batch_size,
                         int64_t data_parallel_size, const BatchFieldNames& names = {});

// The batch at one point of training (Megatron's get_current_global_batch_size,
// get_current_running_global_batch_size and get_num_microbatches after update()).
struct BatchState {
  int64_t consumed_samples = 0;
  int64_t global_batch_size = 0;  // the scheduled global batch size
  int64_t running_global_batch_size =
      0;  // rounded down to M x D with decrease_batch_size_if_needed
  int64_t num_microbatches = 0;
  bool operator==(const BatchState&) const = default;
};

// One step of a ramp-up as a training run goes through it: from iteration `first_iteration`
// (0-based) at `state.consumed_samples`, `num_iterations` iterations use `state`'s batch size
// (num_iterations is 0 for the final step, which lasts to the end of training).
struct RampStep {
  int64_t first_iteration = 0;
  int64_t num_iterations = 0;
  BatchState state;
  bool operator==(const RampStep&) const = default;
};

class MicrobatchCalculator {
 public:
  // Throws Error "<field name>: <Megatron's message>" when check_microbatch_spec() fails.
  explicit MicrobatchCalculator(const MicrobatchSpec& spec, const BatchFieldNames& names = {});

  const MicrobatchSpec& spec() const { return spec_; }
  bool has_rampup() const { return spec_.rampup.has_value(); }
  int64_t micro_times_dp() const { return spec_.micro_batch_size * spec_.data_parallel_size; }

  // The batch after Megatron's update(consumed_samples, consistency_check). With the check on
  // (as in Megatron's training loop) and without decrease_batch_size_if_needed, a global batch
  // size not divisible by micro x dp throws Error with Megatron's message. consumed_samples < 0
  // is an Error naming the consumed-samples field.
  BatchState at(int64_t consumed_samples, bool consistency_check = true) const;

  // The first consumed-sample count >= `from` at which at() gives a different global batch size
  // than at(from), or nullopt once the final global batch size is reached.
  std::optional<int64_t> next_change(int64_t from) const;

  // The steps a training run goes through, consuming at(c).global_batch_size samples per
  // iteration from c = 0, up to and including the final global batch size. One step for a
  // constant batch size. Consistency is not checked here (see first_inconsistent_step()).
  std::vector<RampStep> ramp_steps() const;

  // The first step of a training run whose global batch size is not divisible by micro x dp
  // (Megatron's per-iteration consistency check fails there), or nullopt. Without
  // decrease_batch_size_if_needed only. Allocates nothing.
  std::optional<BatchState> first_inconsistent_step() const;

 private:
  MicrobatchSpec spec_;
  BatchFieldNames names_;
  double rampup_samples_per_increment_ = 0;  // Megatron: ramp_samples / num_increments (float)
  int64_t global_batch_at(int64_t consumed_samples) const;
  BatchState state_for(int64_t consumed_samples, int64_t global_batch_size) const;
  // Visits the (consumed_samples, global batch) pairs at which a run starts each step;
  // fn returns false to stop early.
  template <class Fn>
  void walk_steps(Fn&& fn) const;
};

}  // namespace mplan
