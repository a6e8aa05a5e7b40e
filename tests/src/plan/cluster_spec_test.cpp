// Tests of ClusterSpec: every cluster preset loads with the numbers its sources cite, curves
// interpolate in log2(x) and clamp, and malformed clusters are errors naming the field.
#include "src/plan/cluster_spec.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <set>

#include "src/common/embedded_configs.hpp"
#include "src/common/error.hpp"
#include "src/common/units.hpp"

namespace mplan {
namespace {

using ::testing::StartsWith;

TEST(ClusterSpec, PresetsCarryTheirCitedNumbers) {
  // DGX A100 80GB (Selene): 8 GPUs and 8 HDR NICs per node; A100 datasheet: 312 TFLOPS dense
  // BF16, 2039 GB/s, 80 GiB.
  ClusterSpec a = load_cluster("dgx-a100-80g");
  EXPECT_EQ(a.gpus_per_node, 8);
  EXPECT_EQ(a.nics(), 8);
  EXPECT_EQ(a.gpu.peak_bf16_tflops, 312);
  EXPECT_EQ(a.gpu.hbm_bandwidth_gbps, 2039);
  EXPECT_EQ(a.gpu.memory_gib, 80);
  EXPECT_TRUE(a.has_inter_node());
  // DGX H100: H100 SXM5 989 TFLOPS dense BF16, 3.35 TB/s, 81559 MiB = 79.6 GiB.
  ClusterSpec h = load_cluster("dgx-h100");
  EXPECT_EQ(h.gpus_per_node, 8);
  EXPECT_EQ(h.gpu.peak_bf16_tflops, 989);
  EXPECT_EQ(h.gpu.hbm_bandwidth_gbps, 3350);
  EXPECT_NEAR(h.gpu.memory_gib, 81559.0 / 1024, 0.05);
  // DGX H200: 989 TFLOPS, 4.8 TB/s, 143771 MiB = 140.4 GiB.
  ClusterSpec g = load_cluster("dgx-h200");
  EXPECT_EQ(g.gpus_per_node, 8);
  EXPECT_EQ(g.gpu.hbm_bandwidth_gbps, 4800);
  EXPECT_NEAR(g.gpu.memory_gib, 143771.0 / 1024, 0.05);
  // The measured 4 x H200 machine: one node of 4, no network. Its NCCL curves are stored net of
  // latency_us (docs/cost-model.md); that they reproduce the measured busbw (87, 267, 340, 357
  // GB/s at 1 MiB, 16 MiB, 256 MiB, 1 GiB) is tested in tests/sim/cost/collective_cost_test.cpp.
  ClusterSpec x = load_cluster("h200x4");
  EXPECT_EQ(x.num_nodes, 1);
  EXPECT_EQ(x.gpus_per_node, 4);
  EXPECT_FALSE(x.has_inter_node());
  EXPECT_GT(x.intra_node.latency_us, 0);
  EXPECT_EQ(x.intra_node.allreduce_busbw_gbps.size(), 4u);
  EXPECT_EQ(x.gpu.memory_bytes(), static_cast<int64_t>(std::llround(140.4 * kGiB)));
  EXPECT_EQ(preset_names("clusters").size(), 9u);
}

TEST(ClusterSpec, LowPrecisionRatesAndComputeCapabilities) {
  // A100: sm_80, no FP8 tensor cores. H100 / H200: sm_90, FP8 3958 TFLOPS with sparsity = 1979
  // dense.
  ClusterSpec a = load_cluster("dgx-a100-80g");
  EXPECT_EQ(a.gpu.compute_capability, 8.0);
  EXPECT_EQ(a.gpu.peak_fp8_tflops, 0);
  for (const char* name : {"dgx-h100", "dgx-h200", "h200x4"}) {
    ClusterSpec h = load_cluster(name);
    EXPECT_EQ(h.gpu.compute_capability, 9.0) << name;
    EXPECT_EQ(h.gpu.peak_fp8_tflops, 1979) << name;
    EXPECT_EQ(h.gpu.peak_fp4_tflops, 0) << name;
  }
  // DGX B200 datasheet: 8 GPUs, 1,440 GB and 64 TB/s in all, 72 PFLOPS FP8 / 144 PFLOPS FP4 with
  // sparsity for 8 GPUs; 14.4 TB/s NVLink; 8 x 400 Gb/s ConnectX-7.
  ClusterSpec b = load_cluster("dgx-b200");
  EXPECT_EQ(b.gpus_per_node, 8);
  EXPECT_EQ(b.nics(), 8);
  EXPECT_NEAR(b.gpu.memory_gib * static_cast<double>(kGiB) * 8, 1440e9, 1e9);
  EXPECT_EQ(b.gpu.hbm_bandwidth_gbps * 8, 64000);
  EXPECT_EQ(b.gpu.peak_bf16_tflops, 2250);
  EXPECT_EQ(b.gpu.peak_fp8_tflops * 8 * 2, 72000);
  EXPECT_EQ(b.gpu.peak_fp4_tflops * 8 * 2, 144000);
  EXPECT_EQ(b.gpu.compute_capability, 10.0);
  // GB200 NVL72: 72 GPUs in one NVLink domain; per rack with sparsity 360 / 720 / 1440 PFLOPS
  // (BF16 / FP8 / FP4), 13.4 TB HBM3e at 576 TB/s.
  ClusterSpec g = load_cluster("gb200-nvl72");
  EXPECT_EQ(g.gpus_per_node, 72);
  EXPECT_EQ(g.nics(), 72);
  EXPECT_EQ(g.gpu.peak_bf16_tflops * 72 * 2, 360000);
  EXPECT_EQ(g.gpu.peak_fp8_tflops * 72 * 2, 720000);
  EXPECT_EQ(g.gpu.peak_fp4_tflops * 72 * 2, 1440000);
  EXPECT_NEAR(g.gpu.memory_gib * static_cast<double>(kGiB), 186e9, 0.1e9);  // 13.4 TB / 72
  EXPECT_EQ(g.gpu.hbm_bandwidth_gbps * 72, 576000);
  EXPECT_EQ(g.gpu.compute_capability, 10.0);
  // A profile without the low-precision fields parses them as absent (0).
  Json j = cluster_to_json(a);
  EXPECT_FALSE(j["gpu"].contains("peak_fp8_tflops"));
  j["gpu"]["compute_capability"] = 0.5;
  try {
    cluster_from_json(j, "cluster");
    ADD_FAILURE() << "compute_capability 0.5 accepted";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), StartsWith("cluster.gpu.compute_capability:"));
  }
}

