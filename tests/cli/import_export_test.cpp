// `mplan import --megatron` and `mplan export --megatron`, run as the built binary: exit codes,
// what goes to stdout and stderr, the plan file written, and the file round trip
// plan -> Megatron-LM script -> plan.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "tests/cli/cli_runner.hpp"

namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

using mplan::cli_test::count_lines;
using mplan::cli_test::Result;
using mplan::cli_test::shipped_plan;
using mplan::cli_test::slurp;

class ImportExport : public ::testing::Test {
 protected:
  fs::path dir_;
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           (std::string("mplan_ie_") + info->name() + "_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path file(const std::string& name) const { return dir_ / name; }
  void write(const std::string& name, const std::string& text) const {
    std::ofstream(file(name), std::ios::binary) << text;
  }
  // Runs `mplan ARGS` (ARGS is shell text) in the temp dir.
  Result run(const std::string& args) const {
    mplan::cli_test::RunOptions options;
    options.cwd = dir_;
    return mplan::cli_test::run(args, options);
  }
  static std::string fixture() {
    return std::string(MPLAN_SOURCE_DIR) + "/tests/cli/fixtures/gpt3_175b_rampup.sh";
  }
};

TEST_F(ImportExport, ImportsTheGpt3LaunchScript) {
  Result r = run("import --megatron '" + fixture() + "' --out plan.json");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("tp 8, cp 1, pp 16, vpp 1, dp 1"));
  EXPECT_THAT(r.out, HasSubstr("128 = 16 nodes of dgx-a100-80g (the default cluster"));
  EXPECT_THAT(r.out, HasSubstr("the script launches 8"));
  EXPECT_THAT(r.out, HasSubstr("global 1536"));
  EXPECT_THAT(r.out, HasSubstr("ramp-up from 16 by 16 over 5859375 samples"));
  EXPECT_THAT(r.out, HasSubstr("gpt3-175b (matches the preset)"));
  EXPECT_THAT(r.err, HasSubstr("warning: the script launches 8 processes"));
  EXPECT_THAT(r.err, HasSubstr("$1 (no value here): --save, --load"));
  // The training loop's arguments are plan fields now, none of them "ignored".
  EXPECT_THAT(r.err, Not(HasSubstr("ignored (no effect on a training step)")));
  EXPECT_THAT(r.err, HasSubstr("--save: its value ($1) depends on $1"));
  EXPECT_THAT(r.out, Not(HasSubstr("warning")));

  auto plan = nlohmann::json::parse(slurp(file("plan.json")));
  EXPECT_EQ(plan["parallel"]["tp"], 8);
  EXPECT_EQ(plan["parallel"]["pp"], 16);
  EXPECT_EQ(plan["parallel"]["dp"], 1);
  EXPECT_EQ(plan["parallel"]["global_batch_size"], 1536);
  EXPECT_EQ(plan["model"]["num_layers"], 96);
  EXPECT_EQ(plan["model"]["hidden_size"], 12288);
  EXPECT_EQ(plan["training"]["rampup_batch_size"], nlohmann::json::parse("[16, 16, 5859375]"));
  EXPECT_EQ(plan["cluster"]["name"], "dgx-a100-80g");
  // The schedule, evaluation and checkpoint interval of the script; its paths ($1 ... $5) have
  // no value here.
  const auto& t = plan["training"];
  EXPECT_EQ(t["lr_decay_style"], "cosine");
  EXPECT_EQ(t["min_lr"], 6e-6);
  EXPECT_EQ(t["lr_warmup_fraction"], 0.001);
  EXPECT_EQ(t["lr_decay_iters"], 430000);
  EXPECT_EQ(t["split"], "949,50,1");
  EXPECT_EQ(t["eval_iters"], 10);
  EXPECT_EQ(t["save_interval"], 10000);
  EXPECT_FALSE(t.contains("eval_interval"));  // 1000: the plan's default, left out
  EXPECT_FALSE(t.contains("log_interval"));   // 100: likewise
  EXPECT_FALSE(t.contains("data_path"));
  EXPECT_FALSE(t.contains("save"));

  Result v = run("validate plan.json");
  EXPECT_EQ(v.code, 0) << v.out << v.err;
}

