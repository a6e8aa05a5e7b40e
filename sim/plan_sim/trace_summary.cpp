// Summary trace: metadata, one "X" event per op that ran, memory counters; streamed event by
// event in the trace-event format of sim/des/chrome_trace (the same names, categories and args
// on each op, without its segments).
#include "sim/plan_sim/trace_summary.hpp"

#include "sim/des/chrome_trace.hpp"
#include "sim/plan_sim/simulation_trace.hpp"
#include "src/common/error.hpp"

namespace mplan::sim {

namespace {

double us(int64_t ns) { return static_cast<double>(ns) / 1000.0; }

// Writes the array's events with a comma before every one but the first.
class EventWriter {
 public:
  explicit EventWriter(std::ostream& os) : os_(os) {}
  void operator()(const Json& event) {
    os_ << (first_ ? "\n" : ",\n") << event.dump();
    first_ = false;
  }

 private:
  std::ostream& os_;
  bool first_ = true;
};

void write_metadata(const des::Program& p, const des::TraceOptions& opt, EventWriter& emit) {
  for (int32_t rank = 0; rank < p.num_ranks(); ++rank) {
    const std::string name = rank < static_cast<int32_t>(opt.rank_names.size())
                                 ? opt.rank_names[rank]
                                 : cat("rank ", rank);
    emit({{"ph", "M"},
          {"name", "process_name"},
          {"pid", rank},
          {"tid", 0},
          {"args", {{"name", name}}}});
    emit({{"ph", "M"},
          {"name", "process_sort_index"},
          {"pid", rank},
          {"tid", 0},
          {"args", {{"sort_index", rank}}}});
    for (int32_t s = 0; s < p.streams_per_rank(); ++s) {
      emit({{"ph", "M"},
            {"name", "thread_name"},
            {"pid", rank},
            {"tid", s},
            {"args", {{"name", p.stream_name(s)}}}});
      emit({{"ph", "M"},
            {"name", "thread_sort_index"},
            {"pid", rank},
            {"tid", s},
            {"args", {{"sort_index", s}}}});
    }
  }
}

void write_ops(const des::Program& p, const des::SimResult& r, EventWriter& emit) {
  for (des::OpId id = 0; id < p.num_ops(); ++id) {
    const des::OpTiming& t = r.ops[static_cast<size_t>(id)];
    if (t.start_ns < 0 || t.end_ns < 0) continue;
    const des::Op& o = p.op(id);
    Json args = {{"op", id}};
    if (o.label.microbatch >= 0) args["microbatch"] = o.label.microbatch;
    if (o.label.chunk >= 0) args["chunk"] = o.label.chunk;
    if (t.ready_ns >= 0 && t.ready_ns < t.start_ns) args["waited_us"] = us(t.start_ns - t.ready_ns);
    emit({{"ph", "X"},
          {"name", p.name(o)},
          {"cat", des::to_string(o.kind)},
          {"pid", o.rank},
          {"tid", o.stream},
          {"ts", us(t.start_ns)},
          {"dur", us(t.end_ns - t.start_ns)},
          {"args", std::move(args)}});
  }
}

void write_memory(const des::SimResult& r, EventWriter& emit) {
  for (int32_t rank = 0; rank < static_cast<int32_t>(r.memory.size()); ++rank)
    for (const des::MemSample& m : r.memory[static_cast<size_t>(rank)].timeline)
      emit({{"ph", "C"},
            {"name", "memory"},
            {"pid", rank},
            {"tid", 0},
            {"ts", us(m.time_ns)},
            {"args", {{"GiB", static_cast<double>(m.bytes) / (1 << 30)}}}});
}

}  // namespace

void write_trace(std::ostream& os, const SimulationResult& result, TraceLevel level) {
  if (level == TraceLevel::kOps) return write_trace(os, result);
  MPLAN_CHECK(result.trace != nullptr, "write_trace: simulate with SimOptions::record_trace");
  const SimulationTrace& tr = *result.trace;
  MPLAN_CHECK(tr.result.ops.size() == static_cast<size_t>(tr.program.num_ops()),
              "result of another program");
  os << "{\"schema_version\":" << des::kTraceSchemaVersion
     << ",\"displayTimeUnit\":\"ns\",\"traceEvents\":[";
  EventWriter emit(os);
  write_metadata(tr.program, tr.options, emit);
  write_ops(tr.program, tr.result, emit);
  write_memory(tr.result, emit);
  os << "\n]}\n";
}

}  // namespace mplan::sim