TEST(ClusterSpec, CurveInterpolatesInLog2AndClamps) {
  Curve c{{1, 10}, {4, 30}, {16, 50}};
  EXPECT_EQ(curve_at(c, 2, 0), 20);  // halfway in log2 between 1 and 4
  EXPECT_EQ(curve_at(c, 8, 0), 40);  // halfway between 4 and 16
  EXPECT_EQ(curve_at(c, 0.5, 0), 10);
  EXPECT_EQ(curve_at(c, 64, 0), 50);
  EXPECT_EQ(curve_at(c, 4, 0), 30);
  EXPECT_EQ(curve_at(Curve{}, 3, 7.5), 7.5);
}

Json cluster_json() { return cluster_to_json(load_cluster("dgx-h200")); }

std::string error_of(const Json& j) {
  try {
    cluster_from_json(j, "cluster");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(ClusterSpec, HostLinkAndMemoryForOffloading) {
  // PCIe 5.0 x16 per direction and two Xeon 8480C's DDR5-4800 (the preset's sources).
  const ClusterSpec h100 = load_cluster("dgx-h100");
  EXPECT_EQ(h100.host_link(), 63.0);
  EXPECT_EQ(h100.host_memory(), 614.4);
  EXPECT_EQ(cluster_from_json(cluster_to_json(h100), "cluster"), h100);
  // Absent: PCIe 4.0 x16 and a DGX A100 host; not written back.
  Json j = cluster_json();
  j.erase("host_link_gbps");
  j.erase("host_memory_gbps");
  const ClusterSpec c = cluster_from_json(j, "cluster");
  EXPECT_EQ(c.host_link(), 31.5);
  EXPECT_EQ(c.host_memory(), 409.6);
  EXPECT_FALSE(cluster_to_json(c).contains("host_link_gbps"));
  Json bad = cluster_json();
  bad["host_link_gbps"] = -1;
  EXPECT_EQ(error_of(bad), "cluster.host_link_gbps: must be >= 0, got -1");
}

TEST(ClusterSpec, MalformedClustersNameTheField) {
  Json a = cluster_json();
  a["intra_node"]["allreduce_busbw_gbps"] = parse_json("[[2, 1], [1, 2]]", "t");
  EXPECT_EQ(error_of(a),
            "cluster.intra_node.allreduce_busbw_gbps[1]: x values must increase, got 1 after 2");
  Json b = cluster_json();
  b["intra_node"]["p2p_gbps"] = parse_json("[[1, 0]]", "t");
  EXPECT_EQ(error_of(b), "cluster.intra_node.p2p_gbps[0][1]: must be >= 0.001, got 0");
  Json c = cluster_json();
  c["intra_node"]["p2p_gbps"] = parse_json("[[1, 2, 3]]", "t");
  EXPECT_THAT(error_of(c), StartsWith("cluster.intra_node.p2p_gbps[0]: must be a pair"));
  Json d = cluster_json();
  d["intra_node"].erase("allreduce_busbw_gbps");
  EXPECT_EQ(error_of(d), "cluster.intra_node.allreduce_busbw_gbps: missing (required)");
  Json e = cluster_json();
  e.erase("inter_node");  // a multi-node cluster needs its network
  EXPECT_EQ(error_of(e), "cluster.inter_node: missing (required)");
  e["num_nodes"] = 1;  // a single node does not
  EXPECT_EQ(error_of(e), "");
  Json f = cluster_json();
  f["gpu"]["memory_bound_efficiency"] = 1.5;
  EXPECT_EQ(error_of(f), "cluster.gpu.memory_bound_efficiency: must be <= 1, got 1.5");
  Json g = cluster_json();
  g["gpus_per_node"] = 0;
  EXPECT_EQ(error_of(g), "cluster.gpus_per_node: must be >= 1, got 0");
  Json h = cluster_json();
  h["gpu"].erase("peak_bf16_tflops");
  EXPECT_EQ(error_of(h), "cluster.gpu.peak_bf16_tflops: missing (required)");
}

TEST(ClusterSpec, NumbersOutsidePhysicalRangesNameTheField) {
  auto with = [](const char* section, const char* key, Json v) {
    Json j = cluster_json();
    if (*section) {
      j[section][key] = std::move(v);
    } else {
      j[key] = std::move(v);
    }
    return error_of(j);
  };
  EXPECT_EQ(with("inter_node", "latency_us", 1e29),
            "cluster.inter_node.latency_us: must be <= 1e+06, got 1e+29");
  EXPECT_EQ(with("intra_node", "latency_us", -1),
            "cluster.intra_node.latency_us: must be >= 0, got -1");
  EXPECT_EQ(with("gpu", "peak_bf16_tflops", 1e-9),
            "cluster.gpu.peak_bf16_tflops: must be >= 0.01, got 1e-09");
  EXPECT_EQ(with("gpu", "memory_gib", 1e9), "cluster.gpu.memory_gib: must be <= 100000, got 1e+09");
  EXPECT_EQ(with("", "gpus_per_node", 4096), "cluster.gpus_per_node: must be <= 1024, got 4096");
  EXPECT_EQ(with("", "num_nodes", 1 << 20), "cluster.num_nodes: must be <= 131072, got 1048576");
  EXPECT_EQ(with("gpu", "gemm_efficiency", parse_json("[[1e8, 1.5]]", "t")),
            "cluster.gpu.gemm_efficiency[0][1]: must be <= 1, got 1.5");
  EXPECT_EQ(with("intra_node", "p2p_gbps", parse_json("[[0.5, 10]]", "t")),
            "cluster.intra_node.p2p_gbps[0][0]: must be >= 1, got 0.5");
  Json many = Json::array();
  for (int i = 1; i <= 300; ++i) many.push_back({i, 1.0});
  EXPECT_EQ(with("intra_node", "p2p_gbps", many),
            "cluster.intra_node.p2p_gbps: at most 256 points, got 300");
}

// A profile with every optional refinement: measured GEMM and attention shapes, kernel-kind
// rates, per-kernel costs, an mplan set, validation residuals and raw calibration data.
Json refined_cluster_json() {
  Json j = cluster_json();
  j["gpu"]["kernel_overhead_us"] = 1.5;
  j["implementations"] = parse_json(R"({"mplan": {
      "gemm_shapes": [[8192, 6144, 2048, "fwd", 0.78], [8192, 2048, 6144, "dx", 0.8],
                      [8192, 8192, 2048, "dx_dgelu", 0.7]],
      "attention_shapes": [[4, 16, 2048, 128, 0.22, 0.2]],
      "memory_bound_kinds": {"layernorm_forward": [[1e6, 0.3], [1e8, 0.55]], "adamw": [[1e9, 0.8]]},
      "kernel_overhead_us": 2.5, "kernel_min_us": 2, "host_overhead_us": 4,
      "overlap_slowdown": 0.1, "runtime_overhead_gib": 1.25}})",
                                    "t");
  j["validation"] = parse_json(R"({"mplan": {"source": "reports/x.md", "in_sample": false,
      "time_errors": [-0.02, 0.01], "memory_errors": [0.03]}})",
                               "t");
  j["calibration"] = parse_json(R"({"date": "2026-11-25", "gpu": "NVIDIA H200"})", "t");
  return j;
}

