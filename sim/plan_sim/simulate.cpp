// simulate(): per-thread context (program, engine, result arrays, a small schedule cache and the
// last RankGrid), lowering, one engine run, and the read-back of time breakdown and memory.
// Breakdown: on each stage's rank, the compute stream's timeline from 0 to the iteration's end is
// cut into its ops (each split by its PassCost) and the gaps between them; a gap is exposed
// pipeline (or data-parallel) communication while a transfer (or DP op) the next op waited on was
// running, and bubble otherwise. The stage with the most non-bubble time is reported.
#include <algorithm>
#include <deque>
#include <ostream>

#include "sim/des/engine.hpp"
#include "sim/plan_sim/lowering.hpp"
#include "sim/plan_sim/simulate.hpp"
#include "sim/plan_sim/simulation_trace.hpp"
#include "src/common/error.hpp"
#include "src/common/units.hpp"
#include "src/model/model_stats.hpp"
#include "src/plan/plan_rules.hpp"
#include "src/schedule/schedule.hpp"

namespace mplan::sim {

namespace {

constexpr size_t kScheduleCacheSize = 8;

struct CachedSchedule {
  ScheduleSpec spec;
  Schedule schedule;
  uint64_t last_use = 0;
};

struct ThreadContext {
  Lowered lowered;
  des::Engine engine;
  des::SimResult result;
  std::vector<CachedSchedule> schedules;
  uint64_t tick = 0;
  std::optional<RankGrid> grid;
  ParallelConfig grid_key;
  std::vector<std::pair<int64_t, int64_t>> intervals;  // breakdown scratch
};

ThreadContext& context() {
  thread_local ThreadContext ctx;
  return ctx;
}

const Schedule& cached_schedule(ThreadContext& ctx, const ScheduleSpec& spec) {
  ++ctx.tick;
  for (CachedSchedule& c : ctx.schedules)
    if (c.spec == spec) {
      c.last_use = ctx.tick;
      return c.schedule;
    }
  if (ctx.schedules.size() < kScheduleCacheSize) {
    ctx.schedules.push_back({spec, make_schedule(spec), ctx.tick});
    return ctx.schedules.back().schedule;
  }
  auto oldest =
      std::min_element(ctx.schedules.begin(), ctx.schedules.end(),
                       [](const auto& a, const auto& b) { return a.last_use < b.last_use; });
  oldest->spec = spec;
  oldest->schedule = make_schedule(spec);
  oldest->last_use = ctx.tick;
  return oldest->schedule;
}

bool same_grid(const ParallelConfig& a, const ParallelConfig& b) {
  return a.tp == b.tp && a.cp == b.cp && a.ep == b.ep && a.etp == b.etp && a.pp == b.pp &&
         a.dp == b.dp && a.order == b.order;
}

const RankGrid& cached_grid(ThreadContext& ctx, const ParallelConfig& p) {
  if (!ctx.grid || !same_grid(ctx.grid_key, p)) {
    ctx.grid.emplace(p);
    ctx.grid_key = p;
  }
  return *ctx.grid;
}

// Length of the union of `iv` clipped to [lo, hi).
int64_t covered(std::vector<std::pair<int64_t, int64_t>>& iv, int64_t lo, int64_t hi) {
  for (auto& [a, b] : iv) a = std::max(a, lo), b = std::min(b, hi);
  std::sort(iv.begin(), iv.end());
  int64_t total = 0, cur_a = 0, cur_b = -1;
  for (const auto& [a, b] : iv) {
    if (b <= a) continue;
    if (cur_b < a) {
      if (cur_b > cur_a) total += cur_b - cur_a;
      cur_a = a, cur_b = b;
    } else {
      cur_b = std::max(cur_b, b);
    }
  }
  if (cur_b > cur_a) total += cur_b - cur_a;
  return total;
}

struct StageTime {
  std::array<int64_t, kNumCats> cat{};
  int64_t pp = 0, dp = 0, bubble = 0;
  int64_t busy() const {
    int64_t t = pp + dp;
    for (int64_t v : cat) t += v;
    return t;
  }
};

StageTime stage_time(ThreadContext& ctx, int32_t er, int64_t makespan) {
  const Lowered& L = ctx.lowered;
  const des::Program& P = L.program;
  const des::SimResult& R = ctx.result;
  StageTime st;
  int64_t t = 0;
  for (des::OpId op = P.stream_first(P.stream_index(er, kStreamCompute)); op != des::kNone;
       op = P.op(op).next_in_stream) {
    const des::OpTiming& tm = R.ops[op];
    const OpMeta& m = L.meta[op];
    if (tm.start_ns > t) {
      const int64_t gap = tm.start_ns - t;
      auto& iv = ctx.intervals;
      iv.clear();
      for (int32_t i = m.dep_begin; i < m.dep_end; ++i) {
        const des::OpId d = L.deps[i];
        if (P.op(d).stream != kStreamDp) iv.emplace_back(R.ops[d].start_ns, R.ops[d].end_ns);
      }
      const int64_t pp = covered(iv, t, tm.start_ns);
      iv.clear();
      for (int32_t i = m.dep_begin; i < m.dep_end; ++i) {
        const des::OpId d = L.deps[i];
        if (P.op(d).stream == kStreamDp) iv.emplace_back(R.ops[d].start_ns, R.ops[d].end_ns);
      }
      const int64_t dp = std::min(covered(iv, t, tm.start_ns), gap - pp);
      st.pp += pp;
      st.dp += dp;
      st.bubble += gap - pp - dp;
    }
    MPLAN_CHECK(m.cost >= 0, "compute-stream op ", op, " without a cost");
    const PassCost& c = L.costs[m.cost];
    MPLAN_CHECK(c.total_ns() == tm.end_ns - tm.start_ns, "op ", op, " ran ",
                tm.end_ns - tm.start_ns, " ns, its cost is ", c.total_ns(), " ns");
    for (int i = 0; i < kNumCats; ++i) st.cat[i] += c.ns[i];
    t = tm.end_ns;
  }
  st.bubble += makespan - t;
  return st;
}

void read_back(const Plan& plan, ThreadContext& ctx, SimulationResult& out) {
  const Lowered& L = ctx.lowered;
  const des::SimResult& R = ctx.result;
  const ParallelConfig& p = plan.parallel;
  const int64_t makespan = R.makespan_ns;
  out.iteration_time_s = ns_to_s(makespan);
  out.num_microbatches = L.microbatches;
  out.num_engine_ranks = L.program.num_ranks();
  out.num_ops = L.program.num_ops();
  const double tokens =
      static_cast<double>(p.global_batch_size) * static_cast<double>(plan.model.seq_length);
  out.tokens_per_s = makespan > 0 ? tokens / out.iteration_time_s : 0;
  out.flops_formula = "megatron";
  out.model_flops_per_iteration = megatron_flops(plan.model, p.global_batch_size, p.tp);
  out.model_tflops_per_gpu = makespan > 0 ? out.model_flops_per_iteration / out.iteration_time_s /
                                                static_cast<double>(plan.world_size()) / kTFLOP
                                          : 0;
  out.mfu = out.model_tflops_per_gpu / plan.cluster.gpu.peak_bf16_tflops;

  // Breakdown on every stage; the busiest one is the result's.
  StageTime best;
  int64_t best_stage = 0, best_busy = -1;
  out.stage_breakdown.resize(static_cast<size_t>(p.pp));
  for (int64_t s = 0; s < p.pp; ++s) {
    const StageTime st = stage_time(ctx, L.rank_of_stage[s], makespan);
    TimeBreakdown& b = out.stage_breakdown[static_cast<size_t>(s)];
    b.compute_s = ns_to_s(st.cat[static_cast<int>(Cat::kCompute)]);
    b.tp_comm_s = ns_to_s(st.cat[static_cast<int>(Cat::kTp)]);
    b.cp_comm_s = ns_to_s(st.cat[static_cast<int>(Cat::kCp)]);
    b.ep_comm_s = ns_to_s(st.cat[static_cast<int>(Cat::kEp)]);
    b.pp_comm_s = ns_to_s(st.pp);
    b.dp_comm_s = ns_to_s(st.cat[static_cast<int>(Cat::kDp)] + st.dp);
    b.bubble_s = ns_to_s(st.bubble);
    b.optimizer_s = ns_to_s(st.cat[static_cast<int>(Cat::kOptimizer)]);
    if (st.busy() > best_busy) best = st, best_busy = st.busy(), best_stage = s;
  }
  out.critical_stage = best_stage;
  out.breakdown = out.stage_breakdown[static_cast<size_t>(best_stage)];
  out.bubble_fraction = makespan > 0 ? static_cast<double>(best.bubble) / makespan : 0;

  // Memory per stage.
  const int64_t overhead =
      std::llround(plan.cluster.gpu_for(plan.training.implementation).runtime_overhead_gib *
                   static_cast<double>(kGiB));
  out.runtime_overhead_bytes = overhead;
  out.per_stage.resize(static_cast<size_t>(p.pp));
  out.peak_bytes = 0;
  for (int64_t s = 0; s < p.pp; ++s) {
    const des::RankMemory& m = R.memory[L.rank_of_stage[s]];
    StageMemory& sm = out.per_stage[s];
    sm.pp_rank = s;
    sm.weights_bytes = m.at_peak[kMemWeights];
    sm.grads_bytes = m.at_peak[kMemGrads];
    sm.optimizer_bytes = m.at_peak[kMemOptimizer];
    sm.activations_bytes = m.at_peak[kMemActivations];
    sm.other_bytes = m.at_peak[kMemOther] + overhead;
    sm.peak_bytes = m.peak_bytes + overhead;
    out.peak_bytes = std::max(out.peak_bytes, sm.peak_bytes);
  }
  out.capacity_bytes = plan.cluster.gpu.memory_bytes();
  out.fits = out.peak_bytes <= out.capacity_bytes;
}

void run(const Plan& plan, const Schedule& schedule, const SimOptions& options, ThreadContext& ctx,
         SimulationResult& out) {
  const RankGrid& grid = cached_grid(ctx, plan.parallel);
  lower(plan, schedule, grid, options, ctx.lowered);
  des::RunOptions ro;
  ro.record_memory_timeline = options.record_trace;
  ctx.engine.run(ctx.lowered.program, ctx.result, ro);
  if (!ctx.result.completed)
    throw Error(cat("schedule: ", describe(ctx.result.deadlock, ctx.lowered.program, 8)));
  read_back(plan, ctx, out);
  out.trace.reset();
  if (options.record_trace) {
    auto t = std::make_shared<SimulationTrace>();
    t->program = ctx.lowered.program;
    t->result = ctx.result;
    const Lowered& L = ctx.lowered;
    for (int32_t r = 0; r < L.program.num_ranks(); ++r) {
      const int64_t g = L.global_rank[r];
      if (options.full_grid) {
        const RankCoord c = grid.coord(static_cast<int>(g));
        t->options.rank_names.push_back(
            cat("GPU ", g, " (tp ", c.tp, ", cp ", c.cp, ", dp ", c.dp, ", pp ", c.pp, ")"));
      } else {
        t->options.rank_names.push_back(cat("stage ", L.stage_of_rank[r], " (GPU ", g, ")"));
      }
    }
    out.trace = std::move(t);
  }
}

}  // namespace

void simulate(const Plan& plan, const SimOptions& options, SimulationResult& out) {
  ThreadContext& ctx = context();
  const std::optional<ScheduleSpec> spec = schedule_spec_of(plan);
  MPLAN_CHECK(spec.has_value(), "plan without a micro-batch count (validate() first)");
  run(plan, cached_schedule(ctx, *spec), options, ctx, out);
}

SimulationResult simulate(const Plan& plan, const SimOptions& options) {
  SimulationResult out;
  simulate(plan, options, out);
  return out;
}

SimulationResult simulate(const Plan& plan, const Schedule& schedule, const SimOptions& options) {
  const std::optional<ScheduleSpec> spec = schedule_spec_of(plan);
  MPLAN_CHECK(spec.has_value(), "plan without a micro-batch count (validate() first)");
  const ScheduleSpec& s = schedule.spec;
  if (s.pp != spec->pp || s.vpp != spec->vpp || s.microbatches != spec->microbatches)
    throw Error(cat("schedule: pp ", s.pp, ", vpp ", s.vpp, ", ", s.microbatches,
                    " micro-batches; the plan has pp ", spec->pp, ", vpp ", spec->vpp, ", ",
                    spec->microbatches, " micro-batches"));
  if (schedule.rank_begin.size() != static_cast<size_t>(s.pp) + 1)
    throw Error(cat("schedule: ", schedule.rank_begin.size(), " rank offsets for pp ", s.pp));
  for (const Action& a : schedule.actions) {
    if (a.chunk < 0 || a.chunk >= s.vpp || a.microbatch < 0 || a.microbatch >= s.microbatches ||
        (is_p2p(a.kind) && (a.peer < 0 || a.peer >= s.pp)))
      throw Error(cat("schedule: action ", to_string(a), " outside pp ", s.pp, ", vpp ", s.vpp,
                      ", ", s.microbatches, " micro-batches"));
    if (a.kind == ActionKind::kWeightGrad && !schedule.split_backward)
      throw Error("schedule: W action in a schedule without split backward");
  }
  SimulationResult out;
  run(plan, schedule, options, context(), out);
  return out;
}

void write_trace(std::ostream& os, const SimulationResult& result) {
  MPLAN_CHECK(result.trace != nullptr, "write_trace: simulate with SimOptions::record_trace");
  des::write_chrome_trace(os, result.trace->program, result.trace->result, result.trace->options);
}

}  // namespace mplan::sim
