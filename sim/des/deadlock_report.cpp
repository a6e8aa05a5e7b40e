// Text rendering of a deadlock report: which op of which rank and stream waits on what, and
// where the stream of each missing rendezvous member is stuck instead.
#include "sim/des/deadlock_report.hpp"

#include <sstream>

namespace mplan::des {

std::string describe_op(const Program& p, OpId id) {
  const Op& o = p.op(id);
  std::ostringstream os;
  os << "rank " << o.rank << " stream '" << p.stream_name(o.stream) << "' op " << id << " "
     << p.name(o);
  if (o.label.microbatch >= 0) os << " mb " << o.label.microbatch;
  if (o.label.chunk >= 0) os << " chunk " << o.label.chunk;
  if (o.kind != OpKind::kCompute) os << " (" << to_string(o.kind) << ")";
  return os.str();
}

std::string describe(const DeadlockReport& r, const Program& p, size_t max_lines) {
  std::ostringstream os;
  os << "deadlock at t=" << r.time_ns << " ns: " << r.ops_done << " of " << r.ops_total
     << " ops ran; " << r.blocked.size() << " stream" << (r.blocked.size() == 1 ? "" : "s")
     << " stuck:";
  size_t lines = 0;
  for (const BlockedOp& b : r.blocked) {
    if (lines == max_lines) {
      os << "\n  ... and " << (r.blocked.size() - lines) << " more";
      break;
    }
    ++lines;
    os << "\n  " << describe_op(p, b.op);
    if (b.at_rendezvous) {
      os << " waits at its rendezvous for";
      for (size_t i = 0; i < b.waiting_for.size(); ++i) {
        OpId m = b.waiting_for[i];
        const Op& mo = p.op(m);
        os << (i ? ";" : "") << " " << describe_op(p, m);
        OpId head = r.stream_heads[p.stream_index(mo.rank, mo.stream)];
        if (head != m && head != kNone)
          os << " [its stream is at op " << head << " " << p.name(p.op(head)) << "]";
      }
    } else {
      os << " waits for";
      for (size_t i = 0; i < b.waiting_for.size(); ++i)
        os << (i ? ";" : "") << " " << describe_op(p, b.waiting_for[i]);
    }
  }
  return os.str();
}

}  // namespace mplan::des
