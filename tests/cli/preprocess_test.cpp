// `mplan preprocess`: writes P_text_document.bin/.idx from JSON lines with the tiny fixture
// vocabulary (ids worked out in tests/exec/data/gpt2_bpe_tokenizer_test.cpp), prints the token
// rate, and ends bad input with one line naming the flag or the file, exit 2, with no output left.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "tests/cli/cli_runner.hpp"

namespace mplan::cli_test {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

const std::string kFixtures = std::string(MPLAN_SOURCE_DIR) + "/tests/exec/data/fixtures/";
const std::string kVocab = " --vocab-file '" + kFixtures + "tiny-vocab.json' --merge-file '" +
                           kFixtures + "tiny-merges.txt'";

std::vector<uint16_t> u16(const std::string& bytes) {
  std::vector<uint16_t> v(bytes.size() / 2);
  std::memcpy(v.data(), bytes.data(), v.size() * 2);
  return v;
}

TEST(Preprocess, WritesMegatronFiles) {
  const std::string in =
      write_temp("pp.jsonl", "{\"text\": \"hello the\"}\n{\"text\": \"aaaaa\"}\n");
  const std::string prefix = temp_path("pp_out");
  const Result r = run("preprocess --input '" + in + "' --output-prefix '" + prefix + "'" + kVocab +
                       " --append-eod --workers 2");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("wrote " + prefix + "_text_document.bin and .idx (uint16 tokens)"));
  EXPECT_THAT(r.out, HasSubstr("2 documents, 9 tokens from"));
  EXPECT_THAT(r.out, HasSubstr(" tokens/s, "));
  EXPECT_EQ(u16(slurp(prefix + "_text_document.bin")),
            (std::vector<uint16_t>{257, 259, 111, 258, 264, 263, 263, 97, 264}));
  const std::string idx = slurp(prefix + "_text_document.idx");
  ASSERT_GE(idx.size(), 34u);
  EXPECT_EQ(idx.substr(0, 9), std::string("MMIDIDX\0\0", 9));
  EXPECT_EQ(idx.size(), 34u + 2 * 12 + 3 * 8);  // 2 sequences, 3 document indices
  std::filesystem::remove(prefix + "_text_document.bin");
  std::filesystem::remove(prefix + "_text_document.idx");
  std::filesystem::remove(in);
}

TEST(Preprocess, NullTokenizer) {
  const std::string in = write_temp("pp_null.jsonl", "{\"ids\": \"1 2 3\"}\n");
  const std::string prefix = temp_path("pp_null");
  const Result r = run("preprocess --input '" + in + "' --output-prefix '" + prefix +
                       "' --json-keys ids --tokenizer-type NullTokenizer --vocab-size 100000");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("_ids_document.bin and .idx (int32 tokens)"));
  EXPECT_EQ(slurp(prefix + "_ids_document.bin").size(), 12u);
  std::filesystem::remove(prefix + "_ids_document.bin");
  std::filesystem::remove(prefix + "_ids_document.idx");
  std::filesystem::remove(in);
}

TEST(Preprocess, BadInputIsOneLineExit2) {
  const std::string prefix = temp_path("pp_bad");
  const std::string good = write_temp("pp_good.jsonl", "{\"text\": \"x\"}\n");
  auto expect_error = [&](const std::string& args, const std::string& start) {
    const Result r = run("preprocess " + args);
    EXPECT_EQ(r.code, 2) << args;
    EXPECT_EQ(count_lines(r.err), 1u) << r.err;
    EXPECT_THAT(r.err, StartsWith("mplan: error: " + start)) << args;
  };
  expect_error(
      "--input '" + temp_path("none.jsonl") + "' --output-prefix '" + prefix + "'" + kVocab,
      "--input: cannot read");
  expect_error("--input '" + good + "' --output-prefix '" + prefix + "'",
               "--vocab-file and --merge-file");
  expect_error("--input '" + good + "' --output-prefix '" + prefix + "' --vocab-file '" +
                   temp_path("v.json") + "' --merge-file '" + kFixtures + "tiny-merges.txt'",
               "--vocab-file");
  expect_error(
      "--input '" + good + "' --output-prefix '" + prefix + "' --tokenizer-type NullTokenizer",
      "--vocab-size");
  expect_error("--input '" + good + "' --output-prefix '" + temp_path("no_dir/x") + "'" + kVocab,
               "--output-prefix: directory");
  const std::string bad = write_temp("pp_badline.jsonl", "{\"text\": \"x\"}\n[1, 2]\n");
  expect_error("--input '" + bad + "' --output-prefix '" + prefix + "'" + kVocab,
               bad + ":2: not a JSON object");
  EXPECT_FALSE(std::filesystem::exists(prefix + "_text_document.bin"));
  EXPECT_FALSE(std::filesystem::exists(prefix + "_text_document.idx"));
  const Result r = run("preprocess --input '" + good + "' --output-prefix p --workers 0" + kVocab);
  EXPECT_EQ(r.code, 2);
  std::filesystem::remove(good);
  std::filesystem::remove(bad);
}

TEST(Preprocess, HelpHasExamples) {
  const Result r = run("preprocess --help");
  EXPECT_EQ(r.code, 0);
  EXPECT_THAT(r.out, HasSubstr("Examples:"));
  EXPECT_THAT(r.out, HasSubstr("--tokenizer-type"));
}

}  // namespace
}  // namespace mplan::cli_test