TEST(ClusterSpec, ImplementationSetsReplaceTheBaseFieldsTheyName) {
  const ClusterSpec c = cluster_from_json(refined_cluster_json(), "cluster");
  const GpuSpec& m = c.gpu_for(Implementation::kMplan);
  // The set's own fields...
  ASSERT_EQ(m.gemm_shapes.size(), 3u);
  EXPECT_EQ(m.gemm_shapes[1], (GemmPoint{8192, 2048, 6144, GemmPass::kInputGrad, 0.8}));
  EXPECT_EQ(m.gemm_shapes[2], (GemmPoint{8192, 8192, 2048, GemmPass::kInputGradDGelu, 0.7}));
  EXPECT_EQ(m.attention_shapes.at(0), (AttentionPoint{4, 16, 2048, 128, 0.22, 0.2}));
  EXPECT_EQ(m.memory_bound_kinds[static_cast<size_t>(MemKernel::kLayerNormForward)].size(), 2u);
  EXPECT_EQ(m.memory_bound_kinds[static_cast<size_t>(MemKernel::kAdamW)].at(0).y, 0.8);
  EXPECT_TRUE(m.memory_bound_kinds[static_cast<size_t>(MemKernel::kAdd)].empty());
  EXPECT_EQ(m.kernel_overhead_us, 2.5);
  EXPECT_EQ(m.kernel_min_us, 2);
  EXPECT_EQ(m.host_overhead_us, 4);
  EXPECT_EQ(m.overlap_slowdown, 0.1);
  EXPECT_EQ(m.runtime_overhead_gib, 1.25);
  // ... and the base's for the rest.
  EXPECT_EQ(m.gemm_efficiency, c.gpu.gemm_efficiency);
  EXPECT_EQ(m.peak_bf16_tflops, c.gpu.peak_bf16_tflops);
  // Implementations without a set use the base GPU.
  EXPECT_EQ(&c.gpu_for(Implementation::kMegatronTe), &c.gpu);
  EXPECT_EQ(&c.gpu_for(Implementation::kMegatronLocal), &c.gpu);
  EXPECT_EQ(c.gpu.kernel_overhead_us, 1.5);
  ASSERT_NE(c.validation_for(Implementation::kMplan), nullptr);
  EXPECT_FALSE(c.validation_for(Implementation::kMplan)->in_sample);
  EXPECT_EQ(c.validation_for(Implementation::kMplan)->time_errors,
            (std::vector<double>{-0.02, 0.01}));
  EXPECT_EQ(c.validation_for(Implementation::kMegatronTe), nullptr);
  EXPECT_EQ(c.calibration["gpu"], "NVIDIA H200");
  // Written back: the set as the keys that differ from the base; read again: the same cluster.
  const Json back = cluster_to_json(c);
  EXPECT_FALSE(back["implementations"]["mplan"].contains("gemm_efficiency"));
  EXPECT_EQ(back["implementations"]["mplan"]["kernel_overhead_us"], 2.5);
  EXPECT_EQ(cluster_from_json(back, "cluster"), c);
}

