// measure_breakdown(): the compute-stream timeline of a traced iteration, by category.
#include "exec/runner/measured_breakdown.hpp"

#include <algorithm>
#include <map>

namespace mplan::exec {

namespace {

// Kernels inside passes (--trace-level ops) are part of their pass's time.
bool on_compute_stream(const TraceSpan& s) {
  return s.kind != SpanKind::kDpComm && s.kind != SpanKind::kOp;  // p2p spans are marked on
                                                                  // the compute stream too
}

}  // namespace

MeasuredBreakdown measure_breakdown(const std::vector<Tracer::Timed>& spans) {
  MeasuredBreakdown b;
  // Top-level compute-stream intervals (a p2p group once), and the TP collectives inside passes.
  struct Interval {
    int64_t begin, end;
    SpanKind kind;
    int64_t bytes;
  };
  std::vector<Interval> top;
  std::map<std::pair<int64_t, int64_t>, size_t> groups;  // (begin, end) -> index in top
  std::vector<std::pair<int64_t, int64_t>> tp_inner;
  for (const Tracer::Timed& t : spans) {
    const TraceSpan& s = *t.span;
    if (!on_compute_stream(s)) continue;
    if (s.kind == SpanKind::kP2p) {
      auto [it, fresh] = groups.emplace(std::make_pair(t.begin_ns, t.end_ns), top.size());
      if (fresh)
        top.push_back({t.begin_ns, t.end_ns, SpanKind::kP2p, s.bytes});
      else
        top[it->second].bytes += s.bytes;
      continue;
    }
    top.push_back({t.begin_ns, t.end_ns, s.kind, 0});
  }
  // TP spans nested in a pass are inner; the others (the SP norm all-reduce) are top level.
  // By start; an enclosing span before what it encloses (ties: the longer, then the pass).
  std::sort(top.begin(), top.end(), [](const Interval& x, const Interval& y) {
    if (x.begin != y.begin) return x.begin < y.begin;
    if (x.end != y.end) return x.end > y.end;
    return x.kind == SpanKind::kPass && y.kind != SpanKind::kPass;
  });
  std::vector<Interval> level;
  for (const Interval& iv : top) {
    if (!level.empty() && iv.kind == SpanKind::kTp && iv.end <= level.back().end &&
        level.back().kind == SpanKind::kPass) {
      tp_inner.emplace_back(iv.begin, iv.end);
      continue;
    }
    level.push_back(iv);
  }
  if (level.empty()) return b;
  // The shortest p2p group of each size: its transfer time.
  std::map<int64_t, int64_t> fastest;
  for (const Interval& iv : level)
    if (iv.kind == SpanKind::kP2p) {
      auto [it, fresh] = fastest.emplace(iv.bytes, iv.end - iv.begin);
      if (!fresh) it->second = std::min(it->second, iv.end - iv.begin);
    }
  int64_t compute = 0, tp = 0, pp = 0, dp = 0, bubble = 0, opt = 0;
  int64_t t = level.front().begin;
  for (const Interval& iv : level) {
    if (iv.begin > t) bubble += iv.begin - t;
    const int64_t from = std::max(t, iv.begin), d = std::max<int64_t>(0, iv.end - from);
    switch (iv.kind) {
      case SpanKind::kPass:
        compute += d;
        break;
      case SpanKind::kTp:
        tp += d;
        break;
      case SpanKind::kP2p: {
        const int64_t transfer = std::min(d, fastest.at(iv.bytes));
        pp += transfer;
        bubble += d - transfer;
        break;
      }
      case SpanKind::kDpExposed:
        dp += d;
        break;
      case SpanKind::kOptimizer:
        opt += d;
        break;
      case SpanKind::kDpComm:  // not on the compute stream
      case SpanKind::kOp:      // inside a pass
        break;
    }
    t = std::max(t, iv.end);
  }
  for (const auto& [x, y] : tp_inner) {
    tp += y - x;
    compute -= y - x;
  }
  const double ns = 1e-9;
  b.compute_s = compute * ns;
  b.tp_comm_s = tp * ns;
  b.pp_comm_s = pp * ns;
  b.dp_comm_s = dp * ns;
  b.bubble_s = bubble * ns;
  b.optimizer_s = opt * ns;
  b.total_s = (t - level.front().begin) * ns;
  return b;
}

}  // namespace mplan::exec
