// Speed of a whole sweep (mplan::sweep::run_sweep, as `mplan sweep` runs it: prune, top 10) for
// every model preset at its default global batch on DGX H100 nodes, at GPU counts from one node
// to 16384 — including counts whose groups straddle nodes unevenly (24, 96, 384). Counters:
// candidates, simulated, fitting plans, candidates per second; the best plan's MFU. A sweep
// that finds no valid or no fitting plan is reported with zero fits, not as a failure.
#include <benchmark/benchmark.h>

#include <string>
#include <thread>
#include <vector>

#include "sim/sweep/sweep.hpp"
#include "sim/sweep/sweep_args.hpp"

namespace {

using namespace mplan;

const std::vector<std::string>& models() {
  static const std::vector<std::string> m = {"gpt3-1.3b",    "llama2-7b",  "llama3-8b",
                                             "mixtral-8x7b", "llama2-70b", "llama3-70b",
                                             "gpt3-175b",    "llama3-405b"};
  return m;
}

void BM_Sweep(benchmark::State& state) {
  const std::string& model = models()[static_cast<size_t>(state.range(0))];
  sweep::SweepArgs args;
  args.gpus = state.range(1);
  args.model = model;
  args.cluster = "dgx-h100";
  const sweep::SweepRequest req = sweep::make_request(args);
  sweep::SweepOptions opts;
  opts.threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  opts.top_k = 10;
  sweep::SweepResult r;
  for (auto _ : state) {
    r = sweep::run_sweep(req, opts);
    benchmark::DoNotOptimize(r.fits);
  }
  state.SetLabel(model + " on " + std::to_string(args.gpus));
  state.counters["candidates"] = static_cast<double>(r.candidates);
  state.counters["simulated"] = static_cast<double>(r.simulated);
  state.counters["fits"] = static_cast<double>(r.fits);
  state.counters["cand_per_s"] =
      r.wall_time_s > 0 ? static_cast<double>(r.candidates) / r.wall_time_s : 0;
  state.counters["best_mfu"] = r.fits > 0 ? r.best().figures.mfu : 0;
}

void Args(benchmark::internal::Benchmark* b) {
  for (int64_t m = 0; m < static_cast<int64_t>(models().size()); ++m)
    for (int64_t gpus : {8, 24, 96, 384, 1024, 4096, 16384}) b->Args({m, gpus});
}

}  // namespace

// One sweep per measurement: a sweep takes from milliseconds to tens of seconds.
BENCHMARK(BM_Sweep)->Apply(Args)->Iterations(1)->Unit(benchmark::kSecond)->UseRealTime();
BENCHMARK_MAIN();