// The hand-set presets; the *-calibrated ones are mplan calibrate's measurements (below).
TEST(ClusterSpec, PresetsHaveNoRefinementsSoTheirPredictionsStay) {
  for (const auto& name : preset_names("clusters")) {
    if (name.ends_with("-calibrated")) continue;
    const ClusterSpec c = load_cluster(name);
    for (Implementation i : kImplementations)
      EXPECT_EQ(c.gpu_for(i).gemm_shapes.size(), 0u) << name;
    EXPECT_EQ(c.gpu.kernel_overhead_us, 0) << name;
    EXPECT_EQ(c.gpu.overlap_slowdown, 0) << name;
  }
}

// memory_bound_widths: read in increasing width, written back the same; a key that is not a width
// is named.
TEST(ClusterSpec, MemoryBoundWidthsRoundTripAndBadWidthsAreNamed) {
  Json j = cluster_json();
  j["gpu"]["memory_bound_widths"] = Json::parse(
      R"({"layernorm_forward": {"4096": [[1e6, 0.4]], "2048": [[1e6, 0.6], [1e8, 0.7]]}})");
  const ClusterSpec c = cluster_from_json(j, "cluster");
  const auto& w = c.gpu.memory_bound_widths[static_cast<size_t>(MemKernel::kLayerNormForward)];
  ASSERT_EQ(w.size(), 2u);
  EXPECT_EQ(w[0].first, 2048);
  EXPECT_EQ(w[0].second.size(), 2u);
  EXPECT_EQ(w[1].first, 4096);
  const Json back = cluster_to_json(c)["gpu"]["memory_bound_widths"]["layernorm_forward"];
  for (const char* width : {"2048", "4096"})
    EXPECT_EQ(back[width], j["gpu"]["memory_bound_widths"]["layernorm_forward"][width]) << width;
  j["gpu"]["memory_bound_widths"]["layernorm_forward"]["wide"] = Json::parse("[[1e6, 0.5]]");
  EXPECT_EQ(error_of(j),
            "cluster.gpu.memory_bound_widths.layernorm_forward.wide: the key must be a row width "
            "in [1, 2^24], got \"wide\"");
  EXPECT_EQ(cluster_from_json(cluster_to_json(c), "cluster"), c);
}

