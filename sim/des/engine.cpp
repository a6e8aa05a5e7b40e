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
  for (size_t r = 0; r < p.rendezvous().size(); ++r) {
    const Rendezvous& rv = p.rendezvous()[r];
    MPLAN_CHECK(rv.num_members == rv.expected_members, "rendezvous ", r, " has ", rv.num_members,
                " of its ", rv.expected_members, " members");
  }
  // In this order: each index borrows a later one's array as scratch.
  index_waits(p);
  index_mem_deltas(p);
  find_chains(p, fuse_chains);
  reset_state(p);
  reset_result(p, out);
}

void Engine::index_waits(const Program& p) {
  // A counter per op, and the reverse edges (who waits on me) as CSR.
  const int32_t n = p.num_ops();
  const auto& waits = p.waits();
  remaining_.assign(static_cast<size_t>(n), 0);
  dep_off_.assign(static_cast<size_t>(n) + 1, 0);
  for (const Wait& w : waits) {
    ++remaining_[w.op];
    ++dep_off_[w.dep + 1];
  }
  for (int32_t i = 0; i < n; ++i) dep_off_[i + 1] += dep_off_[i];
  dep_list_.resize(waits.size());
  // Fill in add order, using the counters of the next slot as cursors.
  std::vector<int32_t>& cursor = mem_off_;  // borrowed as scratch; rebuilt by index_mem_deltas
  cursor.assign(dep_off_.begin(), dep_off_.end() - 1);
  for (const Wait& w : waits) dep_list_[cursor[w.dep]++] = w.op;
}

void Engine::index_mem_deltas(const Program& p) {
  // The memory deltas of each op as CSR, in add order.
  const int32_t n = p.num_ops();
  const auto& mem = p.mem_deltas();
  mem_off_.assign(static_cast<size_t>(n) + 1, 0);
  for (const MemDelta& d : mem) ++mem_off_[d.op + 1];
  for (int32_t i = 0; i < n; ++i) mem_off_[i + 1] += mem_off_[i];
  mem_list_.resize(mem.size());
  std::vector<int32_t>& cursor = arrived_;  // scratch; reset by reset_state
  cursor.assign(mem_off_.begin(), mem_off_.end() - 1);
  for (size_t i = 0; i < mem.size(); ++i) mem_list_[cursor[mem[i].op]++] = static_cast<int32_t>(i);
}

void Engine::find_chains(const Program& p, bool fuse_chains) {
  // op -> the next op of its stream when nothing can observe op's end but that next op (nobody
  // waits on op, op frees or allocates nothing at its end) and the next op can start the moment
  // op ends (no waits, no rendezvous, no memory change at its start). Such a successor is
  // started without an event of its own.
  const int32_t n = p.num_ops();
  chain_next_.assign(static_cast<size_t>(n), kNone);
  if (!fuse_chains) return;
  const auto& mem = p.mem_deltas();
  auto has_mem = [&](OpId op, MemWhen when) {
    for (int32_t i = mem_off_[op]; i < mem_off_[op + 1]; ++i)
      if (mem[mem_list_[i]].when == when) return true;
    return false;
  };
  for (OpId op = 0; op < n; ++op) {
    const OpId next = p.op(op).next_in_stream;
    if (next == kNone || dep_off_[op] != dep_off_[op + 1] || has_mem(op, MemWhen::kAtEnd)) continue;
    if (p.op(next).rendezvous != kNone || remaining_[next] != 0 || has_mem(next, MemWhen::kAtStart))
      continue;
    chain_next_[op] = next;
  }
}

void Engine::reset_state(const Program& p) {
  state_.assign(static_cast<size_t>(p.num_ops()), kPending);
  arrived_.assign(p.rendezvous().size(), 0);
  head_.resize(static_cast<size_t>(p.num_streams()));
  for (int32_t s = 0; s < p.num_streams(); ++s) head_[s] = p.stream_first(s);
  queue_.clear();
  queue_.reserve(static_cast<size_t>(p.num_streams()) + 1);
  candidates_.clear();
}

