// HTML report writer. Layout: header and summary, scatter (SVG drawn here), top-K table,
// rejected-by-rule table, best plan's per-stage memory and timeline.
#include "sim/sweep/sweep_report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "sim/sweep/sweep_json.hpp"
#include "sim/sweep/time_bound.hpp"
#include "src/common/error.hpp"
#include "src/common/units.hpp"
#include "src/plan/plan_rules.hpp"
#include "src/schedule/timeline.hpp"
#include "src/schedule/timeline_svg.hpp"

namespace mplan::sweep {

std::string html_escape(const std::string& s) {
  std::string o;
  o.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        o += "&amp;";
        break;
      case '<':
        o += "&lt;";
        break;
      case '>':
        o += "&gt;";
        break;
      case '"':
        o += "&quot;";
        break;
      case '\'':
        o += "&#39;";
        break;
      default:
        o += c;
    }
  }
  return o;
}

namespace {

std::string fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}
std::string gib(int64_t bytes) { return fixed(bytes_to_gib(static_cast<double>(bytes)), 1); }

// Round tick step giving about `n` ticks over [0, max].
double tick_step(double max, int n) {
  const double raw = max / n;
  const double base = std::pow(10.0, std::floor(std::log10(raw)));
  for (double f : {1.0, 2.0, 5.0, 10.0})
    if (f * base >= raw) return f * base;
  return 10 * base;
}

std::string short_number(double v) {  // 1234567 -> "1.23M"
  const char* suffix[] = {"", "k", "M", "G", "T"};
  int k = 0;
  while (std::fabs(v) >= 1000 && k < 4) {
    v /= 1000;
    ++k;
  }
  std::string s = fixed(v, v < 10 && k > 0 ? 2 : (v < 100 && k > 0 ? 1 : 0));
  return s + suffix[k];
}

std::string candidate_text(const Evaluated& e) {
  const Candidate& c = e.candidate;
  return cat(layout_label(c), ", ", to_string(c.schedule), ", mbs ", c.micro_batch_size,
             c.sequence_parallel ? ", sp" : "", c.tp_comm_overlap ? " with tp overlap" : "",
             ", recompute ", to_string(c.recompute),
             c.distributed_optimizer ? ", " + dp_sharding_label(c) : "",
             c.offload_layers || c.offload_modules ? ", offload " + offload_label(c) : "");
}

