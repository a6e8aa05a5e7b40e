// Closed-form makespan and bubble fraction of the four schedules (sources in the header).
#include "src/schedule/closed_form.hpp"

#include <algorithm>

namespace mplan {

std::optional<double> closed_form_makespan(const ScheduleSpec& spec, const ActionCosts& c) {
  if (check_spec(spec)) return std::nullopt;
  const double pp = static_cast<double>(spec.pp), m = static_cast<double>(spec.microbatches);
  const double step = c.forward + c.backward + c.weight;
  switch (spec.kind) {
    case ScheduleKind::kGpipe:
    case ScheduleKind::k1F1B:
      return (m + pp - 1) * step;
    case ScheduleKind::kInterleaved:
      return (static_cast<double>(spec.vpp) * m + pp - 1) * step;
    case ScheduleKind::kZbH1:
      if (spec.microbatches < spec.pp || c.weight > std::min(c.forward, c.backward))
        return std::nullopt;
      return m * step + (pp - 1) * (c.forward + c.backward - c.weight);
  }
  return std::nullopt;
}

std::optional<double> closed_form_bubble_fraction(const ScheduleSpec& spec, const ActionCosts& c) {
  const std::optional<double> makespan = closed_form_makespan(spec, c);
  if (!makespan || *makespan <= 0) return std::nullopt;
  const double busy =
      static_cast<double>(spec.vpp * spec.microbatches) * (c.forward + c.backward + c.weight);
  return 1.0 - busy / *makespan;
}

}  // namespace mplan
