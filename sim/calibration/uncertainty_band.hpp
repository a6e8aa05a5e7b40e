// Uncertainty band of a prediction, from the hardware profile's validation residuals for the
// implementation the plan is predicted for: the range the measured value fell in for most
// validation runs, as a range around the point estimate. Invariant: no residuals, no band — a
// band is never invented; a band from residuals the profile was fitted to says "in-sample".
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "src/common/json_reader.hpp"
#include "src/plan/cluster_spec.hpp"

namespace mplan::sim {

// The q-quantile (0 <= q <= 1) of `values`, linear between order statistics (type 7 of Hyndman
// and Fan, 1996, what numpy.quantile does by default). Requires a non-empty `values`.
double quantile(std::vector<double> values, double q);

// Relative residuals below kMinRunsForQuantiles: the band spans their min and max; from there
// the kBandLow and kBandHigh quantiles.
inline constexpr size_t kMinRunsForQuantiles = 10;
inline constexpr double kBandLow = 0.1;
inline constexpr double kBandHigh = 0.9;

struct UncertaintyBand {
  bool available = false;
  std::string implementation;  // the set it came from ("megatron-te", ...)
  std::string source;          // where the validation runs are reported
  bool in_sample = false;      // the profile was fitted to those runs
  size_t runs = 0;
  double q_low = 0, q_high = 1;  // the quantiles used (0 and 1: min and max)
  // Residual quantiles e = (predicted − measured) / measured: e_low <= e_high.
  double error_low = 0, error_high = 0;
  std::string why_none;  // when !available: why
  // The band of the measured value for a prediction `p`: [p / (1 + e_high), p / (1 + e_low)].
  double low(double predicted) const { return predicted / (1 + error_high); }
  double high(double predicted) const { return predicted / (1 + error_low); }
  // "in-sample, 18 runs, 10th-90th percentile" / "out-of-sample, 6 runs, min-max".
  std::string basis() const;
};

// The band for iteration time (`memory` false) or per-GPU peak memory (true) of a plan run by
// `impl` on `cluster`.
UncertaintyBand prediction_band(const ClusterSpec& cluster, Implementation impl, bool memory);

// {"available": true, "implementation", "source", "in_sample", "runs", "quantiles": [lo, hi],
// "relative_errors": [e_lo, e_hi], "range": [low(p), high(p)]} or {"available": false,
// "reason"}.
Json band_to_json(const UncertaintyBand& b, double predicted);

}  // namespace mplan::sim
