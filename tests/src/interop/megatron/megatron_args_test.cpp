// Tests of plan <-> Megatron-LM arguments. Expected values come from Megatron-LM's sources and
// example scripts (argument names and defaults in megatron/training/arguments.py, the batch
// schedule of examples/gpt3/train_gpt3_175b_distributed.sh) or are worked out by hand.
#include "src/interop/megatron/megatron_args.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "src/common/embedded_configs.hpp"
#include "src/common/error.hpp"
#include "src/plan/validate.hpp"

namespace mplan {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

Plan plan_of(const std::string& json) { return plan_from_json(parse_json(json, "test plan")); }

// The value(s) following `name` in argv, or {"<absent>"}.
std::vector<std::string> values_of(const std::vector<std::string>& argv, const std::string& name) {
  auto it = std::find(argv.begin(), argv.end(), name);
  if (it == argv.end()) return {"<absent>"};
  std::vector<std::string> out;
  for (++it; it != argv.end() && it->rfind("--", 0) != 0; ++it) out.push_back(*it);
  return out;
}
bool has(const std::vector<std::string>& argv, const std::string& name) {
  return std::find(argv.begin(), argv.end(), name) != argv.end();
}
bool any_contains(const std::vector<std::string>& v, const std::string& part) {
  for (const auto& s : v)
    if (s.find(part) != std::string::npos) return true;
  return false;
}

MegatronImportOptions options_for(const Plan& p) {
  MegatronImportOptions o;
  o.cluster = p.cluster;
  o.model_name = p.model.name;
  return o;
}

// --- plans used for the round trips ----------------------------------------------------------

// GPT-3 175B on 128 GPUs (16 nodes): interleaved (vpp 2), fp16 with fp32 grads, ramp-up, selective
// recompute, sequence parallel, distributed optimizer with both overlaps.
const char* kGpt3Interleaved = R"({
  "schema_version": 1, "model": "gpt3-175b", "cluster": "dgx-a100-80g",
  "parallel": {"tp": 8, "pp": 16, "vpp": 2, "dp": 1, "sequence_parallel": true,
               "micro_batch_size": 1, "global_batch_size": 1536, "recompute": "selective",
               "distributed_optimizer": true, "overlap_grad_reduce": true,
               "overlap_param_gather": true},
  "training": {"precision": "fp16", "grads_in_fp32": true, "lr": 6e-05, "weight_decay": 0.1,
               "init_method_std": 0.006, "train_iters": 500000,
               "rampup_batch_size": [16, 16, 5859375]}
})";

// Llama 3 8B with an uneven pipeline (6 + 10 + 10 + 6 layers), tp-pp-dp order, full block
// recompute, bf16 gradient reduction and unfused attention; 16 GPUs on two nodes.
const char* kLlamaUneven = R"({
  "schema_version": 1, "model": "llama3-8b", "cluster": "dgx-h100",
  "parallel": {"tp": 2, "pp": 4, "dp": 2, "sequence_parallel": true, "order": "tp-cp-ep-pp-dp",
               "decoder_first_pipeline_num_layers": 6, "decoder_last_pipeline_num_layers": 6,
               "micro_batch_size": 2, "global_batch_size": 64, "recompute": "full",
               "recompute_method": "block", "recompute_num_layers": 2,
               "overlap_grad_reduce": false},
  "training": {"precision": "bf16", "grads_in_fp32": false, "attention_backend": "unfused",
               "lr": 0.0003, "adam_beta2": 0.999, "seed": 7, "train_iters": 10}
})";

// Mixtral 8x7B: expert parallel 8 with expert tensor parallel 1, context parallel 2.
const char* kMixtral = R"({
  "schema_version": 1, "model": "mixtral-8x7b", "cluster": "dgx-h100",
  "parallel": {"tp": 2, "cp": 2, "ep": 8, "etp": 1, "pp": 4, "dp": 2, "sequence_parallel": true,
               "micro_batch_size": 1, "global_batch_size": 256, "distributed_optimizer": true},
  "training": {"precision": "bf16", "train_iters": 1000}
})";

