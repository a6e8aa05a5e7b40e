// Text timeline: a character grid per rank (cells at round(time * columns_per_unit)), cut into
// blocks of the available width. A label is never split between blocks: a cell cut by a block's
// end shows its label at the start of the next block instead.
#include "src/schedule/timeline_text.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "src/common/error.hpp"

namespace mplan {
namespace {

enum Style : uint8_t { kIdle = 0, kF = 1, kB = 2, kW = 3, kLight = 4 };  // kLight: odd chunks

const char* ansi(uint8_t style) {
  switch (style) {
    case kF:
      return "\x1b[44;97m";
    case kB:
      return "\x1b[42;30m";
    case kW:
      return "\x1b[43;30m";
    case kF | kLight:
      return "\x1b[104;30m";
    case kB | kLight:
      return "\x1b[102;30m";
    case kW | kLight:
      return "\x1b[103;30m";
    default:
      return "\x1b[2m";
  }
}

std::string format_time(double t) { return cat(std::round(t * 1000.0) / 1000.0); }

}  // namespace

std::string cell_label(const Schedule& s, const Action& a) {
  if (s.spec.vpp > 1) return cat(to_string(a.kind), a.microbatch, ".", a.chunk);
  return cat(to_string(a.kind), a.microbatch);
}

std::string render_timeline_text(const Schedule& s, const Timeline& t,
                                 const TextTimelineOptions& o) {
  const int64_t pp = s.pp();
  // Columns per time unit: the shortest pass must fit the longest label and a separator.
  size_t label_max = 1;
  double cost_min = 0;
  for (size_t i = 0; i < s.actions.size(); ++i) {
    const Action& a = s.actions[i];
    if (!is_compute(a.kind)) continue;
    const double d = t.end[i] - t.start[i];
    if (d <= 0) continue;
    cost_min = cost_min == 0 ? d : std::min(cost_min, d);
    label_max = std::max(label_max, cell_label(s, a).size());
  }
  if (cost_min == 0 || t.makespan <= 0) return "(nothing to draw: every pass costs 0)\n";
  double scale = std::ceil(static_cast<double>(label_max + 1) / cost_min);
  constexpr double kMaxColumns = 200000;
  if (t.makespan * scale > kMaxColumns) scale = kMaxColumns / t.makespan;
  const int64_t columns = static_cast<int64_t>(std::ceil(t.makespan * scale - 1e-9));
  auto col = [&](double time) { return static_cast<int64_t>(std::llround(time * scale)); };

  std::vector<std::string> glyph(pp, std::string(columns, '.'));
  std::vector<std::vector<uint8_t>> style(pp, std::vector<uint8_t>(columns, kIdle));
  struct Cell {
    int64_t c0, c1;
    int64_t action;
  };
  std::vector<std::vector<Cell>> cells(pp);  // per rank, in column order
  for (int64_t r = 0; r < pp; ++r)
    for (int64_t i = s.rank_begin[r]; i < s.rank_begin[r + 1]; ++i) {
      const Action& a = s.actions[i];
      if (!is_compute(a.kind) || t.end[i] <= t.start[i]) continue;
      const int64_t c0 = std::min(col(t.start[i]), columns - 1);
      const int64_t c1 = std::max(std::min(col(t.end[i]), columns), c0 + 1);
      const uint8_t st = static_cast<uint8_t>((a.kind == ActionKind::kForward    ? kF
                                               : a.kind == ActionKind::kBackward ? kB
                                                                                 : kW) |
                                              (a.chunk % 2 ? kLight : 0));
      const std::string label = cell_label(s, a);
      const size_t room = c1 - c0 > 1 ? static_cast<size_t>(c1 - c0 - 1) : 1;
      cells[r].push_back({c0, c1, i});
      for (int64_t c = c0; c < c1; ++c) {
        const size_t k = static_cast<size_t>(c - c0);
        glyph[r][c] = k < std::min(room, label.size()) ? label[k] : ' ';
        style[r][c] = st;
      }
    }

  // Ruler ticks: a round step that leaves room for the numbers.
  const size_t time_width = format_time(t.makespan).size();
  double tick = 1;
  for (double base = 1e-3; base < 1e12; base *= 10) {
    bool found = false;
    for (double f : {1.0, 2.0, 5.0})
      if (f * base * scale >= static_cast<double>(time_width + 2)) {
        tick = f * base;
        found = true;
        break;
      }
    if (found) break;
  }

  const std::string rank_label_proto = cat("rank ", pp - 1, " ");
  const size_t prefix = std::max<size_t>(rank_label_proto.size(), 5);
  const int64_t block = std::max<int64_t>(std::max(o.width, 40) - static_cast<int>(prefix), 20);
  std::string out;
  for (int64_t b0 = 0; b0 < columns; b0 += block) {
    const int64_t b1 = std::min(columns, b0 + block);
    std::string ruler(static_cast<size_t>(b1 - b0), ' ');
    const int64_t first_tick = static_cast<int64_t>(std::ceil(b0 / scale / tick - 1e-9));
    for (int64_t k = first_tick;; ++k) {
      const int64_t c = col(static_cast<double>(k) * tick);
      if (c >= b1) break;
      const std::string num = format_time(static_cast<double>(k) * tick);
      if (c < b0 || c - b0 + static_cast<int64_t>(num.size()) > b1 - b0) continue;
      ruler.replace(static_cast<size_t>(c - b0), num.size(), num);
    }
    while (!ruler.empty() && ruler.back() == ' ') ruler.pop_back();
    out += std::string("time") + std::string(prefix - 4, ' ') + ruler + "\n";
    for (int64_t r = 0; r < pp; ++r) {
      std::string row = glyph[r].substr(static_cast<size_t>(b0), static_cast<size_t>(b1 - b0));
      // A cell cut by the block start shows its label again.
      auto it = std::upper_bound(cells[r].begin(), cells[r].end(), b0,
                                 [](int64_t c, const Cell& cell) { return c < cell.c0; });
      if (it != cells[r].begin() && (it - 1)->c0 < b0 && b0 < (it - 1)->c1) {
        const std::string label = cell_label(s, s.actions[(it - 1)->action]);
        const int64_t room = std::min((it - 1)->c1, b1) - b0;
        row.replace(0, static_cast<size_t>(room), static_cast<size_t>(room), ' ');
        if (static_cast<int64_t>(label.size()) < room) row.replace(0, label.size(), label);
      }
      // A cell cut by the block end keeps its label whole: blank here, shown on the next line.
      auto last = std::upper_bound(cells[r].begin(), cells[r].end(), b1 - 1,
                                   [](int64_t c, const Cell& cell) { return c < cell.c0; });
      if (last != cells[r].begin() && (last - 1)->c1 > b1 && (last - 1)->c0 >= b0) {
        const Cell& cut = *(last - 1);
        const int64_t shown = static_cast<int64_t>(
            std::min(cell_label(s, s.actions[cut.action]).size(),
                     cut.c1 - cut.c0 > 1 ? static_cast<size_t>(cut.c1 - cut.c0 - 1) : size_t{1}));
        if (cut.c0 + shown > b1)
          row.replace(static_cast<size_t>(cut.c0 - b0), static_cast<size_t>(b1 - cut.c0),
                      static_cast<size_t>(b1 - cut.c0), ' ');
      }
      std::string line = cat("rank ", r);
      line.resize(prefix, ' ');
      uint8_t current = 255;
      for (int64_t c = b0; c < b1; ++c) {
        if (o.color && style[r][c] != current) {
          current = style[r][c];
          line += "\x1b[0m";
          line += ansi(current);
        }
        line += row[static_cast<size_t>(c - b0)];
      }
      if (o.color) line += "\x1b[0m";
      out += line + "\n";
    }
    if (b1 < columns) out += "\n";
  }
  out += cat("F", s.spec.vpp > 1 ? "<m>.<c>" : "<m>", " forward, B",
             s.split_backward ? " backward (input gradient), W weight gradient" : " backward",
             " of micro-batch m",
             s.spec.vpp > 1 ? " on model chunk c (virtual stage c*pp + rank)" : "", "; '.' idle; ",
             format_time(1.0 / scale), " time units per column\n");
  return out;
}

}  // namespace mplan
