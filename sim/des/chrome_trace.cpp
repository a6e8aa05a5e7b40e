// Builds the trace-event document: metadata events naming processes (ranks) and threads
// (streams), then the ops in OpId order (each followed by its segments), then the memory
// counters.
#include "sim/des/chrome_trace.hpp"

#include "src/common/error.hpp"

namespace mplan::des {

namespace {
double us(int64_t ns) { return static_cast<double>(ns) / 1000.0; }
}  // namespace

Json chrome_trace(const Program& p, const SimResult& r, const TraceOptions& opt) {
  MPLAN_CHECK(r.ops.size() == static_cast<size_t>(p.num_ops()), "result of another program");
  Json events = Json::array();
  for (int32_t rank = 0; rank < p.num_ranks(); ++rank) {
    std::string name = rank < static_cast<int32_t>(opt.rank_names.size()) ? opt.rank_names[rank]
                                                                          : cat("rank ", rank);
    events.push_back({{"ph", "M"},
                      {"name", "process_name"},
                      {"pid", rank},
                      {"tid", 0},
                      {"args", {{"name", name}}}});
    events.push_back({{"ph", "M"},
                      {"name", "process_sort_index"},
                      {"pid", rank},
                      {"tid", 0},
                      {"args", {{"sort_index", rank}}}});
    for (int32_t s = 0; s < p.streams_per_rank(); ++s) {
      events.push_back({{"ph", "M"},
                        {"name", "thread_name"},
                        {"pid", rank},
                        {"tid", s},
                        {"args", {{"name", p.stream_name(s)}}}});
      events.push_back({{"ph", "M"},
                        {"name", "thread_sort_index"},
                        {"pid", rank},
                        {"tid", s},
                        {"args", {{"sort_index", s}}}});
    }
  }
  // Segments of each op, in add order (CSR by op).
  std::vector<int32_t> seg_off(static_cast<size_t>(p.num_ops()) + 1, 0);
  for (const Segment& sg : p.segments()) ++seg_off[sg.op + 1];
  for (int32_t i = 0; i < p.num_ops(); ++i) seg_off[i + 1] += seg_off[i];
  std::vector<int32_t> seg_list(p.segments().size());
  {
    std::vector<int32_t> cursor(seg_off.begin(), seg_off.end() - 1);
    for (size_t i = 0; i < p.segments().size(); ++i)
      seg_list[cursor[p.segments()[i].op]++] = static_cast<int32_t>(i);
  }
  for (OpId id = 0; id < p.num_ops(); ++id) {
    const OpTiming& t = r.ops[id];
    if (t.start_ns < 0 || t.end_ns < 0) continue;
    const Op& o = p.op(id);
    Json args = {{"op", id}};
    if (o.label.microbatch >= 0) args["microbatch"] = o.label.microbatch;
    if (o.label.chunk >= 0) args["chunk"] = o.label.chunk;
    if (t.ready_ns >= 0 && t.ready_ns < t.start_ns) args["waited_us"] = us(t.start_ns - t.ready_ns);
    events.push_back({{"ph", "X"},
                      {"name", p.name(o)},
                      {"cat", to_string(o.kind)},
                      {"pid", o.rank},
                      {"tid", o.stream},
                      {"ts", us(t.start_ns)},
                      {"dur", us(t.end_ns - t.start_ns)},
                      {"args", std::move(args)}});
    int64_t at = t.start_ns;
    for (int32_t i = seg_off[id]; i < seg_off[id + 1]; ++i) {
      const Segment& sg = p.segments()[seg_list[i]];
      events.push_back({{"ph", "X"},
                        {"name", p.names()[sg.name]},
                        {"cat", to_string(sg.kind)},
                        {"pid", o.rank},
                        {"tid", o.stream},
                        {"ts", us(at)},
                        {"dur", us(sg.duration_ns)},
                        {"args", {{"op", id}}}});
      at += sg.duration_ns;
    }
  }
  for (int32_t rank = 0; rank < static_cast<int32_t>(r.memory.size()); ++rank) {
    for (const MemSample& m : r.memory[rank].timeline) {
      events.push_back({{"ph", "C"},
                        {"name", "memory"},
                        {"pid", rank},
                        {"tid", 0},
                        {"ts", us(m.time_ns)},
                        {"args", {{"GiB", static_cast<double>(m.bytes) / (1 << 30)}}}});
    }
  }
  Json doc;
  doc["schema_version"] = kTraceSchemaVersion;
  doc["displayTimeUnit"] = "ns";
  doc["traceEvents"] = std::move(events);
  return doc;
}

void write_chrome_trace(std::ostream& os, const Program& p, const SimResult& r,
                        const TraceOptions& opt) {
  os << chrome_trace(p, r, opt).dump() << "\n";
}

}  // namespace mplan::des
