// Closed forms of makespan and bubble fraction for uniform per-action costs (f, b, w per model
// chunk), from the papers. Invariant: the timing pass (timeline.hpp) reproduces them exactly.
#pragma once

#include <optional>

#include "src/schedule/schedule.hpp"
#include "src/schedule/timeline.hpp"

namespace mplan {

//   gpipe, 1f1b:  (m + pp - 1)(f + b + w)            Huang et al. 2019; Narayanan et al.,
//                                                    SC'21, Sec. 2.2.1: bubble (pp-1)/(m+pp-1)
//   interleaved:  (vpp m + pp - 1)(f + b + w)        Narayanan et al., SC'21, Sec. 2.2.2: bubble
//                                                    (pp-1)/(vpp m + pp - 1) of a chunk's time
//   zb-h1:        m (f + b + w) + (pp - 1)(f + b - w)  Qi et al., ICLR 2024, Sec. 2.1 (bubble
//                 (pp-1)(T_F + T_B - T_W)); holds for m >= pp and w <= min(f, b)

// nullopt where no closed form applies (zb-h1 outside its conditions, or a spec that
// check_spec() rejects). For 1f1b / gpipe / interleaved, weight adds to the backward.
std::optional<double> closed_form_makespan(const ScheduleSpec& spec, const ActionCosts& c);
std::optional<double> closed_form_bubble_fraction(const ScheduleSpec& spec, const ActionCosts& c);

}  // namespace mplan
