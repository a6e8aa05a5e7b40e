// Tests of `mplan sweep` run as a program: the built-in defaults, --help, the JSON and CSV
// shapes, best.json accepted by `mplan validate` and re-simulated by `mplan simulate` with the
// same figures, identical outputs for any --threads, a quiet stderr when it is not a terminal,
// and exit 2 with a message saying why and what would help for impossible requests.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "tests/cli/cli_runner.hpp"

namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using Json = nlohmann::ordered_json;

using mplan::cli_test::Result;
using mplan::cli_test::run;
using mplan::cli_test::slurp;
using mplan::cli_test::temp_path;

// A small, fast sweep: the reference workload on one DGX H100 node.
const std::string kSmall = "sweep --gpus 8 --model gpt3-1.3b --cluster dgx-h100 --global-batch 64";

TEST(SweepCli, HelpListsEveryOptionAndTheDefaults) {
  Result r = run("sweep --help");
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* opt : {"--gpus", "--model", "--cluster", "--global-batch", "--seq-length",
                          "--top", "--out", "--csv", "--report", "--threads", "--fix",
                          "--objective", "--json", "--no-prune", "--stack"})
    EXPECT_THAT(r.out, HasSubstr(opt)) << opt;
  EXPECT_THAT(r.out, HasSubstr("default gpt3-175b"));
  EXPECT_THAT(r.out, HasSubstr("default dgx-a100-80g"));
  EXPECT_THAT(r.out, HasSubstr("Examples:"));
  for (const char* axis : {"cp_comm_type", "cp_a2a", "overlap_p2p", "offload_layers",
                           "offload_modules", "a2a+p2p", "overlap_p2p_comm"})
    EXPECT_THAT(r.out, HasSubstr(axis)) << axis;
}

TEST(SweepCli, DefaultsWorkOutOfTheBox) {
  const std::string best = temp_path("default_best.json");
  Result r = run("sweep --gpus 128 --out " + best);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("mplan sweep: gpt3-175b on 128 GPUs (16 nodes of dgx-a100-80g"));
  EXPECT_THAT(r.out, HasSubstr("global batch 1536 x 2048 tokens (the model's default)"));
  EXPECT_THAT(r.out, HasSubstr("(built-in defaults: --model gpt3-175b --cluster dgx-a100-80g)"));
  EXPECT_THAT(r.out, HasSubstr(" candidates: "));
  EXPECT_THAT(r.out, HasSubstr(" invalid, "));
  EXPECT_THAT(r.out, HasSubstr(" out of memory ("));
  EXPECT_THAT(r.out, HasSubstr(" simulated, "));
  EXPECT_THAT(r.out, HasSubstr("top 10 by tokens/s:"));
  for (const char* col : {"layout", "schedule", "mbs", "recompute", "iteration", "TFLOP/s/GPU",
                          "MFU", "bubble", "peak / capacity"})
    EXPECT_THAT(r.out, HasSubstr(col)) << col;
  EXPECT_THAT(r.out, HasSubstr("wrote " + best));
  EXPECT_EQ(r.err, "");  // no progress bar when stderr is not a terminal
  Result v = run("validate " + best);
  EXPECT_EQ(v.code, 0) << v.out;
  std::remove(best.c_str());
}

