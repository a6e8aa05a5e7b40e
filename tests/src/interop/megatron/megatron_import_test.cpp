// Tests of import (Megatron-LM launch script or argument list -> plan). Expected values come
// from Megatron-LM's sources and example scripts (argument defaults in
// megatron/training/arguments.py, examples/gpt3, examples/mixtral) or are worked out by hand.
#include "src/interop/megatron/megatron_import.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "src/common/embedded_configs.hpp"
#include "src/common/error.hpp"
#include "src/interop/megatron/megatron_export.hpp"
#include "src/interop/megatron/megatron_launch.hpp"
#include "src/model/layer_range.hpp"
#include "src/plan/validate.hpp"
#include "tests/src/interop/megatron/test_plans.hpp"

namespace mplan {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::ThrowsMessage;
using namespace megatron_test;

// In the shape of Megatron-LM's GPT-3 175B launch script (README recipe with the batch ramp-up):
// arrays over lines, a comment inside an array, continuations, positional path variables, and
// 8 processes for a tp 8 x pp 16 layout (fixtures/README.md).
std::string gpt3_script() {
  return read_text_file(std::string(MPLAN_SOURCE_DIR) +
                            "/tests/src/interop/megatron/fixtures/gpt3_175b_made_up_argument.sh",
                        "fixture");
}

// The warnings of an import that contain `part`, one per line.
std::string all_warnings_with(const MegatronImport& r, const std::string& part) {
  std::string s;
  for (const auto& w : r.warnings)
    if (w.find(part) != std::string::npos) s += w + "\n";
  return s;
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
  // The training loop's arguments are plan fields; the paths of $1 ... $5 have no value here.
  EXPECT_TRUE(r.ignored.empty()) << r.ignored.front();
  EXPECT_EQ(p.training.lr_decay_style, LrDecayStyle::kCosine);
  EXPECT_EQ(p.training.min_lr, 6e-6);
  EXPECT_EQ(p.training.lr_warmup_fraction, 0.001);
  EXPECT_EQ(p.training.lr_decay_iters, 430000);
  EXPECT_EQ(p.training.split, "949,50,1");
  EXPECT_EQ(p.training.log_interval, 100);
  EXPECT_EQ(p.training.save_interval, 0);  // none given (the --save path has no value here)
  EXPECT_EQ(p.training.eval_interval, 0);  // Megatron-LM's current default: only at the end
  EXPECT_EQ(p.training.eval_iters, 100);
  EXPECT_TRUE(p.training.data_path.empty());
  EXPECT_EQ(p.training.save, "");
  EXPECT_TRUE(any_contains(r.warnings,
                           "--data-path: its value ($5) depends on $5, which has no "
                           "value here; the plan keeps synthetic data"));
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

// --rotary-base and --rotary-percent act only with RoPE (Megatron-LM's default position embedding
// is learned_absolute): without it they warn and the plan keeps its defaults, so the plan reads
// back from its JSON unchanged.
TEST(MegatronImport, RotaryArgumentsWithoutRopeWarn) {
  const std::string base =
      "--num-layers 2 --hidden-size 1024 --num-attention-heads 16 --seq-length 1024\n"
      "--max-position-embeddings 1024 --micro-batch-size 1 --vocab-size 32000\n"
      "--rotary-base 500000 --rotary-percent 0.5\n";
  MegatronImport r = import_megatron(base, default_import());
  EXPECT_EQ(r.plan.model.position_embedding, PositionEmbedding::kLearned);
  EXPECT_EQ(r.plan.model.rotary_base, 10000);
  EXPECT_EQ(r.plan.model.rotary_percent, 1.0);
  EXPECT_TRUE(any_contains(r.warnings,
                           "--rotary-base: no effect without --position-embedding-type "
                           "rope"));
  EXPECT_TRUE(any_contains(r.warnings, "--rotary-percent: no effect without"));
  r = import_megatron(base + "--position-embedding-type rope\n", default_import());
  EXPECT_EQ(r.plan.model.rotary_base, 500000);
  EXPECT_EQ(r.plan.model.rotary_percent, 0.5);
}

// Arguments that act only beside another (FP8 weights with an FP8 recipe, a flex backend with
// the flex dispatcher) warn alone and leave the plan as it reads back from its JSON.
TEST(MegatronImport, ArgumentsThatNeedAnotherWarnAlone) {
  const std::string base =
      "--num-layers 2 --hidden-size 1024 --num-attention-heads 16 --seq-length 1024\n"
      "--max-position-embeddings 1024 --micro-batch-size 1 --vocab-size 32000 --bf16\n";
  MegatronImport r = import_megatron(base +
                                         "--fp8-param-gather --fp4-param-gather\n"
                                         "--num-experts 8 --moe-router-topk 2\n"
                                         "--moe-flex-dispatcher-backend hybridep\n",
                                     default_import());
  EXPECT_FALSE(r.plan.training.fp8_param_gather);
  EXPECT_FALSE(r.plan.training.fp4_param_gather);
  ASSERT_TRUE(r.plan.model.moe.has_value());
  EXPECT_EQ(r.plan.model.moe->moe_flex_dispatcher_backend, FlexBackend::kDeepEp);
  EXPECT_TRUE(any_contains(r.warnings, "--fp8-param-gather: no effect without --fp8-format"));
  EXPECT_TRUE(any_contains(r.warnings, "--fp4-param-gather: no effect without --fp4-format"));
  EXPECT_TRUE(any_contains(r.warnings,
                           "--moe-flex-dispatcher-backend: no effect without "
                           "--moe-token-dispatcher-type flex"));
  r = import_megatron(base +
                          "--fp8-format e4m3 --fp8-param-gather --num-experts 8\n"
                          "--moe-router-topk 2 --moe-token-dispatcher-type flex\n"
                          "--moe-flex-dispatcher-backend hybridep\n",
                      default_import());
  EXPECT_TRUE(r.plan.training.fp8_param_gather);
  EXPECT_EQ(r.plan.model.moe->moe_flex_dispatcher_backend, FlexBackend::kHybridEp);
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
  // A pattern (Megatron's moe_freq_type) must have one entry per layer.
  fails("--micro-batch-size 1 --num-experts 4 --moe-layer-freq '[1,0]*2'",
        "--moe-layer-freq: Invalid length of moe_layer_pattern: 4, expected 2");
  fails("--micro-batch-size 1 --pipeline-model-parallel-layout 'E|x|L'",
        "--pipeline-model-parallel-layout: invalid layer character 'x'");
  fails(
      "--micro-batch-size 1 --pipeline-model-parallel-size 2 --pipeline-model-parallel-layout "
      "'Et|t|L'",
      "--pipeline-model-parallel-layout: The length of pipeline_model_parallel_layout must be "
      "divisible by pipeline_model_parallel_size (num_stages=3, pipeline_model_parallel_size=2)");
  fails(
      "--micro-batch-size 1 --pipeline-model-parallel-size 2 --num-virtual-stages-per-pipeline-rank"
      " 2 --pipeline-model-parallel-layout 'Et|t|L|'",
      "--pipeline-model-parallel-layout: No more than one of the following arguments");
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
  // --moe-grouped-gemm is read (the cost model's grouped expert GEMM), so nothing is left over.
  EXPECT_TRUE(r.not_modelled.empty());
  EXPECT_FALSE(any_contains(r.warnings, "--moe-grouped-gemm"));
  EXPECT_TRUE(any_contains(r.undefined, "$SLURM_NNODES -> \"1\""));
}

TEST(MegatronImport, MplanDirectives) {
  const std::string args =
      "torchrun --nproc_per_node 8 pretrain_gpt.py --num-layers 2 --hidden-size 64 "
      "--num-attention-heads 8 --seq-length 128 --max-position-embeddings 128 --vocab-size 100 "
      "--micro-batch-size 1\n";
  EXPECT_EQ(import_megatron("# mplan: cluster=dgx-h200\n" + args, {}).plan.cluster.name,
            "dgx-h200");
  EXPECT_THAT([&] { import_megatron("\n  # mplan: cluster=nowhere\n" + args, {}); },
              ThrowsMessage<Error>(HasSubstr("line 2: # mplan: cluster: unknown cluster preset")));
  EXPECT_THAT([&] { import_megatron("# mplan: cluster=../c.json\n" + args, {}); },
              ThrowsMessage<Error>(HasSubstr("names a file")));
  EXPECT_THAT([&] { import_megatron("# mplan: default-train-iters=x\n" + args, {}); },
              ThrowsMessage<Error>(HasSubstr("line 1: # mplan: default-train-iters: must be")));
  MegatronImport r = import_megatron("# mplan: colour=blue\n" + args, {});
  EXPECT_TRUE(any_contains(r.warnings, "line 1: # mplan: colour: not a directive mplan knows"));
  EXPECT_EQ(r.cluster_source, ClusterSource::kDefault);
}

TEST(MegatronImport, RotaryBaseIsAModelField) {
  // Megatron-LM's own Llama 3 example uses --rotary-base 1000000; Llama 3 was trained with 500000.
  const std::string llama3 =
      "--num-layers 32 --hidden-size 4096 --num-attention-heads 32 --group-query-attention "
      "--num-query-groups 8 --ffn-hidden-size 14336 --seq-length 8192 "
      "--max-position-embeddings 8192 --position-embedding-type rope --normalization RMSNorm "
      "--swiglu --untie-embeddings-and-output-weights --disable-bias-linear --vocab-size 128256 "
      "--micro-batch-size 1 ";
  MegatronImportOptions o;
  o.gpus = 8;
  MegatronImport r = import_megatron(llama3 + "--rotary-base 500000\n", o);
  EXPECT_EQ(r.matched_preset, "llama3-8b");
  EXPECT_EQ(r.plan.model.rotary_base, 500000);
  EXPECT_FALSE(any_contains(r.ignored, "--rotary-base"));
  // Another base: the preset's shape, the script's base, said in a warning.
  r = import_megatron(llama3 + "--rotary-base 1000000\n", o);
  EXPECT_EQ(r.plan.model.rotary_base, 1000000);
  EXPECT_TRUE(any_contains(r.warnings, "rotary base 1e+06 here, 500000 in the preset"))
      << ::testing::PrintToString(r.warnings);
  // None given: Megatron-LM's default, 10000.
  r = import_megatron(llama3, o);
  EXPECT_EQ(r.plan.model.rotary_base, 10000);
}

TEST(MegatronImport, MoeWithoutGroupedGemmIsReported) {
  MegatronImportOptions o;
  o.gpus = 2;
  MegatronImport r = import_megatron(
      "--num-layers 2 --hidden-size 64 --num-attention-heads 8 --seq-length 128 "
      "--max-position-embeddings 128 --vocab-size 100 --micro-batch-size 1 --num-experts 4 "
      "\n",
      o);
  // Megatron-LM's default without --moe-grouped-gemm: one GEMM per local expert, costed so.
  ASSERT_TRUE(r.plan.model.moe.has_value());
  EXPECT_FALSE(r.plan.model.moe->moe_grouped_gemm);
}

// Megatron-LM's documented layouts: the DeepSeek-V3-style functional test's
// "Et*3|(tt|)*6L" (15 layers, pp 2, so vpp 4), and Llama 3.1 405B at pp 16 with 7 layers beside
// the embedding and the loss.
TEST(MegatronImport, PipelineLayouts) {
  const std::string small =
      "torchrun --nproc_per_node 2 pretrain_gpt.py --num-layers 15 --hidden-size 1024 "
      "--ffn-hidden-size 4096 --num-attention-heads 32 --seq-length 4096 "
      "--max-position-embeddings 4096 --vocab-size 32000 --micro-batch-size 1 "
      "--global-batch-size 8 --pipeline-model-parallel-size 2 "
      "--pipeline-model-parallel-layout 'Et*3|(tt|)*6L'\n";
  MegatronImport r = import_megatron(small, default_import());
  ASSERT_TRUE(r.plan.parallel.pipeline_model_parallel_layout.has_value());
  EXPECT_EQ(r.plan.parallel.pipeline_model_parallel_layout->text, "Et*3|(tt|)*6L");
  EXPECT_EQ(r.plan.parallel.vpp, 4);
  EXPECT_EQ(r.plan.parallel.schedule, ScheduleKind::kInterleaved);

  const std::string llama =
      "GPUS_PER_NODE=8\nNNODES=16\n"
      "MODEL_ARGS=(--num-layers 126 --hidden-size 16384 --ffn-hidden-size 53248\n"
      " --num-attention-heads 128 --group-query-attention --num-query-groups 8 --seq-length 8192\n"
      " --max-position-embeddings 8192 --vocab-size 128256 --normalization RMSNorm --swiglu\n"
      " --position-embedding-type rope --rotary-base 500000 --disable-bias-linear\n"
      " --untie-embeddings-and-output-weights)\n"
      "PARALLEL_ARGS=(--tensor-model-parallel-size 8 --pipeline-model-parallel-size 16\n"
      " --sequence-parallel --use-distributed-optimizer\n"
      " --pipeline-model-parallel-layout \"Et*7|(t*8|)*14t*7L\")\n"
      "torchrun --nproc_per_node $GPUS_PER_NODE --nnodes $NNODES pretrain_gpt.py ${MODEL_ARGS[@]}"
      " ${PARALLEL_ARGS[@]} --micro-batch-size 1 --global-batch-size 64 --bf16\n";
  MegatronImport l = import_megatron(llama, default_import());
  EXPECT_EQ(l.plan.parallel.pp, 16);
  EXPECT_EQ(l.plan.parallel.vpp, 1);
  EXPECT_EQ(l.plan.parallel.dp, 1);
  EXPECT_EQ(all_warnings_with(l, "breaks a rule"), "");
  EXPECT_EQ(stage_chunks(126, l.plan.parallel, 0), (std::vector<LayerRange>{{0, 7}}));
  EXPECT_EQ(stage_chunks(126, l.plan.parallel, 8), (std::vector<LayerRange>{{63, 8}}));
  EXPECT_EQ(stage_chunks(126, l.plan.parallel, 15), (std::vector<LayerRange>{{119, 7}}));
}

// NeMo / Megatron-Bridge's Llama 3.1 405B pretraining layout: tp 8, cp 2, pp 8, 8 virtual
// stages, embedding and loss counted in the split: 128 "layers", 2 per chunk, 1 in the first
// chunk of the first stage and the last chunk of the last stage.
TEST(MegatronImport, AccountForEmbeddingAndLossInTheSplit) {
  const std::string llama =
      "torchrun --nproc_per_node 8 --nnodes 16 pretrain_gpt.py --num-layers 126 "
      "--hidden-size 16384 --ffn-hidden-size 53248 --num-attention-heads 128 "
      "--group-query-attention --num-query-groups 8 --seq-length 8192 "
      "--max-position-embeddings 8192 --vocab-size 128256 --normalization RMSNorm --swiglu "
      "--position-embedding-type rope --rotary-base 500000 --disable-bias-linear "
      "--untie-embeddings-and-output-weights --tensor-model-parallel-size 8 "
      "--context-parallel-size 2 --pipeline-model-parallel-size 8 "
      "--num-layers-per-virtual-pipeline-stage 2 --account-for-embedding-in-pipeline-split "
      "--account-for-loss-in-pipeline-split --sequence-parallel --micro-batch-size 1 "
      "--global-batch-size 64 --bf16\n";
  MegatronImport r = import_megatron(llama, default_import());
  const ParallelConfig& p = r.plan.parallel;
  EXPECT_EQ(p.vpp, 8);  // (126 + 2) / 8 per rank / 2 per virtual stage
  EXPECT_TRUE(p.account_for_embedding_in_pipeline_split);
  EXPECT_TRUE(p.account_for_loss_in_pipeline_split);
  EXPECT_EQ(all_warnings_with(r, "breaks a rule"), "");
  EXPECT_EQ(chunk_layers(126, p, 0, 0), (LayerRange{0, 1}));
  EXPECT_EQ(chunk_layers(126, p, 1, 0), (LayerRange{1, 2}));
  EXPECT_EQ(chunk_layers(126, p, 7, 7), (LayerRange{125, 1}));
}

// Megatron-LM's functional test gpt3_mcore_te_tp2_zp_z3_resume_fsdp_dtensor (ZeRO-3 with
// Megatron-FSDP at tp 2), its step-shaping arguments as a torchrun line on 8 GPUs.
TEST(MegatronImport, MegatronFsdpFunctionalTest) {
  const std::string args =
      "torchrun --nproc_per_node 8 pretrain_gpt.py --num-layers 12 --hidden-size 512 "
      "--num-attention-heads 8 --micro-batch-size 4 --global-batch-size 32 --seq-length 1024 "
      "--max-position-embeddings 1024 --vocab-size 50304 --tensor-model-parallel-size 2 "
      "--use-megatron-fsdp --data-parallel-sharding-strategy optim_grads_params "
      "--use-distributed-optimizer --ckpt-format fsdp_dtensor --bf16 "
      "--use-precision-aware-optimizer --exp-avg-dtype bf16 --exp-avg-sq-dtype bf16 "
      "--num-distributed-optimizer-instances 2\n";
  MegatronImport r = import_megatron(args, default_import());
  const ParallelConfig& p = r.plan.parallel;
  EXPECT_TRUE(p.use_megatron_fsdp);
  EXPECT_EQ(p.data_parallel_sharding_strategy, DpSharding::kOptimGradsParams);
  EXPECT_TRUE(p.distributed_optimizer);
  EXPECT_EQ(p.dp, 4);
  EXPECT_EQ(p.num_distributed_optimizer_instances, 2);
  EXPECT_TRUE(r.plan.training.optimizer_precision.use_precision_aware_optimizer);
  EXPECT_EQ(r.plan.training.optimizer_precision.exp_avg_dtype, OptimStateDtype::kBf16);
  EXPECT_EQ(all_warnings_with(r, "breaks a rule"), "");
  // Megatron-LM turns the distributed optimizer on for Megatron-FSDP v1; so does import.
  MegatronImport q = import_megatron(
      "--num-layers 2 --hidden-size 64 --num-attention-heads 8 --seq-length 128 "
      "--max-position-embeddings 128 --vocab-size 100 --micro-batch-size 1 --use-megatron-fsdp",
      default_import());
  EXPECT_TRUE(q.plan.parallel.distributed_optimizer);
  EXPECT_NE(all_warnings_with(q, "Megatron-FSDP v1"), "");
  EXPECT_THAT(
      [] {
        import_megatron(
            "--num-layers 2 --hidden-size 64 --num-attention-heads 8 --seq-length 128 "
            "--max-position-embeddings 128 --vocab-size 100 --micro-batch-size 1 "
            "--data-parallel-sharding-strategy zero3",
            default_import());
      },
      ThrowsMessage<Error>(HasSubstr("--data-parallel-sharding-strategy: must be one of")));
  EXPECT_THAT(
      [] {
        import_megatron(
            "--num-layers 2 --hidden-size 64 --num-attention-heads 8 --seq-length 128 "
            "--max-position-embeddings 128 --vocab-size 100 --micro-batch-size 1 "
            "--main-params-dtype bf16",
            default_import());
      },
      ThrowsMessage<Error>(HasSubstr("--main-params-dtype: must be one of fp32, fp16")));
}

}  // namespace
}  // namespace mplan

