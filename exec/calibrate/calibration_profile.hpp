// CalibrationProfile: the measurements of one `mplan calibrate` run (plain data, filled by the
// GPU code in cuda/ or by a test) and the cluster profile made from them: the base profile with
// the measured fields replaced and every raw measurement under a top-level "calibration" object.
// Invariant: only measured fields change; a part that was not measured (NCCL on one rank, the
// overlap slowdown) keeps the base profile's values, and the "calibration" object says so.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "exec/calibrate/calibration_fit.hpp"
#include "exec/calibrate/calibration_shapes.hpp"
#include "src/common/json_reader.hpp"

namespace mplan::exec::calibrate {

struct Environment {
  std::string date;          // UTC, ISO 8601
  std::string gpu_name;      // cudaDeviceProp::name
  std::string driver;        // the kernel driver's version ("unknown" when unreadable)
  std::string cuda_runtime;  // "12.4"
  std::string cuda_driver;   // the CUDA version the driver supports
  std::string nccl;          // "2.21.5" (empty without a NCCL part)
  std::string host;
  int ranks = 1;
  bool quick = false;
  double heat_ms = 0;  // CalibrationSettings::heat_ms
  std::vector<std::string> models;
};

struct GemmSample {
  GemmShape shape;
  double ms = 0;  // median of the repeats
};
struct AttentionSample {
  AttentionShape shape;
  double fwd_ms = 0, bwd_ms = 0;
};
inline constexpr int64_t kDefaultMemoryWidth = 4096;  // the row width of every kind's curve
struct MemoryBoundSample {
  std::string kind;   // a memory_bound_kinds key: "copy", "layernorm_forward", ...
  std::string shape;  // e.g. "8192x4096"
  double bytes = 0;   // fewest bytes the kernel must move
  double ms = 0;
  int64_t width = 0;  // the row width of a row-wise kind (the norms; 0: any other kind)
};
struct OverheadSample {
  double kernel_min_us = 0;       // one tiny kernel alone between two events
  double kernel_overhead_us = 0;  // per tiny kernel, issued back to back (stream throughput)
  double host_overhead_us = 0;    // host time to issue one op (median of tiny kernel, GEMM)
  double host_kernel_us = 0;      // host time to issue one tiny kernel
  double host_gemm_us = 0;        // host time to issue one cached cuBLASLt GEMM
};
struct SustainedSample {
  GemmShape shape;
  std::vector<double> tflops_per_second;  // achieved rate in each second of the run
  double first_tflops() const { return tflops_per_second.empty() ? 0 : tflops_per_second.front(); }
  double last_tflops() const { return tflops_per_second.empty() ? 0 : tflops_per_second.back(); }
};
struct CollectiveSample {
  Collective op = Collective::kAllReduce;
  int ranks = 2;
  double bytes = 0;    // nccl-tests' size S
  double seconds = 0;  // median time per call, the slowest rank's
};
struct OverlapSample {
  GemmShape shape;
  double bytes = 0;              // of each all-reduce beside it
  double gemm_alone_ms = 0;      // median
  double gemm_with_comm_ms = 0;  // median while all-reduces run on another stream
};

struct Measurements {
  Environment env;
  std::vector<GemmSample> gemms;
  std::vector<AttentionSample> attention;
  std::vector<MemoryBoundSample> memory_bound;
  std::optional<OverheadSample> overhead;
  std::optional<SustainedSample> sustained;
  std::vector<CollectiveSample> collectives;  // empty with one rank
  std::optional<OverlapSample> overlap;       // only with 2+ ranks
  std::string nccl_skipped;                   // why the NCCL part did not run ("" when it did)
};

struct ProfileOptions {
  std::string name;             // the profile's "name" ("": the base's)
  std::string base_ref;         // what --base named, recorded
  bool sustained_scale = true;  // scale compute efficiencies by the sustained clock ratio
};

// The sustained-load factor applied to compute efficiencies: last second's rate over the first's,
// at most 1 (1 when not measured).
double sustained_factor(const Measurements& m);

// The raw measurements as the "calibration" object.
Json calibration_json(const Measurements& m, double peak_tflops, double hbm_gbps);

// The profile: `base` (a cluster JSON object) with the measured fields replaced. Throws Error
// when the base lacks gpu.peak_bf16_tflops or gpu.hbm_bandwidth_gbps, or when nothing was
// measured for a curve the profile needs (GEMMs).
Json build_profile(const Json& base, const Measurements& m, const ProfileOptions& o);

// Measurements no working timer can produce (a GEMM or attention call above the datasheet peak,
// a memory-bound kernel above 3 × the HBM bandwidth, a bus bandwidth above 2000 GB/s, a time that
// is not positive), one line each; empty when all are plausible.
std::vector<std::string> implausible_measurements(const Measurements& m, double peak_tflops,
                                                  double hbm_gbps);

// The short table `mplan calibrate` prints.
std::string summary_table(const Json& profile);

// The cluster preset whose gpu.name matches the device's name (exactly, or as a prefix:
// "NVIDIA H100 80GB HBM3" matches "NVIDIA H100"), dgx-* presets first. Throws Error naming
// --base when none does.
std::string base_preset_for_gpu(const std::string& gpu_name);

}  // namespace mplan::exec::calibrate
