// Predicted against measured: run reports in, one simulated prediction per report, the summary
// statistics and the three outputs (Markdown, JSON, SVG).
#include "exec/calibrate/accuracy_table.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <numeric>
#include <sstream>

#include "exec/calibrate/calibration_fit.hpp"
#include "sim/plan_sim/simulate.hpp"
#include "src/common/embedded_configs.hpp"
#include "src/common/error.hpp"
#include "src/plan/plan.hpp"
#include "src/plan/validate.hpp"

namespace mplan::exec::calibrate {
namespace {

std::string fixed(double v, int digits) {
  std::ostringstream os;
  os.setf(std::ios::fixed);
  os.precision(digits);
  os << v;
  return os.str();
}
std::string signed_pct(double f) {
  std::string s = f >= 0 ? "+" : "";
  s += fixed(100 * f, 1);
  s += " %";
  return s;
}
std::string gib(int64_t b) { return fixed(static_cast<double>(b) / (1 << 30), 2); }

std::string xml_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '<')
      o += "&lt;";
    else if (c == '>')
      o += "&gt;";
    else if (c == '&')
      o += "&amp;";
    else if (c == '"')
      o += "&quot;";
    else
      o += c;
  }
  return o;
}

std::vector<double> ranks_of(const std::vector<double>& v) {
  std::vector<size_t> idx(v.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return v[a] < v[b]; });
  std::vector<double> r(v.size());
  for (size_t i = 0; i < idx.size();) {
    size_t j = i;
    while (j + 1 < idx.size() && v[idx[j + 1]] == v[idx[i]]) ++j;
    const double mean_rank = 0.5 * static_cast<double>(i + j) + 1.0;
    for (size_t k = i; k <= j; ++k) r[idx[k]] = mean_rank;
    i = j + 1;
  }
  return r;
}

}  // namespace

RunReport read_run_report(const std::string& path) {
  const Json j = parse_json(read_text_file(path, path), path);
  JsonObject o(j, "");
  const std::string where = path + ": ";
  RunReport r;
  r.path = path;
  r.name = std::filesystem::path(path).stem().string();
  if (r.name.rfind("run-", 0) == 0) r.name = r.name.substr(4);
  try {
    r.plan_path = o.get_string("plan");
    r.model = o.get_string("model", "");
    r.cluster = o.get_string("cluster", "");
    if (!o.has("parallel") || !o.raw("parallel").is_object())
      throw Error("parallel: missing (not a run report of `mplan run --json`?)");
    r.parallel = o.raw("parallel");
    const JsonObject summary = o.get_object("summary");
    r.measured_s = summary.get_number("median_ms", {1e-6, 1e9}) / 1e3;
    // schema_version 2: memory.ranks; schema_version 1: memory is the array of ranks.
    if (!o.has("memory")) throw Error("memory: missing");
    const Json& mem = o.raw("memory");
    const bool v1 = mem.is_array();
    const Json* ranks =
        v1 ? &mem : (mem.is_object() && mem.contains("ranks") ? &mem.at("ranks") : nullptr);
    const std::string field = v1 ? "memory" : "memory.ranks";
    if (ranks == nullptr || !ranks->is_array() || ranks->empty())
      throw Error(field + ": must be a non-empty array of ranks");
    for (size_t i = 0; i < ranks->size(); ++i) {
      const JsonObject rk((*ranks)[i], cat(field, "[", i, "]"));
      const int64_t dev = rk.get_int("device_peak_bytes", -1, {-1, INT64_MAX});
      const int64_t ex = rk.get_int("executor_peak_bytes", -1, {-1, INT64_MAX});
      r.measured_peak_bytes = std::max(r.measured_peak_bytes, dev >= 0 ? dev : ex);
    }
    if (r.measured_peak_bytes <= 0)
      throw Error(
          "memory.ranks: no rank reports a positive peak (device_peak_bytes or "
          "executor_peak_bytes)");
  } catch (const Error& e) {
    const std::string what = e.what();
    throw Error(what.rfind(where, 0) == 0 ? what : where + what);
  }
  return r;
}