namespace mplan {
namespace {

std::string fixture(const char* name) {
  return read_text_file(
      std::string(MPLAN_SOURCE_DIR) + "/tests/src/interop/megatron/fixtures/" + name, "fixture");
}

// DeepSeek-V3 as Megatron-LM's example launches it: the model equals the deepseek-v3 preset.
TEST(MegatronImport, DeepSeekV3WithMlaMoePatternFlexDispatcherAndMtp) {
  MegatronImportOptions o;
  o.cluster = load_cluster("dgx-b200");
  MegatronImport r = import_megatron(fixture("deepseek_v3_flex_pp16.sh"), o);
  const ModelSpec& m = r.plan.model;
  ASSERT_TRUE(m.mla.has_value());
  EXPECT_EQ(*m.mla, (MlaSpec{1536, 512, 128, 64, 128}));
  ASSERT_TRUE(m.moe.has_value());
  EXPECT_EQ(m.num_moe_layers(), 58);
  EXPECT_FALSE(m.is_moe_layer(2));
  EXPECT_TRUE(m.is_moe_layer(3));
  EXPECT_EQ(m.moe->moe_token_dispatcher_type, MoeDispatcher::kFlex);
  EXPECT_EQ(m.moe->moe_flex_dispatcher_backend, FlexBackend::kHybridEp);
  EXPECT_TRUE(m.moe->moe_grouped_gemm);
  EXPECT_EQ(m.mtp_num_layers, 1);
  EXPECT_EQ(r.plan.world_size(), 256);
  EXPECT_EQ(r.plan.parallel.pp, 16);
  EXPECT_EQ(r.plan.parallel.ep, 8);
  EXPECT_EQ(r.matched_preset, "deepseek-v3");
  // The same shape as the preset, field by field (the name and batch are the import's).
  ModelSpec preset = load_model("deepseek-v3");
  preset.make_vocab_size_divisible_by = 3232;  // the script's (the same padded vocabulary)
  preset.moe->moe_token_dispatcher_type = MoeDispatcher::kFlex;
  preset.moe->moe_flex_dispatcher_backend = FlexBackend::kHybridEp;
  EXPECT_EQ(model_to_json(m).dump(1), model_to_json(preset).dump(1));
  // And back: the exported arguments carry every field.
  const std::string script = render_megatron_torchrun(megatron_launch_from_plan(r.plan), "t");
  EXPECT_THAT(script, HasSubstr("--moe-layer-freq '([0]*3+[1]*58)'"));
  EXPECT_THAT(script, HasSubstr("--multi-latent-attention"));
  EXPECT_THAT(script, HasSubstr("--moe-flex-dispatcher-backend hybridep"));
  MegatronImport again = import_megatron(script, {});
  EXPECT_TRUE(again.plan == r.plan);
}

TEST(MegatronImport, RecomputeModulesAndBack) {
  const std::string base =
      "--num-layers 2 --hidden-size 64 --num-attention-heads 8 --seq-length 128 "
      "--max-position-embeddings 128 --vocab-size 100 --micro-batch-size 1 ";
  MegatronImport r = import_megatron(
      base + "--recompute-granularity selective --recompute-modules mlp core_attn layernorm\n",
      default_import());
  EXPECT_EQ(r.plan.parallel.recompute_modules,
            kRecomputeCoreAttn | kRecomputeMlp | kRecomputeLayernorm);
  const std::string script = render_megatron_torchrun(megatron_launch_from_plan(r.plan), "t");
  EXPECT_THAT(script, HasSubstr("--recompute-modules core_attn layernorm mlp"));
  EXPECT_TRUE(import_megatron(script, {}).plan == r.plan);
  // Megatron's default, core_attn alone, is not written.
  MegatronImport d =
      import_megatron(base + "--recompute-granularity selective\n", default_import());
  EXPECT_EQ(d.plan.parallel.recompute_modules, kRecomputeCoreAttn);
  EXPECT_THAT(render_megatron_torchrun(megatron_launch_from_plan(d.plan), "t"),
              Not(HasSubstr("--recompute-modules")));
  // Without selective granularity Megatron-LM ignores the list.
  MegatronImport w = import_megatron(base + "--recompute-modules mlp\n", default_import());
  EXPECT_TRUE(any_contains(w.warnings,
                           "--recompute-modules mlp: no effect without --recompute-granularity "
                           "selective"));
  EXPECT_THAT([&] { import_megatron(base + "--recompute-modules attention\n", default_import()); },
              ThrowsMessage<Error>(HasSubstr("--recompute-modules: must name modules among "
                                             "core_attn, moe_act, layernorm")));
}

TEST(MegatronImport, OptimizerCpuOffloadAndBack) {
  const std::string base =
      "--num-layers 2 --hidden-size 64 --num-attention-heads 8 --seq-length 128 "
      "--max-position-embeddings 128 --vocab-size 100 --micro-batch-size 1 --bf16 "
      "--use-precision-aware-optimizer ";
  MegatronImport r = import_megatron(
      base + "--optimizer-cpu-offload --optimizer-offload-fraction 0.5\n", default_import());
  EXPECT_TRUE(r.plan.training.optimizer_cpu_offload);
  EXPECT_EQ(r.plan.training.optimizer_offload_fraction, 0.5);
  const std::string script = render_megatron_torchrun(megatron_launch_from_plan(r.plan), "t");
  EXPECT_THAT(script, HasSubstr("--optimizer-cpu-offload"));
  EXPECT_THAT(script, HasSubstr("--optimizer-offload-fraction 0.5"));
  EXPECT_TRUE(import_megatron(script, {}).plan == r.plan);
  EXPECT_THAT(
      [&] { import_megatron(base + "--optimizer-offload-fraction 2\n", default_import()); },
      ThrowsMessage<Error>(HasSubstr("--optimizer-offload-fraction: must be between 0 and 1")));
}

TEST(MegatronImport, CpCommTypeAndBack) {
  MegatronImportOptions o = default_import();
  o.gpus = 4;
  const std::string base =
      "--num-layers 2 --hidden-size 64 --num-attention-heads 8 --seq-length 128 "
      "--max-position-embeddings 128 --vocab-size 100 --micro-batch-size 1 --bf16 "
      "--context-parallel-size 4 ";
  MegatronImport r = import_megatron(
      base + "--cp-comm-type a2a+p2p --hierarchical-context-parallel-sizes 2 2\n", o);
  EXPECT_EQ(r.plan.parallel.cp_comm_type, CpCommType::kA2aP2p);
  EXPECT_EQ(r.plan.parallel.hierarchical_context_parallel_sizes, (std::vector<int64_t>{2, 2}));
  EXPECT_TRUE(validate(r.plan).empty());
  const std::string script = render_megatron_torchrun(megatron_launch_from_plan(r.plan), "t");
  EXPECT_THAT(script, HasSubstr("--cp-comm-type a2a+p2p"));
  EXPECT_THAT(script, HasSubstr("--hierarchical-context-parallel-sizes 2 2"));
  EXPECT_TRUE(import_megatron(script, {}).plan == r.plan);
  // One type per layer, all the same: read as that type; differing types are refused.
  r = import_megatron(base + "--cp-comm-type allgather allgather\n", o);
  EXPECT_EQ(r.plan.parallel.cp_comm_type, CpCommType::kAllGather);
  EXPECT_THAT([&] { import_megatron(base + "--cp-comm-type p2p a2a\n", o); },
              ThrowsMessage<Error>(HasSubstr("a type per layer is not modelled")));
  EXPECT_THAT([&] { import_megatron(base + "--cp-comm-type ring\n", o); },
              ThrowsMessage<Error>(HasSubstr("--cp-comm-type: must be one of p2p")));
}

TEST(MegatronImport, OverlapP2pCommAndBack) {
  MegatronImportOptions o = default_import();
  o.gpus = 2;
  const std::string base =
      "--num-layers 4 --hidden-size 64 --num-attention-heads 8 --seq-length 128 "
      "--max-position-embeddings 128 --vocab-size 100 --micro-batch-size 1 --bf16 "
      "--global-batch-size 8 --pipeline-model-parallel-size 2 ";
  // Megatron's default overlaps the interleaved schedule's transfers, and only those.
  MegatronImport r = import_megatron(base + "--num-virtual-stages-per-pipeline-rank 2\n", o);
  EXPECT_TRUE(r.plan.parallel.overlap_p2p_comm);
  std::string script = render_megatron_torchrun(megatron_launch_from_plan(r.plan), "t");
  EXPECT_THAT(script, Not(HasSubstr("overlap-p2p")));
  EXPECT_TRUE(import_megatron(script, {}).plan == r.plan);
  EXPECT_FALSE(import_megatron(base + "\n", o).plan.parallel.overlap_p2p_comm);
  r = import_megatron(
      base + "--num-virtual-stages-per-pipeline-rank 2 --no-overlap-p2p-communication\n", o);
  EXPECT_FALSE(r.plan.parallel.overlap_p2p_comm);
  script = render_megatron_torchrun(megatron_launch_from_plan(r.plan), "t");
  EXPECT_THAT(script, HasSubstr("--no-overlap-p2p-communication"));
  EXPECT_TRUE(import_megatron(script, {}).plan == r.plan);
  r = import_megatron(
      base + "--num-virtual-stages-per-pipeline-rank 2 --overlap-p2p-communication-warmup-flush\n",
      o);
  EXPECT_TRUE(r.plan.parallel.overlap_p2p_comm_warmup_flush);
  script = render_megatron_torchrun(megatron_launch_from_plan(r.plan), "t");
  EXPECT_THAT(script, HasSubstr("--overlap-p2p-communication-warmup-flush"));
  EXPECT_TRUE(import_megatron(script, {}).plan == r.plan);
}

TEST(MegatronImport, ActivationOffloadingAndBack) {
  const std::string base =
      "--num-layers 4 --hidden-size 64 --num-attention-heads 8 --seq-length 128 "
      "--max-position-embeddings 128 --vocab-size 100 --micro-batch-size 1 --bf16 ";
  MegatronImport r = import_megatron(base + "--cpu-offloading-num-layers 2\n", default_import());
  EXPECT_EQ(r.plan.training.cpu_offloading_num_layers, 2);
  std::string script = render_megatron_torchrun(megatron_launch_from_plan(r.plan), "t");
  EXPECT_THAT(script, HasSubstr("--cpu-offloading-num-layers 2"));
  EXPECT_TRUE(import_megatron(script, {}).plan == r.plan);
  r = import_megatron(base +
                          "--fine-grained-activation-offloading --offload-modules core_attn "
                          "attn_proj\n",
                      default_import());
  EXPECT_TRUE(r.plan.training.fine_grained_activation_offloading);
  EXPECT_EQ(r.plan.training.offload_modules, kOffloadCoreAttn | kOffloadAttnProj);
  script = render_megatron_torchrun(megatron_launch_from_plan(r.plan), "t");
  EXPECT_THAT(script, HasSubstr("--fine-grained-activation-offloading"));
  EXPECT_THAT(script, HasSubstr("--offload-modules core_attn attn_proj"));
  EXPECT_TRUE(import_megatron(script, {}).plan == r.plan);
  r = import_megatron(base +
                          "--use-precision-aware-optimizer --optimizer-cpu-offload "
                          "--overlap-cpu-optimizer-d2h-h2d\n",
                      default_import());
  EXPECT_TRUE(r.plan.training.overlap_cpu_optimizer_d2h_h2d);
  script = render_megatron_torchrun(megatron_launch_from_plan(r.plan), "t");
  EXPECT_THAT(script, HasSubstr("--overlap-cpu-optimizer-d2h-h2d"));
  EXPECT_TRUE(import_megatron(script, {}).plan == r.plan);
}

TEST(MegatronImport, TpCommOverlapAndBack) {
  MegatronImportOptions o = default_import();
  o.gpus = 2;
  MegatronImport r = import_megatron(
      "--num-layers 2 --hidden-size 64 --num-attention-heads 8 --seq-length 128 "
      "--max-position-embeddings 128 --vocab-size 100 --micro-batch-size 1 --bf16 "
      "--tensor-model-parallel-size 2 --sequence-parallel --tp-comm-overlap\n",
      o);
  EXPECT_TRUE(r.plan.parallel.tp_comm_overlap);
  EXPECT_TRUE(validate(r.plan).empty());
  const std::string script = render_megatron_torchrun(megatron_launch_from_plan(r.plan), "t");
  EXPECT_THAT(script, HasSubstr("--tp-comm-overlap"));
  EXPECT_TRUE(import_megatron(script, {}).plan == r.plan);
}

TEST(MegatronImport, Gb200Mxfp8Run) {
  MegatronImportOptions o;
  o.cluster = load_cluster("gb200-nvl72");
  MegatronImport r = import_megatron(fixture("llama3_8b_gb200_mxfp8.sh"), o);
  const TrainingConfig& t = r.plan.training;
  EXPECT_EQ(t.fp8_format, Fp8Format::kE4m3);
  EXPECT_EQ(t.fp8_recipe, Fp8Recipe::kMxfp8);
  EXPECT_TRUE(t.fp8_param_gather);
  EXPECT_EQ(r.plan.world_size(), 8);
  EXPECT_TRUE(validate(r.plan).empty());
  EXPECT_FALSE(any_contains(r.not_modelled, "--fp8"));
  // The same run on H100 nodes breaks Transformer Engine's MXFP8 check: one line naming it.
  o.cluster = load_cluster("dgx-h100");
  MegatronImport h = import_megatron(fixture("llama3_8b_gb200_mxfp8.sh"), o);
  ASSERT_FALSE(validate(h.plan).empty());
  EXPECT_EQ(validate(h.plan)[0].field, "training.fp8_recipe");
  // Export writes the fp8 arguments back.
  const std::string script = render_megatron_torchrun(megatron_launch_from_plan(r.plan), "t");
  EXPECT_THAT(script, HasSubstr("--fp8-format e4m3"));
  EXPECT_THAT(script, HasSubstr("--fp8-recipe mxfp8"));
  EXPECT_THAT(script, HasSubstr("--fp8-param-gather"));
  EXPECT_TRUE(import_megatron(script, {}).plan == r.plan);
  // Arguments that have no effect without the one they qualify are reported, not read.
  const std::string tiny =
      "--num-layers 2 --hidden-size 64 --num-attention-heads 8 --seq-length 128 "
      "--max-position-embeddings 128 --vocab-size 100 --micro-batch-size 1 ";
  MegatronImport n =
      import_megatron(tiny +
                          "--fp8-recipe mxfp8 --num-layers-at-start-in-bf16 2 --kv-lora-rank 64 "
                          "--window-attn-skip-freq 2\n",
                      o);
  EXPECT_EQ(n.plan.training.fp8_format, Fp8Format::kNone);
  EXPECT_EQ(n.plan.training.fp8_recipe, Fp8Recipe::kDelayed);
  EXPECT_EQ(n.plan.training.num_layers_at_start_in_bf16, 1);
  EXPECT_FALSE(n.plan.model.mla.has_value());
  EXPECT_EQ(n.plan.model.window_attn_skip_freq, 0);
  EXPECT_TRUE(any_contains(n.warnings, "--fp8-recipe mxfp8: no effect without --fp8-format"));
  EXPECT_TRUE(any_contains(n.warnings, "--num-layers-at-start-in-bf16: no effect without"));
  EXPECT_TRUE(any_contains(n.warnings, "--kv-lora-rank: no effect without"));
  EXPECT_TRUE(any_contains(n.warnings, "--window-attn-skip-freq 2: no effect without"));
  // Megatron's own rules on the arguments.
  EXPECT_THROW(import_megatron("--num-layers 2 --hidden-size 64 --num-attention-heads 8 "
                               "--seq-length 128 --max-position-embeddings 128 --vocab-size 100 "
                               "--micro-batch-size 1 --fp8-format e5m2\n",
                               o),
               Error);
}

}  // namespace
}  // namespace mplan

