// The work limit of one simulation: micro-batches x virtual stages x engine ranks.
#include "sim/plan_sim/simulation_size.hpp"

#include "src/batch/microbatch_calculator.hpp"
#include "src/common/error.hpp"

namespace mplan::sim {

int64_t simulated_passes(const Plan& plan, bool full_grid) {
  const ParallelConfig& p = plan.parallel;
  const int64_t microbatches = num_microbatches(p.global_batch_size, p.micro_batch_size, p.dp);
  const int64_t ranks = full_grid ? plan.world_size() : p.pp;
  return microbatches * p.vpp * ranks;
}

std::optional<Violation> check_simulation_size(const Plan& plan, bool full_grid) {
  const int64_t passes = simulated_passes(plan, full_grid);
  if (passes <= kMaxSimulatedPasses) return std::nullopt;
  const ParallelConfig& p = plan.parallel;
  const int64_t microbatches = num_microbatches(p.global_batch_size, p.micro_batch_size, p.dp);
  return Violation{
      "parallel.global_batch_size",
      cat(microbatches, " micro-batches x vpp ", p.vpp, " x ",
          full_grid ? cat(plan.world_size(), " GPUs (--full-grid)") : cat("pp ", p.pp), " = ",
          passes, " passes to simulate, above the simulator's limit of ", kMaxSimulatedPasses,
          "; a larger micro_batch_size or dp, or a smaller global batch, brings it down")};
}

}  // namespace mplan::sim
