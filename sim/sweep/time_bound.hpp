// A lower bound on the iteration time simulate() reports for a valid plan, so the sweep can skip
// candidates that cannot reach the top K. Invariant (tested against simulate() on whole sweeps):
// iteration_time_lower_bound_ns(plan) <= simulate(plan).iteration_time_s · 1e9.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "sim/plan_sim/chunk_costs.hpp"
#include "sim/plan_sim/layer_costs.hpp"
#include "sim/plan_sim/simulate.hpp"
#include "sim/plan_sim/stage_groups.hpp"
#include "src/parallel/rank_grid.hpp"
#include "src/plan/plan.hpp"

namespace mplan::sweep {

// Reused from plan to plan by one thread (the last rank grid with its groups' placement per
// stage, the cost and chunk tables).
struct TimeBoundScratch {
  std::optional<RankGrid> grid;
  ParallelConfig grid_key;
  int64_t gpus_per_node = 0;
  std::vector<sim::StageGroups> groups;  // per stage, of `grid` on nodes of gpus_per_node
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
};
std::vector<StagePassTimes> stage_pass_times(const Plan& plan, const sim::SimOptions& options,
                                             TimeBoundScratch& scratch);

// The busiest pipeline stage's compute-stream work: M micro-batches x, over its model chunks, the
// forward + backward passes (zb-h1: forward + input-gradient + weight-gradient), each costed
// exactly as the simulator's lowering costs it (sim/plan_sim: build_plan_costs and
// append_stage_chunks, with the stage's communication groups). The lowering puts every one of
// those passes on that stage's compute stream, which runs one op at a time, so the iteration
// cannot be shorter. `options` must be the ones simulate() is called with.
int64_t iteration_time_lower_bound_ns(const Plan& plan, const sim::SimOptions& options,
                                      TimeBoundScratch& scratch);

}  // namespace mplan::sweep