namespace mplan {
namespace {

const std::string kSmallJob =
    "torchrun --nproc_per_node 4 pretrain_gpt.py --num-layers 2 --hidden-size 64 "
    "--num-attention-heads 8 --seq-length 128 --max-position-embeddings 128 --vocab-size 100 "
    "--micro-batch-size 1 --train-iters 50 ";

TEST(MegatronImport, TrainingLoopArgumentsAreFields) {
  MegatronImportOptions o;
  o.vars = {{"1", "/ckpt"}, {"2", "0.3 /d/a_text_document 0.7 /d/b_text_document"}};
  MegatronImport r = import_megatron(
      kSmallJob +
          "--data-path $2 --split 98,2,0 --vocab-file v.json --merge-file m.txt --save $1 --load "
          "$1 --save-interval 20 --eval-interval 10 --eval-iters 3 --log-interval 5 "
          "--tensorboard-dir tb --lr 2e-4 --min-lr 2e-5 --lr-decay-style cosine "
          "--lr-decay-iters 40 --lr-warmup-iters 4 --lr-warmup-init 1e-6\n",
      o);
  const TrainingConfig& t = r.plan.training;
  EXPECT_EQ(t.data_path.prefixes,
            (std::vector<std::string>{"/d/a_text_document", "/d/b_text_document"}));
  EXPECT_EQ(t.data_path.weights, (std::vector<double>{0.3, 0.7}));
  EXPECT_EQ(t.split, "98,2,0");
  EXPECT_EQ(t.vocab_file, "v.json");  // no --tokenizer-type: GPT-2 BPE, as infer_vocab reads it
  EXPECT_EQ(t.merge_file, "m.txt");
  EXPECT_EQ(t.save, "/ckpt");
  EXPECT_EQ(t.load, "/ckpt");
  EXPECT_EQ(t.save_interval, 20);
  EXPECT_EQ(t.eval_interval, 10);
  EXPECT_EQ(t.eval_iters, 3);
  EXPECT_EQ(t.log_interval, 5);
  EXPECT_EQ(t.tensorboard_dir, "tb");
  EXPECT_EQ(t.min_lr, 2e-5);
  EXPECT_EQ(t.lr_decay_iters, 40);
  EXPECT_EQ(t.lr_warmup_iters, 4);
  EXPECT_EQ(t.lr_warmup_init, 1e-6);
  EXPECT_TRUE(r.ignored.empty()) << r.ignored.front();
  // Left out: Megatron-LM's defaults (the current one evaluates only at the end).
  const TrainingConfig d = import_megatron(kSmallJob + "\n", {}).plan.training;
  EXPECT_EQ(d.eval_interval, 0);
  EXPECT_EQ(d.eval_iters, 100);
  EXPECT_EQ(d.log_interval, 100);
  EXPECT_EQ(d.split, kDefaultSplit);
  EXPECT_EQ(d.lr_decay_style, LrDecayStyle::kLinear);
}

TEST(MegatronImport, TrainingLoopRulesNameTheArgument) {
  auto fails = [](const std::string& extra, const std::string& message) {
    EXPECT_THAT([&] { import_megatron(kSmallJob + extra + "\n", {}); },
                ThrowsMessage<Error>(HasSubstr(message)))
        << extra;
  };
  fails("--lr 1e-4 --min-lr 1e-3", "--min-lr (training.min_lr): must be <= lr");
  fails("--lr-warmup-iters 5 --lr-warmup-fraction 0.1",
        "--lr-warmup-fraction (training.lr_warmup_fraction): can only specify one of");
  fails("--lr-warmup-iters 60",
        "--lr-warmup-iters (training.lr_warmup_iters): must be < train_iters");
  fails("--save ckpt", "--save-interval (training.save_interval): must be >= 1 when save is set");
  fails("--lr-decay-style step", "--lr-decay-style: must be one of constant, linear, cosine");
  fails("--mock-data --data-path d",
        "--data-path: Megatron-LM refuses it together with --mock-data");
  fails("--data-path 0 d", "--data-path: the weight of d must be a number > 0");
  fails("--split 1,2,3,4", "--split: \"1,2,3,4\" has 4 numbers");
  fails("--eval-iters -1", "--eval-iters: must be >= 0");
  // Read with a warning: what the plan cannot hold, and a split without a validation set.
  MegatronImport r =
      import_megatron(kSmallJob +
                          "--lr-decay-style WSD --data-path d --split 100,0,0 --tokenizer-type "
                          "HuggingFaceTokenizer --vocab-file v\n",
                      {});
  EXPECT_TRUE(
      any_contains(r.warnings, "--lr-decay-style WSD: not modelled; the plan keeps linear"));
  EXPECT_TRUE(any_contains(r.warnings, "gives the validation set no share"));
  EXPECT_EQ(r.plan.training.eval_iters, 0);
  EXPECT_TRUE(any_contains(r.warnings,
                           "--tokenizer-type HuggingFaceTokenizer: the plan keeps "
                           "only GPT-2 BPE files"));
  EXPECT_THAT(r.ignored, ElementsAre("--vocab-file v"));  // another tokenizer's file
  EXPECT_EQ(r.plan.training.vocab_file, "");
}

// ---- Megatron-DeepSpeed: DeepSpeed's pipeline split as the layout --------------------------

// BLOOM-176B's tr11-176B-ml launch (fixtures/README.md), its vocabulary given as mplan import's
// --vocab-size (the script pads its tokenizer's to 250880).
MegatronImport import_bloom(const std::string& script) {
  MegatronImportOptions o = default_import();
  o.vocab_size = 250880;
  return import_megatron(script, o);
}

// The BLOOM script with its "--pp-partition-method 'type:transformer|embedding'" replaced.
std::string bloom_with(const std::string& args) {
  std::string s = fixture("bloom_176b_tr11.sh");
  const std::string old = "--pp-partition-method 'type:transformer|embedding'";
  const size_t at = s.find(old);
  EXPECT_NE(at, std::string::npos);
  return s.replace(at, old.size(), args);
}
std::string with_method(const std::string& method) {
  return bloom_with("--pp-partition-method " + method);
}

std::vector<int64_t> layers_per_stage(const Plan& p) {
  std::vector<int64_t> v;
  for (int64_t r = 0; r < p.parallel.pp; ++r) {
    int64_t n = 0;
    for (const LayerRange& c : stage_chunks(p.model.num_layers, p.parallel, r)) n += c.count;
    v.push_back(n);
  }
  return v;
}

// 'type:transformer|embedding' weighs the 70 layers and both EmbeddingPipe specs (first and
// tied last): 72 over 12 stages, 6 each at spread 0. The first stage's 6 are the embedding and
// 5 layers, the last's 5 layers and the output embedding: 5, 6 x 10, 5 (sum 70) — why BLOOM
// has 70 layers.
TEST(MegatronImport, DeepSpeedBloom176bPartition) {
  MegatronImport r = import_bloom(fixture("bloom_176b_tr11.sh"));
  const Plan& p = r.plan;
  EXPECT_EQ(p.parallel.tp, 4);
  EXPECT_EQ(p.parallel.pp, 12);
  EXPECT_EQ(p.parallel.dp, 8);  // 48 nodes x 8 GPUs / (4 x 12)
  EXPECT_EQ(p.model.num_layers, 70);
  ASSERT_TRUE(p.parallel.pipeline_model_parallel_layout.has_value());
  EXPECT_EQ(p.parallel.pipeline_model_parallel_layout->text, "Et*5|(t*6|)*10t*5L");
  EXPECT_EQ(layers_per_stage(p), (std::vector<int64_t>{5, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 5}));
  EXPECT_EQ(stage_chunks(70, p.parallel, 11), (std::vector<LayerRange>{{65, 5}}));
  EXPECT_EQ(all_warnings_with(r, "breaks a rule"), "");
  EXPECT_THAT(all_warnings_with(r, "--pp-partition-method"),
              HasSubstr("splits bigscience's GPTModelPipe as 5 6 6 6 6 6 6 6 6 6 6 5"));
  // DeepSpeed's own arguments (and its config file) are still reported as not read.
  for (const char* a : {"--deepspeed", "--deepspeed_config ./ds_config.json", "--zero-stage 0",
                        "--deepspeed-activation-checkpointing", "--embed-layernorm"})
    EXPECT_THAT(r.not_modelled, ::testing::Contains(a));
  // The plan reads back from its JSON with the layout.
  EXPECT_EQ(plan_from_json(plan_to_json(p)), p);
}

// uniform splits the 77 specs (bf16 adds float16_to_fp32 at the end): chunk 6, residual 5,
// boundaries 0 7 14 21 28 35 41 47 53 59 65 71 77. Specs 0-2 are _to_float16, the embedding
// and the transpose, 3-72 the layers, 73-76 undo, norm, output, cast: stage 0 holds layers
// 0-3, stages 1-4 seven each, stages 5-10 six each, stage 11 layers 68-69.
TEST(MegatronImport, DeepSpeedBloom176bUniform) {
  MegatronImport r = import_bloom(with_method("uniform"));
  const Plan& p = r.plan;
  EXPECT_EQ(p.parallel.pipeline_model_parallel_layout->text, "Et*4|(t*7|)*4(t*6|)*6t*2L");
  EXPECT_EQ(layers_per_stage(p), (std::vector<int64_t>{4, 7, 7, 7, 7, 6, 6, 6, 6, 6, 6, 2}));
}

// parameters, per tensor-parallel rank (tp 4, h = 14336): EmbeddingPipe 250880 / 4 x h words +
// 2h of --embed-layernorm (alibi: no positions) = 899182592; a layer 4h norms + 3h^2/4 + 3h/4 +
// h^2/4 + h + h^2 + h + h^2 + h = 616673792 (1.46 embeddings ~ 1 layer and a half). The end
// stages trade one layer for the embedding: 5, 6 x 10, 5, as with the type method.
TEST(MegatronImport, DeepSpeedBloom176bParameters) {
  MegatronImport r = import_bloom(with_method("parameters"));
  EXPECT_EQ(r.plan.parallel.pipeline_model_parallel_layout->text, "Et*5|(t*6|)*10t*5L");
}

// Without --pp-partition-method the script is microsoft's Megatron-DeepSpeed (its GPTModelPipe
// always splits by type:transformer): 70 layers over 12 at spread 1; DeepSpeed's ties put the
// two 5s last.
TEST(MegatronImport, DeepSpeedDefaultMethod) {
  MegatronImport r = import_bloom(bloom_with(""));
  EXPECT_EQ(r.plan.parallel.pipeline_model_parallel_layout->text, "Et*6|(t*6|)*9t*5|t*5L");
  EXPECT_THAT(all_warnings_with(r, "--pp-partition-method"),
              HasSubstr("type:transformer (the default)"));
}

TEST(MegatronImport, DeepSpeedBadMethodNamesTheFlag) {
  EXPECT_THAT([] { import_bloom(with_method("profile")); },
              ThrowsMessage<Error>(HasSubstr("--pp-partition-method 'profile': DeepSpeed's "
                                             "PipelineModule implements uniform, parameters")));
  EXPECT_THAT([] { import_bloom(with_method("'type:rotary'")); },
              ThrowsMessage<Error>(HasSubstr("--pp-partition-method 'type:rotary': DeepSpeed "
                                             "finds no layer to partition")));
  // The same method as a quoted string that is expanded but not parsed again: the quotes stay.
  const std::string quoted =
      "ARGS=\"--pp-partition-method 'type:transformer|embedding'\"\n"
      "torchrun --nproc_per_node 8 pretrain_gpt.py --num-layers 8 --hidden-size 512 "
      "--num-attention-heads 8 --seq-length 512 --max-position-embeddings 512 --vocab-size 32000 "
      "--micro-batch-size 1 --pipeline-model-parallel-size 2 --deepspeed $ARGS\n";
  EXPECT_THAT([&] { import_megatron(quoted, default_import()); },
              ThrowsMessage<Error>(HasSubstr("--pp-partition-method ''type:transformer|")));
  // DeepSpeed splits the layers itself: another split in the same script is refused.
  const std::string both =
      "torchrun --nproc_per_node 8 pretrain_gpt.py --num-layers 8 --hidden-size 512 "
      "--num-attention-heads 8 --seq-length 512 --max-position-embeddings 512 --vocab-size 32000 "
      "--micro-batch-size 1 --pipeline-model-parallel-size 2 --deepspeed "
      "--decoder-first-pipeline-num-layers 3\n";
  EXPECT_THAT([&] { import_megatron(both, default_import()); },
              ThrowsMessage<Error>(HasSubstr("--pp-partition-method: a Megatron-DeepSpeed "
                                             "script's layers are split by DeepSpeed's "
                                             "PipelineModule")));
}

// Not a DeepSpeed script, or one stage: no layout.
TEST(MegatronImport, DeepSpeedSplitOnlyForDeepSpeedPipelines) {
  const std::string base =
      "torchrun --nproc_per_node 8 pretrain_gpt.py --num-layers 8 --hidden-size 512 "
      "--num-attention-heads 8 --seq-length 512 --max-position-embeddings 512 --vocab-size 32000 "
      "--micro-batch-size 1 ";
  EXPECT_FALSE(import_megatron(base + "--pipeline-model-parallel-size 2\n", default_import())
                   .plan.parallel.pipeline_model_parallel_layout);
  EXPECT_FALSE(import_megatron(base + "--deepspeed\n", default_import())
                   .plan.parallel.pipeline_model_parallel_layout);
  // 8 layers, microsoft's specs (fp32): _to_float16, embedding, 8 layers, norm, output; 4 per
  // stage at spread 0.
  MegatronImport r = import_megatron(
      base + "--pipeline-model-parallel-size 2 --deepspeed_config ds.json\n", default_import());
  ASSERT_TRUE(r.plan.parallel.pipeline_model_parallel_layout.has_value());
  EXPECT_EQ(r.plan.parallel.pipeline_model_parallel_layout->text, "Et*4|t*4L");
  EXPECT_THAT(r.not_modelled, ::testing::Contains("--deepspeed_config ds.json"));
}

}  // namespace
}  // namespace mplan
