// ParallelConfig JSON adapter and enum spellings (the plan file's, which follow Megatron-LM).
#include "src/parallel/parallel_config.hpp"

#include <algorithm>

#include "src/common/bit_names.hpp"
#include "src/common/error.hpp"

namespace mplan {

const char* to_string(ScheduleKind s) {
  switch (s) {
    case ScheduleKind::kGpipe:
      return "gpipe";
    case ScheduleKind::k1F1B:
      return "1f1b";
    case ScheduleKind::kInterleaved:
      return "interleaved";
    case ScheduleKind::kZbH1:
      return "zb-h1";
  }
  return "?";
}

const char* to_string(Recompute r) {
  switch (r) {
    case Recompute::kNone:
      return "none";
    case Recompute::kSelective:
      return "selective";
    case Recompute::kFull:
      return "full";
  }
  return "?";
}

const char* to_string(RecomputeMethod r) {
  return r == RecomputeMethod::kUniform ? "uniform" : "block";
}

const char* to_string(DpSharding d) {
  switch (d) {
    case DpSharding::kNoShard:
      return "no_shard";
    case DpSharding::kOptim:
      return "optim";
    case DpSharding::kOptimGrads:
      return "optim_grads";
    case DpSharding::kOptimGradsParams:
      return "optim_grads_params";
  }
  return "?";
}

DpSharding dp_sharding_from_string(const std::string& s, const std::string& field) {
  for (DpSharding d : {DpSharding::kNoShard, DpSharding::kOptim, DpSharding::kOptimGrads,
                       DpSharding::kOptimGradsParams})
    if (s == to_string(d)) return d;
  throw Error(cat(
      field, ": must be one of no_shard, optim, optim_grads, optim_grads_params; got \"", s, "\""));
}

ScheduleKind schedule_kind_from_string(const std::string& s, const std::string& field) {
  if (s == "gpipe") return ScheduleKind::kGpipe;
  if (s == "1f1b") return ScheduleKind::k1F1B;
  if (s == "interleaved") return ScheduleKind::kInterleaved;
  if (s == "zb-h1") return ScheduleKind::kZbH1;
  throw Error(cat(field, ": must be one of gpipe, 1f1b, interleaved, zb-h1; got \"", s, "\""));
}

Recompute recompute_from_string(const std::string& s, const std::string& field) {
  if (s == "none") return Recompute::kNone;
  if (s == "selective") return Recompute::kSelective;
  if (s == "full") return Recompute::kFull;
  throw Error(cat(field, ": must be one of none, selective, full; got \"", s, "\""));
}

namespace {
constexpr const char* kRecomputeModuleNames[kNumRecomputeModules] = {
    "core_attn", "moe_act", "layernorm", "mla_up_proj", "mlp", "moe", "shared_experts"};
}  // namespace

std::vector<std::string> recompute_module_names(uint32_t bits) {
  return names_of_bits(kRecomputeModuleNames, bits);
}

uint32_t recompute_modules_from_names(const std::vector<std::string>& names,
                                      const std::string& field) {
  return bits_of_names(kRecomputeModuleNames, names, field);
}

const char* to_string(CpCommType c) {
  switch (c) {
    case CpCommType::kP2p:
      return "p2p";
    case CpCommType::kAllGather:
      return "all_gather";
    case CpCommType::kA2a:
      return "a2a";
    case CpCommType::kA2aP2p:
      return "a2a+p2p";
  }
  return "?";
}

CpCommType cp_comm_type_from_string(const std::string& s, const std::string& field) {
  if (s == "p2p") return CpCommType::kP2p;
  if (s == "all_gather" || s == "allgather") return CpCommType::kAllGather;
  if (s == "a2a") return CpCommType::kA2a;
  if (s == "a2a+p2p") return CpCommType::kA2aP2p;
  throw Error(cat(field, ": must be one of p2p, all_gather, a2a, a2a+p2p; got \"", s, "\""));
}

int64_t cp_a2a_size(const ParallelConfig& p) {
  if (p.cp <= 1) return 1;
  if (p.cp_comm_type == CpCommType::kA2a) return p.cp;
  if (p.cp_comm_type == CpCommType::kA2aP2p && !p.hierarchical_context_parallel_sizes.empty())
    return std::clamp<int64_t>(p.hierarchical_context_parallel_sizes[0], 1, p.cp);
  return 1;
}

int64_t ParallelConfig::expert_dp() const {
  int64_t denom = etp * ep * pp;
  return denom > 0 ? world_size() / denom : 0;
}

namespace {

// Ranges of the layout fields: each parallel size up to 1024 (a model has at most 1024 layers,
// 1024 heads and 1024 experts, src/model), data parallel up to 2^20; so tp·cp·pp·dp stays far
// inside int64 and validate() can compare it with the cluster. Batches up to 2^24 sequences
// (today's largest runs use a few thousand).
constexpr IntRange kDegree{1, 1024};
constexpr IntRange kDataParallel{1, 1 << 20};
constexpr IntRange kBatch{1, 1 << 24};

// The virtual stage count a layout implies (Megatron: num_stages // pp), 1 without a layout or
// when its stage count is not a multiple of pp (validate() then names that rule).
int64_t layout_vpp(const std::optional<PipelineLayout>& layout, int64_t pp) {
  if (!layout || pp < 1 || layout->num_stages() % pp != 0) return 1;
  return std::clamp<int64_t>(layout->num_stages() / pp, kDegree.min, kDegree.max);
}

}  // namespace

ParallelConfig parallel_from_json(const Json& j, const std::string& path) {
  JsonObject o(j, path);
  ParallelConfig p;
  p.tp = o.get_int("tp", 1, kDegree);
  p.cp = o.get_int("cp", 1, kDegree);
  p.ep = o.get_int("ep", 1, kDegree);
  p.etp = o.get_int("etp", p.tp, kDegree);  // Megatron: expert tp defaults to tp
  p.pp = o.get_int("pp", 1, kDegree);
  if (o.has("pipeline_model_parallel_layout"))
    p.pipeline_model_parallel_layout = parse_pipeline_layout(
        o.get_string("pipeline_model_parallel_layout"), o.field("pipeline_model_parallel_layout"));
  p.vpp = o.get_int("vpp", layout_vpp(p.pipeline_model_parallel_layout, p.pp), kDegree);
  p.dp = o.get_int("dp", kDataParallel);
  p.sequence_parallel = o.get_bool("sequence_parallel", false);
  p.order = o.get_string("order", p.order);
  p.micro_batch_size = o.get_int("micro_batch_size", kBatch);
  p.global_batch_size = o.get_int("global_batch_size", kBatch);
  p.schedule = o.has("schedule")
                   ? schedule_kind_from_string(o.get_string("schedule"), o.field("schedule"))
                   : (p.vpp > 1 ? ScheduleKind::kInterleaved : ScheduleKind::k1F1B);
  p.microbatch_group_size_per_vp_stage = o.get_int("microbatch_group_size_per_vp_stage", 0, kBatch);
  p.recompute = o.has("recompute")
                    ? recompute_from_string(o.get_string("recompute"), o.field("recompute"))
                    : Recompute::kNone;
  p.recompute_method = o.get_enum("recompute_method", {"uniform", "block"}, "uniform") == "uniform"
                           ? RecomputeMethod::kUniform
                           : RecomputeMethod::kBlock;
  p.recompute_num_layers = o.get_int("recompute_num_layers", 1, kDegree);
  if (o.has("recompute_modules")) {
    const Json& v = o.raw("recompute_modules");
    if (!v.is_array() || v.size() > 16)
      throw Error(cat(o.field("recompute_modules"),
                      ": must be a list of module names (at most 16), got ", json_excerpt(v)));
    std::vector<std::string> names;
    for (const Json& e : v) {
      if (!e.is_string())
        throw Error(cat(o.field("recompute_modules"), ": must be a list of module names, got ",
                        json_excerpt(e)));
      names.push_back(e.get<std::string>());
    }
    p.recompute_modules = recompute_modules_from_names(names, o.field("recompute_modules"));
  }
  p.distributed_optimizer = o.get_bool("distributed_optimizer", false);
  p.overlap_grad_reduce = o.get_bool("overlap_grad_reduce", true);
  p.overlap_param_gather = o.get_bool("overlap_param_gather", true);
  p.decoder_first_pipeline_num_layers =
      o.get_optional_int("decoder_first_pipeline_num_layers", kDegree);
  p.decoder_last_pipeline_num_layers =
      o.get_optional_int("decoder_last_pipeline_num_layers", kDegree);
  p.account_for_embedding_in_pipeline_split =
      o.get_bool("account_for_embedding_in_pipeline_split", false);
  p.account_for_loss_in_pipeline_split = o.get_bool("account_for_loss_in_pipeline_split", false);
  p.use_megatron_fsdp = o.get_bool("use_megatron_fsdp", false);
  if (o.has("data_parallel_sharding_strategy"))
    p.data_parallel_sharding_strategy =
        dp_sharding_from_string(o.get_string("data_parallel_sharding_strategy"),
                                o.field("data_parallel_sharding_strategy"));
  p.fsdp_double_buffer = o.get_bool("fsdp_double_buffer", false);
  p.num_distributed_optimizer_instances =
      o.get_int("num_distributed_optimizer_instances", 1, kDataParallel);
  p.tp_comm_overlap = o.get_bool("tp_comm_overlap", false);
  if (o.has("cp_comm_type"))
    p.cp_comm_type =
        cp_comm_type_from_string(o.get_string("cp_comm_type"), o.field("cp_comm_type"));
  if (o.has("hierarchical_context_parallel_sizes")) {
    const Json& v = o.raw("hierarchical_context_parallel_sizes");
    const std::string f = o.field("hierarchical_context_parallel_sizes");
    if (!v.is_array() || v.size() != 2)
      throw Error(cat(f, ": must be a list of two sizes [all-to-all, p2p], got ", json_excerpt(v)));
    for (size_t i = 0; i < 2; ++i) {
      if (!v[i].is_number_integer() || v[i].get<int64_t>() < kDegree.min ||
          v[i].get<int64_t>() > kDegree.max)
        throw Error(cat(f, "[", i, "]: must be an integer between ", kDegree.min, " and ",
                        kDegree.max, ", got ", json_excerpt(v[i])));
      p.hierarchical_context_parallel_sizes.push_back(v[i].get<int64_t>());
    }
  }
  p.overlap_p2p_comm = o.get_bool("overlap_p2p_comm", false);
  p.overlap_p2p_comm_warmup_flush = o.get_bool("overlap_p2p_comm_warmup_flush", false);
  o.finish();
  return p;
}

Json parallel_to_json(const ParallelConfig& p) {
  Json j;
  j["tp"] = p.tp;
  j["cp"] = p.cp;
  j["ep"] = p.ep;
  j["etp"] = p.etp;
  j["pp"] = p.pp;
  j["vpp"] = p.vpp;
  j["dp"] = p.dp;
  j["sequence_parallel"] = p.sequence_parallel;
  j["order"] = p.order;
  j["micro_batch_size"] = p.micro_batch_size;
  j["global_batch_size"] = p.global_batch_size;
  j["schedule"] = to_string(p.schedule);
  if (p.microbatch_group_size_per_vp_stage > 0)
    j["microbatch_group_size_per_vp_stage"] = p.microbatch_group_size_per_vp_stage;
  j["recompute"] = to_string(p.recompute);
  j["recompute_method"] = to_string(p.recompute_method);
  j["recompute_num_layers"] = p.recompute_num_layers;
  j["distributed_optimizer"] = p.distributed_optimizer;
  j["overlap_grad_reduce"] = p.overlap_grad_reduce;
  j["overlap_param_gather"] = p.overlap_param_gather;
  if (p.decoder_first_pipeline_num_layers)
    j["decoder_first_pipeline_num_layers"] = *p.decoder_first_pipeline_num_layers;
  if (p.decoder_last_pipeline_num_layers)
    j["decoder_last_pipeline_num_layers"] = *p.decoder_last_pipeline_num_layers;
  if (p.pipeline_model_parallel_layout)
    j["pipeline_model_parallel_layout"] = p.pipeline_model_parallel_layout->text;
  if (p.account_for_embedding_in_pipeline_split)
    j["account_for_embedding_in_pipeline_split"] = true;
  if (p.account_for_loss_in_pipeline_split) j["account_for_loss_in_pipeline_split"] = true;
  if (p.use_megatron_fsdp) j["use_megatron_fsdp"] = true;
  if (p.use_megatron_fsdp || p.data_parallel_sharding_strategy != DpSharding::kOptimGradsParams)
    j["data_parallel_sharding_strategy"] = to_string(p.data_parallel_sharding_strategy);
  if (p.fsdp_double_buffer) j["fsdp_double_buffer"] = true;
  if (p.num_distributed_optimizer_instances != 1)
    j["num_distributed_optimizer_instances"] = p.num_distributed_optimizer_instances;
  if (p.tp_comm_overlap) j["tp_comm_overlap"] = true;
  if (p.cp_comm_type != CpCommType::kP2p) j["cp_comm_type"] = to_string(p.cp_comm_type);
  if (!p.hierarchical_context_parallel_sizes.empty())
    j["hierarchical_context_parallel_sizes"] = p.hierarchical_context_parallel_sizes;
  if (p.overlap_p2p_comm) j["overlap_p2p_comm"] = true;
  if (p.overlap_p2p_comm_warmup_flush) j["overlap_p2p_comm_warmup_flush"] = true;
  if (p.recompute_modules != kDefaultRecomputeModules)
    j["recompute_modules"] = recompute_module_names(p.recompute_modules);
  return j;
}

}  // namespace mplan
