// GPipe (Huang et al., 2019; drawn in Narayanan et al., SC'21, Fig. 3): every rank runs all
// forward passes, then all backward passes, both in micro-batch order. Each pass receives its
// input just before it and sends its output just after it, one p2p group per transfer, as
// Megatron's recv_forward / send_forward / recv_backward / send_backward calls do.
#include "src/schedule/generators.hpp"
#include "src/schedule/schedule_builder.hpp"

namespace mplan {

Schedule make_gpipe_schedule(const ScheduleSpec& spec) {
  const int64_t pp = spec.pp, m = spec.microbatches;
  ScheduleBuilder b(spec, false, 6 * m);
  for (int64_t r = 0; r < pp; ++r) {
    const bool first = r == 0, last = r == pp - 1;
    b.begin_rank(r);
    for (int64_t i = 0; i < m; ++i) {
      if (!first) b.p2p(ActionKind::kRecvForward, i, 0, r - 1), b.end_group();
      b.compute(ActionKind::kForward, i, 0);
      if (!last) b.p2p(ActionKind::kSendForward, i, 0, r + 1), b.end_group();
    }
    for (int64_t i = 0; i < m; ++i) {
      if (!last) b.p2p(ActionKind::kRecvBackward, i, 0, r + 1), b.end_group();
      b.compute(ActionKind::kBackward, i, 0);
      if (!first) b.p2p(ActionKind::kSendBackward, i, 0, r - 1), b.end_group();
    }
  }
  return b.finish();
}

}  // namespace mplan