// Virtual stages with an uneven split (4 + 6 + 6 + ... + 4 over pp 4 x vpp 2) and a micro-batch
// group size.
const char* kVppUneven = R"({
  "schema_version": 1, "model": "llama3-8b", "cluster": "dgx-a100-80g",
  "parallel": {"tp": 1, "pp": 4, "vpp": 2, "dp": 2, "decoder_first_pipeline_num_layers": 4,
               "decoder_last_pipeline_num_layers": 4, "microbatch_group_size_per_vp_stage": 8,
               "micro_batch_size": 2, "global_batch_size": 64},
  "training": {"precision": "bf16", "train_iters": 5}
})";

// A model no preset has: MoE every 2nd layer with a shared expert, explicit head dim, learned
// positions, fp32; 4 GPUs on an 8-GPU node.
const char* kCustomMoe = R"({
  "schema_version": 1,
  "model": {"name": "tiny-moe", "num_layers": 4, "hidden_size": 256, "num_attention_heads": 4,
            "num_query_groups": 2, "kv_channels": 80, "ffn_hidden_size": 1024,
            "vocab_size": 1000, "make_vocab_size_divisible_by": 64, "seq_length": 512,
            "max_position_embeddings": 1024, "activation": "swiglu", "normalization": "rmsnorm",
            "position_embedding": "learned", "tied_embeddings": false, "add_bias_linear": false,
            "moe": {"num_experts": 4, "topk": 1, "moe_ffn_hidden_size": 512,
                    "shared_expert_ffn_hidden_size": 256, "layer_freq": 2}},
  "cluster": "dgx-a100-80g",
  "parallel": {"tp": 2, "ep": 2, "pp": 1, "dp": 2, "micro_batch_size": 4, "global_batch_size": 32},
  "training": {"precision": "fp32", "lr": 0.001, "clip_grad": 0.5, "adam_eps": 1e-06,
               "train_iters": 3}
})";

const char* kAllPlans[] = {kGpt3Interleaved, kLlamaUneven, kMixtral, kVppUneven, kCustomMoe};

// --- export ------------------------------------------------------------------------------------

TEST(MegatronExport, Gpt3InterleavedArguments) {
  Plan plan = plan_of(kGpt3Interleaved);
  MegatronLaunch L = megatron_launch_from_plan(plan);
  EXPECT_EQ(L.nproc_per_node, 8);
  EXPECT_EQ(L.nnodes, 16);  // 8 x 16 x 1 = 128 GPUs
  auto argv = megatron_argv(L);
  EXPECT_THAT(values_of(argv, "--tensor-model-parallel-size"), ElementsAre("8"));
  EXPECT_THAT(values_of(argv, "--pipeline-model-parallel-size"), ElementsAre("16"));
  EXPECT_THAT(values_of(argv, "--num-virtual-stages-per-pipeline-rank"), ElementsAre("2"));
  EXPECT_THAT(values_of(argv, "--num-layers"), ElementsAre("96"));
  EXPECT_THAT(values_of(argv, "--hidden-size"), ElementsAre("12288"));
  EXPECT_THAT(values_of(argv, "--ffn-hidden-size"), ElementsAre("49152"));
  EXPECT_THAT(values_of(argv, "--vocab-size"), ElementsAre("51200"));
  EXPECT_THAT(values_of(argv, "--recompute-granularity"), ElementsAre("selective"));
  EXPECT_THAT(values_of(argv, "--lr"), ElementsAre("6e-05"));
  EXPECT_THAT(values_of(argv, "--init-method-std"), ElementsAre("0.006"));
  for (const char* f : {"--fp16", "--accumulate-allreduce-grads-in-fp32", "--sequence-parallel",
                        "--use-distributed-optimizer", "--overlap-grad-reduce",
                        "--overlap-param-gather", "--mock-data"})
    EXPECT_TRUE(has(argv, f)) << f;
  // Megatron-LM refuses --global-batch-size together with the step schedule.
  EXPECT_FALSE(has(argv, "--global-batch-size"));
  EXPECT_FALSE(has(argv, "--rampup-batch-size"));
  EXPECT_FALSE(has(argv, "--group-query-attention"));  // multi-head attention
  EXPECT_FALSE(has(argv, "--swiglu"));
  auto sched = values_of(argv, "--step-batch-size-schedule");
  ASSERT_EQ(sched.size(), 1u);
  // 95 increments of 16 over 5859375 samples: one every 61677.63 samples, so the first lands at
  // sample 61678 = 126316544 tokens of 2048; the last at 5859375 samples = 12e9 tokens.
  EXPECT_EQ(sched[0].substr(0, 21), "0:16 126316544:32 252");
  EXPECT_EQ(sched[0].substr(sched[0].size() - 17), " 12000000000:1536");
}

