// `mplan run` end to end, through the built binary as a single MPI rank (singleton MPI, CPU
// backend): exit codes, the one-line errors (each bad flag named, exit 2), Megatron's log lines,
// the text report and the JSON document's shape; training on a corpus the test writes with
// `mplan preprocess`, evaluating, saving, resuming, and a disk that fills while saving (exit 1,
// the previous checkpoint current). Multi-rank runs are tested under mpirun (tests/exec, mpi).
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "tests/cli/cli_runner.hpp"

namespace {

using mplan::cli_test::Result;
using mplan::cli_test::shipped_plan;
using mplan::cli_test::slurp;
using mplan::cli_test::temp_path;
using mplan::cli_test::write_temp;

// Runs `mplan ARGS`; stdout and stderr come together in Result::out.
Result run(const std::string& args) {
  mplan::cli_test::RunOptions options;
  options.merge_stderr = true;
  return mplan::cli_test::run(args, options);
}

const std::string kTinyGpt = shipped_plan("tiny-gpt");

// `mplan run` initializes MPI. Under AddressSanitizer (the CI's sanitizer build sets
// ASAN_OPTIONS), OpenMPI's process-lifetime allocations are suppressed by library, which needs
// the slow unwinder's full stacks (scripts/lsan-openmpi.supp); the other tests keep the fast one.
class RunCommand : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* asan = std::getenv("ASAN_OPTIONS");
    if (asan == nullptr) return;
    const std::string slow = std::string(asan) + ":fast_unwind_on_malloc=0";
    ::setenv("ASAN_OPTIONS", slow.c_str(), 1);
  }
};

