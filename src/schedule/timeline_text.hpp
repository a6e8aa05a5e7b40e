// Text picture of a timed schedule, like the figures of the Megatron-LM papers: one row per
// pipeline rank, time to the right, each compute pass a cell as wide as its cost and labelled
// F/B/W + micro-batch (+ "." + chunk when vpp > 1), '.' where the rank idles. Rows wider than
// `width` columns continue in further blocks, each under a time ruler. Optional ANSI colour.
#pragma once

#include <string>

#include "src/schedule/schedule.hpp"
#include "src/schedule/timeline.hpp"

namespace mplan {

struct TextTimelineOptions {
  int width = 120;     // total columns per line, rank label included (at least 40 are used)
  bool color = false;  // ANSI background colours: F blue, B green, W yellow (light on odd chunks)
};

// Label of a compute cell: "F3", or "F3.1" (micro-batch 3, chunk 1) when vpp > 1.
std::string cell_label(const Schedule& s, const Action& a);

std::string render_timeline_text(const Schedule& s, const Timeline& t,
                                 const TextTimelineOptions& options);

}  // namespace mplan
