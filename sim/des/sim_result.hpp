// SimResult: what one run of the engine produces — per op its ready/start/end times, per rank
// when it finished and its memory over the timeline (peak with per-class breakdown), and a
// deadlock report when the program could not finish.
// Invariant: for every op that ran, ready_ns <= start_ns <= end_ns; ops that never started keep -1.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "sim/des/deadlock_report.hpp"
#include "sim/des/program.hpp"

namespace mplan::des {

struct OpTiming {
  int64_t ready_ns = -1;  // at the head of its stream with its waits satisfied (arrival)
  int64_t start_ns = -1;  // began running (for a rendezvous member: when all had arrived)
  int64_t end_ns = -1;
};

struct MemSample {
  int64_t time_ns = 0;
  int64_t bytes = 0;  // total on the rank after the change at time_ns
};

struct RankMemory {
  int64_t peak_bytes = 0;    // maximum of the rank's total over the run (initial memory included)
  int64_t peak_time_ns = 0;  // first time the peak was reached
  std::array<int64_t, kMaxMemClasses> at_peak{};      // per class at that moment
  std::array<int64_t, kMaxMemClasses> final_bytes{};  // per class when the run ended
  std::vector<MemSample> timeline;  // every change, only with RunOptions::record_memory_timeline
};

struct SimResult {
  bool completed = false;            // every op ran
  int64_t makespan_ns = 0;           // end of the last op
  std::vector<OpTiming> ops;         // per OpId
  std::vector<int64_t> rank_end_ns;  // per rank: end of its last op
  std::vector<RankMemory> memory;    // per rank
  DeadlockReport deadlock;           // empty when completed
};

}  // namespace mplan::des
