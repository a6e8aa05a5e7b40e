// Send/receive matching and the blocking-group progress engine. Linear in the number of actions:
// a blocked rank is re-examined only when one of its peers posts a new group.
#include "src/schedule/rendezvous.hpp"

#include <algorithm>

#include "src/common/error.hpp"

namespace mplan {

std::vector<int64_t> match_p2p(const Schedule& s) {
  const int64_t pp = s.pp();
  std::vector<int64_t> partner(s.actions.size(), -1);
  if (pp < 2) return partner;
  // Slot 0: peer (r + 1) % pp, slot 1: peer (r - 1 + pp) % pp (the same rank when pp == 2).
  auto slot = [&](int64_t r, int64_t peer) -> int {
    if (peer == (r + 1) % pp) return 0;
    if (peer == (r - 1 + pp) % pp) return 1;
    return -1;
  };
  // sends[r][slot], recvs[r][slot]: flat indices in program order.
  std::vector<std::vector<int64_t>> sends(2 * pp), recvs(2 * pp);
  for (int64_t r = 0; r < pp; ++r)
    for (int64_t i = s.rank_begin[r]; i < s.rank_begin[r + 1]; ++i) {
      const Action& a = s.actions[i];
      if (is_compute(a.kind) || a.peer < 0 || a.peer >= pp) continue;
      int sl = slot(r, a.peer);
      if (sl < 0) continue;
      (is_send(a.kind) ? sends : recvs)[2 * r + sl].push_back(i);
    }
  for (int64_t a = 0; a < pp; ++a)
    for (int sl = 0; sl < 2; ++sl) {
      if (pp == 2 && sl == 1) continue;  // one peer only
      const int64_t b = sl == 0 ? (a + 1) % pp : (a - 1 + pp) % pp;
      const auto& out = sends[2 * a + sl];
      const auto& in = recvs[2 * b + slot(b, a)];
      const size_t n = std::min(out.size(), in.size());
      for (size_t k = 0; k < n; ++k) {
        partner[out[k]] = in[k];
        partner[in[k]] = out[k];
      }
    }
  return partner;
}

RendezvousRun run_rendezvous(const Schedule& s, const std::vector<int64_t>& partner,
                             const std::function<double(const Action&)>& cost) {
  const int64_t pp = s.pp();
  const size_t n = s.actions.size();
  RendezvousRun run;
  run.start.assign(n, 0.0);
  run.end.assign(n, 0.0);
  std::vector<int64_t> pos(s.rank_begin.begin(), s.rank_begin.end() - 1);
  std::vector<int64_t> reached_end = pos;  // end of the furthest group each rank has posted
  std::vector<double> clock(pp, 0.0);
  std::vector<char> queued(pp, 1);
  std::vector<int64_t> work;
  for (int64_t r = pp - 1; r >= 0; --r) work.push_back(r);

  while (!work.empty()) {
    const int64_t r = work.back();
    work.pop_back();
    queued[r] = 0;
    int64_t& p = pos[r];
    double& t = clock[r];
    const int64_t stop = s.rank_begin[r + 1];
    while (p < stop) {
      const Action& a = s.actions[p];
      if (is_compute(a.kind)) {
        run.start[p] = t;
        t += cost(a);
        run.end[p] = t;
        ++p;
        continue;
      }
      int64_t e = p;
      while (!s.actions[e].ends_group) {
        ++e;
        MPLAN_CHECK(e < stop && is_p2p(s.actions[e].kind), "p2p group without its end on rank ", r);
      }
      ++e;
      if (reached_end[r] < e) {  // post the group, wake the peers
        reached_end[r] = e;
        for (int64_t i = p; i < e; ++i) {
          run.start[i] = t;
          const int64_t q = s.actions[i].peer;
          if (!queued[q]) queued[q] = 1, work.push_back(q);
        }
      }
      double done = t;
      bool ready = true;
      for (int64_t i = p; i < e && ready; ++i) {
        const int64_t other = partner[i];
        MPLAN_CHECK(other >= 0, "unmatched p2p action at ", i);
        const int64_t q = s.actions[i].peer;
        if (other >= reached_end[q])
          ready = false;
        else
          done = std::max(done, run.start[other]);
      }
      if (!ready) break;
      for (int64_t i = p; i < e; ++i) run.end[i] = done;
      t = done;
      p = e;
    }
  }
  run.stuck.assign(pp, -1);
  run.completed = true;
  for (int64_t r = 0; r < pp; ++r)
    if (pos[r] < s.rank_begin[r + 1]) {
      run.stuck[r] = pos[r];
      run.completed = false;
    }
  return run;
}

}  // namespace mplan
