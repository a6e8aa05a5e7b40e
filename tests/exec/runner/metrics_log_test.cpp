// MetricsLog: one JSON object per iteration and per evaluation in metrics.jsonl, appended across
// runs (a resumed run adds to the file), and curves.svg redrawn from the whole file: a polyline
// per curve, evaluations as dots, a legend.
#include "exec/runner/metrics_log.hpp"

#include <gtest/gtest.h>

#include "src/common/json_reader.hpp"
#include "tests/exec/data/data_test_util.hpp"

namespace mplan::exec {
namespace {

TEST(MetricsLog, JsonLinesAppendedAndTheCurvesDrawn) {
  test::TempDir dir;
  const std::string tb = dir / "tb";
  {
    MetricsLog m(tb);
    m.iteration({1, 8, 5.5, 1e-4, 1.5, 20.0, 1000.0, 8});
    m.iteration({2, 16, 5.0, 2e-4, 1.2, 21.0, 990.0, 8});
    m.evaluation(2, "valid", 4.9);
  }
  {
    MetricsLog m(tb);  // a resumed run
    m.iteration({3, 24, 4.5, 3e-4, 1.0, 19.0, 1010.0, 8});
    m.evaluation(3, "test", 4.4);
    m.write_plot();
  }
  std::vector<Json> lines;
  std::istringstream in(test::slurp(tb + "/metrics.jsonl"));
  for (std::string l; std::getline(in, l);) lines.push_back(Json::parse(l));
  ASSERT_EQ(lines.size(), 5u);
  EXPECT_EQ(lines[0]["iteration"], 1);
  EXPECT_EQ(lines[0]["lm_loss"], 5.5);
  EXPECT_EQ(lines[1]["learning_rate"], 2e-4);
  EXPECT_EQ(lines[2]["split"], "valid");
  EXPECT_NEAR(lines[2]["lm_loss_ppl"].get<double>(), std::exp(4.9), 1e-9);
  EXPECT_EQ(lines[3]["consumed_samples"], 24);
  const std::string svg = test::slurp(tb + "/curves.svg");
  EXPECT_EQ(svg.rfind("<svg ", 0), 0u);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  EXPECT_NE(svg.find(">training loss</text>"), std::string::npos);
  EXPECT_NE(svg.find(">validation loss</text>"), std::string::npos);
  EXPECT_NE(svg.find(">test loss</text>"), std::string::npos);
  EXPECT_NE(svg.find(">learning rate</text>"), std::string::npos);
  // Two polylines (training loss, learning rate) of three points; two evaluation dots.
  size_t polylines = 0, circles = 0;
  for (size_t at = svg.find("<polyline"); at != std::string::npos;
       at = svg.find("<polyline", at + 1))
    ++polylines;
  for (size_t at = svg.find("<circle"); at != std::string::npos; at = svg.find("<circle", at + 1))
    ++circles;
  EXPECT_EQ(polylines, 2u);
  EXPECT_EQ(circles, 2u);
}

TEST(MetricsLog, AnUnwritableDirectoryIsAnError) {
  test::TempDir dir;
  test::write_file(dir / "file", "x");
  EXPECT_NE(test::error_of([&] { MetricsLog m(dir / "file"); }).find("--tensorboard-dir"),
            std::string::npos);
}

TEST(MetricsLog, EmptyCurvesStillDraw) {
  const std::string svg = render_curves_svg({Curve{"loss", "#000", {}, false}}, {});
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
}

}  // namespace
}  // namespace mplan::exec
