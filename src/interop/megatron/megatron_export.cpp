// Export: the plan checked (Megatron-LM's rank orders, validate()), torchrun's layout from the
// world size and the cluster's node size, then each array of the script from its table rows.
#include "src/interop/megatron/megatron_export.hpp"

#include "src/common/embedded_configs.hpp"
#include "src/common/error.hpp"
#include "src/interop/megatron/megatron_arg_table.hpp"
#include "src/plan/validate.hpp"

namespace mplan {
namespace {

void check_exportable(const Plan& plan) {
  const std::string& order = plan.parallel.order;
  if (order != kMegatronDefaultOrder && order != kMegatronTpPpDpOrder)
    throw Error(cat("parallel.order: Megatron-LM places ranks only in the order ",
                    kMegatronDefaultOrder, " (default) or ", kMegatronTpPpDpOrder,
                    " (--use-tp-pp-dp-mapping), got \"", order, "\""));
  auto violations = validate(plan);
  if (!violations.empty())
    throw Error(cat(to_string(violations.front()),
                    " (the plan is invalid, so Megatron-LM would refuse it; see mplan validate)"));
}

// The cluster for import to read back: a preset's name when the plan's cluster is that preset,
// else the cluster itself as one line of JSON.
std::string cluster_directive(const ClusterSpec& c) {
  bool preset = false;
  if (!c.name.empty() && !is_file_reference(c.name)) {
    for (const auto& name : preset_names("clusters"))
      if (name == c.name) preset = load_cluster(name) == c;
  }
  return preset ? c.name : cluster_to_json(c).dump();
}

}  // namespace

MegatronLaunch megatron_launch_from_plan(const Plan& plan, const MegatronExportOptions& options) {
  check_exportable(plan);
  MegatronLaunch L;
  const int64_t world = plan.world_size();
  const int64_t gpn = plan.cluster.gpus_per_node;
  L.nproc_per_node = world < gpn ? world : gpn;
  L.nnodes = world < gpn ? 1 : world / gpn;
  // Megatron-LM needs one CUDA connection so that kernels queue in issue order (TP/SP overlap).
  L.env.push_back({"CUDA_DEVICE_MAX_CONNECTIONS", "1"});
  for (ArgGroup g : kExportGroups) {
    MegatronArgGroup group{group_name(g), {}};
    ExportState out{plan, options, group.args, L.notes, L.directives};
    for (const MegatronArgRow& row : megatron_arg_table())
      if (row.group == g && row.write) row.write(row, out);
    if (!group.args.empty()) L.groups.push_back(std::move(group));
  }
  L.directives.insert(L.directives.begin(), {kClusterDirective, cluster_directive(plan.cluster)});
  return L;
}

}  // namespace mplan
