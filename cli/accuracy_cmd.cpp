// `mplan accuracy RUN.json... [--cluster PROFILE] [--out-dir DIR] [--title T]`: predicted against
// measured. Reads the run reports of `mplan run --json`, simulates each one's plan (on the plan's
// cluster or on --cluster), prints the table and writes it as accuracy.md, accuracy.json and
// accuracy.svg (predicted against measured time, y = x) into --out-dir (exec/calibrate).
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>

#include "cli/command_registry.hpp"
#include "src/common/error.hpp"
#include "src/plan/cluster_spec.hpp"

#ifdef MPLAN_HAVE_EXEC
#include "exec/calibrate/accuracy_table.hpp"
#endif

namespace mplan::cli {
namespace {

struct AccuracyOptions {
  std::vector<std::string> runs;
  std::string cluster;
  std::string out_dir;
  std::string title = "Predicted against measured";
};

#ifdef MPLAN_HAVE_EXEC

void write_file(const std::filesystem::path& p, const std::string& text) {
  std::ofstream f(p);
  f << text;
  if (!f) throw Error(cat("--out-dir: cannot write '", p.string(), "'"));
}

void run_accuracy(const AccuracyOptions& o) {
  using namespace mplan::exec::calibrate;
  std::optional<ClusterSpec> cluster;
  std::string note = "each plan's own cluster profile";
  if (!o.cluster.empty()) {
    cluster = load_cluster(o.cluster, "--cluster");
    note = cat("cluster profile ", o.cluster, " (", cluster->name, ")");
  }
  std::vector<AccuracyRow> rows;
  for (const std::string& path : o.runs)
    rows.push_back(predict_row(read_run_report(path), cluster));
  const AccuracySummary s = summarize(rows);
  const std::string md = accuracy_markdown(o.title, note, rows, s);
  std::cout << md;
  if (!o.out_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(o.out_dir, ec);
    if (ec) throw Error(cat("--out-dir: cannot create '", o.out_dir, "': ", ec.message()));
    const std::filesystem::path dir(o.out_dir);
    write_file(dir / "accuracy.md", md);
    write_file(dir / "accuracy.json", accuracy_json(o.title, note, rows, s).dump(2) + "\n");
    write_file(dir / "accuracy.svg", accuracy_svg(o.title, rows));
    std::cout << "\nwritten: " << (dir / "accuracy.md").string() << ", accuracy.json, "
              << "accuracy.svg\n";
  }
}

#else

void run_accuracy(const AccuracyOptions&) {
  throw Error("accuracy: this mplan was built without MPI, so the executor's reports are not read");
}

#endif

void add_accuracy(CLI::App& app) {
  auto opts = std::make_shared<AccuracyOptions>();
  auto* cmd = app.add_subcommand(
      "accuracy",
      "Predicted against measured: simulate the plans of `mplan run --json` reports and tabulate "
      "the errors");
  cmd->add_option("runs", opts->runs, "Run reports written by `mplan run --json`")->required();
  cmd->add_option("--cluster", opts->cluster,
                  "Cluster profile replacing each plan's (a preset or a JSON file, e.g. one "
                  "`mplan calibrate` wrote)");
  cmd->add_option("--out-dir", opts->out_dir,
                  "Write accuracy.md, accuracy.json and accuracy.svg into this folder");
  cmd->add_option("--title", opts->title, "Title of the table and the plot");
  cmd->footer(
      "error = predicted / measured - 1 (negative: predicted too fast or too small). Memory is\n"
      "the largest per-rank device peak against the largest predicted stage peak. Plan paths in\n"
      "the reports are read from the working directory, else from the report's folder.\n"
      "Exit status: 0 done; 2 a report or plan cannot be read, a plan breaks a rule (mplan\n"
      "validate), or a plan changed since its run.\n"
      "Examples:\n"
      "  mplan accuracy runs/run-*.json\n"
      "  mplan accuracy runs/run-*.json --cluster h200-calibrated.json --out-dir "
      "reports/accuracy-h200\n"
      "Details: docs/cli/accuracy.md");
  cmd->callback([opts] { run_accuracy(*opts); });
}

MPLAN_REGISTER_COMMAND(72, add_accuracy);

}  // namespace
}  // namespace mplan::cli
