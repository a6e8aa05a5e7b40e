// Speed of mplan::sim::simulate() on the plan size a sweep evaluates: GPT-3 175B (96 layers) on
// 64 GPUs of dgx-a100-80g, tp 8, pp 8, 64 micro-batches — lowering, engine run and read-back,
// one rank per pipeline stage. Also: interleaved (vpp 3), and the full grid (64 engine ranks).
// "allocs_per_call" counts heap allocations of one steady-state call (this program replaces the
// global operator new to count them; the result's per-stage vector is reused as the sweep does).
#include <benchmark/benchmark.h>

#include <atomic>
#include <cstdlib>
#include <new>

#include "sim/plan_sim/simulate.hpp"
#include "src/plan/plan.hpp"

namespace {
std::atomic<int64_t> g_allocs{0};
}

// The replacement pair is malloc/free on both sides; GCC cannot see that through inlining.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

void* operator new(std::size_t n) {
  g_allocs.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace {

using namespace mplan;

Plan bench_plan(int64_t vpp) {
  Plan p;
  p.model = load_model("gpt3-175b");
  p.cluster = load_cluster("dgx-a100-80g");
  p.parallel.tp = 8;
  p.parallel.pp = 8;
  p.parallel.dp = 1;
  p.parallel.vpp = vpp;
  p.parallel.schedule = vpp > 1 ? ScheduleKind::kInterleaved : ScheduleKind::k1F1B;
  p.parallel.sequence_parallel = true;
  p.parallel.recompute = Recompute::kSelective;
  p.parallel.micro_batch_size = 1;
  p.parallel.global_batch_size = 64;
  return p;
}

void BM_Simulate(benchmark::State& state) {
  const Plan plan = bench_plan(state.range(0));
  sim::SimOptions opt;
  opt.full_grid = state.range(1) != 0;
  sim::SimulationResult r;
  sim::simulate(plan, opt, r);  // warm the per-thread context
  sim::simulate(plan, opt, r);
  const int64_t before = g_allocs.load();
  sim::simulate(plan, opt, r);
  const int64_t allocs = g_allocs.load() - before;
  for (auto _ : state) {
    sim::simulate(plan, opt, r);
    benchmark::DoNotOptimize(r.iteration_time_s);
  }
  state.counters["ops"] = static_cast<double>(r.num_ops);
  state.counters["allocs_per_call"] = static_cast<double>(allocs);
}

}  // namespace

// Arguments: vpp, full grid.
BENCHMARK(BM_Simulate)->Args({1, 0})->Args({3, 0})->Args({1, 1})->Unit(benchmark::kMicrosecond);
BENCHMARK_MAIN();
