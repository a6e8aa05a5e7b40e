// Engine: the discrete-event simulation of a Program. Integer nanoseconds; the future-event list
// is ordered by (time, push sequence), so a run is deterministic. At each instant the engine
// first ends every op due then (frees, stream heads advance, waits are released), then starts
// what has become ready, in that order — so memory freed at time t is available to ops starting
// at t. Invariant: one op at a time per stream, in the stream's order; a rendezvous starts all of
// its members at once, when the last one arrives.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/des/event_queue.hpp"
#include "sim/des/program.hpp"
#include "sim/des/sim_result.hpp"

namespace mplan::des {

// Duration of rendezvous `rv` starting at `now_ns`, for rendezvous added with
// kDurationFromCallback (e.g. a collective whose cost depends on what else is in flight).
using RendezvousCostFn = int64_t (*)(void* ctx, const Program& program, RendezvousId rv,
                                     int64_t now_ns);

struct RunOptions {
  RendezvousCostFn cost_fn = nullptr;
  void* cost_ctx = nullptr;
  bool record_memory_timeline = false;  // fill RankMemory::timeline (for traces)
  // Run each stream's ops that nothing else observes (no waits on them, no memory change between
  // them, no rendezvous) back to back without an event each. Times, memory and the deadlock
  // report are the same either way; only the order in which ops ending at the very same
  // nanosecond are processed may differ. Off: one event per op.
  bool fuse_chains = true;
};

// Holds the scratch arrays of a run so that running plan after plan allocates nothing once the
// arrays have grown. Not thread-safe: use one Engine per thread.
class Engine {
 public:
  // Runs `p` to completion or deadlock; `out` is overwritten (its capacity is reused).
  void run(const Program& p, SimResult& out, const RunOptions& opt = {});

 private:
  class Loop;  // one run's event loop over these arrays (engine.cpp)

  // Before a run: the program's waits and memory deltas indexed per op, the chains of ops that
  // can run back to back, the per-op state and the result reset.
  void prepare(const Program& p, SimResult& out, bool fuse_chains);
  void index_waits(const Program& p);
  void index_mem_deltas(const Program& p);
  void find_chains(const Program& p, bool fuse_chains);
  void reset_state(const Program& p);
  void reset_result(const Program& p, SimResult& out);
  void report_deadlock(const Program& p, int64_t now, int64_t done, SimResult& out);

  EventQueue queue_;
  std::vector<int32_t> remaining_;  // per op: waits not yet satisfied
  std::vector<uint8_t> state_;      // per op: pending, arrived, running, done
  std::vector<int32_t> dep_off_;    // CSR: ops that wait on op i are dep_list_[dep_off_[i]..]
  std::vector<OpId> dep_list_;
  std::vector<int32_t> mem_off_;  // CSR: memory deltas of op i are mem_list_[mem_off_[i]..]
  std::vector<int32_t> mem_list_;
  std::vector<int32_t> arrived_;    // per rendezvous: members arrived
  std::vector<OpId> head_;          // per global stream: the op it is at, kNone when done
  std::vector<OpId> chain_next_;    // per op: the successor started without an event, or kNone
  std::vector<int64_t> mem_total_;  // per rank: current total bytes
  std::vector<OpId> candidates_;    // ops that may start at the current instant
};

// One-shot convenience: a fresh Engine and SimResult.
SimResult simulate(const Program& p, const RunOptions& opt = {});

}  // namespace mplan::des