TEST(MegatronExport, LlamaUnevenArguments) {
  MegatronLaunch L = megatron_launch_from_plan(plan_of(kLlamaUneven));
  EXPECT_EQ(L.nproc_per_node, 8);
  EXPECT_EQ(L.nnodes, 2);
  auto argv = megatron_argv(L);
  EXPECT_THAT(values_of(argv, "--decoder-first-pipeline-num-layers"), ElementsAre("6"));
  EXPECT_THAT(values_of(argv, "--decoder-last-pipeline-num-layers"), ElementsAre("6"));
  EXPECT_THAT(values_of(argv, "--num-query-groups"), ElementsAre("8"));
  EXPECT_THAT(values_of(argv, "--recompute-method"), ElementsAre("block"));
  EXPECT_THAT(values_of(argv, "--recompute-num-layers"), ElementsAre("2"));
  EXPECT_THAT(values_of(argv, "--attention-backend"), ElementsAre("unfused"));
  EXPECT_THAT(values_of(argv, "--position-embedding-type"), ElementsAre("rope"));
  EXPECT_THAT(values_of(argv, "--normalization"), ElementsAre("RMSNorm"));
  EXPECT_THAT(values_of(argv, "--global-batch-size"), ElementsAre("64"));
  for (const char* f :
       {"--use-tp-pp-dp-mapping", "--bf16", "--grad-reduce-in-bf16", "--group-query-attention",
        "--swiglu", "--untie-embeddings-and-output-weights", "--disable-bias-linear",
        "--sequence-parallel"})
    EXPECT_TRUE(has(argv, f)) << f;
  EXPECT_FALSE(has(argv, "--overlap-grad-reduce"));
  EXPECT_FALSE(has(argv, "--num-virtual-stages-per-pipeline-rank"));
  EXPECT_FALSE(has(argv, "--kv-channels"));  // 4096 / 32 = 128, Megatron's default
}

TEST(MegatronExport, MoeArguments) {
  auto argv = megatron_argv(megatron_launch_from_plan(plan_of(kCustomMoe)));
  EXPECT_THAT(values_of(argv, "--num-experts"), ElementsAre("4"));
  EXPECT_THAT(values_of(argv, "--moe-router-topk"), ElementsAre("1"));
  EXPECT_THAT(values_of(argv, "--moe-ffn-hidden-size"), ElementsAre("512"));
  EXPECT_THAT(values_of(argv, "--moe-shared-expert-intermediate-size"), ElementsAre("256"));
  EXPECT_THAT(values_of(argv, "--moe-layer-freq"), ElementsAre("2"));
  EXPECT_THAT(values_of(argv, "--expert-model-parallel-size"), ElementsAre("2"));
  EXPECT_THAT(values_of(argv, "--expert-tensor-parallel-size"), ElementsAre("2"));
  EXPECT_THAT(values_of(argv, "--kv-channels"), ElementsAre("80"));
  EXPECT_THAT(values_of(argv, "--make-vocab-size-divisible-by"), ElementsAre("64"));
  EXPECT_FALSE(has(argv, "--bf16"));
  EXPECT_FALSE(has(argv, "--fp16"));
}

TEST(MegatronExport, LegacyRampup) {
  MegatronExportOptions eo;
  eo.legacy_rampup = true;
  auto argv = megatron_argv(megatron_launch_from_plan(plan_of(kGpt3Interleaved), eo));
  EXPECT_THAT(values_of(argv, "--rampup-batch-size"), ElementsAre("16", "16", "5859375"));
  EXPECT_THAT(values_of(argv, "--global-batch-size"), ElementsAre("1536"));
  EXPECT_FALSE(has(argv, "--step-batch-size-schedule"));
}

