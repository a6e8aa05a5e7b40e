// The sweep's worker loop. Work split: candidates in blocks of kBlock, block b to thread
// b mod T (a fixed assignment); each thread keeps its own plan, counters and results, merged
// afterwards in enumeration order, so nothing depends on timing.
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

namespace {

constexpr int64_t kBlock = 16;

struct RuleTally {
  int64_t count = 0;
  int64_t first_index = INT64_MAX;
  std::string example;
};

// What one worker thread found.
struct Partial {
  int64_t invalid = 0;
  int64_t pruned = 0;
  int64_t least_known_peak = INT64_MAX;
  std::map<std::string, RuleTally> rules;
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

void work(const SweepRequest& request, const SweepOptions& options,
          const std::vector<Candidate>& candidates, int thread, int threads,
          std::atomic<int64_t>& done, std::atomic<bool>& stop, Partial& out) {
  try {
    Plan plan = request.base;
    const int64_t capacity = plan.cluster.gpu.memory_bytes();
    const int64_t n = static_cast<int64_t>(candidates.size());
    for (int64_t begin = thread * kBlock; begin < n; begin += threads * kBlock) {
      if (stop.load(std::memory_order_relaxed)) return;
      const int64_t end = std::min(n, begin + kBlock);
      for (int64_t i = begin; i < end; ++i) {
        const Candidate& c = candidates[static_cast<size_t>(i)];
        plan.parallel = to_parallel(c, request.global_batch_size);
        std::vector<Violation> violations = validate(plan);
        if (!violations.empty()) {
          ++out.invalid;
          RuleTally& t = out.rules[rejection_rule(violations.front())];
          ++t.count;
          if (i < t.first_index) {
            t.first_index = i;
            t.example = to_string(violations.front());
          }
          continue;
        }
        if (options.prune) {
          const int64_t bound = memory_lower_bound(plan);
          if (bound > capacity) {
            ++out.pruned;
            out.least_known_peak = std::min(out.least_known_peak, bound);
            continue;
          }
        }
        sim::SimulationResult r =
            options.simulate ? options.simulate(plan) : sim::simulate(plan, sim::SimOptions{});
        out.least_known_peak = std::min(out.least_known_peak, r.peak_bytes);
        out.evaluated.push_back({i, c, figures_of(r)});
      }
      done.fetch_add(end - begin, std::memory_order_relaxed);
    }
  } catch (...) {
    out.error = std::current_exception();
    stop.store(true);
  }
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

  std::vector<Partial> partials(static_cast<size_t>(threads));
  std::atomic<int64_t> done{0};
  std::atomic<bool> stop{false};
  std::mutex mu;
  std::condition_variable cv;
  int running = threads;
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      work(request, options, candidates, t, threads, done, stop, partials[static_cast<size_t>(t)]);
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
  if (options.progress) options.progress(total, total);

  SweepResult res;
  res.candidates = total;
  res.threads = threads;
  res.capacity_bytes = request.base.cluster.gpu.memory_bytes();
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
  MPLAN_CHECK(res.invalid + res.out_of_memory_pruned + res.simulated == res.candidates,
              "sweep counts do not add up");
  res.wall_time_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return res;
}

}  // namespace mplan::sweep
