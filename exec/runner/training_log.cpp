// Megatron's log formats, with printf's %E / %d widths in place of Python's format specs.
#include "exec/runner/training_log.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>

namespace mplan::exec {

namespace {

std::string fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

std::string fmt_int(const char* format, int64_t v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, static_cast<long long>(v));
  return buf;
}

}  // namespace

double perplexity(double loss) { return std::exp(std::min(20.0, loss)); }

std::string format_log_line(const LogInterval& l) {
  char when[32];
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  std::strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", &tm);
  std::string s = std::string(" [") + when + "]";
  s += " iteration " + fmt_int("%8lld", l.iteration) + "/" + fmt_int("%8lld", l.train_iters) + " |";
  s += " consumed samples: " + fmt_int("%12lld", l.consumed_samples) + " |";
  s += " elapsed time per iteration (ms): " + fmt("%.1f", l.ms_per_iteration) + " |";
  s += " throughput per GPU (TFLOP/s/GPU): " + fmt("%.1f", l.tflops_per_gpu) + " |";
  s += " learning rate: " + fmt("%.6E", l.learning_rate) + " |";
  s += " global batch size: " + fmt_int("%5lld", l.global_batch_size) + " |";
  s += " lm loss: " + fmt("%.6E", l.lm_loss) + " |";
  s += " loss scale: 1.0 |";  // bf16 and fp32 need none (Megatron prints 1.0)
  s += " grad norm: " + fmt("%.3f", l.grad_norm) + " |";
  s += " number of skipped iterations: " + fmt_int("%3lld", l.skipped_iterations) + " |";
  s += " number of nan iterations: " + fmt_int("%3lld", l.nan_iterations) + " |";
  s += " tokens/s/GPU: " + fmt("%.0f", l.tokens_per_s_per_gpu) + " |";
  s += " MFU: " + fmt("%.1f", 100.0 * l.mfu) + "% |";
  return s;
}

std::string format_validation(const std::string& prefix, double loss) {
  std::string s = " validation loss at " + prefix + " | ";
  s += "lm loss value: " + fmt("%.6E", loss) + " | ";
  s += "lm loss PPL: " + fmt("%.6E", perplexity(loss)) + " | ";
  const std::string dashes(s.size() + 1, '-');
  return dashes + "\n" + s + "\n" + dashes + "\n";
}

}  // namespace mplan::exec
