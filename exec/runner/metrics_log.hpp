// MetricsLog: what Megatron-LM writes to TensorBoard under --tensorboard-dir, for mplan as JSON
// lines (Debian packages no TensorBoard event-file writer for C++): DIR/metrics.jsonl gets one
// object per training iteration (iteration, consumed samples, lm loss, learning rate, grad norm,
// iteration time, tokens/s/GPU) and one per evaluation (split, lm loss, perplexity), appended
// across resumed runs; DIR/curves.svg plots the training and validation loss and the learning
// rate against the iteration, redrawn from the whole file. Invariant: each line is flushed when
// written, so a killed run leaves every finished line.
#pragma once

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

namespace mplan::exec {

struct IterationMetrics {
  int64_t iteration = 0;
  int64_t consumed_samples = 0;
  double lm_loss = 0;
  double learning_rate = 0;
  double grad_norm = 0;
  double iteration_ms = 0;
  double tokens_per_s_per_gpu = 0;
  int64_t global_batch_size = 0;
};

class MetricsLog {
 public:
  // Creates DIR when absent; Error naming --tensorboard-dir when it cannot be written.
  explicit MetricsLog(std::string dir);
  void iteration(const IterationMetrics& m);
  void evaluation(int64_t iteration, const std::string& split, double loss);
  // Redraws DIR/curves.svg from DIR/metrics.jsonl.
  void write_plot();
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
  std::ofstream out_;
};

// A curve of (iteration, value) points.
struct Curve {
  std::string label;
  std::string color;
  std::vector<std::pair<double, double>> points;
  bool markers = false;  // points drawn as dots (evaluations) rather than a line
};
// Two stacked panels sharing the iteration axis: `loss` curves above, `lr` curves below.
std::string render_curves_svg(const std::vector<Curve>& loss, const std::vector<Curve>& lr);

}  // namespace mplan::exec