TEST_F(RunCommand, TrainsTheTinyPlanAndWritesJson) {
  std::string json = temp_path("run_test.json");
  Result r = run("run " + kTinyGpt + " --backend cpu --iters 3 --warmup 1 --json " + json);
  ASSERT_EQ(r.code, 0) << r.out;
  // Megatron's log line, every iteration of a benchmark.
  EXPECT_TRUE(std::regex_search(
      r.out, std::regex("\\] iteration        1/       3 \\| consumed samples:            8 \\| "
                        "elapsed time per iteration \\(ms\\): [0-9.]+ \\|.* learning rate: "
                        "1\\.000000E-03 \\| global batch size:     8 \\| lm loss: [0-9.]+E\\+00 "
                        "\\|.*grad norm: [0-9.]+ \\| number of skipped iterations:   0 \\|")))
      << r.out;
  EXPECT_NE(r.out.find("iteration        3/       3 |"), std::string::npos);
  EXPECT_NE(r.out.find("learning rate: constant 0.001 (no train_iters: a benchmark of 3 "
                       "iterations)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("data: synthetic tokens (seed 1234; no evaluation)"), std::string::npos);
  EXPECT_NE(r.out.find("median iteration (2 after 1 warmup, slowest rank)"), std::string::npos);
  EXPECT_NE(r.out.find("time breakdown of the last iteration per pipeline stage"),
            std::string::npos);
  EXPECT_NE(r.out.find("peak memory per rank"), std::string::npos);
  std::ifstream f(json);
  nlohmann::json j = nlohmann::json::parse(f);
  EXPECT_EQ(j["schema_version"], 3);
  EXPECT_EQ(j["backend"], "cpu");
  EXPECT_EQ(j["world_size"], 1);
  EXPECT_EQ(j["train_iters"], 3);
  ASSERT_EQ(j["iterations"].size(), 3u);
  EXPECT_EQ(j["iterations"][0]["warmup"], true);
  EXPECT_EQ(j["iterations"][1]["warmup"], false);
  EXPECT_EQ(j["iterations"][2]["lr"], 0.001);
  EXPECT_EQ(j["iterations"][2]["consumed_samples"], 24);
  // Random tokens and small initial weights: the first loss is close to ln(vocab) = ln 256.
  EXPECT_NEAR(j["iterations"][0]["loss"].get<double>(), std::log(256.0), 0.1);
  for (const auto& it : j["iterations"]) {
    EXPECT_GT(it["ms"].get<double>(), 0);
    EXPECT_GT(it["tokens_per_s"].get<double>(), 0);
  }
  EXPECT_TRUE(j["evaluations"].empty());
  EXPECT_GT(j["summary"]["median_ms"].get<double>(), 0);
  ASSERT_EQ(j["memory"]["ranks"].size(), 1u);
  EXPECT_GT(j["memory"]["ranks"][0]["executor_peak_bytes"].get<int64_t>(), 0);
  // The measured breakdown of the one stage adds up to its traced iteration.
  ASSERT_EQ(j["breakdown"].size(), 1u);
  const auto& m = j["breakdown"][0]["measured"];
  EXPECT_GT(m["compute_s"].get<double>(), 0);
  EXPECT_NEAR(m["total_s"].get<double>(), m["iteration_s"].get<double>(),
              1e-9 + 1e-6 * m["iteration_s"].get<double>());
  // Megatron's FLOPs for the tiny plan (ffn = 4h, so the closed form applies):
  // 72·B·s·L·h²·(1 + s/(12h) + V/(12·L·h)) = 72·8·32·2·64²·(1 + 32/768 + 256/1536) = 182,452,224.
  EXPECT_EQ(j["model_flops_per_iteration"].get<double>(), 182452224.0);
}

TEST_F(RunCommand, SameSeedSameLosses) {
  Result a = run("run " + kTinyGpt + " --backend cpu --iters 2 --warmup 0 --seed 7");
  Result b = run("run " + kTinyGpt + " --backend cpu --iters 2 --warmup 0 --seed 7");
  ASSERT_EQ(a.code, 0) << a.out;
  auto losses = [](const std::string& s) {
    std::string out;
    for (size_t at = s.find("lm loss: "); at != std::string::npos; at = s.find("lm loss: ", at + 1))
      out += s.substr(at, 21);
    return out;
  };
  EXPECT_EQ(losses(a.out).size(), 2u * 21);
  EXPECT_EQ(losses(a.out), losses(b.out));
}

// A corpus `mplan preprocess` writes from token ids (NullTokenizer): documents that walk
// t -> (7t + 3) mod 255, which the tiny GPT learns quickly.
std::string corpus(const std::string& name) {
  std::string jsonl;
  unsigned t = 11;
  for (int d = 0; d < 120; ++d) {
    std::string text;
    for (int i = 0; i < 40 + d % 50; ++i) {
      if (i > 0) text += ' ';
      text += std::to_string(t);
      t = (t * 7 + 3) % 255;
    }
    jsonl += "{\"text\": \"" + text + "\"}\n";
    t = (t + 17) % 255;
  }
  const std::string input = write_temp(name + ".jsonl", jsonl);
  const std::string prefix = temp_path(name);
  Result r = run("preprocess --input " + input + " --output-prefix " + prefix +
                 " --tokenizer-type NullTokenizer --vocab-size 256 --append-eod");
  EXPECT_EQ(r.code, 0) << r.err;
  return prefix + "_text_document";
}

const std::string kTrainFlags =
    " --backend cpu --split 8,1,1 --train-iters 8 --lr 3e-3 --min-lr 3e-4 "
    "--lr-decay-style cosine --lr-warmup-iters 2 --eval-interval 4 "
    "--log-interval 2 --save-interval 4";

TEST_F(RunCommand, TrainsOnIndexedDataEvaluatesSavesAndResumes) {
  const std::string data = corpus("run_corpus");
  const std::string ckpt = temp_path("run_ckpt"), tb = temp_path("run_tb");
  const std::string json1 = temp_path("run_seg1.json"), json2 = temp_path("run_seg2.json");
  std::filesystem::remove_all(ckpt);
  std::filesystem::remove_all(tb);
  const std::string common = "run " + kTinyGpt + " --data-path " + data + kTrainFlags +
                             " --eval-iters 2 --save " + ckpt + " --load " + ckpt +
                             " --tensorboard-dir " + tb;
  // The first half (a segment of the run), then the rest from its checkpoint.
  Result a = run(common + " --iters 4 --json " + json1);
  ASSERT_EQ(a.code, 0) << a.out;
  EXPECT_NE(a.out.find("note: --load " + ckpt + ": no checkpoint there, starting fresh"),
            std::string::npos)
      << a.out;
  EXPECT_NE(a.out.find("learning rate: cosine from 0.003 to 0.0003, warmup 2 iterations from 0, "
                       "decay over 8 iterations; 8 iterations in all"),
            std::string::npos)
      << a.out;
  EXPECT_NE(a.out.find("iteration        4/       8 |"), std::string::npos);
  EXPECT_TRUE(std::regex_search(a.out, std::regex("\n-+\n validation loss at iteration 4 \\| lm "
                                                  "loss value: [0-9.]+E\\+00 \\| lm loss PPL: "
                                                  "[0-9.]+E\\+[0-9]+ \\| \n-+\n")))
      << a.out;
  EXPECT_NE(a.out.find(" successfully saved checkpoint from iteration       4 to " + ckpt),
            std::string::npos);
  Result b = run(common + " --json " + json2);
  ASSERT_EQ(b.code, 0) << b.out;
  EXPECT_NE(b.out.find(" loading checkpoint from " + ckpt + " at iteration 4"), std::string::npos)
      << b.out;
  EXPECT_NE(b.out.find("training iterations 5 to 8 of 8"), std::string::npos) << b.out;
  EXPECT_NE(b.out.find(" validation loss at the end of training for val data | "),
            std::string::npos);
  EXPECT_NE(b.out.find(" validation loss at the end of training for test data | "),
            std::string::npos);
  // The whole run in one call gives the same losses, learning rates and evaluations.
  const std::string ckpt2 = temp_path("run_ckpt2"), json3 = temp_path("run_whole.json");
  std::filesystem::remove_all(ckpt2);
  Result c = run("run " + kTinyGpt + " --data-path " + data + kTrainFlags +
                 " --eval-iters 2 --save " + ckpt2 + " --json " + json3);
  ASSERT_EQ(c.code, 0) << c.out;
  const nlohmann::json j1 = nlohmann::json::parse(slurp(json1)),
                       j2 = nlohmann::json::parse(slurp(json2)),
                       j3 = nlohmann::json::parse(slurp(json3));
  ASSERT_EQ(j3["iterations"].size(), 8u);
  for (int k = 0; k < 8; ++k) {
    const auto& seg = k < 4 ? j1["iterations"][k] : j2["iterations"][k - 4];
    EXPECT_EQ(seg["loss"], j3["iterations"][k]["loss"]) << "iteration " << k + 1;
    EXPECT_EQ(seg["lr"], j3["iterations"][k]["lr"]) << "iteration " << k + 1;
  }
  EXPECT_EQ(j3["iterations"][0]["lr"], 0.0);  // warmup from 0
  EXPECT_EQ(j3["iterations"][1]["lr"], 0.0015);
  ASSERT_EQ(j3["evaluations"].size(), 4u);  // iterations 4, 8, the end (val), the end (test)
  EXPECT_EQ(j2["evaluations"][0]["loss"], j3["evaluations"][1]["loss"]);
  EXPECT_EQ(j2["evaluations"][2]["loss"], j3["evaluations"][3]["loss"]);
  EXPECT_LT(j3["iterations"][7]["loss"].get<double>(),
            j3["iterations"][0]["loss"].get<double>() - 0.3);
  // The metrics of both segments, and their curves.
  const std::string metrics = slurp(tb + "/metrics.jsonl");
  EXPECT_EQ(std::count(metrics.begin(), metrics.end(), '\n'), 8 + 4);
  EXPECT_NE(slurp(tb + "/curves.svg").find("validation loss"), std::string::npos);
  // Nothing left to train: said, exit 2.
  Result d = run(common);
  EXPECT_EQ(d.code, 2);
  EXPECT_NE(d.out.find("is at iteration 8: nothing to train"), std::string::npos) << d.out;
}

TEST_F(RunCommand, DataOfAnotherVocabularyStopsTheRun) {
  std::string jsonl;
  for (int d = 0; d < 40; ++d) jsonl += "{\"text\": \"1 2 3 900 4 5 6 7 8 9 10 11 12\"}\n";
  const std::string input = write_temp("run_vocab.jsonl", jsonl);
  const std::string prefix = temp_path("run_vocab");
  ASSERT_EQ(run("preprocess --input " + input + " --output-prefix " + prefix +
                " --tokenizer-type NullTokenizer --vocab-size 1000")
                .code,
            0);
  Result r =
      run("run " + kTinyGpt + " --backend cpu --iters 2 --split 1,0,0 --eval-iters 0 --data-path " +
          prefix + "_text_document");
  // One id out of range among many: found before training, exit 2.
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("mplan: error: --data-path: " + prefix +
                       "_text_document.bin holds token ids up to 900, but model.vocab_size is "
                       "256: every id must be < vocab_size"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("consumed samples:"), std::string::npos);
}

// Runs `mplan ARGS` under `ulimit -f BLOCKS` (SIGXFSZ ignored: writes past it fail with EFBIG,
// as on a full disk).
Result run_with_file_limit(int blocks, const std::string& args) {
  const std::string out = temp_path("limited.txt");
  std::string cmd = "sh -c \"trap '' XFSZ; ulimit -f ";
  cmd.append(std::to_string(blocks)).append("; '").append(MPLAN_BIN).append("' ").append(args);
  cmd.append(" >'").append(out).append("' 2>&1\"");
  const int status = std::system(cmd.c_str());
  Result r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = slurp(out);
  std::remove(out.c_str());
  return r;
}

TEST_F(RunCommand, AFullDiskWhileSavingIsExit1AndTheLastCheckpointStays) {
  const std::string data = corpus("run_disk_corpus");
  const std::string ckpt = temp_path("run_disk_ckpt");
  std::filesystem::remove_all(ckpt);
  // A wider tiny GPT, whose optimizer file (about 75 MB) outgrows the limit below, which MPI's own
  // start-up files stay within.
  nlohmann::json plan = nlohmann::json::parse(slurp(kTinyGpt));
  plan["model"]["hidden_size"] = 512;
  plan["model"]["ffn_hidden_size"] = 2048;
  plan["model"]["num_attention_heads"] = 8;
  plan["model"]["num_query_groups"] = 8;
  const std::string wide = write_temp("run_wide.json", plan.dump());
  const std::string common = "run " + wide + " --data-path " + data + kTrainFlags +
                             " --eval-iters 0 --save " + ckpt + " --load " + ckpt;
  ASSERT_EQ(run(common + " --iters 4").code, 0);
  Result r = run_with_file_limit(32768, common);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("mplan: error: --save: " + ckpt + "/iter_0000008.tmp/"), std::string::npos)
      << r.out;
  EXPECT_EQ(slurp(ckpt + "/latest_checkpointed_iteration.txt"), "4\n");
  EXPECT_FALSE(std::filesystem::exists(ckpt + "/iter_0000008.tmp"));
  Result again = run(common);
  EXPECT_EQ(again.code, 0) << again.out;
  EXPECT_NE(again.out.find("at iteration 4"), std::string::npos);
  EXPECT_EQ(slurp(ckpt + "/latest_checkpointed_iteration.txt"), "8\n");
}

TEST_F(RunCommand, BadTrainingFlagsAreExit2NamingTheFlag) {
  const std::string data = corpus("run_bad_corpus");
  struct Case {
    std::string args, message;
  };
  const std::string ckpt = temp_path("run_bad_ckpt");
  std::filesystem::remove_all(ckpt);
  std::filesystem::create_directories(ckpt + "/notes");
  const std::string absent = temp_path("run_bad_absent_ckpt"), empty = temp_path("run_bad_empty");
  std::filesystem::remove_all(absent);
  std::filesystem::remove_all(empty);
  std::filesystem::create_directories(empty);
  const std::vector<Case> cases = {
      {" --train-iters 0", "mplan: error: --train-iters: must be >= 1, got 0"},
      {" --lr -1", "mplan: error: --lr: must be >= 0, got -1"},
      {" --train-iters 4 --lr-decay-style steep", "mplan: error: --lr-decay-style: must be"},
      {" --train-iters 4 --lr 1e-3 --min-lr 1e-2",
       "mplan: error: --min-lr (training.min_lr): must be <= lr"},
      {" --lr-warmup-iters 2",
       "mplan: error: --lr-warmup-iters: a learning-rate schedule needs "
       "--train-iters"},
      {" --train-iters 4 --lr-warmup-iters 2 --lr-warmup-fraction 0.1",
       "mplan: error: --lr-warmup-fraction (training.lr_warmup_fraction): can only specify one"},
      {" --train-iters 4 --lr-warmup-fraction 1.5",
       "mplan: error: --lr-warmup-fraction: must "
       "be in [0, 1)"},
      {" --save-interval 0", "mplan: error: --save-interval: must be >= 1, got 0"},
      {" --save " + ckpt + "x",
       "mplan: error: --save-interval (training.save_interval): must "
       "be >= 1 when save is set"},
      {" --log-interval 0", "mplan: error: --log-interval: must be >= 1, got 0"},
      {" --eval-iters -1", "mplan: error: --eval-iters: must be >= 0, got -1"},
      {" --split 1,2,3,4", "mplan: error: --split: \"1,2,3,4\" has 4 numbers"},
      {" --data-path " + data + " --split 1,0,0 --eval-interval 2 --eval-iters 1",
       "mplan: error: --split (training.split): \"1,0,0\" leaves the validation set empty"},
      {" --data-path " + temp_path("absent"), "mplan: error: " + temp_path("absent")},
      {" --load " + ckpt, "mplan: error: --load: " + ckpt +
                              " has no latest_checkpointed_iteration.txt but is not empty"},
      // Nothing to resume from, and not the --save directory: never a silent fresh start.
      {" --load " + absent, "mplan: error: --load: " + absent +
                                " does not exist; --load must name a directory with a checkpoint "
                                "(latest_checkpointed_iteration.txt)"},
      {" --load " + absent + " --save " + empty + " --save-interval 1",
       "mplan: error: --load: " + absent + " does not exist"},
      {" --seed -3", "mplan: error: --seed: must be >= 0, got -3"},
      {" --weight-decay -0.1", "mplan: error: --weight-decay: must be >= 0, got -0.1"},
      {" --clip-grad -1", "mplan: error: --clip-grad: must be >= 0, got -1"},
  };
  // Under the sanitizers the leak check (full stacks at every allocation, for OpenMPI's
  // suppressions: 2 s a run) runs in the first case only; the others check the code and message.
  const char* asan = std::getenv("ASAN_OPTIONS");
  const std::string with_leaks = asan != nullptr ? asan : "";
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    if (i == 1 && asan != nullptr)
      ::setenv("ASAN_OPTIONS", (with_leaks + ":detect_leaks=0:fast_unwind_on_malloc=1").c_str(), 1);
    Result r = run("run " + kTinyGpt + " --backend cpu --iters 2" + c.args);
    EXPECT_EQ(r.code, 2) << c.args << "\n" << r.out;
    EXPECT_NE(r.out.find(c.message), std::string::npos) << c.args << "\n" << r.out;
    EXPECT_EQ(r.out.find("consumed samples:"), std::string::npos) << c.args;
  }
  if (asan != nullptr) ::setenv("ASAN_OPTIONS", with_leaks.c_str(), 1);
}