void Engine::reset_result(const Program& p, SimResult& out) {
  out.completed = false;
  out.makespan_ns = 0;
  out.ops.assign(static_cast<size_t>(p.num_ops()), OpTiming{});
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

// One run of the event loop: raw views of the engine's arrays (their sizes do not change during
// a run) and the steps of the loop. At each instant the loop first ends every op due (end_due),
// then starts what became ready, in the order it became ready (start_candidates).
class Engine::Loop {
 public:
  Loop(Engine& e, const Program& p, SimResult& out, const RunOptions& opt)
      : e_(e),
        p_(p),
        out_(out),
        opt_(opt),
        streams_per_rank_(p.streams_per_rank()),
        ops_(p.ops().data()),
        rvs_(p.rendezvous().data()),
        deltas_(p.mem_deltas().data()),
        dep_off_(e.dep_off_.data()),
        dep_list_(e.dep_list_.data()),
        mem_off_(e.mem_off_.data()),
        mem_list_(e.mem_list_.data()),
        remaining_(e.remaining_.data()),
        state_(e.state_.data()),
        arrived_(e.arrived_.data()),
        chain_next_(e.chain_next_.data()),
        head_(e.head_.data()),
        timing_(out.ops.data()),
        rank_end_(out.rank_end_ns.data()) {}

  int64_t done() const { return done_; }

  // Time 0: the first op of every stream, if nothing holds it back.
  void start_stream_heads() {
    for (int32_t s = 0; s < p_.num_streams(); ++s)
      if (head_[s] != kNone) e_.candidates_.push_back(head_[s]);
    for (OpId c : e_.candidates_) try_start(c, 0);
  }

  // Ends every op due at the earliest queued time, in (time, sequence) order: frees its memory,
  // advances its stream, releases what waits on it (as candidates). Returns that time.
  int64_t end_due() {
    const int64_t now = e_.queue_.top().time_ns;
    e_.candidates_.clear();
    do {
      end(e_.queue_.pop().op(), now);
    } while (!e_.queue_.empty() && e_.queue_.top().time_ns == now);
    return now;
  }

  // Starts the candidates that are ready, in the order they became candidates.
  void start_candidates(int64_t now) {
    for (size_t i = 0; i < e_.candidates_.size(); ++i) try_start(e_.candidates_[i], now);
  }

 private:
  void end(OpId op, int64_t now) {
    const Op& o = ops_[op];
    state_[op] = kDone;
    ++done_;
    timing_[op].end_ns = now;
    apply_memory(op, MemWhen::kAtEnd, now);
    if (rank_end_[o.rank] < now) rank_end_[o.rank] = now;
    const OpId next = o.next_in_stream;
    head_[o.rank * streams_per_rank_ + o.stream] = next;
    if (next != kNone) e_.candidates_.push_back(next);
    for (int32_t i = dep_off_[op], last = dep_off_[op + 1]; i < last; ++i) {
      const OpId w = dep_list_[i];
      if (--remaining_[w] == 0) e_.candidates_.push_back(w);
    }
  }

  // The memory deltas of `op` that happen `when` (at its start or end), and the rank's peak.
  void apply_memory(OpId op, MemWhen when, int64_t now) {
    const int32_t b = mem_off_[op], e = mem_off_[op + 1];
    if (b == e) return;
    const int32_t rank = ops_[op].rank;
    RankMemory& m = out_.memory[rank];
    for (int32_t i = b; i < e; ++i) {
      const MemDelta& d = deltas_[mem_list_[i]];
      if (d.when != when) continue;
      m.final_bytes[d.mem_class] += d.bytes;
      const int64_t total = (e_.mem_total_[rank] += d.bytes);
      if (total > m.peak_bytes) {
        m.peak_bytes = total;
        m.peak_time_ns = now;
        m.at_peak = m.final_bytes;
      }
      if (opt_.record_memory_timeline) m.timeline.push_back({now, total});
    }
  }

  // Starts `op` for `duration`, and the chain behind it (see prepare) back to back; only the last
  // op of the chain gets an event.
  void start(OpId op, int64_t now, int64_t duration) {
    state_[op] = kRunning;
    timing_[op].start_ns = now;
    apply_memory(op, MemWhen::kAtStart, now);
    int64_t end = now + duration;
    for (OpId next = chain_next_[op]; next != kNone; next = chain_next_[op]) {
      const Op& o = ops_[op];
      timing_[op].end_ns = end;
      state_[op] = kDone;
      ++done_;
      head_[o.rank * streams_per_rank_ + o.stream] = next;
      state_[next] = kRunning;
      timing_[next].ready_ns = end;
      timing_[next].start_ns = end;
      op = next;
      end += ops_[op].duration_ns;
    }
    e_.queue_.push(end, op);
  }

  // Starts `op` if it is its stream's head with nothing left to wait for; a rendezvous member
  // arrives, and the last to arrive starts them all.
  void try_start(OpId op, int64_t now) {
    const Op& o = ops_[op];
    if (state_[op] != kPending || remaining_[op] != 0) return;
    if (head_[o.rank * streams_per_rank_ + o.stream] != op) return;
    timing_[op].ready_ns = now;
    if (o.rendezvous == kNone) {
      start(op, now, o.duration_ns);
      return;
    }
    state_[op] = kArrived;
    const Rendezvous& rv = rvs_[o.rendezvous];
    if (++arrived_[o.rendezvous] < rv.expected_members) return;
    const int64_t duration = rendezvous_duration(o.rendezvous, now);
    for (OpId m = rv.first_member; m != kNone; m = ops_[m].next_member) start(m, now, duration);
  }

  int64_t rendezvous_duration(RendezvousId id, int64_t now) const {
    int64_t duration = rvs_[id].duration_ns;
    if (duration != kDurationFromCallback) return duration;
    MPLAN_CHECK(opt_.cost_fn != nullptr, "rendezvous ", id,
                " wants its duration from RunOptions::cost_fn, which is not set");
    duration = opt_.cost_fn(opt_.cost_ctx, p_, id, now);
    MPLAN_CHECK(duration >= 0, "cost_fn returned ", duration, " ns for rendezvous ", id);
    return duration;
  }

  Engine& e_;
  const Program& p_;
  SimResult& out_;
  const RunOptions& opt_;
  const int32_t streams_per_rank_;
  const Op* ops_;
  const Rendezvous* rvs_;
  const MemDelta* deltas_;
  const int32_t* dep_off_;
  const OpId* dep_list_;
  const int32_t* mem_off_;
  const int32_t* mem_list_;
  int32_t* remaining_;
  uint8_t* state_;
  int32_t* arrived_;
  const OpId* chain_next_;
  OpId* head_;
  OpTiming* timing_;
  int64_t* rank_end_;
  int64_t done_ = 0;
};

void Engine::run(const Program& p, SimResult& out, const RunOptions& opt) {
  prepare(p, out, opt.fuse_chains);
  Loop loop(*this, p, out, opt);
  int64_t now = 0;
  loop.start_stream_heads();
  while (!queue_.empty()) {
    now = loop.end_due();
    loop.start_candidates(now);
  }
  out.makespan_ns = now;
  out.completed = loop.done() == p.num_ops();
  if (!out.completed) report_deadlock(p, now, loop.done(), out);
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
