// run_sweep(): every candidate of the search space validated, bounded, simulated and ranked.
// Invariants: the result depends only on the request and the options — not on the thread count,
// not on the order threads finish in; and pruning never changes the top K: a candidate is left
// unsimulated only when a lower bound proves it out of memory (counted as out of memory, as if
// simulated) or, with top_k, proves it ranks below the K-th best (counted as skipped).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "sim/plan_sim/simulate.hpp"
#include "sim/sweep/candidate.hpp"
#include "sim/sweep/candidate_space.hpp"
#include "sim/sweep/fixed_axes.hpp"
#include "src/plan/plan.hpp"

namespace mplan::sweep {

enum class Objective { kThroughput, kMemory };
const char* to_string(Objective o);  // "throughput", "memory"

struct SweepRequest {
  Plan base;  // model, cluster and training of every candidate (base.parallel is not used)
  int64_t gpus = 0;
  int64_t global_batch_size = 0;
  FixedAxes fixed;
  Objective objective = Objective::kThroughput;
  // Fraction of GPU memory kept free: a plan fits when its peak is at most
  // usable_memory_bytes() (the CLI's --memory-headroom, 5 % by default there).
  double memory_headroom = 0;
  int64_t usable_memory_bytes() const;
};

using SimulateFn = std::function<sim::SimulationResult(const Plan&)>;

struct SweepOptions {
  int threads = 1;
  bool prune = true;  // skip simulating what memory_lower_bound() proves out of memory
  // > 0 (with prune): also skip what cannot reach the top `top_k` — candidates are simulated in
  // order of a lower bound on their rank key (iteration time: time_bound.hpp; peak memory for
  // the memory objective), in rounds of a fixed size, until the next one's bound is worse than
  // the top_k-th best that fits so far. The top top_k is the same as without pruning.
  int64_t top_k = 0;
  // Empty: mplan::sim::simulate with default options. A replacement (tests) must keep the
  // bounds' promises: peak >= memory_lower_bound() and, with top_k, time >= the time bound.
  SimulateFn simulate;
  // Called on the calling thread about every progress_interval_s while the workers run, and
  // once at the end with done == total.
  std::function<void(int64_t done, int64_t total)> progress;
  double progress_interval_s = 0.1;
  // > 0: a sweep still running after this many seconds stops with an Error that says how far it
  // got and how to narrow it (the CLI's --time-limit). A guard only: results never depend on it.
  double time_limit_s = 0;
};

// The figures of one simulated candidate (simulate()'s result without the per-stage detail).
struct Figures {
  double iteration_time_s = 0;
  double tokens_per_s = 0;
  double model_tflops_per_gpu = 0;
  double mfu = 0;
  double bubble_fraction = 0;
  sim::TimeBreakdown breakdown;
  int64_t peak_bytes = 0;
  int64_t capacity_bytes = 0;  // the usable memory (after the request's headroom)
  bool fits = false;           // peak_bytes <= capacity_bytes
};

struct Evaluated {
  int64_t index = 0;  // position in the enumeration (the final tie-break)
  Candidate candidate;
  Figures figures;
};

// Candidates validate() rejected, grouped by the rule of their first violation.
struct RuleCount {
  std::string rule;     // rejection_rule(): field and words, numbers as '#'
  std::string example;  // the first such violation in enumeration order, with its numbers
  int64_t count = 0;
};

struct SweepResult {
  // candidates = invalid + out_of_memory_pruned + skipped + simulated; simulated = fits + the
  // simulated ones out of memory.
  int64_t candidates = 0;
  int64_t invalid = 0;  // validate() rejects it, too large to simulate, or its costs are refused
  int64_t out_of_memory = 0;         // simulated and not fitting, plus pruned
  int64_t out_of_memory_pruned = 0;  // of those, proved by the lower bound without simulating
  int64_t skipped = 0;               // valid, not simulated: a bound keeps them below the top K
  int64_t simulated = 0;
  int64_t fits = 0;
  int64_t top_k = 0;  // the K of `skipped` (0 when nothing was skipped that way)
  std::vector<RuleCount> invalid_by_rule;  // most frequent first, then by rule
  std::vector<Evaluated> evaluated;        // every simulated candidate, in enumeration order
  std::vector<int64_t> ranking;            // positions in `evaluated` of fitting ones, best first
  // Least memory any valid candidate is known to need: its simulated peak, or its lower bound
  // when pruned (0 when no candidate is valid). No valid plan needs less.
  int64_t least_known_peak_bytes = 0;
  int64_t capacity_bytes = 0;    // usable memory per GPU: the GPU's less the headroom
  int64_t gpu_memory_bytes = 0;  // the GPU's memory
  double wall_time_s = 0;
  int threads = 1;

  const Evaluated& best() const { return evaluated.at(static_cast<size_t>(ranking.at(0))); }
};

// The same as `simulate` as run_sweep calls it (default: mplan::sim::simulate).
sim::SimulationResult simulate_with(const SweepOptions& options, const Plan& plan);

// The plan a candidate stands for: the request's model, cluster and training, with its layout
// and activation offloading (apply_candidate).
Plan plan_of(const SweepRequest& request, const Candidate& c);

// The search space of a request (model, GPUs, node size, batch, fixed axes, stack).
SpaceInputs space_inputs(const SweepRequest& request);

// True when `a` ranks before `b` under `objective` (throughput: tokens/s descending, then without
// activation offloading before with, then peak memory ascending; memory: peak ascending, then
// tokens/s descending; then enumeration index).
bool ranks_before(const Evaluated& a, const Evaluated& b, Objective objective);

SweepResult run_sweep(const SweepRequest& request, const SweepOptions& options);

}  // namespace mplan::sweep
