// Watchdog: the polling thread and its report.
#include "exec/runner/watchdog.hpp"

#include <chrono>
#include <iostream>

#include "exec/mpi/fatal.hpp"
#include "src/common/error.hpp"

namespace mplan::exec {

Watchdog::Watchdog(double timeout_s, const Progress& progress, Tracer* tracer, std::string who,
                   OnTimeout on_timeout, double poll_s)
    : timeout_s_(timeout_s),
      poll_s_(poll_s),
      progress_(progress),
      tracer_(tracer),
      who_(std::move(who)),
      on_timeout_(std::move(on_timeout)) {
  if (!on_timeout_)
    on_timeout_ = [](const std::string& report) { fatal_abort(__FILE__, __LINE__, report); };
  if (timeout_s_ > 0) thread_ = std::thread([this] { loop(); });
}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::string Watchdog::report(double idle_s) const {
  std::string r = cat(who_, ": no progress for ", static_cast<int64_t>(idle_s),
                      " s (watchdog); the host was at ", progress_.get());
  if (tracer_ != nullptr) {
    TraceSpan stuck;
    size_t finished = 0;
    if (tracer_->first_unfinished(stuck, finished)) {
      r += cat("; the device has not finished ", stuck.action.empty() ? stuck.name : stuck.action);
      if (stuck.peer >= 0) r += cat(" (waiting on pipeline rank ", stuck.peer, ")");
    }
  }
  return r;
}

void Watchdog::loop() {
  using clock = std::chrono::steady_clock;
  uint64_t last_count = progress_.count();
  size_t last_spans = 0;
  auto last_change = clock::now();
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stop_) {
    cv_.wait_for(lock, std::chrono::duration<double>(poll_s_));
    if (stop_) break;
    size_t spans = 0;
    if (tracer_ != nullptr) {
      TraceSpan unused;
      tracer_->first_unfinished(unused, spans);
    }
    const uint64_t c = progress_.count();
    if (c != last_count || spans != last_spans) {
      last_count = c;
      last_spans = spans;
      last_change = clock::now();
      continue;
    }
    const double idle = std::chrono::duration<double>(clock::now() - last_change).count();
    if (idle >= timeout_s_) {
      on_timeout_(report(idle));
      last_change = clock::now();  // a test's handler returns: report again only after a while
    }
  }
}

}  // namespace mplan::exec