TEST(MegatronExport, NotesForWhatMegatronCannotExpress) {
  Plan plan = plan_of(kVppUneven);
  plan.parallel.vpp = 1;
  plan.parallel.decoder_first_pipeline_num_layers.reset();
  plan.parallel.decoder_last_pipeline_num_layers.reset();
  plan.parallel.microbatch_group_size_per_vp_stage = 0;
  plan.parallel.schedule = ScheduleKind::kZbH1;
  plan.parallel.sequence_parallel = true;  // with tp 1
  plan.training.train_iters = 0;
  MegatronLaunch L = megatron_launch_from_plan(plan);
  EXPECT_TRUE(any_contains(L.notes, "zb-h1"));
  EXPECT_TRUE(any_contains(L.notes, "sequence_parallel with tp 1"));
  EXPECT_TRUE(any_contains(L.notes, "train_iters"));
  EXPECT_FALSE(has(megatron_argv(L), "--sequence-parallel"));
}

TEST(MegatronExport, RefusesAnOrderMegatronDoesNotHaveAndInvalidPlans) {
  Plan plan = plan_of(kMixtral);
  plan.parallel.order = "tp-dp-cp-ep-pp";
  EXPECT_THAT([&] { megatron_launch_from_plan(plan); },
              ThrowsMessage<Error>(HasSubstr("parallel.order: Megatron-LM places ranks only")));
  plan = plan_of(kMixtral);
  plan.parallel.tp = 3;  // 32 heads are not divisible by 3
  EXPECT_THAT([&] { megatron_launch_from_plan(plan); },
              ThrowsMessage<Error>(HasSubstr("parallel.tp")));
}

TEST(MegatronExport, TorchrunScriptShape) {
  std::string s = render_megatron_torchrun(megatron_launch_from_plan(plan_of(kLlamaUneven)), "t");
  EXPECT_THAT(s, HasSubstr("GPUS_PER_NODE=8\nNUM_NODES=2\n"));
  EXPECT_THAT(s, HasSubstr("export CUDA_DEVICE_MAX_CONNECTIONS=1\n"));
  EXPECT_THAT(s, HasSubstr("MODEL_PARALLEL_ARGS=(\n    --tensor-model-parallel-size 2\n"));
  EXPECT_THAT(s, HasSubstr("torchrun \"${DISTRIBUTED_ARGS[@]}\" pretrain_gpt.py \\\n"
                           "    \"${GPT_MODEL_ARGS[@]}\" \\\n"));
  EXPECT_EQ(shell_quote("0:16 2:32"), "'0:16 2:32'");
  EXPECT_EQ(shell_quote("it's"), "'it'\\''s'");
  EXPECT_EQ(shell_quote("6e-05"), "6e-05");
}

// --- round trips -------------------------------------------------------------------------------

TEST(MegatronRoundTrip, TorchrunScriptGivesTheSamePlan) {
  for (const char* json : kAllPlans) {
    Plan plan = plan_of(json);
    std::string script = render_megatron_torchrun(megatron_launch_from_plan(plan), "round trip");
    MegatronImport r = import_megatron(script, options_for(plan));
    EXPECT_EQ(plan_to_json(r.plan).dump(1), plan_to_json(plan).dump(1)) << script;
    EXPECT_TRUE(r.plan == plan) << plan.model.name;
    EXPECT_TRUE(r.not_modelled.empty()) << plan.model.name << ": " << r.not_modelled.size();
    EXPECT_EQ(r.script_world_size, plan.world_size());
  }
}

TEST(MegatronRoundTrip, ArgumentListWithGpusGivesTheSamePlan) {
  for (const char* json : kAllPlans) {
    Plan plan = plan_of(json);
    std::string args = render_megatron_args(megatron_launch_from_plan(plan));
    MegatronImportOptions o = options_for(plan);
    o.gpus = plan.world_size();
    MegatronImport r = import_megatron(args, o);
    EXPECT_TRUE(r.plan == plan) << plan.model.name << "\n" << args;
  }
}

TEST(MegatronRoundTrip, LegacyRampupGivesTheSamePlan) {
  Plan plan = plan_of(kGpt3Interleaved);
  MegatronExportOptions eo;
  eo.legacy_rampup = true;
  std::string script = render_megatron_torchrun(megatron_launch_from_plan(plan, eo), "legacy");
  EXPECT_TRUE(import_megatron(script, options_for(plan)).plan == plan);
}