// The one-GPU profiles' residuals are out of sample (their calls' runs, nothing fitted); the
// two-GPU profile's say they are in sample (the GEMM power limit's weight was chosen looking at
// them), and every calibrated profile carries the sustained GEMM rate.
TEST(ClusterSpec, CalibratedPresetsCarryTheirMeasurementsAndOutOfSampleResiduals) {
  for (const char* name : {"h200-calibrated", "h100-calibrated", "h200x2-calibrated"}) {
    const ClusterSpec c = load_cluster(name);
    EXPECT_GT(c.gpu.gemm_shapes.size(), 100u) << name;
    EXPECT_GT(c.gpu.attention_shapes.size(), 10u) << name;
    EXPECT_FALSE(c.gpu.memory_bound_kinds[static_cast<size_t>(MemKernel::kAdamW)].empty()) << name;
    EXPECT_GT(c.gpu.kernel_overhead_us, 0) << name;
    EXPECT_EQ(c.calibration.value("tool", ""), "mplan calibrate") << name;
    EXPECT_EQ(c.calibration.value("mode", ""), "full") << name;
    const Validation* v = c.validation_for(Implementation::kMplan);
    ASSERT_NE(v, nullptr) << name;
    EXPECT_EQ(v->in_sample, std::string(name) == "h200x2-calibrated") << name;
    EXPECT_GT(c.gpu.sustained_gemm_efficiency, 0.6) << name;
    EXPECT_LT(c.gpu.sustained_gemm_efficiency, 0.75) << name;
    EXPECT_GE(v->time_errors.size(), 8u) << name;  // the accuracy runs of the same call
    EXPECT_EQ(c.gpu_for(Implementation::kMplan).runtime_overhead_gib, 3.36) << name;
  }
  // The two-GPU profile measured NCCL between its GPUs: every collective, at two ranks.
  const ClusterSpec two = load_cluster("h200x2-calibrated");
  EXPECT_EQ(two.gpus_per_node, 2);
  EXPECT_EQ(two.calibration.value("ranks", 0), 2);
  std::set<std::string> ops;
  for (const auto& s : two.calibration.at("nccl")) {
    EXPECT_EQ(s.at("ranks").get<int>(), 2);
    ops.insert(s.at("op").get<std::string>());
  }
  EXPECT_EQ(ops, (std::set<std::string>{"all_gather", "all_reduce", "all_to_all", "reduce_scatter",
                                        "send_recv"}));
}