TEST(SweepCli, JsonShapeAndBestPlanRoundTrip) {
  const std::string best = temp_path("rt_best.json");
  Result r = run(kSmall + " --top 3 --json --out " + best);
  ASSERT_EQ(r.code, 0) << r.err;
  Json j = Json::parse(r.out);
  EXPECT_EQ(j["schema_version"], 2);
  EXPECT_EQ(j["model"], "gpt3-1.3b");
  EXPECT_EQ(j["cluster"], "dgx-h100");
  EXPECT_EQ(j["gpus"], 8);
  EXPECT_EQ(j["global_batch_size"], 64);
  const Json& c = j["counts"];
  EXPECT_EQ(c["candidates"].get<int64_t>(),
            c["invalid"].get<int64_t>() + c["out_of_memory_pruned"].get<int64_t>() +
                c["skipped"].get<int64_t>() + c["simulated"].get<int64_t>());
  ASSERT_EQ(j["top"].size(), 3u);
  EXPECT_EQ(j["best_plan"], best);

  // best.json is a plan file: validate accepts it, and it is the top row's layout.
  Json plan = Json::parse(slurp(best));
  EXPECT_EQ(plan["schema_version"], 1);
  EXPECT_TRUE(plan["description"].is_string());
  const Json& top = j["top"][0];
  for (const char* k : {"tp", "cp", "pp", "vpp", "dp"})
    EXPECT_EQ(plan["parallel"][k], top["layout"][k]) << k;
  EXPECT_EQ(plan["parallel"]["micro_batch_size"], top["micro_batch_size"]);
  EXPECT_EQ(plan["parallel"]["schedule"], top["schedule"]);
  EXPECT_EQ(plan["parallel"]["recompute"], top["recompute"]);
  Result v = run("validate " + best + " --json");
  ASSERT_EQ(v.code, 0) << v.out;
  EXPECT_EQ(Json::parse(v.out)["num_microbatches"], top["num_microbatches"]);

  // ... and `mplan simulate` predicts the same figures for it.
  Result s = run("simulate " + best + " --json");
  ASSERT_EQ(s.code, 0) << s.err;
  Json sj = Json::parse(s.out);
  EXPECT_DOUBLE_EQ(sj["iteration_time_s"].get<double>(), top["iteration_time_s"].get<double>());
  EXPECT_DOUBLE_EQ(sj["tokens_per_s"].get<double>(), top["tokens_per_s"].get<double>());
  EXPECT_EQ(sj["memory"]["peak_bytes"], top["peak_bytes"]);
  EXPECT_DOUBLE_EQ(sj["mfu"].get<double>(), top["mfu"].get<double>());
  EXPECT_DOUBLE_EQ(sj["bubble_fraction"].get<double>(), top["bubble_fraction"].get<double>());
  std::remove(best.c_str());
}

TEST(SweepCli, SameOutputsWhateverTheThreadCount) {
  std::string files[2][3];
  Json json[2];
  for (int i = 0; i < 2; ++i) {
    const std::string tag = std::to_string(i);
    files[i][0] = temp_path("thr_best" + tag + ".json");
    files[i][1] = temp_path("thr_all" + tag + ".csv");
    files[i][2] = temp_path("thr_report" + tag + ".html");
    Result r = run(kSmall + " --json --threads " + (i == 0 ? "1" : "3") + " --out " + files[i][0] +
                   " --csv " + files[i][1] + " --report " + files[i][2]);
    ASSERT_EQ(r.code, 0) << r.err;
    json[i] = Json::parse(r.out);
    for (const char* k : {"wall_time_s", "threads", "best_plan"}) json[i].erase(k);
  }
  EXPECT_EQ(json[0], json[1]);
  EXPECT_EQ(slurp(files[0][0]), slurp(files[1][0]));  // best.json
  EXPECT_EQ(slurp(files[0][1]), slurp(files[1][1]));  // CSV
  for (auto& f : files)
    for (auto& p : f) std::remove(p.c_str());
}

TEST(SweepCli, CsvAndReportFiles) {
  const std::string best = temp_path("f_best.json"), csv = temp_path("f_all.csv"),
                    html = temp_path("f_report.html");
  Result r = run(kSmall + " --json --out " + best + " --csv " + csv + " --report " + html);
  ASSERT_EQ(r.code, 0) << r.err;
  const Json j = Json::parse(r.out);
  std::stringstream in(slurp(csv));
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line.rfind("schema_version,index,rank,tp,cp,ep,etp,pp,vpp,dp,", 0), 0u);
  int64_t rows = 0;
  while (std::getline(in, line)) ++rows;
  EXPECT_EQ(rows, j["counts"]["simulated"].get<int64_t>());
  const std::string page = slurp(html);
  EXPECT_EQ(page.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_THAT(page, Not(HasSubstr("http://")));
  EXPECT_THAT(page, Not(HasSubstr("https://")));
  EXPECT_THAT(page, HasSubstr("Pipeline timeline of the best plan"));
  EXPECT_THAT(page, HasSubstr("</html>"));
  for (const auto& p : {best, csv, html}) std::remove(p.c_str());
}

