// RecentRing: the last N values a thread computed, for lookups by a predicate; once full, each new
// value replaces the oldest. For small per-thread caches of the sweep (a linear scan of N).
#pragma once

#include <cstddef>
#include <vector>

namespace mplan::sweep {

template <class T, size_t N>
class RecentRing {
 public:
  // The first kept value `pred` accepts, or null.
  template <class Pred>
  const T* find_if(Pred pred) const {
    for (const T& v : values_)
      if (pred(v)) return &v;
    return nullptr;
  }
  // A slot for a new value: a fresh one until N are kept, then the oldest.
  T& next_slot() {
    if (values_.size() < N) return values_.emplace_back();
    T& slot = values_[next_];
    next_ = (next_ + 1) % N;
    return slot;
  }

 private:
  std::vector<T> values_;
  size_t next_ = 0;
};

}  // namespace mplan::sweep
