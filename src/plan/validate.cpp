// validate(): the cross-field rules of a plan, in Megatron-LM's terms and, where Megatron has
// one, in its words (megatron/training/arguments.py validate_args, TransformerConfig,
// parallel_state, the schedules and the micro-batch calculators). Cheap on the valid path: the
// sweep calls it for every candidate, so a message is only built when a rule is broken.
#include "src/plan/validate.hpp"

#include "src/batch/microbatch_calculator.hpp"
#include "src/common/error.hpp"
#include "src/parallel/rank_grid.hpp"
#include "src/plan/plan_rules.hpp"
#include "src/plan/precision_rules.hpp"
#include "src/plan/variant_rules.hpp"

namespace mplan {

std::string to_string(const Violation& v) { return v.field + ": " + v.message; }

void require_valid(const Plan& plan) {
  auto v = validate(plan);
  if (!v.empty()) throw Error(to_string(v.front()));
}

namespace {

struct Collector {
  std::vector<Violation>& out;
  template <class... Args>
  void add(const char* field, const Args&... args) {
    out.push_back({field, cat(args...)});
  }
};

void check_model(const Plan& plan, Collector& c) {
  const ModelSpec& m = plan.model;
  // arguments.py (any position embedding type).
  if (m.max_position_embeddings < m.seq_length)
    c.add("model.max_position_embeddings", "max_position_embeddings (", m.max_position_embeddings,
          ") must be greater than or equal to seq_length (", m.seq_length, ").");
  // RoPE rotates pairs of dims (i, i + dim/2) of the first dim = int(kv_channels x rotary_percent)
  // of each head, as Megatron's RotaryEmbedding truncates; MLA rotates its own
  // qk_pos_emb_head_dim part instead.
  if (m.position_embedding == PositionEmbedding::kRope && !m.mla) {
    const auto rot_dim =
        static_cast<int64_t>(m.rotary_percent * static_cast<double>(m.kv_channels));
    if (rot_dim < 2 || rot_dim % 2 != 0)
      c.add("model.rotary_percent",
            "int(rotary_percent x kv_channels) must be an even number of dims >= 2 (RoPE rotates "
            "pairs), got int(",
            m.rotary_percent, " x ", m.kv_channels, ") = ", rot_dim);
  }
}

// Limits that keep a plan physical (docs/plan-file.md, "Rules across fields"): no cluster has a
// million GPUs, no micro-batch holds 16 M tokens. They also bound every size derived from a plan.
constexpr int64_t kMaxWorld = int64_t{1} << 20;
constexpr int64_t kMaxMicrobatchTokens = int64_t{1} << 24;

// False when the GPU count is beyond any cluster: the other rules (rank grid, schedule) would
// only repeat it, at a cost that grows with the count.
bool check_cluster(const Plan& plan, Collector& c) {
  const ClusterSpec& cl = plan.cluster;
  const int64_t world = plan.world_size();
  if (world > kMaxWorld) {
    c.add("parallel", "GPU count tp x cp x pp x dp = ", world, " exceeds ", kMaxWorld,
          " (2^20), beyond any cluster");
    return false;
  }
  if (world > cl.gpus_per_node && world % cl.gpus_per_node != 0)
    c.add("parallel", "GPU count tp x cp x pp x dp = ", world, " is not a whole number of nodes (",
          cl.gpus_per_node, " GPUs per node on cluster '", cl.name,
          "'); a plan smaller than a node may use part of one");
  if (cl.num_nodes > 0 && plan.num_nodes() > cl.num_nodes)
    c.add("parallel", "GPU count tp x cp x pp x dp = ", world, " needs ", plan.num_nodes(),
          " nodes; cluster '", cl.name, "' has ", cl.num_nodes);
  if (plan.num_nodes() > 1 && !cl.has_inter_node())
    c.add("cluster.inter_node", "the plan spans ", plan.num_nodes(),
          " nodes but the cluster describes no network between nodes");
  return true;
}

// Megatron's uneven pipeline split (TransformerConfig.__post_init__, "Uneven PP").
void check_uneven_split(const ModelSpec& m, const ParallelConfig& p, Collector& c) {
  const std::optional<int64_t>& first = p.decoder_first_pipeline_num_layers;
  const std::optional<int64_t>& last = p.decoder_last_pipeline_num_layers;
  const char* field = first ? "parallel.decoder_first_pipeline_num_layers"
                            : "parallel.decoder_last_pipeline_num_layers";
  int64_t rest = m.num_layers;
  int64_t middle_stages = p.pp;
  if (first) {
    if (p.vpp > 1 && *first % p.vpp != 0)
      c.add("parallel.decoder_first_pipeline_num_layers",
            "number of layers at first stage: ", *first,
            " must be divisible by virtual pipeline parallel degree ", p.vpp);
    rest -= *first;
    --middle_stages;
  }
  if (last) {
    if (p.vpp > 1 && *last % p.vpp != 0)
      c.add("parallel.decoder_last_pipeline_num_layers", "number of layers at last stage: ", *last,
            " must be divisible by virtual pipeline parallel degree ", p.vpp);
    rest -= *last;
    --middle_stages;
  }
  if (middle_stages < 0) {  // pp 1 with both set: one stage cannot be first and last twice
    c.add(field,
          "decoder_first_pipeline_num_layers and decoder_last_pipeline_num_layers both "
          "set need pp >= 2, got pp ",
          p.pp);
    return;
  }
  if (rest < 0) {
    c.add(field, "the first and last stage layers (", m.num_layers - rest, ") exceed num_layers (",
          m.num_layers, ")");
    return;
  }
  if ((rest != 0) != (middle_stages != 0)) {
    c.add(field, "Mismatch: ", rest, " middle layers remaining but ", middle_stages,
          " middle PP stages available.");
    return;
  }
  if (middle_stages > 0 && rest % middle_stages != 0) {
    c.add(field, "number of layers at middle stage: ", rest,
          " must be divisible by the middle pipeline model parallel size ", middle_stages);
    return;
  }
  if (middle_stages > 0 && p.vpp > 1 && (rest / middle_stages) % p.vpp != 0)
    c.add(field, "number of layers on each middle pipeline rank: ", rest / middle_stages,
          " must be divisible by virtual pipeline parallel degree ", p.vpp);
}

// A free layout (PipelineParallelLayerLayout, arguments.py) or the split that counts the
// embedding and the loss as layers (TransformerConfig.__post_init__ and arguments.py).
void check_pipeline_split_options(const Plan& plan, Collector& c) {
  const ModelSpec& m = plan.model;
  const ParallelConfig& p = plan.parallel;
  const bool emb = p.account_for_embedding_in_pipeline_split;
  const bool loss = p.account_for_loss_in_pipeline_split;
  const bool first_last = p.decoder_first_pipeline_num_layers || p.decoder_last_pipeline_num_layers;
  if (p.pipeline_model_parallel_layout) {
    if (first_last || emb || loss) {
      c.add(
          "parallel.pipeline_model_parallel_layout",
          "pipeline_model_parallel_layout cannot be set with other pipeline layout arguments "
          "(decoder_first/last_pipeline_num_layers, account_for_embedding/loss_in_pipeline_split)");
      return;
    }
    if (auto problem = pipeline_layout_problem(*p.pipeline_model_parallel_layout, p.pp, p.vpp,
                                               m.num_layers, m.mtp_num_layers))
      c.add("parallel.pipeline_model_parallel_layout", *problem);
    return;
  }
  const char* field = emb ? "parallel.account_for_embedding_in_pipeline_split"
                          : "parallel.account_for_loss_in_pipeline_split";
  if (first_last) {
    c.add(field,
          "num_layers_in_first_pipeline_stage and num_layers_in_last_pipeline_stage cannot be set "
          "at the same time with account_for_embedding_in_pipeline_split and "
          "account_for_loss_in_pipeline_split");
    return;
  }
  const int64_t total = m.num_layers + (emb ? 1 : 0) + (loss ? 1 : 0);
  if (total % p.pp != 0) {
    c.add(field, "num_layers: ", total,
          " after enable account_for_embedding_in_pipeline_split or "
          "account_for_loss_in_pipeline_split must be divisible by pipeline_model_parallel_size ",
          p.pp);
    return;
  }
  if ((total / p.pp) % p.vpp != 0)
    c.add(field, "number of layers on each pipeline rank: ", total / p.pp,
          " (after enable account_for_embedding_in_pipeline_split or "
          "account_for_loss_in_pipeline_split) must be divisible by "
          "virtual_pipeline_model_parallel_size ",
          p.vpp);
}

void check_parallel(const Plan& plan, Collector& c) {
  const ModelSpec& m = plan.model;
  const ParallelConfig& p = plan.parallel;

  // Tensor parallel: TransformerConfig. Megatron's newest versions also accept tp a multiple of
  // num_query_groups by replicating K/V heads; mplan shards K and V heads and requires the
  // classic rule.
  if (m.num_attention_heads % p.tp != 0)
    c.add("parallel.tp", "num_attention_heads (", m.num_attention_heads,
          ") must be a multiple of tensor_model_parallel_size (", p.tp, ").");
  if (m.num_query_groups % p.tp != 0)
    c.add("parallel.tp", "num_query_groups (", m.num_query_groups,
          ") must be a multiple of tensor_model_parallel_size (", p.tp,
          ") (K and V heads are split over tp)");
  // ColumnParallelLinear / RowParallelLinear: divide(size, world_size) asserts divisibility.
  if (m.num_moe_layers() < m.num_layers && m.ffn_hidden_size % p.tp != 0)
    c.add("parallel.tp", "ffn_hidden_size (", m.ffn_hidden_size,
          ") is not divisible by tensor_model_parallel_size (", p.tp, ")");
  if (m.moe && m.moe->moe_ffn_hidden_size % p.etp != 0)
    c.add("parallel.etp", "moe_ffn_hidden_size (", m.moe->moe_ffn_hidden_size,
          ") is not divisible by expert_tensor_parallel_size (", p.etp, ")");
  if (m.moe && m.moe->shared_expert_ffn_hidden_size % p.tp != 0)
    c.add("parallel.tp", "shared_expert_ffn_hidden_size (", m.moe->shared_expert_ffn_hidden_size,
          ") is not divisible by tensor_model_parallel_size (", p.tp, ")");

  // Context parallel: arguments.py.
  if (p.cp > 1 && m.seq_length % (2 * p.cp) != 0)
    c.add("parallel.cp",
          "seq-length should be a multiple of 2 * context-parallel-size if "
          "context-parallel-size > 1 (seq_length ",
          m.seq_length, ", 2 x cp = ", 2 * p.cp, ")");
  // Sequence parallel scatters each cp rank's s/cp tokens over tp (Megatron turns it off at
  // tp 1, so no rule there).
  if (p.sequence_parallel && p.tp > 1 && m.seq_length % (p.cp * p.tp) != 0)
    c.add("parallel.sequence_parallel", "seq_length (", m.seq_length,
          ") must be divisible by context_parallel_size x tensor_model_parallel_size (",
          p.cp * p.tp,
          ") with sequence parallelism: each tp rank holds seq_length / (cp x tp) "
          "tokens");

  // Pipeline: parallel_state, arguments.py and TransformerConfig.
  if (p.vpp > 1 && p.pp == 1)
    c.add("parallel.vpp",
          "pipeline-model-parallel size should be greater than 1 with "
          "interleaved schedule (vpp ",
          p.vpp, ", pp 1)");
  if (p.pipeline_model_parallel_layout || p.account_for_embedding_in_pipeline_split ||
      p.account_for_loss_in_pipeline_split) {
    check_pipeline_split_options(plan, c);
  } else if (!p.decoder_first_pipeline_num_layers && !p.decoder_last_pipeline_num_layers) {
    if (m.num_layers % p.pp != 0)
      c.add("parallel.pp",
            "Number of layers should be divisible by the pipeline-model-parallel "
            "size (num_layers ",
            m.num_layers, ", pp ", p.pp,
            "); or set "
            "decoder_first_pipeline_num_layers / decoder_last_pipeline_num_layers");
    else if (p.vpp > 1 && (m.num_layers / p.pp) % p.vpp != 0)
      c.add("parallel.vpp", "num_layers_per_pipeline_rank ", m.num_layers / p.pp,
            " should be divisible by vp_size ", p.vpp);
  } else {
    check_uneven_split(m, p, c);
  }

  // Experts: arguments.py and parallel_state.
  if (m.moe) {
    if (m.moe->num_experts % p.ep != 0)
      c.add("parallel.ep",
            "Number of experts should be a multiple of expert model parallel_size "
            "(num_experts ",
            m.moe->num_experts, ", ep ", p.ep, ")");
  } else if (p.ep > 1) {
    c.add("parallel.ep", "num_experts must be non None to use expert model parallelism (ep ", p.ep,
          ", model.moe is null)");
  }
  const int64_t world = p.world_size();
  const int64_t expert_grid = p.etp * p.ep * p.pp;
  if (world % expert_grid != 0)
    c.add(world % (p.etp * p.pp) != 0 ? "parallel.etp" : "parallel.ep", "world_size (", world,
          ") is not divisible by expert_tensor_model_pipeline_parallel size (etp x ep x pp = ",
          expert_grid, ")");

  // Recompute: TransformerConfig states the range of recompute_num_layers for full recompute.
  if (p.recompute == Recompute::kFull && p.recompute_num_layers > m.num_layers / p.pp)
    c.add("parallel.recompute_num_layers",
          "When using recompute_granularity: full "
          "recompute_num_layers must be between 1 and num_layers_per_pipeline_rank: ",
          m.num_layers / p.pp, " (got ", p.recompute_num_layers, ")");
  // Userbuffer overlap: arguments.py validate_args.
  if (p.tp_comm_overlap && !p.sequence_parallel)
    c.add("parallel.tp_comm_overlap",
          "Tensor parallel communication/GEMM overlap can happen only when sequence parallelism is "
          "enabled");

  // Optimizer CPU offload: arguments.py validate_args.
  const TrainingConfig& t = plan.training;
  if (t.optimizer_cpu_offload && !t.optimizer_precision.use_precision_aware_optimizer)
    c.add("training.optimizer_cpu_offload",
          "The optimizer cpu offload must be used in conjunction with "
          "`--use-precision-aware-optimizer`, as the hybrid device optimizer reuses the code path "
          "of this flag.");
  if (t.optimizer_cpu_offload && t.fp8_param_gather && t.fp8_recipe != Fp8Recipe::kDelayed)
    c.add("training.optimizer_cpu_offload",
          "When `--fp8-param-gather` is enabled, the optimizer cpu offload must be used in "
          "conjunction with `--fp8-recipe delayed`.");

  // Recompute modules: TransformerConfig.__post_init__ checks them with selective recompute.
  if (p.recompute == Recompute::kSelective) {
    const uint32_t rm = p.recompute_modules;
    if ((rm & kRecomputeMoeAct) && !(m.moe && m.moe->moe_grouped_gemm))
      c.add("parallel.recompute_modules",
            "moe_act in recompute_modules is only supported with moe_grouped_gemm.");
    if ((rm & kRecomputeMlaUpProj) && !m.mla)
      c.add("parallel.recompute_modules",
            "mla_up_proj in recompute_modules is only supported with multi_latent_attention.");
    if ((rm & (kRecomputeMoeAct | kRecomputeLayernorm)) &&
        plan.training.fp8_format != Fp8Format::kNone &&
        plan.training.fp8_recipe == Fp8Recipe::kDelayed)
      c.add("parallel.recompute_modules",
            "Delayed scaling does not support moe_act and layernorm recompute for fp8.");
  }

  // Distributed optimizer: arguments.py. Without it there is no parameter all-gather and
  // overlap_param_gather has no effect.
  if (p.distributed_optimizer && p.overlap_param_gather && !p.overlap_grad_reduce)
    c.add("parallel.overlap_param_gather",
          "Must use --overlap-param-gather with "
          "--overlap-grad-reduce (set overlap_grad_reduce, or overlap_param_gather false)");
}

// Megatron-FSDP and partial distributed optimizers: arguments.py, parallel_state.py
// (initialize_model_parallel) and param_and_grad_buffer.py.
void check_dp_sharding(const Plan& plan, Collector& c) {
  const ParallelConfig& p = plan.parallel;
  const int64_t n = p.num_distributed_optimizer_instances;
  if (n > 1 && !p.distributed_optimizer)
    c.add("parallel.num_distributed_optimizer_instances", "num_distributed_optimizer_instances ", n,
          " shards the distributed optimizer's state: it needs distributed_optimizer (or "
          "use_megatron_fsdp)");
  if (n > 1 && (p.dp * p.cp) % n != 0)
    c.add("parallel.num_distributed_optimizer_instances",
          "Data parallel size should be divisible by partial DistOpt shard factor (dp x cp = ",
          p.dp * p.cp, ", num_distributed_optimizer_instances = ", n, ")");
  if (!p.use_megatron_fsdp) return;
  if (!p.distributed_optimizer)
    c.add("parallel.use_megatron_fsdp",
          "Megatron-FSDP v1 is only compatible with --use-distributed-optimizer (set "
          "distributed_optimizer, as Megatron-LM does)");
}

// OptimizerConfig.__post_init__: lower-precision optimizer state needs the precision-aware
// optimizer.
void check_optimizer_precision(const Plan& plan, Collector& c) {
  if (auto bad = optimizer_precision_problem(plan.training.optimizer_precision))
    c.out.push_back({bad->first, bad->second});
}

void check_batch(const Plan& plan, Collector& c) {
  const ParallelConfig& p = plan.parallel;
  const TrainingConfig& t = plan.training;
  if (p.micro_batch_size * plan.model.seq_length > kMaxMicrobatchTokens)
    c.add("parallel.micro_batch_size",
          "micro_batch_size x seq_length = ", p.micro_batch_size * plan.model.seq_length,
          " tokens in one micro-batch exceeds ", kMaxMicrobatchTokens, " (2^24)");
  MicrobatchSpec spec{p.global_batch_size, p.micro_batch_size, p.dp, t.rampup_batch_size, false};

  bool batch_ok = true;
  if (auto e = check_microbatch_spec(spec)) {
    c.out.push_back({BatchFieldNames{}.name(e->field), std::move(e->message)});
    batch_ok = false;
  }
  // The final global batch size: ConstantNumMicroBatchesCalculator's rules, which a ramp-up run
  // meets once it reaches the final size.
  if (batch_ok && spec.rampup) {
    MicrobatchSpec final_batch = spec;
    final_batch.rampup.reset();
    if (auto e = check_microbatch_spec(final_batch)) {
      c.out.push_back({BatchFieldNames{}.name(e->field), std::move(e->message)});
      batch_ok = false;
    }
  }
  std::optional<MicrobatchCalculator> calc;
  if (batch_ok && spec.rampup) {
    calc.emplace(spec);
    // Megatron checks every iteration's batch during the ramp (update_num_microbatches with
    // consistency_check=True).
    if (auto bad = calc->first_inconsistent_step()) {
      c.add("training.rampup_batch_size", "current global batch size (", bad->global_batch_size,
            ") is not divisible by micro-batch-size (", p.micro_batch_size,
            ") times data parallel size (", p.dp, "), reached at ", bad->consumed_samples,
            " consumed samples of the ramp-up");
      batch_ok = false;
    }
  }

  // The schedule rules (vpp vs schedule, interleaved group sizes at every ramp-up step) belong
  // to src/schedule (append_schedule_violations), the same rules make_schedule enforces.
}

void check_training(const Plan& plan, Collector& c) {
  const TrainingConfig& t = plan.training;
  // Flash attention kernels (flash-attn, cuDNN through Transformer Engine) take fp16/bf16 only.
  if (t.attention_backend == AttentionBackend::kFlash && t.precision == Precision::kFp32)
    c.add("training.attention_backend",
          "flash attention runs in fp16 or bf16 only; precision "
          "is fp32 (use attention_backend \"unfused\")");
}

// Context parallelism's exchange: arguments.py validate_args (hierarchical sizes) and Transformer
// Engine's AttnFuncWithCPAndQKVOA2A (heads split over the all-to-all group).
void check_context_parallel(const Plan& plan, Collector& c) {
  const ParallelConfig& p = plan.parallel;
  const ModelSpec& m = plan.model;
  const std::vector<int64_t>& h = p.hierarchical_context_parallel_sizes;
  if (!h.empty() && h[0] * h[1] != p.cp)
    c.add("parallel.hierarchical_context_parallel_sizes",
          "context_parallel_size must equal prod(hierarchical_context_parallel_sizes) (cp = ", p.cp,
          ", product = ", h[0] * h[1], ")");
  if (p.cp_comm_type == CpCommType::kA2aP2p && h.empty())
    c.add("parallel.hierarchical_context_parallel_sizes",
          "--hierarchical-context-parallel-sizes must be set when a2a+p2p is used in cp comm");
  const int64_t a2a = cp_a2a_size(p);
  if (a2a <= 1 || m.num_attention_heads % p.tp != 0) return;
  const int64_t heads = m.num_attention_heads / p.tp;
  const int64_t kv_heads = m.mla ? heads : m.num_query_groups / p.tp;
  if (!cp_a2a_splits_heads(m, p.tp, a2a))
    c.add("parallel.cp_comm_type",
          "The number of attention heads needs to be divisible by CP size! (cp_comm_type ",
          to_string(p.cp_comm_type), ": heads / tp = ", heads,
          " and query groups / tp = ", kv_heads, " must divide by the all-to-all size ", a2a, ")");
}

// Pipeline p2p overlap: arguments.py validate_args turns overlap_p2p_comm off for every schedule
// but the interleaved one; ModelParallelConfig.__post_init__ (warm-up and flush overlap).
void check_p2p_overlap(const Plan& plan, Collector& c) {
  const ParallelConfig& p = plan.parallel;
  const bool overlap = p.overlap_p2p_comm && p.schedule == ScheduleKind::kInterleaved;
  if (p.overlap_p2p_comm_warmup_flush && !overlap)
    c.add("parallel.overlap_p2p_comm_warmup_flush",
          "Pipeline parallel communication overlapping in warmup and flush is only compatible "
          "with overlap_p2p_comm but not batch_p2p_comm (overlap_p2p_comm needs the interleaved "
          "schedule)");
}

// Activation offloading: TransformerConfig.__post_init__ and arguments.py validate_args.
void check_activation_offloading(const Plan& plan, Collector& c) {
  const TrainingConfig& t = plan.training;
  const ParallelConfig& p = plan.parallel;
  const int64_t n = t.cpu_offloading_num_layers;
  if (n > 0 && n >= plan.model.num_layers)
    c.add("training.cpu_offloading_num_layers",
          "CPU offloading can be done only for layers less than ", plan.model.num_layers, " (got ",
          n, ")");
  if (n > 0 && p.pp > 1)
    c.add("training.cpu_offloading_num_layers",
          "Currently there is no support for Pipeline parallelism with CPU offloading");
  if (n > 0 && p.recompute != Recompute::kNone)
    c.add("training.cpu_offloading_num_layers",
          "CPU offloading does not work when activation recomputation is enabled");
  if (!t.fine_grained_activation_offloading) return;
  const uint32_t om = t.offload_modules;
  if (n > 0)
    c.add("training.fine_grained_activation_offloading",
          "fine_grained_activation_offloading cannot be enabled with cpu_offloading.");
  if (om == 0)
    c.add("training.offload_modules",
          "fine_grained_activation_offloading needs at least one module in offload_modules");
  if ((om & kOffloadAttnProj) && !(om & kOffloadCoreAttn))
    c.add("training.offload_modules",
          "attn_proj cannot be set to offload_modules alone without core_attn because the input "
          "of attn_proj is the output of core_attn, which is needed in core_attn.backward().");
  if (p.recompute == Recompute::kSelective && (p.recompute_modules & kRecomputeMoe) &&
      (om & (kOffloadExpertFc1 | kOffloadMoeAct)))
    c.add("training.offload_modules",
          "Cannot offload expert_fc1 or moe_act while recomputing the entire MoE layer ('moe' in "
          "recompute_modules)");
  if (t.implementation == Implementation::kMegatronLocal)
    c.add("training.fine_grained_activation_offloading",
          "Fine-grained activation offloading is only supported with transformer_engine "
          "implementation");
}

}  // namespace

bool cp_a2a_splits_heads(const ModelSpec& m, int64_t tp, int64_t a2a) {
  if (tp < 1 || a2a < 1 || m.num_attention_heads % tp != 0) return false;
  const int64_t heads = m.num_attention_heads / tp;
  const int64_t kv_heads = m.mla ? heads : m.num_query_groups / tp;
  return heads % a2a == 0 && kv_heads % a2a == 0;
}

std::vector<Violation> validate(const Plan& plan) {
  std::vector<Violation> out;
  Collector c{out};
  check_model(plan, c);
  if (!check_cluster(plan, c)) return out;
  check_parallel(plan, c);
  check_batch(plan, c);
  check_training(plan, c);
  check_dp_sharding(plan, c);
  check_optimizer_precision(plan, c);
  check_context_parallel(plan, c);
  check_p2p_overlap(plan, c);
  check_activation_offloading(plan, c);

  // ---- Checks owned by other modules: one line each, appended below, in this order. ----------
  // Each is `void append_<module>_violations(const Plan&, std::vector<Violation>& out)`, declared
  // in that module's header, adding nothing on the valid path.
  //   rank grid (src/parallel): order string, expert grid vs. order, ...
  //   schedule  (src/schedule): schedule-specific constraints
  check_rank_grid(plan, out);
  append_schedule_violations(plan, out);
  append_precision_violations(plan, out);  // fp8 / fp4 (src/plan/precision_rules)
  append_variant_violations(plan, out);    // MoE overlap, ... (src/plan/variant_rules)
  // ---- end of other modules' checks ----------------------------------------------------------
  return out;
}

}  // namespace mplan
