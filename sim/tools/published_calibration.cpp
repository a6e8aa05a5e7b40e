// published_calibration: simulates every published Megatron-LM run (SC'21 Table 1, Korthikanti
// et al. Tables 3 and 5) with a hardware profile and prints predicted vs published iteration time
// as a Markdown table with the median |error|; --json for the rows, --plans DIR to write the plan
// each run became. The report reports/published-calibration.md is its output.
#include <CLI/CLI.hpp>
#include <cmath>
#include <fstream>
#include <iostream>
#include <sstream>

#include "sim/calibration/published_runs.hpp"
#include "sim/plan_sim/simulation_json.hpp"
#include "src/common/error.hpp"
#include "src/plan/plan.hpp"

namespace {

std::string fixed(double v, int d) {
  std::ostringstream os;
  os.setf(std::ios::fixed);
  os.precision(d);
  os << v;
  return os.str();
}

std::string read_file(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw mplan::Error(mplan::cat("--runs: cannot read '", path, "'"));
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace

int main(int argc, char** argv) {
  using namespace mplan;
  CLI::App app{"Simulate the published Megatron-LM runs and compare iteration times",
               "published_calibration"};
  std::string runs_path =
      std::string(MPLAN_SOURCE_DIR) + "/sim/calibration/published_calibration.json";
  std::string hardware = "dgx-a100-80g";
  std::string plans_dir;
  bool json = false;
  app.add_option("--runs", runs_path, "Published runs JSON (default: the repository's copy)");
  app.add_option("--hardware", hardware, "Hardware profile: preset name or cluster JSON file");
  app.add_option("--plans", plans_dir, "Write the plan of each run to DIR/<id>.json");
  app.add_flag("--json", json, "Print the rows as JSON");
  app.footer("Example:\n  build/sim/published_calibration --hardware dgx-a100-80g");
  CLI11_PARSE(app, argc, argv);
  try {
    const ClusterSpec cluster = load_cluster(hardware, "--hardware");
    const std::vector<sim::PublishedRun> runs =
        sim::published_runs(parse_json(read_file(runs_path), runs_path), cluster);
    const std::vector<sim::CalibrationRow> rows = sim::simulate_published(runs);
    const double median = sim::median_abs_error(rows);
    if (!plans_dir.empty())
      for (const sim::PublishedRun& r : runs) {
        std::ofstream f(plans_dir + "/" + r.id + ".json");
        if (!f) throw Error(cat("--plans: cannot write in '", plans_dir, "'"));
        f << plan_to_json(r.plan).dump(2) << "\n";
      }
    if (json) {
      Json j;
      j["schema_version"] = 1;
      j["hardware"] = cluster.name;
      j["median_abs_error"] = median;
      j["runs"] = Json::array();
      for (size_t i = 0; i < rows.size(); ++i) {
        Json r = sim::simulation_to_json(rows[i].result);
        r["id"] = rows[i].id;
        r["published_s"] = rows[i].published_s;
        r["predicted_s"] = rows[i].predicted_s;
        r["error"] = rows[i].error;
        r["filled"] = runs[i].filled;
        j["runs"].push_back(std::move(r));
      }
      std::cout << j.dump(2) << "\n";
      return 0;
    }
    std::cout << "| run | GPUs | tp | pp | vpp | dp | mb | m | sp | recompute | published s | "
                 "predicted s | error | compute | tp comm | pp comm | dp comm | bubble | "
                 "peak GiB | filled in |\n";
    std::cout
        << "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
    for (size_t i = 0; i < rows.size(); ++i) {
      const sim::CalibrationRow& r = rows[i];
      const ParallelConfig& p = runs[i].plan.parallel;
      const sim::TimeBreakdown& b = r.result.breakdown;
      const double it = r.result.iteration_time_s;
      auto share = [&](double s) { return fixed(100 * s / it, 1) + " %"; };
      std::cout << "| " << r.id << " | " << runs[i].plan.world_size() << " | " << p.tp << " | "
                << p.pp << " | " << p.vpp << " | " << p.dp << " | " << p.micro_batch_size << " | "
                << r.result.num_microbatches << " | " << (p.sequence_parallel ? "yes" : "no")
                << " | " << to_string(p.recompute) << " | " << fixed(r.published_s, 3) << " | "
                << fixed(r.predicted_s, 3) << " | " << (r.error >= 0 ? "+" : "")
                << fixed(100 * r.error, 1) << " % | " << share(b.compute_s) << " | "
                << share(b.tp_comm_s) << " | " << share(b.pp_comm_s) << " | " << share(b.dp_comm_s)
                << " | " << share(b.bubble_s) << " | "
                << fixed(static_cast<double>(r.result.peak_bytes) / (1 << 30), 1) << " | "
                << (runs[i].filled.empty() ? "-" : runs[i].filled) << " |\n";
    }
    std::cout << "\nmedian |error|: " << fixed(100 * median, 1) << " % over " << rows.size()
              << " runs (hardware profile " << cluster.name << ")\n";
  } catch (const Error& e) {
    std::cerr << "published_calibration: error: " << e.what() << "\n";
    return 2;
  }
  return 0;
}
