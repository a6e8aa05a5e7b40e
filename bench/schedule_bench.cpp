// Speed of schedule generation, validation and the timing pass at sweep sizes (pp up to 64,
// thousands of micro-batches). All three are linear in pp * vpp * microbatches.
#include <benchmark/benchmark.h>

#include "src/schedule/schedule.hpp"
#include "src/schedule/timeline.hpp"
#include "src/schedule/validate.hpp"

namespace mplan {
namespace {

ScheduleSpec spec_of(const benchmark::State& st) {
  ScheduleSpec s;
  s.pp = st.range(0);
  s.vpp = st.range(1);
  s.microbatches = st.range(2);
  s.kind = s.vpp > 1 ? ScheduleKind::kInterleaved : ScheduleKind::k1F1B;
  return s;
}

void set_counters(benchmark::State& st, const Schedule& s) {
  st.counters["actions"] = static_cast<double>(s.actions.size());
  st.counters["ns_per_action"] = benchmark::Counter(
      static_cast<double>(s.actions.size()),
      benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

void BM_Generate(benchmark::State& st) {
  const ScheduleSpec spec = spec_of(st);
  Schedule s;
  for (auto _ : st) {
    s = make_schedule(spec);
    benchmark::DoNotOptimize(s.actions.data());
  }
  set_counters(st, s);
}

void BM_Validate(benchmark::State& st) {
  const Schedule s = make_schedule(spec_of(st));
  for (auto _ : st) benchmark::DoNotOptimize(validate(s));
  set_counters(st, s);
}

void BM_Time(benchmark::State& st) {
  const Schedule s = make_schedule(spec_of(st));
  for (auto _ : st) benchmark::DoNotOptimize(time_schedule(s, {1, 2, 0}).makespan);
  set_counters(st, s);
}

// {pp, vpp, microbatches}
#define MPLAN_SCHEDULE_SIZES \
  Args({8, 1, 64})->Args({64, 1, 4096})->Args({16, 4, 1024})->Args({64, 2, 2048})
BENCHMARK(BM_Generate)->MPLAN_SCHEDULE_SIZES->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Validate)->MPLAN_SCHEDULE_SIZES->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Time)->MPLAN_SCHEDULE_SIZES->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace mplan

BENCHMARK_MAIN();