TEST(ClusterSpec, MalformedRefinementsNameTheField) {
  Json a = refined_cluster_json();
  a["implementations"]["trt-llm"] = Json::object();
  EXPECT_EQ(error_of(a),
            "cluster.implementations.trt-llm: not an implementation; known: \"mplan\", "
            "\"megatron-te\", \"megatron-local\"");
  Json b = refined_cluster_json();
  b["implementations"]["mplan"]["gemm_shapes"][0][3] = "bwd";
  EXPECT_EQ(error_of(b),
            "cluster.implementations.mplan.gemm_shapes[0]: pass must be \"fwd\", \"fwd_gelu\", "
            "\"dx\", \"dx_dgelu\" or \"dw\", got \"bwd\"");
  Json c = refined_cluster_json();
  c["implementations"]["mplan"]["memory_bound_kinds"]["softmax"] = parse_json("[[1, 0.5]]", "t");
  EXPECT_THAT(error_of(c),
              StartsWith("cluster.implementations.mplan.memory_bound_kinds.softmax: unknown key"));
  Json d = refined_cluster_json();
  d["implementations"]["mplan"]["memory_bound_kinds"]["adamw"] = parse_json("[[1, 2.5]]", "t");
  EXPECT_EQ(error_of(d),
            "cluster.implementations.mplan.memory_bound_kinds.adamw[0][1]: must be <= 2, got 2.5");
  Json e = refined_cluster_json();
  e["implementations"]["mplan"]["attention_shapes"][0][1] = 0;
  EXPECT_THAT(error_of(e),
              StartsWith("cluster.implementations.mplan.attention_shapes[0]: must be [batch, "));
  Json f = refined_cluster_json();
  f["validation"]["mplan"].erase("in_sample");  // every residual set says what it is
  EXPECT_EQ(error_of(f), "cluster.validation.mplan.in_sample: missing (required)");
  Json g = refined_cluster_json();
  g["implementations"]["mplan"]["kernel_overhead_us"] = -1;
  EXPECT_THAT(error_of(g), StartsWith("cluster.implementations.mplan.kernel_overhead_us: must be"));
}

TEST(ClusterSpec, JsonRoundTrip) {
  for (const auto& name : preset_names("clusters")) {
    ClusterSpec c = load_cluster(name);
    EXPECT_EQ(cluster_from_json(cluster_to_json(c), "cluster"), c) << name;
    // The power limit's fields, also the weight alone, survive the round trip (set on the base
    // gpu and so on every implementation's set, which a file derives from it).
    auto set_all = [&c](auto field, double v) {
      c.gpu.*field = v;
      for (auto& set : c.implementations)
        if (set) (*set).*field = v;
    };
    set_all(&GpuSpec::sustained_gemm_weight, 0.25);
    EXPECT_EQ(cluster_from_json(cluster_to_json(c), "cluster"), c) << name;
    set_all(&GpuSpec::sustained_gemm_efficiency, 0.7);
    EXPECT_EQ(cluster_from_json(cluster_to_json(c), "cluster"), c) << name;
  }
}

}  // namespace
}  // namespace mplan
