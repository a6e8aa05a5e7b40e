// Tests of validate(): a valid plan has no violation, and every rule fires on a plan that breaks
// only it, naming the field and stating the rule with the values (Megatron's words where it has
// them).
#include "src/plan/validate.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "src/common/embedded_configs.hpp"
#include "src/common/error.hpp"

namespace mplan {
namespace {

using ::testing::HasSubstr;

// Llama-3-8B on DGX H200 nodes: tp 2, pp 2, dp 4 (16 GPUs, 2 nodes), micro 1, global 32.
Plan base() {
  Plan p;
  p.model = load_model("llama3-8b");
  p.cluster = load_cluster("dgx-h200");
  p.parallel.tp = 2;
  p.parallel.etp = 2;
  p.parallel.pp = 2;
  p.parallel.dp = 4;
  p.parallel.micro_batch_size = 1;
  p.parallel.global_batch_size = 32;
  return p;
}

// A tiny GPT for sequence-length rules: 4 layers, hidden 64, 2 heads, seq `seq`.
ModelSpec tiny(int64_t seq) {
  ModelSpec m = load_model("gpt3-1.3b");
  m.num_layers = 4;
  m.hidden_size = 64;
  m.num_attention_heads = 2;
  m.num_query_groups = 2;
  m.kv_channels = 32;
  m.ffn_hidden_size = 256;
  m.seq_length = seq;
  m.max_position_embeddings = seq;
  return m;
}

std::string all(const std::vector<Violation>& v) {
  std::string s;
  for (const auto& x : v) s += to_string(x) + "\n";
  return s;
}

// The plan breaks exactly one rule: on `field`, with a message containing `text`.
void expect_only(const Plan& plan, const std::string& field, const std::string& text) {
  std::vector<Violation> v = validate(plan);
  ASSERT_EQ(v.size(), 1u) << all(v);
  EXPECT_EQ(v[0].field, field) << all(v);
  EXPECT_THAT(v[0].message, HasSubstr(text));
}

// The plan breaks (at least) a rule on `field` containing `text`.
void expect_has(const Plan& plan, const std::string& field, const std::string& text) {
  std::vector<Violation> v = validate(plan);
  for (const auto& x : v)
    if (x.field == field && x.message.find(text) != std::string::npos) return;
  ADD_FAILURE() << "no violation on " << field << " with '" << text << "'; got:\n" << all(v);
}

TEST(Validate, ValidPlansHaveNoViolation) {
  EXPECT_EQ(all(validate(base())), "");
  // The shipped plan preset (the reference workload, DP 4 on the 4 x H200 machine).
  Plan ref = plan_from_json(parse_json(load_config_text("plans", "gpt3-1.3b-dp4", "plan"), "plan"));
  EXPECT_EQ(all(validate(ref)), "");
  // Mixtral with experts over 8 ranks, interleaved pipeline and sequence parallel.
  Plan m = base();
  m.model = load_model("mixtral-8x7b");
  m.parallel.tp = 2;
  m.parallel.etp = 1;
  m.parallel.ep = 8;
  m.parallel.pp = 4;
  m.parallel.vpp = 2;
  m.parallel.dp = 8;
  m.parallel.schedule = ScheduleKind::kInterleaved;
  m.parallel.sequence_parallel = true;
  m.parallel.global_batch_size = 64;
  m.parallel.distributed_optimizer = true;
  EXPECT_EQ(all(validate(m)), "");
  // A plan smaller than a node uses part of it.
  Plan s = base();
  s.parallel.dp = 1;
  s.parallel.global_batch_size = 8;
  EXPECT_EQ(all(validate(s)), "");
}

TEST(Validate, RequireValidThrowsTheFirstViolation) {
  Plan p = base();
  p.parallel.tp = 3;
  p.parallel.etp = 3;
  try {
    require_valid(p);
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "parallel.tp: num_attention_heads (32) must be a multiple of "
                 "tensor_model_parallel_size (3).");
  }
  EXPECT_NO_THROW(require_valid(base()));
}

// ---- model ----------------------------------------------------------------------------------

TEST(Validate, MaxPositionEmbeddingsCoverTheSequence) {
  Plan p = base();
  p.model.max_position_embeddings = 4096;  // rope: parsing accepts it, Megatron asserts
  expect_only(p, "model.max_position_embeddings",
              "max_position_embeddings (4096) must be greater than or equal to seq_length (8192).");
}

TEST(Validate, RotaryDimsAreAnEvenNumber) {
  Plan p = base();               // llama3-8b: RoPE over heads of 128
  p.model.rotary_percent = 0.3;  // int(38.4) = 38, as Megatron truncates
  EXPECT_EQ(all(validate(p)), "");
  p.model.rotary_percent = 0.2890625;  // int(37.0): an odd number
  expect_only(p, "model.rotary_percent",
              "int(rotary_percent x kv_channels) must be an even number of dims >= 2 (RoPE "
              "rotates pairs), got int(0.289062 x 128) = 37");
  p.model.rotary_percent = 0.001;  // int(0.128) = 0: nothing rotated
  expect_only(p, "model.rotary_percent", "= 0");
  p.model.position_embedding = PositionEmbedding::kLearned;  // the rule is RoPE's
  EXPECT_EQ(all(validate(p)), "");
}

// ---- cluster --------------------------------------------------------------------------------

TEST(Validate, GpuCountIsWholeNodes) {
  Plan p = base();
  p.parallel.dp = 3;  // 12 GPUs on 8-GPU nodes
  p.parallel.global_batch_size = 24;
  expect_only(p, "parallel", "GPU count tp x cp x pp x dp = 12 is not a whole number of nodes");
}

TEST(Validate, GpuCountAndMicroBatchTokensStayPhysical) {
  Plan p = base();
  p.parallel.tp = p.parallel.etp = 1024;
  p.parallel.pp = 1024;
  p.parallel.dp = 1 << 20;
  const std::vector<Violation> v = validate(p);
  ASSERT_EQ(v.size(), 1u) << all(v);  // nothing else is judged at that size
  EXPECT_EQ(to_string(v[0]),
            "parallel: GPU count tp x cp x pp x dp = 1099511627776 exceeds 1048576 (2^20), beyond "
            "any cluster");
  Plan q = base();
  q.parallel.micro_batch_size = 4096;  // x 8192 tokens
  q.parallel.global_batch_size = 4096 * 4;
  expect_only(
      q, "parallel.micro_batch_size",
      "micro_batch_size x seq_length = 33554432 tokens in one micro-batch exceeds 16777216");
}

TEST(Validate, ClusterSizeAndNetwork) {
  Plan p = base();
  p.cluster = load_cluster("h200x4");  // one node of 4, no network
  std::vector<Violation> v = validate(p);
  ASSERT_EQ(v.size(), 2u) << all(v);
  EXPECT_EQ(v[0].field, "parallel");
  EXPECT_THAT(v[0].message, HasSubstr("needs 4 nodes; cluster 'h200x4' has 1"));
  EXPECT_EQ(v[1].field, "cluster.inter_node");
}

// ---- tensor, context and sequence parallel --------------------------------------------------

TEST(Validate, HeadsDivisibleByTp) {
  Plan p = base();
  p.model = tiny(64);
  p.model.num_attention_heads = 6;
  p.model.num_query_groups = 2;  // groups 2 stay divisible by tp 2
  p.model.hidden_size = 192;
  p.parallel.tp = 4;
  p.parallel.etp = 4;
  p.parallel.dp = 2;
  p.parallel.global_batch_size = 8;
  expect_has(p, "parallel.tp",
             "num_attention_heads (6) must be a multiple of tensor_model_parallel_size (4).");
}

TEST(Validate, QueryGroupsDivisibleByTp) {
  Plan p = base();
  p.parallel.tp = 16;  // Llama-3-8B: 32 heads, 8 query groups
  p.parallel.etp = 16;
  p.parallel.pp = 1;
  p.parallel.dp = 1;
  p.parallel.global_batch_size = 8;
  expect_only(p, "parallel.tp",
              "num_query_groups (8) must be a multiple of tensor_model_parallel_size (16)");
}

TEST(Validate, FfnDivisibleByTp) {
  Plan p = base();
  p.model.ffn_hidden_size = 14338;
  p.parallel.tp = 4;
  p.parallel.etp = 4;
  p.parallel.dp = 2;
  p.parallel.global_batch_size = 8;
  expect_only(p, "parallel.tp",
              "ffn_hidden_size (14338) is not divisible by tensor_model_parallel_size (4)");
}

TEST(Validate, ContextParallelNeedsTwoChunksPerRank) {
  Plan p = base();
  p.parallel.cp = 3;  // 8192 % 6 != 0
  p.parallel.dp = 4;  // 2 x 3 x 2 x 4 = 48 GPUs, 6 nodes
  expect_only(p, "parallel.cp",
              "seq-length should be a multiple of 2 * context-parallel-size if "
              "context-parallel-size > 1 (seq_length 8192, 2 x cp = 6)");
}

TEST(Validate, SequenceParallelSplitsTheSequenceOverTp) {
  Plan p = base();
  p.model = tiny(66);  // 66 % 4 != 0
  p.model.num_attention_heads = 4;
  p.model.num_query_groups = 4;
  p.model.kv_channels = 16;
  p.parallel.sequence_parallel = true;
  p.parallel.tp = 4;
  p.parallel.etp = 4;
  p.parallel.pp = 1;
  p.parallel.dp = 2;
  p.parallel.global_batch_size = 8;
  expect_only(p, "parallel.sequence_parallel",
              "seq_length (66) must be divisible by context_parallel_size x "
              "tensor_model_parallel_size (4)");
  // Megatron turns sequence parallel off at tp 1: no rule.
  p.parallel.tp = 1;
  p.parallel.etp = 1;
  p.parallel.dp = 8;
  EXPECT_EQ(all(validate(p)), "");
}

TEST(Validate, SequenceParallelWithContextParallelNeedsOnlyCpTimesTp) {
  // seq 12, cp 2, tp 2: 2 x cp = 4 divides 12 and each tp rank holds 12 / 4 = 3 tokens; the
  // stricter 2 x cp x tp = 8 is not Megatron's rule.
  Plan p = base();
  p.model = tiny(12);
  p.parallel.cp = 2;
  p.parallel.tp = 2;
  p.parallel.etp = 2;
  p.parallel.sequence_parallel = true;
  p.parallel.pp = 1;
  p.parallel.dp = 2;
  p.parallel.global_batch_size = 8;
  EXPECT_EQ(all(validate(p)), "");
  p.model = tiny(20);  // 10 tokens per cp rank, 5 per tp rank
  EXPECT_EQ(all(validate(p)), "");
  p.model = tiny(18);  // 18 % (2 x cp) != 0 and 18 % (cp x tp) != 0
  std::vector<Violation> v = validate(p);
  ASSERT_EQ(v.size(), 2u) << all(v);
  EXPECT_EQ(v[0].field, "parallel.cp");
  EXPECT_EQ(v[1].field, "parallel.sequence_parallel");
}

// ---- pipeline -------------------------------------------------------------------------------

TEST(Validate, VirtualStagesNeedPipelineParallel) {
  Plan p = base();
  p.parallel.pp = 1;
  p.parallel.vpp = 2;
  p.parallel.dp = 8;
  p.parallel.schedule = ScheduleKind::kInterleaved;
  expect_only(p, "parallel.vpp",
              "pipeline-model-parallel size should be greater than 1 with interleaved schedule");
}

TEST(Validate, LayersDivisibleByPp) {
  Plan p = base();
  p.parallel.pp = 5;  // 32 layers
  p.parallel.dp = 4;  // 40 GPUs, 5 nodes
  expect_only(p, "parallel.pp",
              "Number of layers should be divisible by the pipeline-model-parallel size "
              "(num_layers 32, pp 5)");
}

TEST(Validate, LayersPerStageDivisibleByVpp) {
  Plan p = base();
  p.parallel.pp = 4;  // 8 layers per stage
  p.parallel.vpp = 3;
  p.parallel.dp = 2;
  p.parallel.schedule = ScheduleKind::kInterleaved;
  expect_only(p, "parallel.vpp", "num_layers_per_pipeline_rank 8 should be divisible by vp_size 3");
}

Plan uneven(int64_t pp, int64_t vpp, std::optional<int64_t> first, std::optional<int64_t> last) {
  Plan p = base();  // 32 layers
  p.parallel.tp = 1;
  p.parallel.etp = 1;
  p.parallel.pp = pp;
  p.parallel.vpp = vpp;
  p.parallel.dp = 8 / pp;
  p.parallel.global_batch_size = 8 * p.parallel.dp;
  if (vpp > 1) p.parallel.schedule = ScheduleKind::kInterleaved;
  p.parallel.decoder_first_pipeline_num_layers = first;
  p.parallel.decoder_last_pipeline_num_layers = last;
  return p;
}

// ---- free layouts and account_for (PipelineParallelLayerLayout, TransformerConfig) ----------

Plan with_layout(int64_t pp, const std::string& layout) {
  Plan p = uneven(pp, 1, std::nullopt, std::nullopt);
  p.parallel.pipeline_model_parallel_layout =
      parse_pipeline_layout(layout, "parallel.pipeline_model_parallel_layout");
  p.parallel.vpp =
      std::max<int64_t>(1, p.parallel.pipeline_model_parallel_layout->num_stages() / pp);
  if (p.parallel.vpp > 1) p.parallel.schedule = ScheduleKind::kInterleaved;
  return p;
}

TEST(Validate, LayoutsMegatronAccepts) {
  EXPECT_EQ(all(validate(with_layout(4, "Et*7|t*9|t*9|t*7L"))), "");
  EXPECT_EQ(all(validate(with_layout(4, "E|(t*8|)*4(|)*2L"))), "");   // vpp 2, empty ends
  EXPECT_EQ(all(validate(with_layout(8, "Et*3|(t*4|)*6t*5L"))), "");  // 3 + 24 + 5
}

TEST(Validate, LayoutRules) {
  const char* f = "parallel.pipeline_model_parallel_layout";
  expect_only(with_layout(4, "Et*7|t*9|t*9|t*8L"), f,
              "Number of decoder layers 33 must match num_layers 32");
  expect_only(with_layout(4, "Et*10|t*11|t*11L"), f,
              "The length of pipeline_model_parallel_layout must be divisible by "
              "pipeline_model_parallel_size (num_stages=3, pipeline_model_parallel_size=4)");
  expect_only(with_layout(2, "t*16E|t*16L"), f, "The first layer must be embedding");
  expect_only(with_layout(2, "Et*16|t*16Lm"), f, "The last layer must be loss");
  expect_only(with_layout(2, "Et*16|t*16mL"), f,
              "Number of mtp layers in layout (1) must match mtp_num_layers (0)");
  // The model's MTP layers are counted: one `m` for mtp_num_layers 1, in the last stage.
  Plan mtp = with_layout(2, "Et*16|t*16mL");
  mtp.model.mtp_num_layers = 1;
  EXPECT_EQ(all(validate(mtp)), "");
  mtp = with_layout(2, "Et*16|t*16L");
  mtp.model.mtp_num_layers = 1;
  expect_only(mtp, f, "Number of mtp layers in layout (0) must match mtp_num_layers (1)");
  Plan v = with_layout(4, "E|(t*8|)*4(|)*2L");
  v.parallel.vpp = 3;
  expect_has(v, f, "virtual_pipeline_model_parallel_size conflicts with");
  Plan both = with_layout(4, "Et*7|t*9|t*9|t*7L");
  both.parallel.account_for_loss_in_pipeline_split = true;
  expect_only(both, f, "cannot be set with other pipeline layout arguments");
  both = with_layout(4, "Et*7|t*9|t*9|t*7L");
  both.parallel.decoder_first_pipeline_num_layers = 7;
  expect_only(both, f, "cannot be set with other pipeline layout arguments");
}

TEST(Validate, AccountForEmbeddingAndLoss) {
  Plan p = uneven(2, 1, std::nullopt, std::nullopt);  // 32 layers
  p.parallel.account_for_embedding_in_pipeline_split = true;
  p.parallel.account_for_loss_in_pipeline_split = true;
  EXPECT_EQ(all(validate(p)), "");  // 34 on 2 stages: 16 + 16
  p.parallel.account_for_loss_in_pipeline_split = false;
  expect_only(p, "parallel.account_for_embedding_in_pipeline_split",
              "num_layers: 33 after enable account_for_embedding_in_pipeline_split or "
              "account_for_loss_in_pipeline_split must be divisible by "
              "pipeline_model_parallel_size 2");
  Plan q = uneven(2, 1, std::nullopt, std::nullopt);
  q.parallel.account_for_loss_in_pipeline_split = true;
  q.parallel.decoder_first_pipeline_num_layers = 16;
  expect_only(q, "parallel.account_for_loss_in_pipeline_split",
              "cannot be set at the same time with account_for_embedding_in_pipeline_split");
  Plan r = uneven(2, 4, std::nullopt, std::nullopt);  // 34 / 2 = 17 per rank, vpp 4
  r.parallel.account_for_embedding_in_pipeline_split = true;
  r.parallel.account_for_loss_in_pipeline_split = true;
  expect_has(r, "parallel.account_for_embedding_in_pipeline_split",
             "number of layers on each pipeline rank: 17");
}

TEST(Validate, MegatronFsdpAndPartialDistributedOptimizer) {
  Plan p = base();  // dp 4
  p.parallel.use_megatron_fsdp = true;
  expect_only(p, "parallel.use_megatron_fsdp",
              "Megatron-FSDP v1 is only compatible with --use-distributed-optimizer");
  p.parallel.distributed_optimizer = true;
  EXPECT_EQ(all(validate(p)), "");
  Plan q = base();
  q.parallel.num_distributed_optimizer_instances = 2;
  expect_only(q, "parallel.num_distributed_optimizer_instances", "needs distributed_optimizer");
  q.parallel.distributed_optimizer = true;
  EXPECT_EQ(all(validate(q)), "");
  q.parallel.num_distributed_optimizer_instances = 3;
  expect_only(q, "parallel.num_distributed_optimizer_instances",
              "Data parallel size should be divisible by partial DistOpt shard factor (dp x cp = "
              "4, num_distributed_optimizer_instances = 3)");
}

TEST(Validate, RecomputeModulesMegatronAccepts) {
  Plan p = base();  // llama3-8b: dense, no MLA
  p.parallel.recompute = Recompute::kSelective;
  p.parallel.recompute_modules = kRecomputeCoreAttn | kRecomputeMlp | kRecomputeLayernorm;
  EXPECT_EQ(all(validate(p)), "");
  p.parallel.recompute_modules = kRecomputeMoeAct;
  expect_only(p, "parallel.recompute_modules",
              "moe_act in recompute_modules is only supported with moe_grouped_gemm.");
  p.parallel.recompute_modules = kRecomputeMlaUpProj;
  expect_only(p, "parallel.recompute_modules",
              "mla_up_proj in recompute_modules is only supported with multi_latent_attention.");
  // Megatron checks the modules only with selective granularity.
  p.parallel.recompute = Recompute::kNone;
  EXPECT_EQ(all(validate(p)), "");
  Plan q = base();
  q.cluster = load_cluster("dgx-h100");
  q.parallel.recompute = Recompute::kSelective;
  q.parallel.recompute_modules = kRecomputeLayernorm;
  q.training.fp8_format = Fp8Format::kHybrid;
  q.training.fp8_recipe = Fp8Recipe::kDelayed;
  expect_only(q, "parallel.recompute_modules",
              "Delayed scaling does not support moe_act and layernorm recompute for fp8.");
  q.training.fp8_recipe = Fp8Recipe::kTensorwise;
  EXPECT_EQ(all(validate(q)), "");
}

TEST(Validate, TpCommOverlapNeedsSequenceParallelism) {
  Plan p = base();  // tp 2
  p.parallel.tp_comm_overlap = true;
  expect_only(p, "parallel.tp_comm_overlap",
              "Tensor parallel communication/GEMM overlap can happen only when sequence "
              "parallelism is enabled");
  p.parallel.sequence_parallel = true;
  EXPECT_EQ(all(validate(p)), "");
}

TEST(Validate, ContextParallelCommTypes) {
  Plan p = base();  // llama3-8b: 32 heads, 8 query groups; tp 2
  p.parallel.cp = 4;
  p.parallel.dp = 1;
  for (CpCommType c : {CpCommType::kP2p, CpCommType::kAllGather, CpCommType::kA2a}) {
    p.parallel.cp_comm_type = c;
    EXPECT_EQ(all(validate(p)), "") << to_string(c);
  }
  // Transformer Engine splits the 16 heads and 4 query groups of a tp rank over the cp ranks.
  p.parallel.cp = 8;
  expect_only(p, "parallel.cp_comm_type",
              "The number of attention heads needs to be divisible by CP size!");
  // a2a+p2p: the hierarchical sizes are required, their product is cp, and the all-to-all size
  // splits the heads.
  p.parallel.cp_comm_type = CpCommType::kA2aP2p;
  expect_only(p, "parallel.hierarchical_context_parallel_sizes",
              "--hierarchical-context-parallel-sizes must be set when a2a+p2p is used in cp comm");
  p.parallel.hierarchical_context_parallel_sizes = {2, 2};
  expect_only(p, "parallel.hierarchical_context_parallel_sizes",
              "context_parallel_size must equal prod(hierarchical_context_parallel_sizes) (cp = "
              "8, product = 4)");
  p.parallel.hierarchical_context_parallel_sizes = {2, 4};
  EXPECT_EQ(all(validate(p)), "");
  p.parallel.hierarchical_context_parallel_sizes = {8, 1};
  expect_only(p, "parallel.cp_comm_type", "needs to be divisible by CP size");
}

TEST(Validate, OverlapP2pWarmupFlushNeedsTheOverlap) {
  Plan p = base();
  p.parallel.vpp = 2;
  p.parallel.schedule = ScheduleKind::kInterleaved;
  p.parallel.overlap_p2p_comm_warmup_flush = true;
  expect_only(p, "parallel.overlap_p2p_comm_warmup_flush",
              "only compatible with overlap_p2p_comm but not batch_p2p_comm");
  p.parallel.overlap_p2p_comm = true;
  EXPECT_EQ(all(validate(p)), "");
  // Megatron turns the overlap off for a schedule other than the interleaved one.
  p.parallel.vpp = 1;
  p.parallel.schedule = ScheduleKind::k1F1B;
  expect_only(p, "parallel.overlap_p2p_comm_warmup_flush", "overlap_p2p_comm");
}

TEST(Validate, ActivationOffloadingRules) {
  Plan p = base();  // 32 layers, pp 2
  p.training.cpu_offloading_num_layers = 4;
  expect_only(p, "training.cpu_offloading_num_layers",
              "Currently there is no support for Pipeline parallelism with CPU offloading");
  p.parallel.pp = 1;
  p.parallel.dp = 8;
  EXPECT_EQ(all(validate(p)), "");
  p.training.cpu_offloading_num_layers = 32;
  expect_only(p, "training.cpu_offloading_num_layers",
              "CPU offloading can be done only for layers less than 32 (got 32)");
  p.training.cpu_offloading_num_layers = 31;
  p.parallel.recompute = Recompute::kSelective;
  expect_only(p, "training.cpu_offloading_num_layers",
              "CPU offloading does not work when activation recomputation is enabled");
  p.parallel.recompute = Recompute::kNone;
  p.training.fine_grained_activation_offloading = true;
  p.training.offload_modules = kOffloadCoreAttn;
  expect_only(p, "training.fine_grained_activation_offloading",
              "fine_grained_activation_offloading cannot be enabled with cpu_offloading.");
  p.training.cpu_offloading_num_layers = 0;
  EXPECT_EQ(all(validate(p)), "");
  p.training.offload_modules = kOffloadAttnProj;
  expect_only(p, "training.offload_modules",
              "attn_proj cannot be set to offload_modules alone without core_attn");
  p.training.offload_modules = 0;
  expect_only(p, "training.offload_modules", "needs at least one module");
  p.training.offload_modules = kOffloadCoreAttn;
  p.training.implementation = Implementation::kMegatronLocal;
  expect_only(p, "training.fine_grained_activation_offloading",
              "only supported with transformer_engine implementation");
}

TEST(Validate, OptimizerCpuOffloadMegatronAccepts) {
  Plan p = base();
  p.training.optimizer_cpu_offload = true;
  expect_only(p, "training.optimizer_cpu_offload",
              "The optimizer cpu offload must be used in conjunction with "
              "`--use-precision-aware-optimizer`");
  p.training.optimizer_precision.use_precision_aware_optimizer = true;
  EXPECT_EQ(all(validate(p)), "");
}

TEST(Validate, OptimizerStateDtypesNeedThePrecisionAwareOptimizer) {
  Plan p = base();
  p.training.optimizer_precision.exp_avg_sq_dtype = OptimStateDtype::kBf16;
  expect_only(p, "training.exp_avg_sq_dtype",
              "exp_avg_sq_dtype can only be fp32 when not using precision-aware optimizer");
  p.training.optimizer_precision.use_precision_aware_optimizer = true;
  EXPECT_EQ(all(validate(p)), "");
}

TEST(Validate, UnevenSplitsMegatronAccepts) {
  EXPECT_EQ(all(validate(uneven(4, 1, 5, 9))), "");             // middle: 18 over 2 stages
  EXPECT_EQ(all(validate(uneven(4, 1, std::nullopt, 2))), "");  // 30 over 3 stages
  EXPECT_EQ(all(validate(uneven(2, 1, 14, 18))), "");           // no middle stage
  EXPECT_EQ(all(validate(uneven(4, 2, 4, 4))), "");             // middle ranks 12 each, 6 per chunk
  EXPECT_EQ(all(validate(uneven(1, 1, 32, std::nullopt))), "");  // Megatron accepts the degenerate
}

TEST(Validate, UnevenSplitRules) {
  expect_only(uneven(4, 1, 6, std::nullopt), "parallel.decoder_first_pipeline_num_layers",
              "number of layers at middle stage: 26 must be divisible by the middle pipeline "
              "model parallel size 3");
  expect_only(uneven(2, 1, 10, 10), "parallel.decoder_first_pipeline_num_layers",
              "Mismatch: 12 middle layers remaining but 0 middle PP stages available.");
  expect_only(uneven(4, 1, 20, 20), "parallel.decoder_first_pipeline_num_layers",
              "the first and last stage layers (40) exceed num_layers (32)");
  expect_only(uneven(1, 1, 10, std::nullopt), "parallel.decoder_first_pipeline_num_layers",
              "Mismatch: 22 middle layers remaining but 0 middle PP stages available.");
  expect_only(uneven(1, 1, 16, 16), "parallel.decoder_first_pipeline_num_layers", "need pp >= 2");
  expect_only(uneven(4, 2, 4, 2), "parallel.decoder_first_pipeline_num_layers",
              "number of layers on each middle pipeline rank: 13 must be divisible by virtual "
              "pipeline parallel degree 2");
  expect_has(uneven(4, 2, 3, 5), "parallel.decoder_first_pipeline_num_layers",
             "number of layers at first stage: 3 must be divisible by virtual pipeline parallel "
             "degree 2");
  expect_has(uneven(4, 2, 3, 5), "parallel.decoder_last_pipeline_num_layers",
             "number of layers at last stage: 5 must be divisible by virtual pipeline parallel "
             "degree 2");
  expect_only(uneven(4, 1, std::nullopt, 4), "parallel.decoder_last_pipeline_num_layers",
              "number of layers at middle stage: 28 must be divisible by the middle pipeline "
              "model parallel size 3");
}

// ---- experts --------------------------------------------------------------------------------

Plan mixtral() {
  Plan p = base();
  p.model = load_model("mixtral-8x7b");
  p.parallel.tp = 1;
  p.parallel.etp = 1;
  p.parallel.pp = 1;
  p.parallel.dp = 8;
  p.parallel.ep = 8;
  return p;
}

TEST(Validate, ExpertParallelNeedsAnMoeModel) {
  Plan p = base();
  p.parallel.ep = 2;
  expect_only(p, "parallel.ep", "num_experts must be non None to use expert model parallelism");
}

TEST(Validate, ExpertsDivisibleByEp) {
  Plan p = mixtral();
  p.parallel.ep = 3;
  p.parallel.dp = 24;
  p.parallel.global_batch_size = 48;
  expect_only(p, "parallel.ep",
              "Number of experts should be a multiple of expert model parallel_size "
              "(num_experts 8, ep 3)");
}

TEST(Validate, ExpertGridDividesTheWorld) {
  Plan p = mixtral();
  p.parallel.dp = 4;  // world 4, etp x ep x pp = 8
  expect_only(p, "parallel.ep",
              "world_size (4) is not divisible by expert_tensor_model_pipeline_parallel size "
              "(etp x ep x pp = 8)");
  p.parallel.ep = 1;
  p.parallel.etp = 8;
  expect_only(p, "parallel.etp", "world_size (4) is not divisible by");
}

TEST(Validate, ExpertFfnDivisibleByEtp) {
  Plan p = mixtral();
  p.model.moe->moe_ffn_hidden_size = 1000;
  p.parallel.ep = 1;
  p.parallel.etp = 16;
  p.parallel.dp = 16;
  p.parallel.global_batch_size = 16;
  expect_only(p, "parallel.etp",
              "moe_ffn_hidden_size (1000) is not divisible by expert_tensor_parallel_size (16)");
}

TEST(Validate, SharedExpertFfnDivisibleByTp) {
  Plan p = mixtral();
  p.model.moe->shared_expert_ffn_hidden_size = 100;
  p.parallel.tp = 8;
  p.parallel.dp = 1;
  p.parallel.global_batch_size = 8;
  expect_only(p, "parallel.tp",
              "shared_expert_ffn_hidden_size (100) is not divisible by "
              "tensor_model_parallel_size (8)");
}

// ---- recompute and optimizer ----------------------------------------------------------------

TEST(Validate, FullRecomputeLayersWithinAStage) {
  Plan p = base();  // 16 layers per stage
  p.parallel.recompute = Recompute::kFull;
  p.parallel.recompute_num_layers = 16;
  EXPECT_EQ(all(validate(p)), "");
  p.parallel.recompute_num_layers = 17;
  expect_only(p, "parallel.recompute_num_layers",
              "recompute_num_layers must be between 1 and num_layers_per_pipeline_rank: 16 "
              "(got 17)");
}

TEST(Validate, ParamGatherOverlapNeedsGradReduceOverlap) {
  Plan p = base();
  p.parallel.distributed_optimizer = true;
  p.parallel.overlap_grad_reduce = false;
  expect_only(p, "parallel.overlap_param_gather",
              "Must use --overlap-param-gather with --overlap-grad-reduce");
  p.parallel.overlap_param_gather = false;
  EXPECT_EQ(all(validate(p)), "");
  // Without the distributed optimizer there is no parameter all-gather to overlap.
  p.parallel.distributed_optimizer = false;
  p.parallel.overlap_param_gather = true;
  EXPECT_EQ(all(validate(p)), "");
}

// ---- batch ----------------------------------------------------------------------------------

TEST(Validate, GlobalBatchDivisibleByMicroTimesDp) {
  Plan p = base();
  p.parallel.global_batch_size = 30;
  expect_only(p, "parallel.global_batch_size",
              "global batch size (30) is not divisible by micro batch size (1) times data "
              "parallel size (4)");
}

TEST(Validate, RampupRules) {
  Plan p = base();  // micro 1 x dp 4, global 32
  p.training.rampup_batch_size = RampupBatchSize{8, 8, 1000};
  EXPECT_EQ(all(validate(p)), "");
  p.training.rampup_batch_size = RampupBatchSize{48, 8, 1000};
  expect_only(p, "training.rampup_batch_size",
              "expected global batch size to be greater than or equal to start batch size, got "
              "32 and 48");
  p.training.rampup_batch_size = RampupBatchSize{8, 5, 1000};
  expect_only(p, "training.rampup_batch_size",
              "expected global batch size interval (24) to be divisible by global batch size "
              "increment (5)");
  p.training.rampup_batch_size = RampupBatchSize{8, 8, 0};
  expect_only(p, "training.rampup_batch_size", "ramp-up samples must be > 0");
  p.training.rampup_batch_size = RampupBatchSize{8, 2, 1200};
  // 12 increments of 100 samples: 8 for 13 iterations (104 samples), then 10: not a multiple
  // of micro 1 x dp 4.
  expect_only(p, "training.rampup_batch_size",
              "current global batch size (10) is not divisible by micro-batch-size (1) times "
              "data parallel size (4), reached at 104 consumed samples of the ramp-up");
  p.training.rampup_batch_size = RampupBatchSize{8, 8, 1000};
  // Megatron-LM's launch examples pair the ramp-up with --train-iters; mplan accepts that.
  p.training.train_iters = 100;
  EXPECT_TRUE(validate(p).empty()) << all(validate(p));
  p.training.train_iters = 0;
  p.parallel.global_batch_size = 30;  // the final size itself
  p.training.rampup_batch_size = RampupBatchSize{6, 8, 1000};
  expect_only(p, "parallel.global_batch_size",
              "global batch size (30) is not divisible by micro batch size (1) times data "
              "parallel size (4)");
}

// ---- schedule -------------------------------------------------------------------------------

TEST(Validate, ScheduleMatchesVirtualStages) {
  Plan p = base();
  p.parallel.vpp = 2;
  p.parallel.schedule = ScheduleKind::k1F1B;
  expect_only(p, "parallel.vpp", "vpp (2) > 1 needs the interleaved schedule");
  p.parallel.vpp = 1;
  p.parallel.schedule = ScheduleKind::kInterleaved;
  expect_only(p, "parallel.vpp", "the interleaved schedule needs vpp > 1");
}

Plan interleaved(int64_t global, int64_t group) {
  Plan p = base();
  p.parallel.pp = 4;  // 8 layers per stage
  p.parallel.vpp = 2;
  p.parallel.dp = 2;
  p.parallel.tp = 1;
  p.parallel.etp = 1;
  p.parallel.schedule = ScheduleKind::kInterleaved;
  p.parallel.global_batch_size = global;  // micro 1 x dp 2: M = global / 2
  p.parallel.microbatch_group_size_per_vp_stage = group;
  return p;
}

TEST(Validate, InterleavedMicrobatchGroups) {
  EXPECT_EQ(all(validate(interleaved(16, 0))), "");  // M 8, groups of pp 4
  EXPECT_EQ(all(validate(interleaved(28, 5))), "");  // M 14 = 5 + 5 + 4: last group >= pp
}

TEST(Validate, InterleavedRules) {
  expect_only(interleaved(4, 0), "parallel.global_batch_size",
              "M = global_batch_size / (micro_batch_size x dp) = 2 micro-batches: The number of "
              "contiguous micro-batches in a virtual pipeline stage should range in [PP=4 , M=2]");
  expect_only(interleaved(12, 0), "parallel.global_batch_size",
              "= 6 micro-batches: The remainder of M (the total micro-batches) divided by N "
              "(number of contiguous micro-batches in a virtual pipeline stage) should be 0, or "
              "larger than or equal to the pipeline-parallel size, but it is 2.");
  expect_only(interleaved(16, 3), "parallel.microbatch_group_size_per_vp_stage",
              "should range in [PP=4 , M=8]");
  expect_only(interleaved(24, 5), "parallel.microbatch_group_size_per_vp_stage",
              "but it is 2.");  // M 12 = 5 + 5 + 2
}

TEST(Validate, InterleavedRulesAlongARampup) {
  Plan p = interleaved(16, 0);                                 // final M 8
  p.training.rampup_batch_size = RampupBatchSize{4, 4, 1000};  // starts at M 2 < pp 4
  expect_only(p, "parallel.global_batch_size",
              "should range in [PP=4 , M=2] (ramp-up step at 0 consumed samples)");
}

// ---- training -------------------------------------------------------------------------------

TEST(Validate, FlashAttentionNeedsHalfPrecision) {
  Plan p = base();
  p.training.precision = Precision::kFp32;
  expect_only(p, "training.attention_backend", "flash attention runs in fp16 or bf16 only");
  p.training.attention_backend = AttentionBackend::kUnfused;
  EXPECT_EQ(all(validate(p)), "");
}

TEST(Validate, ViolationsComeInAStableOrder) {
  Plan p = base();
  p.training.precision = Precision::kFp32;
  p.parallel.global_batch_size = 30;
  p.parallel.tp = 3;
  p.parallel.etp = 3;
  p.model.max_position_embeddings = 4096;
  std::vector<Violation> v = validate(p);
  ASSERT_GE(v.size(), 4u) << all(v);
  EXPECT_EQ(v.front().field, "model.max_position_embeddings");
  EXPECT_EQ(v.back().field, "training.attention_backend");
}

}  // namespace
}  // namespace mplan
