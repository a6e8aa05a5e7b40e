// NullTokenizer: whitespace-separated ids as Megatron's NullTokenizer reads them, eod =
// vocab_size - 1, and errors for words that are not ids in the vocabulary.
#include "exec/data/null_tokenizer.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/exec/data/data_test_util.hpp"

namespace mplan::exec {
namespace {

TEST(NullTokenizer, ReadsIds) {
  NullTokenizer t(100);
  EXPECT_EQ(t.eod(), 99);
  std::vector<int32_t> ids;
  t.tokenize("1 2  3\n99\t0", ids);
  EXPECT_EQ(ids, (std::vector<int32_t>{1, 2, 3, 99, 0}));
  ids.clear();
  t.tokenize("   ", ids);
  EXPECT_TRUE(ids.empty());
}

TEST(NullTokenizer, Errors) {
  NullTokenizer t(100);
  std::vector<int32_t> ids;
  EXPECT_EQ(test::error_of([&] { t.tokenize("1 two", ids); }),
            "\"two\" is not a token id (NullTokenizer reads integers)");
  EXPECT_EQ(test::error_of([&] { t.tokenize("100", ids); }),
            "token id 100 is outside the vocabulary [0, 100)");
  EXPECT_EQ(test::error_of([] { NullTokenizer bad(0); }),
            "--vocab-size: must be in [1, 2^31), got 0");
}

}  // namespace
}  // namespace mplan::exec
