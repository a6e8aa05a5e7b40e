// validate(): the cross-field rules of a plan, in Megatron-LM's terms. Each rule reports the
// field it concerns and states the rule with the numbers involved.
#include "src/plan/validate.hpp"

#include "src/common/error.hpp"
#include "src/schedule/plan_rules.hpp"

namespace mplan {

std::string to_string(const Violation& v) { return v.field + ": " + v.message; }

void require_valid(const Plan& plan) {
  auto v = validate(plan);
  if (!v.empty()) throw Error(to_string(v.front()));
}

namespace {

struct Collector {
  std::vector<Violation> out;
  template <class... Args>
  void add(const std::string& field, const Args&... args) {
    out.push_back({field, cat(args...)});
  }
};

void check_model_vs_parallel(const Plan& plan, Collector& c) {
  const ModelSpec& m = plan.model;
  const ParallelConfig& p = plan.parallel;
  if (m.num_attention_heads % p.tp != 0)
    c.add("parallel.tp", "num_attention_heads (", m.num_attention_heads,
          ") must be divisible by tp (", p.tp, ")");
  if (m.num_query_groups % p.tp != 0)
    c.add("parallel.tp", "num_query_groups (", m.num_query_groups, ") must be divisible by tp (",
          p.tp, ")");
  if (p.sequence_parallel && m.seq_length % p.tp != 0)
    c.add("parallel.sequence_parallel", "seq_length (", m.seq_length,
          ") must be divisible by tp (", p.tp, ") with sequence parallelism");
  if (p.cp > 1 && m.seq_length % (2 * p.cp) != 0)
    c.add("parallel.cp", "seq_length (", m.seq_length, ") must be divisible by 2 x cp (", 2 * p.cp,
          ") for causal load balancing");
  if (p.sequence_parallel && p.cp > 1 && m.seq_length % (2 * p.cp * p.tp) != 0)
    c.add("parallel.cp", "seq_length (", m.seq_length, ") must be divisible by 2 x cp x tp (",
          2 * p.cp * p.tp, ") with context and sequence parallelism");
  if (p.vpp > 1 && p.pp == 1)
    c.add("parallel.vpp", "vpp (", p.vpp, ") > 1 needs pp > 1 (Megatron: virtual pipeline "
          "parallelism only with pipeline parallelism)");

  // Layers per stage: even split, or Megatron's uneven first/last stage.
  int64_t first = p.decoder_first_pipeline_num_layers.value_or(-1);
  int64_t last = p.decoder_last_pipeline_num_layers.value_or(-1);
  if (first < 0 && last < 0) {
    if (m.num_layers % (p.pp * p.vpp) != 0)
      c.add("parallel.pp", "num_layers (", m.num_layers, ") must be divisible by pp x vpp (",
            p.pp * p.vpp, "), or set decoder_first_pipeline_num_layers / "
            "decoder_last_pipeline_num_layers for an uneven split");
  } else {
    if (p.pp == 1) {
      c.add(first >= 0 ? "parallel.decoder_first_pipeline_num_layers"
                       : "parallel.decoder_last_pipeline_num_layers",
            "an uneven pipeline split needs pp > 1");
    } else {
      int64_t rest = m.num_layers - std::max<int64_t>(first, 0) - std::max<int64_t>(last, 0);
      int64_t middle = p.pp - (first >= 0) - (last >= 0);
      std::string f = first >= 0 ? "parallel.decoder_first_pipeline_num_layers"
                                 : "parallel.decoder_last_pipeline_num_layers";
      if (rest < 0)
        c.add(f, "first + last stage layers exceed num_layers (", m.num_layers, ")");
      else if (middle == 0 && rest != 0)
        c.add(f, "with pp 2 both stages are set, so first + last must equal num_layers (",
              m.num_layers, ")");
      else if (middle > 0 && rest % (middle * p.vpp) != 0)
        c.add(f, "the remaining ", rest, " layers must be divisible by the ", middle,
              " other stages x vpp (", middle * p.vpp, ")");
      if (p.vpp > 1) {
        if (first >= 0 && first % p.vpp != 0)
          c.add("parallel.decoder_first_pipeline_num_layers", "(", first,
                ") must be divisible by vpp (", p.vpp, ")");
        if (last >= 0 && last % p.vpp != 0)
          c.add("parallel.decoder_last_pipeline_num_layers", "(", last,
                ") must be divisible by vpp (", p.vpp, ")");
      }
    }
  }

  // Experts.
  if (m.moe) {
    if (m.moe->num_experts % p.ep != 0)
      c.add("parallel.ep", "num_experts (", m.moe->num_experts, ") must be divisible by ep (",
            p.ep, ")");
  } else if (p.ep > 1) {
    c.add("parallel.ep", "ep (", p.ep, ") > 1 needs an MoE model (model.moe is null)");
  }
  int64_t expert_grid = p.etp * p.ep * p.pp;
  if (p.world_size() % expert_grid != 0)
    c.add("parallel.ep", "world size (", p.world_size(), ") must be divisible by etp x ep x pp (",
          expert_grid, ")");
}

void check_batch(const Plan& plan, Collector& c) {
  const ParallelConfig& p = plan.parallel;
  int64_t per_step = p.micro_batch_size * p.dp;
  if (p.global_batch_size % per_step != 0)
    c.add("parallel.global_batch_size", "global batch size (", p.global_batch_size,
          ") is not divisible by micro batch size (", p.micro_batch_size,
          ") times data parallel size (", p.dp, ")");
}

void check_cluster(const Plan& plan, Collector& c) {
  const ClusterSpec& cl = plan.cluster;
  int64_t world = plan.world_size();
  if (world > cl.gpus_per_node && world % cl.gpus_per_node != 0)
    c.add("parallel", "GPU count tp x cp x pp x dp = ", world, " is not a whole number of nodes (",
          cl.gpus_per_node, " GPUs per node on cluster '", cl.name, "')");
  if (cl.num_nodes > 0 && plan.num_nodes() > cl.num_nodes)
    c.add("parallel", "GPU count tp x cp x pp x dp = ", world, " needs ", plan.num_nodes(),
          " nodes; cluster '", cl.name, "' has ", cl.num_nodes);
  if (plan.num_nodes() > 1 && !cl.has_inter_node())
    c.add("cluster.inter_node", "the plan spans ", plan.num_nodes(),
          " nodes but the cluster describes no network between nodes");
}

}  // namespace

std::vector<Violation> validate(const Plan& plan) {
  Collector c;
  check_model_vs_parallel(plan, c);
  check_cluster(plan, c);
  check_batch(plan, c);
  append_schedule_violations(plan, c.out);
  return c.out;
}

}  // namespace mplan
