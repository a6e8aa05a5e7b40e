// Program: what the discrete-event engine runs. Per rank, a fixed number of streams; each stream
// runs its ops one at a time in the order they were added (like a CUDA stream). An op may also
// wait for other ops to finish (like cudaStreamWaitEvent), and ops that join a rendezvous (a
// send/recv pair, a collective) start together once every member has arrived.
// Invariant: OpIds are dense and in add order, so a caller keeps its own per-op data (names,
// FLOPs, layer) in parallel arrays; everything is stored in flat vectors, nothing per op on the
// heap, and reset() keeps the capacity so one Program can be rebuilt for plan after plan.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "src/common/error.hpp"

namespace mplan::des {

using OpId = int32_t;
using RendezvousId = int32_t;
inline constexpr int32_t kNone = -1;

// Memory is tracked per rank in a few caller-defined classes (weights, activations, ...), so the
// peak comes with its breakdown.
inline constexpr int kMaxMemClasses = 8;

// A rendezvous whose duration the engine asks RunOptions::cost_fn for when it starts.
inline constexpr int64_t kDurationFromCallback = -1;

// What an op is, for traces and reports; the engine treats every kind the same way.
enum class OpKind : uint8_t { kCompute, kSend, kRecv, kCollective, kWait };
const char* to_string(OpKind k);

// When a memory delta applies: when the op starts, or when it ends.
enum class MemWhen : uint8_t { kAtStart, kAtEnd };

// Labels for traces and reports only; the engine never reads them.
struct OpLabel {
  uint16_t name = 0;        // index into Program::names() (see intern_name); 0 is "op"
  int32_t microbatch = -1;  // -1: none
  int32_t chunk = -1;       // model chunk, layer or bucket, whatever the caller counts; -1: none
};

struct Op {
  int64_t duration_ns = 0;  // ignored for rendezvous members: the rendezvous has the duration
  int32_t rank = 0;
  int16_t stream = 0;  // per-rank stream index
  OpKind kind = OpKind::kCompute;
  RendezvousId rendezvous = kNone;
  OpId next_in_stream = kNone;
  OpId next_member = kNone;  // next member of the same rendezvous
  OpLabel label;
};

struct Rendezvous {
  int64_t duration_ns = 0;  // or kDurationFromCallback
  int32_t expected_members = 0;
  int32_t num_members = 0;
  OpId first_member = kNone;
  OpId last_member = kNone;
};

struct Wait {
  OpId op = kNone;   // this op cannot start...
  OpId dep = kNone;  // ...before this one has ended
};

// A named part of an op, for traces only: an op may be split into consecutive segments (the
// GEMMs and collectives of a layer) while the engine runs it as one event.
struct Segment {
  OpId op = kNone;
  uint16_t name = 0;
  OpKind kind = OpKind::kCompute;
  int64_t duration_ns = 0;
};

struct MemDelta {
  OpId op = kNone;
  MemWhen when = MemWhen::kAtStart;
  uint8_t mem_class = 0;
  int64_t bytes = 0;  // > 0 allocates, < 0 frees
};

class Program {
 public:
  Program() { reset(1, 1); }
  Program(int32_t num_ranks, int32_t streams_per_rank) { reset(num_ranks, streams_per_rank); }

  // Empties the program for `num_ranks` ranks of `streams_per_rank` streams each; keeps the
  // allocated capacity. Stream and memory-class names go back to their defaults.
  void reset(int32_t num_ranks, int32_t streams_per_rank);
  void reserve(size_t ops, size_t waits, size_t mem_deltas);

  // Appends an op to the end of stream `stream` of `rank`.
  OpId add_op(int32_t rank, int32_t stream, int64_t duration_ns, OpLabel label = {},
              OpKind kind = OpKind::kCompute) {
    MPLAN_CHECK(duration_ns >= 0, "op duration ", duration_ns, " ns");
    return append(rank, stream, duration_ns, kind, label, kNone);
  }
  // `op` starts only after `dep` has ended (dep may be on any rank and stream).
  void add_wait(OpId op, OpId dep);

  // A rendezvous of `num_members` ops that start at the same time, once each has reached the
  // head of its stream with its waits satisfied, and all end `duration_ns` later. A send/recv
  // pair is a rendezvous of two; a collective has one member per rank of its group.
  RendezvousId add_rendezvous(int32_t num_members, int64_t duration_ns);
  // Appends a member of `rv` to the end of stream `stream` of `rank`.
  OpId join(int32_t rank, int32_t stream, RendezvousId rv, OpKind kind, OpLabel label = {});
  OpId add_send(int32_t rank, int32_t stream, RendezvousId rv, OpLabel label = {}) {
    return join(rank, stream, rv, OpKind::kSend, label);
  }
  OpId add_recv(int32_t rank, int32_t stream, RendezvousId rv, OpLabel label = {}) {
    return join(rank, stream, rv, OpKind::kRecv, label);
  }