AccuracyRow predict_row(const RunReport& r, const std::optional<ClusterSpec>& cluster) {
  namespace fs = std::filesystem;
  std::string plan_path = r.plan_path;
  if (!fs::exists(plan_path) && fs::path(plan_path).is_relative()) {
    const fs::path beside = fs::path(r.path).parent_path() / plan_path;
    if (fs::exists(beside)) plan_path = beside.string();
  }
  if (!fs::exists(plan_path))
    throw Error(cat(r.path, ": plan: cannot find '", r.plan_path,
                    "' (neither from the working directory nor from the report's folder); run "
                    "`mplan accuracy` where `mplan run` ran"));
  Plan plan = load_plan(plan_path);
  const ParallelConfig& p = plan.parallel;
  auto same = [&](const char* key, int64_t v) {
    if (r.parallel.contains(key) && r.parallel[key].is_number_integer() &&
        r.parallel[key].get<int64_t>() != v)
      throw Error(cat(r.path, ": parallel.", key, " is ", r.parallel[key].get<int64_t>(),
                      " but the plan '", plan_path, "' now says ", v,
                      ": the plan changed since the run"));
  };
  same("tp", p.tp);
  same("cp", p.cp);
  same("ep", p.ep);
  same("pp", p.pp);
  same("vpp", p.vpp);
  same("dp", p.dp);
  same("micro_batch_size", p.micro_batch_size);
  same("global_batch_size", p.global_batch_size);
  if (r.parallel.contains("recompute") && r.parallel["recompute"].is_string() &&
      r.parallel["recompute"].get<std::string>() != to_string(p.recompute))
    throw Error(cat(r.path, ": parallel.recompute is ", r.parallel["recompute"].dump(),
                    " but the plan '", plan_path, "' now says ", to_string(p.recompute)));
  if (cluster) plan.cluster = *cluster;
  plan.training.implementation = Implementation::kMplan;  // the runs are mplan's executor's
  // A plan that breaks a rule cannot be simulated (nor can it have been run).
  if (const std::vector<Violation> broken = validate(plan); !broken.empty())
    throw Error(cat(plan_path, ": ", to_string(broken.front())));
  sim::SimOptions so;
  so.dropout = false;  // as `mplan run` predicts: the executor has no dropout
  const sim::SimulationResult res = sim::simulate(plan, so);
  AccuracyRow row;
  row.name = r.name;
  row.plan = plan_path;
  row.settings = cat(plan.model.name, " tp ", p.tp, " pp ", p.pp, " dp ", p.dp, " mbs ",
                     p.micro_batch_size, " gbs ", p.global_batch_size, " seq ",
                     plan.model.seq_length, " recompute ", to_string(p.recompute));
  row.predicted_s = res.iteration_time_s;
  row.measured_s = r.measured_s;
  row.predicted_peak_bytes = res.peak_bytes;
  row.measured_peak_bytes = r.measured_peak_bytes;
  return row;
}

std::optional<double> spearman(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size() || a.size() < 2) return std::nullopt;
  const std::vector<double> ra = ranks_of(a), rb = ranks_of(b);
  const double n = static_cast<double>(a.size());
  const double ma = std::accumulate(ra.begin(), ra.end(), 0.0) / n;
  const double mb = std::accumulate(rb.begin(), rb.end(), 0.0) / n;
  double sab = 0, saa = 0, sbb = 0;
  for (size_t i = 0; i < ra.size(); ++i) {
    sab += (ra[i] - ma) * (rb[i] - mb);
    saa += (ra[i] - ma) * (ra[i] - ma);
    sbb += (rb[i] - mb) * (rb[i] - mb);
  }
  if (saa <= 0 || sbb <= 0) return std::nullopt;
  return sab / std::sqrt(saa * sbb);
}

AccuracySummary summarize(const std::vector<AccuracyRow>& rows) {
  AccuracySummary s;
  s.plans = static_cast<int>(rows.size());
  if (rows.empty()) return s;
  std::vector<double> te, me, pred, meas;
  double sum = 0;
  for (const AccuracyRow& r : rows) {
    te.push_back(std::abs(r.time_error()));
    me.push_back(std::abs(r.memory_error()));
    pred.push_back(r.predicted_s);
    meas.push_back(r.measured_s);
    sum += r.time_error();
  }
  s.median_abs_time_error = median(te);
  s.worst_abs_time_error = *std::max_element(te.begin(), te.end());
  s.mean_time_error = sum / static_cast<double>(rows.size());
  s.median_abs_memory_error = median(me);
  s.worst_abs_memory_error = *std::max_element(me.begin(), me.end());
  s.spearman = spearman(pred, meas);
  const size_t pf = static_cast<size_t>(std::min_element(pred.begin(), pred.end()) - pred.begin());
  const size_t mf = static_cast<size_t>(std::min_element(meas.begin(), meas.end()) - meas.begin());
  s.predicted_fastest = rows[pf].name;
  s.measured_fastest = rows[mf].name;
  s.fastest_agrees = pf == mf;
  return s;
}

