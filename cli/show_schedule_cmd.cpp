// `mplan show-schedule`: generate a pipeline schedule (gpipe, 1f1b, interleaved, zb-h1), check
// it, time it with per-pass costs, and show it as a terminal timeline, JSON or SVG. Bad input is
// an mplan::Error naming the flag (exit 2); a generated schedule that fails validate() is an
// internal error (exit 3).
#include <sys/ioctl.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <iostream>
#include <memory>

#include "cli/command_registry.hpp"
#include "cli/output.hpp"
#include "src/common/error.hpp"
#include "src/common/json_reader.hpp"
#include "src/plan/plan.hpp"
#include "src/plan/plan_rules.hpp"
#include "src/plan/validate.hpp"
#include "src/schedule/closed_form.hpp"
#include "src/schedule/schedule.hpp"
#include "src/schedule/schedule_json.hpp"
#include "src/schedule/timeline.hpp"
#include "src/schedule/timeline_svg.hpp"
#include "src/schedule/timeline_text.hpp"
#include "src/schedule/validate.hpp"

namespace mplan::cli {
namespace {

struct ShowScheduleOptions {
  int64_t pp = 0;
  int64_t microbatches = 0;
  int64_t vpp = 1;
  std::string schedule;
  int64_t group_size = 0;
  double forward_cost = 1.0;
  double backward_cost = 2.0;
  double weight_cost = 0.0;
  bool json = false;
  std::string svg_path;
  std::string plan_path;
  int width = 0;
  // Which flags were given.
  CLI::Option *pp_opt = nullptr, *mb_opt = nullptr, *vpp_opt = nullptr, *schedule_opt = nullptr,
              *group_opt = nullptr, *fwd_opt = nullptr, *bwd_opt = nullptr, *w_opt = nullptr,
              *plan_opt = nullptr, *width_opt = nullptr;
};

const char* flag_of(SpecField f) {
  switch (f) {
    case SpecField::kSchedule:
      return "--schedule";
    case SpecField::kPp:
      return "--pp";
    case SpecField::kVpp:
      return "--vpp";
    case SpecField::kMicrobatches:
      return "--microbatches";
    case SpecField::kGroupSize:
      return "--group-size";
  }
  return "?";
}

// Sizes a timeline can be drawn at: pp x vpp x micro-batches actions of each kind, at most
// kMaxActions (the drawing holds a character per column per rank).
constexpr int64_t kMaxPp = 256, kMaxVpp = 64, kMaxMicrobatches = 4096;
constexpr int64_t kMaxActions = int64_t{1} << 18;

void check_drawable(const ScheduleSpec& spec, const char* flag) {
  const int64_t actions = spec.pp * spec.vpp * spec.microbatches;
  if (spec.pp > kMaxPp || spec.vpp > kMaxVpp || spec.microbatches > kMaxMicrobatches ||
      actions > kMaxActions)
    throw Error(cat(flag, ": pp ", spec.pp, " x vpp ", spec.vpp, " x ", spec.microbatches,
                    " micro-batches is too large to draw (at most pp ", kMaxPp, ", vpp ", kMaxVpp,
                    ", ", kMaxMicrobatches, " micro-batches and ", kMaxActions,
                    " passes of each kind)"));
}

ScheduleSpec spec_from_flags(const ShowScheduleOptions& o) {
  if (o.plan_opt->count() > 0) {
    for (const CLI::Option* opt : {o.pp_opt, o.mb_opt, o.vpp_opt, o.schedule_opt, o.group_opt})
      if (opt->count() > 0)
        throw Error(
            cat("--plan: the plan sets pp, vpp, micro-batches, schedule and group size; "
                "drop ",
                opt->get_name()));
    const Plan plan = load_plan(o.plan_path);
    const std::vector<Violation> broken = validate(plan);
    if (!broken.empty()) {
      std::string all;
      for (const Violation& v : broken) {
        if (!all.empty()) all += "; ";
        all += to_string(v);
      }
      throw Error(cat(o.plan_path, ": ", broken.size(), " broken rule",
                      broken.size() > 1 ? "s" : "", ": ", all));
    }
    const std::optional<ScheduleSpec> spec = schedule_spec_of(plan);
    MPLAN_CHECK(spec.has_value(), "a valid plan has a micro-batch count");
    check_drawable(*spec, "--plan");
    return *spec;
  }
  if (o.pp_opt->count() == 0) throw Error("--pp: required (or --plan FILE)");
  if (o.mb_opt->count() == 0) throw Error("--microbatches: required (or --plan FILE)");
  check_int_range(o.pp, {1, kMaxPp}, "--pp");
  check_int_range(o.microbatches, {1, kMaxMicrobatches}, "--microbatches");
  check_int_range(o.vpp, {1, kMaxVpp}, "--vpp");
  if (o.group_opt->count() > 0)
    check_int_range(o.group_size, {1, kMaxMicrobatches}, "--group-size");
  ScheduleSpec spec;
  spec.pp = o.pp;
  spec.vpp = o.vpp;
  spec.microbatches = o.microbatches;
  spec.group_size = o.group_size;
  spec.kind = o.schedule_opt->count() > 0 ? schedule_kind_from_string(o.schedule, "--schedule")
              : o.vpp > 1                 ? ScheduleKind::kInterleaved
                                          : ScheduleKind::k1F1B;
  if (auto p = check_spec(spec)) throw Error(cat(flag_of(p->field), ": ", p->rule));
  check_drawable(spec, "--microbatches");
  return spec;
}

ActionCosts costs_from_flags(const ShowScheduleOptions& o, const ScheduleSpec& spec) {
  const bool f = o.fwd_opt->count() > 0, b = o.bwd_opt->count() > 0, w = o.w_opt->count() > 0;
  if (f && !b) throw Error("--backward-cost: required with --forward-cost");
  if (b && !f) throw Error("--forward-cost: required with --backward-cost");
  if (w && !f) throw Error("--weight-cost: needs --forward-cost and --backward-cost");
  // Costs are relative: 10^-3 to 10^6 of any unit (a cost ratio beyond 10^9 cannot be drawn).
  auto check = [](const char* flag, double v, bool zero_ok) {
    if (!std::isfinite(v) || v < 0 || (!zero_ok && v == 0))
      throw Error(cat(flag, ": must be a number ", zero_ok ? ">= 0" : "> 0", ", got ", v));
    if (v != 0) check_number_range(v, {1e-3, 1e6}, flag);
  };
  check("--forward-cost", o.forward_cost, false);
  check("--backward-cost", o.backward_cost, false);
  check("--weight-cost", o.weight_cost, true);
  ActionCosts c{o.forward_cost, o.backward_cost, w ? o.weight_cost : 0.0};
  if (spec.kind == ScheduleKind::kZbH1 && !w) c.backward = c.weight = o.backward_cost / 2;
  return c;
}

int terminal_width(const ShowScheduleOptions& o) {
  if (o.width_opt->count() > 0) {
    return static_cast<int>(check_int_range(o.width, {40, 10000}, "--width"));
  }
  struct winsize ws {};
  if (stdout_is_terminal() && ::ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col >= 40)
    return ws.ws_col;
  return 120;
}

std::string cost_text(double v) { return cat(std::round(v * 1000.0) / 1000.0); }

void print_summary(const Schedule& s, const Timeline& t, const ActionCosts& c) {
  const ScheduleSpec& spec = s.spec;
  std::cout << "makespan " << cost_text(t.makespan) << ", bubble fraction "
            << format_percent(t.bubble_fraction, 2);
  const auto cf_makespan = closed_form_makespan(spec, c);
  const auto cf_bubble = closed_form_bubble_fraction(spec, c);
  if (cf_makespan && cf_bubble)
    std::cout << " (closed form: makespan " << cost_text(*cf_makespan) << ", bubble "
              << format_percent(*cf_bubble, 2) << ")";
  std::cout << "\n";
  const std::vector<int64_t> peak = peak_inflight(s);
  Table table({"rank", "warm-up", "peak in-flight", "busy", "idle"});
  for (int64_t r = 0; r < s.pp(); ++r)
    table.add_row({std::to_string(r), std::to_string(s.warmup[r]), std::to_string(peak[r]),
                   cost_text(t.busy[r]), cost_text(t.makespan - t.busy[r])});
  std::cout << table.render();
  std::cout << "peak in-flight: (micro-batch, chunk) activations alive at once, from F to the "
            << (s.split_backward ? "end of W" : "end of B")
            << (spec.vpp > 1 ? "; each chunk holds 1/vpp of the rank's layers" : "") << "\n";
}

void run_show_schedule(const ShowScheduleOptions& o) {
  const ScheduleSpec spec = spec_from_flags(o);
  const ActionCosts costs = costs_from_flags(o, spec);
  const int width = terminal_width(o);
  const Schedule s = make_schedule(spec);
  if (auto v = validate(s))
    throw InternalError(cat("generated schedule is invalid: ", to_string(*v)));
  const Timeline t = time_schedule(s, costs);

  if (!o.svg_path.empty()) write_text_file(o.svg_path, render_timeline_svg(s, t), "--svg");
  if (o.json) {
    std::cout << schedule_to_json(s, t).dump(2) << "\n";
    return;
  }
  std::cout << to_string(spec.kind) << " schedule: pp " << spec.pp << ", " << spec.microbatches
            << " micro-batches, vpp " << spec.vpp;
  if (spec.kind == ScheduleKind::kInterleaved)
    std::cout << ", group size " << spec.resolved_group_size();
  std::cout << "; cost per pass: F " << cost_text(costs.forward) << ", B "
            << cost_text(s.split_backward ? costs.backward : costs.backward + costs.weight);
  if (s.split_backward) std::cout << ", W " << cost_text(costs.weight);
  std::cout << "\n\n";
  const bool color = stdout_is_terminal() && std::getenv("NO_COLOR") == nullptr;
  std::cout << render_timeline_text(s, t, {width, color}) << "\n";
  print_summary(s, t, costs);
  if (!o.svg_path.empty()) std::cout << "wrote " << o.svg_path << "\n";
}

void add_show_schedule(CLI::App& app) {
  auto o = std::make_shared<ShowScheduleOptions>();
  auto* cmd = app.add_subcommand(
      "show-schedule",
      "Draw a pipeline schedule (gpipe, 1f1b, interleaved, zb-h1) with its bubble and memory");
  o->pp_opt = cmd->add_option("--pp", o->pp, "Pipeline-parallel size (ranks in the pipeline)");
  o->mb_opt = cmd->add_option("--microbatches", o->microbatches,
                              "Micro-batches per step (per data-parallel rank)");
  o->vpp_opt =
      cmd->add_option("--vpp", o->vpp, "Model chunks per rank (virtual pipeline size; default 1)");
  o->schedule_opt = cmd->add_option(
      "--schedule", o->schedule,
      "gpipe | 1f1b | interleaved | zb-h1 (default: interleaved when --vpp > 1, else 1f1b)");
  o->group_opt = cmd->add_option(
      "--group-size", o->group_size,
      "Interleaved: micro-batches per group (Megatron's microbatch_group_size_per_vp_stage; "
      "default pp)");
  o->fwd_opt = cmd->add_option("--forward-cost", o->forward_cost,
                               "Time of one forward pass of one chunk (default 1)");
  o->bwd_opt = cmd->add_option(
      "--backward-cost", o->backward_cost,
      "Time of one backward pass (default 2); only its input-gradient part with --weight-cost");
  o->w_opt = cmd->add_option(
      "--weight-cost", o->weight_cost,
      "Time of the weight-gradient part (zb-h1 runs it as W; default: half the backward)");
  cmd->add_flag("--json", o->json,
                "Print {pp, microbatches, vpp, schedule, ranks: [{rank, warmup, ops, "
                "peak_inflight}], makespan, bubble_fraction} instead of the timeline");
  cmd->add_option("--svg", o->svg_path, "Also write the timeline as an SVG picture to FILE");
  o->plan_opt = cmd->add_option("--plan", o->plan_path,
                                "Take pp, vpp, micro-batches, schedule, group size from a plan "
                                "file (checked first)");
  o->width_opt = cmd->add_option("--width", o->width,
                                 "Columns of the timeline (default: the terminal's, or 120)");
  cmd->footer(
      "Costs are per pass of one model chunk; they give the makespan, the bubble fraction and the\n"
      "cells' widths. Exit status: 0 ok, 2 invalid input (the broken rule is named).\n"
      "Examples:\n"
      "  mplan show-schedule --pp 4 --microbatches 8                 1F1B as in Megatron-LM\n"
      "  mplan show-schedule --pp 4 --microbatches 8 --vpp 2         interleaved 1F1B\n"
      "  mplan show-schedule --pp 4 --microbatches 8 --schedule zb-h1 \\\n"
      "      --forward-cost 1 --backward-cost 1 --weight-cost 1      zero-bubble ZB-H1\n"
      "  mplan show-schedule --pp 8 --microbatches 32 --json > schedule.json\n"
      "  mplan show-schedule --plan best.json --svg schedule.svg");
  cmd->callback([o] { run_show_schedule(*o); });
}

MPLAN_REGISTER_COMMAND(40, add_show_schedule);

}  // namespace
}  // namespace mplan::cli
