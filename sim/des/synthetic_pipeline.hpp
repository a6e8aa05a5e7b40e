// A synthetic 1F1B pipeline program built directly on the engine, with uniform costs: for the
// closed-form tests (makespan (m + p - 1)(f + b), activation peaks) and the speed benchmark.
// Invariant: the per-stage op order is Megatron's non-interleaved 1F1B (warm-up forwards
// min(p - s - 1, m), then one-forward-one-backward, then cool-down backwards), and every
// activation is alive from the start of its layer's forward to the end of its backward.
#pragma once

#include <cstdint>

#include "sim/des/program.hpp"

namespace mplan::des {

struct SyntheticPipeline {
  int32_t stages = 4;            // p
  int32_t microbatches = 8;      // m
  int32_t layers_per_stage = 1;  // L: forward and backward ops per micro-batch per stage
  int64_t forward_ns = 0;        // per layer (split into two halves when tp_collective_ns > 0)
  int64_t backward_ns = 0;       // per layer
  int64_t p2p_ns = 0;            // send/recv of one activation or gradient
  int64_t tp_collective_ns =
      0;                     // > 0: two TP collectives per layer and pass, on the compute stream
  int64_t dp_reduce_ns = 0;  // > 0: a DP gradient reduction per layer after its last backward
  int64_t optimizer_ns = 0;  // > 0: an optimizer step after all DP reductions
  int64_t activation_bytes = 0;  // per layer per micro-batch
};

// Streams of each rank in the synthetic program.
enum SyntheticStream : int32_t {
  kSynCompute = 0,
  kSynSendFwd = 1,
  kSynRecvFwd = 2,
  kSynSendBwd = 3,
  kSynRecvBwd = 4,
  kSynDp = 5,
  kSynNumStreams = 6
};
inline constexpr int kSynActivationClass = 3;

// Rebuilds `out` (reset to one rank per stage) as the synthetic 1F1B program.
void build_synthetic_1f1b(const SyntheticPipeline& s, Program& out);

}  // namespace mplan::des
