// The sweep in two phases: (1) validate, memory bound and rank-key bound of every candidate, in
// blocks of kBlock, block b to thread b mod T; (2) simulate what is left — with top_k in order of
// the bound, in rounds of kRound, the K-th-best threshold updated between rounds only — each job
// to the least loaded thread by estimated cost (pp·vpp·M). Results are merged in enumeration
// order, so nothing depends on the thread count or on timing.
#include "sim/sweep/sweep.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "sim/plan_sim/simulation_size.hpp"
#include "sim/sweep/candidate_space.hpp"
#include "sim/sweep/memory_bound.hpp"
#include "sim/sweep/recent_ring.hpp"
#include "sim/sweep/rejection_rule.hpp"
#include "sim/sweep/stack_rules.hpp"
#include "sim/sweep/time_bound.hpp"
#include "src/common/error.hpp"
#include "src/plan/validate.hpp"

namespace mplan::sweep {

const char* to_string(Objective o) { return o == Objective::kThroughput ? "throughput" : "memory"; }

Plan plan_of(const SweepRequest& request, const Candidate& c) {
  Plan p = request.base;
  apply_candidate(c, request.global_batch_size, p);
  return p;
}

SpaceInputs space_inputs(const SweepRequest& request) {
  SpaceInputs in{&request.base.model, request.gpus, request.base.cluster.gpus_per_node,
                 request.global_batch_size, request.fixed};
  in.implementation = request.base.training.implementation;
  return in;
}

bool ranks_before(const Evaluated& a, const Evaluated& b, Objective objective) {
  const Figures& x = a.figures;
  const Figures& y = b.figures;
  if (objective == Objective::kThroughput) {
    if (x.tokens_per_s != y.tokens_per_s) return x.tokens_per_s > y.tokens_per_s;
    // Offloading whose copies hide behind the layers saves memory at no time in the model, but
    // takes host memory and PCIe bandwidth: at equal speed the plan that keeps its activations.
    const bool ox = a.candidate.offload_layers > 0 || a.candidate.offload_modules != 0;
    const bool oy = b.candidate.offload_layers > 0 || b.candidate.offload_modules != 0;
    if (ox != oy) return oy;
    if (x.peak_bytes != y.peak_bytes) return x.peak_bytes < y.peak_bytes;
  } else {
    if (x.peak_bytes != y.peak_bytes) return x.peak_bytes < y.peak_bytes;
    if (x.tokens_per_s != y.tokens_per_s) return x.tokens_per_s > y.tokens_per_s;
  }
  return a.index < b.index;
}

sim::SimulationResult simulate_with(const SweepOptions& options, const Plan& plan) {
  return options.simulate ? options.simulate(plan) : sim::simulate(plan, sim::SimOptions{});
}

namespace {

constexpr int64_t kBlock = 16;
constexpr int64_t kRound = 64;

struct RuleTally {
  int64_t count = 0;
  int64_t first_index = INT64_MAX;
  std::string example;
};

// A valid candidate not proved out of memory: what phase 2 works on.
struct Pending {
  int64_t index = 0;
  int64_t key = 0;   // lower bound on its rank key (ns or bytes); 0 without top_k
  int64_t cost = 0;  // estimated simulation cost, for the work split
};

// What one thread found.
struct Partial {
  int64_t invalid = 0;
  int64_t pruned = 0;
  int64_t least_known_peak = INT64_MAX;
  std::map<std::string, RuleTally> rules;
  std::vector<Pending> pending;
  std::vector<Evaluated> evaluated;
  std::exception_ptr error;
};

Figures figures_of(const sim::SimulationResult& r, int64_t usable_bytes) {
  Figures f;
  f.iteration_time_s = r.iteration_time_s;
  f.tokens_per_s = r.tokens_per_s;
  f.model_tflops_per_gpu = r.model_tflops_per_gpu;
  f.mfu = r.mfu;
  f.bubble_fraction = r.bubble_fraction;
  f.breakdown = r.breakdown;
  f.peak_bytes = r.peak_bytes;
  f.capacity_bytes = usable_bytes;
  f.fits = r.peak_bytes <= usable_bytes;
  return f;
}

// The time guard: throws an Error saying how far the sweep got once the limit has passed.
struct Deadline {
  double limit_s = 0;
  std::chrono::steady_clock::time_point start;
  const std::atomic<int64_t>* done = nullptr;
  int64_t total = 0;

