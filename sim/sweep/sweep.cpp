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
#include <thread>

#include "sim/sweep/candidate_space.hpp"
#include "sim/sweep/memory_bound.hpp"
#include "sim/sweep/rejection_rule.hpp"
#include "sim/sweep/time_bound.hpp"
#include "src/common/error.hpp"
#include "src/plan/validate.hpp"

namespace mplan::sweep {

const char* to_string(Objective o) { return o == Objective::kThroughput ? "throughput" : "memory"; }

Plan plan_of(const SweepRequest& request, const Candidate& c) {
  Plan p = request.base;
  p.parallel = to_parallel(c, request.global_batch_size);
  return p;
}

bool ranks_before(const Evaluated& a, const Evaluated& b, Objective objective) {
  const Figures& x = a.figures;
  const Figures& y = b.figures;
  if (objective == Objective::kThroughput) {
    if (x.tokens_per_s != y.tokens_per_s) return x.tokens_per_s > y.tokens_per_s;
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

Figures figures_of(const sim::SimulationResult& r) {
  Figures f;
  f.iteration_time_s = r.iteration_time_s;
  f.tokens_per_s = r.tokens_per_s;
  f.model_tflops_per_gpu = r.model_tflops_per_gpu;
  f.mfu = r.mfu;
  f.bubble_fraction = r.bubble_fraction;
  f.breakdown = r.breakdown;
  f.peak_bytes = r.peak_bytes;
  f.capacity_bytes = r.capacity_bytes;
  f.fits = r.fits;
  return f;
}

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
      if (options.progress && running > 0) {
        lock.unlock();
        options.progress(done.load(), total);
        lock.lock();
      }
    }
  }
  for (auto& th : pool) th.join();
  for (auto& p : partials)
    if (p.error) std::rethrow_exception(p.error);
}

}  // namespace

