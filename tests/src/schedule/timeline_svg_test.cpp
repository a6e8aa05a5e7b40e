// The SVG timeline is well-formed XML (checked by a small parser here) and draws every pass,
// one hue per micro-batch, with F, B and W told apart.
#include "src/schedule/timeline_svg.hpp"

#include <gtest/gtest.h>

#include "src/common/error.hpp"
#include "tests/src/schedule/schedule_test_util.hpp"

#include <cctype>
#include <set>
#include <vector>

namespace mplan {
namespace {

using test::make;

// Minimal XML well-formedness: one root element, properly nested and closed tags, quoted
// attributes without '<', entity references only of the predefined kinds. Returns "" or the
// first problem.
std::string xml_problem(const std::string& x) {
  size_t i = 0;
  if (x.rfind("<?xml", 0) == 0) i = x.find("?>") + 2;
  std::vector<std::string> open;
  int roots = 0;
  auto name_at = [&](size_t& p) {
    const size_t b = p;
    while (p < x.size() && (std::isalnum(static_cast<unsigned char>(x[p])) || x[p] == '-' ||
                            x[p] == '_' || x[p] == ':'))
      ++p;
    return x.substr(b, p - b);
  };
  while (i < x.size()) {
    if (x[i] == '&') {
      const size_t e = x.find(';', i);
      const std::string ent = e == std::string::npos ? "" : x.substr(i, e - i + 1);
      if (ent != "&amp;" && ent != "&lt;" && ent != "&gt;" && ent != "&quot;" && ent != "&apos;")
        return cat("bad entity at ", i);
      i = e + 1;
      continue;
    }
    if (x[i] != '<') {
      if (open.empty() && !std::isspace(static_cast<unsigned char>(x[i])))
        return cat("text outside the root at ", i);
      ++i;
      continue;
    }
    ++i;
    if (x[i] == '/') {
      ++i;
      const std::string n = name_at(i);
      if (open.empty() || open.back() != n) return cat("unexpected </", n, ">");
      open.pop_back();
      if (x[i] != '>') return cat("bad end tag ", n);
      ++i;
      continue;
    }
    const std::string n = name_at(i);
    if (n.empty()) return cat("bad tag at ", i);
    std::set<std::string> attrs;
    while (true) {
      while (std::isspace(static_cast<unsigned char>(x[i]))) ++i;
      if (x[i] == '/' && x[i + 1] == '>') {
        i += 2;
        if (open.empty()) ++roots;
        break;
      }
      if (x[i] == '>') {
        ++i;
        if (open.empty()) ++roots;
        open.push_back(n);
        break;
      }
      const std::string a = name_at(i);
      if (a.empty() || !attrs.insert(a).second) return cat("bad attribute in <", n, ">");
      if (x[i] != '=' || x[i + 1] != '"') return cat("unquoted attribute ", a);
      const size_t e = x.find('"', i + 2);
      if (e == std::string::npos || x.substr(i + 2, e - i - 2).find('<') != std::string::npos)
        return cat("bad value of ", a);
      i = e + 1;
    }
  }
  if (!open.empty()) return cat("unclosed <", open.back(), ">");
  if (roots != 1) return "need exactly one root element";
  return "";
}

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

TEST(TimelineSvg, CheckerCatchesBrokenXml) {
  EXPECT_EQ(xml_problem("<svg><rect/></svg>"), "");
  EXPECT_NE(xml_problem("<svg><rect></svg>"), "");
  EXPECT_NE(xml_problem("<svg a=b/>"), "");
  EXPECT_NE(xml_problem("<svg/><svg/>"), "");
  EXPECT_NE(xml_problem("<svg>a & b</svg>"), "");
}

TEST(TimelineSvg, WellFormedWithEveryPass) {
  for (const Schedule& s :
       {make(ScheduleKind::k1F1B, 4, 8), make(ScheduleKind::kZbH1, 4, 8),
        make(ScheduleKind::kInterleaved, 4, 8, 2), make(ScheduleKind::kGpipe, 2, 3)}) {
    const std::string svg = render_timeline_svg(s, time_schedule(s, {1, 2, 1}));
    EXPECT_EQ(xml_problem(svg), "") << to_string(s.spec.kind);
    EXPECT_EQ(
        svg.rfind(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\"",
            0),
        0u);
    size_t passes = 0;
    for (const Action& a : s.actions) passes += is_compute(a.kind);
    // One rectangle with a tooltip per pass.
    EXPECT_EQ(count(svg, "</title></rect>"), passes) << to_string(s.spec.kind);
  }
}

TEST(TimelineSvg, ColourPerMicrobatchAndKinds) {
  const Schedule s = make(ScheduleKind::kZbH1, 2, 3);
  const std::string svg = render_timeline_svg(s, time_schedule(s, {1, 1, 1}));
  // Hues 0, 137.51 and 275.02 for micro-batches 0, 1, 2; F dark, B light, W pale and dashed.
  EXPECT_NE(svg.find("fill=\"hsl(0,70%,42%)\""), std::string::npos);
  EXPECT_NE(svg.find("fill=\"hsl(137.51,70%,42%)\""), std::string::npos);
  EXPECT_NE(svg.find("fill=\"hsl(275.02,70%,76%)\""), std::string::npos);
  EXPECT_NE(svg.find("fill=\"hsl(137.51,40%,92%)\" stroke=\"hsl(137.51,70%,42%)\" "
                     "stroke-dasharray=\"3,2\""),
            std::string::npos);
  EXPECT_EQ(count(svg, "stroke-dasharray=\"3,2\"><title>"), 6u);  // the W passes
  EXPECT_NE(svg.find(">W2</text>"), std::string::npos);
}

}  // namespace
}  // namespace mplan
