// StepClock: with MPLAN_STEP_CLOCK set, one line a training step on stderr with the host's times
// (ms from the step's start) at the points the step names, and the time since the previous step
// returned: where the host waits, and whether it ever keeps the GPU waiting.
#pragma once

#include <chrono>
#include <cstdio>
#include <string>

#include "exec/env_flag.hpp"

namespace mplan::exec {

class StepClock {
 public:
  StepClock() : on_(env_flag("MPLAN_STEP_CLOCK")), t0_(Clock::now()) {
    if (on_ && last_end().time_since_epoch().count() != 0)
      line_ += " " + fixed2(ms(last_end(), t0_)) + " ms outside;";
  }
  StepClock(const StepClock&) = delete;
  StepClock& operator=(const StepClock&) = delete;
  // A point of the step, named `what`.
  void at(const char* what) {
    if (on_) line_ += std::string(" ") + what + " " + fixed2(ms(t0_, Clock::now()));
  }
  ~StepClock() {
    if (!on_) return;
    std::fprintf(stderr, "%s\n", line_.c_str());
    last_end() = Clock::now();
  }

 private:
  using Clock = std::chrono::steady_clock;
  static Clock::time_point& last_end() {
    static Clock::time_point t{};
    return t;
  }
  static double ms(Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double, std::milli>(b - a).count();
  }
  static std::string fixed2(double v) {
    char b[32];
    std::snprintf(b, sizeof b, "%.2f", v);
    return b;
  }
  bool on_;
  Clock::time_point t0_;
  std::string line_ = "step clock:";
};

}  // namespace mplan::exec
