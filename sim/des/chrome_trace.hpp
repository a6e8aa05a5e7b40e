// Chrome trace-event JSON of a simulated run (opens in Perfetto and chrome://tracing): one
// process per rank, one thread per stream, one complete ("X") event per op that ran, and a
// memory counter per rank when the run recorded its memory timeline.
// Invariant: times are written in microseconds (the format's unit) from integer nanoseconds.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "sim/des/program.hpp"
#include "sim/des/sim_result.hpp"
#include "src/common/json_reader.hpp"

namespace mplan::des {

inline constexpr int kTraceSchemaVersion = 1;

struct TraceOptions {
  std::vector<std::string> rank_names;  // per rank; default "rank <r>"
};

Json chrome_trace(const Program& p, const SimResult& r, const TraceOptions& opt = {});
void write_chrome_trace(std::ostream& os, const Program& p, const SimResult& r,
                        const TraceOptions& opt = {});

}  // namespace mplan::des
