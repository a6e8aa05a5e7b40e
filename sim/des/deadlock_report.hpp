// DeadlockReport: what the engine returns when events run out while ops remain — for each stream
// that is stuck, the op at its head and what that op waits on — instead of hanging.
// Invariant: empty (no blocked ops) exactly when every op of the program has run.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/des/program.hpp"

namespace mplan::des {

struct BlockedOp {
  OpId op = kNone;             // the op at the head of a stuck stream
  bool at_rendezvous = false;  // it has arrived at its rendezvous and waits for other members
  // Unfinished ops it waits on (add_wait), or, at a rendezvous, the members not yet arrived.
  std::vector<OpId> waiting_for;
};

struct DeadlockReport {
  int64_t time_ns = 0;  // simulated time when the events ran out
  int64_t ops_done = 0;
  int64_t ops_total = 0;
  std::vector<BlockedOp> blocked;  // in global stream order (rank, then stream)
  std::vector<OpId> stream_heads;  // per global stream index: the op it is at, kNone when done
  bool empty() const { return blocked.empty(); }
};

// "rank 1 stream 'pp_recv' op 17 recv_fwd mb 3"
std::string describe_op(const Program& p, OpId op);
// A readable report, one line per blocked op (at most `max_lines`, then a count of the rest).
std::string describe(const DeadlockReport& r, const Program& p, size_t max_lines = 32);

}  // namespace mplan::des