// With the script's positional paths given, the data blend, tokenizer files, checkpoint and
// TensorBoard directories land in the plan, and export writes them back.
TEST_F(ImportExport, Gpt3LaunchScriptPathsTakeEffect) {
  Result r = run("import --megatron '" + fixture() +
                 "' --var 1=/ckpt --var 2=/tb --var 3=/gpt2/vocab.json --var 4=/gpt2/merges.txt"
                 " --var '5=0.3 /d/a_text_document 0.7 /d/b_text_document' --out plan.json");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.err, Not(HasSubstr("no value here")));
  EXPECT_THAT(r.err, Not(HasSubstr("ignored (no effect on a training step)")));
  auto t = nlohmann::json::parse(slurp(file("plan.json")))["training"];
  EXPECT_EQ(t["data_path"],
            nlohmann::json::parse(R"([0.3, "/d/a_text_document", 0.7, "/d/b_text_document"])"));
  EXPECT_EQ(t["vocab_file"], "/gpt2/vocab.json");
  EXPECT_EQ(t["merge_file"], "/gpt2/merges.txt");
  EXPECT_EQ(t["save"], "/ckpt");
  EXPECT_EQ(t["load"], "/ckpt");
  EXPECT_EQ(t["tensorboard_dir"], "/tb");
  EXPECT_EQ(t["save_interval"], 10000);
  EXPECT_EQ(t["eval_iters"], 10);

  Result e = run("export --megatron plan.json --format args");
  ASSERT_EQ(e.code, 0) << e.err;
  for (const char* line :
       {"--data-path 0.3 /d/a_text_document 0.7 /d/b_text_document\n", "--split 949,50,1\n",
        "--tokenizer-type GPT2BPETokenizer\n", "--vocab-file /gpt2/vocab.json\n",
        "--merge-file /gpt2/merges.txt\n", "--save /ckpt\n", "--load /ckpt\n",
        "--save-interval 10000\n", "--eval-iters 10\n", "--tensorboard-dir /tb\n",
        "--lr-decay-style cosine\n", "--min-lr 6e-06\n", "--lr-warmup-fraction 0.001\n",
        "--lr-decay-iters 430000\n"})
    EXPECT_THAT(e.out, HasSubstr(line));
  EXPECT_THAT(e.out, Not(HasSubstr("--mock-data")));
  ASSERT_EQ(run("export --megatron plan.json --out train.sh").code, 0);
  ASSERT_EQ(run("import --megatron train.sh --out again.json").code, 0);
  EXPECT_EQ(slurp(file("again.json")), slurp(file("plan.json")));
}

TEST_F(ImportExport, JsonReport) {
  Result r = run("import --megatron '" + fixture() + "' --out plan.json --json");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["world_size"], 128);
  EXPECT_EQ(j["script_world_size"], 8);
  EXPECT_EQ(j["matched_preset"], "gpt3-175b");
  EXPECT_EQ(j["parallel"]["dp"], 1);
  EXPECT_TRUE(j["not_modelled"].empty());
  EXPECT_EQ(j["undefined"].size(), 5u);
}

TEST_F(ImportExport, VariablesSizeTheJob) {
  Result r = run("import --megatron '" + fixture() +
                 "' --var NUM_NODES=128 --var 1=/ckpt --json --out p.json");
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["world_size"], 1024);
  EXPECT_EQ(j["parallel"]["dp"], 8);
  EXPECT_EQ(j["undefined"].size(), 4u);  // $1 now has a value
}

TEST_F(ImportExport, RoundTripThroughTheTorchrunScript) {
  ASSERT_EQ(run("import --megatron '" + fixture() + "' --out plan.json").code, 0);
  Result e = run("export --megatron plan.json --out train.sh");
  ASSERT_EQ(e.code, 0) << e.err;
  EXPECT_THAT(e.out, HasSubstr("wrote train.sh"));
  std::string script = slurp(file("train.sh"));
  EXPECT_THAT(script, HasSubstr("torchrun \"${DISTRIBUTED_ARGS[@]}\" pretrain_gpt.py \\\n"));
  EXPECT_THAT(script, HasSubstr("    --tensor-model-parallel-size 8\n"));
  EXPECT_THAT(script, HasSubstr("NUM_NODES=16\n"));
  ASSERT_EQ(run("import --megatron train.sh --out again.json").code, 0);
  EXPECT_EQ(slurp(file("again.json")), slurp(file("plan.json")));

  // Through a pipe as well: export to stdout, import from stdin.
  Result piped = run("export --megatron plan.json | '" + std::string(MPLAN_BIN) +
                     "' import --megatron - --out piped.json");
  ASSERT_EQ(piped.code, 0) << piped.err;
  EXPECT_EQ(slurp(file("piped.json")), slurp(file("plan.json")));
}

TEST_F(ImportExport, RoundTripOfThePresetPlan) {
  std::string preset = shipped_plan("gpt3-1.3b-dp4");
  ASSERT_EQ(run("export --megatron '" + preset + "' --out t.sh").code, 0);
  ASSERT_EQ(run("import --megatron t.sh --cluster h200x4 --out p.json").code, 0);
  ASSERT_EQ(run("validate p.json --json").code, 0);
  // The same plan as the preset file, spelled out.
  Result a = run("export --megatron p.json --format args");
  Result b = run("export --megatron '" + preset + "' --format args");
  EXPECT_EQ(a.out, b.out);
}

