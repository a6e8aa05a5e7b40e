// CalibrationProfile: a profile made from synthetic measurements: the measured fields replaced
// in the form the parser reads (sorted curves, shape tables, kinds), the rest of the base kept,
// the link curves kept when NCCL was skipped and derived net of α when measured, the sustained
// factor, the raw numbers under "calibration", implausible timings caught, the base preset found
// from the GPU's name.
#include "exec/calibrate/calibration_profile.hpp"

#include <gtest/gtest.h>

#include "src/common/embedded_configs.hpp"
#include "src/common/error.hpp"
#include "src/plan/cluster_spec.hpp"

namespace mplan::exec::calibrate {
namespace {

constexpr double kPeak = 989e12;  // dgx-h200's datasheet peak
constexpr double kHbm = 4800e9;

Json h200() { return parse_json(load_config_text("clusters", "dgx-h200", "base"), "dgx-h200"); }

// Milliseconds for `flops` at `eff` of the peak.
double ms_at(double flops, double eff) { return flops / (eff * kPeak) * 1e3; }

Measurements one_gpu() {
  Measurements m;
  m.env.gpu_name = "NVIDIA H200";
  m.env.date = "2026-11-25T00:00:00Z";
  m.env.host = "h";
  const GemmShape big{8192, 8192, 8192, "fwd", "square", false};   // 2^40 FLOPs
  const GemmShape small{1024, 1024, 1024, "dx", "square", false};  // 2^31 FLOPs
  m.gemms.push_back({big, ms_at(big.flops(), 0.75)});
  m.gemms.push_back({small, ms_at(small.flops(), 0.25)});
  const AttentionShape a{1, 16, 2048, 128};
  m.attention.push_back({a, ms_at(a.forward_flops(), 0.4), ms_at(a.backward_flops(), 0.3)});
  m.memory_bound.push_back({"copy", "x", 1e9, 1e9 / (0.8 * kHbm) * 1e3});
  m.memory_bound.push_back({"copy", "y", 1e7, 1e7 / (0.5 * kHbm) * 1e3});
  m.memory_bound.push_back({"layernorm_forward", "x", 1e9, 1e9 / (0.4 * kHbm) * 1e3});
  m.overhead = OverheadSample{3.0, 2.0, 4.0, 3.5, 4.5};
  m.nccl_skipped = "one rank";
  return m;
}

TEST(CalibrationProfile, MeasuredFieldsReplacedTheRestKept) {
  const Json base = h200();
  const Json p = build_profile(base, one_gpu(), {"h200-test", "dgx-h200", true});
  EXPECT_EQ(p["name"], "h200-test");
  const Json& g = p["gpu"];
  EXPECT_EQ(g["peak_bf16_tflops"], base["gpu"]["peak_bf16_tflops"]);
  EXPECT_EQ(g["memory_gib"], base["gpu"]["memory_gib"]);
  ASSERT_EQ(g["gemm_efficiency"].size(), 2u);  // sorted by FLOPs
  EXPECT_DOUBLE_EQ(g["gemm_efficiency"][0][0].get<double>(), 2147483648.0);
  EXPECT_DOUBLE_EQ(g["gemm_efficiency"][0][1].get<double>(), 0.25);
  EXPECT_DOUBLE_EQ(g["gemm_efficiency"][1][0].get<double>(), 1099511627776.0);
  EXPECT_DOUBLE_EQ(g["gemm_efficiency"][1][1].get<double>(), 0.75);
  EXPECT_EQ(g["gemm_shapes"][0], Json::parse(R"([8192, 8192, 8192, "fwd", 0.75])"));
  EXPECT_EQ(g["gemm_shapes"][1][3], "dx");
  EXPECT_EQ(g["attention_shapes"][0], Json::parse("[1, 16, 2048, 128, 0.4, 0.3]"));
  EXPECT_DOUBLE_EQ(g["attention_efficiency"][0][1].get<double>(), 0.4);
  EXPECT_DOUBLE_EQ(g["attention_backward_efficiency"][0][1].get<double>(), 0.3);
  EXPECT_EQ(g["memory_bound_kinds"]["copy"], Json::parse("[[1e7, 0.5], [1e9, 0.8]]"));
  EXPECT_EQ(g["memory_bound_kinds"]["layernorm_forward"], Json::parse("[[1e9, 0.4]]"));
  EXPECT_DOUBLE_EQ(g["memory_bound_efficiency"].get<double>(), 0.8);  // the largest copy
  EXPECT_DOUBLE_EQ(g["kernel_min_us"].get<double>(), 3.0);
  EXPECT_DOUBLE_EQ(g["kernel_overhead_us"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(g["host_overhead_us"].get<double>(), 4.0);
  EXPECT_FALSE(g.contains("overlap_slowdown"));  // not measured on one rank
  EXPECT_EQ(p["intra_node"], base["intra_node"]);
  EXPECT_EQ(p["inter_node"], base["inter_node"]);
  const Json& c = p["calibration"];
  EXPECT_EQ(c["gpu"], "NVIDIA H200");
  EXPECT_EQ(c["nccl_skipped"], "one rank");
  EXPECT_TRUE(c["nccl"].is_array());  // the timings; the library's version is nccl_version
  EXPECT_TRUE(c.contains("nccl_version"));
  ASSERT_EQ(c["gemm"].size(), 2u);
  EXPECT_NEAR(c["gemm"][0]["efficiency"].get<double>(), 0.75, 1e-12);
  EXPECT_NE(summary_table(p).find("skipped"), std::string::npos);
}

// A norm measured at the default width (4096) and at a model's (2048): the kind's curve is the
// default width's; memory_bound_widths has both. A kind at one width has no entry there.
TEST(CalibrationProfile, RowWiseKindsAtEveryWidthMeasured) {
  Measurements m = one_gpu();
  m.memory_bound.push_back({"rmsnorm_forward", "a", 1e8, 1e8 / (0.4 * kHbm) * 1e3, 4096});
  m.memory_bound.push_back({"rmsnorm_forward", "b", 1e8, 1e8 / (0.6 * kHbm) * 1e3, 2048});
  m.memory_bound.push_back({"rmsnorm_backward", "c", 1e8, 1e8 / (0.5 * kHbm) * 1e3, 4096});
  const Json p = build_profile(h200(), m, {"h200-test", "dgx-h200", true});
  const Json& g = p["gpu"];
  EXPECT_EQ(g["memory_bound_kinds"]["rmsnorm_forward"], Json::parse("[[1e8, 0.4]]"));
  EXPECT_EQ(g["memory_bound_widths"]["rmsnorm_forward"],
            Json::parse(R"({"2048": [[1e8, 0.6]], "4096": [[1e8, 0.4]]})"));
  EXPECT_FALSE(g["memory_bound_widths"].contains("rmsnorm_backward"));
  // The simulator reads both back, in increasing width.
  const mplan::ClusterSpec c = mplan::cluster_from_json(p, "profile");
  const auto& w = c.gpu.memory_bound_widths[static_cast<size_t>(mplan::MemKernel::kRmsNormForward)];
  ASSERT_EQ(w.size(), 2u);
  EXPECT_EQ(w[0].first, 2048);
  EXPECT_EQ(w[1].first, 4096);
}

TEST(CalibrationProfile, SustainedFactorScalesComputeUnlessAsked) {
  Measurements m = one_gpu();
  m.sustained = SustainedSample{{8192, 8192, 8192, "fwd", "square", false}, {800, 780, 760}};
  EXPECT_DOUBLE_EQ(sustained_factor(m), 0.95);
  const Json p = build_profile(h200(), m, {"", "dgx-h200", true});
  EXPECT_EQ(p["name"], "dgx-h200");
  EXPECT_NEAR(p["gpu"]["gemm_efficiency"][1][1].get<double>(), 0.75 * 0.95, 1e-4);
  EXPECT_NEAR(p["gpu"]["attention_efficiency"][0][1].get<double>(), 0.4 * 0.95, 1e-4);
  const Json q = build_profile(h200(), m, {"", "dgx-h200", false});
  EXPECT_NEAR(q["gpu"]["gemm_efficiency"][1][1].get<double>(), 0.75, 1e-4);
  // The last second's rate is the power-limited GEMM rate the simulator slows large GEMMs toward.
  const double peak = h200()["gpu"]["peak_bf16_tflops"].get<double>();
  EXPECT_NEAR(p["gpu"]["sustained_gemm_efficiency"].get<double>(), 760 / peak, 1e-4);
  EXPECT_EQ(mplan::cluster_from_json(p, "p").gpu.sustained_gemm_efficiency,
            p["gpu"]["sustained_gemm_efficiency"].get<double>());
  m.sustained =
      SustainedSample{{8192, 8192, 8192, "fwd", "square", false}, {700, 720}};  // never above 1
  EXPECT_DOUBLE_EQ(sustained_factor(m), 1.0);
}

TEST(CalibrationProfile, LinkCurvesNetOfLatencyFromNccl) {
  Measurements m = one_gpu();
  m.nccl_skipped.clear();
  m.env.ranks = 2;
  const double MiB = 1 << 20, alpha = 10e-6;
  // t = α + S·f/B with f = 1 (all-reduce of 2) and B = 100 GB/s.
  m.collectives.push_back({Collective::kAllReduce, 2, 8, alpha});
  m.collectives.push_back({Collective::kAllReduce, 2, MiB, alpha + MiB / 100e9});
  m.collectives.push_back({Collective::kAllGather, 2, MiB, alpha + 0.5 * MiB / 80e9});
  m.collectives.push_back({Collective::kReduceScatter, 2, MiB, alpha + 0.5 * MiB / 120e9});
  m.collectives.push_back({Collective::kAllToAll, 2, MiB, alpha + 0.5 * MiB / 50e9});
  m.collectives.push_back({Collective::kSendRecv, 2, MiB, alpha + MiB / 150e9});
  m.overlap = OverlapSample{{8192, 8192, 8192, "fwd", "square", false}, 256 * MiB, 1.0, 1.1};
  const Json p = build_profile(h200(), m, {"", "dgx-h200", true});
  const Json& l = p["intra_node"];
  EXPECT_DOUBLE_EQ(l["latency_us"].get<double>(), 10);
  EXPECT_EQ(l["allreduce_busbw_gbps"], Json::parse("[[1048576, 100.0]]"));
  EXPECT_EQ(l["allgather_busbw_gbps"], Json::parse("[[1048576, 100.0]]"));  // median of 80, 120
  EXPECT_EQ(l["alltoall_busbw_gbps"], Json::parse("[[1048576, 50.0]]"));
  EXPECT_EQ(l["p2p_gbps"], Json::parse("[[1048576, 150.0]]"));
  // 10 % slower beside the all-reduce: the simulator's fraction added over the overlap.
  EXPECT_NEAR(p["gpu"]["overlap_slowdown"].get<double>(), 0.1, 1e-12);
  EXPECT_EQ(p["inter_node"], h200()["inter_node"]);
  ASSERT_EQ(p["calibration"]["nccl"].size(), 6u);
  EXPECT_NEAR(p["calibration"]["nccl"][0]["busbw_gbps"].get<double>(), 8 / alpha / 1e9, 1e-12);
  EXPECT_NE(summary_table(p).find("all_reduce busbw"), std::string::npos);
}

TEST(CalibrationProfile, RefusesWhatCannotBeMade) {
  Measurements m = one_gpu();
  Json base = h200();
  base["gpu"].erase("hbm_bandwidth_gbps");
  EXPECT_THROW(build_profile(base, m, {}), Error);
  m.gemms.clear();
  EXPECT_THROW(build_profile(h200(), m, {}), Error);
}

TEST(CalibrationProfile, ImplausibleMeasurementsAreNamed) {
  Measurements m = one_gpu();
  EXPECT_TRUE(implausible_measurements(m, 989, 4800).empty());
  m.gemms[0].ms /= 2;  // 1.5 x the peak
  m.memory_bound[0].ms = 0;
  const std::vector<std::string> bad = implausible_measurements(m, 989, 4800);
  ASSERT_EQ(bad.size(), 2u);
  EXPECT_NE(bad[0].find("m8192 n8192 k8192"), std::string::npos);
  EXPECT_NE(bad[1].find("copy"), std::string::npos);
}

TEST(CalibrationProfile, BasePresetFromTheGpuName) {
  EXPECT_EQ(base_preset_for_gpu("NVIDIA H200"), "dgx-h200");
  EXPECT_EQ(base_preset_for_gpu("NVIDIA H100 80GB HBM3"), "dgx-h100");
  EXPECT_EQ(base_preset_for_gpu("NVIDIA A100-SXM4-80GB"), "dgx-a100-80g");
  EXPECT_THROW(base_preset_for_gpu("Some Other GPU"), Error);
}

}  // namespace
}  // namespace mplan::exec::calibrate
