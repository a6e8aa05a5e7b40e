// Medians, log2-binned curves and nccl-tests' bandwidth definitions for `mplan calibrate`.
#include "exec/calibrate/calibration_fit.hpp"

#include <algorithm>
#include <cmath>
#include <map>

namespace mplan::exec::calibrate {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::vector<CurveSample> binned_median_curve(const std::vector<CurveSample>& samples) {
  std::map<int, std::vector<double>> bins;
  for (const CurveSample& s : samples)
    if (s.x > 0 && std::isfinite(s.x) && std::isfinite(s.y))
      bins[static_cast<int>(std::lround(std::log2(s.x)))].push_back(s.y);
  std::vector<CurveSample> out;
  for (auto& [b, ys] : bins) out.push_back({std::ldexp(1.0, b), median(ys)});
  return out;
}

std::vector<CurveSample> median_by_x(const std::vector<CurveSample>& samples) {
  std::map<double, std::vector<double>> by_x;
  for (const CurveSample& s : samples)
    if (std::isfinite(s.x) && std::isfinite(s.y)) by_x[s.x].push_back(s.y);
  std::vector<CurveSample> out;
  for (auto& [x, ys] : by_x) out.push_back({x, median(ys)});
  return out;
}

const char* to_string(Collective c) {
  switch (c) {
    case Collective::kAllReduce:
      return "all_reduce";
    case Collective::kAllGather:
      return "all_gather";
    case Collective::kReduceScatter:
      return "reduce_scatter";
    case Collective::kAllToAll:
      return "all_to_all";
    case Collective::kSendRecv:
      return "send_recv";
  }
  return "?";
}

double bus_factor(Collective c, int ranks) {
  const double n = ranks;
  switch (c) {
    case Collective::kAllReduce:
      return 2.0 * (n - 1) / n;
    case Collective::kAllGather:
    case Collective::kReduceScatter:
    case Collective::kAllToAll:
      return (n - 1) / n;
    case Collective::kSendRecv:
      return 1.0;
  }
  return 1.0;
}

double algbw_gbps(double bytes, double seconds) {
  return seconds > 0 ? bytes / seconds / 1e9 : 0.0;
}

double busbw_gbps(Collective c, int ranks, double bytes, double seconds) {
  return algbw_gbps(bytes, seconds) * bus_factor(c, ranks);
}

std::optional<double> net_bandwidth_gbps(Collective c, int ranks, double bytes, double seconds,
                                         double alpha_seconds) {
  const double wire = seconds - alpha_seconds;
  if (!(wire > 0.05 * seconds) || bytes <= 0) return std::nullopt;
  return bytes * bus_factor(c, ranks) / wire / 1e9;
}

}  // namespace mplan::exec::calibrate
