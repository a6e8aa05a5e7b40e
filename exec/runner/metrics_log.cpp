// MetricsLog: JSON lines and the SVG of the curves (axes with five ticks, polylines).
#include "exec/runner/metrics_log.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <sstream>

#include "src/common/error.hpp"
#include "src/common/json_reader.hpp"

namespace mplan::exec {

namespace {

constexpr const char* kMetricsFile = "metrics.jsonl";
constexpr const char* kPlotFile = "curves.svg";

std::string num(double v, const char* format = "%.4g") {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

}  // namespace

MetricsLog::MetricsLog(std::string dir) : dir_(std::move(dir)) {
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  const std::string path = dir_ + "/" + kMetricsFile;
  out_.open(path, std::ios::app);
  if (ec || !out_) throw Error(cat("--tensorboard-dir: cannot write ", path));
}

void MetricsLog::iteration(const IterationMetrics& m) {
  Json j = {{"iteration", m.iteration},
            {"consumed_samples", m.consumed_samples},
            {"lm_loss", m.lm_loss},
            {"learning_rate", m.learning_rate},
            {"grad_norm", m.grad_norm},
            {"iteration_time_ms", m.iteration_ms},
            {"tokens_per_s_per_gpu", m.tokens_per_s_per_gpu},
            {"global_batch_size", m.global_batch_size}};
  out_ << j.dump() << "\n" << std::flush;
}

void MetricsLog::evaluation(int64_t iteration, const std::string& split, double loss) {
  Json j = {{"iteration", iteration},
            {"split", split},
            {"lm_loss", loss},
            {"lm_loss_ppl", std::exp(std::min(20.0, loss))}};
  out_ << j.dump() << "\n" << std::flush;
}

void MetricsLog::write_plot() {
  std::ifstream in(dir_ + "/" + kMetricsFile);
  Curve train{"training loss", "#1f77b4", {}, false};
  Curve valid{"validation loss", "#d62728", {}, true};
  Curve test{"test loss", "#2ca02c", {}, true};
  Curve lr{"learning rate", "#9467bd", {}, false};
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    Json j;
    try {
      j = Json::parse(line);
    } catch (const std::exception&) {
      continue;  // a line cut by a kill
    }
    const auto x = static_cast<double>(j.value("iteration", int64_t{0}));
    if (j.contains("split")) {
      (j["split"] == "test" ? test : valid).points.emplace_back(x, j.value("lm_loss", 0.0));
    } else {
      train.points.emplace_back(x, j.value("lm_loss", 0.0));
      lr.points.emplace_back(x, j.value("learning_rate", 0.0));
    }
  }
  std::vector<Curve> loss{train};
  if (!valid.points.empty()) loss.push_back(valid);
  if (!test.points.empty()) loss.push_back(test);
  const std::string path = dir_ + "/" + kPlotFile;
  std::ofstream svg(path);
  svg << render_curves_svg(loss, {lr});
  if (!svg) throw Error(cat("--tensorboard-dir: cannot write ", path));
}

std::string render_curves_svg(const std::vector<Curve>& loss, const std::vector<Curve>& lr) {
  constexpr double kW = 820, kLeft = 80, kRight = 160, kTop = 30, kPanel = 240, kGap = 60;
  const double plot_w = kW - kLeft - kRight;
  const double height = kTop + 2 * kPanel + kGap + 40;
  double x0 = std::numeric_limits<double>::max(), x1 = std::numeric_limits<double>::lowest();
  for (const auto* group : {&loss, &lr})
    for (const Curve& c : *group)
      for (const auto& [x, y] : c.points) x0 = std::min(x0, x), x1 = std::max(x1, x);
  if (x0 > x1) x0 = 0, x1 = 1;
  if (x1 == x0) x1 = x0 + 1;
  std::ostringstream os;
  os << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << kW << "\" height=\"" << height
     << "\" font-family=\"sans-serif\" font-size=\"12\">\n"
     << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  auto panel = [&](const std::vector<Curve>& curves, double top, const char* title,
                   const char* yfmt) {
    double y0 = std::numeric_limits<double>::max(), y1 = std::numeric_limits<double>::lowest();
    for (const Curve& c : curves)
      for (const auto& [x, y] : c.points)
        if (std::isfinite(y)) y0 = std::min(y0, y), y1 = std::max(y1, y);
    if (y0 > y1) y0 = 0, y1 = 1;
    if (y1 == y0)
      y0 -= 0.5 * std::max(1e-12, std::abs(y0)), y1 += 0.5 * std::max(1e-12, std::abs(y1));
    const double pad = 0.05 * (y1 - y0);
    y0 -= pad, y1 += pad;
    auto px = [&](double x) { return kLeft + (x - x0) / (x1 - x0) * plot_w; };
    auto py = [&](double y) { return top + kPanel - (y - y0) / (y1 - y0) * kPanel; };
    os << "<text x=\"" << kLeft << "\" y=\"" << top - 8 << "\" font-weight=\"bold\">" << title
       << "</text>\n";
    os << "<rect x=\"" << kLeft << "\" y=\"" << top << "\" width=\"" << plot_w << "\" height=\""
       << kPanel << "\" fill=\"none\" stroke=\"#888\"/>\n";
    for (int k = 0; k <= 4; ++k) {
      const double xv = x0 + (x1 - x0) * k / 4, yv = y0 + (y1 - y0) * k / 4;
      os << "<line x1=\"" << px(xv) << "\" y1=\"" << top << "\" x2=\"" << px(xv) << "\" y2=\""
         << top + kPanel << "\" stroke=\"#eee\"/>\n"
         << "<text x=\"" << px(xv) << "\" y=\"" << top + kPanel + 15 << "\" text-anchor=\"middle\">"
         << num(xv, "%.0f") << "</text>\n"
         << "<line x1=\"" << kLeft << "\" y1=\"" << py(yv) << "\" x2=\"" << kLeft + plot_w
         << "\" y2=\"" << py(yv) << "\" stroke=\"#eee\"/>\n"
         << "<text x=\"" << kLeft - 6 << "\" y=\"" << py(yv) + 4 << "\" text-anchor=\"end\">"
         << num(yv, yfmt) << "</text>\n";
    }
    double legend_y = top + 14;
    for (const Curve& c : curves) {
      if (c.markers) {
        for (const auto& [x, y] : c.points)
          if (std::isfinite(y))
            os << "<circle cx=\"" << px(x) << "\" cy=\"" << py(y) << "\" r=\"3\" fill=\"" << c.color
               << "\"/>\n";
      } else {
        os << "<polyline fill=\"none\" stroke=\"" << c.color << "\" stroke-width=\"1.2\" points=\"";
        for (const auto& [x, y] : c.points)
          if (std::isfinite(y)) os << px(x) << "," << py(y) << " ";
        os << "\"/>\n";
      }
      os << "<rect x=\"" << kLeft + plot_w + 12 << "\" y=\"" << legend_y - 9
         << "\" width=\"10\" height=\"10\" fill=\"" << c.color << "\"/>\n"
         << "<text x=\"" << kLeft + plot_w + 28 << "\" y=\"" << legend_y << "\">" << c.label
         << "</text>\n";
      legend_y += 18;
    }
  };
  panel(loss, kTop, "lm loss", "%.3f");
  panel(lr, kTop + kPanel + kGap, "learning rate", "%.2e");
  os << "<text x=\"" << kLeft + plot_w / 2 << "\" y=\"" << height - 6
     << "\" text-anchor=\"middle\">iteration</text>\n</svg>\n";
  return os.str();
}

}  // namespace mplan::exec
