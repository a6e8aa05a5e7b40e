// The event loop. Per op the work is O(1 + waits + memory deltas): no allocation, no maps, no
// virtual calls; the heap holds at most one event per stream (the op it is running).
#include "sim/des/engine.hpp"

#include <algorithm>

#include "src/common/error.hpp"

namespace mplan::des {

namespace {
enum : uint8_t { kPending = 0, kArrived = 1, kRunning = 2, kDone = 3 };
}

void Engine::prepare(const Program& p, SimResult& out, bool fuse_chains) {
  const int32_t n = p.num_ops();
  const auto& waits = p.waits();
  const auto& mem = p.mem_deltas();

  for (size_t r = 0; r < p.rendezvous().size(); ++r) {
    const Rendezvous& rv = p.rendezvous()[r];
    MPLAN_CHECK(rv.num_members == rv.expected_members, "rendezvous ", r, " has ", rv.num_members,
                " of its ", rv.expected_members, " members");
  }

  // Waits: a counter per op, and the reverse edges (who waits on me) as CSR.
  remaining_.assign(static_cast<size_t>(n), 0);
  dep_off_.assign(static_cast<size_t>(n) + 1, 0);
  for (const Wait& w : waits) {
    ++remaining_[w.op];
    ++dep_off_[w.dep + 1];
  }
  for (int32_t i = 0; i < n; ++i) dep_off_[i + 1] += dep_off_[i];
  dep_list_.resize(waits.size());
  {
    // Fill in add order, using the counters of the next slot as cursors.
    std::vector<int32_t>& cursor = mem_off_;  // borrowed as scratch; rebuilt below
    cursor.assign(dep_off_.begin(), dep_off_.end() - 1);
    for (const Wait& w : waits) dep_list_[cursor[w.dep]++] = w.op;
  }
  // Memory deltas of each op as CSR, in add order.
  mem_off_.assign(static_cast<size_t>(n) + 1, 0);
  for (const MemDelta& d : mem) ++mem_off_[d.op + 1];
  for (int32_t i = 0; i < n; ++i) mem_off_[i + 1] += mem_off_[i];
  mem_list_.resize(mem.size());
  {
    std::vector<int32_t>& cursor = arrived_;  // scratch; reset below
    cursor.assign(mem_off_.begin(), mem_off_.end() - 1);
    for (size_t i = 0; i < mem.size(); ++i)
      mem_list_[cursor[mem[i].op]++] = static_cast<int32_t>(i);
  }

  // Chains: op -> the next op of its stream when nothing can observe op's end but that next op
  // (nobody waits on op, op frees or allocates nothing at its end) and the next op can start the
  // moment op ends (no waits, no rendezvous, no memory change at its start). Such a successor is
  // started without an event of its own.
  chain_next_.assign(static_cast<size_t>(n), kNone);
  if (fuse_chains) {
    auto has_mem = [&](OpId op, MemWhen when) {
      for (int32_t i = mem_off_[op]; i < mem_off_[op + 1]; ++i)
        if (mem[mem_list_[i]].when == when) return true;
      return false;
    };
    for (OpId op = 0; op < n; ++op) {
      const OpId next = p.op(op).next_in_stream;
      if (next == kNone || dep_off_[op] != dep_off_[op + 1] || has_mem(op, MemWhen::kAtEnd))
        continue;
      if (p.op(next).rendezvous != kNone || remaining_[next] != 0 ||
          has_mem(next, MemWhen::kAtStart))
        continue;
      chain_next_[op] = next;
    }
  }

  state_.assign(static_cast<size_t>(n), kPending);
  arrived_.assign(p.rendezvous().size(), 0);
  head_.resize(static_cast<size_t>(p.num_streams()));
  for (int32_t s = 0; s < p.num_streams(); ++s) head_[s] = p.stream_first(s);
  queue_.clear();
  queue_.reserve(static_cast<size_t>(p.num_streams()) + 1);
  candidates_.clear();

  out.completed = false;
  out.makespan_ns = 0;
  out.ops.assign(static_cast<size_t>(n), OpTiming{});
  out.rank_end_ns.assign(static_cast<size_t>(p.num_ranks()), 0);
  out.memory.resize(static_cast<size_t>(p.num_ranks()));
  mem_total_.assign(static_cast<size_t>(p.num_ranks()), 0);
  for (int32_t r = 0; r < p.num_ranks(); ++r) {
    RankMemory& m = out.memory[r];
    m.final_bytes = p.initial_memory(r);
    int64_t total = 0;
    for (int64_t b : m.final_bytes) total += b;
    mem_total_[r] = total;
    m.peak_bytes = total;
    m.peak_time_ns = 0;
    m.at_peak = m.final_bytes;
    m.timeline.clear();
  }
  out.deadlock = DeadlockReport{};
}

void Engine::run(const Program& p, SimResult& out, const RunOptions& opt) {
  prepare(p, out, opt.fuse_chains);
  const int32_t n = p.num_ops();
  const int32_t streams_per_rank = p.streams_per_rank();
  // Raw views of the arrays the loop touches (the vectors do not change size below).
  const Op* ops = p.ops().data();
  const Rendezvous* rvs = p.rendezvous().data();
  const MemDelta* deltas = p.mem_deltas().data();
  const int32_t* dep_off = dep_off_.data();
  const OpId* dep_list = dep_list_.data();
  const int32_t* mem_off = mem_off_.data();
  const int32_t* mem_list = mem_list_.data();
  int32_t* remaining = remaining_.data();
  uint8_t* state = state_.data();
  int32_t* arrived = arrived_.data();
  const OpId* chain_next = chain_next_.data();
  OpId* head = head_.data();
  OpTiming* timing = out.ops.data();
  int64_t* rank_end = out.rank_end_ns.data();

  auto apply_memory = [&](OpId op, MemWhen when, int64_t now) {
    const int32_t b = mem_off[op], e = mem_off[op + 1];
    if (b == e) return;
    const int32_t rank = ops[op].rank;
    RankMemory& m = out.memory[rank];
    for (int32_t i = b; i < e; ++i) {
      const MemDelta& d = deltas[mem_list[i]];
      if (d.when != when) continue;
      m.final_bytes[d.mem_class] += d.bytes;
      const int64_t total = (mem_total_[rank] += d.bytes);
      if (total > m.peak_bytes) {
        m.peak_bytes = total;
        m.peak_time_ns = now;
        m.at_peak = m.final_bytes;
      }
      if (opt.record_memory_timeline) m.timeline.push_back({now, total});
    }
  };
  int64_t done = 0;
  auto start = [&](OpId op, int64_t now, int64_t duration) {
    state[op] = kRunning;
    timing[op].start_ns = now;
    apply_memory(op, MemWhen::kAtStart, now);
    int64_t end = now + duration;
    // Run the op's chain (see prepare) back to back; only the last op gets an event.
    for (OpId next = chain_next[op]; next != kNone; next = chain_next[op]) {
      const Op& o = ops[op];
      timing[op].end_ns = end;
      state[op] = kDone;
      ++done;
      head[o.rank * streams_per_rank + o.stream] = next;
      state[next] = kRunning;
      timing[next].ready_ns = end;
      timing[next].start_ns = end;
      op = next;
      end += ops[op].duration_ns;
    }
    queue_.push(end, op);
  };
  auto try_start = [&](OpId op, int64_t now) {
    const Op& o = ops[op];
    if (state[op] != kPending || remaining[op] != 0) return;
    if (head[o.rank * streams_per_rank + o.stream] != op) return;
    timing[op].ready_ns = now;
    if (o.rendezvous == kNone) {
      start(op, now, o.duration_ns);
      return;
    }
    state[op] = kArrived;
    const Rendezvous& rv = rvs[o.rendezvous];
    if (++arrived[o.rendezvous] < rv.expected_members) return;
    int64_t duration = rv.duration_ns;
    if (duration == kDurationFromCallback) {
      MPLAN_CHECK(opt.cost_fn != nullptr, "rendezvous ", o.rendezvous,
                  " wants its duration from RunOptions::cost_fn, which is not set");
      duration = opt.cost_fn(opt.cost_ctx, p, o.rendezvous, now);
      MPLAN_CHECK(duration >= 0, "cost_fn returned ", duration, " ns for rendezvous ",
                  o.rendezvous);
    }
    for (OpId m = rv.first_member; m != kNone; m = ops[m].next_member) start(m, now, duration);
  };

  int64_t now = 0;
  for (int32_t s = 0; s < p.num_streams(); ++s)
    if (head[s] != kNone) candidates_.push_back(head[s]);
  for (OpId c : candidates_) try_start(c, now);

  while (!queue_.empty()) {
    now = queue_.top().time_ns;
    candidates_.clear();
    // End everything due now, in (time, sequence) order.
    do {
      const OpId op = queue_.pop().op();
      const Op& o = ops[op];
      state[op] = kDone;
      ++done;
      timing[op].end_ns = now;
      apply_memory(op, MemWhen::kAtEnd, now);
      if (rank_end[o.rank] < now) rank_end[o.rank] = now;
      const OpId next = o.next_in_stream;
      head[o.rank * streams_per_rank + o.stream] = next;
      if (next != kNone) candidates_.push_back(next);
      for (int32_t i = dep_off[op], e = dep_off[op + 1]; i < e; ++i) {
        const OpId w = dep_list[i];
        if (--remaining[w] == 0) candidates_.push_back(w);
      }
    } while (!queue_.empty() && queue_.top().time_ns == now);
    // Then start what became ready, in the order it became ready.
    for (size_t i = 0; i < candidates_.size(); ++i) try_start(candidates_[i], now);
  }

  out.makespan_ns = now;
  out.completed = (done == n);
  if (!out.completed) report_deadlock(p, now, done, out);
}

void Engine::report_deadlock(const Program& p, int64_t now, int64_t done, SimResult& out) {
  DeadlockReport& r = out.deadlock;
  r.time_ns = now;
  r.ops_done = done;
  r.ops_total = p.num_ops();
  r.stream_heads.assign(head_.begin(), head_.end());
  for (int32_t s = 0; s < p.num_streams(); ++s) {
    OpId op = head_[s];
    if (op == kNone) continue;
    BlockedOp b;
    b.op = op;
    const Op& o = p.op(op);
    if (state_[op] == kArrived) {
      b.at_rendezvous = true;
      for (OpId m = p.rendezvous()[o.rendezvous].first_member; m != kNone; m = p.op(m).next_member)
        if (state_[m] == kPending) b.waiting_for.push_back(m);
    } else {
      for (const Wait& w : p.waits())
        if (w.op == op && state_[w.dep] != kDone) b.waiting_for.push_back(w.dep);
    }
    r.blocked.push_back(std::move(b));
  }
  MPLAN_CHECK(!r.blocked.empty(), "ops left undone but no stream is stuck");
}

SimResult simulate(const Program& p, const RunOptions& opt) {
  Engine e;
  SimResult r;
  e.run(p, r, opt);
  return r;
}

}  // namespace mplan::des