TEST(SweepCli, StackRestrictsTheSchedules) {
  // Megatron-LM (the default) runs no zb-h1: with the schedule pinned to it nothing is valid,
  // and the rule says why; mplan's executor runs it.
  const std::string best = temp_path("stack_best.json");
  Result m = run(kSmall + " --fix pp=2,schedule=zb-h1 --out " + best);
  EXPECT_EQ(m.code, 2);
  EXPECT_THAT(m.out, HasSubstr("Megatron-LM does not run the zb-h1 schedule"));
  Result x = run(kSmall + " --fix pp=2,schedule=zb-h1 --stack mplan --json --out " + best);
  ASSERT_EQ(x.code, 0) << x.err;
  const Json j = Json::parse(x.out);
  EXPECT_EQ(j["implementation"], "mplan");
  EXPECT_EQ(j["top"][0]["schedule"], "zb-h1");
  EXPECT_EQ(j["uncertainty"]["available"], false);  // dgx-h100 has no validation runs
  const Json plan = Json::parse(slurp(best));
  EXPECT_EQ(plan["training"]["implementation"], "mplan");
  // The text names the stack and says no band is available.
  Result t = run(kSmall + " --top 3 --out " + best);
  ASSERT_EQ(t.code, 0) << t.err;
  EXPECT_THAT(t.out, HasSubstr("; stack megatron-te (--stack)"));
  EXPECT_THAT(t.out, HasSubstr("no uncertainty band (the profile 'dgx-h100' has no validation "
                               "runs for megatron-te)"));
  Result bad = run(kSmall + " --stack nemo --out " + best);
  EXPECT_EQ(bad.code, 2);
  EXPECT_THAT(bad.err, HasSubstr("--stack: must be one of"));
  std::remove(best.c_str());
}

TEST(SweepCli, FixAndObjective) {
  const std::string best = temp_path("fix_best.json");
  Result r = run(kSmall + " --json --fix tp=2,pp=2 --objective memory --out " + best);
  ASSERT_EQ(r.code, 0) << r.err;
  Json j = Json::parse(r.out);
  EXPECT_EQ(j["fixed"], "tp=2,pp=2");
  EXPECT_EQ(j["objective"], "memory");
  for (const Json& t : j["top"]) {
    EXPECT_EQ(t["layout"]["tp"], 2);
    EXPECT_EQ(t["layout"]["pp"], 2);
  }
  for (size_t i = 1; i < j["top"].size(); ++i)
    EXPECT_LE(j["top"][i - 1]["peak_bytes"].get<int64_t>(),
              j["top"][i]["peak_bytes"].get<int64_t>());
  std::remove(best.c_str());
}

