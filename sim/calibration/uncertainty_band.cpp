// Uncertainty band from validation residuals (docs/cost-model.md, "Uncertainty band"). With e =
// (p − m)/m the measured value is m = p/(1 + e): the residual quantiles map to a range of the
// measured value around a new prediction, assuming its error is drawn like the validation runs'.
#include "sim/calibration/uncertainty_band.hpp"

#include <algorithm>
#include <cmath>

#include "src/common/error.hpp"

namespace mplan::sim {

double quantile(std::vector<double> values, double q) {
  MPLAN_CHECK(!values.empty() && q >= 0 && q <= 1, "quantile of ", values.size(), " values at ", q);
  std::sort(values.begin(), values.end());
  const double pos = q * static_cast<double>(values.size() - 1);
  const size_t i = static_cast<size_t>(std::floor(pos));
  if (i + 1 >= values.size()) return values.back();
  const double t = pos - static_cast<double>(i);
  return values[i] + t * (values[i + 1] - values[i]);
}

std::string UncertaintyBand::basis() const {
  const std::string which =
      q_low == 0 && q_high == 1
          ? "min-max"
          : cat(std::llround(q_low * 100), "th-", std::llround(q_high * 100), "th percentile");
  return cat(in_sample ? "in-sample" : "out-of-sample", ", ", runs, " run", runs == 1 ? "" : "s",
             ", ", which);
}

UncertaintyBand prediction_band(const ClusterSpec& cluster, Implementation impl, bool memory) {
  UncertaintyBand b;
  b.implementation = to_string(impl);
  const Validation* v = cluster.validation_for(impl);
  const char* what = memory ? "memory" : "time";
  if (!v) {
    b.why_none =
        cat("the profile '", cluster.name, "' has no validation runs for ", b.implementation);
    return b;
  }
  const std::vector<double>& e = memory ? v->memory_errors : v->time_errors;
  if (e.empty()) {
    b.why_none =
        cat("the profile '", cluster.name, "' has no ", what, " residuals for ", b.implementation);
    return b;
  }
  b.available = true;
  b.source = v->source;
  b.in_sample = v->in_sample;
  b.runs = e.size();
  if (e.size() >= kMinRunsForQuantiles) b.q_low = kBandLow, b.q_high = kBandHigh;
  b.error_low = quantile(e, b.q_low);
  b.error_high = quantile(e, b.q_high);
  return b;
}

Json band_to_json(const UncertaintyBand& b, double predicted) {
  Json j;
  j["available"] = b.available;
  if (!b.available) {
    j["reason"] = b.why_none;
    return j;
  }
  j["implementation"] = b.implementation;
  j["source"] = b.source;
  j["in_sample"] = b.in_sample;
  j["runs"] = b.runs;
  j["quantiles"] = {b.q_low, b.q_high};
  j["relative_errors"] = {b.error_low, b.error_high};
  j["range"] = {b.low(predicted), b.high(predicted)};
  return j;
}

}  // namespace mplan::sim
