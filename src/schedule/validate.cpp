// validate(schedule): structure, per-rank order, send/receive pairing, then a progress run of
// the blocking groups. Each stage assumes the previous ones passed; the first violation wins.
#include "src/schedule/validate.hpp"

#include <array>
#include <vector>

#include "src/common/error.hpp"
#include "src/schedule/rendezvous.hpp"

namespace mplan {

std::string to_string(const ScheduleViolation& v) {
  if (v.rank < 0) return v.message;
  if (v.index < 0) return cat("rank ", v.rank, ": ", v.message);
  return cat("rank ", v.rank, ", action ", v.index, ": ", v.message);
}

namespace {

using K = ActionKind;
using Result = std::optional<ScheduleViolation>;

Result at(const Schedule& s, int64_t r, int64_t flat, std::string msg) {
  return ScheduleViolation{r, flat < 0 ? -1 : flat - s.rank_begin[r], std::move(msg)};
}

// The rank a p2p action of kind `k` on (rank, chunk) must talk to, or -1 when the virtual stage
// has no neighbour in that direction.
int64_t expected_peer(const ScheduleSpec& spec, K k, int64_t rank, int64_t chunk) {
  const int64_t vs = virtual_stage(spec, rank, chunk), last = num_virtual_stages(spec) - 1;
  const bool towards_next = k == K::kSendForward || k == K::kRecvBackward;
  if (towards_next) return vs < last ? (rank + 1) % spec.pp : -1;
  return vs > 0 ? (rank - 1 + spec.pp) % spec.pp : -1;
}

Result check_structure(const Schedule& s) {
  if (auto p = check_spec(s.spec))
    return ScheduleViolation{-1, -1, cat("spec: ", to_string(p->field), ": ", p->rule)};
  const int64_t pp = s.pp(), n = static_cast<int64_t>(s.actions.size());
  if (static_cast<int64_t>(s.rank_begin.size()) != pp + 1 || s.rank_begin.front() != 0 ||
      s.rank_begin.back() != n)
    return ScheduleViolation{
        -1, -1, cat("rank_begin must hold pp + 1 = ", pp + 1, " offsets from 0 to ", n)};
  if (static_cast<int64_t>(s.warmup.size()) != pp)
    return ScheduleViolation{-1, -1, cat("warmup must hold pp = ", pp, " counts")};
  if (s.spec.forward_only && s.split_backward)
    return ScheduleViolation{-1, -1, "a forward-only schedule has no backward to split"};
  for (int64_t r = 0; r < pp; ++r) {
    if (s.rank_begin[r] > s.rank_begin[r + 1])
      return ScheduleViolation{r, -1, "rank_begin is not increasing"};
    std::array<bool, kNumActionKinds> in_group{};
    for (int64_t i = s.rank_begin[r]; i < s.rank_begin[r + 1]; ++i) {
      const Action& a = s.actions[i];
      if (static_cast<int>(a.kind) >= kNumActionKinds)
        return at(s, r, i, cat("unknown action kind ", static_cast<int>(a.kind)));
      if (a.microbatch < 0 || a.microbatch >= s.spec.microbatches)
        return at(s, r, i, cat(describe(a), ": micro-batch outside 0..", s.spec.microbatches - 1));
      if (a.chunk < 0 || a.chunk >= s.spec.vpp)
        return at(s, r, i, cat(describe(a), ": chunk outside 0..", s.spec.vpp - 1));
      if (is_compute(a.kind)) {
        if (a.peer != -1 || a.ends_group)
          return at(s, r, i, cat(describe(a), ": a compute action has no peer and no group"));
        if (a.kind == K::kWeightGrad && !s.split_backward)
          return at(s, r, i, cat(describe(a), ": W in a schedule that does not split backward"));
        continue;
      }
      const int64_t want = expected_peer(s.spec, a.kind, r, a.chunk);
      if (want < 0)
        return at(s, r, i,
                  cat(describe(a), ": virtual stage ", virtual_stage(s.spec, r, a.chunk),
                      " has no neighbour in that direction"));
      if (a.peer != want)
        return at(s, r, i, cat(describe(a), ": the neighbouring virtual stage is on rank ", want));
      if (in_group[static_cast<int>(a.kind)])
        return at(s, r, i, cat(describe(a), ": two ", to_string(a.kind), " in one p2p group"));
      in_group[static_cast<int>(a.kind)] = true;
      if (a.ends_group) {
        in_group = {};
      } else if (i + 1 == s.rank_begin[r + 1] || is_compute(s.actions[i + 1].kind)) {
        return at(s, r, i, cat(describe(a), ": p2p group not closed (ends_group unset)"));
      }
    }
  }
  return std::nullopt;
}

// Per (micro-batch, chunk) of one rank: which actions have been seen.
enum Seen : uint8_t { kF = 1, kB = 2, kW = 4, kRF = 8, kSF = 16, kRB = 32, kSB = 64 };

Result check_rank_order(const Schedule& s, int64_t r, std::vector<uint8_t>& seen) {
  const ScheduleSpec& spec = s.spec;
  const int64_t last_vs = num_virtual_stages(spec) - 1;
  seen.assign(spec.microbatches * spec.vpp, 0);
  auto twice = [&](int64_t i, const Action& a) {
    return at(s, r, i, cat(describe(a), " appears twice"));
  };
  for (int64_t i = s.rank_begin[r]; i < s.rank_begin[r + 1]; ++i) {
    const Action& a = s.actions[i];
    uint8_t& st = seen[a.microbatch * spec.vpp + a.chunk];
    const int64_t vs = virtual_stage(spec, r, a.chunk);
    if (spec.forward_only && (a.kind == K::kBackward || a.kind == K::kWeightGrad ||
                              a.kind == K::kRecvBackward || a.kind == K::kSendBackward))
      return at(s, r, i, cat(describe(a), " in a forward-only schedule"));
    auto need = [&](uint8_t bit, const char* what) -> Result {
      if (st & bit) return std::nullopt;
      return at(s, r, i, cat(describe(a), " comes before its ", what));
    };
    Result bad;
    switch (a.kind) {
      case K::kForward:
        if (st & kF) return twice(i, a);
        if (vs > 0) bad = need(kRF, "recv-forward");
        st |= kF;
        break;
      case K::kBackward:
        if (st & kB) return twice(i, a);
        bad = need(kF, "F");
        if (!bad && vs < last_vs) bad = need(kRB, "recv-backward");
        st |= kB;
        break;
      case K::kWeightGrad:
        if (st & kW) return twice(i, a);
        bad = need(kB, "B");
        st |= kW;
        break;
      case K::kRecvForward:
        if (st & kRF) return twice(i, a);
        st |= kRF;
        break;
      case K::kSendForward:
        if (st & kSF) return twice(i, a);
        bad = need(kF, "F");
        st |= kSF;
        break;
      case K::kRecvBackward:
        if (st & kRB) return twice(i, a);
        st |= kRB;
        break;
      case K::kSendBackward:
        if (st & kSB) return twice(i, a);
        bad = need(kB, "B");
        st |= kSB;
        break;
    }
    if (bad) return bad;
  }
  for (int64_t mb = 0; mb < spec.microbatches; ++mb)
    for (int64_t c = 0; c < spec.vpp; ++c) {
      const uint8_t st = seen[mb * spec.vpp + c];
      const int64_t vs = virtual_stage(spec, r, c);
      struct Want {
        uint8_t bit;
        bool wanted;
        K kind;
      };
      const bool bwd = !spec.forward_only;
      const Want wants[] = {{kF, true, K::kForward},
                            {kB, bwd, K::kBackward},
                            {kW, s.split_backward, K::kWeightGrad},
                            {kRF, vs > 0, K::kRecvForward},
                            {kSF, vs < last_vs, K::kSendForward},
                            {kRB, bwd && vs < last_vs, K::kRecvBackward},
                            {kSB, bwd && vs > 0, K::kSendBackward}};
      for (const Want& w : wants)
        if (w.wanted && !(st & w.bit))
          return ScheduleViolation{
              r, -1, cat(to_string(w.kind), " (micro-batch ", mb, ", chunk ", c, ") is missing")};
    }
  return std::nullopt;
}

Result check_pairing(const Schedule& s, const std::vector<int64_t>& partner) {
  const int64_t pp = s.pp();
  auto count = [&](int64_t r, int64_t peer, bool sends) {
    int64_t n = 0;
    for (const Action& a : s.rank(r))
      if (is_p2p(a.kind) && a.peer == peer && is_send(a.kind) == sends) ++n;
    return n;
  };
  for (int64_t r = 0; r < pp; ++r) {
    std::vector<int64_t> nth_send(pp, 0), nth_recv(pp, 0);  // per peer, so far
    for (int64_t i = s.rank_begin[r]; i < s.rank_begin[r + 1]; ++i) {
      const Action& a = s.actions[i];
      if (is_compute(a.kind)) continue;
      const bool send = is_send(a.kind);
      const int64_t k = ++(send ? nth_send : nth_recv)[a.peer];
      const int64_t other = partner[i];
      if (other < 0)
        return at(s, r, i,
                  send ? cat(describe(a), " is send ", k, " from rank ", r, " to rank ", a.peer,
                             ", but rank ", a.peer, " receives only ", count(a.peer, r, false),
                             " from rank ", r)
                       : cat(describe(a), " is receive ", k, " on rank ", r, " from rank ", a.peer,
                             ", but rank ", a.peer, " sends only ", count(a.peer, r, true),
                             " to rank ", r));
      if (!send) continue;
      const Action& b = s.actions[other];
      const int64_t q = a.peer;
      const bool fwd = a.kind == K::kSendForward;
      const int64_t vs = virtual_stage(s.spec, r, a.chunk);
      const bool same_tensor = b.kind == (fwd ? K::kRecvForward : K::kRecvBackward) &&
                               b.microbatch == a.microbatch &&
                               virtual_stage(s.spec, q, b.chunk) == vs + (fwd ? 1 : -1);
      if (!same_tensor)
        return at(s, r, i,
                  cat(describe(a), " is send ", k, " from rank ", r, " to rank ", q,
                      "; it meets receive ", k, " there, ", describe(b), " (rank ", q, ", action ",
                      other - s.rank_begin[q], "), which expects another tensor"));
    }
  }
  return std::nullopt;
}

// One past the last action of the p2p group that starts at `flat`.
int64_t group_end(const Schedule& s, int64_t flat) {
  while (!s.actions[flat].ends_group) ++flat;
  return flat + 1;
}

Result check_progress(const Schedule& s, const std::vector<int64_t>& partner) {
  RendezvousRun run = run_rendezvous(s, partner, [](const Action&) { return 1.0; });
  if (run.completed) return std::nullopt;
  std::string msg = "deadlock: these blocking p2p groups can never complete:";
  int64_t first = -1, shown = 0;
  for (int64_t r = 0; r < s.pp(); ++r) {
    const int64_t p = run.stuck[r];
    if (p < 0) continue;
    if (first < 0) first = r;
    if (++shown > 4) {
      msg += " ...;";
      break;
    }
    // The first action of the group whose partner's group was never posted.
    int64_t i = p;
    for (; i < group_end(s, p); ++i) {
      const int64_t q = s.actions[i].peer;
      if (run.stuck[q] >= 0 && partner[i] >= group_end(s, run.stuck[q])) break;
    }
    MPLAN_CHECK(i < group_end(s, p), "stuck group without an unposted partner");
    const int64_t q = s.actions[i].peer, other = partner[i];
    msg += cat(" rank ", r, " waits in ", describe(s.actions[i]), " (action ", i - s.rank_begin[r],
               ") for rank ", q, " to reach ", describe(s.actions[other]), " (action ",
               other - s.rank_begin[q], ");");
  }
  msg.pop_back();
  return ScheduleViolation{first, run.stuck[first] - s.rank_begin[first], msg};
}

}  // namespace

std::optional<ScheduleViolation> validate(const Schedule& s) {
  if (auto v = check_structure(s)) return v;
  std::vector<uint8_t> seen;
  for (int64_t r = 0; r < s.pp(); ++r)
    if (auto v = check_rank_order(s, r, seen)) return v;
  const std::vector<int64_t> partner = match_p2p(s);
  if (auto v = check_pairing(s, partner)) return v;
  return check_progress(s, partner);
}

}  // namespace mplan
