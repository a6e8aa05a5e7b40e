// RampupBatchSize: Megatron-LM's legacy batch-size ramp-up (--rampup-batch-size START INCR
// SAMPLES): the global batch grows from START by INCR over SAMPLES consumed samples up to the
// final --global-batch-size. Plain data; the rules live in MicrobatchCalculator.
#pragma once

#include <cstdint>

namespace mplan {

struct RampupBatchSize {  // --rampup-batch-size START INCR SAMPLES
  int64_t start = 0;
  int64_t increment = 0;
  int64_t samples = 0;
  bool operator==(const RampupBatchSize&) const = default;
};

}  // namespace mplan