  // Memory of op's rank changes by `bytes` in class `mem_class` when op starts or ends.
  void add_memory(OpId op, MemWhen when, int mem_class, int64_t bytes);
  // Bytes in class `mem_class` on `rank` before anything runs (weights, optimizer state).
  void set_initial_memory(int32_t rank, int mem_class, int64_t bytes);

  // Appends a segment to op's breakdown (traces show segments nested in the op, back to back
  // from its start; the engine ignores them).
  void add_segment(OpId op, uint16_t name, int64_t duration_ns, OpKind kind = OpKind::kCompute);

  // Names for labels, streams and memory classes (reports and traces).
  uint16_t intern_name(std::string_view name);
  void set_stream_name(int32_t stream, std::string name);
  void set_mem_class_name(int mem_class, std::string name);

  int32_t num_ranks() const { return num_ranks_; }
  int32_t streams_per_rank() const { return streams_per_rank_; }
  int32_t num_streams() const { return num_ranks_ * streams_per_rank_; }
  // Global index of stream `stream` of `rank`: rank * streams_per_rank + stream.
  int32_t stream_index(int32_t rank, int32_t stream) const {
    return rank * streams_per_rank_ + stream;
  }
  OpId stream_first(int32_t stream_index) const { return stream_first_[stream_index]; }
  OpId stream_last(int32_t stream_index) const { return stream_last_[stream_index]; }

  int32_t num_ops() const { return static_cast<int32_t>(ops_.size()); }
  const Op& op(OpId id) const { return ops_[id]; }
  const std::vector<Op>& ops() const { return ops_; }
  const std::vector<Wait>& waits() const { return waits_; }
  const std::vector<MemDelta>& mem_deltas() const { return mem_; }
  const std::vector<Segment>& segments() const { return segments_; }
  const std::vector<Rendezvous>& rendezvous() const { return rendezvous_; }
  const std::array<int64_t, kMaxMemClasses>& initial_memory(int32_t rank) const {
    return initial_memory_[rank];
  }
  const std::vector<std::string>& names() const { return names_; }
  const std::string& name(const Op& o) const { return names_[o.label.name]; }
  const std::string& stream_name(int32_t stream) const { return stream_names_[stream]; }
  const std::string& mem_class_name(int mem_class) const { return mem_class_names_[mem_class]; }

 private:
  // Inline, and filling the new op in place: building programs is on the sweep's hot path.
  OpId append(int32_t rank, int32_t stream, int64_t duration_ns, OpKind kind, OpLabel label,
              RendezvousId rv) {
    MPLAN_CHECK(rank >= 0 && rank < num_ranks_ && stream >= 0 && stream < streams_per_rank_,
                "rank ", rank, " stream ", stream, " of ", num_ranks_, " x ", streams_per_rank_);
    MPLAN_CHECK(label.name < names_.size(), "label name ", label.name, " not interned");
    MPLAN_CHECK(ops_.size() < static_cast<size_t>(INT32_MAX), "too many ops");
    const OpId id = static_cast<OpId>(ops_.size());
    Op& op = ops_.emplace_back();
    op.duration_ns = duration_ns;
    op.rank = rank;
    op.stream = static_cast<int16_t>(stream);
    op.kind = kind;
    op.rendezvous = rv;
    op.label = label;
    const int32_t s = stream_index(rank, stream);
    if (stream_last_[s] == kNone) {
      stream_first_[s] = id;
    } else {
      ops_[stream_last_[s]].next_in_stream = id;
    }
    stream_last_[s] = id;
    return id;
  }

  int32_t num_ranks_ = 0;
  int32_t streams_per_rank_ = 0;
  std::vector<Op> ops_;
  std::vector<Wait> waits_;
  std::vector<MemDelta> mem_;
  std::vector<Segment> segments_;
  std::vector<Rendezvous> rendezvous_;
  std::vector<OpId> stream_first_;
  std::vector<OpId> stream_last_;
  std::vector<std::array<int64_t, kMaxMemClasses>> initial_memory_;
  std::vector<std::string> names_;
  std::vector<std::string> stream_names_;
  std::array<std::string, kMaxMemClasses> mem_class_names_;
};

}  // namespace mplan::des
