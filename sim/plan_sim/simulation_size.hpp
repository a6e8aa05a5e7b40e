// The size of the simulation a plan asks for, and the limit that keeps `simulate` and `sweep`
// bounded in time and memory whatever the input: the engine runs one op per pass of each
// micro-batch, model chunk and engine rank, so a plan of 10^7 micro-batches would take minutes and
// gigabytes. Invariant: a plan within the limit simulates in about a second or less.
#pragma once

#include <cstdint>
#include <optional>

#include "src/plan/plan.hpp"
#include "src/plan/validate.hpp"

namespace mplan::sim {

// Micro-batch passes per iteration the engine would run: micro-batches x virtual stages x engine
// ranks (pp, or every GPU with full_grid). Measured: 2.5 · 10^5 passes take 0.8 s and 0.4 GB.
inline constexpr int64_t kMaxSimulatedPasses = int64_t{1} << 18;

int64_t simulated_passes(const Plan& plan, bool full_grid);

// nullopt within the limit; else the broken limit on parallel.global_batch_size, with the numbers
// and what would bring them down. Call on a valid plan.
std::optional<Violation> check_simulation_size(const Plan& plan, bool full_grid);

}  // namespace mplan::sim