TEST(MegatronRoundTrip, PresetPlanFile) {
  Plan plan =
      plan_from_json(parse_json(load_config_text("plans", "gpt3-1.3b-dp4", "plan"), "plan"));
  std::string script = render_megatron_torchrun(megatron_launch_from_plan(plan), "preset");
  MegatronImport r = import_megatron(script, options_for(plan));
  EXPECT_TRUE(r.plan == plan);
  EXPECT_EQ(r.matched_preset, "gpt3-1.3b");
}

// --- ramp-up arithmetic --------------------------------------------------------------------------

TEST(MegatronRampup, LegacyCalculator) {
  RampupBatchSize r{16, 16, 5859375};
  // 95 increments; 5859375 / 95 = 61677.63 samples each.
  EXPECT_EQ(legacy_rampup_batch(r, 1536, 0), 16);
  EXPECT_EQ(legacy_rampup_batch(r, 1536, 61677), 16);
  EXPECT_EQ(legacy_rampup_batch(r, 1536, 61678), 32);
  EXPECT_EQ(legacy_rampup_batch(r, 1536, 5859374), 1520);
  EXPECT_EQ(legacy_rampup_batch(r, 1536, 5859376), 1536);
  auto steps = rampup_as_steps(r, 1536);
  ASSERT_EQ(steps.size(), 96u);
  EXPECT_EQ(steps[1], (std::pair<int64_t, int64_t>{61678, 32}));
  EXPECT_EQ(steps.back().second, 1536);
}

TEST(MegatronRampup, MatchesTheGpt3ExampleStepSchedule) {
  // examples/gpt3/train_gpt3_175b_distributed.sh: "0:16 2.4B:320 4.8B:624 7.2B:928 9.6B:1232
  // 12B:1536" in tokens of 2048 = samples 0, 1171875, ..., 5859375: a ramp 16 + 304 per step.
  auto steps = rampup_as_steps(RampupBatchSize{16, 304, 5859375}, 1536);
  EXPECT_THAT(steps, ElementsAre(std::pair<int64_t, int64_t>{0, 16},
                                 std::pair<int64_t, int64_t>{1171875, 320},
                                 std::pair<int64_t, int64_t>{2343750, 624},
                                 std::pair<int64_t, int64_t>{3515625, 928},
                                 std::pair<int64_t, int64_t>{4687500, 1232},
                                 std::pair<int64_t, int64_t>{5859375, 1536}));
}

// --- import --------------------------------------------------------------------------------------

// In the shape of Megatron-LM's GPT-3 175B launch script (README recipe with the batch ramp-up):
// arrays over lines, a comment inside an array, continuations, positional path variables, and
// 8 processes for a tp 8 x pp 16 layout (fixtures/README.md).
std::string gpt3_script() {
  return read_text_file(std::string(MPLAN_SOURCE_DIR) +
                            "/tests/src/interop/megatron/fixtures/gpt3_175b_made_up_argument.sh",
                        "fixture");
}

MegatronImportOptions default_import() {
  MegatronImportOptions o;
  o.cluster = load_cluster("dgx-a100-80g");
  return o;
}

