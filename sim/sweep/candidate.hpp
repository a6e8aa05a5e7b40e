// Candidate: one point of the sweep's search space, a compact value: the parallel layout, the
// pipeline split, the micro-batch and the switches. to_parallel() turns it into the plan's
// ParallelConfig (the defaults of a plan file for every knob the sweep does not vary), so that a
// candidate and the plan file written for it are the same plan.
#pragma once

#include <cstdint>
#include <string>

#include "src/parallel/parallel_config.hpp"

namespace mplan::sweep {

struct Candidate {
  int32_t tp = 1, cp = 1, ep = 1, etp = 1, pp = 1, vpp = 1, dp = 1;
  int32_t micro_batch_size = 1;
  // Uneven pipeline split (Megatron's decoder_first/last_pipeline_num_layers); 0 = even split.
  int32_t first_stage_layers = 0;
  int32_t last_stage_layers = 0;
  ScheduleKind schedule = ScheduleKind::k1F1B;
  Recompute recompute = Recompute::kNone;
  bool sequence_parallel = false;
  bool distributed_optimizer = false;
  bool operator==(const Candidate&) const = default;
};

// The plan's parallel section for `c` with global batch `global_batch_size`. Full recompute is
// Megatron's uniform method with one layer per checkpoint; etp as given; everything else at the
// plan file's defaults (order tp-cp-ep-dp-pp, overlapped grad reduce and param gather).
ParallelConfig to_parallel(const Candidate& c, int64_t global_batch_size);

// Micro-batches per iteration of a candidate (src/batch's count: global batch / (micro-batch x
// dp)); 0 when the global batch does not divide into them.
int64_t num_microbatches(const Candidate& c, int64_t global_batch_size);

// Short layout label for tables: "tp8 pp16 dp1", with cp, ep, etp, vpp and the uneven split
// only when they matter ("tp4 cp2 pp8 vpp3 dp4", "pp16 (7+..+7)").
std::string layout_label(const Candidate& c);

}  // namespace mplan::sweep
