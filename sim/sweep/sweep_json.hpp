// JSON form of a sweep (schema_version 2: candidates carry tp_comm_overlap and Megatron-FSDP): the
// request, the counts, the rejected candidates by rule, the top K ranked candidates with their
// figures, and where the best plan was written. Invariant: everything but wall_time_s and threads
// is a function of the request alone.
#pragma once

#include <cstdint>
#include <string>

#include "sim/sweep/sweep.hpp"
#include "src/common/json_reader.hpp"

namespace mplan::sweep {

inline constexpr int kSweepSchemaVersion = 2;

// One candidate with its figures: {rank (when ranked), layout {tp, cp, ep, etp, pp, vpp, dp,
// first_stage_layers, last_stage_layers}, micro_batch_size, num_microbatches, sequence_parallel,
// recompute, distributed_optimizer, schedule, iteration_time_s, tokens_per_s,
// model_tflops_per_gpu, mfu, bubble_fraction, breakdown {compute_s, tp_comm_s, ...: seconds of
// the busiest stage, as simulate --json}, peak_bytes, capacity_bytes (usable), fits}.
Json evaluated_to_json(const Evaluated& e, int64_t global_batch_size, int64_t rank = 0);

// {schema_version, model, cluster, gpus, global_batch_size, seq_length, objective, fixed, top_k,
//  memory_headroom (fraction), gpu_memory_bytes, usable_memory_bytes, counts {candidates, invalid,
//  out_of_memory, out_of_memory_pruned, skipped, simulated, fits}, invalid_by_rule [{rule, example,
//  count}], top [...], best_plan (path or null), wall_time_s, threads}.
Json sweep_to_json(const SweepRequest& request, const SweepResult& result, int64_t top_k,
                   const std::string& best_plan_path);

}  // namespace mplan::sweep
