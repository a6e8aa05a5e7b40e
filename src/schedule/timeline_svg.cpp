// SVG timeline. Coordinates: x = left margin + time * px_per_unit; row r at top + r * pitch.
#include "src/schedule/timeline_svg.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "src/common/error.hpp"
#include "src/schedule/timeline_text.hpp"

namespace mplan {
namespace {

std::string num(double v) {  // compact decimal, at most 2 places
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  std::string s = buf;
  while (s.back() == '0') s.pop_back();
  if (s.back() == '.') s.pop_back();
  return s;
}

double hue_of(int64_t microbatch) {
  return std::fmod(static_cast<double>(microbatch) * 137.508, 360.0);
}

}  // namespace

std::string render_timeline_svg(const Schedule& s, const Timeline& t) {
  const int64_t pp = s.pp();
  constexpr double kLeft = 72, kTop = 40, kRow = 26, kPitch = 32, kCharPx = 6.6;
  size_t label_max = 1;
  double cost_min = 0;
  for (size_t i = 0; i < s.actions.size(); ++i) {
    if (!is_compute(s.actions[i].kind)) continue;
    const double d = t.end[i] - t.start[i];
    if (d <= 0) continue;
    cost_min = cost_min == 0 ? d : std::min(cost_min, d);
    label_max = std::max(label_max, cell_label(s, s.actions[i]).size());
  }
  const double makespan = std::max(t.makespan, 1e-9);
  double px = cost_min > 0 ? (static_cast<double>(label_max) * kCharPx + 8) / cost_min : 1;
  px = std::max(px, 640 / makespan);
  px = std::min(px, 16000 / makespan);
  const double plot_w = makespan * px;
  const double axis_y = kTop + static_cast<double>(pp) * kPitch + 4;
  const double width = kLeft + plot_w + 24, height = axis_y + 78;

  std::string o;
  o += "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  o += cat("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"", num(width), "\" height=\"",
           num(height), "\" viewBox=\"0 0 ", num(width), " ", num(height),
           "\" font-family=\"sans-serif\" font-size=\"11\">\n");
  const std::string title =
      cat(to_string(s.spec.kind), " schedule: pp ", s.spec.pp, ", ", s.spec.microbatches,
          " micro-batches, vpp ", s.spec.vpp, "; makespan ", num(t.makespan), ", bubble ",
          num(t.bubble_fraction * 100), " %");
  o += cat("<title>", title, "</title>\n");
  o += "<rect x=\"0\" y=\"0\" width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  o += cat("<text x=\"", num(kLeft), "\" y=\"22\" font-size=\"14\">", title, "</text>\n");

  for (int64_t r = 0; r < pp; ++r) {
    const double y = kTop + static_cast<double>(r) * kPitch;
    o += cat("<text x=\"8\" y=\"", num(y + kRow / 2 + 4), "\">rank ", r, "</text>\n");
    o += cat("<rect x=\"", num(kLeft), "\" y=\"", num(y), "\" width=\"", num(plot_w),
             "\" height=\"", num(kRow), "\" fill=\"#eeeeee\"/>\n");
    for (int64_t i = s.rank_begin[r]; i < s.rank_begin[r + 1]; ++i) {
      const Action& a = s.actions[i];
      if (!is_compute(a.kind) || t.end[i] <= t.start[i]) continue;
      const double x = kLeft + t.start[i] * px, w = (t.end[i] - t.start[i]) * px;
      const std::string h = num(hue_of(a.microbatch));
      std::string fill, stroke = "white", extra, text_fill = "black";
      switch (a.kind) {
        case ActionKind::kForward:
          fill = cat("hsl(", h, ",70%,42%)");
          text_fill = "white";
          break;
        case ActionKind::kBackward:
          fill = cat("hsl(", h, ",70%,76%)");
          break;
        default:
          fill = cat("hsl(", h, ",40%,92%)");
          stroke = cat("hsl(", h, ",70%,42%)");
          extra = " stroke-dasharray=\"3,2\"";
          break;
      }
      const std::string label = cell_label(s, a);
      o += cat("<rect x=\"", num(x), "\" y=\"", num(y), "\" width=\"", num(w), "\" height=\"",
               num(kRow), "\" fill=\"", fill, "\" stroke=\"", stroke, "\"", extra, "><title>rank ",
               r, ": ", to_string(a.kind), " micro-batch ", a.microbatch, ", chunk ", a.chunk, ", ",
               num(t.start[i]), " to ", num(t.end[i]), "</title></rect>\n");
      if (w >= static_cast<double>(label.size()) * kCharPx + 2)
        o += cat("<text x=\"", num(x + w / 2), "\" y=\"", num(y + kRow / 2 + 4),
                 "\" text-anchor=\"middle\" fill=\"", text_fill, "\">", label, "</text>\n");
    }
  }

  // Time axis with round ticks at least 48 px apart.
  o += cat("<line x1=\"", num(kLeft), "\" y1=\"", num(axis_y), "\" x2=\"", num(kLeft + plot_w),
           "\" y2=\"", num(axis_y), "\" stroke=\"black\"/>\n");
  double tick = 1;
  for (double base = 1e-3; base < 1e12 && tick * px < 48; base *= 10)
    for (double f : {1.0, 2.0, 5.0})
      if (f * base * px >= 48) {
        tick = f * base;
        break;
      }
  for (int64_t k = 0; static_cast<double>(k) * tick <= makespan + 1e-9; ++k) {
    const double x = kLeft + static_cast<double>(k) * tick * px;
    o += cat("<line x1=\"", num(x), "\" y1=\"", num(axis_y), "\" x2=\"", num(x), "\" y2=\"",
             num(axis_y + 4), "\" stroke=\"black\"/>");
    o += cat("<text x=\"", num(x), "\" y=\"", num(axis_y + 16), "\" text-anchor=\"middle\">",
             num(static_cast<double>(k) * tick), "</text>\n");
  }

  // Legend: the three pass kinds in a neutral hue.
  const double ly = axis_y + 32;
  const char* names[] = {"F forward", s.split_backward ? "B backward (input grad)" : "B backward",
                         "W weight grad"};
  const char* fills[] = {"hsl(210,70%,42%)", "hsl(210,70%,76%)", "hsl(210,40%,92%)"};
  double lx = kLeft;
  for (int k = 0; k < (s.split_backward ? 3 : 2); ++k) {
    o += cat("<rect x=\"", num(lx), "\" y=\"", num(ly), "\" width=\"18\" height=\"12\" fill=\"",
             fills[k], "\" stroke=\"", k == 2 ? "hsl(210,70%,42%)" : "white", "\"",
             k == 2 ? " stroke-dasharray=\"3,2\"" : "", "/>");
    o += cat("<text x=\"", num(lx + 24), "\" y=\"", num(ly + 10), "\">", names[k], "</text>\n");
    lx += 190;
  }
  o += cat("<text x=\"", num(kLeft), "\" y=\"", num(ly + 30),
           "\">one colour per micro-batch; label F/B/W + micro-batch",
           s.spec.vpp > 1 ? " + .chunk" : "", "; grey: idle</text>\n");
  o += "</svg>\n";
  return o;
}

}  // namespace mplan
