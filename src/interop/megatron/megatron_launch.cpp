// Rendering of a MegatronLaunch: the torchrun script, the argument list and JSON.
#include "src/interop/megatron/megatron_launch.hpp"

#include <algorithm>
#include <cctype>
#include <string_view>

#include "src/common/error.hpp"

namespace mplan {

std::vector<std::string> megatron_argv(const MegatronLaunch& launch) {
  std::vector<std::string> out;
  for (const auto& g : launch.groups)
    for (const auto& a : g.args) {
      out.push_back(a.name);
      out.insert(out.end(), a.values.begin(), a.values.end());
    }
  return out;
}

std::string shell_quote(const std::string& w) {
  bool plain = !w.empty() && std::all_of(w.begin(), w.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) ||
           std::string_view("_./:=,+@%-").find(c) != std::string_view::npos;
  });
  if (plain) return w;
  std::string q = "'";
  for (char c : w) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

namespace {
std::string arg_line(const MegatronArg& a) {
  std::string s = a.name;
  for (const auto& v : a.values) {
    s += ' ';
    s += shell_quote(v);
  }
  return s;
}
}  // namespace

std::string render_megatron_args(const MegatronLaunch& launch) {
  std::string out;
  for (const auto& g : launch.groups)
    for (const auto& a : g.args) out += arg_line(a) + "\n";
  return out;
}

std::string render_megatron_torchrun(const MegatronLaunch& L, const std::string& title) {
  std::string s = "#!/bin/bash\n";
  s += "# " + title + "\n";
  s += cat("# Megatron-LM launch written by mplan export: ", L.nnodes * L.nproc_per_node,
           " GPUs as ", L.nnodes, " node", L.nnodes > 1 ? "s" : "", " x ", L.nproc_per_node,
           " processes.\n");
  s += "# Run it from the Megatron-LM repository root";
  s += L.nnodes > 1 ? " on every node, with NODE_RANK (0 .. NUM_NODES-1) and MASTER_ADDR set.\n"
                    : ".\n";
  for (const auto& n : L.notes) s += "# note: " + n + "\n";
  if (!L.directives.empty())
    s += "# mplan import reads the lines below to give the plan back (export | import).\n";
  for (const auto& [k, v] : L.directives) s += "# mplan: " + k + "=" + v + "\n";
  s += "\n";
  for (const auto& [k, v] : L.env) s += "export " + k + "=" + shell_quote(v) + "\n";
  s += cat("\nGPUS_PER_NODE=", L.nproc_per_node, "\nNUM_NODES=", L.nnodes, "\n");
  s += "NODE_RANK=${NODE_RANK:-0}\nMASTER_ADDR=${MASTER_ADDR:-localhost}\n"
       "MASTER_PORT=${MASTER_PORT:-6000}\n\n";
  s += "DISTRIBUTED_ARGS=(\n    --nproc_per_node $GPUS_PER_NODE\n    --nnodes $NUM_NODES\n"
       "    --node_rank $NODE_RANK\n    --master_addr $MASTER_ADDR\n"
       "    --master_port $MASTER_PORT\n)\n";
  for (const auto& g : L.groups) {
    s += "\n" + g.name + "=(\n";
    for (const auto& a : g.args) s += "    " + arg_line(a) + "\n";
    s += ")\n";
  }
  s += "\ntorchrun \"${DISTRIBUTED_ARGS[@]}\" " + L.script;
  for (const auto& g : L.groups) s += " \\\n    \"${" + g.name + "[@]}\"";
  s += "\n";
  return s;
}

Json megatron_launch_to_json(const MegatronLaunch& L) {
  Json j;
  j["schema_version"] = 1;
  j["launcher"] = {{"program", "torchrun"},
                   {"nproc_per_node", L.nproc_per_node},
                   {"nnodes", L.nnodes},
                   {"world_size", L.nproc_per_node * L.nnodes}};
  Json env = Json::object();
  for (const auto& [k, v] : L.env) env[k] = v;
  j["env"] = env;
  j["script"] = L.script;
  Json groups = Json::object();
  for (const auto& g : L.groups) {
    Json a = Json::array();
    for (const auto& arg : g.args) {
      a.push_back(arg.name);
      for (const auto& v : arg.values) a.push_back(v);
    }
    groups[g.name] = a;
  }
  j["groups"] = groups;
  j["argv"] = megatron_argv(L);
  j["notes"] = L.notes;
  Json directives = Json::object();
  for (const auto& [k, v] : L.directives) directives[k] = v;
  j["mplan"] = directives;
  return j;
}

std::vector<MplanDirective> read_mplan_directives(const std::string& text) {
  std::vector<MplanDirective> out;
  int line_no = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string_view line(text.data() + pos, end - pos);
    pos = end + 1;
    ++line_no;
    size_t b = line.find_first_not_of(" \t");
    if (b == std::string_view::npos || line.substr(b, 8) != "# mplan:") continue;
    std::string_view rest = line.substr(b + 8);
    size_t k = rest.find_first_not_of(" \t");
    rest = k == std::string_view::npos ? std::string_view{} : rest.substr(k);
    while (!rest.empty() && (rest.back() == ' ' || rest.back() == '\t' || rest.back() == '\r'))
      rest.remove_suffix(1);
    size_t eq = rest.find('=');
    MplanDirective d;
    d.line = line_no;
    if (eq != std::string_view::npos && eq > 0) {
      d.key = std::string(rest.substr(0, eq));
      d.value = std::string(rest.substr(eq + 1));
    } else {
      d.value = std::string(rest);
    }
    out.push_back(std::move(d));
  }
  return out;
}

}  // namespace mplan