SweepResult run_sweep(const SweepRequest& request, const SweepOptions& options) {
  MPLAN_CHECK(options.threads >= 1, "threads ", options.threads);
  const auto t0 = std::chrono::steady_clock::now();
  SpaceInputs space{&request.base.model, request.gpus, request.base.cluster.gpus_per_node,
                    request.global_batch_size, request.fixed};
  const std::vector<Candidate> candidates = enumerate_candidates(space);
  const int64_t total = static_cast<int64_t>(candidates.size());
  const int threads = static_cast<int>(
      std::max<int64_t>(1, std::min<int64_t>(options.threads, (total + kBlock - 1) / kBlock)));
  const bool by_rank = options.prune && options.top_k > 0;
  const bool time_key = by_rank && request.objective == Objective::kThroughput;
  const int64_t capacity = request.base.cluster.gpu.memory_bytes();

  std::vector<Partial> partials(static_cast<size_t>(threads));
  std::atomic<int64_t> done{0};
  std::atomic<bool> stop{false};

  // ---- Phase 1: classify every candidate. ----------------------------------------------------
  run_threads(threads, options, done, total, partials, stop, [&](int t) {
    Partial& out = partials[static_cast<size_t>(t)];
    Plan plan = request.base;
    TimeBoundScratch scratch;
    for (int64_t begin = t * kBlock; begin < total; begin += threads * kBlock) {
      if (stop.load(std::memory_order_relaxed)) return;
      const int64_t end = std::min(total, begin + kBlock);
      for (int64_t i = begin; i < end; ++i) {
        const Candidate& c = candidates[static_cast<size_t>(i)];
        plan.parallel = to_parallel(c, request.global_batch_size);
        std::vector<Violation> violations = validate(plan);
        if (!violations.empty()) {
          ++out.invalid;
          RuleTally& r = out.rules[rejection_rule(violations.front())];
          ++r.count;
          if (i < r.first_index) {
            r.first_index = i;
            r.example = to_string(violations.front());
          }
          done.fetch_add(1, std::memory_order_relaxed);
          continue;
        }
        int64_t mem_bound = 0;
        if (options.prune) {
          mem_bound = memory_lower_bound(plan);
          if (mem_bound > capacity) {
            ++out.pruned;
            out.least_known_peak = std::min(out.least_known_peak, mem_bound);
            done.fetch_add(1, std::memory_order_relaxed);
            continue;
          }
        }
        Pending p;
        p.index = i;
        p.key = time_key ? iteration_time_lower_bound_ns(plan, sim::SimOptions{}, scratch)
                         : (by_rank ? mem_bound : 0);
        p.cost = static_cast<int64_t>(c.pp) * c.vpp *
                 (request.global_batch_size / (static_cast<int64_t>(c.micro_batch_size) * c.dp));
        out.pending.push_back(p);
      }
    }
  });

  std::vector<Pending> pending;
  for (Partial& p : partials) {
    pending.insert(pending.end(), p.pending.begin(), p.pending.end());
    p.pending.clear();
  }
  std::sort(pending.begin(), pending.end(), [&](const Pending& a, const Pending& b) {
    if (by_rank && a.key != b.key) return a.key < b.key;
    return a.index < b.index;
  });

  // ---- Phase 2: simulate, in rounds when skipping what cannot reach the top K. -------------
  // The K best rank keys that fit so far (iteration time in seconds, or peak bytes).
  std::vector<double> best_keys;
  auto threshold = [&]() -> double {
    if (!by_rank || static_cast<int64_t>(best_keys.size()) < options.top_k) return -1;
    return best_keys[static_cast<size_t>(options.top_k - 1)];
  };
  int64_t skipped = 0;
  std::vector<size_t> counted(static_cast<size_t>(threads), 0);  // evaluated already in best_keys
  size_t next = 0;
  while (next < pending.size()) {
    size_t end = by_rank ? std::min(pending.size(), next + kRound) : pending.size();
    if (const double th = threshold(); th >= 0) {
      // Skip from the first candidate whose bound is worse than the K-th best (strictly, with a
      // margin for the seconds <-> nanoseconds conversion).
      size_t cut = next;
      while (cut < end) {
        const double key = static_cast<double>(pending[cut].key);
        const double th_units = time_key ? th * 1e9 : th;
        if (key > th_units * (1 + 1e-9) + (time_key ? 1 : 0)) break;
        ++cut;
      }
      if (cut < end) {
        skipped = static_cast<int64_t>(pending.size() - cut);
        end = cut;
      }
    }
    // Split the round by estimated cost: each job to the least loaded thread, in job order.
    std::vector<std::vector<size_t>> jobs(static_cast<size_t>(threads));
    std::vector<int64_t> load(static_cast<size_t>(threads), 0);
    for (size_t j = next; j < end; ++j) {
      const size_t t =
          static_cast<size_t>(std::min_element(load.begin(), load.end()) - load.begin());
      jobs[t].push_back(j);
      load[t] += pending[j].cost + 1;
    }
    run_threads(threads, options, done, total, partials, stop, [&](int t) {
      Partial& out = partials[static_cast<size_t>(t)];
      Plan plan = request.base;
      sim::SimulationResult r;
      for (size_t j : jobs[static_cast<size_t>(t)]) {
        if (stop.load(std::memory_order_relaxed)) return;
        const Candidate& c = candidates[static_cast<size_t>(pending[j].index)];
        plan.parallel = to_parallel(c, request.global_batch_size);
        if (options.simulate) {
          r = options.simulate(plan);
        } else {
          sim::simulate(plan, sim::SimOptions{}, r);
        }
        out.least_known_peak = std::min(out.least_known_peak, r.peak_bytes);
        out.evaluated.push_back({pending[j].index, c, figures_of(r)});
        done.fetch_add(1, std::memory_order_relaxed);
      }
    });
    next = end;
    if (skipped > 0) break;
    if (by_rank) {
      for (size_t t = 0; t < partials.size(); ++t) {
        const std::vector<Evaluated>& ev = partials[t].evaluated;
        for (size_t k = counted[t]; k < ev.size(); ++k)
          if (ev[k].figures.fits)
            best_keys.push_back(time_key ? ev[k].figures.iteration_time_s
                                         : static_cast<double>(ev[k].figures.peak_bytes));
        counted[t] = ev.size();
      }
      std::sort(best_keys.begin(), best_keys.end());
      if (static_cast<int64_t>(best_keys.size()) > options.top_k)
        best_keys.resize(static_cast<size_t>(options.top_k));
    }
  }
  if (options.progress) options.progress(total, total);

  // ---- Merge. ----------------------------------------------------------------------------------
  SweepResult res;
  res.candidates = total;
  res.threads = threads;
  res.capacity_bytes = capacity;
  res.skipped = skipped;
  res.top_k = skipped > 0 ? options.top_k : 0;
  std::map<std::string, RuleTally> rules;
  int64_t least = INT64_MAX;
  for (auto& p : partials) {
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
    if (res.evaluated[i].figures.fits) {
      ++res.fits;
      res.ranking.push_back(static_cast<int64_t>(i));
    }
  }
  res.out_of_memory = res.simulated - res.fits + res.out_of_memory_pruned;
  std::sort(res.ranking.begin(), res.ranking.end(), [&](int64_t a, int64_t b) {
    return ranks_before(res.evaluated[static_cast<size_t>(a)],
                        res.evaluated[static_cast<size_t>(b)], request.objective);
  });
  MPLAN_CHECK(
      res.invalid + res.out_of_memory_pruned + res.skipped + res.simulated == res.candidates,
      "sweep counts do not add up");
  res.wall_time_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return res;
}

}  // namespace mplan::sweep
