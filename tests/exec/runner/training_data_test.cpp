// TrainingData: synthetic tokens without a data path (training only, no evaluation); with one,
// Megatron's train/valid/test datasets sized by megatron_split_sizes for the run, the index cache
// built by the first rank and loaded by the others; and the errors that name what to fix.
#include "exec/runner/training_data.hpp"

#include <gtest/gtest.h>

#include <fstream>

#include "tests/exec/runner/loop_test_util.hpp"

namespace mplan::exec {
namespace {

using testing::data_plan;
using testing::Layout;

TEST(TrainingData, SyntheticWithoutADataPath) {
  const Plan p = testing::tiny_plan(Layout{});
  const TrainingData d = make_training_data(p, 5);
  ASSERT_NE(d.train, nullptr);
  EXPECT_EQ(d.valid, nullptr);
  EXPECT_EQ(d.test, nullptr);
  EXPECT_TRUE(d.synthetic());
  EXPECT_EQ(d.needed.train, 5 * p.parallel.global_batch_size);
  EXPECT_EQ(d.train->sample_tokens(), p.model.seq_length + 1);
  EXPECT_EQ(d.description, "synthetic tokens (seed 1234; no evaluation)");
}

TEST(TrainingData, MegatronsSplitsSizedForTheRun) {
  test::TempDir dir;
  testing::write_corpus(dir / "corpus");
  Plan p = data_plan(Layout{}, dir / "corpus", 12);
  const TrainingData d = make_training_data(p, 12);
  EXPECT_FALSE(d.synthetic());
  ASSERT_NE(d.valid, nullptr);
  ASSERT_NE(d.test, nullptr);
  // 12 iterations of 8 samples; evaluations at 4, 8, 12 and the end, 2 batches each; test once.
  EXPECT_EQ(d.needed.train, 96);
  EXPECT_EQ(d.needed.valid, 4 * 2 * 8);
  EXPECT_EQ(d.needed.test, 2 * 8);
  EXPECT_GE(d.train->size(), 96);
  EXPECT_GE(d.valid->size(), 64);
  EXPECT_EQ(d.notes.size(), 3u);  // three index caches built
  EXPECT_NE(d.notes[0].find("built the train indices"), std::string::npos) << d.notes[0];
  // A second build loads them, and gives the same samples.
  const TrainingData again = make_training_data(p, 12);
  EXPECT_NE(again.notes[0].find("loaded the train indices"), std::string::npos);
  std::vector<int32_t> a(33), b(33);
  for (int64_t i : {0, 17, 95}) {
    d.train->sample(i, a);
    again.train->sample(i, b);
    EXPECT_EQ(a, b);
  }
  // No evaluation: no valid or test sources.
  p.training.eval_iters = 0;
  const TrainingData none = make_training_data(p, 12);
  EXPECT_EQ(none.valid, nullptr);
  EXPECT_EQ(none.needed.valid, 0);
}

TEST(TrainingData, ErrorsNameWhatToFix) {
  test::TempDir dir;
  // An unweighted blend takes one epoch of each prefix (Megatron): too few samples for the run.
  testing::write_corpus(dir / "a", 3);
  testing::write_corpus(dir / "b", 3);
  Plan p = data_plan(Layout{}, dir / "a", 8);
  p.training.data_path = parse_data_path({dir / "a", dir / "b"}, "test");
  p.training.split = "1,0,0";
  p.training.eval_iters = 0;
  std::string e = test::error_of([&] { make_training_data(p, 8); });
  EXPECT_NE(e.find("--data-path: the train split has "), std::string::npos) << e;
  EXPECT_NE(e.find(" samples but the run reads 64 (train_iters 8, global batch 8)"),
            std::string::npos)
      << e;
  // A data set smaller than one sample.
  {
    IndexedDatasetWriter w(dir / "tiny", TokenDtype::kUint16);
    w.add_document(std::vector<int32_t>{1, 2, 3, 4, 5});
    w.finalize();
  }
  p = data_plan(Layout{}, dir / "tiny", 8);
  e = test::error_of([&] { make_training_data(p, 8); });
  EXPECT_NE(e.find(dir / "tiny"), std::string::npos) << e;
  EXPECT_NE(e.find("fewer than one sample"), std::string::npos) << e;
  p.training.seed = int64_t{1} << 32;
  e = test::error_of([&] { make_training_data(p, 8); });
  EXPECT_NE(e.find("--seed: must be in [0, 2^32) with --data-path"), std::string::npos) << e;
  p = data_plan(Layout{}, dir / "absent", 8);
  e = test::error_of([&] { make_training_data(p, 8); });
  EXPECT_NE(e.find(dir / "absent"), std::string::npos) << e;
}

// The tiny GPT's 256 tokens against data of larger ids and a larger vocabulary file.
TEST(TrainingData, VocabularyAgainstTheDataAndTheVocabFile) {
  test::TempDir dir;
  testing::write_corpus(dir / "ok");  // ids 0 .. 255
  {
    IndexedDatasetWriter w(dir / "wide", TokenDtype::kUint16);
    std::vector<int32_t> doc;
    for (int i = 0; i < 4000; ++i) doc.push_back(i % 250);
    doc[1234] = 256;
    w.add_document(doc);
    w.finalize();
  }
  Plan p = data_plan(Layout{}, dir / "wide", 8);
  p.training.split = "1,0,0";
  p.training.eval_iters = 0;
  std::string e = test::error_of([&] { make_training_data(p, 8); });
  EXPECT_EQ(e, "--data-path: " + (dir / "wide") +
                   ".bin holds token ids up to 256, but model.vocab_size is 256: every id must "
                   "be < vocab_size (the data was made with a larger vocabulary; set it to at "
                   "least 257)");
  p.model.vocab_size = 257;
  EXPECT_NO_THROW(make_training_data(p, 8));
  // One prefix of a blend is enough to refuse it.
  p.model.vocab_size = 256;
  p.training.data_path = parse_data_path({dir / "ok", dir / "wide"}, "test");
  e = test::error_of([&] { make_training_data(p, 8); });
  EXPECT_NE(e.find((dir / "wide") + ".bin holds token ids up to 256"), std::string::npos) << e;
  // A vocabulary file of more tokens than the model has.
  p.training.data_path = parse_data_path({dir / "ok"}, "test");
  std::string vocab = "{";
  for (int i = 0; i < 300; ++i) vocab += cat(i ? ", " : "", "\"t", i, "\": ", i);
  const std::string vocab_file = dir / "vocab.json";
  std::ofstream(vocab_file) << vocab << "}";
  p.training.vocab_file = vocab_file;
  e = test::error_of([&] { make_training_data(p, 8); });
  EXPECT_EQ(e, "model.vocab_size: 256 is smaller than the 300 tokens of --vocab-file " +
                   vocab_file +
                   "; it must hold every id the tokenizer gives (set it to at least "
                   "300)");
  p.model.vocab_size = 300;
  EXPECT_NO_THROW(make_training_data(p, 8));
  std::ofstream(vocab_file) << "[1, 2]";
  e = test::error_of([&] { make_training_data(p, 8); });
  EXPECT_EQ(e,
            "--vocab-file: " + vocab_file + " is not a vocabulary (a JSON object of token -> id)");
}

TEST(TrainingData, RankZeroBuildsFirstAndAFailureStopsEveryRank) {
  test::TempDir dir;
  testing::write_corpus(dir / "corpus");
  const Plan p = data_plan(Layout{}, dir / "corpus", 8);
  std::vector<bool> votes;
  auto vote = [&](bool ok) {
    votes.push_back(ok);
    return ok;
  };
  const TrainingData first = make_training_data_rank0_first(p, 8, 0, vote);
  EXPECT_NE(first.notes[0].find("built"), std::string::npos);
  const TrainingData other = make_training_data_rank0_first(p, 8, 1, vote);
  EXPECT_NE(other.notes[0].find("loaded"), std::string::npos);
  EXPECT_EQ(votes, std::vector<bool>(4, true));
  // Rank 0 failed: the others stop at the first vote without touching the data.
  const std::string e =
      test::error_of([&] { make_training_data_rank0_first(p, 8, 1, [](bool) { return false; }); });
  EXPECT_EQ(e, "the training data could not be prepared (rank 0 says why)");
}

}  // namespace
}  // namespace mplan::exec
