// The text timeline: an exact small picture, wrapping into blocks, chunk labels, colour.
#include "src/schedule/timeline_text.hpp"

#include <gtest/gtest.h>

#include "src/common/error.hpp"
#include "tests/src/schedule/schedule_test_util.hpp"

#include <sstream>
#include <string>
#include <vector>

namespace mplan {
namespace {

using test::make;

TEST(TimelineText, OneFOneBPp2M2) {
  // F 1, B 2; 3 columns per unit (label "F0" + a separator). Rank 0 idles 2..4 and 6..7,
  // rank 1 idles 0..1 and 7..9 (times from the timing pass, see timeline_test).
  const Schedule s = make(ScheduleKind::k1F1B, 2, 2);
  EXPECT_EQ(render_timeline_text(s, time_schedule(s, {1, 2, 0}), {}),
            "time   0  1  2  3  4  5  6  7  8\n"
            "rank 0 F0 F1 ......B0    ...B1    \n"
            "rank 1 ...F0 B0    F1 B1    ......\n"
            "F<m> forward, B backward of micro-batch m; '.' idle; 0.333 time units per column\n");
}

TEST(TimelineText, ChunksAndSplitBackward) {
  const Schedule s = make(ScheduleKind::kInterleaved, 2, 2, 2);
  const std::string text = render_timeline_text(s, time_schedule(s, {1, 2, 0}), {});
  EXPECT_NE(text.find("rank 0 F0.0 F1.0 F0.1 F1.1 "), std::string::npos) << text;
  EXPECT_NE(text.find("F<m>.<c> forward"), std::string::npos);
  const Schedule z = make(ScheduleKind::kZbH1, 2, 2);
  const std::string zt = render_timeline_text(z, time_schedule(z, {1, 1, 1}), {});
  EXPECT_NE(zt.find("rank 1 ...F0 B0 F1 B1 W0 W1 "), std::string::npos) << zt;
  EXPECT_NE(zt.find("W weight gradient"), std::string::npos);
}

TEST(TimelineText, WrapsIntoBlocksOfTheWidth) {
  const Schedule s = make(ScheduleKind::k1F1B, 4, 16);
  const std::string text = render_timeline_text(s, time_schedule(s, {1, 2, 0}), {60, false});
  std::istringstream in(text);
  std::string line;
  int rows = 0, rulers = 0;
  while (std::getline(in, line)) {
    if (line.rfind("rank ", 0) == 0) {
      ++rows;
      EXPECT_LE(line.size(), 60u) << line;
    }
    if (line.rfind("time", 0) == 0) ++rulers;
  }
  // (16 + 3) * 3 units * 4 columns (labels up to "F15") = 228 columns in blocks of 53.
  EXPECT_EQ(rulers, 5);
  EXPECT_EQ(rows, 5 * 4);
  for (int mb = 0; mb < 16; ++mb) EXPECT_NE(text.find(cat("B", mb)), std::string::npos) << mb;
}

// The labels of rank r's lines, in order, across all blocks, a label repeated at the start of the
// next block counted once.
std::vector<std::string> labels_of_rank(const std::string& text, int64_t r) {
  std::istringstream in(text);
  std::string line;
  std::vector<std::string> out;
  const std::string prefix = cat("rank ", r, " ");
  while (std::getline(in, line)) {
    if (line.rfind(prefix, 0) != 0) continue;
    std::istringstream words(line.substr(prefix.size()));
    std::string w;
    while (words >> w) {
      while (!w.empty() && w.front() == '.') w.erase(0, 1);  // idle columns
      if (w.empty()) continue;
      if (out.empty() || out.back() != w) out.push_back(w);
    }
  }
  return out;
}

TEST(TimelineText, WrappedBlocksNeverSplitALabel) {
  for (const Schedule& s : {make(ScheduleKind::kInterleaved, 4, 16, 2),
                            make(ScheduleKind::k1F1B, 4, 16), make(ScheduleKind::kZbH1, 3, 12)}) {
    for (int width : {40, 47, 60, 73}) {
      const std::string text = render_timeline_text(s, time_schedule(s, {1, 2, 1}), {width, false});
      for (int64_t r = 0; r < s.pp(); ++r) {
        std::vector<std::string> expected;
        for (int64_t i = s.rank_begin[r]; i < s.rank_begin[r + 1]; ++i)
          if (is_compute(s.actions[i].kind)) expected.push_back(cell_label(s, s.actions[i]));
        // Every word shown is a whole label of this rank, in schedule order ("F4." at a line
        // end, the rest on the next line, would be neither).
        size_t k = 0;
        for (const std::string& w : labels_of_rank(text, r)) {
          while (k < expected.size() && expected[k] != w) ++k;
          ASSERT_LT(k, expected.size()) << "rank " << r << " width " << width << ": '" << w
                                        << "' is not a whole label in order\n"
                                        << text;
        }
      }
    }
  }
}

TEST(TimelineText, Colour) {
  const Schedule s = make(ScheduleKind::k1F1B, 2, 2);
  const std::string text = render_timeline_text(s, time_schedule(s, {1, 2, 0}), {120, true});
  EXPECT_NE(text.find("\x1b[44;97mF0 F1 "), std::string::npos);  // forwards on blue
  EXPECT_NE(text.find("\x1b[42;30mB0    "), std::string::npos);  // backwards on green
  EXPECT_NE(text.find("\x1b[0m\n"), std::string::npos);          // reset at each line end
}

}  // namespace
}  // namespace mplan
