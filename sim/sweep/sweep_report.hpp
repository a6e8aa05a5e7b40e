// The sweep's HTML report: one self-contained page (inline CSS and SVG, no script, no external
// reference, so it opens offline) with the summary, a memory-vs-throughput scatter of every
// simulated candidate, the top-K table, the rejected candidates by rule, and the best plan's
// pipeline timeline (src/schedule/timeline_svg). Invariant: well-formed XML-style markup (every
// element closed), text escaped.
#pragma once

#include <cstdint>
#include <string>

#include "sim/plan_sim/simulate.hpp"
#include "sim/sweep/sweep.hpp"
#include "src/plan/plan.hpp"

namespace mplan::sweep {

// The best plan's schedule timed with the simulator's pass times of its busiest stage (forward,
// backward — or zb-h1's B and W — per chunk, from stage_pass_times), as an SVG element to inline
// (no XML declaration, no namespace URL). Long schedules are drawn with fewer micro-batches
// (same pp, vpp and order; said in the caption).
std::string best_timeline_svg(const Plan& best);

// `command` is shown as the line that produced the report.
std::string sweep_report_html(const SweepRequest& request, const SweepResult& result, int64_t top_k,
                              const Plan* best, const sim::SimulationResult* best_result,
                              const std::string& command);

// Escapes &, <, >, " and ' for HTML text and attribute values.
std::string html_escape(const std::string& s);

}  // namespace mplan::sweep
