// AccuracyTable: predicted against measured. Reads the run reports `mplan run --json` writes,
// simulates each one's plan (optionally on another cluster profile), and summarizes: per-plan
// errors of iteration time and per-rank peak memory, median and worst |error|, the Spearman rank
// correlation of the times, and whether the predicted-fastest plan was the measured-fastest;
// written as Markdown, JSON and a scatter SVG. Invariant: error = predicted / measured − 1, so a
// negative error is a prediction that is too fast (or too small).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "src/common/json_reader.hpp"
#include "src/plan/cluster_spec.hpp"

namespace mplan::exec::calibrate {

// What accuracy needs of one run report (schema_version 2 of `mplan run --json`).
struct RunReport {
  std::string path;       // the report file
  std::string name;       // its base name without "run-" and ".json"
  std::string plan_path;  // "plan": the plan file the run read
  std::string model, cluster;
  Json parallel;                    // "parallel" as the run recorded it
  double measured_s = 0;            // summary.median_ms / 1000
  int64_t measured_peak_bytes = 0;  // max over ranks of the device peak (executor peak if none)
};

// Reads and checks one run report; errors (mplan::Error) name the file and the field.
RunReport read_run_report(const std::string& path);

struct AccuracyRow {
  std::string name;
  std::string plan;      // plan path as found
  std::string settings;  // "tp 1 pp 1 dp 1 mbs 2 recompute none"
  double predicted_s = 0, measured_s = 0;
  int64_t predicted_peak_bytes = 0, measured_peak_bytes = 0;
  double time_error() const { return predicted_s / measured_s - 1.0; }
  double memory_error() const {
    return static_cast<double>(predicted_peak_bytes) / static_cast<double>(measured_peak_bytes) -
           1.0;
  }
};

// Loads the report's plan (the path as written, else relative to the report's folder), checks
// that its parallel settings are the run's, replaces its cluster by `cluster` when given, and
// simulates it as `mplan run` predicts (no dropout).
AccuracyRow predict_row(const RunReport& r, const std::optional<ClusterSpec>& cluster);

struct AccuracySummary {
  int plans = 0;
  double median_abs_time_error = 0, worst_abs_time_error = 0, mean_time_error = 0;
  double median_abs_memory_error = 0, worst_abs_memory_error = 0;
  std::optional<double> spearman;  // of predicted and measured times; none below 2 plans
  std::string predicted_fastest, measured_fastest;
  bool fastest_agrees = false;
};

// Spearman's rank correlation: Pearson's correlation of the ranks, ties taking the mean of their
// ranks. Empty when fewer than two values or when one side has no spread.
std::optional<double> spearman(const std::vector<double>& a, const std::vector<double>& b);

AccuracySummary summarize(const std::vector<AccuracyRow>& rows);

std::string accuracy_markdown(const std::string& title, const std::string& cluster_note,
                              const std::vector<AccuracyRow>& rows, const AccuracySummary& s);
Json accuracy_json(const std::string& title, const std::string& cluster_note,
                   const std::vector<AccuracyRow>& rows, const AccuracySummary& s);
// Predicted against measured iteration time, log-log, with the y = x line and ±5 % lines.
std::string accuracy_svg(const std::string& title, const std::vector<AccuracyRow>& rows);

}  // namespace mplan::exec::calibrate
