// AccuracyTable: Spearman's rank correlation in closed form (with ties), the summary's medians and
// worst errors, the fastest-plan check, run reports read and checked, a plan simulated against a
// synthetic report, and the three outputs.
#include "exec/calibrate/accuracy_table.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "src/common/error.hpp"
#include "tests/exec/data/data_test_util.hpp"

namespace mplan::exec::calibrate {
namespace {

TEST(AccuracyTable, SpearmanClosedForm) {
  // 1 - 6·Σd²/(n(n²-1)) with one swapped pair: 1 - 6·2/60 = 0.8.
  EXPECT_NEAR(*spearman({1, 2, 3, 4}, {1, 3, 2, 4}), 0.8, 1e-12);
  EXPECT_NEAR(*spearman({10, 20, 30}, {1, 2, 3}), 1.0, 1e-12);
  EXPECT_NEAR(*spearman({10, 20, 30}, {3, 2, 1}), -1.0, 1e-12);
  // Ties take their mean rank: ranks (1, 2.5, 2.5, 4) against (1, 2, 3, 4): 4.5 / sqrt(4.5 · 5).
  EXPECT_NEAR(*spearman({1, 2, 2, 3}, {1, 2, 3, 4}), 4.5 / std::sqrt(22.5), 1e-12);
  EXPECT_FALSE(spearman({1}, {2}));
  EXPECT_FALSE(spearman({1, 1, 1}, {1, 2, 3}));
}

AccuracyRow row(const char* name, double pred, double meas, int64_t pm, int64_t mm) {
  AccuracyRow r;
  r.name = name;
  r.predicted_s = pred;
  r.measured_s = meas;
  r.predicted_peak_bytes = pm;
  r.measured_peak_bytes = mm;
  return r;
}

TEST(AccuracyTable, SummaryMediansWorstAndFastest) {
  const std::vector<AccuracyRow> rows{row("a", 1.1, 1.0, 103, 100), row("b", 0.95, 1.0, 98, 100),
                                      row("c", 2.0, 2.5, 110, 100)};
  EXPECT_NEAR(rows[0].time_error(), 0.1, 1e-12);
  const AccuracySummary s = summarize(rows);
  EXPECT_EQ(s.plans, 3);
  EXPECT_NEAR(s.median_abs_time_error, 0.1, 1e-12);  // |+10 %|, |-5 %|, |-20 %|
  EXPECT_NEAR(s.worst_abs_time_error, 0.2, 1e-12);
  EXPECT_NEAR(s.mean_time_error, (0.1 - 0.05 - 0.2) / 3, 1e-12);
  EXPECT_NEAR(s.median_abs_memory_error, 0.03, 1e-12);
  EXPECT_NEAR(s.worst_abs_memory_error, 0.10, 1e-12);
  EXPECT_EQ(s.predicted_fastest, "b");
  EXPECT_EQ(s.measured_fastest, "a");  // a and b tie at 1.0: the first
  EXPECT_FALSE(s.fastest_agrees);
  ASSERT_TRUE(s.spearman);
  // Ranks: predicted (2, 1, 3), measured (1.5, 1.5, 3): 1.5 / sqrt(2 · 1.5).
  EXPECT_NEAR(*s.spearman, 1.5 / std::sqrt(3.0), 1e-12);

  const std::string md = accuracy_markdown("T", "its own cluster", rows, s);
  EXPECT_NE(md.find("| a |"), std::string::npos);
  EXPECT_NE(md.find("+10.0 %"), std::string::npos);
  EXPECT_NE(md.find("median \\|time error\\| | 10.0 %"), std::string::npos);
  const Json j = accuracy_json("T", "its own cluster", rows, s);
  EXPECT_EQ(j["rows"].size(), 3u);
  EXPECT_NEAR(j["summary"]["worst_abs_time_error"].get<double>(), 0.2, 1e-12);
  EXPECT_EQ(j["summary"]["fastest_agrees"], false);
  const std::string svg = accuracy_svg("T <1>", rows);
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("T &lt;1&gt;"), std::string::npos);
  EXPECT_EQ(svg.find("nan"), std::string::npos);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
}

std::string report_json(const std::string& plan, int tp, double median_ms, int64_t dev_peak) {
  return cat(R"({"schema_version": 2, "plan": ")", plan,
             R"(", "model": "tiny-gpt", "cluster": "cpu-test",
  "parallel": {"tp": )",
             tp, R"(, "pp": 1, "dp": 1, "micro_batch_size": 2, "global_batch_size": 8,
               "recompute": "none"},
  "summary": {"median_ms": )",
             median_ms, R"(},
  "memory": {"ranks": [{"rank": 0, "executor_peak_bytes": 1000, "device_peak_bytes": )",
             dev_peak, R"(}]}})");
}

TEST(AccuracyTable, RunReportReadAndItsPlanSimulated) {
  test::TempDir dir;
  const std::string plan = std::string(MPLAN_SOURCE_DIR) + "/configs/plans/tiny-gpt.json";
  const std::string path = dir / "run-tiny.json";
  std::ofstream(path) << report_json(plan, 1, 250.0, 5000);
  const RunReport r = read_run_report(path);
  EXPECT_EQ(r.name, "tiny");
  EXPECT_EQ(r.plan_path, plan);
  EXPECT_DOUBLE_EQ(r.measured_s, 0.25);
  EXPECT_EQ(r.measured_peak_bytes, 5000);
  const AccuracyRow row = predict_row(r, std::nullopt);
  EXPECT_GT(row.predicted_s, 0);
  EXPECT_GT(row.predicted_peak_bytes, 0);
  EXPECT_DOUBLE_EQ(row.measured_s, 0.25);
  EXPECT_NE(row.settings.find("tp 1"), std::string::npos);
  // Another cluster profile changes the prediction.
  const AccuracyRow other = predict_row(r, load_cluster("dgx-h200"));
  EXPECT_NE(other.predicted_s, row.predicted_s);

  // schema_version 1 kept the ranks' peaks as the "memory" array itself.
  std::ofstream(path) << cat(R"({"plan": ")", plan, R"(", "parallel": {"tp": 1},
    "summary": {"median_ms": 100}, "memory": [{"rank": 0, "device_peak_bytes": 7000}]})");
  EXPECT_EQ(read_run_report(path).measured_peak_bytes, 7000);
  // Without a device peak the executor's own peak counts.
  std::ofstream(path) << report_json(plan, 1, 250.0, -1);
  EXPECT_EQ(read_run_report(path).measured_peak_bytes, 1000);
}

TEST(AccuracyTable, BadReportsAreNamed) {
  test::TempDir dir;
  const std::string plan = std::string(MPLAN_SOURCE_DIR) + "/configs/plans/tiny-gpt.json";
  const std::string path = dir / "run-x.json";
  std::ofstream(path) << report_json(plan, 2, 250.0, 5000);  // the plan says tp 1
  try {
    predict_row(read_run_report(path), std::nullopt);
    FAIL() << "a changed plan must be refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("parallel.tp"), std::string::npos) << e.what();
  }
  std::ofstream(path) << report_json(dir / "missing.json", 1, 250.0, 5000);
  EXPECT_THROW(predict_row(read_run_report(path), std::nullopt), Error);
  std::ofstream(path) << R"({"plan": "p.json", "parallel": {}})";
  try {
    read_run_report(path);
    FAIL() << "a report without a summary must be refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path + ": summary"), std::string::npos) << e.what();
  }
  EXPECT_THROW(read_run_report(dir / "none.json"), Error);
}

}  // namespace
}  // namespace mplan::exec::calibrate
