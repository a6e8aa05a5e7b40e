// Tracer: span bookkeeping over the backend's timing marks.
#include "exec/tracer.hpp"

#include "src/common/error.hpp"

namespace mplan::exec {

const char* to_string(TraceStream s) {
  switch (s) {
    case TraceStream::kCompute:
      return "compute";
    case TraceStream::kDp:
      return "dp";
    case TraceStream::kSendFwd:
      return "pp_send_fwd";
    case TraceStream::kRecvFwd:
      return "pp_recv_fwd";
    case TraceStream::kSendBwd:
      return "pp_send_bwd";
    case TraceStream::kRecvBwd:
      return "pp_recv_bwd";
  }
  return "?";
}

void Tracer::clear() {
  std::lock_guard<std::mutex> lock(mutex_);
  spans_.clear();
  be_.clear_marks();
}

void Tracer::restore(std::vector<TraceSpan> spans, int marks) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const TraceSpan& s : spans)
    MPLAN_CHECK(s.end < marks, "span ", s.name, " past the restored marks (", marks, ")");
  be_.reuse_marks(marks);
  spans_ = std::move(spans);
}

void Tracer::add(TraceSpan span) {
  MPLAN_CHECK(span.begin >= 0 && span.end >= span.begin, "span ", span.name, " marks ", span.begin,
              "..", span.end);
  std::lock_guard<std::mutex> lock(mutex_);
  spans_.push_back(std::move(span));
}

std::vector<Tracer::Timed> Tracer::timed() {
  be_.read_marks(mark_ns_);
  std::vector<Timed> out;
  out.reserve(spans_.size());
  for (const TraceSpan& s : spans_)
    out.push_back(
        {&s, mark_ns_.at(static_cast<size_t>(s.begin)), mark_ns_.at(static_cast<size_t>(s.end))});
  return out;
}

bool Tracer::first_unfinished(TraceSpan& out, size_t& finished) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (finished = 0; finished < spans_.size(); ++finished)
    if (!be_.mark_done(spans_[finished].end)) {
      out = spans_[finished];
      return true;
    }
  return false;
}

}  // namespace mplan::exec