std::string scatter_svg(const SweepResult& res, int64_t top_k) {
  constexpr double W = 820, H = 440, L = 78, R = 20, T = 20, B = 56;
  const double pw = W - L - R, ph = H - T - B;
  double xmax = bytes_to_gib(static_cast<double>(res.capacity_bytes)), ymax = 0, ymin = 1e300;
  for (const Evaluated& e : res.evaluated) {
    xmax = std::max(xmax, bytes_to_gib(static_cast<double>(e.figures.peak_bytes)));
    ymax = std::max(ymax, e.figures.tokens_per_s);
    ymin = std::min(ymin, e.figures.tokens_per_s);
  }
  xmax = xmax > 0 ? xmax * 1.05 : 1;
  if (!(ymax > 0)) ymax = 1, ymin = 0;
  // The tokens/s axis starts at 0 unless the points sit in a narrow band near the top.
  double y0 = 0;
  if (ymin > 0.5 * ymax) {
    const double step = tick_step(std::max(ymax - ymin, 0.02 * ymax), 5);
    y0 = std::floor((ymin - step) / step) * step;
    if (y0 < 0) y0 = 0;
  }
  ymax = ymax + (ymax - y0) * 0.08;
  auto X = [&](double gib_v) { return L + gib_v / xmax * pw; };
  auto Y = [&](double tok) { return T + ph - (tok - y0) / (ymax - y0) * ph; };

  std::string o = cat("<svg class=\"scatter\" width=\"", W, "\" height=\"", H, "\" viewBox=\"0 0 ",
                      W, " ", H, "\" font-family=\"sans-serif\" font-size=\"11\">\n");
  o += cat("<rect x=\"", L, "\" y=\"", T, "\" width=\"", pw, "\" height=\"", ph,
           "\" fill=\"#fafafa\" stroke=\"#999\"/>\n");
  const double xs = tick_step(xmax, 8), ys = tick_step(ymax - y0, 6);
  for (double x = 0; x <= xmax + 1e-9; x += xs)
    o += cat("<line x1=\"", fixed(X(x), 1), "\" y1=\"", T + ph, "\" x2=\"", fixed(X(x), 1),
             "\" y2=\"", T + ph + 4, "\" stroke=\"#333\"/><text x=\"", fixed(X(x), 1), "\" y=\"",
             T + ph + 17, "\" text-anchor=\"middle\">", short_number(x), "</text>\n");
  for (double y = std::ceil(y0 / ys) * ys; y <= ymax + 1e-9; y += ys)
    o += cat("<line x1=\"", L - 4, "\" y1=\"", fixed(Y(y), 1), "\" x2=\"", L, "\" y2=\"",
             fixed(Y(y), 1), "\" stroke=\"#333\"/><text x=\"", L - 7, "\" y=\"", fixed(Y(y) + 4, 1),
             "\" text-anchor=\"end\">", short_number(y), "</text>\n");
  o += cat("<text x=\"", fixed(L + pw / 2, 1), "\" y=\"", H - 14,
           "\" text-anchor=\"middle\">peak memory per GPU (GiB)</text>\n");
  o += cat("<text x=\"16\" y=\"", fixed(T + ph / 2, 1), "\" transform=\"rotate(-90 16 ",
           fixed(T + ph / 2, 1), ")\" text-anchor=\"middle\">tokens/s</text>\n");
  const double cx = X(bytes_to_gib(static_cast<double>(res.capacity_bytes)));
  o += cat("<line x1=\"", fixed(cx, 1), "\" y1=\"", T, "\" x2=\"", fixed(cx, 1), "\" y2=\"", T + ph,
           "\" stroke=\"#c00\" stroke-dasharray=\"5,3\"/><text x=\"", fixed(cx - 4, 1), "\" y=\"",
           T + 12, "\" text-anchor=\"end\" fill=\"#c00\">GPU memory</text>\n");

  std::vector<int> rank_class(res.evaluated.size(), 0);  // 0 OOM, 1 fits, 2 top K, 3 best
  for (size_t r = 0; r < res.ranking.size(); ++r)
    rank_class[static_cast<size_t>(res.ranking[r])] =
        r == 0 ? 3 : (static_cast<int64_t>(r) < top_k ? 2 : 1);
  const char* cls[] = {"oom", "fit", "top", "best"};
  const char* fill[] = {"fill=\"#bbbbbb\"", "fill=\"#4a7bb7\" fill-opacity=\"0.6\"",
                        "fill=\"#f39c12\"", "fill=\"#d62728\" stroke=\"#000000\""};
  for (int pass = 0; pass < 4; ++pass) {  // draw the important points last (on top)
    for (size_t i = 0; i < res.evaluated.size(); ++i) {
      if (rank_class[i] != pass) continue;
      const Evaluated& e = res.evaluated[i];
      o += cat("<circle class=\"", cls[pass], "\" ", fill[pass], " cx=\"",
               fixed(X(bytes_to_gib(static_cast<double>(e.figures.peak_bytes))), 1), "\" cy=\"",
               fixed(Y(e.figures.tokens_per_s), 1), "\" r=\"",
               pass == 3 ? 6 : (pass == 2 ? 4 : 2.5), "\"><title>", html_escape(candidate_text(e)),
               ": ", short_number(e.figures.tokens_per_s), " tokens/s, ", gib(e.figures.peak_bytes),
               " GiB</title></circle>\n");
    }
  }
  o += "</svg>\n";
  return o;
}

}  // namespace

