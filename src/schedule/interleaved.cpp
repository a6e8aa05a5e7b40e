// Interleaved 1F1B, Megatron-LM's forward_backward_pipelining_with_interleaving, on its
// non-overlapped p2p path (every p2p call one blocking group). Invariant: compute order and p2p
// calls are Megatron's, call for call; model chunk c on rank r is virtual stage c*pp + r.
#include <algorithm>
#include <utility>
#include <vector>

#include "src/schedule/generators.hpp"
#include "src/schedule/schedule_builder.hpp"

// Activations go from rank pp-1 back to rank 0 between chunks. Order (get_schedule_table):
// micro-batches in groups of G = microbatch_group_size_per_vp_stage; within a group all chunks in
// turn, each over the group's micro-batches (the last group takes the rest). Virtual micro-batch
// k runs forward on chunk table[k].chunk and backward on chunk vpp-1-table[k].chunk, both for
// micro-batch table[k].mb. Rank r does w = min(2 (pp - r - 1) + (vpp - 1) G, vpp m) warm-up
// forwards, then pairs of one forward and one backward, then the remaining backwards. The p2p
// groups are Megatron's calls: recv_forward before the first forward; send_forward_recv_forward
// after each warm-up forward (send_forward_backward_recv_forward_backward after the last one,
// which also takes the first output gradient); send_forward_backward_recv_forward_backward after
// each steady pair; send_backward_recv_backward after each cool-down backward. Whether and into
// which chunk a rank receives follows recv_tensor_from_previous_stage; received tensors of a
// chunk are consumed in micro-batch order, which names them here.
// forward_only (Megatron's forward_only=True): every virtual micro-batch is a warm-up forward
// (w = vpp m) with its send_forward_recv_forward; nothing else.

namespace mplan {
namespace {
using K = ActionKind;
}  // namespace

Schedule make_interleaved_schedule(const ScheduleSpec& spec) {
  const int64_t pp = spec.pp, vpp = spec.vpp, m = spec.microbatches;
  const int64_t g = spec.resolved_group_size(), total = m * vpp;

  // get_schedule_table: (micro-batch, chunk) of each virtual micro-batch.
  std::vector<int32_t> table_mb;
  std::vector<int16_t> table_chunk;
  table_mb.reserve(static_cast<size_t>(total));
  table_chunk.reserve(static_cast<size_t>(total));
  for (int64_t lo = 0; lo < m; lo += g) {
    const int64_t hi = lo + g >= m ? m : lo + g;
    for (int64_t c = 0; c < vpp; ++c)
      for (int64_t mb = lo; mb < hi; ++mb) {
        table_mb.push_back(static_cast<int32_t>(mb));
        table_chunk.push_back(static_cast<int16_t>(c));
      }
  }
  auto chunk_of = [&](int64_t k, bool forward) -> int64_t {
    const int64_t c = table_chunk[static_cast<size_t>(k % total)];
    return forward ? c : vpp - 1 - c;
  };
  auto mb_of = [&](int64_t k) -> int64_t { return table_mb[static_cast<size_t>(k)]; };

  ScheduleBuilder b(spec, false, 6 * total + 2);
  std::vector<int64_t> recv_fwd(static_cast<size_t>(vpp)), recv_bwd(static_cast<size_t>(vpp));
  for (int64_t r = 0; r < pp; ++r) {
    const bool first = r == 0, last = r == pp - 1;
    const int64_t prev = (r - 1 + pp) % pp, next = (r + 1) % pp;
    const int64_t wanted_warmup = spec.forward_only ? total : 2 * (pp - r - 1) + (vpp - 1) * g;
    const bool all_warmup = wanted_warmup >= total;
    const int64_t warmup = std::min(wanted_warmup, total), remaining = total - warmup;
    std::fill(recv_fwd.begin(), recv_fwd.end(), 0);
    std::fill(recv_bwd.begin(), recv_bwd.end(), 0);

    // recv_tensor_from_previous_stage: whether this step receives, and for which chunk.
    auto recv_for = [&](int64_t k, bool forward) -> std::pair<bool, int64_t> {
      const bool leading = forward ? first : last;
      if (!leading) return {true, chunk_of(k + 1, forward)};
      bool recv = k >= pp - 1;
      int64_t c = recv ? chunk_of(k - (pp - 1), forward) : chunk_of(k + 1, forward);
      if (c == (forward ? vpp - 1 : 0)) recv = false;
      return {recv, forward ? c + 1 : c - 1};
    };
    auto recv_forward = [&](int64_t c) {
      b.p2p(K::kRecvForward, recv_fwd[static_cast<size_t>(c)]++, c, prev);
    };
    auto recv_backward = [&](int64_t c) {
      b.p2p(K::kRecvBackward, recv_bwd[static_cast<size_t>(c)]++, c, next);
    };
    auto sends_forward = [&](int64_t c) { return !(c == vpp - 1 && last); };
    auto sends_backward = [&](int64_t c) { return !(c == 0 && first); };

    b.begin_rank(r);
    if (!first) recv_forward(0), b.end_group();

    for (int64_t k = 0; k < warmup; ++k) {
      const int64_t c = chunk_of(k, true);
      auto [recv_prev, next_c] = recv_for(k, true);
      if (k == total - 1) recv_prev = false;
      b.compute(K::kForward, mb_of(k), c);
      if (sends_forward(c)) b.p2p(K::kSendForward, mb_of(k), c, next);
      if (recv_prev) recv_forward(next_c);
      if (k == warmup - 1 && !all_warmup && !last) recv_backward(vpp - 1);
      b.end_group();
    }

    for (int64_t k = 0; k < remaining; ++k) {
      const int64_t fk = k + warmup;
      const int64_t fc = chunk_of(fk, true), bc = chunk_of(k, false);
      b.compute(K::kForward, mb_of(fk), fc);
      b.compute(K::kBackward, mb_of(k), bc);
      auto [recv_prev, next_fc] = recv_for(fk, true);
      auto [recv_next, next_bc] = recv_for(k, false);
      if (k == remaining - 1) recv_prev = false;
      if (sends_forward(fc)) b.p2p(K::kSendForward, mb_of(fk), fc, next);
      if (sends_backward(bc)) b.p2p(K::kSendBackward, mb_of(k), bc, prev);
      if (recv_prev) recv_forward(next_fc);
      if (recv_next) recv_backward(next_bc);
      b.end_group();
    }

    if (spec.forward_only) continue;
    if (all_warmup && !last) recv_backward(vpp - 1), b.end_group();
    for (int64_t k = remaining; k < total; ++k) {
      const int64_t c = chunk_of(k, false);
      auto [recv_next, next_c] = recv_for(k, false);
      if (k == total - 1) recv_next = false;
      b.compute(K::kBackward, mb_of(k), c);
      if (sends_backward(c)) b.p2p(K::kSendBackward, mb_of(k), c, prev);
      if (recv_next) recv_backward(next_c);
      b.end_group();
    }
  }
  return b.finish();
}

}  // namespace mplan