// Before training: the data's token ids and the tokenizer's vocabulary against the model's
// vocab_size (256 for the tiny GPT), each an error naming the field and the rule.
TEST_F(RunCommand, VocabularyIsCheckedAgainstTheData) {
  // Ids up to 299, preprocessed for a vocabulary of 300.
  std::string jsonl;
  for (int d = 0; d < 60; ++d) {
    std::string text;
    for (int i = 0; i < 60; ++i) text += (i ? " " : "") + std::to_string((d * 37 + i * 11) % 300);
    jsonl += "{\"text\": \"" + text + "\"}\n";
  }
  const std::string prefix = temp_path("run_vocab300");
  Result p = run("preprocess --input " + write_temp("run_vocab300.jsonl", jsonl) +
                 " --output-prefix " + prefix + " --tokenizer-type NullTokenizer --vocab-size 300");
  ASSERT_EQ(p.code, 0) << p.out;
  const std::string data = prefix + "_text_document";
  const std::string flags = " --backend cpu --iters 2 --split 1,0,0 --eval-iters 0";
  Result r = run("run " + kTinyGpt + flags + " --data-path " + data);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("mplan: error: --data-path: " + data +
                       ".bin holds token ids up to 299, but model.vocab_size is 256: every id "
                       "must be < vocab_size"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("consumed samples:"), std::string::npos);
  // The same data under a model of 300 tokens trains.
  nlohmann::json plan = nlohmann::json::parse(slurp(kTinyGpt));
  plan["model"]["vocab_size"] = 300;
  Result ok =
      run("run " + write_temp("run_vocab300.json", plan.dump()) + flags + " --data-path " + data);
  EXPECT_EQ(ok.code, 0) << ok.out;
  // A vocabulary file of 257 tokens (ids 0 .. 256) for the model's 256, on data that fits it.
  std::string vocab = "{";
  for (int i = 0; i < 257; ++i)
    vocab += (i ? ", \"t" : "\"t") + std::to_string(i) + "\": " + std::to_string(i);
  vocab += "}";
  plan = nlohmann::json::parse(slurp(kTinyGpt));
  plan["training"]["vocab_file"] = write_temp("run_vocab257.json", vocab);
  const std::string small = corpus("run_vocab_corpus");
  r = run("run " + write_temp("run_vocab257_plan.json", plan.dump()) + flags + " --data-path " +
          small);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("mplan: error: model.vocab_size: 256 is smaller than the 257 tokens of "
                       "--vocab-file "),
            std::string::npos)
      << r.out;
  plan["training"]["vocab_file"] = temp_path("run_vocab_absent.json");
  r = run("run " + write_temp("run_vocab257_plan.json", plan.dump()) + flags + " --data-path " +
          small);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("mplan: error: --vocab-file"), std::string::npos) << r.out;
}