std::string best_timeline_svg(const Plan& best) {
  std::optional<ScheduleSpec> spec = schedule_spec_of(best);
  MPLAN_CHECK(spec.has_value(), "best plan without a schedule");
  const int64_t m = spec->microbatches;
  // At most about 512 (rank, micro-batch, chunk) cells, at least 2 pp micro-batches (warm-up,
  // steady state and cool-down all show).
  int64_t shown = std::min(m, std::max<int64_t>(2 * spec->pp, 512 / (spec->pp * spec->vpp)));
  if (spec->kind == ScheduleKind::kInterleaved && shown < m) {
    const int64_t g = spec->resolved_group_size();
    shown = std::max<int64_t>(g, shown / g * g);
    if (shown > m) shown = m;
  }
  ScheduleSpec drawn = *spec;
  drawn.microbatches = shown;
  if (check_spec(drawn)) drawn = *spec;  // keep the real one if the reduced one is not valid
  const Schedule s = make_schedule(drawn);

  // Per-pass costs of the busiest stage (per chunk: the stage's passes over vpp), in ms.
  const ParallelConfig& p = best.parallel;
  TimeBoundScratch scratch;
  const std::vector<StagePassTimes> stages = stage_pass_times(best, sim::SimOptions{}, scratch);
  const bool split = p.schedule == ScheduleKind::kZbH1;
  StagePassTimes busiest;
  int64_t most = -1;
  for (const StagePassTimes& st : stages) {
    const int64_t work =
        st.forward_ns + (split ? st.backward_input_ns + st.backward_weight_ns : st.backward_ns);
    if (work > most) most = work, busiest = st;
  }
  const double per_chunk_ms = 1e-6 / static_cast<double>(p.vpp);
  ActionCosts costs;
  costs.forward = static_cast<double>(busiest.forward_ns) * per_chunk_ms;
  if (split) {
    costs.backward = static_cast<double>(busiest.backward_input_ns) * per_chunk_ms;
    costs.weight = static_cast<double>(busiest.backward_weight_ns) * per_chunk_ms;
  } else {
    costs.backward = static_cast<double>(busiest.backward_ns) * per_chunk_ms;
    costs.weight = 0;
  }
  if (!(costs.forward > 0)) costs = ActionCosts{};
  const Timeline t = time_schedule(s, costs);
  std::string svg = render_timeline_svg(s, t);
  const std::string decl_end = "?>\n";
  if (svg.rfind("<?xml", 0) == 0) svg.erase(0, svg.find(decl_end) + decl_end.size());
  const std::string ns = " xmlns=\"http://www.w3.org/2000/svg\"";
  if (size_t at = svg.find(ns); at != std::string::npos) svg.erase(at, ns.size());
  std::string caption =
      cat("Pipeline timeline of the best plan: its schedule timed with the simulator's pass "
          "times of the busiest stage (ms; communication between stages not drawn)");
  if (drawn.microbatches < m)
    caption += cat("; drawn with ", drawn.microbatches, " of its ", m,
                   " micro-batches (the same schedule, shortened)");
  return cat("<figure><figcaption>", html_escape(caption), "</figcaption>\n", svg, "</figure>\n");
}