std::string accuracy_markdown(const std::string& title, const std::string& cluster_note,
                              const std::vector<AccuracyRow>& rows, const AccuracySummary& s) {
  std::ostringstream os;
  os << "# " << title << "\n\n"
     << "Predicted (`mplan simulate`, no dropout, " << cluster_note
     << ") against measured (`mplan run`: median iteration time; per-rank peak device memory, "
        "GiB = 2^30 bytes). error = predicted / measured − 1.\n\n"
     << "| plan | settings | predicted ms | measured ms | time error | predicted GiB | measured "
        "GiB | memory error |\n|---|---|---:|---:|---:|---:|---:|---:|\n";
  for (const AccuracyRow& r : rows)
    os << "| " << r.name << " | " << r.settings << " | " << fixed(r.predicted_s * 1e3, 1) << " | "
       << fixed(r.measured_s * 1e3, 1) << " | " << signed_pct(r.time_error()) << " | "
       << gib(r.predicted_peak_bytes) << " | " << gib(r.measured_peak_bytes) << " | "
       << signed_pct(r.memory_error()) << " |\n";
  os << "\n| summary | value |\n|---|---:|\n"
     << "| plans | " << s.plans << " |\n"
     << "| median \\|time error\\| | " << fixed(100 * s.median_abs_time_error, 1) << " % |\n"
     << "| worst \\|time error\\| | " << fixed(100 * s.worst_abs_time_error, 1) << " % |\n"
     << "| mean signed time error | " << signed_pct(s.mean_time_error) << " |\n"
     << "| median \\|memory error\\| | " << fixed(100 * s.median_abs_memory_error, 1) << " % |\n"
     << "| worst \\|memory error\\| | " << fixed(100 * s.worst_abs_memory_error, 1) << " % |\n"
     << "| Spearman rank correlation of times | "
     << (s.spearman ? fixed(*s.spearman, 3) : std::string("-")) << " |\n"
     << "| predicted-fastest = measured-fastest | " << (s.fastest_agrees ? "yes" : "no") << " ("
     << s.predicted_fastest << " / " << s.measured_fastest << ") |\n";
  return os.str();
}

Json accuracy_json(const std::string& title, const std::string& cluster_note,
                   const std::vector<AccuracyRow>& rows, const AccuracySummary& s) {
  Json j;
  j["schema_version"] = 1;
  j["title"] = title;
  j["cluster"] = cluster_note;
  Json a = Json::array();
  for (const AccuracyRow& r : rows)
    a.push_back({{"name", r.name},
                 {"plan", r.plan},
                 {"settings", r.settings},
                 {"predicted_s", r.predicted_s},
                 {"measured_s", r.measured_s},
                 {"time_error", r.time_error()},
                 {"predicted_peak_bytes", r.predicted_peak_bytes},
                 {"measured_peak_bytes", r.measured_peak_bytes},
                 {"memory_error", r.memory_error()}});
  j["rows"] = a;
  j["summary"] = {{"plans", s.plans},
                  {"median_abs_time_error", s.median_abs_time_error},
                  {"worst_abs_time_error", s.worst_abs_time_error},
                  {"mean_time_error", s.mean_time_error},
                  {"median_abs_memory_error", s.median_abs_memory_error},
                  {"worst_abs_memory_error", s.worst_abs_memory_error},
                  {"spearman", s.spearman ? Json(*s.spearman) : Json(nullptr)},
                  {"predicted_fastest", s.predicted_fastest},
                  {"measured_fastest", s.measured_fastest},
                  {"fastest_agrees", s.fastest_agrees}};
  return j;
}