TEST(MegatronImport, Gpt3LaunchScript) {
  MegatronImport r = import_megatron(gpt3_script(), default_import());
  const Plan& p = r.plan;
  EXPECT_EQ(p.parallel.tp, 8);
  EXPECT_EQ(p.parallel.pp, 16);
  EXPECT_EQ(p.parallel.dp, 1);
  EXPECT_EQ(p.world_size(), 128);
  EXPECT_EQ(p.model.num_layers, 96);
  EXPECT_EQ(p.model.hidden_size, 12288);
  EXPECT_EQ(p.model.num_attention_heads, 96);
  EXPECT_EQ(p.model.ffn_hidden_size, 4 * 12288);  // Megatron's default 4h
  EXPECT_EQ(p.model.vocab_size, 50257);           // GPT-2 BPE files
  EXPECT_EQ(p.parallel.global_batch_size, 1536);
  EXPECT_EQ(p.parallel.micro_batch_size, 1);
  ASSERT_TRUE(p.training.rampup_batch_size.has_value());
  EXPECT_EQ(*p.training.rampup_batch_size, (RampupBatchSize{16, 16, 5859375}));
  EXPECT_EQ(p.training.precision, Precision::kFp16);
  EXPECT_FALSE(p.training.grads_in_fp32);  // fp16 without --accumulate-allreduce-grads-in-fp32
  EXPECT_EQ(p.training.lr, 6e-5);
  EXPECT_EQ(p.training.init_method_std, 0.006);
  EXPECT_EQ(p.training.adam_beta2, 0.95);
  EXPECT_EQ(p.training.adam_eps, 1e-8);  // Megatron's default
  EXPECT_EQ(p.training.train_iters, 500000);
  EXPECT_EQ(p.parallel.schedule, ScheduleKind::k1F1B);
  EXPECT_EQ(r.script_world_size, 8);
  EXPECT_EQ(r.matched_preset, "gpt3-175b");
  EXPECT_EQ(p.model.name, "gpt3-175b");
  EXPECT_TRUE(any_contains(r.warnings, "launches 8 processes"));
  EXPECT_TRUE(any_contains(r.warnings, "128 GPUs, dp 1"));
  EXPECT_THAT(r.not_modelled, ElementsAre("--made-up-argument 3"));
  EXPECT_TRUE(any_contains(r.ignored, "--lr-decay-style cosine"));
  EXPECT_TRUE(any_contains(r.ignored, "--save $1"));
  EXPECT_THAT(
      r.undefined,
      ElementsAre("$1 (no value here): --save, --load", "$2 (no value here): --tensorboard-dir",
                  "$3 (no value here): --vocab-file", "$4 (no value here): --merge-file",
                  "$5 (no value here): --data-path"));
  EXPECT_TRUE(validate(p).empty());
}

TEST(MegatronImport, Gpt3ScriptWithMoreNodesGivenAsVariable) {
  MegatronImportOptions o = default_import();
  o.vars = {{"NUM_NODES", "128"}};  // 1024 processes: dp 8
  MegatronImport r = import_megatron(gpt3_script(), o);
  EXPECT_EQ(r.plan.parallel.dp, 8);
  EXPECT_EQ(r.script_world_size, 1024);
  EXPECT_FALSE(any_contains(r.warnings, "launches"));
}

TEST(MegatronImport, CurrentExampleStepScheduleIsARampup) {
  // The current example: --step-batch-size-schedule in tokens, split by an unquoted ${ARR[@]},
  // given together with --global-batch-size (Megatron-LM refuses both).
  std::string s =
      "T=(\n --micro-batch-size 1\n --global-batch-size 1536\n"
      " --step-batch-size-schedule \"0:16 2.4B:320 4.8B:624 7.2B:928 9.6B:1232 12B:1536\"\n)\n"
      "M=(--num-layers 96 --hidden-size 12288 --num-attention-heads 96 --seq-length 2048\n"
      "   --max-position-embeddings 2048 --vocab-size 51200 --tensor-model-parallel-size 8\n"
      "   --pipeline-model-parallel-size 16)\n"
      "torchrun --nproc_per_node 8 --nnodes 16 pretrain_gpt.py ${M[@]} ${T[@]}\n";
  MegatronImport r = import_megatron(s, default_import());
  ASSERT_TRUE(r.plan.training.rampup_batch_size.has_value());
  EXPECT_EQ(*r.plan.training.rampup_batch_size, (RampupBatchSize{16, 304, 5859375}));
  EXPECT_EQ(r.plan.parallel.global_batch_size, 1536);
  EXPECT_TRUE(any_contains(r.warnings, "refuses the two together"));
  EXPECT_TRUE(any_contains(r.warnings, "6 words"));
  EXPECT_FALSE(any_contains(r.warnings, "processes"));  // 128 processes for 128 GPUs
}

