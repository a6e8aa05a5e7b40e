// run_trace: measured spans as trace events.
#include "exec/runner/run_trace.hpp"

namespace mplan::exec {

namespace {

// The simulator's categories (sim/des/program.cpp): compute, send, recv, collective.
const char* category(const TraceSpan& s) {
  switch (s.kind) {
    case SpanKind::kPass:
    case SpanKind::kOp:
      return "compute";
    case SpanKind::kOptimizer:
      // The gradient-norm all-reduce is a collective there; the breakdown counts it as optimizer.
      return s.name == "grad_norm_ar" ? "collective" : "compute";
    case SpanKind::kP2p:
      return s.name.rfind("send", 0) == 0 ? "send" : "recv";
    case SpanKind::kTp:
    case SpanKind::kDpComm:
    case SpanKind::kDpExposed:
      return "collective";
  }
  return "?";
}

}  // namespace

Json rank_trace_events(const std::vector<Tracer::Timed>& spans, int pid,
                       const std::string& rank_name) {
  Json events = Json::array();
  events.push_back({{"ph", "M"},
                    {"name", "process_name"},
                    {"pid", pid},
                    {"tid", 0},
                    {"args", {{"name", rank_name}}}});
  events.push_back({{"ph", "M"},
                    {"name", "process_sort_index"},
                    {"pid", pid},
                    {"tid", 0},
                    {"args", {{"sort_index", pid}}}});
  for (int s = 0; s < kNumTraceStreams; ++s) {
    events.push_back({{"ph", "M"},
                      {"name", "thread_name"},
                      {"pid", pid},
                      {"tid", s},
                      {"args", {{"name", to_string(static_cast<TraceStream>(s))}}}});
    events.push_back({{"ph", "M"},
                      {"name", "thread_sort_index"},
                      {"pid", pid},
                      {"tid", s},
                      {"args", {{"sort_index", s}}}});
  }
  for (const Tracer::Timed& t : spans) {
    const TraceSpan& s = *t.span;
    Json args = Json::object();
    if (s.microbatch >= 0) args["microbatch"] = s.microbatch;
    if (s.chunk >= 0) args["chunk"] = s.chunk;
    if (s.peer >= 0) args["peer"] = s.peer;
    if (s.bytes > 0) args["bytes"] = s.bytes;
    events.push_back({{"ph", "X"},
                      {"name", s.name},
                      {"cat", category(s)},
                      {"pid", pid},
                      {"tid", static_cast<int>(s.stream)},
                      {"ts", static_cast<double>(t.begin_ns) / 1000.0},
                      {"dur", static_cast<double>(t.end_ns - t.begin_ns) / 1000.0},
                      {"args", std::move(args)}});
  }
  return events;
}

Json run_trace_document(const std::vector<Json>& rank_events) {
  Json events = Json::array();
  for (const Json& r : rank_events)
    for (const Json& e : r) events.push_back(e);
  Json doc;
  doc["schema_version"] = kRunTraceSchemaVersion;
  doc["displayTimeUnit"] = "ns";
  doc["traceEvents"] = std::move(events);
  return doc;
}

}  // namespace mplan::exec
