// Watchdog: reports once a rank makes no progress for the timeout — naming the host's current
// action — and never while progress goes on; off at timeout 0.
#include "exec/runner/watchdog.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace mplan::exec {
namespace {

using namespace std::chrono_literals;

TEST(Watchdog, ReportsAStuckRankWithWhatItWaitsOn) {
  Progress progress;
  progress.set("iteration 3, p2p group: recv-forward 2.0 <- 1");
  std::atomic<int> fired{0};
  std::string report;
  std::mutex m;
  {
    Watchdog w(
        0.2, progress, nullptr, "rank 5 (host h)",
        [&](const std::string& r) {
          std::lock_guard<std::mutex> lock(m);
          report = r;
          ++fired;
        },
        0.02);
    std::this_thread::sleep_for(600ms);
  }
  EXPECT_GE(fired.load(), 1);
  std::lock_guard<std::mutex> lock(m);
  EXPECT_NE(report.find("rank 5 (host h): no progress for "), std::string::npos) << report;
  EXPECT_NE(report.find("recv-forward 2.0 <- 1"), std::string::npos) << report;
}

TEST(Watchdog, QuietWhileProgressGoesOnAndWhenOff) {
  Progress progress;
  std::atomic<int> fired{0};
  {
    Watchdog w(
        0.2, progress, nullptr, "rank 0", [&](const std::string&) { ++fired; }, 0.02);
    for (int i = 0; i < 30; ++i) {
      progress.set("action " + std::to_string(i));
      std::this_thread::sleep_for(20ms);
    }
  }
  EXPECT_EQ(fired.load(), 0);
  {
    Watchdog off(
        0, progress, nullptr, "rank 0", [&](const std::string&) { ++fired; }, 0.02);
    std::this_thread::sleep_for(100ms);
  }
  EXPECT_EQ(fired.load(), 0);
}

}  // namespace
}  // namespace mplan::exec