std::string sweep_report_html(const SweepRequest& request, const SweepResult& res, int64_t top_k,
                              const Plan* best, const sim::SimulationResult* best_result,
                              const std::string& command) {
  const ModelSpec& model = request.base.model;
  const ClusterSpec& cluster = request.base.cluster;
  const std::string title =
      cat("mplan sweep: ", model.name, " on ", request.gpus, " GPUs of ", cluster.name);
  std::string o;
  o += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n";
  o += cat("<title>", html_escape(title), "</title>\n");
  o += R"(<style>
body { font-family: sans-serif; margin: 24px; color: #222; max-width: 1400px; }
h1 { font-size: 20px; } h2 { font-size: 16px; margin-top: 28px; }
table { border-collapse: collapse; font-size: 13px; }
th, td { border-bottom: 1px solid #ddd; padding: 3px 8px; text-align: right; }
th { background: #f0f0f0; } td.l, th.l { text-align: left; }
code { background: #f4f4f4; padding: 1px 4px; }
.scatter circle.oom { fill: #bbb; } .scatter circle.fit { fill: #4a7bb7; fill-opacity: 0.55; }
.scatter circle.top { fill: #f39c12; } .scatter circle.best { fill: #d62728; stroke: #000; }
.legend span { display: inline-block; width: 10px; height: 10px; border-radius: 5px; margin: 0 4px 0 12px; }
figure { margin: 0; overflow-x: auto; } figcaption { font-size: 13px; margin-bottom: 6px; }
</style>
</head>
<body>
)";
  o += cat("<h1>", html_escape(title), "</h1>\n");
  o += cat("<p>Global batch ", request.global_batch_size, " sequences of ", model.seq_length,
           " tokens; objective ", to_string(request.objective),
           request.fixed.empty() ? std::string()
                                 : cat("; fixed ", html_escape(to_string(request.fixed))),
           "; GPU memory ", gib(res.capacity_bytes), " GiB.</p>\n");
  o += cat("<p>", res.candidates, " candidates: ", res.invalid, " invalid, ", res.out_of_memory,
           " out of memory (", res.out_of_memory_pruned, " of them proved without simulating), ",
           res.skipped > 0 ? cat(res.skipped, " skipped (a lower bound keeps them below the top ",
                                 res.top_k, "; not simulated, not shown), ")
                           : std::string(),
           res.simulated, " simulated, ", res.fits, " fit. Sweep wall time ",
           fixed(res.wall_time_s, 2), " s on ", res.threads, " threads.</p>\n");
  if (!command.empty()) o += cat("<p>Command: <code>", html_escape(command), "</code></p>\n");

  o += "<h2>Memory vs throughput of every simulated candidate</h2>\n";
  o += "<p class=\"legend\"><span style=\"background:#d62728\"></span>best"
       "<span style=\"background:#f39c12\"></span>top " +
       std::to_string(top_k) +
       "<span style=\"background:#4a7bb7\"></span>fits"
       "<span style=\"background:#bbb\"></span>out of memory (hover a point for its plan)</p>\n";
  o += scatter_svg(res, top_k);

  o += cat("<h2>Top ", top_k,
           "</h2>\n<table>\n<tr><th>#</th><th class=\"l\">layout</th>"
           "<th class=\"l\">schedule</th><th>micro-batch</th><th>micro-batches</th>"
           "<th class=\"l\">sp</th><th class=\"l\">recompute</th><th class=\"l\">offload</th>"
           "<th class=\"l\">dp sharding</th>"
           "<th>iteration (ms)</th><th>tokens/s</th><th>TFLOP/s/GPU</th><th>MFU</th>"
           "<th>bubble</th><th>peak / capacity (GiB)</th></tr>\n");
  for (int64_t r = 0; r < top_k && r < static_cast<int64_t>(res.ranking.size()); ++r) {
    const Evaluated& e = res.evaluated[static_cast<size_t>(res.ranking[r])];
    const Candidate& c = e.candidate;
    const Figures& f = e.figures;
    o += cat("<tr><td>", r + 1, "</td><td class=\"l\">", html_escape(layout_label(c)),
             "</td><td class=\"l\">", to_string(c.schedule), "</td><td>", c.micro_batch_size,
             "</td><td>", num_microbatches(c, request.global_batch_size), "</td><td class=\"l\">",
             sp_label(c), "</td><td class=\"l\">", to_string(c.recompute), "</td><td class=\"l\">",
             html_escape(offload_label(c)), "</td><td class=\"l\">",
             html_escape(dp_sharding_label(c)), "</td><td>", fixed(f.iteration_time_s * 1e3, 1),
             "</td><td>", short_number(f.tokens_per_s), "</td><td>",
             fixed(f.model_tflops_per_gpu, 1), "</td><td>", fixed(f.mfu * 100, 1), " %</td><td>",
             fixed(f.bubble_fraction * 100, 1), " %</td><td>", gib(f.peak_bytes), " / ",
             gib(f.capacity_bytes), "</td></tr>\n");
  }
  o += "</table>\n";

  o += "<h2>Rejected candidates by rule</h2>\n";
  if (res.invalid_by_rule.empty()) {
    o += "<p>None.</p>\n";
  } else {
    o += "<table>\n<tr><th>count</th><th class=\"l\">rule (first example)</th></tr>\n";
    for (const RuleCount& r : res.invalid_by_rule)
      o +=
          cat("<tr><td>", r.count, "</td><td class=\"l\">", html_escape(r.example), "</td></tr>\n");
    o += "</table>\n";
  }

  if (best && best_result) {
    o += "<h2>Best plan</h2>\n<table>\n<tr><th>pipeline stage</th><th>peak (GiB)</th>"
         "<th>weights</th><th>grads</th><th>optimizer</th><th>activations</th><th>other</th>"
         "</tr>\n";
    for (const sim::StageMemory& s : best_result->per_stage)
      o += cat("<tr><td>", s.pp_rank, "</td><td>", gib(s.peak_bytes), "</td><td>",
               gib(s.weights_bytes), "</td><td>", gib(s.grads_bytes), "</td><td>",
               gib(s.optimizer_bytes), "</td><td>", gib(s.activations_bytes), "</td><td>",
               gib(s.other_bytes), "</td></tr>\n");
    o += "</table>\n";
    const sim::TimeBreakdown& b = best_result->breakdown;
    o += cat("<p>Iteration ", fixed(best_result->iteration_time_s * 1e3, 1), " ms: compute ",
             fixed(b.compute_s * 1e3, 1), ", tp comm ", fixed(b.tp_comm_s * 1e3, 1), ", cp comm ",
             fixed(b.cp_comm_s * 1e3, 1), ", ep comm ", fixed(b.ep_comm_s * 1e3, 1), ", pp comm ",
             fixed(b.pp_comm_s * 1e3, 1), ", dp comm ", fixed(b.dp_comm_s * 1e3, 1), ", bubble ",
             fixed(b.bubble_s * 1e3, 1), ", optimizer ", fixed(b.optimizer_s * 1e3, 1),
             " ms.</p>\n");
    o += best_timeline_svg(*best);
  }
  o += "</body>\n</html>\n";
  return o;
}

}  // namespace mplan::sweep
