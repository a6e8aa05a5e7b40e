// Tests of export (plan -> Megatron-LM arguments) and of the round trip plan -> script -> plan.
// Expected values come from Megatron-LM's sources (argument names in
// megatron/training/arguments.py) or are worked out by hand.
#include "src/interop/megatron/megatron_export.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "src/common/embedded_configs.hpp"
#include "src/common/error.hpp"
#include "src/interop/megatron/megatron_import.hpp"
#include "src/plan/validate.hpp"
#include "tests/src/interop/megatron/test_plans.hpp"

namespace mplan {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;
using namespace megatron_test;

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
}

TEST(MegatronExport, PipelineLayoutsFsdpAndOptimizerStateArguments) {
  auto layout = megatron_argv(megatron_launch_from_plan(plan_of(kLlama405bLayout)));
  EXPECT_THAT(values_of(layout, "--pipeline-model-parallel-layout"),
              ElementsAre("Et*7|(t*8|)*14t*7L"));
  EXPECT_FALSE(has(layout, "--num-virtual-stages-per-pipeline-rank"));  // the layout gives it
  auto split = megatron_argv(megatron_launch_from_plan(plan_of(kLlama405bAccountFor)));
  EXPECT_TRUE(has(split, "--account-for-embedding-in-pipeline-split"));
  EXPECT_TRUE(has(split, "--account-for-loss-in-pipeline-split"));
  EXPECT_THAT(values_of(split, "--num-virtual-stages-per-pipeline-rank"), ElementsAre("8"));
  auto fsdp = megatron_argv(megatron_launch_from_plan(plan_of(kFsdp)));
  EXPECT_TRUE(has(fsdp, "--use-megatron-fsdp"));
  EXPECT_TRUE(has(fsdp, "--use-distributed-optimizer"));
  EXPECT_THAT(values_of(fsdp, "--data-parallel-sharding-strategy"),
              ElementsAre("optim_grads_params"));
  // arguments.py: "Megatron-FSDP requires the `fsdp_dtensor` checkpointing format."
  EXPECT_THAT(values_of(fsdp, "--ckpt-format"), ElementsAre("fsdp_dtensor"));
  EXPECT_THAT(values_of(fsdp, "--num-distributed-optimizer-instances"), ElementsAre("2"));
  EXPECT_TRUE(has(fsdp, "--use-precision-aware-optimizer"));
  EXPECT_THAT(values_of(fsdp, "--exp-avg-dtype"), ElementsAre("bf16"));
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

// --- ready to run --------------------------------------------------------------------------------

TEST(MegatronExport, WritesEveryArgumentThePredictionDependsOn) {
  auto argv_of = [](const char* json) {
    return megatron_argv(megatron_launch_from_plan(plan_of(json)));
  };
  // MoE: the cost model's grouped expert GEMM and all-to-all token exchange; context parallelism
  // as Megatron-LM's p2p ring.
  auto mixtral = argv_of(kMixtral);
  EXPECT_TRUE(has(mixtral, "--moe-grouped-gemm"));
  EXPECT_THAT(values_of(mixtral, "--moe-token-dispatcher-type"), ElementsAre("alltoall"));
  EXPECT_THAT(values_of(mixtral, "--cp-comm-type"), ElementsAre("p2p"));
  EXPECT_THAT(values_of(mixtral, "--rotary-base"), ElementsAre("1000000"));
  // Llama 3's RoPE base (Llama 3 paper, Section 3.2).
  EXPECT_THAT(values_of(argv_of(kLlamaUneven), "--rotary-base"), ElementsAre("500000"));
  // Dense, learned positions, cp 1: none of these.
  auto gpt3 = argv_of(kGpt3Interleaved);
  for (const char* a : {"--moe-grouped-gemm", "--rotary-base", "--cp-comm-type"})
    EXPECT_FALSE(has(gpt3, a)) << a;
  EXPECT_FALSE(has(argv_of(kCustomMoe), "--rotary-base"));  // not a preset: Megatron's default
  EXPECT_TRUE(has(argv_of(kCustomMoe), "--moe-grouped-gemm"));
}

TEST(MegatronExport, TrainItersFromThePlanTheCallerOrADefault) {
  Plan plan = plan_of(kVppUneven);  // train_iters 5
  EXPECT_THAT(values_of(megatron_argv(megatron_launch_from_plan(plan)), "--train-iters"),
              ElementsAre("5"));
  MegatronExportOptions eo;
  eo.train_iters = 70;
  EXPECT_THAT(values_of(megatron_argv(megatron_launch_from_plan(plan, eo)), "--train-iters"),
              ElementsAre("70"));
  plan.training.train_iters = 0;
  MegatronLaunch L = megatron_launch_from_plan(plan);
  EXPECT_THAT(values_of(megatron_argv(L), "--train-iters"), ElementsAre("100"));
  EXPECT_TRUE(any_contains(L.notes, "the plan sets no training.train_iters: --train-iters 100"));
  EXPECT_THAT(L.directives, ::testing::Contains(
                                std::pair<std::string, std::string>{"default-train-iters", "100"}));
  // Read back, the count export chose leaves the plan without one; a count edited in is kept.
  std::string script = render_megatron_torchrun(L, "t");
  EXPECT_EQ(import_megatron(script, {}).plan.training.train_iters, 0);
  size_t at = script.find("    --train-iters 100\n");
  ASSERT_NE(at, std::string::npos);
  script.replace(at, 22, "    --train-iters 300\n");
  EXPECT_EQ(import_megatron(script, {}).plan.training.train_iters, 300);
}

// --- the cluster through export -> import ------------------------------------------------------

TEST(MegatronExport, TheClusterTravelsInTheScript) {
  Plan plan = plan_of(kLlamaUneven);  // dgx-h100, a preset: named
  MegatronLaunch L = megatron_launch_from_plan(plan);
  ASSERT_FALSE(L.directives.empty());
  EXPECT_EQ(L.directives[0], (std::pair<std::string, std::string>{"cluster", "dgx-h100"}));
  std::string script = render_megatron_torchrun(L, "t");
  EXPECT_THAT(script, HasSubstr("\n# mplan: cluster=dgx-h100\n"));
  MegatronImport r = import_megatron(script, {});
  EXPECT_EQ(r.cluster_source, ClusterSource::kScript);
  EXPECT_TRUE(r.plan == plan);

  // A cluster that is no preset (a changed preset here) travels as JSON.
  plan.cluster.intra_node.latency_us = 7;
  plan.cluster.name = "my-h100";
  L = megatron_launch_from_plan(plan);
  EXPECT_EQ(L.directives[0].second.substr(0, 1), "{");
  r = import_megatron(render_megatron_torchrun(L, "t"), {});
  EXPECT_TRUE(r.plan.cluster == plan.cluster);
  EXPECT_TRUE(r.plan == plan);

  // The caller's cluster wins, with a warning when the script names another.
  MegatronImportOptions o;
  o.cluster = load_cluster("dgx-a100-80g");
  r = import_megatron(render_megatron_torchrun(L, "t"), o);
  EXPECT_EQ(r.cluster_source, ClusterSource::kGiven);
  EXPECT_EQ(r.plan.cluster.name, "dgx-a100-80g");
  EXPECT_TRUE(any_contains(r.warnings, "the script was exported for cluster 'my-h100'"));
  // No directive and no cluster given: the default.
  r = import_megatron(render_megatron_args(L), {});
  EXPECT_EQ(r.cluster_source, ClusterSource::kDefault);
  EXPECT_EQ(r.plan.cluster.name, kDefaultImportCluster);
}

// A valid plan of `model` on `cluster` with no train_iters (as the sweep writes them): tp over a
// node where the heads allow, pp 2 with virtual stages where the layers allow, dp 2, the
// distributed optimizer, expert parallelism 2 for MoE models.
std::optional<Plan> preset_plan(const std::string& model, const std::string& cluster) {
  Plan p;
  p.model = load_model(model);
  p.cluster = load_cluster(cluster);
  for (int64_t tp = p.cluster.gpus_per_node; tp >= 1; tp /= 2)
    for (int64_t vpp : {2, 1}) {
      ParallelConfig& q = p.parallel;
      q = ParallelConfig{};
      q.tp = tp;
      q.pp = 2;
      q.vpp = vpp;
      q.schedule = vpp > 1 ? ScheduleKind::kInterleaved : ScheduleKind::k1F1B;
      q.dp = 2;
      q.sequence_parallel = tp > 1;
      q.distributed_optimizer = true;
      q.ep = p.model.moe ? 2 : 1;
      q.etp = p.model.moe ? 1 : tp;
      q.micro_batch_size = 1;
      q.global_batch_size = 32;
      // An odd layer count (DeepSeek-V3's 61): one layer more on the last stage.
      if (p.model.num_layers % 2 != 0) q.decoder_first_pipeline_num_layers = p.model.num_layers / 2;
      if (validate(p).empty()) return p;
    }
  return std::nullopt;
}

TEST(MegatronRoundTrip, EveryModelPresetOnEveryClusterPreset) {
  int checked = 0;
  for (const auto& model : preset_names("models"))
    for (const auto& cluster : preset_names("clusters")) {
      SCOPED_TRACE(model + " on " + cluster);
      std::optional<Plan> plan = preset_plan(model, cluster);
      ASSERT_TRUE(plan.has_value());
      std::string script = render_megatron_torchrun(megatron_launch_from_plan(*plan), "t");
      MegatronImport r = import_megatron(script, {});  // nothing but the script
      EXPECT_EQ(plan_to_json(r.plan).dump(1), plan_to_json(*plan).dump(1));
      EXPECT_TRUE(r.plan == *plan);
      EXPECT_EQ(r.cluster_source, ClusterSource::kScript);
      EXPECT_TRUE(r.not_modelled.empty());
      ++checked;
    }
  EXPECT_EQ(checked,
            static_cast<int>(preset_names("models").size() * preset_names("clusters").size()));
}

}  // namespace
}  // namespace mplan

