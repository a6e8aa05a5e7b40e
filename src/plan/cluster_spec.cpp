// ClusterSpec JSON adapter and curve interpolation.
#include "src/plan/cluster_spec.hpp"

#include <cmath>

#include "src/common/embedded_configs.hpp"
#include "src/common/error.hpp"
#include "src/common/units.hpp"

namespace mplan {

double curve_at(const Curve& c, double x, double fallback) {
  if (c.empty()) return fallback;
  if (x <= c.front().x) return c.front().y;
  if (x >= c.back().x) return c.back().y;
  for (size_t i = 1; i < c.size(); ++i) {
    if (x <= c[i].x) {
      double x0 = std::log2(c[i - 1].x), x1 = std::log2(c[i].x);
      double t = x1 > x0 ? (std::log2(x) - x0) / (x1 - x0) : 1.0;
      return c[i - 1].y + t * (c[i].y - c[i - 1].y);
    }
  }
  return c.back().y;
}

int64_t GpuSpec::memory_bytes() const {
  return static_cast<int64_t>(std::llround(memory_gib * static_cast<double>(kGiB)));
}

namespace {

// Ranges of the profile's numbers: wide around every real part (a CPU core at 0.01 TFLOP/s to
// accelerators 100x beyond today's, 2250 TFLOP/s dense bf16 for B200; links of 0.001 to 100000
// GB/s; latencies up to a second), so that a typo is caught and every modelled time stays far
// inside the simulator's integer nanoseconds.
constexpr IntRange kNodes{1, 131072};
constexpr IntRange kGpusPerNode{1, 1024};
constexpr NumberRange kMemoryGib{1e-3, 1e5};
constexpr NumberRange kTflops{1e-2, 1e6};
constexpr NumberRange kHbmGbps{1e-2, 1e7};
constexpr NumberRange kEfficiency{1e-3, 1};
constexpr NumberRange kOverheadGib{0, 1e5};
constexpr NumberRange kLatencyUs{0, 1e6};
constexpr NumberRange kCurveX{1, 1e24};        // FLOPs of one call, or bytes of one message
constexpr NumberRange kEfficiencyY{1e-4, 1};   // fraction of peak
constexpr NumberRange kBandwidthY{1e-3, 1e5};  // GB/s
constexpr size_t kMaxCurvePoints = 256;
constexpr NumberRange kComputeCapability{1, 100};  // CUDA major.minor (8.0 ... 10.0 today)

Curve curve_from_json(const JsonObject& o, const std::string& key, NumberRange y_range) {
  Curve c;
  if (!o.has(key)) return c;
  const Json& arr = o.raw(key);
  std::string name = o.field(key);
  if (!arr.is_array()) throw Error(cat(name, ": must be an array of [x, y] pairs"));
  if (arr.size() > kMaxCurvePoints)
    throw Error(cat(name, ": at most ", kMaxCurvePoints, " points, got ", arr.size()));
  for (size_t i = 0; i < arr.size(); ++i) {
    const Json& p = arr[i];
    if (!p.is_array() || p.size() != 2 || !p[0].is_number() || !p[1].is_number())
      throw Error(cat(name, "[", i, "]: must be a pair of numbers [x, y], got ", json_excerpt(p)));
    CurvePoint pt{p[0].get<double>(), p[1].get<double>()};
    check_number_range(pt.x, kCurveX, cat(name, "[", i, "][0]"));
    check_number_range(pt.y, y_range, cat(name, "[", i, "][1]"));
    if (!c.empty() && pt.x <= c.back().x)
      throw Error(
          cat(name, "[", i, "]: x values must increase, got ", pt.x, " after ", c.back().x));
    c.push_back(pt);
  }
  return c;
}

Json curve_to_json(const Curve& c) {
  Json a = Json::array();
  for (const auto& p : c) a.push_back({p.x, p.y});
  return a;
}

LinkSpec link_from_json(const JsonObject& parent, const std::string& key) {
  JsonObject o = parent.get_object(key);
  o.allow("sources");
  LinkSpec l;
  l.name = o.get_string("name");
  l.latency_us = o.get_number("latency_us", kLatencyUs);
  l.allreduce_busbw_gbps = curve_from_json(o, "allreduce_busbw_gbps", kBandwidthY);
  if (l.allreduce_busbw_gbps.empty())
    throw Error(cat(o.field("allreduce_busbw_gbps"), ": missing (required)"));
  l.allgather_busbw_gbps = curve_from_json(o, "allgather_busbw_gbps", kBandwidthY);
  l.alltoall_busbw_gbps = curve_from_json(o, "alltoall_busbw_gbps", kBandwidthY);
  l.p2p_gbps = curve_from_json(o, "p2p_gbps", kBandwidthY);
  o.finish();
  return l;
}

Json link_to_json(const LinkSpec& l) {
  Json j;
  j["name"] = l.name;
  j["latency_us"] = l.latency_us;
  j["allreduce_busbw_gbps"] = curve_to_json(l.allreduce_busbw_gbps);
  if (!l.allgather_busbw_gbps.empty())
    j["allgather_busbw_gbps"] = curve_to_json(l.allgather_busbw_gbps);
  if (!l.alltoall_busbw_gbps.empty())
    j["alltoall_busbw_gbps"] = curve_to_json(l.alltoall_busbw_gbps);
  if (!l.p2p_gbps.empty()) j["p2p_gbps"] = curve_to_json(l.p2p_gbps);
  return j;
}

}  // namespace

ClusterSpec cluster_from_json(const Json& j, const std::string& path) {
  if (j.is_string()) return load_cluster(j.get<std::string>(), path);
  JsonObject o(j, path);
  o.allow("sources");
  o.allow("description");
  ClusterSpec c;
  c.name = o.get_string("name");
  c.num_nodes = o.get_int("num_nodes", 0, kNodes);
  c.gpus_per_node = o.get_int("gpus_per_node", kGpusPerNode);
  c.nics_per_node = o.get_int("nics_per_node", 0, kGpusPerNode);
  {
    JsonObject g = o.get_object("gpu");
    g.allow("sources");
    c.gpu.name = g.get_string("name");
    c.gpu.memory_gib = g.get_number("memory_gib", kMemoryGib);
    c.gpu.peak_bf16_tflops = g.get_number("peak_bf16_tflops", kTflops);
    c.gpu.hbm_bandwidth_gbps = g.get_number("hbm_bandwidth_gbps", kHbmGbps);
    c.gpu.memory_bound_efficiency = g.get_number("memory_bound_efficiency", 0.8, kEfficiency);
    c.gpu.gemm_efficiency = curve_from_json(g, "gemm_efficiency", kEfficiencyY);
    c.gpu.attention_efficiency = curve_from_json(g, "attention_efficiency", kEfficiencyY);
    c.gpu.attention_backward_efficiency =
        curve_from_json(g, "attention_backward_efficiency", kEfficiencyY);
    c.gpu.runtime_overhead_gib = g.get_number("runtime_overhead_gib", 0.0, kOverheadGib);
    if (g.has("peak_fp8_tflops")) c.gpu.peak_fp8_tflops = g.get_number("peak_fp8_tflops", kTflops);
    if (g.has("peak_fp4_tflops")) c.gpu.peak_fp4_tflops = g.get_number("peak_fp4_tflops", kTflops);
    if (g.has("compute_capability"))
      c.gpu.compute_capability = g.get_number("compute_capability", kComputeCapability);
    g.finish();
  }
  c.intra_node = link_from_json(o, "intra_node");
  // A single-node cluster (num_nodes 1) needs no network; validate() refuses a plan that spans
  // nodes on a cluster without one.
  if (o.has("inter_node") || c.num_nodes != 1) c.inter_node = link_from_json(o, "inter_node");
  o.finish();
  return c;
}

Json cluster_to_json(const ClusterSpec& c) {
  Json j;
  j["name"] = c.name;
  if (c.num_nodes > 0) j["num_nodes"] = c.num_nodes;
  j["gpus_per_node"] = c.gpus_per_node;
  if (c.nics_per_node > 0) j["nics_per_node"] = c.nics_per_node;
  Json g;
  g["name"] = c.gpu.name;
  g["memory_gib"] = c.gpu.memory_gib;
  g["peak_bf16_tflops"] = c.gpu.peak_bf16_tflops;
  g["hbm_bandwidth_gbps"] = c.gpu.hbm_bandwidth_gbps;
  g["memory_bound_efficiency"] = c.gpu.memory_bound_efficiency;
  if (!c.gpu.gemm_efficiency.empty()) g["gemm_efficiency"] = curve_to_json(c.gpu.gemm_efficiency);
  if (!c.gpu.attention_efficiency.empty())
    g["attention_efficiency"] = curve_to_json(c.gpu.attention_efficiency);
  if (!c.gpu.attention_backward_efficiency.empty())
    g["attention_backward_efficiency"] = curve_to_json(c.gpu.attention_backward_efficiency);
  g["runtime_overhead_gib"] = c.gpu.runtime_overhead_gib;
  if (c.gpu.peak_fp8_tflops > 0) g["peak_fp8_tflops"] = c.gpu.peak_fp8_tflops;
  if (c.gpu.peak_fp4_tflops > 0) g["peak_fp4_tflops"] = c.gpu.peak_fp4_tflops;
  if (c.gpu.compute_capability > 0) g["compute_capability"] = c.gpu.compute_capability;
  j["gpu"] = g;
  j["intra_node"] = link_to_json(c.intra_node);
  if (c.has_inter_node()) j["inter_node"] = link_to_json(c.inter_node);
  return j;
}

ClusterSpec load_cluster(const std::string& ref, const std::string& field) {
  std::string text = load_config_text("clusters", ref, field);
  return cluster_from_json(parse_json(text, is_file_reference(ref) ? ref : field), field);
}

}  // namespace mplan
