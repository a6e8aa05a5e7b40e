// ScheduleBuilder: flat storage of the per-rank action lists, p2p groups in canonical order.
#include "src/schedule/schedule_builder.hpp"

#include <algorithm>

#include "src/common/error.hpp"

namespace mplan {

ScheduleBuilder::ScheduleBuilder(const ScheduleSpec& spec, bool split_backward,
                                 int64_t actions_per_rank) {
  s_.spec = spec;
  s_.split_backward = split_backward;
  s_.actions.reserve(static_cast<size_t>(spec.pp * actions_per_rank));
  s_.rank_begin.reserve(static_cast<size_t>(spec.pp + 1));
}

void ScheduleBuilder::begin_rank(int64_t rank) {
  MPLAN_CHECK(rank == rank_ + 1 && group_size_ == 0, "ranks must be built in order");
  rank_ = rank;
  s_.rank_begin.push_back(static_cast<int64_t>(s_.actions.size()));
}

void ScheduleBuilder::compute(ActionKind kind, int64_t microbatch, int64_t chunk) {
  MPLAN_CHECK(is_compute(kind) && group_size_ == 0, "compute inside an open p2p group");
  s_.actions.push_back(compute_action(kind, microbatch, chunk));
}

void ScheduleBuilder::p2p(ActionKind kind, int64_t microbatch, int64_t chunk, int64_t peer) {
  MPLAN_CHECK(is_p2p(kind), "not a p2p kind");
  for (int i = 0; i < group_size_; ++i)
    MPLAN_CHECK(group_[i].kind != kind, "two ", to_string(kind), " in one p2p group");
  group_[group_size_++] = p2p_action(kind, microbatch, chunk, peer, false);
}

void ScheduleBuilder::end_group() {
  if (group_size_ == 0) return;
  std::sort(group_.begin(), group_.begin() + group_size_,
            [](const Action& a, const Action& b) { return a.kind < b.kind; });
  group_[group_size_ - 1].ends_group = true;
  s_.actions.insert(s_.actions.end(), group_.begin(), group_.begin() + group_size_);
  group_size_ = 0;
}

Schedule ScheduleBuilder::finish() {
  MPLAN_CHECK(rank_ == s_.spec.pp - 1 && group_size_ == 0, "schedule finished early");
  s_.rank_begin.push_back(static_cast<int64_t>(s_.actions.size()));
  s_.warmup.resize(static_cast<size_t>(s_.spec.pp));
  for (int64_t r = 0; r < s_.spec.pp; ++r) s_.warmup[r] = warmup_microbatches(s_.spec, r);
  return std::move(s_);
}

}  // namespace mplan
