// `mplan show-groups`: Megatron-LM's rank layout for a parallel shape: the rank table (rank ->
// node, local GPU, coordinates) and every communication group kind, marking groups that cross a
// node boundary; --rank focuses on one rank; --json prints the whole layout. Large worlds are
// summarized in the text output (never in JSON); bad flags exit 2 naming the flag.
#include <algorithm>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "cli/command_registry.hpp"
#include "cli/output.hpp"
#include "src/common/error.hpp"
#include "src/common/json_reader.hpp"
#include "src/parallel/rank_grid.hpp"

namespace mplan::cli {
namespace {

// show-groups prints every rank; beyond this the output is useless and slow.
constexpr int64_t kMaxShowWorld = int64_t{1} << 20;
// Text output limits unless --full: rank rows, groups per kind, members per group.
constexpr int kRankRowsHead = 16, kRankRowsTail = 4, kMaxRankRows = 64;
constexpr int kMaxGroupsListed = 8;  // beyond 64 ranks, a kind with more shows the first few
constexpr int kGroupsShownWhenLong = 4;
constexpr size_t kMaxMembersShown = 16;
constexpr size_t kLineWidth = 100;

struct ShowGroupsOptions {
  int64_t tp = 1, pp = 1, dp = 1, cp = 1, ep = 1, etp = 0;
  std::string order = "tp-cp-ep-dp-pp";
  int64_t gpus_per_node = 8;
  int64_t rank = -1;
  bool rank_given = false, etp_given = false;
  bool json = false, full = false;
};

// "[0,4,8,12]", or for a long list the first members, "...", and the last with the count.
std::string format_members(const std::vector<int>& m, bool full) {
  std::string s = "[";
  auto add = [&](size_t i) {
    if (s.size() > 1) s += ",";
    s += std::to_string(m[i]);
  };
  if (full || m.size() <= kMaxMembersShown) {
    for (size_t i = 0; i < m.size(); ++i) add(i);
    return s + "]";
  }
  for (size_t i = 0; i < 6; ++i) add(i);
  s += ",...";
  add(m.size() - 1);
  return s + "] (" + std::to_string(m.size()) + " ranks)";
}

// Items joined by spaces, wrapped to the line width under `indent`.
std::string wrap(const std::vector<std::string>& items, const std::string& indent) {
  std::string out, line = indent;
  for (const auto& it : items) {
    if (line.size() > indent.size() && line.size() + 1 + it.size() > kLineWidth) {
      out += line + "\n";
      line = indent;
    }
    if (line.size() > indent.size()) line += " ";
    line += it;
  }
  if (line.size() > indent.size()) out += line + "\n";
  return out;
}

std::string pad_right(std::string s, size_t width) {
  if (s.size() < width) s.append(width - s.size(), ' ');
  return s;
}

ParallelConfig to_config(const ShowGroupsOptions& o) {
  ParallelConfig p;
  p.tp = o.tp;
  p.pp = o.pp;
  p.dp = o.dp;
  p.cp = o.cp;
  p.ep = o.ep;
  p.etp = o.etp_given ? o.etp : o.tp;  // Megatron: expert tp defaults to tp
  p.order = o.order;
  return p;
}

// Checks the flags and builds the grid; every error names its flag.
RankGrid make_grid(const ShowGroupsOptions& o) {
  const std::pair<const char*, int64_t> sizes[] = {
      {"--tp", o.tp}, {"--pp", o.pp}, {"--dp", o.dp},
      {"--cp", o.cp}, {"--ep", o.ep}, {"--gpus-per-node", o.gpus_per_node}};
  for (const auto& [flag, v] : sizes) check_int_range(v, {1, kMaxShowWorld}, flag);
  if (o.etp_given) check_int_range(o.etp, {1, kMaxShowWorld}, "--etp");
  int64_t world = 1;
  for (int64_t v : {o.tp, o.cp, o.pp, o.dp}) {
    if (v > kMaxShowWorld || world * v > kMaxShowWorld)
      throw Error(
          cat("--dp: tp x cp x pp x dp must be at most ", kMaxShowWorld, " ranks for show-groups"));
    world *= v;
  }
  ParallelConfig p = to_config(o);
  auto problems = rank_grid_problems(p);
  if (!problems.empty()) {
    const auto& pr = problems.front();
    std::string flag = pr.field.rfind("parallel.", 0) == 0 ? "--" + pr.field.substr(9) : "--dp";
    throw Error(flag + ": " + pr.message);
  }
  RankGrid g(p);
  if (o.rank_given && (o.rank < 0 || o.rank >= g.world_size()))
    throw Error(cat("--rank: must be in [0, ", g.world_size(), "), got ", o.rank));
  return g;
}

std::string header(const RankGrid& g, int gpn) {
  int nodes = (g.world_size() + gpn - 1) / gpn;
  return cat(g.world_size(), " rank", g.world_size() == 1 ? "" : "s", ": tp ", g.tp(), " x cp ",
             g.cp(), " x pp ", g.pp(), " x dp ", g.dp(), "; expert grid: etp ", g.expert_tp(),
             " x ep ", g.ep(), " x edp ", g.expert_dp(), " x pp ", g.pp(), "\norder ", g.order(),
             " (fastest-varying axis first); ", gpn, " GPUs per node: ", nodes, " node",
             nodes == 1 ? "" : "s",
             (g.world_size() % gpn != 0 && nodes > 1 ? " (last one partial)" : ""), "\n");
}

std::vector<std::string> rank_row(const RankGrid& g, int r, int gpn) {
  RankCoord c = g.coord(r);
  RankPlacement pl = RankGrid::placement(r, gpn);
  return {std::to_string(r),          std::to_string(pl.node), std::to_string(pl.local_gpu),
          std::to_string(c.tp),       std::to_string(c.cp),    std::to_string(c.dp),
          std::to_string(c.pp),       std::to_string(c.ep),    std::to_string(c.expert_tp),
          std::to_string(c.expert_dp)};
}

void print_text(const RankGrid& g, const ShowGroupsOptions& o) {
  const int gpn = static_cast<int>(o.gpus_per_node);
  const int world = g.world_size();
  std::string out = header(g, gpn);

  out += "\nRanks (etp, edp: expert tensor / data parallel rank)\n";
  Table t({"rank", "node", "gpu", "tp", "cp", "dp", "pp", "ep", "etp", "edp"});
  bool all_rows = o.full || world <= kMaxRankRows;
  for (int r = 0; r < world; ++r) {
    if (!all_rows && r == kRankRowsHead) {
      t.add_row({"...", "", "", "", "", "", "", "", "", ""});
      r = world - kRankRowsTail;
    }
    t.add_row(rank_row(g, r, gpn));
  }
  out += t.render("  ");
  if (!all_rows)
    out += cat("  (", world - kRankRowsHead - kRankRowsTail,
               " ranks not shown; --full lists all, --rank R shows one)\n");

  out +=
      "\nGroups: kind, count x size, members in Megatron's order (* = crosses a node boundary)\n";
  const std::string indent(2 + 20 + 12, ' ');
  for (GroupKind k : all_group_kinds()) {
    int n = g.num_groups(k), size = g.group_size(k);
    int crossing = 0;
    std::vector<std::string> shown;
    bool all_groups = o.full || world <= kMaxRankRows || n <= kMaxGroupsListed;
    for (int i = 0; i < n; ++i) {
      std::vector<int> m = g.group_members(k, i);
      bool cross = crosses_nodes(m, gpn);
      crossing += cross;
      if (all_groups || i < kGroupsShownWhenLong)
        shown.push_back(format_members(m, o.full) + (cross ? "*" : ""));
    }
    std::string line = "  " + pad_right(to_string(k), 20) + pad_right(cat(n, " x ", size), 12);
    if (size == 1 && group_kind_covers_world(k)) {
      out += line + "every rank alone\n";
      continue;
    }
    std::string body = wrap(shown, indent);
    out += line + body.substr(indent.size());
    if (!all_groups)
      out += cat(indent, "... ", n - kGroupsShownWhenLong, " more; ", crossing, " of ", n,
                 " groups cross a node boundary\n");
  }
  out +=
      "  (embedding: first and last stage of each pipeline group, or the only stage when pp is "
      "1;\n   position-embedding: first stage)\n";
  std::cout << out;
}

void print_rank_text(const RankGrid& g, const ShowGroupsOptions& o) {
  const int gpn = static_cast<int>(o.gpus_per_node);
  const int r = static_cast<int>(o.rank);
  RankCoord c = g.coord(r);
  RankPlacement pl = RankGrid::placement(r, gpn);
  std::string out = header(g, gpn);
  out += cat("\nrank ", r, ": node ", pl.node, ", GPU ", pl.local_gpu, "\n");
  out += cat("coordinates: tp ", c.tp, ", cp ", c.cp, ", dp ", c.dp, ", pp ", c.pp,
             "; expert grid: etp ", c.expert_tp, ", ep ", c.ep, ", edp ", c.expert_dp, "\n");
  out += "\nGroups of this rank (members in Megatron's order; * = crosses a node boundary)\n";
  Table t({"kind", "position", "members"});
  for (GroupKind k : all_group_kinds()) {
    std::vector<int> m = g.group_of(k, r);
    if (m.empty()) {
      t.add_row({to_string(k), "-",
                 k == GroupKind::kEmbedding ? "none (not the first or last pipeline stage)"
                                            : "none (not the first pipeline stage)"});
      continue;
    }
    int pos = static_cast<int>(std::find(m.begin(), m.end(), r) - m.begin());
    t.add_row({to_string(k), cat(pos, " of ", m.size()),
               format_members(m, o.full) + (crosses_nodes(m, gpn) ? " *" : "")});
  }
  out += t.render("  ");
  std::cout << out;
}

void append_list(std::string& s, const std::vector<int>& m) {
  s += "[";
  for (size_t i = 0; i < m.size(); ++i) {
    if (i) s += ",";
    s += std::to_string(m[i]);
  }
  s += "]";
}

void append_rank_fields(std::string& s, const RankGrid& g, int r, int gpn) {
  RankCoord c = g.coord(r);
  RankPlacement pl = RankGrid::placement(r, gpn);
  s += cat("\"rank\": ", r, ", \"node\": ", pl.node, ", \"local_gpu\": ", pl.local_gpu,
           ", \"tp\": ", c.tp, ", \"cp\": ", c.cp, ", \"ep\": ", c.ep, ", \"dp\": ", c.dp,
           ", \"pp\": ", c.pp, ", \"expert_tp\": ", c.expert_tp, ", \"expert_dp\": ", c.expert_dp);
}

// Written by hand (ints and fixed keys only) so that large worlds stream without a JSON tree.
void print_json(const RankGrid& g, const ShowGroupsOptions& o) {
  const int gpn = static_cast<int>(o.gpus_per_node);
  std::string s;
  s += cat("{\n  \"schema_version\": 1,\n  \"world_size\": ", g.world_size(), ",\n  \"order\": \"",
           g.order(), "\",\n  \"gpus_per_node\": ", gpn, ",\n  \"sizes\": {\"tp\": ", g.tp(),
           ", \"cp\": ", g.cp(), ", \"pp\": ", g.pp(), ", \"dp\": ", g.dp(), ", \"ep\": ", g.ep(),
           ", \"etp\": ", g.expert_tp(), ", \"expert_dp\": ", g.expert_dp(), "},\n");
  if (o.rank_given) {
    int r = static_cast<int>(o.rank);
    s += "  ";
    append_rank_fields(s, g, r, gpn);
    s += ",\n  \"groups\": {\n";
    const auto& kinds = all_group_kinds();
    for (size_t i = 0; i < kinds.size(); ++i) {
      std::vector<int> m = g.group_of(kinds[i], r);
      s += cat("    \"", to_string(kinds[i]), "\": ");
      if (m.empty())
        s += "null";
      else
        append_list(s, m);
      s += i + 1 < kinds.size() ? ",\n" : "\n";
    }
    s += "  }\n}\n";
    std::cout << s;
    return;
  }
  s += "  \"groups\": {\n";
  const auto& kinds = all_group_kinds();
  for (size_t i = 0; i < kinds.size(); ++i) {
    s += cat("    \"", to_string(kinds[i]), "\": [");
    int n = g.num_groups(kinds[i]);
    for (int j = 0; j < n; ++j) {
      if (j) s += ",";
      append_list(s, g.group_members(kinds[i], j));
    }
    s += i + 1 < kinds.size() ? "],\n" : "]\n";
  }
  s += "  },\n  \"ranks\": [\n";
  for (int r = 0; r < g.world_size(); ++r) {
    s += "    {";
    append_rank_fields(s, g, r, gpn);
    s += r + 1 < g.world_size() ? "},\n" : "}\n";
  }
  s += "  ]\n}\n";
  std::cout << s;
}

void run_show_groups(const ShowGroupsOptions& o) {
  RankGrid g = make_grid(o);
  if (o.json)
    print_json(g, o);
  else if (o.rank_given)
    print_rank_text(g, o);
  else
    print_text(g, o);
}

void add_show_groups(CLI::App& app) {
  auto o = std::make_shared<ShowGroupsOptions>();
  auto* cmd = app.add_subcommand(
      "show-groups", "Show Megatron-LM's rank layout: coordinates, node placement, every group");
  cmd->add_option("--tp", o->tp, "Tensor parallel size (--tensor-model-parallel-size)")->required();
  cmd->add_option("--pp", o->pp, "Pipeline parallel size (--pipeline-model-parallel-size)")
      ->required();
  cmd->add_option("--dp", o->dp, "Data parallel size (world = tp x cp x pp x dp)")->required();
  cmd->add_option("--cp", o->cp, "Context parallel size (--context-parallel-size)")
      ->capture_default_str();
  cmd->add_option("--ep", o->ep, "Expert parallel size (--expert-model-parallel-size)")
      ->capture_default_str();
  auto* etp = cmd->add_option("--etp", o->etp,
                              "Expert tensor parallel size (--expert-tensor-parallel-size; "
                              "default: tp)");
  cmd->add_option("--order", o->order,
                  "Rank order, fastest-varying axis first: tp-cp-ep-dp-pp (Megatron's default) "
                  "or tp-cp-ep-pp-dp (--use-tp-pp-dp-mapping)")
      ->capture_default_str();
  cmd->add_option("--gpus-per-node", o->gpus_per_node,
                  "GPUs per node: rank r runs on node r / G, GPU r % G")
      ->capture_default_str();
  auto* rank =
      cmd->add_option("--rank", o->rank, "Show only this rank: its coordinates and groups");
  cmd->add_flag("--json", o->json,
                "Print {world_size, order, groups: {kind: [[ranks]...]}, ranks: [{rank, node, "
                "local_gpu, tp, cp, ep, dp, pp}...]} (with --rank: that rank and its groups)");
  cmd->add_flag("--full", o->full, "List every rank, group and member even for large worlds");
  cmd->footer(
      "Group kinds (Megatron's initialize_model_parallel): tp, pp, dp, cp, dp-cp, tp-pp (model\n"
      "parallel), tp-cp, tp-dp, tp-dp-cp, embedding (first and last pipeline stage), position-\n"
      "embedding (first stage); expert grid (etp x ep x edp x pp, same order): ep, expert-tp,\n"
      "expert-dp, tp-ep, tp-ep-pp.\n"
      "Exit status: 0 ok, 2 bad flags or a layout Megatron refuses (the message names the flag).\n"
      "Examples:\n"
      "  mplan show-groups --tp 2 --pp 2 --dp 2\n"
      "  mplan show-groups --tp 2 --pp 4 --dp 2 --order tp-cp-ep-pp-dp\n"
      "  mplan show-groups --tp 2 --pp 2 --dp 2 --ep 2 --etp 1 --rank 5\n"
      "  mplan show-groups --tp 8 --pp 8 --dp 16 --gpus-per-node 8 --json > groups.json");
  cmd->callback([o, etp, rank] {
    o->etp_given = etp->count() > 0;
    o->rank_given = rank->count() > 0;
    run_show_groups(*o);
  });
}

MPLAN_REGISTER_COMMAND(20, add_show_groups);

}  // namespace
}  // namespace mplan::cli
