// ClusterSpec JSON adapter and curve interpolation. Implementation sets are read as the base
// "gpu" object with the set's keys in place (so a set is checked like a whole GPU) and written
// as the keys that differ from the base.
#include "src/plan/cluster_spec.hpp"

#include <algorithm>
#include <charconv>
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

const char* to_string(GemmPass p) {
  switch (p) {
    case GemmPass::kForward:
      return "fwd";
    case GemmPass::kForwardGelu:
      return "fwd_gelu";
    case GemmPass::kInputGrad:
      return "dx";
    case GemmPass::kInputGradDGelu:
      return "dx_dgelu";
    case GemmPass::kWeightGrad:
      return "dw";
  }
  return "?";
}

const char* to_string(MemKernel k) {
  switch (k) {
    case MemKernel::kCopy:
      return "copy";
    case MemKernel::kAdd:
      return "add";
    case MemKernel::kLayerNormForward:
      return "layernorm_forward";
    case MemKernel::kLayerNormBackward:
      return "layernorm_backward";
    case MemKernel::kRmsNormForward:
      return "rmsnorm_forward";
    case MemKernel::kRmsNormBackward:
      return "rmsnorm_backward";
    case MemKernel::kGeluForward:
      return "gelu_forward";
    case MemKernel::kGeluBackward:
      return "gelu_backward";
    case MemKernel::kSwigluForward:
      return "swiglu_forward";
    case MemKernel::kSwigluBackward:
      return "swiglu_backward";
    case MemKernel::kBiasGrad:
      return "bias_grad";
    case MemKernel::kRope:
      return "rope";
    case MemKernel::kEmbeddingForward:
      return "embedding_forward";
    case MemKernel::kEmbeddingBackward:
      return "embedding_backward";
    case MemKernel::kPositionEmbeddingBackward:
      return "position_embedding_backward";
    case MemKernel::kCrossEntropy:
      return "cross_entropy";
    case MemKernel::kAdamW:
      return "adamw";
    case MemKernel::kGradNorm:
      return "grad_norm";
    case MemKernel::kFill:
      return "fill";
  }
  return "?";
}

