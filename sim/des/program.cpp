// Program building: appending ops to streams, waits, rendezvous membership and memory deltas.
// Every check here guards the lowering's invariants (ids in range, sizes non-negative).
#include "sim/des/program.hpp"

#include "src/common/error.hpp"

namespace mplan::des {

const char* to_string(OpKind k) {
  switch (k) {
    case OpKind::kCompute:
      return "compute";
    case OpKind::kSend:
      return "send";
    case OpKind::kRecv:
      return "recv";
    case OpKind::kCollective:
      return "collective";
    case OpKind::kWait:
      return "wait";
  }
  return "?";
}

void Program::reset(int32_t num_ranks, int32_t streams_per_rank) {
  MPLAN_CHECK(num_ranks >= 1 && streams_per_rank >= 1 && streams_per_rank <= INT16_MAX,
              "num_ranks=", num_ranks, " streams_per_rank=", streams_per_rank);
  num_ranks_ = num_ranks;
  streams_per_rank_ = streams_per_rank;
  ops_.clear();
  waits_.clear();
  mem_.clear();
  segments_.clear();
  rendezvous_.clear();
  stream_first_.assign(static_cast<size_t>(num_streams()), kNone);
  stream_last_.assign(static_cast<size_t>(num_streams()), kNone);
  initial_memory_.assign(static_cast<size_t>(num_ranks), {});
  names_.assign(1, "op");
  stream_names_.resize(static_cast<size_t>(streams_per_rank));
  for (int32_t s = 0; s < streams_per_rank; ++s) stream_names_[s] = cat("stream ", s);
  for (int c = 0; c < kMaxMemClasses; ++c) mem_class_names_[c] = cat("class ", c);
}

void Program::reserve(size_t ops, size_t waits, size_t mem_deltas) {
  ops_.reserve(ops);
  waits_.reserve(waits);
  mem_.reserve(mem_deltas);
}

void Program::add_wait(OpId op, OpId dep) {
  MPLAN_CHECK(op >= 0 && op < num_ops() && dep >= 0 && dep < num_ops(), "wait ", op, " on ", dep,
              " with ", num_ops(), " ops");
  waits_.push_back({op, dep});
}

RendezvousId Program::add_rendezvous(int32_t num_members, int64_t duration_ns) {
  MPLAN_CHECK(num_members >= 1, "rendezvous of ", num_members, " members");
  MPLAN_CHECK(duration_ns >= 0 || duration_ns == kDurationFromCallback, "rendezvous duration ",
              duration_ns, " ns");
  Rendezvous r;
  r.duration_ns = duration_ns;
  r.expected_members = num_members;
  rendezvous_.push_back(r);
  return static_cast<RendezvousId>(rendezvous_.size() - 1);
}

OpId Program::join(int32_t rank, int32_t stream, RendezvousId rv, OpKind kind, OpLabel label) {
  MPLAN_CHECK(rv >= 0 && rv < static_cast<int32_t>(rendezvous_.size()), "rendezvous ", rv);
  Rendezvous& r = rendezvous_[rv];
  MPLAN_CHECK(r.num_members < r.expected_members, "rendezvous ", rv, " already has its ",
              r.expected_members, " members");
  OpId id = append(rank, stream, 0, kind, label, rv);
  if (r.last_member == kNone) {
    r.first_member = id;
  } else {
    ops_[r.last_member].next_member = id;
  }
  r.last_member = id;
  ++r.num_members;
  return id;
}

void Program::add_memory(OpId op, MemWhen when, int mem_class, int64_t bytes) {
  MPLAN_CHECK(op >= 0 && op < num_ops(), "memory delta on op ", op);
  MPLAN_CHECK(mem_class >= 0 && mem_class < kMaxMemClasses, "memory class ", mem_class);
  if (bytes == 0) return;
  mem_.push_back({op, when, static_cast<uint8_t>(mem_class), bytes});
}

void Program::set_initial_memory(int32_t rank, int mem_class, int64_t bytes) {
  MPLAN_CHECK(rank >= 0 && rank < num_ranks_, "rank ", rank);
  MPLAN_CHECK(mem_class >= 0 && mem_class < kMaxMemClasses, "memory class ", mem_class);
  MPLAN_CHECK(bytes >= 0, "initial memory ", bytes);
  initial_memory_[rank][mem_class] = bytes;
}

void Program::add_segment(OpId op, uint16_t name, int64_t duration_ns, OpKind kind) {
  MPLAN_CHECK(op >= 0 && op < num_ops(), "segment on op ", op);
  MPLAN_CHECK(name < names_.size(), "segment name ", name, " not interned");
  MPLAN_CHECK(duration_ns >= 0, "segment duration ", duration_ns);
  segments_.push_back({op, name, kind, duration_ns});
}

uint16_t Program::intern_name(std::string_view name) {
  for (size_t i = 0; i < names_.size(); ++i)
    if (names_[i] == name) return static_cast<uint16_t>(i);
  MPLAN_CHECK(names_.size() < UINT16_MAX, "too many op names");
  names_.emplace_back(name);
  return static_cast<uint16_t>(names_.size() - 1);
}

void Program::set_stream_name(int32_t stream, std::string name) {
  MPLAN_CHECK(stream >= 0 && stream < streams_per_rank_, "stream ", stream);
  stream_names_[stream] = std::move(name);
}

void Program::set_mem_class_name(int mem_class, std::string name) {
  MPLAN_CHECK(mem_class >= 0 && mem_class < kMaxMemClasses, "memory class ", mem_class);
  mem_class_names_[mem_class] = std::move(name);
}

}  // namespace mplan::des
