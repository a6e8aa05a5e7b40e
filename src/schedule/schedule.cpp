// Schedule: spec checks (Megatron's rules and wording), dispatch to the generators, conversions.
#include "src/schedule/schedule.hpp"

#include <algorithm>
#include <limits>

#include "src/common/error.hpp"
#include "src/schedule/generators.hpp"

namespace mplan {

const char* to_string(SpecField f) {
  switch (f) {
    case SpecField::kSchedule:
      return "schedule";
    case SpecField::kPp:
      return "pp";
    case SpecField::kVpp:
      return "vpp";
    case SpecField::kMicrobatches:
      return "microbatches";
    case SpecField::kGroupSize:
      return "group_size";
  }
  return "?";
}

std::optional<SpecProblem> check_spec(const ScheduleSpec& s) {
  auto problem = [](SpecField f, std::string rule) {
    return std::optional<SpecProblem>(SpecProblem{f, std::move(rule)});
  };
  if (s.pp < 1) return problem(SpecField::kPp, cat("must be >= 1, got ", s.pp));
  if (s.vpp < 1) return problem(SpecField::kVpp, cat("must be >= 1, got ", s.vpp));
  if (s.microbatches < 1)
    return problem(SpecField::kMicrobatches, cat("must be >= 1, got ", s.microbatches));
  if (s.group_size < 0)
    return problem(SpecField::kGroupSize, cat("must be >= 0 (0 means pp), got ", s.group_size));
  if (s.vpp > std::numeric_limits<int16_t>::max())
    return problem(SpecField::kVpp,
                   cat("must be <= ", std::numeric_limits<int16_t>::max(), ", got ", s.vpp));
  if (s.pp > kMaxScheduleSteps / s.vpp || s.pp * s.vpp > kMaxScheduleSteps / s.microbatches)
    return problem(SpecField::kMicrobatches,
                   cat("pp x vpp x microbatches (", s.pp, " x ", s.vpp, " x ", s.microbatches,
                       ") exceeds the limit of ", kMaxScheduleSteps, " compute steps"));

  if (s.kind == ScheduleKind::kInterleaved) {
    if (s.vpp == 1)
      return problem(SpecField::kVpp,
                     "the interleaved schedule needs vpp > 1 (with vpp 1 Megatron runs the "
                     "non-interleaved 1F1B schedule)");
    if (s.pp == 1)
      return problem(SpecField::kVpp,
                     cat("vpp (", s.vpp,
                         ") > 1 needs pp > 1 (Megatron: When interleaved "
                         "schedule is used, pipeline-model-parallel size should be greater "
                         "than 1)"));
    int64_t g = s.resolved_group_size();
    if (g > s.microbatches || g < s.pp)
      return problem(s.group_size > 0 ? SpecField::kGroupSize : SpecField::kMicrobatches,
                     cat("The number of contiguous micro-batches in a virtual pipeline stage "
                         "should range in [PP=",
                         s.pp, " , M=", s.microbatches, "]"));
    int64_t final_group = s.microbatches % g;
    if (final_group > 0 && final_group < s.pp)
      return problem(
          SpecField::kMicrobatches,
          cat("The remainder of M (the total micro-batches) divided by N (number of contiguous "
              "micro-batches in a virtual pipeline stage) should be 0, or larger than or equal "
              "to the pipeline-parallel size, but it is ",
              final_group,
              ". Otherwise, it introduces dependency bubbles in the pipeline and reduces "
              "throughput."));
  } else {
    if (s.vpp > 1)
      return problem(SpecField::kVpp, cat("vpp (", s.vpp,
                                          ") > 1 needs the interleaved schedule (Megatron runs it "
                                          "whenever vpp > 1); ",
                                          to_string(s.kind), " has one model chunk per rank"));
    if (s.group_size > 0)
      return problem(SpecField::kGroupSize,
                     cat("applies to the interleaved schedule only (Megatron's "
                         "microbatch_group_size_per_vp_stage); the schedule is ",
                         to_string(s.kind)));
  }
  return std::nullopt;
}

int64_t warmup_microbatches(const ScheduleSpec& s, int64_t rank) {
  if (s.forward_only)
    return s.kind == ScheduleKind::kInterleaved ? s.vpp * s.microbatches : s.microbatches;
  switch (s.kind) {
    case ScheduleKind::kGpipe:
      return s.microbatches;
    case ScheduleKind::k1F1B:
    case ScheduleKind::kZbH1:
      return std::min(s.pp - rank - 1, s.microbatches);
    case ScheduleKind::kInterleaved:
      return std::min(2 * (s.pp - rank - 1) + (s.vpp - 1) * s.resolved_group_size(),
                      s.vpp * s.microbatches);
  }
  return 0;
}

Schedule make_schedule(const ScheduleSpec& spec) {
  if (auto p = check_spec(spec)) throw Error(cat(to_string(p->field), ": ", p->rule));
  ScheduleSpec s = spec;
  s.group_size = s.kind == ScheduleKind::kInterleaved ? s.resolved_group_size() : 0;
  // Megatron runs forward_only through the same functions; without interleaving every kind has
  // the same order (all warm-up forwards).
  if (s.forward_only && s.kind != ScheduleKind::kInterleaved) return make_1f1b_schedule(s);
  switch (s.kind) {
    case ScheduleKind::kGpipe:
      return make_gpipe_schedule(s);
    case ScheduleKind::k1F1B:
      return make_1f1b_schedule(s);
    case ScheduleKind::kZbH1:
      return make_zb_h1_schedule(s);
    case ScheduleKind::kInterleaved:
      return make_interleaved_schedule(s);
  }
  MPLAN_CHECK(false, "unknown schedule kind");
  return {};
}

Schedule schedule_from_ranks(const ScheduleSpec& spec, bool split_backward,
                             const std::vector<std::vector<Action>>& ranks) {
  MPLAN_CHECK(static_cast<int64_t>(ranks.size()) == spec.pp, "need ", spec.pp, " ranks, got ",
              ranks.size());
  Schedule s;
  s.spec = spec;
  s.split_backward = split_backward;
  for (const auto& r : ranks) {
    s.rank_begin.push_back(static_cast<int64_t>(s.actions.size()));
    s.actions.insert(s.actions.end(), r.begin(), r.end());
  }
  s.rank_begin.push_back(static_cast<int64_t>(s.actions.size()));
  for (int64_t r = 0; r < spec.pp; ++r) s.warmup.push_back(warmup_microbatches(spec, r));
  return s;
}

std::vector<std::vector<Action>> rank_lists(const Schedule& s) {
  std::vector<std::vector<Action>> out;
  for (int64_t r = 0; r < s.pp(); ++r) {
    auto span = s.rank(r);
    out.emplace_back(span.begin(), span.end());
  }
  return out;
}

}  // namespace mplan
