// The Chrome trace-event document of a measured iteration, in the schema of `mplan simulate
// --trace` (sim/des/chrome_trace): one process per rank, one thread per stream named as the
// simulator names its streams, one complete ("X") event per span with the simulator's op names
// and categories and the same args (microbatch, chunk), so a run and its prediction open side by
// side in Perfetto. Times are µs from each rank's first mark of the iteration.
#pragma once

#include <string>
#include <vector>

#include "exec/tracer.hpp"
#include "src/common/json_reader.hpp"

namespace mplan::exec {

inline constexpr int kRunTraceSchemaVersion = 1;  // = the simulator's trace schema version

// This rank's events (pid = `pid`), metadata first.
Json rank_trace_events(const std::vector<Tracer::Timed>& spans, int pid,
                       const std::string& rank_name);
// The document from every rank's events.
Json run_trace_document(const std::vector<Json>& rank_events);

}  // namespace mplan::exec
