// `mplan import --megatron FILE|-`: reads a Megatron-LM launch script (bash arrays, line
// continuations, variables, torchrun) or a bare argument list and writes the equivalent plan.
// The summary goes to stdout; warnings and the arguments mplan does not model go to stderr.
#include <algorithm>
#include <charconv>
#include <filesystem>
#include <iostream>
#include <iterator>
#include <optional>

#include "cli/command_registry.hpp"
#include "cli/output.hpp"
#include "src/batch/microbatch_calculator.hpp"
#include "src/common/embedded_configs.hpp"
#include "src/common/error.hpp"
#include "src/interop/megatron/megatron_import.hpp"
#include "src/plan/plan.hpp"

namespace mplan::cli {
namespace {

struct ImportOptions {
  std::string path;
  std::string cluster;  // empty: the script's "# mplan: cluster=" line, else the default
  std::string out = "plan.json";
  std::vector<std::string> vars;
  int64_t gpus = 0;
  int64_t vocab_size = 0;
  std::string name;
  bool json = false;
};

std::map<std::string, std::string> parse_vars(const std::vector<std::string>& vars) {
  std::map<std::string, std::string> out;
  for (const auto& v : vars) {
    size_t eq = v.find('=');
    std::string name = eq == std::string::npos ? "" : v.substr(0, eq);
    bool digits = !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
      return std::isdigit(static_cast<unsigned char>(c));
    });
    bool ident =
        !name.empty() && (std::isalpha(static_cast<unsigned char>(name[0])) || name[0] == '_') &&
        std::all_of(name.begin(), name.end(),
                    [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
    if (!(digits && name != "0") && !ident)
      throw Error(
          cat("--var: expected NAME=VALUE, NAME a shell variable or a positional number "
              "(1 for $1), got '",
              v, "'"));
    out[name] = v.substr(eq + 1);
  }
  return out;
}

std::string shortest(double v) {
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

std::string on_off(bool b) { return b ? "on" : "off"; }

const char* cluster_source_name(ClusterSource c) {
  switch (c) {
    case ClusterSource::kGiven:
      return "given";
    case ClusterSource::kScript:
      return "script";
    case ClusterSource::kDefault:
      break;
  }
  return "default";
}

const char* cluster_note(ClusterSource c) {
  switch (c) {
    case ClusterSource::kGiven:
      return "";
    case ClusterSource::kScript:
      return " (the script's '# mplan: cluster' line)";
    case ClusterSource::kDefault:
      break;
  }
  return " (the default cluster; --cluster to change)";
}

void print_list(std::ostream& os, const std::string& title, const std::vector<std::string>& l) {
  if (l.empty()) return;
  os << title << " (" << l.size() << "):\n";
  for (const auto& s : l) os << "  " << s << "\n";
}

// The library's options from the command line's.
MegatronImportOptions import_options(const ImportOptions& o) {
  MegatronImportOptions io;
  if (!o.cluster.empty()) io.cluster = load_cluster(o.cluster, "--cluster");
  io.vars = parse_vars(o.vars);
  io.gpus = o.gpus;
  io.vocab_size = o.vocab_size;
  if (!o.name.empty()) {
    io.model_name = o.name;
  } else if (o.path != "-") {
    io.model_name = std::filesystem::path(o.path).stem().string();
  }
  return io;
}

void print_json_report(const ImportOptions& o, const std::string& shown, const MegatronImport& r) {
  const Plan& plan = r.plan;
  Json j;
  j["schema_version"] = 1;
  j["source"] = shown;
  j["out"] = o.out;
  j["model"] = plan.model.name;
  j["matched_preset"] = r.matched_preset.empty() ? Json(nullptr) : Json(r.matched_preset);
  j["cluster"] = plan.cluster.name;
  j["cluster_source"] = cluster_source_name(r.cluster_source);
  j["world_size"] = plan.world_size();
  j["num_nodes"] = plan.num_nodes();
  j["script_world_size"] = r.script_world_size > 0 ? Json(r.script_world_size) : Json(nullptr);
  j["parallel"] = parallel_to_json(plan.parallel);
  j["warnings"] = r.warnings;
  j["not_modelled"] = r.not_modelled;
  j["ignored"] = r.ignored;
  j["undefined"] = r.undefined;
  std::cout << j.dump(2) << "\n";
}

// The plan in six lines: model, layout, GPUs, batch, schedule, training.
void print_summary(std::ostream& os, const MegatronImport& r) {
  const Plan& plan = r.plan;
  const ModelSpec& m = plan.model;
  const ParallelConfig& p = plan.parallel;
  const TrainingConfig& t = plan.training;
  os << "  model     " << m.name
     << (r.matched_preset.empty() ? " (no preset has this shape)" : " (matches the preset)") << ": "
     << m.num_layers << " layers, hidden " << m.hidden_size << ", " << m.num_attention_heads
     << " heads (" << m.num_query_groups << " query groups), ffn " << m.ffn_hidden_size
     << ", vocab " << m.vocab_size << ", seq " << m.seq_length << ", " << to_string(m.activation)
     << ", " << to_string(m.normalization) << ", " << to_string(m.position_embedding);
  if (m.moe) os << ", " << m.moe->num_experts << " experts top-" << m.moe->topk;
  os << "\n";
  os << "  layout    tp " << p.tp << ", cp " << p.cp << ", pp " << p.pp << ", vpp " << p.vpp
     << ", dp " << p.dp << ", ep " << p.ep << ", etp " << p.etp << ", sequence parallel "
     << on_off(p.sequence_parallel) << ", order " << p.order << "\n";
  os << "  GPUs      " << plan.world_size() << " = " << plan.num_nodes() << " node"
     << (plan.num_nodes() > 1 ? "s" : "") << " of " << plan.cluster.name
     << cluster_note(r.cluster_source);
  if (r.script_world_size > 0 && r.script_world_size != plan.world_size())
    os << "; the script launches " << r.script_world_size;
  os << "\n";
  os << "  batch     micro " << p.micro_batch_size << ", global " << p.global_batch_size;
  if (const std::optional<int64_t> m =
          microbatches_if_valid(p.global_batch_size, p.micro_batch_size, p.dp))
    os << " (" << *m << " micro-batches per step)";
  if (t.rampup_batch_size)
    os << "; ramp-up from " << t.rampup_batch_size->start << " by "
       << t.rampup_batch_size->increment << " over " << t.rampup_batch_size->samples << " samples";
  os << "\n";
  os << "  schedule  " << to_string(p.schedule) << "; recompute " << to_string(p.recompute);
  if (p.recompute == Recompute::kFull)
    os << " (" << to_string(p.recompute_method) << ", " << p.recompute_num_layers << " layers)";
  os << "; distributed optimizer " << on_off(p.distributed_optimizer) << "; overlap grad reduce "
     << on_off(p.overlap_grad_reduce) << "\n";
  os << "  training  " << to_string(t.precision) << ", lr " << shortest(t.lr) << ", weight decay "
     << shortest(t.weight_decay) << ", seed " << t.seed;
  if (t.train_iters > 0) os << ", " << t.train_iters << " iterations";
  os << "\n";
}

void run_import(const ImportOptions& o) {
  if (o.json && o.out == "-")
    throw Error("--json: the report and --out - would share standard output; give --out FILE");
  std::string text;
  if (o.path == "-") {
    text.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  } else {
    text = read_text_file(o.path, "--megatron");
  }
  const std::string shown = o.path == "-" ? "standard input" : o.path;
  const MegatronImportOptions io = import_options(o);
  MegatronImport r;
  try {
    r = import_megatron(text, io);
  } catch (const Error& e) {
    throw Error(cat(shown, ": ", e.what()));
  }
  std::string plan_text = plan_to_json(r.plan).dump(2) + "\n";
  if (o.out == "-") {
    std::cout << plan_text;
  } else {
    write_text_file(o.out, plan_text, "--out");
  }
  if (o.json) return print_json_report(o, shown, r);

  std::ostream& os = o.out == "-" ? std::cerr : std::cout;
  os << "imported " << shown << " -> " << (o.out == "-" ? "standard output" : o.out) << "\n";
  print_summary(os, r);
  for (const auto& w : r.warnings) std::cerr << "mplan: warning: " << w << "\n";
  print_list(std::cerr, "not modelled by mplan (may change time or memory)", r.not_modelled);
  print_list(std::cerr, "ignored (no effect on a training step)", r.ignored);
  print_list(std::cerr, "values the script does not define", r.undefined);
}

void add_import(CLI::App& app) {
  auto opts = std::make_shared<ImportOptions>();
  auto* cmd = app.add_subcommand(
      "import", "Read a Megatron-LM launch script or argument list; write the equivalent plan");
  cmd->add_option("--megatron", opts->path,
                  "Megatron-LM launch script (bash, torchrun ... pretrain_gpt.py ...) or argument "
                  "list; '-' reads standard input")
      ->required();
  cmd->add_option("--cluster", opts->cluster,
                  std::string("Cluster preset or JSON file for the plan (default: the script's "
                              "'# mplan: cluster=' line, which mplan export writes, else ") +
                      kDefaultImportCluster + ", where Megatron-LM's papers measured)");
  cmd->add_option("--out", opts->out, "Plan file to write (default plan.json; '-' for stdout)");
  cmd->add_option("--var", opts->vars,
                  "NAME=VALUE: a shell variable for the script; 1=VALUE gives $1; a named one "
                  "overrides the script's own assignment (e.g. NUM_NODES=16). Repeatable")
      ->take_last()
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd->add_option("--gpus", opts->gpus,
                  "Size the plan for this many GPUs instead of the script's process count")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--vocab-size", opts->vocab_size,
                  "Vocabulary when the script gives no --vocab-size and its tokenizer is not known")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--name", opts->name,
                  "Model name in the plan when no preset has its shape (default: the file's name)");
  cmd->add_flag("--json", opts->json,
                "Print the report as JSON {model, matched_preset, cluster, cluster_source, "
                "world_size, parallel, warnings, not_modelled, ignored, undefined} on stdout");
  cmd->footer(
      "Understands bash arrays over many lines (with comments inside), line continuations,\n"
      "VAR=value, $VAR, ${VAR}, ${VAR:-default}, ${ARR[@]}, $((arithmetic)), if/else on simple\n"
      "tests, and torchrun's --nproc_per_node/--nnodes. Positional arguments ($1 ...) have no\n"
      "value unless given with --var; an argument that shapes the plan and depends on one is an\n"
      "error that says what is missing. Where the process count disagrees with the layout, the\n"
      "plan is sized by the layout and a warning says so. '# mplan: KEY=VALUE' lines (written by\n"
      "mplan export) give the cluster and mark a --train-iters the plan did not set, so that\n"
      "export | import gives the plan back. Exit status 2 on bad input.\n"
      "Examples:\n"
      "  mplan import --megatron train_gpt3_175b_distributed.sh --out gpt3.json\n"
      "  mplan import --megatron train.sh --var NUM_NODES=16 --cluster dgx-h100\n"
      "  mplan import --megatron args.txt --gpus 64        a bare argument list, sized for 64 "
      "GPUs\n"
      "  mplan export --megatron best.json | mplan import --megatron - --out again.json");
  cmd->callback([opts] { run_import(*opts); });
}

MPLAN_REGISTER_COMMAND(82, add_import);

}  // namespace
}  // namespace mplan::cli
