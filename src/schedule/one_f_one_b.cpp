// 1F1B and ZB-H1. 1F1B is Megatron-LM's non-interleaved schedule
// (forward_backward_pipelining_without_interleaving): rank r runs w = min(pp - r - 1, m) warm-up
// forwards, then m - w steps of one forward and one backward, then w cool-down backwards. The p2p
// groups are its calls, in its places: recv_forward before each warm-up forward and send_forward
// after it; one more recv_forward before the steady phase; send_forward_recv_backward after each
// steady forward; send_backward_recv_forward after each steady backward (send_backward after the
// last); recv_backward before and send_backward after each cool-down backward. The first rank
// skips every receive of activations and send of gradients, the last rank the converse.
//
// ZB-H1 (Qi et al., ICLR 2024, "Zero Bubble Pipeline Parallelism", Sec. 2.1) follows the
// authors' patch to that loop: on ranks r > 0 the backward is split into B and W for the first r
// steady steps, the last steady step and every cool-down step, and the deferred W passes run
// oldest first: one after the last steady send_backward (when that step's index >= r), one after
// each cool-down send_backward (when m - w + i >= r), the rest at the end. Elsewhere W runs right
// after its B, before the p2p call. Each rank holds at most pp micro-batches in flight, the
// first rank's 1F1B peak; with T_W <= min(T_F, T_B) and m >= pp the makespan is
// m (T_F + T_B + T_W) + (pp - 1)(T_F + T_B - T_W).
#include <algorithm>
#include <vector>

#include "src/schedule/generators.hpp"
#include "src/schedule/schedule_builder.hpp"

namespace mplan {
namespace {

using K = ActionKind;

Schedule build(const ScheduleSpec& spec, bool zero_bubble) {
  const int64_t pp = spec.pp, m = spec.microbatches;
  ScheduleBuilder b(spec, zero_bubble, 7 * m);
  std::vector<int64_t> deferred_w;  // FIFO of micro-batches whose W is deferred
  for (int64_t r = 0; r < pp; ++r) {
    const bool first = r == 0, last = r == pp - 1;
    const int64_t prev = r - 1, next = r + 1;
    const int64_t warmup = std::min(pp - r - 1, m), remaining = m - warmup;
    deferred_w.clear();
    size_t head = 0;
    auto pop_w = [&] { b.compute(K::kWeightGrad, deferred_w[head++], 0); };
    // A backward pass; with zero_bubble, its W right after it or deferred.
    auto backward = [&](int64_t mb, bool split) {
      b.compute(K::kBackward, mb, 0);
      if (!zero_bubble) return;
      if (split)
        deferred_w.push_back(mb);
      else
        b.compute(K::kWeightGrad, mb, 0);
    };
    b.begin_rank(r);

    for (int64_t i = 0; i < warmup; ++i) {
      if (!first) b.p2p(K::kRecvForward, i, 0, prev), b.end_group();
      b.compute(K::kForward, i, 0);
      if (!last) b.p2p(K::kSendForward, i, 0, next), b.end_group();
    }
    if (remaining > 0 && !first) b.p2p(K::kRecvForward, warmup, 0, prev), b.end_group();

    for (int64_t i = 0; i < remaining; ++i) {
      const bool last_iteration = i == remaining - 1;
      const int64_t fwd = warmup + i;
      b.compute(K::kForward, fwd, 0);
      if (!last) {
        b.p2p(K::kSendForward, fwd, 0, next);
        b.p2p(K::kRecvBackward, i, 0, next);
        b.end_group();
      }
      backward(i, (i < r || last_iteration) && r > 0);
      if (last_iteration) {
        if (!first) b.p2p(K::kSendBackward, i, 0, prev), b.end_group();
        if (zero_bubble && i >= r && r > 0) pop_w();
      } else if (!first) {
        b.p2p(K::kSendBackward, i, 0, prev);
        b.p2p(K::kRecvForward, fwd + 1, 0, prev);
        b.end_group();
      }
    }

    for (int64_t i = 0; i < warmup; ++i) {
      const int64_t mb = remaining + i;
      if (!last) b.p2p(K::kRecvBackward, mb, 0, next), b.end_group();
      backward(mb, r > 0);
      if (!first) b.p2p(K::kSendBackward, mb, 0, prev), b.end_group();
      if (zero_bubble && r > 0 && remaining + i >= r) pop_w();
    }
    while (head < deferred_w.size()) pop_w();
  }
  return b.finish();
}

}  // namespace

Schedule make_1f1b_schedule(const ScheduleSpec& spec) { return build(spec, false); }
Schedule make_zb_h1_schedule(const ScheduleSpec& spec) { return build(spec, true); }

}  // namespace mplan