std::optional<MemKernel> mem_kernel_from(const std::string& name) {
  for (int i = 0; i < kNumMemKernels; ++i)
    if (name == to_string(static_cast<MemKernel>(i))) return static_cast<MemKernel>(i);
  return std::nullopt;
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
constexpr NumberRange kSlowdown{0, 10};  // fraction added to a kernel's time under overlap
constexpr NumberRange kFraction{0, 1};
constexpr NumberRange kHostGbps{0, 1e6};      // 0: the default
constexpr NumberRange kCurveX{1, 1e24};       // FLOPs of one call, or bytes of one message
constexpr NumberRange kEfficiencyY{1e-4, 1};  // fraction of peak
// Fraction of hbm bandwidth over a kind's modelled bytes: above 1 where the L2 cache serves part
// of them (the embedding gradient's scattered row updates measure 1.04 on H200, 1.11 on H100).
constexpr NumberRange kMemKindY{1e-4, 2};
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

// [[m, n, k, "pass", efficiency], ...]
std::vector<GemmPoint> gemm_points_from_json(const JsonObject& o, const std::string& key) {
  const Json& arr = o.raw(key);
  const std::string name = o.field(key);
  if (!arr.is_array()) throw Error(cat(name, ": must be an array of [m, n, k, pass, efficiency]"));
  std::vector<GemmPoint> out;
  for (size_t i = 0; i < arr.size(); ++i) {
    const Json& p = arr[i];
    const std::string f = cat(name, "[", i, "]");
    if (!p.is_array() || p.size() != 5 || !p[0].is_number_integer() || !p[1].is_number_integer() ||
        !p[2].is_number_integer() || !p[3].is_string() || !p[4].is_number())
      throw Error(cat(f, ": must be [m, n, k, pass, efficiency] (three integers, \"fwd\", ",
                      "\"fwd_gelu\", \"dx\", \"dx_dgelu\" or \"dw\", a number), got ",
                      json_excerpt(p)));
    GemmPoint g{p[0].get<int64_t>(), p[1].get<int64_t>(), p[2].get<int64_t>(), GemmPass::kForward,
                p[4].get<double>()};
    const std::string pass = p[3].get<std::string>();
    bool known = false;
    for (GemmPass gp : {GemmPass::kForward, GemmPass::kForwardGelu, GemmPass::kInputGrad,
                        GemmPass::kInputGradDGelu, GemmPass::kWeightGrad})
      if (pass == to_string(gp)) g.pass = gp, known = true;
    if (!known)
      throw Error(
          cat(f, ": pass must be \"fwd\", \"fwd_gelu\", \"dx\", \"dx_dgelu\" or \"dw\", got \"",
              pass, "\""));
    if (g.m < 1 || g.n < 1 || g.k < 1 || !(g.efficiency > 0) || g.efficiency > 1)
      throw Error(
          cat(f, ": m, n, k must be >= 1 and the efficiency in (0, 1], got ", json_excerpt(p)));
    out.push_back(g);
  }
  return out;
}

// [[batch, heads, seq, head_dim, forward_efficiency, backward_efficiency], ...]
std::vector<AttentionPoint> attention_points_from_json(const JsonObject& o,
                                                       const std::string& key) {
  const Json& arr = o.raw(key);
  const std::string name = o.field(key);
  if (!arr.is_array())
    throw Error(
        cat(name, ": must be an array of [batch, heads, seq, head_dim, forward, backward]"));
  std::vector<AttentionPoint> out;
  for (size_t i = 0; i < arr.size(); ++i) {
    const Json& p = arr[i];
    const std::string f = cat(name, "[", i, "]");
    bool ok = p.is_array() && p.size() == 6;
    for (size_t k = 0; ok && k < 4; ++k) ok = p[k].is_number_integer() && p[k].get<int64_t>() >= 1;
    for (size_t k = 4; ok && k < 6; ++k)
      ok = p[k].is_number() && p[k].get<double>() > 0 && p[k].get<double>() <= 1;
    if (!ok)
      throw Error(cat(f, ": must be [batch, heads, seq, head_dim, forward_efficiency, ",
                      "backward_efficiency] (four integers >= 1, two numbers in (0, 1]), got ",
                      json_excerpt(p)));
    out.push_back({p[0].get<int64_t>(), p[1].get<int64_t>(), p[2].get<int64_t>(),
                   p[3].get<int64_t>(), p[4].get<double>(), p[5].get<double>()});
  }
  return out;
}

// The keys of gpu_to_json(set) whose values differ from the base's.
Json gpu_diff(const GpuSpec& base, const GpuSpec& set) {
  const Json b = gpu_to_json(base), s = gpu_to_json(set);
  Json d = Json::object();
  for (auto it = s.begin(); it != s.end(); ++it)
    if (!b.contains(it.key()) || b[it.key()] != it.value()) d[it.key()] = it.value();
  for (auto it = b.begin(); it != b.end(); ++it)  // a refinement the set drops: written empty
    if (!s.contains(it.key()))
      d[it.key()] = it.value().is_object()  ? Json::object()
                    : it.value().is_array() ? Json::array()
                                            : Json(0);
  return d;
}

const char* implementation_names() { return "\"mplan\", \"megatron-te\", \"megatron-local\""; }

Implementation implementation_key(const JsonObject& o, const std::string& key) {
  const auto impl = implementation_from(key);
  if (!impl)
    throw Error(cat(o.field(key), ": not an implementation; known: ", implementation_names()));
  return *impl;
}

// "implementations": {"mplan": {gpu fields}, ...}: each set is the base gpu with its keys.
void implementations_from_json(const JsonObject& o, ClusterSpec& c) {
  JsonObject sets = o.get_object("implementations");
  const Json& raw = o.raw("implementations");
  const Json base = gpu_to_json(c.gpu);
  for (auto it = raw.begin(); it != raw.end(); ++it) {
    const Implementation impl = implementation_key(sets, it.key());
    sets.allow(it.key());
    if (!it.value().is_object())
      throw Error(cat(sets.field(it.key()), ": must be an object of gpu fields, got ",
                      json_excerpt(it.value())));
    Json merged = base;
    for (auto f = it.value().begin(); f != it.value().end(); ++f) merged[f.key()] = f.value();
    c.implementations[static_cast<size_t>(impl)] = gpu_from_json(merged, sets.field(it.key()));
  }
  sets.finish();
}

// "validation": {"mplan": {"source": ..., "in_sample": ..., "time_errors": [...], ...}, ...}
void validation_from_json(const JsonObject& o, ClusterSpec& c) {
  JsonObject sets = o.get_object("validation");
  const Json& raw = o.raw("validation");
  for (auto it = raw.begin(); it != raw.end(); ++it) {
    const Implementation impl = implementation_key(sets, it.key());
    JsonObject v = sets.get_object(it.key());
    Validation val;
    val.source = v.get_string("source");
    val.in_sample = v.get_bool("in_sample");
    for (const char* key : {"time_errors", "memory_errors"}) {
      std::vector<double>& dst =
          std::string(key) == "time_errors" ? val.time_errors : val.memory_errors;
      if (!v.has(key)) continue;
      const Json& a = v.raw(key);
      if (!a.is_array())
        throw Error(
            cat(v.field(key), ": must be an array of relative errors, got ", json_excerpt(a)));
      for (size_t i = 0; i < a.size(); ++i) {
        if (!a[i].is_number() || !(a[i].get<double>() > -1))
          throw Error(cat(v.field(key), "[", i,
                          "]: must be a relative error (predicted - measured) / measured > -1, "
                          "got ",
                          json_excerpt(a[i])));
        dst.push_back(a[i].get<double>());
      }
    }
    v.finish();
    c.validation[static_cast<size_t>(impl)] = val;
  }
  sets.finish();
}

Json validation_to_json(const Validation& v) {
  Json j;
  j["source"] = v.source;
  j["in_sample"] = v.in_sample;
  j["time_errors"] = v.time_errors;
  if (!v.memory_errors.empty()) j["memory_errors"] = v.memory_errors;
  return j;
}

}  // namespace

