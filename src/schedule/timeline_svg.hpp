// SVG picture of a timed schedule, to open in a browser: one row per pipeline rank on a grey
// (idle) band, one rectangle per compute pass, coloured by micro-batch (a fixed hue per
// micro-batch); F dark, B light, W pale with a dashed outline; labels as in the text timeline,
// a tooltip per pass, a time axis, a legend and a summary line. Well-formed standalone XML.
#pragma once

#include <string>

#include "src/schedule/schedule.hpp"
#include "src/schedule/timeline.hpp"

namespace mplan {

std::string render_timeline_svg(const Schedule& s, const Timeline& t);

}  // namespace mplan