TEST_F(ImportExport, ExportFormats) {
  std::string preset = shipped_plan("gpt3-1.3b-dp4");
  Result args = run("export --megatron '" + preset + "' --format args");
  ASSERT_EQ(args.code, 0) << args.err;
  std::istringstream in(args.out);
  for (std::string line; std::getline(in, line);) EXPECT_EQ(line.rfind("--", 0), 0u) << line;
  EXPECT_THAT(args.out, HasSubstr("--micro-batch-size 4\n--global-batch-size 64\n"));
  // The preset plan sets no train_iters: a note on stderr, not in the output.
  EXPECT_THAT(args.err, HasSubstr("note: the plan sets no training.train_iters"));

  Result json = run("export --megatron '" + preset + "' --format json");
  ASSERT_EQ(json.code, 0);
  auto j = nlohmann::json::parse(json.out);
  EXPECT_EQ(j["launcher"]["nproc_per_node"], 4);
  EXPECT_EQ(j["launcher"]["nnodes"], 1);
  EXPECT_EQ(j["groups"]["MODEL_PARALLEL_ARGS"][0], "--tensor-model-parallel-size");
  EXPECT_EQ(j["script"], "pretrain_gpt.py");

  // An argument list imports with --gpus.
  write("args.txt", args.out);
  Result back = run("import --megatron args.txt --gpus 4 --cluster h200x4 --json --out q.json");
  ASSERT_EQ(back.code, 0) << back.err;
  EXPECT_EQ(nlohmann::json::parse(back.out)["parallel"]["dp"], 4);
}

// `mplan export --megatron X | mplan import --megatron -` gives X back for the best plans of
// sweeps — the cluster (read from the script's "# mplan:" line) and so the prediction included.
// (The two larger sweeps pin cp = 1: their best plans are those of the whole space, in a quarter
// of the time.)
TEST_F(ImportExport, SweepBestPlansSurviveExportImport) {
  const std::string import_again = "' import --megatron - --out again.json";
  for (const char* sweep : {"--gpus 8 --model gpt3-1.3b --cluster dgx-h100",
                            "--gpus 32 --model mixtral-8x7b --cluster dgx-h100 --fix cp=1",
                            "--gpus 4 --model llama2-7b --cluster h200x4",
                            "--gpus 64 --model llama3-70b --cluster dgx-h100 --fix cp=1"}) {
    SCOPED_TRACE(sweep);
    Result best = run(std::string("sweep ") + sweep + " --out best.json");
    ASSERT_EQ(best.code, 0) << best.err;
    Result piped = run("export --megatron best.json | '" + std::string(MPLAN_BIN) + import_again);
    ASSERT_EQ(piped.code, 0) << piped.err;
    EXPECT_THAT(piped.out, HasSubstr("(the script's '# mplan: cluster' line)"));
    auto a = nlohmann::json::parse(slurp(file("best.json")));
    auto b = nlohmann::json::parse(slurp(file("again.json")));
    a.erase("description");  // the sweep's summary, not part of the plan
    EXPECT_EQ(a, b);
    Result sa = run("simulate best.json --json");
    Result sb = run("simulate again.json --json");
    ASSERT_EQ(sa.code, 0) << sa.err;
    ASSERT_EQ(sb.code, 0) << sb.err;
    auto pa = nlohmann::json::parse(sa.out), pb = nlohmann::json::parse(sb.out);
    pa.erase("plan");  // the file name
    pb.erase("plan");
    EXPECT_EQ(pa, pb);
  }
}

TEST_F(ImportExport, ExportsRunAsTheyAre) {
  std::string preset = shipped_plan("gpt3-1.3b-dp4");  // no train_iters in the plan
  Result e = run("export --megatron '" + preset + "' --train-iters 20 --format args");
  ASSERT_EQ(e.code, 0) << e.err;
  EXPECT_THAT(e.out, HasSubstr("--train-iters 20\n"));
  Result d = run("export --megatron '" + preset + "'");
  EXPECT_THAT(d.out, HasSubstr("    --train-iters 100\n"));
  EXPECT_THAT(d.out, HasSubstr("# mplan: cluster=h200x4\n# mplan: default-train-iters=100\n"));
  EXPECT_EQ(run("export --megatron '" + preset + "' --train-iters 0").code, 2);
}

