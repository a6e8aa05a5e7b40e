// EventQueue: the simulator's future-event list, a binary min-heap of (time_ns, sequence, op).
// Invariant: events pop in increasing (time_ns, sequence) order, and the sequence number is the
// push order, so events at the same nanosecond come out in the order they were scheduled — the
// simulation is deterministic without any tie-breaking by op id or address.
#pragma once

#include <cstdint>
#include <vector>

#include "src/common/error.hpp"

namespace mplan::des {

struct Event {
  int64_t time_ns = 0;
  uint64_t key = 0;  // (push sequence << 32) | op: the sequence breaks ties between equal times
  int32_t op() const { return static_cast<int32_t>(key & 0xffffffffu); }
  uint64_t seq() const { return key >> 32; }
};

class EventQueue {
 public:
  void clear() {
    heap_.clear();
    next_seq_ = 0;
  }
  void reserve(size_t n) { heap_.reserve(n); }
  bool empty() const { return heap_.empty(); }
  size_t size() const { return heap_.size(); }
  const Event& top() const { return heap_.front(); }

  void push(int64_t time_ns, int32_t op) {
    MPLAN_CHECK(op >= 0 && next_seq_ < (uint64_t{1} << 32), "event op ", op, " seq ", next_seq_);
    Event e{time_ns, (next_seq_++ << 32) | static_cast<uint32_t>(op)};
    size_t i = heap_.size();
    heap_.push_back(e);
    while (i > 0) {  // sift up
      size_t parent = (i - 1) / 2;
      if (!before(e, heap_[parent])) break;
      heap_[i] = heap_[parent];
      i = parent;
    }
    heap_[i] = e;
  }

  Event pop() {
    MPLAN_CHECK(!heap_.empty(), "pop from an empty event queue");
    Event out = heap_.front();
    Event last = heap_.back();
    heap_.pop_back();
    size_t n = heap_.size();
    if (n > 0) {  // sift `last` down from the root
      size_t i = 0;
      while (true) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && before(heap_[c + 1], heap_[c])) ++c;
        if (!before(heap_[c], last)) break;
        heap_[i] = heap_[c];
        i = c;
      }
      heap_[i] = last;
    }
    return out;
  }

 private:
  static bool before(const Event& a, const Event& b) {
    return a.time_ns < b.time_ns || (a.time_ns == b.time_ns && a.key < b.key);
  }
  std::vector<Event> heap_;
  uint64_t next_seq_ = 0;
};

}  // namespace mplan::des
