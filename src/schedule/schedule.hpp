// Schedule: for each pipeline rank, the ordered list of actions it runs in one training step
// (compute passes and the point-to-point transfers between them). The simulator and the executor
// both walk this object. Invariants (checked by validate(), src/schedule/validate.hpp): every
// (micro-batch, chunk) has one F and one B per rank (and one W when split_backward; only the F
// when forward_only); every
// send meets the receive at the same position on its peer; blocking p2p groups cannot deadlock.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "src/parallel/parallel_config.hpp"
#include "src/schedule/action.hpp"

namespace mplan {

// What to generate. group_size is Megatron's microbatch_group_size_per_vp_stage (interleaved
// only; 0 means pp, Megatron's default). forward_only is Megatron's forward_only=True
// (evaluation): every rank runs the forward of each (micro-batch, chunk) with its receives and
// sends, all as warm-up, and no backward — one order for gpipe, 1f1b and zb-h1 (Megatron's
// non-interleaved function), the interleaved table for interleaved.
struct ScheduleSpec {
  ScheduleKind kind = ScheduleKind::k1F1B;
  int64_t pp = 1;
  int64_t vpp = 1;
  int64_t microbatches = 1;
  int64_t group_size = 0;
  bool forward_only = false;
  bool operator==(const ScheduleSpec&) const = default;

  int64_t resolved_group_size() const { return group_size > 0 ? group_size : pp; }
};

// The input a problem with a spec concerns, so that callers can name their flag or plan field.
enum class SpecField { kSchedule, kPp, kVpp, kMicrobatches, kGroupSize };
const char* to_string(SpecField f);  // "schedule", "pp", "vpp", "microbatches", "group_size"

struct SpecProblem {
  SpecField field;
  std::string rule;  // one line, with the values involved
};

// Largest pp * vpp * microbatches a schedule may have (about 2 GiB of actions at most).
inline constexpr int64_t kMaxScheduleSteps = int64_t{1} << 25;

// The first rule `spec` breaks, or nullopt. The interleaved rules are Megatron-LM's, in its
// wording (schedules.py, forward_backward_pipelining_with_interleaving; arguments.py).
std::optional<SpecProblem> check_spec(const ScheduleSpec& spec);

struct Schedule {
  ScheduleSpec spec;            // group_size resolved for interleaved, 0 otherwise
  bool split_backward = false;  // B (input gradient) and W (weight gradient) are separate actions
  std::vector<Action> actions;  // all ranks' actions, rank 0 first
  std::vector<int64_t> rank_begin;  // pp + 1 offsets: rank r owns [rank_begin[r], rank_begin[r+1])
  // Per rank: forward passes before the first backward in Megatron's sense
  // (num_warmup_microbatches): 1f1b and zb-h1 min(pp - r - 1, m); interleaved
  // min(2 (pp - r - 1) + (vpp - 1) group_size, vpp m); gpipe m (all forwards come first);
  // forward_only every forward (m, or vpp m interleaved).
  std::vector<int64_t> warmup;

  int64_t pp() const { return spec.pp; }
  std::span<const Action> rank(int64_t r) const {
    return {actions.data() + rank_begin[r], actions.data() + rank_begin[r + 1]};
  }
  std::span<Action> rank(int64_t r) {
    return {actions.data() + rank_begin[r], actions.data() + rank_begin[r + 1]};
  }
};

// Generates the schedule; throws Error("<field>: <rule>") when check_spec() finds a problem.
// Time and memory are linear in pp * vpp * microbatches.
Schedule make_schedule(const ScheduleSpec& spec);

// Builds a Schedule from per-rank lists (hand-made or edited schedules, e.g. in tests). Does not
// validate; `warmup` is recomputed from the spec.
Schedule schedule_from_ranks(const ScheduleSpec& spec, bool split_backward,
                             const std::vector<std::vector<Action>>& ranks);
std::vector<std::vector<Action>> rank_lists(const Schedule& s);

// Megatron's warm-up count of pipeline rank `rank` (see Schedule::warmup).
int64_t warmup_microbatches(const ScheduleSpec& spec, int64_t rank);

// Virtual stage of chunk `chunk` on rank `rank`: chunk * pp + rank.
inline int64_t virtual_stage(const ScheduleSpec& spec, int64_t rank, int64_t chunk) {
  return chunk * spec.pp + rank;
}
inline int64_t num_virtual_stages(const ScheduleSpec& spec) { return spec.pp * spec.vpp; }

}  // namespace mplan