double ClusterSpec::host_link() const {
  return host_link_gbps > 0 ? host_link_gbps : kDefaultHostLinkGbps;
}
double ClusterSpec::host_memory() const {
  return host_memory_gbps > 0 ? host_memory_gbps : kDefaultHostMemoryGbps;
}

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
  c.host_link_gbps = o.get_number("host_link_gbps", 0, kHostGbps);
  c.host_memory_gbps = o.get_number("host_memory_gbps", 0, kHostGbps);
  c.gpu = gpu_from_json(o.raw("gpu"), o.field("gpu"));
  c.intra_node = link_from_json(o, "intra_node");
  // A single-node cluster (num_nodes 1) needs no network; validate() refuses a plan that spans
  // nodes on a cluster without one.
  if (o.has("inter_node") || c.num_nodes != 1) c.inter_node = link_from_json(o, "inter_node");
  if (o.has("implementations")) implementations_from_json(o, c);
  if (o.has("validation")) validation_from_json(o, c);
  if (o.has("calibration")) {
    c.calibration = o.raw("calibration");
    if (!c.calibration.is_object())
      throw Error(
          cat(o.field("calibration"), ": must be an object, got ", json_excerpt(c.calibration)));
  }
  o.finish();
  return c;
}

Json cluster_to_json(const ClusterSpec& c) {
  Json j;
  j["name"] = c.name;
  if (c.num_nodes > 0) j["num_nodes"] = c.num_nodes;
  j["gpus_per_node"] = c.gpus_per_node;
  if (c.nics_per_node > 0) j["nics_per_node"] = c.nics_per_node;
  if (c.host_link_gbps > 0) j["host_link_gbps"] = c.host_link_gbps;
  if (c.host_memory_gbps > 0) j["host_memory_gbps"] = c.host_memory_gbps;
  j["gpu"] = gpu_to_json(c.gpu);
  j["intra_node"] = link_to_json(c.intra_node);
  if (c.has_inter_node()) j["inter_node"] = link_to_json(c.inter_node);
  Json sets = Json::object();
  for (Implementation impl : kImplementations) {
    const auto& set = c.implementations[static_cast<size_t>(impl)];
    if (set) sets[to_string(impl)] = gpu_diff(c.gpu, *set);
  }
  if (!sets.empty()) j["implementations"] = sets;
  Json val = Json::object();
  for (Implementation impl : kImplementations)
    if (const Validation* v = c.validation_for(impl)) val[to_string(impl)] = validation_to_json(*v);
  if (!val.empty()) j["validation"] = val;
  if (!c.calibration.is_null()) j["calibration"] = c.calibration;
  return j;
}