std::string accuracy_svg(const std::string& title, const std::vector<AccuracyRow>& rows) {
  const double W = 640, H = 640, L = 80, R = 20, T = 50, B = 70;
  double lo = 1e300, hi = 0;
  for (const AccuracyRow& r : rows)
    for (double v : {r.predicted_s, r.measured_s}) {
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
  if (rows.empty()) lo = 0.1, hi = 1;
  lo /= 1.25;
  hi *= 1.25;
  const double l0 = std::log10(lo), l1 = std::log10(hi);
  auto px = [&](double v) { return L + (std::log10(v) - l0) / (l1 - l0) * (W - L - R); };
  auto py = [&](double v) { return H - B - (std::log10(v) - l0) / (l1 - l0) * (H - T - B); };
  std::ostringstream os;
  os << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W << "\" height=\"" << H
     << "\" font-family=\"sans-serif\" font-size=\"12\">\n"
     << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
     << "<text x=\"" << W / 2 << "\" y=\"24\" text-anchor=\"middle\" font-size=\"15\">"
     << xml_escape(title) << "</text>\n"
     << "<clipPath id=\"plot\"><rect x=\"" << L << "\" y=\"" << T << "\" width=\"" << W - L - R
     << "\" height=\"" << H - T - B << "\"/></clipPath>\n"
     << "<rect x=\"" << L << "\" y=\"" << T << "\" width=\"" << W - L - R << "\" height=\""
     << H - T - B << "\" fill=\"none\" stroke=\"#333\"/>\n";
  // Ticks at 1, 2, 5 × 10^k milliseconds.
  for (int e = static_cast<int>(std::floor(l0 + 3)); e <= static_cast<int>(std::ceil(l1 + 3)); ++e)
    for (double m : {1.0, 2.0, 5.0}) {
      const double v = m * std::pow(10.0, e - 3);
      if (v < lo || v > hi) continue;
      const std::string ms = fixed(v * 1e3, v * 1e3 < 10 ? 1 : 0);
      os << "<line x1=\"" << px(v) << "\" y1=\"" << T << "\" x2=\"" << px(v) << "\" y2=\"" << H - B
         << "\" stroke=\"#eee\"/>\n"
         << "<line x1=\"" << L << "\" y1=\"" << py(v) << "\" x2=\"" << W - R << "\" y2=\"" << py(v)
         << "\" stroke=\"#eee\"/>\n"
         << "<text x=\"" << px(v) << "\" y=\"" << H - B + 16 << "\" text-anchor=\"middle\">" << ms
         << "</text>\n"
         << "<text x=\"" << L - 6 << "\" y=\"" << py(v) + 4 << "\" text-anchor=\"end\">" << ms
         << "</text>\n";
    }
  auto line = [&](double f, const char* style) {
    os << "<line x1=\"" << px(lo) << "\" y1=\"" << py(lo * f) << "\" x2=\"" << px(hi) << "\" y2=\""
       << py(hi * f) << "\" clip-path=\"url(#plot)\" " << style << "/>\n";
  };
  line(1.0, "stroke=\"#333\"");
  line(1.05, "stroke=\"#999\" stroke-dasharray=\"4 4\"");
  line(0.95, "stroke=\"#999\" stroke-dasharray=\"4 4\"");
  for (const AccuracyRow& r : rows)
    os << "<circle cx=\"" << px(r.measured_s) << "\" cy=\"" << py(r.predicted_s)
       << "\" r=\"4\" fill=\"#1f77b4\"><title>" << xml_escape(r.name) << ": predicted "
       << fixed(r.predicted_s * 1e3, 1) << " ms, measured " << fixed(r.measured_s * 1e3, 1)
       << " ms</title></circle>\n"
       << "<text x=\"" << px(r.measured_s) + (px(r.measured_s) > W / 2 ? -6 : 6) << "\" y=\""
       << py(r.predicted_s) - 6 << "\" font-size=\"10\" text-anchor=\""
       << (px(r.measured_s) > W / 2 ? "end" : "start") << "\">" << xml_escape(r.name)
       << "</text>\n";
  os << "<text x=\"" << (L + W - R) / 2 << "\" y=\"" << H - 24
     << "\" text-anchor=\"middle\">measured iteration time (ms, log)</text>\n"
     << "<text transform=\"translate(20 " << (T + H - B) / 2
     << ") rotate(-90)\" text-anchor=\"middle\">predicted iteration time (ms, log)</text>\n"
     << "<text x=\"" << W - R - 4 << "\" y=\"" << T + 14
     << "\" text-anchor=\"end\" fill=\"#666\">line: y = x; dashed: ±5 %</text>\n"
     << "</svg>\n";
  return os.str();
}

}  // namespace mplan::exec::calibrate