  void check() const {
    if (limit_s <= 0) return;
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (s <= limit_s) return;
    throw Error(cat("--time-limit: the sweep stopped after ", static_cast<int64_t>(s), " s with ",
                    done->load(), " of ", total,
                    " candidates judged; narrow the search with --fix (e.g. --fix tp=8,pp=8) or "
                    "allow more time with --time-limit SECONDS"));
  }
};

// Runs body(thread) on `threads` threads while the calling thread reports progress; rethrows
// the first failure (in thread order) after all have stopped.
template <class Body>
void run_threads(int threads, const SweepOptions& options, std::atomic<int64_t>& done,
                 int64_t total, std::vector<Partial>& partials, std::atomic<bool>& stop,
                 Body body) {
  std::mutex mu;
  std::condition_variable cv;
  int running = threads;
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      try {
        body(t);
      } catch (...) {
        partials[static_cast<size_t>(t)].error = std::current_exception();
        stop.store(true);
      }
      std::lock_guard<std::mutex> lock(mu);
      --running;
      cv.notify_all();
    });
  }
  {
    std::unique_lock<std::mutex> lock(mu);
    const auto interval = std::chrono::duration<double>(options.progress_interval_s);
    while (running > 0) {
      cv.wait_for(lock, interval);
      if (!options.progress || running == 0) continue;
      lock.unlock();
      options.progress(done.load(), total);
      lock.lock();
    }
  }
  for (auto& th : pool) th.join();
  for (auto& p : partials)
    if (p.error) std::rethrow_exception(p.error);
}

// What the phases share.
struct SweepState {
  const SweepRequest& request;
  const SweepOptions& options;
  std::vector<Candidate> candidates;
  int64_t total = 0;
  int threads = 1;
  bool by_rank = false;   // simulate in order of a bound, skipping what cannot reach the top K
  bool time_key = false;  // the bound is on iteration time (else on peak memory)
  int64_t usable = 0;     // bytes a plan may use
  std::vector<Partial> partials;
  std::atomic<int64_t> done{0};
  std::atomic<bool> stop{false};
  Deadline deadline;

  SweepState(const SweepRequest& r, const SweepOptions& o) : request(r), options(o) {}

  template <class Body>
  void run(Body body) {
    run_threads(threads, options, done, total, partials, stop, body);
  }
};

void count_invalid(Partial& out, int64_t index, const Violation& first) {
  ++out.invalid;
  RuleTally& r = out.rules[rejection_rule(first)];
  ++r.count;
  if (index < r.first_index) {
    r.first_index = index;
    r.example = to_string(first);
  }
}

// A candidate whose costs the simulator refuses (an operation beyond its range, a profile without
// a curve the layout needs) is invalid under that message, not the end of the sweep.
Violation violation_of(const Error& e) {
  const std::string what = e.what();
  const size_t colon = what.find(": ");
  const bool has_field = colon != std::string::npos && what.find(' ') > colon &&
                         (what.rfind("cluster", 0) == 0 || what.rfind("model", 0) == 0);
  if (has_field) return {what.substr(0, colon), what.substr(colon + 2)};
  return {"cluster", what};
}

// The candidate with the plain cp exchange (p2p): candidates equal under it differ only in the
// exchange, the enumeration's innermost axis.
Candidate with_p2p(Candidate c) {
  c.cp_comm_type = CpCommType::kP2p;
  c.cp_a2a = 0;
  return c;
}

// Whether `p`'s cp exchange breaks none of validate()'s exchange rules (the only rules, and
// nothing else in validation, the simulation-size check or the memory bound, that read it).
bool exchange_is_valid(const Plan& plan) {
  const ParallelConfig& p = plan.parallel;
  const std::vector<int64_t>& h = p.hierarchical_context_parallel_sizes;
  if (!h.empty() && h[0] * h[1] != p.cp) return false;
  if (p.cp_comm_type == CpCommType::kA2aP2p && h.empty()) return false;
  const int64_t a2a = cp_a2a_size(p);
  return a2a <= 1 || cp_a2a_splits_heads(plan.model, p.tp, a2a);
}

// Phase 1's verdict on the last candidate a thread judged: its first violation (or none) and
// memory bound, which every candidate differing from it only in a valid cp exchange shares.
struct Verdict {
  bool set = false;
  Candidate key;  // with_p2p of the candidate
  std::optional<Violation> first;
  int64_t mem_bound = 0;
};

