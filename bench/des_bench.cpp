// Speed of the discrete-event engine on a synthetic 1F1B program the size the sweep needs:
// pp 8, 64 micro-batches, 96 layers (12 per stage). Two granularities: one forward and one
// backward op per stage and micro-batch ("coarse"), and per layer with two TP collectives per
// layer and pass, a DP reduction per layer and activation memory ("per_layer", ~4.4e4 ops).
// Each is timed as run only (program built once) and as build + run (what a sweep pays per plan).
#include <benchmark/benchmark.h>

#include "sim/des/engine.hpp"
#include "sim/des/synthetic_pipeline.hpp"

namespace {

using namespace mplan::des;

SyntheticPipeline shape(bool per_layer) {
  SyntheticPipeline s;
  s.stages = 8;
  s.microbatches = 64;
  s.layers_per_stage = per_layer ? 12 : 1;
  s.forward_ns = per_layer ? 1'000'000 : 12'000'000;
  s.backward_ns = 2 * s.forward_ns;
  s.p2p_ns = 50'000;
  s.tp_collective_ns = per_layer ? 80'000 : 0;
  s.dp_reduce_ns = per_layer ? 3'000'000 : 36'000'000;
  s.optimizer_ns = 5'000'000;
  s.activation_bytes = int64_t{1} << 28;
  return s;
}

void set_counters(benchmark::State& state, const Program& p) {
  state.counters["ops"] = static_cast<double>(p.num_ops());
  state.counters["ns_per_op"] = benchmark::Counter(
      static_cast<double>(p.num_ops()),
      benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

void BM_Run(benchmark::State& state) {
  Program p;
  build_synthetic_1f1b(shape(state.range(0) != 0), p);
  Engine e;
  SimResult r;
  for (auto _ : state) {
    e.run(p, r);
    benchmark::DoNotOptimize(r.makespan_ns);
  }
  if (!r.completed) state.SkipWithError("deadlock");
  set_counters(state, p);
}

void BM_BuildAndRun(benchmark::State& state) {
  const SyntheticPipeline s = shape(state.range(0) != 0);
  Program p;
  Engine e;
  SimResult r;
  for (auto _ : state) {
    build_synthetic_1f1b(s, p);
    e.run(p, r);
    benchmark::DoNotOptimize(r.makespan_ns);
  }
  if (!r.completed) state.SkipWithError("deadlock");
  set_counters(state, p);
}

BENCHMARK(BM_Run)->ArgName("per_layer")->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_BuildAndRun)->ArgName("per_layer")->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