// --load naming the --save directory (spelled another way) that holds nothing yet: a fresh start,
// said so, and the checkpoint lands there.
TEST_F(RunCommand, LoadOfTheSaveDirectoryStartsFresh) {
  const std::string ckpt = temp_path("run_fresh_ckpt");
  std::filesystem::remove_all(ckpt);
  Result r = run("run " + kTinyGpt + " --backend cpu --iters 2 --warmup 0 --save " + ckpt +
                 "/ --save-interval 2 --load " + ckpt);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("note: --load " + ckpt +
                       ": no checkpoint there, starting fresh (it is the --save directory)"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(slurp(ckpt + "/latest_checkpointed_iteration.txt"), "2\n");
}

// --load of an empty directory (not the --save one): a fresh start, said so; a directory whose
// only content is an unfinished save is refused.
TEST_F(RunCommand, LoadOfAnEmptyDirectoryStartsFresh) {
  const std::string dir = temp_path("run_empty_load");
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  Result r = run("run " + kTinyGpt + " --backend cpu --iters 2 --warmup 0 --load " + dir);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("note: --load " + dir +
                       ": no checkpoint there, starting fresh (an empty directory)"),
            std::string::npos)
      << r.out;
  std::filesystem::create_directories(dir + "/iter_0000002.tmp");
  r = run("run " + kTinyGpt + " --backend cpu --iters 2 --warmup 0 --load " + dir);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("mplan: error: --load: " + dir), std::string::npos) << r.out;
  std::filesystem::remove_all(dir);
}

