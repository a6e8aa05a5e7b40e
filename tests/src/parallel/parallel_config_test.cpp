// Tests of the "parallel" section reader: defaults, required fields and the range of every
// number, each error naming its field.
#include "src/parallel/parallel_config.hpp"

#include <gtest/gtest.h>

#include "src/common/error.hpp"

namespace mplan {
namespace {

std::string error_of(const std::string& text) {
  try {
    parallel_from_json(parse_json(text, "t"), "parallel");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(ParallelConfig, DefaultsAndRequiredFields) {
  const ParallelConfig p = parallel_from_json(
      parse_json(R"({"dp": 2, "micro_batch_size": 1, "global_batch_size": 8})", "t"), "parallel");
  EXPECT_EQ(p.tp, 1);
  EXPECT_EQ(p.pp, 1);
  EXPECT_EQ(p.etp, 1);
  EXPECT_EQ(p.schedule, ScheduleKind::k1F1B);
  // dp, micro_batch_size and global_batch_size have no default.
  EXPECT_EQ(error_of(R"({"micro_batch_size": 1, "global_batch_size": 8})"),
            "parallel.dp: missing (required)");
  EXPECT_EQ(error_of(R"({"dp": 1, "global_batch_size": 8})"),
            "parallel.micro_batch_size: missing (required)");
  EXPECT_EQ(error_of(R"({"dp": 1, "micro_batch_size": 1})"),
            "parallel.global_batch_size: missing (required)");
}

TEST(ParallelConfig, SizesOutsideTheirRangeNameTheField) {
  const std::string base = R"("dp": 1, "micro_batch_size": 1, "global_batch_size": 8)";
  EXPECT_EQ(error_of("{" + base + R"(, "tp": 4096})"), "parallel.tp: must be <= 1024, got 4096");
  EXPECT_EQ(error_of("{" + base + R"(, "pp": 0})"), "parallel.pp: must be >= 1, got 0");
  EXPECT_EQ(error_of(R"({"dp": 2147483648, "micro_batch_size": 1, "global_batch_size": 8})"),
            "parallel.dp: must be <= 1048576, got 2147483648");
  EXPECT_EQ(error_of(R"({"dp": 1, "micro_batch_size": 1, "global_batch_size": 4294967296})"),
            "parallel.global_batch_size: must be <= 16777216, got 4294967296");
  EXPECT_EQ(error_of("{" + base + R"(, "decoder_first_pipeline_num_layers": 5000})"),
            "parallel.decoder_first_pipeline_num_layers: must be <= 1024, got 5000");
}

}  // namespace
}  // namespace mplan
