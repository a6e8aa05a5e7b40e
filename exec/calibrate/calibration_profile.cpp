// The profile `mplan calibrate` writes: the base profile's JSON with the measured fields replaced
// (names and forms in docs/cli/calibrate.md) and the raw measurements under "calibration".
#include "exec/calibrate/calibration_profile.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>

#include "src/common/embedded_configs.hpp"
#include "src/common/error.hpp"

namespace mplan::exec::calibrate {
namespace {

double round_to(double v, int digits) {
  const double f = std::pow(10.0, digits);
  return std::round(v * f) / f;
}

Json curve_json(const std::vector<CurveSample>& c, int digits) {
  Json a = Json::array();
  for (const CurveSample& p : c) a.push_back(Json::array({p.x, round_to(p.y, digits)}));
  return a;
}

double number_at(const Json& base, const char* obj, const char* key) {
  if (!base.is_object() || !base.contains(obj) || !base[obj].is_object() ||
      !base[obj].contains(key) || !base[obj][key].is_number() ||
      !(base[obj][key].get<double>() > 0))
    throw Error(cat("--base: ", obj, ".", key,
                    " must be a positive number (the profile's "
                    "datasheet value the measured fractions are relative to)"));
  return base[obj][key].get<double>();
}

std::string fmt(double v, int digits) {
  std::ostringstream os;
  os.setf(std::ios::fixed);
  os.precision(digits);
  os << v;
  return os.str();
}

}  // namespace

double sustained_factor(const Measurements& m) {
  if (!m.sustained || m.sustained->first_tflops() <= 0) return 1.0;
  return std::min(1.0, m.sustained->last_tflops() / m.sustained->first_tflops());
}

Json calibration_json(const Measurements& m, double peak_tflops, double hbm_gbps) {
  const double peak = peak_tflops * 1e12;
  Json c;
  c["schema_version"] = 1;
  c["tool"] = "mplan calibrate";
  c["date"] = m.env.date;
  c["gpu"] = m.env.gpu_name;
  c["driver"] = m.env.driver;
  c["cuda_runtime"] = m.env.cuda_runtime;
  c["cuda_driver"] = m.env.cuda_driver;
  c["nccl_version"] = m.env.nccl;
  c["host"] = m.env.host;
  c["ranks"] = m.env.ranks;
  c["mode"] = m.env.quick ? "quick" : "full";
  c["models"] = m.env.models;
  c["peak_bf16_tflops"] = peak_tflops;
  c["hbm_bandwidth_gbps"] = hbm_gbps;
  c["timing"] =
      "CUDA events; warm-up, then the median of repeats, each after a 256 MiB write that evicts "
      "the L2 cache; GEMMs and attention after heat_ms of 8192^3 GEMMs; NCCL: the slowest "
      "rank's median time per call over back-to-back calls";
  c["heat_ms"] = m.env.heat_ms;
  Json g = Json::array();
  for (const GemmSample& s : m.gemms) {
    const double f = s.shape.flops();
    g.push_back({{"m", s.shape.m},
                 {"n", s.shape.n},
                 {"k", s.shape.k},
                 {"kind", s.shape.kind},
                 {"layer", s.shape.layer},
                 {"flops", f},
                 {"ms", s.ms},
                 {"tflops", f / (s.ms * 1e9)},
                 {"efficiency", f / (s.ms * 1e-3) / peak}});
  }
  c["gemm"] = g;
  Json a = Json::array();
  for (const AttentionSample& s : m.attention) {
    const double f = s.shape.forward_flops();
    a.push_back({{"batch", s.shape.batch},
                 {"heads", s.shape.heads},
                 {"seq", s.shape.seq},
                 {"head_dim", s.shape.head_dim},
                 {"causal", true},
                 {"forward_flops", f},
                 {"fwd_ms", s.fwd_ms},
                 {"bwd_ms", s.bwd_ms},
                 {"fwd_efficiency", f / (s.fwd_ms * 1e-3) / peak},
                 {"bwd_efficiency", 2.5 * f / (s.bwd_ms * 1e-3) / peak}});
  }
  c["attention"] = a;
  Json mb = Json::array();
  for (const MemoryBoundSample& s : m.memory_bound) {
    const double gbps = s.bytes / (s.ms * 1e-3) / 1e9;
    mb.push_back({{"kind", s.kind},
                  {"shape", s.shape},
                  {"bytes", s.bytes},
                  {"ms", s.ms},
                  {"gbps", gbps},
                  {"fraction", gbps / hbm_gbps}});
  }
  c["memory_bound"] = mb;
  if (m.overhead)
    c["overhead"] = {{"kernel_min_us", m.overhead->kernel_min_us},
                     {"kernel_overhead_us", m.overhead->kernel_overhead_us},
                     {"host_overhead_us", m.overhead->host_overhead_us},
                     {"host_kernel_us", m.overhead->host_kernel_us},
                     {"host_gemm_us", m.overhead->host_gemm_us}};
  if (m.sustained) {
    const GemmShape& s = m.sustained->shape;
    c["sustained"] = {{"gemm", {s.m, s.n, s.k}},
                      {"tflops_per_second", m.sustained->tflops_per_second},
                      {"first_tflops", m.sustained->first_tflops()},
                      {"last_tflops", m.sustained->last_tflops()},
                      {"factor", sustained_factor(m)}};
  }
  Json n = Json::array();
  for (const CollectiveSample& s : m.collectives)
    n.push_back({{"op", to_string(s.op)},
                 {"ranks", s.ranks},
                 {"bytes", s.bytes},
                 {"time_us", s.seconds * 1e6},
                 {"algbw_gbps", algbw_gbps(s.bytes, s.seconds)},
                 {"busbw_gbps", busbw_gbps(s.op, s.ranks, s.bytes, s.seconds)}});
  c["nccl"] = n;
  if (!m.nccl_skipped.empty()) c["nccl_skipped"] = m.nccl_skipped;
  if (m.overlap) {
    const OverlapSample& o = *m.overlap;
    c["overlap"] = {{"gemm", {o.shape.m, o.shape.n, o.shape.k}},
                    {"all_reduce_bytes", o.bytes},
                    {"gemm_alone_ms", o.gemm_alone_ms},
                    {"gemm_with_all_reduce_ms", o.gemm_with_comm_ms},
                    {"slowdown", o.gemm_with_comm_ms / o.gemm_alone_ms}};
  }
  return c;
}

std::vector<std::string> implausible_measurements(const Measurements& m, double peak_tflops,
                                                  double hbm_gbps) {
  std::vector<std::string> bad;
  const double peak = peak_tflops * 1e12;
  auto positive = [&](double v, const std::string& what) {
    if (!(v > 0) || !std::isfinite(v)) {
      bad.push_back(cat(what, ": time ", v, " is not positive"));
      return false;
    }
    return true;
  };
  for (const GemmSample& s : m.gemms) {
    const std::string what = cat("gemm ", s.shape.layer, " ", s.shape.kind, " m", s.shape.m, " n",
                                 s.shape.n, " k", s.shape.k);
    if (positive(s.ms, what) && s.shape.flops() / (s.ms * 1e-3) > 1.02 * peak)
      bad.push_back(cat(what, ": ", fmt(s.shape.flops() / (s.ms * 1e9), 0),
                        " TFLOP/s is above the peak of ", fmt(peak_tflops, 0)));
  }
  for (const AttentionSample& s : m.attention) {
    const std::string what = cat("attention b", s.shape.batch, " heads", s.shape.heads, " s",
                                 s.shape.seq, " d", s.shape.head_dim);
    const double f = s.shape.forward_flops();
    if (positive(s.fwd_ms, what + " fwd") && f / (s.fwd_ms * 1e-3) > 1.02 * peak)
      bad.push_back(what + " fwd: above the peak");
    if (positive(s.bwd_ms, what + " bwd") && 2.5 * f / (s.bwd_ms * 1e-3) > 1.02 * peak)
      bad.push_back(what + " bwd: above the peak");
  }
  for (const MemoryBoundSample& s : m.memory_bound)
    if (positive(s.ms, s.kind + " " + s.shape) && s.bytes / (s.ms * 1e-3) / 1e9 > 3 * hbm_gbps)
      bad.push_back(cat(s.kind, " ", s.shape, ": ", fmt(s.bytes / (s.ms * 1e6), 0),
                        " GB/s is above 3 x the HBM bandwidth"));
  for (const CollectiveSample& s : m.collectives)
    if (positive(s.seconds, to_string(s.op)) &&
        busbw_gbps(s.op, s.ranks, s.bytes, s.seconds) > 2000)
      bad.push_back(cat(to_string(s.op), " of ", s.bytes, " bytes: bus bandwidth above 2000 GB/s"));
  return bad;
}

Json build_profile(const Json& base, const Measurements& m, const ProfileOptions& o) {
  const double peak_tflops = number_at(base, "gpu", "peak_bf16_tflops");
  const double hbm_gbps = number_at(base, "gpu", "hbm_bandwidth_gbps");
  if (m.gemms.empty()) throw Error("calibrate: no GEMM was measured (the gemm curves need some)");
  const double peak = peak_tflops * 1e12;
  const double sf = o.sustained_scale ? sustained_factor(m) : 1.0;
  Json p = base;
  if (!o.name.empty()) p["name"] = o.name;
  Json& gpu = p["gpu"];

  std::vector<CurveSample> gemm_pts;
  Json shapes = Json::array();
  for (const GemmSample& s : m.gemms) {
    const double eff = sf * s.shape.flops() / (s.ms * 1e-3) / peak;
    gemm_pts.push_back({s.shape.flops(), eff});
    shapes.push_back(
        Json::array({s.shape.m, s.shape.n, s.shape.k, s.shape.kind, round_to(eff, 4)}));
  }
  gpu["gemm_efficiency"] = curve_json(binned_median_curve(gemm_pts), 4);
  gpu["gemm_shapes"] = shapes;

  if (!m.attention.empty()) {
    std::vector<CurveSample> fwd, bwd;
    Json ash = Json::array();
    for (const AttentionSample& s : m.attention) {
      const double f = s.shape.forward_flops();
      const double fe = sf * f / (s.fwd_ms * 1e-3) / peak;
      const double be = sf * 2.5 * f / (s.bwd_ms * 1e-3) / peak;
      fwd.push_back({f, fe});
      bwd.push_back({2.5 * f, be});
      ash.push_back(Json::array({s.shape.batch, s.shape.heads, s.shape.seq, s.shape.head_dim,
                                 round_to(fe, 4), round_to(be, 4)}));
    }
    gpu["attention_efficiency"] = curve_json(binned_median_curve(fwd), 4);
    gpu["attention_backward_efficiency"] = curve_json(binned_median_curve(bwd), 4);
    gpu["attention_shapes"] = ash;
  }

  if (!m.memory_bound.empty()) {
    // Each kind's curve at the default width (4096; the other kinds have one), and the row-wise
    // kinds' curves at every width measured.
    std::map<std::string, std::vector<CurveSample>> kinds;
    std::map<std::string, std::map<int64_t, std::vector<CurveSample>>> widths;
    for (const MemoryBoundSample& s : m.memory_bound) {
      const CurveSample p{s.bytes, s.bytes / (s.ms * 1e-3) / 1e9 / hbm_gbps};
      if (s.width == 0 || s.width == kDefaultMemoryWidth) kinds[s.kind].push_back(p);
      if (s.width > 0) widths[s.kind][s.width].push_back(p);
    }
    Json mk = Json::object();
    for (auto& [k, pts] : kinds) mk[k] = curve_json(median_by_x(pts), 4);
    gpu["memory_bound_kinds"] = mk;
    Json mw = Json::object();
    for (auto& [k, by_width] : widths) {
      if (by_width.size() < 2) continue;  // one width: the kind's curve says it all
      Json w = Json::object();
      for (auto& [width, pts] : by_width)
        w[std::to_string(width)] = curve_json(median_by_x(pts), 4);
      mw[k] = w;
    }
    if (!mw.empty()) gpu["memory_bound_widths"] = mw;
    if (kinds.count("copy")) {
      const std::vector<CurveSample> c = median_by_x(kinds["copy"]);
      gpu["memory_bound_efficiency"] = round_to(c.back().y, 4);  // the largest copy
    }
  }
  // The power limit: the rate one large GEMM holds back to back, as a fraction of peak.
  if (m.sustained && m.sustained->last_tflops() > 0)
    gpu["sustained_gemm_efficiency"] = round_to(m.sustained->last_tflops() * 1e12 / peak, 4);
  if (m.overhead) {
    gpu["kernel_overhead_us"] = round_to(m.overhead->kernel_overhead_us, 3);
    gpu["kernel_min_us"] = round_to(m.overhead->kernel_min_us, 3);
    gpu["host_overhead_us"] = round_to(m.overhead->host_overhead_us, 3);
  }
  // The fraction a GEMM's overlapped time grows by (the simulator adds slowdown x overlap):
  // 0.10 for a GEMM 10 % slower beside the all-reduce.
  if (m.overlap && m.overlap->gemm_alone_ms > 0)
    gpu["overlap_slowdown"] =
        round_to(std::max(0.0, m.overlap->gemm_with_comm_ms / m.overlap->gemm_alone_ms - 1), 4);

  if (!m.collectives.empty()) {
    // α: the smallest all-reduce's time (nccl-tests' 8-byte point), as derive_profile.py takes it.
    double alpha = 0, smallest = 0;
    for (const CollectiveSample& s : m.collectives)
      if (s.op == Collective::kAllReduce && (smallest == 0 || s.bytes < smallest)) {
        smallest = s.bytes;
        alpha = s.seconds;
      }
    Json& link = p["intra_node"];
    if (!link.is_object()) link = Json::object();
    if (smallest > 0 && smallest < (1 << 20))
      link["latency_us"] = round_to(alpha * 1e6, 2);
    else
      alpha = link.value("latency_us", 0.0) * 1e-6;
    auto curve = [&](std::initializer_list<Collective> ops) {
      std::map<double, std::vector<double>> by_size;
      for (const CollectiveSample& s : m.collectives)
        if (s.bytes >= (1 << 20) && std::find(ops.begin(), ops.end(), s.op) != ops.end())
          if (auto b = net_bandwidth_gbps(s.op, s.ranks, s.bytes, s.seconds, alpha))
            by_size[s.bytes].push_back(*b);
      std::vector<CurveSample> c;
      for (auto& [x, ys] : by_size) c.push_back({x, median(ys)});
      return c;
    };
    auto put = [&](const char* key, std::initializer_list<Collective> ops) {
      const std::vector<CurveSample> c = curve(ops);
      if (!c.empty()) link[key] = curve_json(c, 1);
    };
    put("allreduce_busbw_gbps", {Collective::kAllReduce});
    // The simulator costs reduce-scatter with the all-gather curve: both go into it.
    put("allgather_busbw_gbps", {Collective::kAllGather, Collective::kReduceScatter});
    put("alltoall_busbw_gbps", {Collective::kAllToAll});
    put("p2p_gbps", {Collective::kSendRecv});
  }

  Json& src = p["sources"];
  if (!src.is_object()) src = Json::object();
  const std::string by =
      cat("measured by `mplan calibrate", m.env.quick ? " --quick" : "", "` on ", m.env.gpu_name,
          " (", m.env.host, ") at ", m.env.date, "; raw numbers under \"calibration\"");
  src["gpu (calibrated fields)"] =
      cat(by, ". Efficiencies are fractions of peak_bf16_tflops (datasheet, unchanged)",
          sf < 1.0 ? cat(", scaled by the sustained-load factor ", fmt(sf, 3)) : std::string(),
          "; memory-bound fractions of hbm_bandwidth_gbps; base profile ", o.base_ref);
  if (!m.collectives.empty())
    src["intra_node (calibrated curves)"] =
        cat(by, " on ", m.env.ranks, " GPUs; curves net of latency_us (docs/cost-model.md)");
  else
    src["intra_node (calibrated curves)"] =
        cat("not measured (", m.nccl_skipped, "): the base profile's curves are kept");
  p["calibration"] = calibration_json(m, peak_tflops, hbm_gbps);
  return p;
}

std::string summary_table(const Json& profile) {
  std::ostringstream os;
  const Json& c = profile.at("calibration");
  const Json& gpu = profile.at("gpu");
  os << "mplan calibrate: " << c.value("gpu", "") << ", driver " << c.value("driver", "")
     << ", CUDA " << c.value("cuda_runtime", "") << ", NCCL "
     << (c.value("nccl_version", "").empty() ? "-" : c.value("nccl_version", "")) << ", "
     << c.value("mode", "") << " mode, " << c.value("ranks", 1) << " rank(s)\n";
  auto eff_range = [](const Json& arr, const char* key) {
    std::vector<double> v;
    for (const Json& r : arr) v.push_back(r.at(key).get<double>());
    if (v.empty()) return std::string("-");
    std::sort(v.begin(), v.end());
    return cat(fmt(v.front(), 3), " / ", fmt(median(v), 3), " / ", fmt(v.back(), 3));
  };
  os << "  GEMMs        " << c.at("gemm").size()
     << " shapes, efficiency min / median / max: " << eff_range(c.at("gemm"), "efficiency") << "\n";
  os << "  attention    " << c.at("attention").size()
     << " shapes, fwd efficiency min / median / max: "
     << eff_range(c.at("attention"), "fwd_efficiency")
     << "; bwd: " << eff_range(c.at("attention"), "bwd_efficiency") << "\n";
  if (gpu.contains("memory_bound_kinds")) {
    os << "  memory-bound fraction of HBM bandwidth at the largest size:\n";
    std::string line = "   ";
    for (auto it = gpu["memory_bound_kinds"].begin(); it != gpu["memory_bound_kinds"].end(); ++it) {
      std::string item = cat(" ", it.key(), " ", fmt(it.value().back()[1].get<double>(), 2));
      if (line.size() + item.size() > 96) {
        os << line << "\n";
        line = "   ";
      }
      line += item;
    }
    os << line << "\n";
  }
  if (c.contains("overhead"))
    os << "  overhead     kernel " << fmt(c["overhead"]["kernel_overhead_us"].get<double>(), 2)
       << " us back to back, " << fmt(c["overhead"]["kernel_min_us"].get<double>(), 2)
       << " us alone; host " << fmt(c["overhead"]["host_overhead_us"].get<double>(), 2)
       << " us per op\n";
  if (c.contains("sustained"))
    os << "  sustained    " << fmt(c["sustained"]["first_tflops"].get<double>(), 0)
       << " TFLOP/s in the first second, " << fmt(c["sustained"]["last_tflops"].get<double>(), 0)
       << " in the last (factor " << fmt(c["sustained"]["factor"].get<double>(), 3) << ")\n";
  if (c.contains("nccl_skipped")) {
    os << "  NCCL         skipped: " << c["nccl_skipped"].get<std::string>() << "\n";
  } else {
    for (const char* op :
         {"all_reduce", "all_gather", "reduce_scatter", "all_to_all", "send_recv"}) {
      std::string line;
      for (const Json& r : c.at("nccl"))
        if (r.at("op") == op && r.at("bytes").get<double>() >= (1 << 20))
          line += cat(" ", fmt(r["bytes"].get<double>() / (1 << 20), 0),
                      "MiB:", fmt(r["busbw_gbps"].get<double>(), 0));
      if (!line.empty()) os << "  " << op << " busbw GB/s" << line << "\n";
    }
    if (c.contains("overlap"))
      os << "  overlap      GEMM beside an all-reduce: "
         << fmt(c["overlap"]["slowdown"].get<double>(), 3) << " x its time alone\n";
  }
  return os.str();
}

std::string base_preset_for_gpu(const std::string& gpu_name) {
  std::vector<std::string> names = preset_names("clusters");
  std::stable_partition(names.begin(), names.end(),
                        [](const std::string& n) { return n.rfind("dgx-", 0) == 0; });
  for (int pass = 0; pass < 2; ++pass)
    for (const std::string& n : names) {
      const Json j = parse_json(load_config_text("clusters", n, "--base"), n);
      const std::string g = j.at("gpu").value("name", "");
      if (g.empty()) continue;
      if (pass == 0 ? g == gpu_name : gpu_name.rfind(g, 0) == 0 || g.rfind(gpu_name, 0) == 0)
        return n;
    }
  throw Error(cat("--base: no cluster preset has a gpu.name matching '", gpu_name,
                  "'; name the profile to start from with --base PRESET|FILE"));
}

}  // namespace mplan::exec::calibrate
