// The compute-stream lower bound with the pipeline's fill and drain: per stage, the chunk costs
// the lowering builds (costs are rebuilt only when the stage's tensor-, context- or expert-parallel
// placement changes, as the lowering does), summed over chunks and multiplied by the micro-batch
// count, with the cheapest chunk's passes of the stages before it.
#include "sim/sweep/time_bound.hpp"

#include <algorithm>

#include "sim/plan_sim/lowering.hpp"
#include "sim/plan_sim/stage_groups.hpp"
#include "src/common/error.hpp"
#include "src/plan/plan_rules.hpp"

namespace mplan::sweep {

namespace {

bool same_cost_groups(const sim::StageGroups& a, const sim::StageGroups& b) {
  return a.tp == b.tp && a.cp == b.cp && a.ep == b.ep && a.expert_tp == b.expert_tp &&
         a.cp_ring_same_node == b.cp_ring_same_node && a.cp_a2a == b.cp_a2a &&
         a.cp_outer_ring_same_node == b.cp_outer_ring_same_node;
}

bool same_grid(const ParallelConfig& a, const ParallelConfig& b) {
  return a.tp == b.tp && a.cp == b.cp && a.ep == b.ep && a.etp == b.etp && a.pp == b.pp &&
         a.dp == b.dp && a.order == b.order && cp_a2a_size(a) == cp_a2a_size(b);
}

}  // namespace

std::vector<StagePassTimes> stage_pass_times(const Plan& plan, const sim::SimOptions& options,
                                             TimeBoundScratch& s) {
  const ParallelConfig& p = plan.parallel;
  // The groups' placement depends only on the grid and the node size, which nearby candidates
  // mostly share: it was most of a sweep's time when computed per candidate.
  const int64_t gpn = plan.cluster.gpus_per_node;
  const TimeBoundScratch::Grid* grid = s.grids.find_if([&](const TimeBoundScratch::Grid& g) {
    return g.gpus_per_node == gpn && same_grid(g.key, p);
  });
  if (grid == nullptr) {
    TimeBoundScratch::Grid& g = s.grids.next_slot();
    const RankGrid rank_grid(p);
    g.key = p;
    g.gpus_per_node = gpn;
    g.groups.clear();
    for (int64_t stage = 0; stage < p.pp; ++stage)
      g.groups.push_back(sim::stage_groups(rank_grid, gpn, stage, s.ranks, cp_a2a_size(p)));
    grid = &g;
  }
  s.chunks.chunks.clear();
  s.chunks.units.clear();
  s.chunks.buckets.clear();
  std::vector<StagePassTimes> out(static_cast<size_t>(p.pp));
  sim::StageGroups previous;
  for (int64_t stage = 0; stage < p.pp; ++stage) {
    const sim::StageGroups& groups = grid->groups[static_cast<size_t>(stage)];
    if (stage == 0 || !same_cost_groups(previous, groups))
      sim::build_plan_costs(plan, options, groups, false, s.costs);
    previous = groups;
    const size_t first = s.chunks.chunks.size();
    sim::append_stage_chunks(plan, s.costs, stage, s.chunks);
    StagePassTimes& t = out[static_cast<size_t>(stage)];
    t.min_chunk_forward_ns = t.min_chunk_backward_ns = t.min_chunk_backward_input_ns = INT64_MAX;
    for (size_t c = first; c < s.chunks.chunks.size(); ++c) {
      const sim::ChunkCosts& ch = s.chunks.chunks[c];
      t.forward_ns += ch.fwd.total_ns();
      t.backward_ns += ch.bwd.total_ns();
      t.backward_input_ns += ch.bwd_input.total_ns();
      t.backward_weight_ns += ch.bwd_weight.total_ns();
      t.min_chunk_forward_ns = std::min(t.min_chunk_forward_ns, ch.fwd.total_ns());
      t.min_chunk_backward_ns = std::min(t.min_chunk_backward_ns, ch.bwd.total_ns());
      t.min_chunk_backward_input_ns =
          std::min(t.min_chunk_backward_input_ns, ch.bwd_input.total_ns());
      if (p.use_megatron_fsdp) {
        const sim::FsdpCollectives f = sim::fsdp_collectives(plan, groups, ch);
        t.fsdp_ns += 2 * f.gather_ns + f.reduce_ns;
      }
    }
  }
  return out;
}

int64_t iteration_time_lower_bound_ns(const Plan& plan, const sim::SimOptions& options,
                                      TimeBoundScratch& s) {
  const std::optional<ScheduleSpec> spec = schedule_spec_of(plan);
  MPLAN_CHECK(spec.has_value(), "iteration_time_lower_bound_ns needs a valid plan");
  const bool split = plan.parallel.schedule == ScheduleKind::kZbH1;
  const int64_t m = spec->microbatches;
  int64_t bound = 0;
  int64_t fill = 0;   // the stages before s: their cheapest forwards
  int64_t drain = 0;  // their cheapest backwards (zb-h1: input-gradient passes)
  for (const StagePassTimes& t : stage_pass_times(plan, options, s)) {
    const int64_t last_backward =  // until the stage's last backward (zb-h1: B) is done
        m * (t.forward_ns + (split ? t.backward_input_ns : t.backward_ns));
    const int64_t work = last_backward + (split ? m * t.backward_weight_ns : 0);
    bound = std::max({bound, fill + work, fill + last_backward + drain, m * t.fsdp_ns});
    fill += t.min_chunk_forward_ns;
    drain += split ? t.min_chunk_backward_input_ns : t.min_chunk_backward_ns;
  }
  return bound;
}

}  // namespace mplan::sweep