Json gpu_to_json(const GpuSpec& gpu) {
  Json g;
  g["name"] = gpu.name;
  g["memory_gib"] = gpu.memory_gib;
  g["peak_bf16_tflops"] = gpu.peak_bf16_tflops;
  g["hbm_bandwidth_gbps"] = gpu.hbm_bandwidth_gbps;
  g["memory_bound_efficiency"] = gpu.memory_bound_efficiency;
  if (!gpu.gemm_efficiency.empty()) g["gemm_efficiency"] = curve_to_json(gpu.gemm_efficiency);
  if (!gpu.attention_efficiency.empty())
    g["attention_efficiency"] = curve_to_json(gpu.attention_efficiency);
  if (!gpu.attention_backward_efficiency.empty())
    g["attention_backward_efficiency"] = curve_to_json(gpu.attention_backward_efficiency);
  g["runtime_overhead_gib"] = gpu.runtime_overhead_gib;
  if (!gpu.gemm_shapes.empty()) {
    Json a = Json::array();
    for (const GemmPoint& p : gpu.gemm_shapes)
      a.push_back({p.m, p.n, p.k, to_string(p.pass), p.efficiency});
    g["gemm_shapes"] = a;
  }
  if (!gpu.attention_shapes.empty()) {
    Json a = Json::array();
    for (const AttentionPoint& p : gpu.attention_shapes)
      a.push_back(
          {p.batch, p.heads, p.seq, p.head_dim, p.forward_efficiency, p.backward_efficiency});
    g["attention_shapes"] = a;
  }
  Json kinds = Json::object();
  for (int i = 0; i < kNumMemKernels; ++i)
    if (!gpu.memory_bound_kinds[static_cast<size_t>(i)].empty())
      kinds[to_string(static_cast<MemKernel>(i))] =
          curve_to_json(gpu.memory_bound_kinds[static_cast<size_t>(i)]);
  if (!kinds.empty()) g["memory_bound_kinds"] = kinds;
  Json widths = Json::object();
  for (int i = 0; i < kNumMemKernels; ++i)
    for (const auto& [w, c] : gpu.memory_bound_widths[static_cast<size_t>(i)])
      widths[to_string(static_cast<MemKernel>(i))][std::to_string(w)] = curve_to_json(c);
  if (!widths.empty()) g["memory_bound_widths"] = widths;
  if (gpu.kernel_overhead_us > 0) g["kernel_overhead_us"] = gpu.kernel_overhead_us;
  if (gpu.kernel_min_us > 0) g["kernel_min_us"] = gpu.kernel_min_us;
  if (gpu.host_overhead_us > 0) g["host_overhead_us"] = gpu.host_overhead_us;
  if (gpu.overlap_slowdown > 0) g["overlap_slowdown"] = gpu.overlap_slowdown;
  if (gpu.sustained_gemm_efficiency > 0)
    g["sustained_gemm_efficiency"] = gpu.sustained_gemm_efficiency;
  if (gpu.sustained_gemm_efficiency > 0 ||
      gpu.sustained_gemm_weight != GpuSpec{}.sustained_gemm_weight)
    g["sustained_gemm_weight"] = gpu.sustained_gemm_weight;
  if (gpu.peak_fp8_tflops > 0) g["peak_fp8_tflops"] = gpu.peak_fp8_tflops;
  if (gpu.peak_fp4_tflops > 0) g["peak_fp4_tflops"] = gpu.peak_fp4_tflops;
  if (gpu.compute_capability > 0) g["compute_capability"] = gpu.compute_capability;
  return g;
}

