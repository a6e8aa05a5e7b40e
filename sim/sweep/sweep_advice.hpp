// What the sweep says when a request cannot give a plan: before enumerating (a GPU count that is
// no whole number of nodes, more nodes than the cluster has), and after a sweep that found no
// valid plan or none that fits in memory. Every message is one line saying why and what would
// help (a GPU count that works, found by probing); the CLI prints it and exits 2.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "sim/sweep/sweep.hpp"

namespace mplan::sweep {

// The largest --gpus a sweep takes (as validate()'s largest GPU count).
inline constexpr int64_t kMaxSweepGpus = int64_t{1} << 20;

// Throws Error("--gpus: ..." / "--global-batch: ...") when no candidate can be valid whatever
// its layout: gpus outside 1 .. kMaxSweepGpus, not a whole number of nodes (a count below one
// node may use part of it), more nodes than the cluster has or several nodes without a network,
// global batch < 1.
void check_request(const SweepRequest& request);

// A warning when the global batch is too small for the GPU count: the best plan keeps fewer
// micro-batches per pipeline than it has stages (its pipeline idles most of the time), or the
// GPUs leave each data-parallel rank less than one micro-batch of the smallest size. Says the
// smallest sensible global batch; nullopt when the batch is fine.
std::optional<std::string> batch_warning(const SweepRequest& request, const Candidate& best);

// True when some candidate for request.gpus passes validate() (stops at the first).
bool has_valid_candidate(const SweepRequest& request);

// The closest GPU count below (direction -1) or above (+1) request.gpus, in whole nodes, within
// `max_steps` nodes, for which some candidate is valid.
std::optional<int64_t> nearest_valid_gpus(const SweepRequest& request, int direction,
                                          int64_t max_steps = 16);

// The smallest of 2N, 4N, ..., up to `max_factor` x N GPUs (whole nodes, within the cluster) on
// which some valid plan fits in memory according to simulate(): valid candidates are tried in
// order of their memory lower bound, at most `max_simulations` per GPU count.
std::optional<int64_t> smallest_fitting_gpus(const SweepRequest& request,
                                             const SweepOptions& options, int64_t max_factor = 1024,
                                             int64_t max_simulations = 64);

// The one-line message for a finished sweep with no fitting plan (result.fits == 0); probes
// other GPU counts to say what would help.
std::string explain_no_plan(const SweepRequest& request, const SweepResult& result,
                            const SweepOptions& options);

}  // namespace mplan::sweep
