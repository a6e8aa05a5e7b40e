// Published Megatron-LM training runs (Narayanan et al., SC'21, Table 1; Korthikanti et al.,
// MLSys'23, Tables 3 and 5) turned into plans and simulated with a hardware profile, to compare
// predicted with published iteration times. What a paper leaves out is filled by fixed rules
// (published_runs.cpp, docs/cost-model.md), the same for every run: nothing is tuned per run.
// Invariant: a run's plan passes validate(); its published time is the paper's (or derived with
// the paper's own FLOPs formula, as the record states).
#pragma once

#include <string>
#include <vector>

#include "sim/plan_sim/simulate.hpp"
#include "src/common/json_reader.hpp"
#include "src/plan/plan.hpp"

namespace mplan::sim {

struct PublishedRun {
  std::string id;
  std::string source;           // "narayanan_sc21 Table 1 (weak scaling), Section 5.1"
  Plan plan;                    // the run as mplan simulates it
  double published_time_s = 0;  // measured, or derived from the published TFLOP/s
  std::string filled;           // which rules filled unpublished fields
};

// Reads the records of `doc` (the schema of sim/calibration/published_calibration.json) into
// plans on `cluster`. Throws mplan::Error naming the record for a field it cannot read.
std::vector<PublishedRun> published_runs(const Json& doc, const ClusterSpec& cluster);

struct CalibrationRow {
  std::string id;
  double published_s = 0;
  double predicted_s = 0;
  double error = 0;  // (predicted - published) / published
  SimulationResult result;
};

// Simulates every run (with Megatron's defaults: dropout, fused kernels).
std::vector<CalibrationRow> simulate_published(const std::vector<PublishedRun>& runs);

// Median of |error| over `rows` (0 for none).
double median_abs_error(const std::vector<CalibrationRow>& rows);

}  // namespace mplan::sim