// The exchange, the pipeline overlap and activation offloading of the best plan reach best.json
// and the Megatron-LM arguments `mplan export` writes for it.
TEST(SweepCli, ExchangeOverlapAndOffloadReachBestJsonAndExport) {
  const std::string best = temp_path("axes_best.json");
  Result r = run(kSmall + " --json --out " + best +
                 " --fix cp=2,tp=1,cp_comm_type=all_gather,recompute=none,"
                 "offload_modules=core_attn+attn_proj");
  ASSERT_EQ(r.code, 0) << r.err;
  Json j = Json::parse(r.out);
  EXPECT_EQ(j["fixed"],
            "tp=1,cp=2,recompute=none,cp_comm_type=all_gather,offload_modules=core_attn+attn_proj");
  EXPECT_EQ(j["top"][0]["cp_comm_type"], "all_gather");
  EXPECT_EQ(j["top"][0]["offload_modules"], Json::array({"core_attn", "attn_proj"}));
  Json plan = Json::parse(slurp(best));
  EXPECT_EQ(plan["parallel"]["cp_comm_type"], "all_gather");
  EXPECT_EQ(plan["training"]["fine_grained_activation_offloading"], true);
  EXPECT_EQ(plan["training"]["offload_modules"], Json::array({"core_attn", "attn_proj"}));
  ASSERT_EQ(run("validate " + best).code, 0);
  Result e = run("export --megatron " + best + " --format args");
  ASSERT_EQ(e.code, 0) << e.err;
  EXPECT_THAT(e.out, HasSubstr("--cp-comm-type all_gather"));
  EXPECT_THAT(e.out, HasSubstr("--fine-grained-activation-offloading"));
  EXPECT_THAT(e.out, HasSubstr("--offload-modules core_attn attn_proj"));

  // a2a+p2p: the hierarchical sizes.
  r = run(kSmall + " --json --out " + best + " --fix tp=1,cp=4,cp_a2a=2");
  ASSERT_EQ(r.code, 0) << r.err;
  plan = Json::parse(slurp(best));
  EXPECT_EQ(plan["parallel"]["cp_comm_type"], "a2a+p2p");
  EXPECT_EQ(plan["parallel"]["hierarchical_context_parallel_sizes"], Json::array({2, 2}));
  e = run("export --megatron " + best + " --format args");
  ASSERT_EQ(e.code, 0) << e.err;
  EXPECT_THAT(e.out, HasSubstr("--cp-comm-type a2a+p2p"));
  EXPECT_THAT(e.out, HasSubstr("--hierarchical-context-parallel-sizes 2 2"));

  // Interleaved plans overlap their transfers (Megatron-LM's default: no argument); pinned off,
  // the export says so.
  r = run(kSmall + " --json --out " + best + " --fix schedule=interleaved");
  ASSERT_EQ(r.code, 0) << r.err;
  plan = Json::parse(slurp(best));
  EXPECT_EQ(plan["parallel"]["overlap_p2p_comm"], true);
  e = run("export --megatron " + best + " --format args");
  EXPECT_THAT(e.out, Not(HasSubstr("--no-overlap-p2p-communication")));
  r = run(kSmall + " --json --out " + best + " --fix schedule=interleaved,overlap_p2p=off");
  ASSERT_EQ(r.code, 0) << r.err;
  plan = Json::parse(slurp(best));
  EXPECT_FALSE(plan["parallel"].contains("overlap_p2p_comm"));
  e = run("export --megatron " + best + " --format args");
  EXPECT_THAT(e.out, HasSubstr("--no-overlap-p2p-communication"));

  // Activation offloading of the first layers (pp 1).
  r = run(kSmall + " --json --out " + best + " --fix pp=1,offload_layers=12,recompute=none");
  ASSERT_EQ(r.code, 0) << r.err;
  plan = Json::parse(slurp(best));
  EXPECT_EQ(plan["training"]["cpu_offloading_num_layers"], 12);
  e = run("export --megatron " + best + " --format args");
  EXPECT_THAT(e.out, HasSubstr("--cpu-offloading-num-layers 12"));

  // Userbuffer overlap and Megatron-FSDP: in the table, best.json and the export.
  r = run(kSmall + " --out " + best + " --fix tp=2,tp_comm_overlap=on,fsdp=optim_grads_params");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("on+tp-overlap"));
  EXPECT_THAT(r.out, HasSubstr("fsdp optim_grads_params"));
  plan = Json::parse(slurp(best));
  EXPECT_EQ(plan["parallel"]["tp_comm_overlap"], true);
  EXPECT_EQ(plan["parallel"]["use_megatron_fsdp"], true);
  EXPECT_EQ(plan["parallel"]["data_parallel_sharding_strategy"], "optim_grads_params");
  ASSERT_EQ(run("validate " + best).code, 0);
  e = run("export --megatron " + best + " --format args");
  EXPECT_THAT(e.out, HasSubstr("--tp-comm-overlap"));
  EXPECT_THAT(e.out, HasSubstr("--use-megatron-fsdp"));
  EXPECT_THAT(e.out, HasSubstr("--data-parallel-sharding-strategy optim_grads_params"));
  std::remove(best.c_str());
}

TEST(SweepCli, BadNewFixValuesExitTwoNamingTheFlag) {
  for (const char* fix : {"cp_comm_type=ring", "offload_modules=mlp", "overlap_p2p=maybe",
                          "offload_layers=x", "cp_comm_type=a2a,cp_a2a=2", "fsdp=zero3",
                          "fsdp=optim,dist_opt=off", "tp_comm_overlap=on,sp=off"}) {
    Result r = run(kSmall + " --fix " + fix);
    EXPECT_EQ(r.code, 2) << fix;
    EXPECT_THAT(r.err, HasSubstr("--fix: ")) << fix;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
}

TEST(SweepCli, ImpossibleRequestsSayWhatWouldHelp) {
  Result r = run("sweep --gpus 100");
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("--gpus: 100 is not a whole number of nodes (8 GPUs per node on "
                               "cluster 'dgx-a100-80g'); use 96 or 104 GPUs"));

  const std::string best = temp_path("imp_best.json");
  r = run("sweep --gpus 8 --out " + best);  // GPT-3 175B does not fit in 8 x 80 GB
  EXPECT_EQ(r.code, 1);                     // valid plans, none fits
  EXPECT_THAT(r.err, HasSubstr("--gpus: gpt3-175b does not fit on 8 GPUs of dgx-a100-80g"));
  EXPECT_THAT(r.err, HasSubstr("the leanest needs at least "));
  EXPECT_THAT(r.err, HasSubstr("; it fits on "));
  EXPECT_THAT(r.err, HasSubstr(" GPUs (--gpus "));
  EXPECT_FALSE(std::ifstream(best).good());  // nothing written

  // No valid plan at all: a 2-layer, 4-head model on 3 GPUs with a batch of 8.
  const std::string model = temp_path("tiny2.json");
  std::ofstream(model) << R"({"name": "tiny2", "num_layers": 2, "hidden_size": 64,
      "num_attention_heads": 4, "ffn_hidden_size": 256, "vocab_size": 128, "seq_length": 16,
      "activation": "gelu", "normalization": "layernorm", "position_embedding": "learned",
      "tied_embeddings": true})";
  r = run("sweep --gpus 3 --cluster h200x4 --global-batch 8 --model " + model + " --out " + best);
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("--gpus: no valid plan for tiny2 on 3 GPUs of h200x4"));
  EXPECT_THAT(r.err, HasSubstr("2 or 4 GPUs have valid plans"));
  std::remove(model.c_str());

  r = run("sweep --gpus 8 --cluster h200x4");
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("describes no network between nodes; use at most 4 GPUs"));
}

