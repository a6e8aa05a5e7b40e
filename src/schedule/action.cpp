// Action names and descriptions (the JSON "op" values and the wording of validation messages).
#include "src/schedule/action.hpp"

#include "src/common/error.hpp"

namespace mplan {

const char* to_string(ActionKind k) {
  switch (k) {
    case ActionKind::kForward:
      return "F";
    case ActionKind::kBackward:
      return "B";
    case ActionKind::kWeightGrad:
      return "W";
    case ActionKind::kSendForward:
      return "send-forward";
    case ActionKind::kRecvForward:
      return "recv-forward";
    case ActionKind::kSendBackward:
      return "send-backward";
    case ActionKind::kRecvBackward:
      return "recv-backward";
  }
  return "?";
}

std::string to_string(const Action& a, bool show_chunk) {
  std::string id = show_chunk ? cat(a.microbatch, ".", a.chunk) : cat(a.microbatch);
  if (is_compute(a.kind)) return cat(to_string(a.kind), id);
  return cat(to_string(a.kind), " ", id, is_send(a.kind) ? " -> " : " <- ", a.peer);
}

std::string describe(const Action& a) {
  std::string s = cat(to_string(a.kind), " (micro-batch ", a.microbatch, ", chunk ", a.chunk, ")");
  if (is_send(a.kind)) s += cat(" to rank ", a.peer);
  if (is_recv(a.kind)) s += cat(" from rank ", a.peer);
  return s;
}

}  // namespace mplan