TEST_F(RunCommand, CheckpointsOfAnotherRunOrModelAreRefused) {
  const std::string data = corpus("run_other_corpus");
  const std::string ckpt = temp_path("run_other_ckpt");
  std::filesystem::remove_all(ckpt);
  const std::string args = " --data-path " + data + kTrainFlags + " --eval-iters 0";
  ASSERT_EQ(run("run " + kTinyGpt + args + " --iters 4 --save " + ckpt).code, 0);
  // A fresh run would overwrite it.
  Result r = run("run " + kTinyGpt + args + " --save " + ckpt);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("mplan: error: --save: " + ckpt +
                       " already holds a checkpoint "
                       "(iteration 4)"),
            std::string::npos)
      << r.out;
  // Another schedule, as Megatron refuses it.
  r = run("run " + kTinyGpt + args + " --lr-decay-iters 6 --load " + ckpt);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("mplan: error: --lr-decay-iters (decay samples): 48 differs from the "
                       "checkpoint's 64"),
            std::string::npos)
      << r.out;
  // Another model.
  nlohmann::json plan = nlohmann::json::parse(slurp(kTinyGpt));
  plan["model"]["num_layers"] = 4;
  const std::string deeper = write_temp("run_deeper.json", plan.dump());
  r = run("run " + deeper + args + " --load " + ckpt);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("holds another model: num_layers 2 (this plan's tiny-gpt: 4)"),
            std::string::npos)
      << r.out;
}

