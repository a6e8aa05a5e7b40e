// CalibrationFit: the arithmetic that turns timings into profile curves, with no GPU in sight so
// that it is tested on synthetic numbers: medians, curves binned in log2 of their x (as
// scripts/calibrate/derive_profile.py bins GEMMs), nccl-tests' bus bandwidth, and the bandwidth
// term net of the latency α that the simulator's t = α + S·f(n)/B(S) needs (docs/cost-model.md).
// Invariant: every curve returned is sorted by x with one point per x and finite y.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace mplan::exec::calibrate {

struct CurveSample {
  double x = 0;
  double y = 0;
};

// Median of v (the mean of the two middle values when the count is even); 0 for an empty v.
double median(std::vector<double> v);

// One point per bin round(log2 x): x = 2^bin, y = the median y of its samples; sorted by x.
// Samples with x <= 0 or a non-finite y are ignored.
std::vector<CurveSample> binned_median_curve(const std::vector<CurveSample>& samples);

// One point per distinct x (the median y of its samples), sorted by x.
std::vector<CurveSample> median_by_x(const std::vector<CurveSample>& samples);

// The collectives of nccl-tests (doc/PERFORMANCE.md) and their bus factor f(n): all-reduce
// 2(n-1)/n; all-gather, reduce-scatter, all-to-all (n-1)/n; send/recv 1.
enum class Collective { kAllReduce, kAllGather, kReduceScatter, kAllToAll, kSendRecv };
const char* to_string(Collective c);  // "all_reduce", "all_gather", ...
double bus_factor(Collective c, int ranks);

// nccl-tests' algbw = S / t and busbw = algbw · f(n), in GB/s (10^9 B/s).
double algbw_gbps(double bytes, double seconds);
double busbw_gbps(Collective c, int ranks, double bytes, double seconds);

// B(S) = S·f(n) / (t − α) in GB/s: the bandwidth that makes α + S·f(n)/B(S) equal the measured
// time t. Empty when t does not exceed α by at least 5 % (the point carries no bandwidth).
std::optional<double> net_bandwidth_gbps(Collective c, int ranks, double bytes, double seconds,
                                         double alpha_seconds);

}  // namespace mplan::exec::calibrate
