// The text Megatron-LM's pretrain() prints, formatted as it formats it (training.py
// training_log and evaluate_and_print_results), so logs read and parse like Megatron's: one line
// per log interval with the iteration, consumed samples, elapsed ms per iteration, throughput,
// learning rate, global batch size, the interval's mean lm loss, grad norm and the skipped / nan
// iteration counts — plus tokens/s/GPU and MFU — and the dashed validation block.
#pragma once

#include <cstdint>
#include <string>

namespace mplan::exec {

struct LogInterval {
  int64_t iteration = 0;    // the last of the interval (1-based, as Megatron counts)
  int64_t train_iters = 0;  // the run's length
  int64_t consumed_samples = 0;
  double ms_per_iteration = 0;      // the interval's wall time / its iterations
  double tflops_per_gpu = 0;        // Megatron's FLOP count / time / GPUs
  double learning_rate = 0;         // after the interval's last step (Megatron's param group lr)
  int64_t global_batch_size = 0;    // of the last iteration (ramp-up changes it)
  double lm_loss = 0;               // mean over the interval's iterations
  double grad_norm = 0;             // of the last iteration
  int64_t skipped_iterations = 0;   // in the interval
  int64_t nan_iterations = 0;       // in the interval
  double tokens_per_s_per_gpu = 0;  // mplan's additions
  double mfu = 0;                   // fraction of the GPU's peak bf16 rate
};

// " [YYYY-MM-DD HH:MM:SS] iteration       10/     100 | consumed samples: ... |" as Megatron.
std::string format_log_line(const LogInterval& l);

// Megatron's validation block: a dashed line, " validation loss at PREFIX | lm loss value: L |
// lm loss PPL: exp(min(20, L)) | ", a dashed line (three lines, newline-terminated). PREFIX is
// "iteration 200", "the end of training for val data" or "... for test data".
std::string format_validation(const std::string& prefix, double loss);

// exp(min(20, loss)), Megatron's perplexity.
double perplexity(double loss);

}  // namespace mplan::exec