TEST(MegatronImport, MegatronDefaultsWhereTheScriptIsSilent) {
  MegatronImportOptions o = default_import();
  o.gpus = 8;
  MegatronImport r = import_megatron(
      "--num-layers 4 --hidden-size 4096 --num-attention-heads 32 --seq-length 1024\n"
      "--max-position-embeddings 1024 --swiglu --micro-batch-size 2 --vocab-size 32000\n"
      "--num-layers-per-virtual-pipeline-stage 1 --pipeline-model-parallel-size 2\n"
      "--recompute-activations --lr 1e-4\n",
      o);
  const Plan& p = r.plan;
  // int((4 * 4096 * 2 / 3) / 64) * 64 = int(170.67) * 64 = 10880 (arguments.py, SwiGLU).
  EXPECT_EQ(p.model.ffn_hidden_size, 10880);
  EXPECT_EQ(p.model.num_query_groups, 32);  // no --group-query-attention
  EXPECT_EQ(p.model.kv_channels, 128);
  EXPECT_EQ(p.training.weight_decay, 0.01);  // Megatron-LM's defaults, not mplan's
  EXPECT_EQ(p.training.adam_beta2, 0.999);
  EXPECT_EQ(p.training.precision, Precision::kFp32);
  EXPECT_EQ(p.parallel.vpp, 2);  // 4 layers / pp 2 = 2 per stage, 1 per virtual stage
  EXPECT_EQ(p.parallel.schedule, ScheduleKind::kInterleaved);
  EXPECT_EQ(p.parallel.recompute, Recompute::kSelective);
  EXPECT_EQ(p.parallel.dp, 4);
  EXPECT_EQ(p.parallel.global_batch_size, 8);  // micro 2 x dp 4
  EXPECT_TRUE(any_contains(r.warnings, "--global-batch-size: not given"));
}

TEST(MegatronImport, PositionalVariableInALayoutArgumentIsAnError) {
  std::string s =
      "TP=$1\nLR=$2\n"
      "torchrun --nproc_per_node 8 pretrain_gpt.py --num-layers 2 --hidden-size 64 "
      "--num-attention-heads 8 --seq-length 128 --max-position-embeddings 128 --vocab-size 100 "
      "--micro-batch-size 1 --tensor-model-parallel-size $TP --lr $LR\n";
  EXPECT_THAT([&] { import_megatron(s, default_import()); },
              ThrowsMessage<Error>(HasSubstr("--tensor-model-parallel-size: its value ($1) depends "
                                             "on $1, which has no value here; give it with --var "
                                             "1=VALUE")));
  MegatronImportOptions o = default_import();
  o.vars = {{"1", "4"}};
  MegatronImport r = import_megatron(s, o);
  EXPECT_EQ(r.plan.parallel.tp, 4);
  EXPECT_EQ(r.plan.parallel.dp, 2);
  EXPECT_EQ(r.plan.training.lr, 1e-4);  // not layout-relevant: mplan's default, with a warning
  EXPECT_TRUE(any_contains(r.warnings, "--lr: its value ($2) depends on $2"));
  EXPECT_THAT(r.undefined, ElementsAre("$2 (no value here): --lr"));
}

TEST(MegatronImport, BadInputNamesTheArgument) {
  const std::string base =
      "--num-layers 2 --hidden-size 64 --num-attention-heads 8 --seq-length 128 "
      "--max-position-embeddings 128 --vocab-size 100 ";
  auto fails = [&](const std::string& extra, const std::string& message) {
    EXPECT_THAT([&] { import_megatron(base + extra, default_import()); },
                ThrowsMessage<Error>(HasSubstr(message)))
        << extra;
  };
  fails("", "--micro-batch-size: missing");
  fails("--micro-batch-size 1 --bf16 --fp16",
        "--bf16: Megatron-LM refuses --bf16 together with --fp16");
  fails("--micro-batch-size x", "--micro-batch-size: must be an integer, got 'x'");
  fails("--micro-batch-size 1 --bf16 yes", "--bf16: takes no value, got 'yes'");
  fails("--micro-batch-size 1 --recompute-granularity full", "--recompute-method: missing");
  fails("--micro-batch-size 1 --overlap-param-gather --overlap-grad-reduce",
        "--overlap-param-gather: Megatron-LM supports it only with --use-distributed-optimizer");
  fails("--micro-batch-size 1 --expert-model-parallel-size 2", "needs --num-experts");
  fails("--micro-batch-size 1 --num-experts 4 --moe-layer-freq '[1,0]*1'", "--moe-layer-freq");
  fails("--micro-batch-size 1 --pipeline-model-parallel-layout 'E|t|L'",
        "--pipeline-model-parallel-layout: not modelled");
  EXPECT_THAT([] { import_megatron("echo hello\n", default_import()); },
              ThrowsMessage<Error>(HasSubstr("no Megatron-LM launch command")));
  EXPECT_THAT([] { import_megatron("A=(\n --x 1\n", default_import()); },
              ThrowsMessage<Error>(HasSubstr("line 1: unterminated array A=( ... )")));
  EXPECT_THAT([] { import_megatron("python pretrain_bert.py --num-layers 2\n", default_import()); },
              ThrowsMessage<Error>(HasSubstr("pretrain_bert.py: mplan imports GPT decoder jobs")));
}

