// Test helpers for schedules: specs and schedules in one call, and compact text forms of a rank's
// actions, written independently of the library's own formatting. Compute "F3" (or "F3.1" with
// chunks); a p2p group "[sf0>1 rb0<1]": sf/rf/sb/rb + micro-batch (+ ".chunk") + '>' to or '<'
// from + peer.
#pragma once

#include <string>

#include "src/common/error.hpp"
#include "src/schedule/schedule.hpp"

namespace mplan::test {

// The spec of a `kind` schedule on pp ranks with m micro-batches, vpp model chunks per rank and
// group size g (0: Megatron's default, pp).
inline ScheduleSpec spec(ScheduleKind kind, int64_t pp, int64_t m, int64_t vpp = 1, int64_t g = 0) {
  ScheduleSpec s;
  s.kind = kind;
  s.pp = pp;
  s.microbatches = m;
  s.vpp = vpp;
  s.group_size = g;
  return s;
}

// make_schedule(spec(...)).
inline Schedule make(ScheduleKind kind, int64_t pp, int64_t m, int64_t vpp = 1, int64_t g = 0) {
  return make_schedule(spec(kind, pp, m, vpp, g));
}

// The forward-only (evaluation) schedule of the same spec.
inline Schedule make_forward_only(ScheduleKind kind, int64_t pp, int64_t m, int64_t vpp = 1,
                                  int64_t g = 0) {
  ScheduleSpec s = spec(kind, pp, m, vpp, g);
  s.forward_only = true;
  return make_schedule(s);
}

inline std::string id_of(const Action& a, bool chunks) {
  std::string s = std::to_string(a.microbatch);
  if (chunks) s += cat(".", a.chunk);
  return s;
}

// Compute actions only: "F0 F1 B0 ...".
inline std::string compute_order(const Schedule& s, int64_t rank) {
  const bool chunks = s.spec.vpp > 1;
  std::string out;
  for (const Action& a : s.rank(rank)) {
    const char* k = a.kind == ActionKind::kForward      ? "F"
                    : a.kind == ActionKind::kBackward   ? "B"
                    : a.kind == ActionKind::kWeightGrad ? "W"
                                                        : nullptr;
    if (!k) continue;
    if (!out.empty()) out += ' ';
    out += cat(k, id_of(a, chunks));
  }
  return out;
}

// Every action, p2p groups in brackets.
inline std::string full_order(const Schedule& s, int64_t rank) {
  const bool chunks = s.spec.vpp > 1;
  std::string out;
  bool in_group = false;
  for (const Action& a : s.rank(rank)) {
    std::string item;
    switch (a.kind) {
      case ActionKind::kForward:
        item = "F";
        break;
      case ActionKind::kBackward:
        item = "B";
        break;
      case ActionKind::kWeightGrad:
        item = "W";
        break;
      case ActionKind::kSendForward:
        item = "sf";
        break;
      case ActionKind::kRecvForward:
        item = "rf";
        break;
      case ActionKind::kSendBackward:
        item = "sb";
        break;
      case ActionKind::kRecvBackward:
        item = "rb";
        break;
    }
    item += id_of(a, chunks);
    if (is_p2p(a.kind)) item += cat(is_send(a.kind) ? ">" : "<", a.peer);
    if (!out.empty() && !in_group) out += ' ';
    if (is_p2p(a.kind) && !in_group)
      out += '[', in_group = true;
    else if (in_group)
      out += ' ';
    out += item;
    if (is_p2p(a.kind) && a.ends_group) out += ']', in_group = false;
  }
  return out;
}

}  // namespace mplan::test