// Plan fields the executor does not implement are refused before anything is allocated, naming
// the field and why (exit 2), rather than run in fp32 anyway.
TEST_F(RunCommand, RefusesPrecisionFieldsItDoesNotImplement) {
  const struct {
    const char* fields;
    const char* error;
  } cases[] = {
      {R"({"grads_in_fp32": false})",
       "mplan: error: training.grads_in_fp32: bf16 main gradients (Megatron's "
       "--grad-reduce-in-bf16) are not supported by the executor, which accumulates and reduces "
       "gradients in fp32; set it to true"},
      {R"({"use_precision_aware_optimizer": true, "exp_avg_dtype": "bf16",
           "exp_avg_sq_dtype": "bf16"})",
       "mplan: error: training.exp_avg_dtype: bf16 (Megatron's precision-aware optimizer) is not "
       "supported by the executor, which keeps master weights and Adam moments in fp32; use fp32"},
      {R"({"use_precision_aware_optimizer": true, "main_params_dtype": "fp16"})",
       "mplan: error: training.main_params_dtype: fp16 (Megatron's precision-aware optimizer) is "
       "not supported by the executor"},
  };
  for (const auto& c : cases) {
    nlohmann::json plan = nlohmann::json::parse(slurp(kTinyGpt));
    plan["training"].update(nlohmann::json::parse(c.fields));
    Result r = run("run " + write_temp("run_precision.json", plan.dump()) +
                   " --backend cpu --iters 2 --warmup 0");
    EXPECT_EQ(r.code, 2) << c.fields;
    EXPECT_NE(r.out.find(c.error), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("consumed samples:"), std::string::npos) << r.out;
  }
}

TEST_F(RunCommand, RefusesAPlanForAnotherWorldSize) {
  Result r = run("run " + shipped_plan("tiny-gpt-tp2-sp") + " --backend cpu");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("plan: needs 2 ranks"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("consumed samples:"), std::string::npos);
}

TEST_F(RunCommand, PipelinePlansNeedTheirRanks) {
  std::string text = slurp(kTinyGpt);
  size_t at = text.find("\"pp\": 1");
  ASSERT_NE(at, std::string::npos);
  text.replace(at, 7, "\"pp\": 2");
  std::string path = write_temp("run_pp2.json", text);
  Result r = run("run " + path + " --backend cpu");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("mplan: error: plan: needs 2 ranks (tp x cp x pp x dp = 1 x 1 x 2 x 1)"),
            std::string::npos)
      << r.out;
}

// The tiny plan on a copy of the dgx-h100 cluster whose GPUs have `gib` of memory.
std::string tiny_on_small_gpus(double gib) {
  nlohmann::json plan = nlohmann::json::parse(slurp(kTinyGpt));
  nlohmann::json cluster = nlohmann::json::parse(
      slurp(std::string(MPLAN_SOURCE_DIR) + "/configs/clusters/dgx-h100.json"));
  cluster["gpu"]["memory_gib"] = gib;
  plan["cluster"] = cluster;
  return write_temp("run_small_gpus.json", plan.dump());
}

