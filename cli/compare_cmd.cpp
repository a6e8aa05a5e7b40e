// `mplan compare A.json B.json`: two plans simulated and set side by side — headline figures,
// the time breakdown of each one's busiest stage, the pipeline bubble, peak memory per stage, and
// each communication group with where it lies on the nodes and its exposed time — ending with the
// parts that explain most of the difference. Both plans must be valid (else exit 2, each broken
// rule listed); a plan that does not fit is reported as such (exit 0: compare only reports).
#include <algorithm>
#include <cmath>
#include <iostream>
#include <memory>

#include "cli/command_registry.hpp"
#include "cli/output.hpp"
#include "sim/plan_sim/simulate.hpp"
#include "sim/plan_sim/simulation_json.hpp"
#include "sim/plan_sim/simulation_size.hpp"
#include "sim/plan_sim/stage_groups.hpp"
#include "src/common/error.hpp"
#include "src/plan/plan.hpp"
#include "src/plan/validate.hpp"

namespace mplan::cli {
namespace {

struct CompareOptions {
  std::string a_path, b_path;
  bool json = false;
};

struct Side {
  std::string path;
  Plan plan;
  sim::SimulationResult result;
  sim::StageGroups groups;  // of the busiest stage
};

Side load_side(const std::string& path, const char* which) {
  Side s;
  s.path = path;
  s.plan = load_plan(path);
  std::vector<Violation> broken = validate(s.plan);
  if (broken.empty())
    if (auto v = sim::check_simulation_size(s.plan, false)) broken.push_back(*v);
  if (!broken.empty()) {
    std::cerr << path << " (" << which << "): " << broken.size() << " broken rule"
              << (broken.size() > 1 ? "s" : "") << ":\n";
    for (const Violation& v : broken) std::cerr << "  " << to_string(v) << "\n";
    throw ExitWith{2};
  }
  s.result = sim::simulate(s.plan);
  const RankGrid grid(s.plan.parallel);
  std::vector<int64_t> scratch;
  s.groups = sim::stage_groups(grid, s.plan.cluster.gpus_per_node, s.result.critical_stage, scratch,
                               cp_a2a_size(s.plan.parallel));
  return s;
}

std::string layout_of(const Plan& plan) {
  const ParallelConfig& p = plan.parallel;
  std::string s = cat("tp ", p.tp);
  if (p.cp > 1) s += cat(" cp ", p.cp);
  if (p.ep > 1) s += cat(" ep ", p.ep);
  s += cat(" pp ", p.pp);
  if (p.vpp > 1) s += cat(" vpp ", p.vpp);
  s += cat(" dp ", p.dp, ", mbs ", p.micro_batch_size, ", ", to_string(p.schedule));
  if (p.sequence_parallel && p.tp > 1) s += ", sp";
  if (p.recompute != Recompute::kNone) s += cat(", recompute ", to_string(p.recompute));
  if (p.distributed_optimizer) s += ", dist-opt";
  return s;
}

// "3 GPUs on 2 nodes (2 + 1)", "8 GPUs in 1 node", "-" for a group of one.
std::string placement_text(const cost::GroupPlacement& g) {
  if (g.size <= 1) return "-";
  if (g.nodes == 1) return cat(g.size, " GPUs in 1 node");
  const std::string spread = g.even() ? cat(g.per_node, " per node")
                                      : cat(g.fewest_per_node(), " to ", g.per_node, " per node");
  return cat(g.size, " GPUs on ", g.nodes, " nodes (", spread, ")");
}

std::string signed_duration(double s) {
  return (s > 0 ? "+" : s < 0 ? "-" : "") + format_duration(std::abs(s));
}

// One part of the breakdown, with its value on each side.
struct Part {
  const char* name;
  double a, b;
};

std::vector<Part> parts_of(const sim::TimeBreakdown& a, const sim::TimeBreakdown& b) {
  return {{"compute (incl. recompute)", a.compute_s, b.compute_s},
          {"tensor-parallel comm", a.tp_comm_s, b.tp_comm_s},
          {"context-parallel comm", a.cp_comm_s, b.cp_comm_s},
          {"expert-parallel comm", a.ep_comm_s, b.ep_comm_s},
          {"pipeline send/recv", a.pp_comm_s, b.pp_comm_s},
          {"data-parallel comm", a.dp_comm_s, b.dp_comm_s},
          {"pipeline bubble", a.bubble_s, b.bubble_s},
          {"optimizer", a.optimizer_s, b.optimizer_s}};
}

void print_figures(const Side& a, const Side& b) {
  const sim::SimulationResult &x = a.result, &y = b.result;
  Table t({"", "A", "B", "B - A"});
  t.add_row({"iteration time", format_duration(x.iteration_time_s),
             format_duration(y.iteration_time_s),
             signed_duration(y.iteration_time_s - x.iteration_time_s)});
  t.add_row({"tokens/s", format_fixed(x.tokens_per_s, 0), format_fixed(y.tokens_per_s, 0),
             format_fixed(y.tokens_per_s - x.tokens_per_s, 0)});
  t.add_row({"MFU", format_percent(x.mfu), format_percent(y.mfu), ""});
  t.add_row({"pipeline bubble", format_percent(x.bubble_fraction),
             format_percent(y.bubble_fraction), ""});
  t.add_row({"micro-batches", cat(x.num_microbatches), cat(y.num_microbatches), ""});
  t.add_row({"peak memory", format_gib(x.peak_bytes, 2), format_gib(y.peak_bytes, 2), ""});
  t.add_row({"fits", x.fits ? "yes" : "NO", y.fits ? "yes" : "NO", ""});
  std::cout << t.render("  ");
}

void print_breakdown(const Side& a, const Side& b) {
  std::cout << "\ntime breakdown (busiest stage: A " << a.result.critical_stage << ", B "
            << b.result.critical_stage << "; exposed communication only):\n";
  Table t({"part", "A", "B", "B - A"});
  for (const Part& p : parts_of(a.result.breakdown, b.result.breakdown))
    t.add_row({p.name, format_duration(p.a), format_duration(p.b), signed_duration(p.b - p.a)});
  std::cout << t.render("  ");
}

void print_memory(const Side& a, const Side& b) {
  std::cout << "\npeak memory per pipeline stage (GiB = 2^30 bytes):\n";
  Table t({"stage", "A peak", "A activations", "B peak", "B activations"});
  const size_t n = std::max(a.result.per_stage.size(), b.result.per_stage.size());
  auto cell = [](const std::vector<sim::StageMemory>& v, size_t i, bool peak) -> std::string {
    if (i >= v.size()) return "";
    return format_gib(peak ? v[i].peak_bytes : v[i].activations_bytes, 2);
  };
  for (size_t i = 0; i < n; ++i)
    t.add_row({cat(i), cell(a.result.per_stage, i, true), cell(a.result.per_stage, i, false),
               cell(b.result.per_stage, i, true), cell(b.result.per_stage, i, false)});
  std::cout << t.render("  ");
}

void print_groups(const Side& a, const Side& b) {
  std::cout << "\ncommunication per group (busiest stage; exposed time from the breakdown):\n";
  const sim::StageGroups &x = a.groups, &y = b.groups;
  const sim::TimeBreakdown &p = a.result.breakdown, &q = b.result.breakdown;
  Table t({"group", "A placement", "A exposed", "B placement", "B exposed"});
  t.add_row({"tensor parallel", placement_text(x.tp), format_duration(p.tp_comm_s),
             placement_text(y.tp), format_duration(q.tp_comm_s)});
  t.add_row({"context parallel", placement_text(x.cp), format_duration(p.cp_comm_s),
             placement_text(y.cp), format_duration(q.cp_comm_s)});
  t.add_row({"expert parallel", placement_text(x.ep), format_duration(p.ep_comm_s),
             placement_text(y.ep), format_duration(q.ep_comm_s)});
  t.add_row({"data parallel (x cp)", placement_text(x.dp_cp), format_duration(p.dp_comm_s),
             placement_text(y.dp_cp), format_duration(q.dp_comm_s)});
  auto pipe = [](const sim::StageGroups& g, const Plan& plan) -> std::string {
    if (plan.parallel.pp <= 1) return "-";
    return g.next_same_node ? "next stage in the node" : "next stage on another node";
  };
  t.add_row({"pipeline", pipe(x, a.plan), format_duration(p.pp_comm_s), pipe(y, b.plan),
             format_duration(q.pp_comm_s)});
  std::cout << t.render("  ");
}

// "B is 1.24x slower per iteration; the largest differences: pipeline bubble +12.30 s, ...".
void print_verdict(const Side& a, const Side& b) {
  const double ta = a.result.iteration_time_s, tb = b.result.iteration_time_s;
  std::vector<Part> parts = parts_of(a.result.breakdown, b.result.breakdown);
  std::stable_sort(parts.begin(), parts.end(), [](const Part& l, const Part& r) {
    return std::abs(l.b - l.a) > std::abs(r.b - r.a);
  });
  std::cout << "\n";
  if (ta == tb) {
    std::cout << "A and B take the same time per iteration";
  } else {
    const bool b_slower = tb > ta;
    std::cout << (b_slower ? "A" : "B") << " is " << format_fixed(b_slower ? tb / ta : ta / tb, 2)
              << "x faster per iteration";
  }
  std::cout << "; the largest differences (B - A):";
  for (size_t i = 0; i < 3 && i < parts.size() && parts[i].b != parts[i].a; ++i)
    std::cout << (i ? ", " : " ") << parts[i].name << " "
              << signed_duration(parts[i].b - parts[i].a);
  std::cout << "\n";
}

Json side_json(const Side& s) {
  Json j = sim::simulation_to_json(s.result);
  j["plan"] = s.path;
  j["layout"] = layout_of(s.plan);
  j["groups"] = Json::object();
  const std::pair<const char*, const cost::GroupPlacement*> groups[] = {
      {"tp", &s.groups.tp}, {"cp", &s.groups.cp}, {"ep", &s.groups.ep}, {"dp_cp", &s.groups.dp_cp}};
  for (const auto& [name, g] : groups)
    j["groups"][name] = {{"size", g->size},
                         {"nodes", g->nodes},
                         {"most_per_node", g->per_node},
                         {"fewest_per_node", g->fewest_per_node()}};
  j["groups"]["pp_next_same_node"] = s.groups.next_same_node;
  return j;
}

void run_compare(const CompareOptions& o) {
  const Side a = load_side(o.a_path, "A");
  const Side b = load_side(o.b_path, "B");
  if (o.json) {
    std::cout << Json{{"schema_version", 1}, {"a", side_json(a)}, {"b", side_json(b)}}.dump(2)
              << "\n";
    return;
  }
  std::cout << "A: " << a.path << ": " << a.plan.model.name << " on " << a.plan.world_size()
            << " GPUs of " << a.plan.cluster.name << ", " << layout_of(a.plan) << "\n";
  std::cout << "B: " << b.path << ": " << b.plan.model.name << " on " << b.plan.world_size()
            << " GPUs of " << b.plan.cluster.name << ", " << layout_of(b.plan) << "\n\n";
  print_figures(a, b);
  print_breakdown(a, b);
  print_memory(a, b);
  print_groups(a, b);
  print_verdict(a, b);
}

void add_compare(CLI::App& app) {
  auto o = std::make_shared<CompareOptions>();
  auto* cmd = app.add_subcommand(
      "compare", "Two plans side by side: time breakdown, bubble, memory per stage, groups");
  cmd->add_option("a", o->a_path, "First plan (A), e.g. best.json from a sweep")->required();
  cmd->add_option("b", o->b_path, "Second plan (B), e.g. the layout you know")->required();
  cmd->add_flag("--json", o->json,
                "Print {a, b}: each as `mplan simulate --json`, plus its layout and groups");
  cmd->footer(
      "Answers \"why does one layout beat the other\": each plan is simulated as by `mplan\n"
      "simulate`, and the parts of the iteration time are set side by side with their\n"
      "difference; the largest differences are named last.\n"
      "Exit status: 0 (also when a plan does not fit: the table says so); 2 when a plan\n"
      "breaks a rule or a file cannot be read.\n"
      "Examples:\n"
      "  mplan compare best.json configs/plans/gpt3-1.3b-tp4.json\n"
      "  mplan compare a.json b.json --json");
  cmd->callback([o] { run_compare(*o); });
}

MPLAN_REGISTER_COMMAND(14, add_compare);

}  // namespace
}  // namespace mplan::cli
