// A lower bound on the iteration time simulate() reports for a valid plan, so the sweep can skip
// candidates that cannot reach the top K. Invariant (tested against simulate() on whole sweeps):
// iteration_time_lower_bound_ns(plan) <= simulate(plan).iteration_time_s · 1e9.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/plan_sim/chunk_costs.hpp"
#include "sim/plan_sim/layer_costs.hpp"
#include "sim/plan_sim/simulate.hpp"
#include "sim/plan_sim/stage_groups.hpp"
#include "sim/sweep/recent_ring.hpp"
#include "src/parallel/rank_grid.hpp"
#include "src/plan/plan.hpp"

namespace mplan::sweep {

// Reused from plan to plan by one thread (the groups' placement per stage of the last few rank
// grids, the cost and chunk tables).
struct TimeBoundScratch {
  // A grid's groups per stage on nodes of gpus_per_node. Several are kept: the cp exchange, the
  // innermost axis of the sweep, changes the all-to-all group size candidate by candidate.
  struct Grid {
    ParallelConfig key;
    int64_t gpus_per_node = 0;
    std::vector<sim::StageGroups> groups;
  };
  RecentRing<Grid, 8> grids;
  std::vector<int64_t> ranks;
  sim::PlanCosts costs;
  sim::ChunkTable chunks;
};

// Per pipeline stage: the time of one micro-batch's passes, summed over the stage's model chunks
// (ns), as the simulator's lowering costs them.
struct StagePassTimes {
  int64_t forward_ns = 0;
  int64_t backward_ns = 0;         // whole backward, with recomputation
  int64_t backward_input_ns = 0;   // zero-bubble B
  int64_t backward_weight_ns = 0;  // zero-bubble W
  // The cheapest of the stage's chunks: what one micro-batch's pass through the stage costs at
  // least, whichever chunk it is in (the pipeline's fill and drain).
  int64_t min_chunk_forward_ns = 0;
  int64_t min_chunk_backward_ns = 0;
  int64_t min_chunk_backward_input_ns = 0;
  // Megatron-FSDP: one micro-batch's collectives on the data-parallel stream over the stage's
  // chunks (sim::fsdp_collectives: two parameter all-gathers and one gradient reduce-scatter
  // each); 0 without FSDP.
  int64_t fsdp_ns = 0;
};
std::vector<StagePassTimes> stage_pass_times(const Plan& plan, const sim::SimOptions& options,
                                             TimeBoundScratch& scratch);

// Over the pipeline stages s, the largest of fill + work + drain. Work: stage s's compute-stream
// passes, M micro-batches x, over its model chunks, the forward + backward (zb-h1: forward +
// input-gradient + weight-gradient), each costed exactly as the simulator's lowering costs it
// (sim/plan_sim: build_plan_costs and append_stage_chunks, with the stage's communication
// groups); the lowering puts every one of them on the stage's compute stream, which runs one op
// at a time. Fill: stage s's first pass is a forward that stages 0 .. s-1 have run first, each
// taking at least its cheapest chunk's forward. Drain: after stage s's last backward (zb-h1: its
// last input-gradient pass, with every forward and input-gradient pass of the stage before it),
// that micro-batch's backward still runs on stages s-1 .. 0, each at least its cheapest chunk's.
// Point-to-point transfers and every wait beyond these chains only lengthen the iteration.
// With Megatron-FSDP also: the data-parallel stream, which runs one collective at a time, carries
// M x fsdp_ns of the stage's gathers and reduce-scatters within the iteration.
// `options` must be the ones simulate() is called with.
int64_t iteration_time_lower_bound_ns(const Plan& plan, const sim::SimOptions& options,
                                      TimeBoundScratch& scratch);

}  // namespace mplan::sweep