namespace {

// "memory_bound_widths": {kind: {"<width>": curve, ...}, ...}, widths positive integers.
void memory_bound_widths_from_json(const JsonObject& g, GpuSpec& gpu) {
  JsonObject k = g.get_object("memory_bound_widths");
  for (int i = 0; i < kNumMemKernels; ++i) {
    const std::string kind = to_string(static_cast<MemKernel>(i));
    if (!k.has(kind)) continue;
    JsonObject w = k.get_object(kind);
    auto& out = gpu.memory_bound_widths[static_cast<size_t>(i)];
    for (const auto& [key, value] : k.raw(kind).items()) {
      (void)value;
      int64_t width = 0;
      const auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), width);
      if (ec != std::errc() || end != key.data() + key.size() || width < 1 || width > (1 << 24))
        throw Error(
            cat(w.field(key), ": the key must be a row width in [1, 2^24], got \"", key, "\""));
      Curve c = curve_from_json(w, key, kMemKindY);
      if (c.empty()) throw Error(cat(w.field(key), ": must have at least one point"));
      out.emplace_back(width, std::move(c));
    }
    std::sort(out.begin(), out.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    w.finish();
  }
  k.finish();
}

}  // namespace

GpuSpec gpu_from_json(const Json& j, const std::string& path) {
  JsonObject g(j, path);
  g.allow("sources");
  GpuSpec gpu;
  gpu.name = g.get_string("name");
  gpu.memory_gib = g.get_number("memory_gib", kMemoryGib);
  gpu.peak_bf16_tflops = g.get_number("peak_bf16_tflops", kTflops);
  gpu.hbm_bandwidth_gbps = g.get_number("hbm_bandwidth_gbps", kHbmGbps);
  gpu.memory_bound_efficiency = g.get_number("memory_bound_efficiency", 0.8, kEfficiency);
  gpu.gemm_efficiency = curve_from_json(g, "gemm_efficiency", kEfficiencyY);
  gpu.attention_efficiency = curve_from_json(g, "attention_efficiency", kEfficiencyY);
  gpu.attention_backward_efficiency =
      curve_from_json(g, "attention_backward_efficiency", kEfficiencyY);
  gpu.runtime_overhead_gib = g.get_number("runtime_overhead_gib", 0.0, kOverheadGib);
  if (g.has("gemm_shapes")) gpu.gemm_shapes = gemm_points_from_json(g, "gemm_shapes");
  if (g.has("attention_shapes"))
    gpu.attention_shapes = attention_points_from_json(g, "attention_shapes");
  if (g.has("memory_bound_kinds")) {
    JsonObject k = g.get_object("memory_bound_kinds");
    for (int i = 0; i < kNumMemKernels; ++i)
      gpu.memory_bound_kinds[static_cast<size_t>(i)] =
          curve_from_json(k, to_string(static_cast<MemKernel>(i)), kMemKindY);
    k.finish();
  }
  if (g.has("memory_bound_widths")) memory_bound_widths_from_json(g, gpu);
  gpu.kernel_overhead_us = g.get_number("kernel_overhead_us", 0.0, kLatencyUs);
  gpu.kernel_min_us = g.get_number("kernel_min_us", 0.0, kLatencyUs);
  gpu.host_overhead_us = g.get_number("host_overhead_us", 0.0, kLatencyUs);
  gpu.overlap_slowdown = g.get_number("overlap_slowdown", 0.0, kSlowdown);
  if (g.has("sustained_gemm_efficiency"))
    gpu.sustained_gemm_efficiency = g.get_number("sustained_gemm_efficiency", kFraction);
  gpu.sustained_gemm_weight = g.get_number("sustained_gemm_weight", 0.5, kFraction);
  if (g.has("peak_fp8_tflops")) gpu.peak_fp8_tflops = g.get_number("peak_fp8_tflops", kTflops);
  if (g.has("peak_fp4_tflops")) gpu.peak_fp4_tflops = g.get_number("peak_fp4_tflops", kTflops);
  if (g.has("compute_capability"))
    gpu.compute_capability = g.get_number("compute_capability", kComputeCapability);
  g.finish();
  return gpu;
}

ClusterSpec load_cluster(const std::string& ref, const std::string& field) {
  std::string text = load_config_text("clusters", ref, field);
  return cluster_from_json(parse_json(text, is_file_reference(ref) ? ref : field), field);
}

}  // namespace mplan