TEST(SweepCli, ZeroAndOutOfRangeValuesAreErrorsNotDefaults) {
  Result r = run(kSmall + " --seq-length 0");
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("--seq-length: must be >= 1, got 0"));
  r = run("sweep --gpus 8 --model gpt3-1.3b --cluster dgx-h100 --global-batch 0");
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("--global-batch: must be >= 1, got 0"));
  for (const char* gpus : {"1099511627776", "2147483648", "1048577"}) {
    r = run(std::string("sweep --gpus ") + gpus);
    EXPECT_EQ(r.code, 2) << gpus;
    EXPECT_THAT(r.err, HasSubstr("--gpus: must be <= 1048576")) << gpus;
  }
  EXPECT_THAT(run(kSmall + " --threads 0").err, HasSubstr("--threads: must be >= 1, got 0"));
  EXPECT_THAT(run(kSmall + " --memory-headroom 95").err,
              HasSubstr("--memory-headroom: must be <= 90, got 95"));
  EXPECT_THAT(run(kSmall + " --time-limit 0").err, HasSubstr("--time-limit: must be >= 1"));
}

TEST(SweepCli, BadFlagsExitTwoNamingTheFlag) {
  EXPECT_THAT(run(kSmall + " --objective speed").err,
              HasSubstr("--objective: must be throughput or memory"));
  EXPECT_THAT(run(kSmall + " --top 0").err, HasSubstr("--top: must be >= 1"));
  EXPECT_THAT(run(kSmall + " --fix tp=8,tp=4").err, HasSubstr("--fix: tp is given twice"));
  EXPECT_THAT(run("sweep --gpus 8 --model nope").err, HasSubstr("--model: unknown model preset"));
  EXPECT_THAT(run("sweep --gpus 8 --seq-length 4096").err,
              HasSubstr("--seq-length: 4096 exceeds max_position_embeddings (2048)"));
  EXPECT_EQ(run(kSmall + " --fix tq=1").code, 2);
  EXPECT_EQ(run("sweep").code, 2);  // --gpus is required
  Result r = run(kSmall + " --fix tp=3");
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("--fix: no candidate for gpt3-1.3b on 8 GPUs of dgx-h100 with "
                               "--fix tp=3"));
}

TEST(SweepCli, PrecisionAxis) {
  // fp8 on Hopper ranks fp8 plans (faster than bf16's best); MXFP8 is Blackwell-only.
  Result b = run(kSmall + " --json --top 1");
  Result f = run(kSmall + " --json --top 1 --precision fp8 --fp8-recipe tensorwise");
  ASSERT_EQ(b.code, 0) << b.err;
  ASSERT_EQ(f.code, 0) << f.err;
  const Json jb = Json::parse(b.out), jf = Json::parse(f.out);
  EXPECT_GT(jf["top"][0]["tokens_per_s"].get<double>(), jb["top"][0]["tokens_per_s"].get<double>());
  Result m = run(kSmall + " --precision fp8 --fp8-recipe mxfp8");
  EXPECT_EQ(m.code, 2);
  EXPECT_THAT(m.err,
              HasSubstr("--fp8-recipe: MXFP8 (fp8_recipe mxfp8) needs compute capability 10"));
  EXPECT_EQ(std::count(m.err.begin(), m.err.end(), '\n'), 1) << m.err;
  EXPECT_EQ(run("sweep --gpus 8 --model gpt3-1.3b --global-batch 64 --precision fp8").code, 2);
}

}  // namespace
