// Request checks and the no-plan explanations, with the probes behind their suggestions: a
// suggested GPU count is one the probe found a valid (or fitting) plan for, never a guess.
#include "sim/sweep/sweep_advice.hpp"

#include <algorithm>
#include <cstdio>

#include "sim/plan_sim/simulation_size.hpp"
#include "sim/sweep/candidate_space.hpp"
#include "sim/sweep/memory_bound.hpp"
#include "sim/sweep/sweep_json.hpp"
#include "src/common/error.hpp"
#include "src/common/units.hpp"
#include "src/plan/validate.hpp"

namespace mplan::sweep {

namespace {

std::string gib(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f GiB", bytes_to_gib(static_cast<double>(bytes)));
  return buf;
}

// Whether `gpus` is a GPU count the cluster can host (the node rules of validate()).
bool hostable(const ClusterSpec& c, int64_t gpus) {
  if (gpus < 1) return false;
  if (gpus > c.gpus_per_node && gpus % c.gpus_per_node != 0) return false;
  const int64_t nodes = (gpus + c.gpus_per_node - 1) / c.gpus_per_node;
  if (c.num_nodes > 0 && nodes > c.num_nodes) return false;
  if (nodes > 1 && !c.has_inter_node()) return false;
  return true;
}

int64_t max_gpus(const ClusterSpec& c) {
  if (!c.has_inter_node()) return c.gpus_per_node;
  return c.num_nodes > 0 ? c.num_nodes * c.gpus_per_node : INT64_MAX;
}

SweepRequest with_gpus(const SweepRequest& r, int64_t gpus) {
  SweepRequest out = r;
  out.gpus = gpus;
  return out;
}

std::vector<Candidate> candidates_of(const SweepRequest& r) {
  return enumerate_candidates(space_inputs(r));
}

}  // namespace

void check_request(const SweepRequest& r) {
  const ClusterSpec& c = r.base.cluster;
  if (r.gpus < 1) throw Error(cat("--gpus: must be >= 1, got ", r.gpus));
  if (r.gpus > kMaxSweepGpus)
    throw Error(
        cat("--gpus: must be <= ", kMaxSweepGpus, " (2^20, beyond any cluster), got ", r.gpus));
  if (r.global_batch_size < 1)
    throw Error(cat("--global-batch: must be >= 1, got ", r.global_batch_size));
  const int64_t g = c.gpus_per_node;
  if (r.gpus > g && r.gpus % g != 0) {
    const int64_t below = r.gpus / g * g, above = below + g;
    throw Error(cat("--gpus: ", r.gpus, " is not a whole number of nodes (", g,
                    " GPUs per node on cluster '", c.name, "'); use ", below, " or ", above,
                    " GPUs (a count below one node may use part of it)"));
  }
  const int64_t most = max_gpus(c);
  if (r.gpus > most) {
    if (!c.has_inter_node())
      throw Error(cat("--gpus: ", r.gpus, " GPUs need ", (r.gpus + g - 1) / g,
                      " nodes but cluster '", c.name,
                      "' describes no network between nodes; use at most ", g,
                      " GPUs or a cluster with inter_node links"));
    throw Error(cat("--gpus: ", r.gpus, " GPUs need ", (r.gpus + g - 1) / g, " nodes; cluster '",
                    c.name, "' has ", c.num_nodes, " (at most ", most, " GPUs)"));
  }
}

bool has_valid_candidate(const SweepRequest& r) {
  Plan plan = r.base;
  for (const Candidate& c : candidates_of(r)) {
    apply_candidate(c, r.global_batch_size, plan);
    if (validate(plan).empty()) return true;
  }
  return false;
}

std::optional<int64_t> nearest_valid_gpus(const SweepRequest& r, int direction, int64_t max_steps) {
  const ClusterSpec& c = r.base.cluster;
  const int64_t g = c.gpus_per_node;
  // Below one node every count is a candidate; from one node on, whole nodes.
  int64_t n = r.gpus;
  for (int64_t step = 0; step < max_steps; ++step) {
    if (direction < 0) {
      n = n > g ? (n - 1) / g * g : n - 1;
    } else {
      n = n >= g ? (n / g + 1) * g : n + 1;
    }
    if (n < 1 || n > kMaxSweepGpus || !hostable(c, n)) return std::nullopt;
    if (has_valid_candidate(with_gpus(r, n))) return n;
  }
  return std::nullopt;
}

std::optional<int64_t> smallest_fitting_gpus(const SweepRequest& r, const SweepOptions& options,
                                             int64_t max_factor, int64_t max_simulations) {
  const int64_t capacity = r.usable_memory_bytes();
  for (int64_t factor = 2; factor <= max_factor; factor *= 2) {
    const int64_t n = r.gpus * factor;
    if (n > max_gpus(r.base.cluster) || n > kMaxSweepGpus) break;
    if (!hostable(r.base.cluster, n)) continue;
    const SweepRequest probe = with_gpus(r, n);
    Plan plan = r.base;
    std::vector<std::pair<int64_t, Candidate>> valid;  // (lower bound, candidate)
    for (const Candidate& c : candidates_of(probe)) {
      apply_candidate(c, r.global_batch_size, plan);
      if (!validate(plan).empty() || sim::check_simulation_size(plan, false)) continue;
      const int64_t bound = memory_lower_bound(plan);
      if (bound <= capacity) valid.push_back({bound, c});
    }
    std::stable_sort(valid.begin(), valid.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    int64_t tried = 0;
    for (const auto& [bound, c] : valid) {
      if (tried++ >= max_simulations) break;
      apply_candidate(c, r.global_batch_size, plan);
      const sim::SimulationResult res = simulate_with(options, plan);
      if (res.peak_bytes <= capacity) return n;
    }
  }
  return std::nullopt;
}

std::optional<std::string> batch_warning(const SweepRequest& r, const Candidate& best) {
  const int64_t m = num_microbatches(best, r.global_batch_size);
  if (best.pp <= 1 || m >= best.pp) return std::nullopt;
  // With this layout, pp micro-batches of the smallest size per data-parallel rank.
  const int64_t sensible = static_cast<int64_t>(best.dp) * best.pp;
  return cat("warning: the global batch ", r.global_batch_size, " is too small for ", r.gpus,
             " GPUs: the best plan (", layout_label(best), ") has ", m, " micro-batch",
             m == 1 ? "" : "es", " per pipeline for its ", best.pp,
             " stages, so its pipeline idles most of the time; a global batch of at least ",
             sensible, " (dp ", best.dp, " x pp ", best.pp,
             " micro-batches of 1) keeps every stage busy (--global-batch)");
}

std::string explain_no_plan(const SweepRequest& r, const SweepResult& res,
                            const SweepOptions& options) {
  const std::string what = cat(r.base.model.name, " on ", r.gpus, " GPUs of ", r.base.cluster.name);
  const std::string fixed = r.fixed.empty() ? "" : cat(" with --fix ", to_string(r.fixed));
  if (res.candidates == 0)
    return cat("--fix: no candidate for ", what, fixed,
               ": the fixed values leave nothing to try (tp x cp x pp x dp must equal --gpus ",
               r.gpus, ")");
  if (res.invalid == res.candidates) {
    std::string why;
    for (size_t i = 0; i < res.invalid_by_rule.size() && i < 2; ++i)
      why += cat(i == 0 ? "" : "; then ", "'", res.invalid_by_rule[i].example, "' (",
                 res.invalid_by_rule[i].count, " candidates)");
    // dp above the global batch: every layout has more data-parallel ranks than sequences.
    int64_t least_dp = INT64_MAX;
    for (const Candidate& c : candidates_of(r)) least_dp = std::min<int64_t>(least_dp, c.dp);
    if (least_dp != INT64_MAX && least_dp > r.global_batch_size)
      return cat("--global-batch: ", r.global_batch_size, " sequences are too few for ", r.gpus,
                 " GPUs of ", r.base.cluster.name, fixed, ": every layout has at least ", least_dp,
                 " data-parallel ranks; give a global batch of at least ", least_dp,
                 " (a multiple of the data-parallel size) or fewer GPUs");
    std::string help;
    const auto below = nearest_valid_gpus(r, -1), above = nearest_valid_gpus(r, +1);
    if (below && above)
      help = cat("; ", *below, " or ", *above, " GPUs have valid plans");
    else if (below || above)
      help = cat("; ", below ? *below : *above, " GPUs have valid plans");
    else
      help = "; no nearby GPU count has one either: check --global-batch, --seq-length and --fix";
    return cat("--gpus: no valid plan for ", what, fixed, ": all ", res.candidates,
               " candidates break a rule, most often ", why, help);
  }
  std::string help;
  if (auto n = smallest_fitting_gpus(r, options))
    help = cat("; it fits on ", *n, " GPUs (--gpus ", *n, ")");
  else
    help = cat("; no count up to 1024 x ", r.gpus,
               " GPUs fits either: a GPU with more memory or a shorter --seq-length would help");
  return cat("--gpus: ", r.base.model.name, " does not fit on ", r.gpus, " GPUs of ",
             r.base.cluster.name, fixed, " (", gib(res.capacity_bytes),
             res.capacity_bytes < res.gpu_memory_bytes
                 ? cat(" usable of ", gib(res.gpu_memory_bytes), " each, --memory-headroom")
                 : std::string(" each"),
             "): all ", res.candidates - res.invalid,
             " valid plans run out of memory, the leanest needs at least ",
             gib(res.least_known_peak_bytes), help);
}

}  // namespace mplan::sweep