TEST_F(RunCommand, RefusesAPlanPredictedNotToFitUnlessForced) {
  const std::string path = tiny_on_small_gpus(0.001);
  Result r = run("run " + path + " --backend cpu --iters 2 --warmup 0");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("mplan: error: plan: predicted peak memory of pipeline stage 0 is "),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("--force runs anyway"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("consumed samples:"), std::string::npos);
  r = run("run " + path + " --backend cpu --iters 2 --warmup 0 --force");
  EXPECT_EQ(r.code, 0) << r.out;
}

TEST_F(RunCommand, TraceHasTheSimulatorsNamesAndTheBreakdownItsPrediction) {
  const std::string path = tiny_on_small_gpus(80);
  const std::string trace = temp_path("run_trace.json"), json = temp_path("run_trace_run.json");
  Result r = run("run " + path + " --backend cpu --iters 2 --warmup 1 --trace " + trace +
                 " --json " + json);
  ASSERT_EQ(r.code, 0) << r.out;
  nlohmann::json t = nlohmann::json::parse(slurp(trace));
  EXPECT_EQ(t["schema_version"], 1);
  int forwards = 0, backwards = 0, optimizer = 0;
  for (const auto& e : t["traceEvents"]) {
    if (e["ph"] != "X") continue;
    forwards += e["name"] == "forward";
    backwards += e["name"] == "backward";
    optimizer += e["name"] == "optimizer";
  }
  EXPECT_EQ(forwards, 4);  // the last iteration's 4 micro-batches
  EXPECT_EQ(backwards, 4);
  EXPECT_EQ(optimizer, 1);
  nlohmann::json j = nlohmann::json::parse(slurp(json));
  ASSERT_TRUE(j["breakdown"][0].contains("predicted")) << j["breakdown"].dump();
  EXPECT_GT(j["breakdown"][0]["predicted"]["compute_s"].get<double>(), 0);
  // The error of each part: (predicted - measured) / measured, null where nothing was measured.
  const nlohmann::json& st = j["breakdown"][0];
  for (const char* part :
       {"compute", "tp_comm", "pp_comm", "dp_comm", "bubble", "optimizer", "total"}) {
    SCOPED_TRACE(part);
    const double pred = st["predicted"][std::string(part) + "_s"].get<double>();
    const double meas = st["measured"][std::string(part) + "_s"].get<double>();
    ASSERT_TRUE(st["error"].contains(part)) << st.dump();
    if (meas > 0) {
      EXPECT_NEAR(st["error"][part].get<double>(), (pred - meas) / meas, 1e-12);
    } else {
      EXPECT_TRUE(st["error"][part].is_null());
    }
  }
  EXPECT_TRUE(st["error"]["tp_comm"].is_null());  // no tensor parallelism: nothing measured
  EXPECT_GT(j["prediction"]["iteration_time_s"].get<double>(), 0);
  EXPECT_NE(r.out.find("predicted"), std::string::npos);
}

// Compute events of a trace's first rank and stream but the passes themselves and the optimizer
// step (its kernels), by name, and whether each lies inside a forward or backward pass.
std::map<std::string, int> kernel_events(const std::string& trace_path, bool& inside_passes) {
  nlohmann::json t = nlohmann::json::parse(slurp(trace_path));
  std::vector<std::pair<double, double>> passes;
  std::map<std::string, int> count;
  std::vector<std::pair<double, double>> kernels;
  for (const auto& e : t["traceEvents"]) {
    if (e["ph"] != "X" || e["pid"] != 0 || e["tid"] != 0 || e["cat"] != "compute") continue;
    const std::string name = e["name"];
    const double b = e["ts"].get<double>(), end = b + e["dur"].get<double>();
    if (name == "forward" || name == "backward") {
      passes.emplace_back(b, end);
    } else if (name != "optimizer") {
      ++count[name];
      kernels.emplace_back(b, end);
    }
  }
  inside_passes = !kernels.empty();
  for (const auto& [b, end] : kernels) {
    bool in = false;
    for (const auto& [pb, pe] : passes) in = in || (b >= pb - 1e-3 && end <= pe + 1e-3);
    inside_passes = inside_passes && in;
  }
  return count;
}