namespace mplan {
namespace {

// --rotary-base and --rotary-percent are model fields: written for RoPE models, read back.
TEST(MegatronExport, RotaryBaseAndShareTravelThroughThePlan) {
  Plan plan = plan_of(kLlamaUneven);
  ASSERT_EQ(plan.model.position_embedding, PositionEmbedding::kRope);
  plan.model.rotary_base = 500000;
  std::string script = render_megatron_torchrun(megatron_launch_from_plan(plan), "t");
  EXPECT_THAT(script, HasSubstr("--rotary-base 500000"));
  EXPECT_THAT(script, Not(HasSubstr("--rotary-percent")));  // 1.0, Megatron's default
  EXPECT_EQ(import_megatron(script, {}).plan.model.rotary_base, 500000);
  plan.model.rotary_percent = 0.5;
  script = render_megatron_torchrun(megatron_launch_from_plan(plan), "t");
  EXPECT_THAT(script, HasSubstr("--rotary-percent 0.5"));
  EXPECT_TRUE(import_megatron(script, {}).plan == plan);
}

}  // namespace
}  // namespace mplan

namespace mplan {
namespace {

// The training loop's fields (data, schedule, evaluation, checkpoints, logging) are arguments:
// written from the plan, read back into it.
TEST(MegatronExport, TrainingLoopArguments) {
  auto argv = megatron_argv(megatron_launch_from_plan(plan_of(kTrainingLoop)));
  EXPECT_THAT(values_of(argv, "--data-path"),
              ElementsAre("0.3", "data/a_text_document", "0.7", "data/b text_document"));
  EXPECT_THAT(values_of(argv, "--split"), ElementsAre("949,50,1"));
  EXPECT_THAT(values_of(argv, "--tokenizer-type"), ElementsAre("GPT2BPETokenizer"));
  EXPECT_THAT(values_of(argv, "--vocab-file"), ElementsAre("gpt2/vocab.json"));
  EXPECT_THAT(values_of(argv, "--merge-file"), ElementsAre("gpt2/merges.txt"));
  EXPECT_FALSE(has(argv, "--mock-data"));  // Megatron-LM refuses it with --data-path
  EXPECT_THAT(values_of(argv, "--lr-decay-style"), ElementsAre("cosine"));
  EXPECT_THAT(values_of(argv, "--min-lr"), ElementsAre("3e-05"));
  EXPECT_THAT(values_of(argv, "--lr-decay-iters"), ElementsAre("900"));
  EXPECT_THAT(values_of(argv, "--lr-warmup-iters"), ElementsAre("10"));
  EXPECT_THAT(values_of(argv, "--lr-warmup-init"), ElementsAre("1e-05"));
  EXPECT_THAT(values_of(argv, "--seed"), ElementsAre("42"));
  EXPECT_THAT(values_of(argv, "--eval-interval"), ElementsAre("200"));
  EXPECT_THAT(values_of(argv, "--eval-iters"), ElementsAre("5"));
  EXPECT_THAT(values_of(argv, "--save"), ElementsAre("ckpt"));
  EXPECT_THAT(values_of(argv, "--save-interval"), ElementsAre("250"));
  EXPECT_THAT(values_of(argv, "--load"), ElementsAre("ckpt"));
  EXPECT_THAT(values_of(argv, "--log-interval"), ElementsAre("10"));
  EXPECT_THAT(values_of(argv, "--tensorboard-dir"), ElementsAre("tb"));
  // Megatron-LM's defaults are left out; the plan without data trains on synthetic tokens.
  auto plain = megatron_argv(megatron_launch_from_plan(plan_of(kMixtral)));
  for (const char* a : {"--data-path", "--split", "--vocab-file", "--lr-decay-style", "--min-lr",
                        "--lr-warmup-iters", "--save", "--load", "--log-interval"})
    EXPECT_FALSE(has(plain, a)) << a;
  EXPECT_TRUE(has(plain, "--mock-data"));
  EXPECT_THAT(values_of(plain, "--tokenizer-type"), ElementsAre("NullTokenizer"));
  // Written always: the current Megatron-LM has no --eval-interval default it can run with.
  EXPECT_THAT(values_of(plain, "--eval-interval"), ElementsAre("1000"));
  EXPECT_THAT(values_of(plain, "--eval-iters"), ElementsAre("100"));
}

// eval_interval 0 (evaluate only at the end) is no value Megatron-LM takes (it divides by it):
// export writes an interval past the last iteration, and a "# mplan:" line gives the 0 back.
TEST(MegatronRoundTrip, EvaluationOnlyAtTheEnd) {
  Plan plan = plan_of(kTrainingLoop);
  plan.training.eval_interval = 0;
  plan.training.lr_warmup_iters = 0;
  plan.training.lr_warmup_fraction = 0.01;
  plan.training.lr_decay_style = LrDecayStyle::kInverseSquareRoot;
  plan.training.split = "98,2";
  plan.training.vocab_file = plan.training.merge_file = "";
  MegatronLaunch L = megatron_launch_from_plan(plan);
  auto argv = megatron_argv(L);
  EXPECT_THAT(values_of(argv, "--eval-interval"), ElementsAre("1001"));
  EXPECT_THAT(values_of(argv, "--lr-warmup-fraction"), ElementsAre("0.01"));
  EXPECT_THAT(values_of(argv, "--tokenizer-type"), ElementsAre("NullTokenizer"));
  EXPECT_THAT(L.directives,
              ::testing::Contains(std::pair<std::string, std::string>{"eval-only-at-end", "1001"}));
  std::string script = render_megatron_torchrun(L, "t");
  EXPECT_THAT(script, HasSubstr("# mplan: eval-only-at-end=1001\n"));
  MegatronImport r = import_megatron(script, {});
  EXPECT_TRUE(r.plan == plan) << plan_to_json(r.plan).dump(1);
  EXPECT_TRUE(r.ignored.empty()) << r.ignored.front();
  // With export's own --train-iters too; an interval edited in is kept.
  plan.training.train_iters = 0;
  plan.training.lr_decay_iters.reset();
  script = render_megatron_torchrun(megatron_launch_from_plan(plan), "t");
  EXPECT_THAT(script, HasSubstr("--eval-interval 101\n"));
  EXPECT_TRUE(import_megatron(script, {}).plan == plan);
  size_t at = script.find("--eval-interval 101\n");
  script.replace(at, 20, "--eval-interval 50\n");
  EXPECT_EQ(import_megatron(script, {}).plan.training.eval_interval, 50);
}

}  // namespace
}  // namespace mplan
