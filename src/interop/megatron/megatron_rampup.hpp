// Batch ramp-up between the plan's form (RampupBatchSize: START INCR SAMPLES, Megatron-LM's legacy
// --rampup-batch-size) and the current Megatron-LM's --step-batch-size-schedule
// ("THRESHOLD:BATCH ..."). Invariant: rampup_as_steps() reproduces the legacy calculator sample by
// sample, and steps_as_rampup() returns a ramp-up only when rampup_as_steps() gives the steps back.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "src/batch/rampup_batch_size.hpp"

namespace mplan {

// The global batch after `consumed_samples` under the legacy --rampup-batch-size schedule
// (Megatron-LM's RampupBatchsizeNumMicroBatchesCalculator), whose final batch is `global_batch`.
int64_t legacy_rampup_batch(const RampupBatchSize& r, int64_t global_batch,
                            int64_t consumed_samples);
// The same schedule as --step-batch-size-schedule entries: (threshold in samples, batch size),
// strictly increasing thresholds starting at 0.
std::vector<std::pair<int64_t, int64_t>> rampup_as_steps(const RampupBatchSize& r,
                                                         int64_t global_batch);

// Python's int(float(text) * multiplier) for Megatron-LM's "2.4B"-style numbers; nullopt when
// `text` is not one.
std::optional<int64_t> parse_suffixed(std::string text);

// The entries of --step-batch-size-schedule as (threshold in samples, batch), as
// StepBatchsizeNumMicroBatchesCalculator parses them (thresholds in tokens, divided by
// `seq_length`). Throws Error "--step-batch-size-schedule: ..." on a malformed schedule.
std::vector<std::pair<int64_t, int64_t>> parse_step_schedule(const std::string& text,
                                                             int64_t seq_length);

// The legacy ramp-up that gives exactly `steps`, when there is one.
std::optional<RampupBatchSize> steps_as_rampup(
    const std::vector<std::pair<int64_t, int64_t>>& steps);

}  // namespace mplan