// --trace-level ops: every kernel of a pass, named and counted as the simulator's ops-level
// trace of the same plan for the executor (`--stack mplan`), inside its pass; GPT and a
// Llama-family model (grouped-query attention, RoPE, SwiGLU), each recomputation.
TEST_F(RunCommand, OpsTraceHasTheSimulatorsKernelsPerPass) {
  nlohmann::json gpt = nlohmann::json::parse(slurp(kTinyGpt));
  nlohmann::json llama = gpt;
  llama["model"].update({{"num_query_groups", 2},
                         {"activation", "swiglu"},
                         {"normalization", "rmsnorm"},
                         {"position_embedding", "rope"},
                         {"tied_embeddings", false},
                         {"add_bias_linear", false}});
  const nlohmann::json full = {
      {"recompute", "full"}, {"recompute_method", "uniform"}, {"recompute_num_layers", 1}};
  const std::vector<std::pair<std::string, nlohmann::json>> cases = {{"gpt", gpt},
                                                                     {"gpt-selective", gpt},
                                                                     {"gpt-full", gpt},
                                                                     {"llama-selective", llama},
                                                                     {"llama-full", llama}};
  for (auto [name, plan] : cases) {
    SCOPED_TRACE(name);
    if (name.find("selective") != std::string::npos) plan["parallel"]["recompute"] = "selective";
    if (name.find("full") != std::string::npos) plan["parallel"].update(full);
    const std::string path = write_temp("run_ops_" + name + ".json", plan.dump());
    const std::string measured = temp_path("run_ops_" + name + "_trace.json");
    const std::string simulated = temp_path("run_ops_" + name + "_sim.json");
    Result r = run("run " + path + " --backend cpu --iters 1 --warmup 0 --trace " + measured +
                   " --trace-level ops");
    ASSERT_EQ(r.code, 0) << r.out;
    r = run("simulate " + path + " --stack mplan --trace " + simulated + " --trace-level ops");
    ASSERT_EQ(r.code, 0) << r.out;
    bool run_inside = false, sim_inside = false;
    const std::map<std::string, int> ran = kernel_events(measured, run_inside);
    EXPECT_EQ(ran, kernel_events(simulated, sim_inside));
    EXPECT_TRUE(run_inside);
    EXPECT_GT(ran.count("L1 qkv"), 0u);
  }
  // Without --trace there is nowhere to write them; another level is not one.
  Result r = run("run " + kTinyGpt + " --backend cpu --iters 1 --warmup 0 --trace-level ops");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("--trace-level ops: needs --trace FILE"), std::string::npos) << r.out;
  r = run("run " + kTinyGpt + " --backend cpu --iters 1 --warmup 0 --trace " +
          temp_path("run_ops_bad.json") + " --trace-level kernels");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("--trace-level: must be summary or ops, got \"kernels\""), std::string::npos)
      << r.out;
}

TEST_F(RunCommand, RejectsBadOptions) {
  Result r = run("run " + kTinyGpt + " --iters 3 --warmup 3");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("--warmup: must be in [0, --iters) = [0, 3), got 3"), std::string::npos)
      << r.out;
  r = run("run " + kTinyGpt + " --backend tpu");
  EXPECT_EQ(r.code, 2);
  r = run("run " + kTinyGpt + " --backend cpu --json /nonexistent-dir/x.json");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("--json: cannot write"), std::string::npos) << r.out;
  const std::string file = write_temp("run_not_a_dir", "x");
  r = run("run " + kTinyGpt + " --backend cpu --tensorboard-dir " + file + "/tb");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("--tensorboard-dir: cannot write"), std::string::npos) << r.out;
}

TEST_F(RunCommand, CudaBackendIsRefusedClearlyWhenUnavailable) {
  Result r = run("run " + kTinyGpt + " --backend cuda --iters 1 --warmup 0");
  if (r.code == 0) GTEST_SKIP() << "a GPU build with a visible GPU: cuda ran";
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("mplan: error: --backend cuda: "), std::string::npos) << r.out;
}

TEST_F(RunCommand, HelpListsEveryOption) {
  Result r = run("run --help");
  EXPECT_EQ(r.code, 0);
  for (const char* opt : {"--iters",
                          "--warmup",
                          "--seed",
                          "--json",
                          "--trace",
                          "--trace-level",
                          "--backend",
                          "--force",
                          "--watchdog",
                          "--train-iters",
                          "--data-path",
                          "--split",
                          "--lr",
                          "--min-lr",
                          "--lr-decay-style",
                          "--lr-decay-iters",
                          "--lr-warmup-iters",
                          "--lr-warmup-fraction",
                          "--weight-decay",
                          "--clip-grad",
                          "--eval-interval",
                          "--eval-iters",
                          "--save",
                          "--load",
                          "--save-interval",
                          "--log-interval",
                          "--tensorboard-dir",
                          "Examples:"})
    EXPECT_NE(r.out.find(opt), std::string::npos) << opt;
}

}  // namespace
