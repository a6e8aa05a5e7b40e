// preprocess_jsonl: documents as Megatron's preprocess_data.py writes them (one sequence per
// text, one per sentence for a list, EOD appended to non-empty documents, empty documents kept as
// boundaries), one output pair per JSON key, the same bytes for any number of workers, and bad
// lines reported with the file and line.
#include "exec/data/preprocess.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "exec/data/gpt2_bpe_tokenizer.hpp"
#include "exec/data/indexed_dataset.hpp"
#include "exec/data/null_tokenizer.hpp"
#include "tests/exec/data/data_test_util.hpp"

namespace mplan::exec {
namespace {

using ::testing::StartsWith;

const std::string kFixtures = std::string(MPLAN_SOURCE_DIR) + "/tests/exec/data/fixtures/";

std::vector<int32_t> sequence(const IndexedDataset& d, int64_t i) {
  std::vector<int32_t> out(static_cast<size_t>(d.sequence_length(i)));
  d.read(i, 0, out);
  return out;
}

TEST(Preprocess, DocumentsAsMegatronWritesThem) {
  test::TempDir dir;
  test::write_file(dir / "in.jsonl",
                   "{\"text\": \"hello the\", \"id\": 1}\n"
                   "{\"text\": \"\"}\n"
                   "\n"
                   "{\"text\": [\"aaaaa\", \"\", \"ell\"]}\n");
  auto tok =
      Gpt2BpeTokenizer::from_files(kFixtures + "tiny-vocab.json", kFixtures + "tiny-merges.txt");
  PreprocessOptions o;
  o.input = dir / "in.jsonl";
  o.output_prefix = dir / "out";
  o.append_eod = true;
  const PreprocessResult r = preprocess_jsonl(o, tok, nullptr);
  EXPECT_EQ(r.documents, 3);
  EXPECT_EQ(r.tokens, 5 + 5);
  ASSERT_EQ(r.output_prefixes, std::vector<std::string>{dir / "out_text_document"});
  IndexedDataset d(dir / "out_text_document");
  EXPECT_EQ(d.dtype(), TokenDtype::kUint16);  // 265 ids
  EXPECT_EQ(d.num_documents(), 3);
  ASSERT_EQ(d.num_sequences(), 3);  // "hello the" | (empty document) | "aaaaa", "ell"
  EXPECT_EQ(d.document_index(1), 1);
  EXPECT_EQ(d.document_index(2), 1);
  EXPECT_EQ(d.document_index(3), 3);
  EXPECT_EQ(sequence(d, 0), (std::vector<int32_t>{257, 259, 111, 258, 264}));
  EXPECT_EQ(sequence(d, 1), (std::vector<int32_t>{263, 263, 97}));
  EXPECT_EQ(sequence(d, 2), (std::vector<int32_t>{260, 264}));  // EOD on the last sentence
}

TEST(Preprocess, OnePairPerKeyAndAnyWorkerCount) {
  test::TempDir dir;
  std::string lines;
  for (int i = 0; i < 200; ++i)
    lines += "{\"a\": \"" + std::to_string(i) + " 7\", \"b\": \"" + std::to_string(i % 5) + "\"}\n";
  test::write_file(dir / "in.jsonl", lines);
  NullTokenizer tok(70000);
  PreprocessOptions o;
  o.input = dir / "in.jsonl";
  o.json_keys = {"a", "b"};
  for (int workers : {1, 3}) {
    o.workers = workers;
    o.output_prefix = dir / (workers == 1 ? "w1" : "w3");
    int calls = 0;
    preprocess_jsonl(o, tok, [&](const PreprocessProgress& p) {
      ++calls;
      EXPECT_EQ(p.total_bytes, static_cast<int64_t>(lines.size()));
    });
    EXPECT_GE(calls, 1);
  }
  for (const char* file :
       {"_a_document.bin", "_a_document.idx", "_b_document.bin", "_b_document.idx"}) {
    std::string one = "w1", three = "w3";  // appended: GCC 12 warns on "literal" + std::string
    one.append(file);
    three.append(file);
    EXPECT_EQ(test::slurp(dir / one), test::slurp(dir / three)) << file;
  }
  IndexedDataset a(dir / "w1_a_document");
  EXPECT_EQ(a.dtype(), TokenDtype::kInt32);  // 70000 ids
  EXPECT_EQ(sequence(a, 123), (std::vector<int32_t>{123, 7}));
}

TEST(Preprocess, BadLinesNameFileAndLine) {
  test::TempDir dir;
  NullTokenizer tok(10);
  PreprocessOptions o;
  o.input = dir / "in.jsonl";
  o.output_prefix = dir / "out";
  auto run = [&](const std::string& text) {
    test::write_file(o.input, text);
    return test::error_of([&] { preprocess_jsonl(o, tok, nullptr); });
  };
  EXPECT_EQ(run("{\"text\": \"1\"}\n{\"text\": \"2\"\n"),
            o.input + ":2: not a JSON object (--input takes one JSON document per line)");
  EXPECT_EQ(run("{\"txt\": \"1\"}\n"), o.input + ":1: no key \"text\" (--json-keys)");
  EXPECT_EQ(run("{\"text\": 5}\n"), o.input + ":1: \"text\" must be a string or a list of strings");
  EXPECT_EQ(run("{\"text\": \"3 11\"}\n"),
            o.input + ":1: token id 11 is outside the vocabulary [0, 10)");
  // Nothing was written under the output names.
  EXPECT_FALSE(std::filesystem::exists(dir / "out_text_document.bin"));
  EXPECT_FALSE(std::filesystem::exists(dir / "out_text_document.bin.tmp"));
  o.input = dir / "missing.jsonl";
  EXPECT_EQ(test::error_of([&] { preprocess_jsonl(o, tok, nullptr); }),
            "--input: cannot read " + dir / "missing.jsonl");
}

}  // namespace
}  // namespace mplan::exec
