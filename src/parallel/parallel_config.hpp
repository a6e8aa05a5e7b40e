// ParallelConfig: the parallel layout and batch of a plan, with Megatron-LM's meanings.
// GPU count = tp·cp·pp·dp; the expert grid splits the same GPUs as etp·ep·expert_dp·pp.
// Parsing checks types and ranges only; cross-field rules live in validate() (src/plan).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "src/common/json_reader.hpp"
#include "src/parallel/pipeline_layout.hpp"

namespace mplan {

enum class ScheduleKind { kGpipe, k1F1B, kInterleaved, kZbH1 };
enum class Recompute { kNone, kSelective, kFull };
enum class RecomputeMethod { kUniform, kBlock };
// --data-parallel-sharding-strategy of Megatron-FSDP: what each data-parallel rank keeps only a
// 1/d shard of (ZeRO-1: optimizer state; ZeRO-2: + gradients; ZeRO-3: + parameters).
enum class DpSharding { kNoShard, kOptim, kOptimGrads, kOptimGradsParams };
// --recompute-modules (TransformerConfig.recompute_modules): the submodules selective recompute
// runs again, as bits. Megatron's default is core_attn alone.
enum RecomputeModule : uint32_t {
  kRecomputeCoreAttn = 1u << 0,       // core_attn: the attention core (scores, softmax, P·V)
  kRecomputeMoeAct = 1u << 1,         // moe_act: the experts' activation function
  kRecomputeLayernorm = 1u << 2,      // layernorm: input_layernorm and pre_mlp_layernorm
  kRecomputeMlaUpProj = 1u << 3,      // mla_up_proj: MLA's up projections and RoPE
  kRecomputeMlp = 1u << 4,            // mlp: the dense MLP
  kRecomputeMoe = 1u << 5,            // moe: the whole MoE layer
  kRecomputeSharedExperts = 1u << 6,  // shared_experts: the MoE layer's shared experts
};
inline constexpr uint32_t kNumRecomputeModules = 7;
inline constexpr uint32_t kDefaultRecomputeModules = kRecomputeCoreAttn;

const char* to_string(ScheduleKind s);
const char* to_string(Recompute r);
const char* to_string(RecomputeMethod r);
const char* to_string(DpSharding d);
DpSharding dp_sharding_from_string(const std::string& s, const std::string& field);
ScheduleKind schedule_kind_from_string(const std::string& s, const std::string& field);
Recompute recompute_from_string(const std::string& s, const std::string& field);
// Megatron's names of the modules in `bits`, in Megatron's order (core_attn, moe_act, layernorm,
// mla_up_proj, mlp, moe, shared_experts).
std::vector<std::string> recompute_module_names(uint32_t bits);
// The bits of Megatron's module names; an Error naming `field` for any other name.
uint32_t recompute_modules_from_names(const std::vector<std::string>& names,
                                      const std::string& field);
// --cp-comm-type: how context parallelism exchanges keys and values (TransformerConfig
// .cp_comm_type; one type for every layer here, where Megatron also takes one per layer).
enum class CpCommType { kP2p, kAllGather, kA2a, kA2aP2p };
const char* to_string(CpCommType c);  // Megatron's names: p2p, all_gather, a2a, a2a+p2p
// Megatron's names; "allgather" (arguments.py's help text) is read as all_gather.
CpCommType cp_comm_type_from_string(const std::string& s, const std::string& field);

struct ParallelConfig {
  int64_t tp = 1;                  // --tensor-model-parallel-size
  int64_t cp = 1;                  // --context-parallel-size
  int64_t ep = 1;                  // --expert-model-parallel-size
  int64_t etp = 1;                 // --expert-tensor-parallel-size (plan default: tp)
  int64_t pp = 1;                  // --pipeline-model-parallel-size
  int64_t vpp = 1;                 // --virtual-pipeline-model-parallel-size (1 = not interleaved)
  int64_t dp = 1;                  // data parallel size (derived by Megatron from the world size)
  bool sequence_parallel = false;  // --sequence-parallel
  std::string order = "tp-cp-ep-dp-pp";  // RankGenerator order; tp-cp-ep-pp-dp with
                                         // --use-tp-pp-dp-mapping
  int64_t micro_batch_size = 1;          // --micro-batch-size
  int64_t global_batch_size = 0;         // --global-batch-size
  ScheduleKind schedule = ScheduleKind::k1F1B;
  // --microbatch-group-size-per-virtual-pipeline-stage (0 = pp, Megatron's default).
  int64_t microbatch_group_size_per_vp_stage = 0;
  Recompute recompute = Recompute::kNone;                        // --recompute-granularity (+ none)
  RecomputeMethod recompute_method = RecomputeMethod::kUniform;  // --recompute-method
  int64_t recompute_num_layers = 1;                              // --recompute-num-layers
  uint32_t recompute_modules = kDefaultRecomputeModules;         // --recompute-modules (bits)
  bool distributed_optimizer = false;                            // --use-distributed-optimizer
  bool overlap_grad_reduce = true;                               // --overlap-grad-reduce
  bool overlap_param_gather = true;  // --overlap-param-gather (dist. optimizer)
  std::optional<int64_t> decoder_first_pipeline_num_layers;  // uneven first stage
  std::optional<int64_t> decoder_last_pipeline_num_layers;   // uneven last stage
  // --pipeline-model-parallel-layout: every (pipeline rank, virtual stage)'s layers; vpp is its
  // stage count / pp.
  std::optional<PipelineLayout> pipeline_model_parallel_layout;
  // --account-for-embedding-in-pipeline-split / --account-for-loss-in-pipeline-split: the
  // embedding / the output layer and loss count as one layer of the even split.
  bool account_for_embedding_in_pipeline_split = false;
  bool account_for_loss_in_pipeline_split = false;
  // Megatron-FSDP (--use-megatron-fsdp) with --data-parallel-sharding-strategy (Megatron's
  // default optim_grads_params; read only with FSDP) and --fsdp-double-buffer.
  bool use_megatron_fsdp = false;
  DpSharding data_parallel_sharding_strategy = DpSharding::kOptimGradsParams;
  bool fsdp_double_buffer = false;
  // --num-distributed-optimizer-instances: the optimizer state is sharded within dp·cp / n ranks
  // and the n instances all-reduce the gradient shards.
  int64_t num_distributed_optimizer_instances = 1;
  // --tp-comm-overlap: Transformer Engine's userbuffers pipeline the tensor-parallel all-gathers
  // and reduce-scatters with the GEMMs beside them (needs sequence parallelism).
  bool tp_comm_overlap = false;
  // --cp-comm-type (one type for every layer) and --hierarchical-context-parallel-sizes (a2a+p2p:
  // the all-to-all group size, then the p2p ring's; their product is cp).
  CpCommType cp_comm_type = CpCommType::kP2p;
  std::vector<int64_t> hierarchical_context_parallel_sizes;
  // overlap_p2p_comm (Megatron's --no-overlap-p2p-communication turns it off): the interleaved
  // schedule's sends and receives run beside the passes instead of blocking them. Read only with
  // the interleaved schedule (Megatron sets it false for the others). The plan's default is false,
  // the blocking exchange; Megatron's launcher default is true (mplan import writes it).
  bool overlap_p2p_comm = false;
  // --overlap-p2p-communication-warmup-flush: the warm-up and flush phases overlap too.
  bool overlap_p2p_comm_warmup_flush = false;

  bool operator==(const ParallelConfig&) const = default;

  int64_t world_size() const { return tp * cp * pp * dp; }
  // Megatron: expert data parallel = world / (etp · ep · pp).
  int64_t expert_dp() const;
  int64_t group_size_per_vp_stage() const {
    return microbatch_group_size_per_vp_stage > 0 ? microbatch_group_size_per_vp_stage : pp;
  }
};

// The context-parallel all-to-all group size of `p`'s --cp-comm-type: cp for a2a, the first
// hierarchical size for a2a+p2p (1 while it is missing), 1 for p2p and all_gather or cp = 1.
int64_t cp_a2a_size(const ParallelConfig& p);

// Parses the "parallel" object. `schedule` defaults to interleaved when vpp > 1, else 1f1b.
ParallelConfig parallel_from_json(const Json& j, const std::string& path);
Json parallel_to_json(const ParallelConfig& p);

}  // namespace mplan