TEST_F(ImportExport, BadInputExitsTwoWithOneLine) {
  write("broken.sh", "A=(\n  --num-layers 2\n\ntorchrun pretrain_gpt.py ${A[@]}\n");
  write("positional.sh",
        "torchrun --nproc_per_node 8 pretrain_gpt.py --num-layers $1 --hidden-size 64 "
        "--num-attention-heads 8 --seq-length 128 --max-position-embeddings 128 --micro-batch-size "
        "1\n");
  write("divide.sh",
        "GPUS=8\nNODES=0\ntorchrun --nproc_per_node $((GPUS / NODES)) pretrain_gpt.py "
        "--num-layers 2\n");
  write("overflow.sh",
        "# bash wraps this around to 0\nL=$((4611686018427387904 * 4))\n"
        "torchrun pretrain_gpt.py --num-layers $L\n");
  write("deepspeed.sh",
        "deepspeed pretrain_gpt.py --num-layers 4 --hidden-size 64 --num-attention-heads 8 "
        "--seq-length 128 --max-position-embeddings 128 --micro-batch-size 1 --vocab-size 1024 "
        "--pipeline-model-parallel-size 2 --deepspeed --pp-partition-method 'type:nothing'\n");
  write("order.json", R"({"schema_version": 1, "model": "gpt3-1.3b", "cluster": "h200x4",
      "parallel": {"dp": 4, "micro_batch_size": 4, "global_batch_size": 64, "order": "tp-dp-cp-ep-pp"}})");
  struct Case {
    std::string args, message;
  } cases[] = {
      {"import --megatron broken.sh", "broken.sh: line 1: unterminated array A=( ... )"},
      {"import --megatron positional.sh",
       "--num-layers: its value ($1) depends on $1, which has no value here; give it with --var "
       "1=VALUE"},
      {"import --megatron divide.sh", "divide.sh: line 3: $((GPUS / NODES)): division by zero"},
      {"import --megatron overflow.sh",
       "overflow.sh: line 2: $((4611686018427387904 * 4)): the result overflows 64-bit integers"},
      {"import --megatron missing.sh", "--megatron: cannot read file 'missing.sh'"},
      {"import --megatron deepspeed.sh",
       "--pp-partition-method 'type:nothing': DeepSpeed finds no layer to partition"},
      {"import --megatron positional.sh --var 'x y=1'", "--var: expected NAME=VALUE"},
      {"import --megatron positional.sh --cluster nowhere",
       "--cluster: unknown cluster preset 'nowhere'"},
      {"export --megatron order.json", "parallel.order: Megatron-LM places ranks only"},
      {"export --megatron missing.json", "plan: cannot read file 'missing.json'"},
      {"export --megatron order.json --format yaml", "--format"},
  };
  for (const auto& c : cases) {
    Result r = run(c.args);
    EXPECT_EQ(r.code, 2) << c.args << "\n" << r.err;
    EXPECT_THAT(r.err, HasSubstr(c.message)) << c.args;
    EXPECT_EQ(count_lines(r.err), 1u) << c.args << "\n" << r.err;
    EXPECT_EQ(r.out, "") << c.args;
  }
}

TEST_F(ImportExport, ExportNamesTheStackOfItsPrediction) {
  std::string preset = shipped_plan("gpt3-1.3b-dp4");
  Result t = run("export --megatron '" + preset + "' --out t.sh");
  ASSERT_EQ(t.code, 0) << t.err;
  EXPECT_THAT(t.err, HasSubstr("note: prediction for megatron-te on h200x4 (Megatron-LM with "
                               "Transformer Engine): "));
  EXPECT_THAT(slurp(file("t.sh")), HasSubstr("prediction for megatron-te"));
  // The round trip ignores the note.
  ASSERT_EQ(run("import --megatron t.sh --cluster h200x4 --out p.json").code, 0);
  Result json = run("export --megatron '" + preset + "' --format json --stack megatron-local");
  ASSERT_EQ(json.code, 0) << json.err;
  auto j = nlohmann::json::parse(json.out);
  EXPECT_EQ(j["prediction"]["implementation"], "megatron-local");
  EXPECT_GT(j["prediction"]["iteration_time_s"].get<double>(), 0);
  EXPECT_EQ(j["prediction"]["uncertainty"]["available"].is_boolean(), true);
  Result mplan = run("export --megatron '" + preset + "' --stack mplan");
  EXPECT_EQ(mplan.code, 2);
  EXPECT_THAT(mplan.err, HasSubstr("--stack: export writes a Megatron-LM launch"));
}

TEST_F(ImportExport, HelpListsEveryOption) {
  Result i = run("import --help");
  ASSERT_EQ(i.code, 0);
  for (const char* opt : {"--megatron", "--cluster", "--out", "--var", "--gpus", "--vocab-size",
                          "--name", "--json", "dgx-a100-80g", "Examples:"})
    EXPECT_THAT(i.out, HasSubstr(opt)) << opt;
  Result e = run("export --help");
  ASSERT_EQ(e.code, 0);
  for (const char* opt :
       {"--megatron", "--format", "--out", "--train-iters", "--legacy-rampup", "Examples:"})
    EXPECT_THAT(e.out, HasSubstr(opt)) << opt;
}

}  // namespace
