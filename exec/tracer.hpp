// Tracer: the spans of one training iteration on one rank — every schedule action, every
// collective, the end-of-step work — each between two Backend timing marks (CUDA events on GPUs,
// host clocks on CPU ranks). Names, streams ("threads") and categories are the simulator's
// (sim/plan_sim/lowering), so a measured trace opens beside `mplan simulate --trace` and the
// measured time breakdown uses the simulator's definitions (exec/runner/measured_breakdown).
// Invariant: spans of one stream are recorded in issue order; begin <= end marks.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "exec/backend.hpp"

namespace mplan::exec {

// The simulator's stream indices (sim/plan_sim/lowering.hpp), used as trace thread ids.
enum class TraceStream : uint8_t {
  kCompute = 0,
  kDp = 1,
  kSendFwd = 2,
  kRecvFwd = 3,
  kSendBwd = 4,
  kRecvBwd = 5,
};
inline constexpr int kNumTraceStreams = 6;
const char* to_string(TraceStream s);  // "compute", "dp", "pp_send_fwd", ...

// What a span's time counts as in the breakdown.
enum class SpanKind : uint8_t {
  kPass,       // F, B or W of one micro-batch on one chunk (compute, with TP collectives inside)
  kTp,         // a tensor-parallel collective inside a pass, or the SP norm-gradient all-reduce
  kP2p,        // one member of a pipeline p2p group (the group's time: transfer and waiting)
  kDpComm,     // data-parallel reduce or gather on the comm stream (overlapped)
  kDpExposed,  // data-parallel time the compute stream spends: waits for the comm stream,
               // reductions and gathers run in line, the tied-embedding all-reduce
  kOptimizer,  // gradient-norm all-reduce, clipping, the optimizer step
  kOp,         // one kernel (or fused group) inside a pass, with --trace-level ops: named as the
               // simulator's ops-level items ("L3 qkv", "logits_wgrad"); not in the breakdown
};

struct TraceSpan {
  std::string name;  // "forward", "backward", "L3 tp_all_reduce", "send_fwd", "grad_reduce", ...
  SpanKind kind = SpanKind::kPass;
  TraceStream stream = TraceStream::kCompute;
  int begin = -1, end = -1;  // Backend marks
  int32_t microbatch = -1, chunk = -1;
  int32_t peer = -1;   // p2p: pipeline rank of the other side
  int64_t bytes = 0;   // p2p and collectives: payload bytes
  std::string action;  // schedule action (watchdog report), e.g. "recv-forward 3.0 <- 1"
};

class Tracer {
 public:
  explicit Tracer(Backend& be) : be_(be) {}
  Backend& backend() { return be_; }
  // Whether passes also record a span per kernel (SpanKind::kOp; off by default: two timing
  // marks per kernel).
  bool ops() const { return ops_; }
  void set_ops(bool on) { ops_ = on; }

  // Starts a new iteration (forgets the spans and the backend's marks).
  void clear();
  // Starts a new iteration replayed from a graph: its spans are `spans`, over the backend's
  // marks [0, marks), which the replay takes again.
  void restore(std::vector<TraceSpan> spans, int marks);
  // A mark on `s` (the begin or end of a span).
  int mark(Stream s) { return be_.mark(s); }
  // Records a finished span.
  void add(TraceSpan span);
  // A span on the compute stream around a call: begin = now, end after f().
  template <class F>
  void around(TraceSpan span, F&& f) {
    span.begin = be_.mark(Stream::kCompute);
    f();
    span.end = be_.mark(Stream::kCompute);
    add(std::move(span));
  }

  // After synchronize(): every span with its begin and end in ns from the iteration's first mark.
  struct Timed {
    const TraceSpan* span;
    int64_t begin_ns, end_ns;
  };
  std::vector<Timed> timed();
  const std::vector<TraceSpan>& spans() const { return spans_; }
  // Thread-safe (the watchdog): copies the first recorded span whose end mark the device has not
  // passed into `out` and returns true; false when all have finished. `finished`: the number of
  // spans before it (all spans when none is unfinished).
  bool first_unfinished(TraceSpan& out, size_t& finished);

 private:
  Backend& be_;
  std::vector<TraceSpan> spans_;
  std::vector<int64_t> mark_ns_;
  std::mutex mutex_;
  bool ops_ = false;
};

}  // namespace mplan::exec