// validate(), the stack rules and the simulation-size check: the first violation, or none; and
// the memory bound (with pruning) when there is none. Reused from `last` when it holds.
const Verdict& judge(SweepState& st, const Candidate& c, const Plan& plan, Verdict& last) {
  const Candidate key = with_p2p(c);
  if (last.set && last.key == key && exchange_is_valid(plan)) return last;
  last = Verdict{true, key, std::nullopt, 0};
  std::vector<Violation> violations = validate(plan);
  if (violations.empty())
    if (auto v = stack_violation(plan)) violations.push_back(*v);  // not run by the stack
  if (violations.empty()) {
    if (auto v = sim::check_simulation_size(plan, false)) violations.push_back(*v);
  }
  if (!violations.empty()) {
    last.first = violations.front();
  } else if (st.options.prune) {
    last.mem_bound = memory_lower_bound(plan);
  }
  if (!exchange_is_valid(plan)) last.set = false;  // its verdict is its own
  return last;
}

// The time bounds a thread computed last, by candidate with the distributed optimizer cleared:
// the bound counts compute-stream passes and Megatron-FSDP's collectives, which the distributed
// optimizer does not change (its reductions and gathers are bucketed on the data-parallel
// stream; TimeBound.SameWithOrWithoutTheDistributedOptimizer), so candidates differing only in
// it — a few apart in the enumeration — share one.
struct BoundCache {
  RecentRing<std::pair<Candidate, int64_t>, 32> entries;
  static Candidate key_of(Candidate c) {
    if (!c.use_megatron_fsdp) c.distributed_optimizer = false;
    return c;
  }
  const int64_t* find(const Candidate& key) const {
    const auto* e = entries.find_if([&](const auto& kv) { return kv.first == key; });
    return e ? &e->second : nullptr;
  }
  void put(const Candidate& key, int64_t bound) { entries.next_slot() = {key, bound}; }
};