TEST(MegatronImport, LaunchVariants) {
  const std::string args =
      " --num-layers 2 --hidden-size 64 --num-attention-heads 8 --seq-length 128"
      " --max-position-embeddings 128 --vocab-size 100 --micro-batch-size 1";
  auto world = [&](const std::string& launch) {
    return import_megatron(launch + args + "\n", default_import()).script_world_size;
  };
  EXPECT_EQ(world("torchrun --nproc-per-node=4 --nnodes=2 pretrain_gpt.py"), 8);
  EXPECT_EQ(world("python -m torch.distributed.run --nproc_per_node 2 pretrain_gpt.py"), 2);
  EXPECT_EQ(world("python3 pretrain_gpt.py"), 1);
  EXPECT_EQ(world("torchrun --nproc_per_node gpu --nnodes 1:3 pretrain_gpt.py"), 24);
  EXPECT_THAT([&] { world("torchrun --nproc_per_node $G pretrain_gpt.py"); },
              ThrowsMessage<Error>(HasSubstr("--nproc_per_node: its value ($G) depends on $G")));
}

TEST(MegatronImport, MixtralShapeMatchesThePreset) {
  std::string s =
      "MODEL_ARGS=(\n --disable-bias-linear --seq-length 4096 --max-position-embeddings 32768\n"
      " --num-layers 32 --hidden-size 4096 --ffn-hidden-size 14336 --num-attention-heads 32\n"
      " --normalization RMSNorm --position-embedding-type rope --swiglu\n"
      " --untie-embeddings-and-output-weights --group-query-attention --num-query-groups 8\n"
      " --no-position-embedding\n)\n"
      "MOE_ARGS=(--num-experts 8 --moe-router-topk 2 --moe-grouped-gemm)\n"
      "T=(--micro-batch-size 1 --global-batch-size 256 --bf16 --tokenizer-type Llama2Tokenizer)\n"
      "P=(--tensor-model-parallel-size 1 --pipeline-model-parallel-size 4\n"
      "   --expert-model-parallel-size 8 --use-distributed-optimizer --sequence-parallel)\n"
      "NNODES=${SLURM_NNODES:-\"1\"}\n"
      "torchrun --nproc_per_node 8 --nnodes $NNODES pretrain_gpt.py ${MODEL_ARGS[@]} ${MOE_ARGS[@]}"
      " ${T[@]} ${P[@]}\n";
  MegatronImport r = import_megatron(s, default_import());
  EXPECT_EQ(r.matched_preset, "mixtral-8x7b");
  EXPECT_EQ(r.plan.model.vocab_size, 32000);
  EXPECT_EQ(r.plan.model.moe->moe_ffn_hidden_size, 14336);  // defaults to ffn_hidden_size
  EXPECT_FALSE(r.plan.parallel.sequence_parallel);          // Megatron-LM turns it off with tp 1
  // 8 processes cannot hold etp 1 x ep 8 x pp 4 = 32: sized by the layout, dp 8.
  EXPECT_EQ(r.plan.world_size(), 32);
  EXPECT_EQ(r.plan.parallel.dp, 8);
  EXPECT_THAT(r.not_modelled, ElementsAre("--moe-grouped-gemm"));
  EXPECT_TRUE(any_contains(r.undefined, "$SLURM_NNODES -> \"1\""));
}

}  // namespace
}  // namespace mplan
