// Action: one step in a pipeline rank's schedule: a compute pass (F, B or W) of one micro-batch
// on one model chunk, or one point-to-point transfer with a neighbouring pipeline rank.
// Invariant: model chunk c on pipeline rank r is virtual stage c*pp + r (Megatron's numbering);
// p2p actions name the (micro-batch, chunk) of the local compute they feed or come from.
#pragma once

#include <cstdint>
#include <string>

namespace mplan {

enum class ActionKind : uint8_t {
  kForward,       // F(m, c)
  kBackward,      // B(m, c): the whole backward, or only the input gradient when W is split off
  kWeightGrad,    // W(m, c): the weight gradient, a separate pass in zero-bubble schedules
  kSendForward,   // send F(m, c)'s output activation to the next virtual stage
  kRecvForward,   // receive F(m, c)'s input activation from the previous virtual stage
  kSendBackward,  // send B(m, c)'s input gradient to the previous virtual stage
  kRecvBackward,  // receive B(m, c)'s output gradient from the next virtual stage
};
inline constexpr int kNumActionKinds = 7;

inline constexpr bool is_compute(ActionKind k) { return k <= ActionKind::kWeightGrad; }
inline constexpr bool is_p2p(ActionKind k) { return !is_compute(k); }
inline constexpr bool is_send(ActionKind k) {
  return k == ActionKind::kSendForward || k == ActionKind::kSendBackward;
}
inline constexpr bool is_recv(ActionKind k) {
  return k == ActionKind::kRecvForward || k == ActionKind::kRecvBackward;
}
// Activations travel forward (to virtual stage + 1), gradients backward (to virtual stage - 1).
inline constexpr bool is_forward_direction(ActionKind k) {
  return k == ActionKind::kSendForward || k == ActionKind::kRecvForward;
}

// "F", "B", "W", "send-forward", "recv-forward", "send-backward", "recv-backward".
const char* to_string(ActionKind k);

struct Action {
  ActionKind kind = ActionKind::kForward;
  // P2P actions only: true on the last action of one p2p group. A group is a run of consecutive
  // p2p actions (at most one of each p2p kind) issued together, like one Megatron p2p call
  // (batch_isend_irecv; ncclGroupStart/End), and completed before the rank goes on.
  bool ends_group = false;
  int16_t chunk = 0;       // model chunk on this rank, 0 .. vpp-1
  int32_t microbatch = 0;  // 0 .. microbatches-1
  int32_t peer = -1;       // p2p: pipeline rank of the other side; compute: -1
  bool operator==(const Action&) const = default;
};
static_assert(sizeof(Action) == 12, "Action is kept compact: schedules hold millions of them");

inline Action compute_action(ActionKind k, int64_t microbatch, int64_t chunk) {
  return {k, false, static_cast<int16_t>(chunk), static_cast<int32_t>(microbatch), -1};
}
inline Action p2p_action(ActionKind k, int64_t microbatch, int64_t chunk, int64_t peer,
                         bool ends_group) {
  return {k, ends_group, static_cast<int16_t>(chunk), static_cast<int32_t>(microbatch),
          static_cast<int32_t>(peer)};
}

// "F3" / "B3.1" (micro-batch 3 on chunk 1; the chunk is shown when `show_chunk`), or for p2p
// "send-forward 3.1 -> 2" / "recv-backward 0.0 <- 1".
std::string to_string(const Action& a, bool show_chunk = true);
// "F (micro-batch 3, chunk 1)": the wording of validation messages.
std::string describe(const Action& a);

}  // namespace mplan