// Phase 1 for one candidate: invalid (a rule, or too large to simulate), proved out of memory,
// or pending with its bound and estimated cost (counted done when phase 2 simulates it).
void classify(SweepState& st, int64_t i, Plan& plan, TimeBoundScratch& scratch, BoundCache& bounds,
              Verdict& last, Partial& out) {
  const Candidate& c = st.candidates[static_cast<size_t>(i)];
  const int64_t gbs = st.request.global_batch_size;
  apply_candidate(c, gbs, plan);
  const Verdict& v = judge(st, c, plan, last);
  if (v.first) {
    count_invalid(out, i, *v.first);
    st.done.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  int64_t mem_bound = 0;
  if (st.options.prune) {
    mem_bound = v.mem_bound;
    if (mem_bound > st.usable) {
      ++out.pruned;
      out.least_known_peak = std::min(out.least_known_peak, mem_bound);
      st.done.fetch_add(1, std::memory_order_relaxed);
      return;
    }
  }
  Pending p;
  p.index = i;
  try {
    if (st.time_key) {
      const Candidate key = BoundCache::key_of(c);
      if (const int64_t* known = bounds.find(key)) {
        p.key = *known;
      } else {
        p.key = iteration_time_lower_bound_ns(plan, sim::SimOptions{}, scratch);
        bounds.put(key, p.key);
      }
    } else {
      p.key = st.by_rank ? mem_bound : 0;
    }
  } catch (const Error& e) {
    count_invalid(out, i, violation_of(e));
    st.done.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  p.cost = static_cast<int64_t>(c.pp) * c.vpp * num_microbatches(c, gbs);
  out.pending.push_back(p);
}

// Phase 1: every candidate classified, block b of kBlock to thread b mod T; the pending ones
// gathered and ordered (by bound when ranking by it, else by enumeration index).
std::vector<Pending> classify_all(SweepState& st) {
  st.run([&](int t) {
    Partial& out = st.partials[static_cast<size_t>(t)];
    Plan plan = st.request.base;
    TimeBoundScratch scratch;
    BoundCache bounds;
    Verdict last;
    for (int64_t begin = t * kBlock; begin < st.total; begin += st.threads * kBlock) {
      if (st.stop.load(std::memory_order_relaxed)) return;
      st.deadline.check();
      const int64_t end = std::min(st.total, begin + kBlock);
      for (int64_t i = begin; i < end; ++i) classify(st, i, plan, scratch, bounds, last, out);
    }
  });
  std::vector<Pending> pending;
  for (Partial& p : st.partials) {
    pending.insert(pending.end(), p.pending.begin(), p.pending.end());
    p.pending.clear();
  }
  std::sort(pending.begin(), pending.end(), [&](const Pending& a, const Pending& b) {
    if (st.by_rank && a.key != b.key) return a.key < b.key;
    return a.index < b.index;
  });
  return pending;
}

// The first position in [next, end) whose bound is worse than the K-th best rank key `th`
// (strictly, with a margin for the seconds <-> nanoseconds conversion); `end` when none is.
size_t first_out_of_reach(const SweepState& st, const std::vector<Pending>& pending, size_t next,
                          size_t end, double th) {
  const double th_units = st.time_key ? th * 1e9 : th;
  const double margin = st.time_key ? 1 : 0;
  for (size_t cut = next; cut < end; ++cut)
    if (static_cast<double>(pending[cut].key) > th_units * (1 + 1e-9) + margin) return cut;
  return end;
}

// Simulates pending[next, end): each job to the least loaded thread by estimated cost, in order.
void simulate_range(SweepState& st, const std::vector<Pending>& pending, size_t next, size_t end) {
  std::vector<std::vector<size_t>> jobs(static_cast<size_t>(st.threads));
  std::vector<int64_t> load(static_cast<size_t>(st.threads), 0);
  for (size_t j = next; j < end; ++j) {
    const size_t t = static_cast<size_t>(std::min_element(load.begin(), load.end()) - load.begin());
    jobs[t].push_back(j);
    load[t] += pending[j].cost + 1;
  }
  st.run([&](int t) {
    Partial& out = st.partials[static_cast<size_t>(t)];
    Plan plan = st.request.base;
    sim::SimulationResult r;
    for (size_t j : jobs[static_cast<size_t>(t)]) {
      if (st.stop.load(std::memory_order_relaxed)) return;
      st.deadline.check();
      const Candidate& c = st.candidates[static_cast<size_t>(pending[j].index)];
      apply_candidate(c, st.request.global_batch_size, plan);
      try {
        if (st.options.simulate) {
          r = st.options.simulate(plan);
        } else {
          sim::simulate(plan, sim::SimOptions{}, r);
        }
      } catch (const Error& e) {
        count_invalid(out, pending[j].index, violation_of(e));
        st.done.fetch_add(1, std::memory_order_relaxed);
        continue;
      }
      out.least_known_peak = std::min(out.least_known_peak, r.peak_bytes);
      out.evaluated.push_back({pending[j].index, c, figures_of(r, st.usable)});
      st.done.fetch_add(1, std::memory_order_relaxed);
    }
  });
}

// The K best rank keys that fit (iteration time in seconds, or peak bytes), updated with what
// the threads evaluated since the last call.
struct TopKeys {
  std::vector<double> keys;
  std::vector<size_t> counted;  // per thread: evaluated entries already in `keys`

  void update(const SweepState& st) {
    counted.resize(st.partials.size(), 0);
    for (size_t t = 0; t < st.partials.size(); ++t) {
      const std::vector<Evaluated>& ev = st.partials[t].evaluated;
      for (size_t k = counted[t]; k < ev.size(); ++k)
        if (ev[k].figures.fits)
          keys.push_back(st.time_key ? ev[k].figures.iteration_time_s
                                     : static_cast<double>(ev[k].figures.peak_bytes));
      counted[t] = ev.size();
    }
    std::sort(keys.begin(), keys.end());
    if (static_cast<int64_t>(keys.size()) > st.options.top_k)
      keys.resize(static_cast<size_t>(st.options.top_k));
  }
  // The K-th best, or -1 while fewer than K fit.
  double threshold(const SweepState& st) const {
    if (!st.by_rank || static_cast<int64_t>(keys.size()) < st.options.top_k) return -1;
    return keys[static_cast<size_t>(st.options.top_k - 1)];
  }
};

// Phase 2: simulates what is pending — with ranking by bound in rounds of kRound, stopping at
// the first candidate whose bound keeps it out of the top K. Returns how many were skipped.
int64_t simulate_pending(SweepState& st, const std::vector<Pending>& pending) {
  TopKeys top;
  size_t next = 0;
  while (next < pending.size()) {
    size_t end = st.by_rank ? std::min(pending.size(), next + kRound) : pending.size();
    size_t cut = end;
    if (const double th = top.threshold(st); th >= 0)
      cut = first_out_of_reach(st, pending, next, end, th);
    simulate_range(st, pending, next, cut);
    if (cut < end) return static_cast<int64_t>(pending.size() - cut);
    next = end;
    if (st.by_rank) top.update(st);
  }
  return 0;
}

// Counts, rules and evaluated candidates of all threads, in enumeration order; the ranking.
SweepResult merge(SweepState& st, int64_t skipped) {
  SweepResult res;
  res.candidates = st.total;
  res.threads = st.threads;
  res.capacity_bytes = st.usable;
  res.gpu_memory_bytes = st.request.base.cluster.gpu.memory_bytes();
  res.skipped = skipped;
  res.top_k = skipped > 0 ? st.options.top_k : 0;
  std::map<std::string, RuleTally> rules;
  int64_t least = INT64_MAX;
  for (auto& p : st.partials) {
    res.invalid += p.invalid;
    res.out_of_memory_pruned += p.pruned;
    least = std::min(least, p.least_known_peak);
    for (auto& [rule, t] : p.rules) {
      RuleTally& r = rules[rule];
      r.count += t.count;
      if (t.first_index < r.first_index) {
        r.first_index = t.first_index;
        r.example = t.example;
      }
    }
    res.evaluated.insert(res.evaluated.end(), std::make_move_iterator(p.evaluated.begin()),
                         std::make_move_iterator(p.evaluated.end()));
  }
  res.least_known_peak_bytes = least == INT64_MAX ? 0 : least;
  std::sort(res.evaluated.begin(), res.evaluated.end(),
            [](const Evaluated& a, const Evaluated& b) { return a.index < b.index; });
  for (const auto& [rule, t] : rules) res.invalid_by_rule.push_back({rule, t.example, t.count});
  std::stable_sort(res.invalid_by_rule.begin(), res.invalid_by_rule.end(),
                   [](const RuleCount& a, const RuleCount& b) { return a.count > b.count; });
  res.simulated = static_cast<int64_t>(res.evaluated.size());
  for (size_t i = 0; i < res.evaluated.size(); ++i) {
    if (!res.evaluated[i].figures.fits) continue;
    ++res.fits;
    res.ranking.push_back(static_cast<int64_t>(i));
  }
  res.out_of_memory = res.simulated - res.fits + res.out_of_memory_pruned;
  std::sort(res.ranking.begin(), res.ranking.end(), [&](int64_t a, int64_t b) {
    return ranks_before(res.evaluated[static_cast<size_t>(a)],
                        res.evaluated[static_cast<size_t>(b)], st.request.objective);
  });
  MPLAN_CHECK(
      res.invalid + res.out_of_memory_pruned + res.skipped + res.simulated == res.candidates,
      "sweep counts do not add up");
  return res;
}

}  // namespace

int64_t SweepRequest::usable_memory_bytes() const {
  const double keep = std::clamp(1.0 - memory_headroom, 0.0, 1.0);
  return static_cast<int64_t>(static_cast<double>(base.cluster.gpu.memory_bytes()) * keep);
}

SweepResult run_sweep(const SweepRequest& request, const SweepOptions& options) {
  MPLAN_CHECK(options.threads >= 1, "threads ", options.threads);
  const auto t0 = std::chrono::steady_clock::now();
  SweepState st(request, options);
  st.candidates = enumerate_candidates(space_inputs(request));
  st.total = static_cast<int64_t>(st.candidates.size());
  st.threads = static_cast<int>(
      std::max<int64_t>(1, std::min<int64_t>(options.threads, (st.total + kBlock - 1) / kBlock)));
  st.by_rank = options.prune && options.top_k > 0;
  st.time_key = st.by_rank && request.objective == Objective::kThroughput;
  st.usable = request.usable_memory_bytes();
  st.partials.resize(static_cast<size_t>(st.threads));
  st.deadline = Deadline{options.time_limit_s, t0, &st.done, st.total};

  const std::vector<Pending> pending = classify_all(st);
  const int64_t skipped = simulate_pending(st, pending);
  if (options.progress) options.progress(st.total, st.total);
  SweepResult res = merge(st, skipped);
  res.wall_time_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return res;
}

}  // namespace mplan::sweep
