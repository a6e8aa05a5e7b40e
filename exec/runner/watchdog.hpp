// Watchdog: a thread that ends the job when a rank makes no progress for `timeout` seconds — a
// stuck point-to-point transfer or collective is a bug, and a hang helps nobody. Progress is any
// change of the host's Progress counter (every schedule action, every end-of-step phase) or of
// the number of spans the device has finished. The report names the rank, the host, what the host
// was doing and the first traced action the device has not finished (a p2p action names the peer
// it waits on); then `on_timeout` runs (by default: print and abort the whole job).
// Invariant: stops and joins its thread on destruction; checks at most every `poll` seconds.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "exec/runner/pipeline_runner.hpp"
#include "exec/tracer.hpp"

namespace mplan::exec {

class Watchdog {
 public:
  using OnTimeout = std::function<void(const std::string& report)>;
  // timeout_s <= 0: disabled. `tracer` may be null.
  Watchdog(double timeout_s, const Progress& progress, Tracer* tracer, std::string who,
           OnTimeout on_timeout = {}, double poll_s = 1.0);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // The report the watchdog would print now.
  std::string report(double idle_s) const;

 private:
  void loop();

  double timeout_s_, poll_s_;
  const Progress& progress_;
  Tracer* tracer_;
  std::string who_;
  OnTimeout on_timeout_;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace mplan::exec
