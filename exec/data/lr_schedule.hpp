// LrSchedule: the learning rate of Megatron-LM's OptimizerParamScheduler
// (megatron/core/optimizer_param_scheduler.py), counted in samples as Megatron counts it for
// iteration-based training (megatron/training/training.py get_optimizer_param_scheduler):
//   warmup_steps = lr_warmup_fraction · decay_steps, or lr_warmup_iters · G;
//   decay_steps = (lr_decay_iters or train_iters) · G            (G: global batch size)
//   lr(n) = init + (max - init) · n / warmup_steps                          n <= warmup_steps
//         = max                                                             constant style
//         = min                                                             n > decay_steps
//         = max(min, max · sqrt(max(warmup, 1)) / sqrt(max(n, 1)))          inverse-square-root
//         = min + (max - min) · c(r), r = (n - warmup) / (decay - warmup)   otherwise, with
//           c = 1 - r (linear) or 0.5 · (cos(pi · r) + 1) (cosine).
// Invariant: a pure function of its fields; the constructor checks Megatron's assertions.
#pragma once

#include <cstdint>
#include <optional>

#include "src/plan/training_config.hpp"

namespace mplan::exec {

struct LrSchedule {
  double max_lr = 0, min_lr = 0, init_lr = 0;  // --lr, --min-lr, --lr-warmup-init
  double warmup_steps = 0;                     // samples (a fraction makes it non-integer)
  double decay_steps = 1;                      // samples
  LrDecayStyle style = LrDecayStyle::kLinear;
  int64_t global_batch_size = 1;

  // From Megatron's iteration-based arguments; Error naming the field on a broken rule
  // (min_lr <= lr, lr_warmup_init <= lr, decay iterations > warmup iterations, ...).
  static LrSchedule from_iterations(double lr, double min_lr, double lr_warmup_init,
                                    LrDecayStyle style, int64_t train_iters,
                                    std::optional<int64_t> lr_decay_iters, int64_t lr_warmup_iters,
                                    std::optional<double> lr_warmup_fraction,
                                    int64_t global_batch_size);
  // The same from a plan's training section (train_iters must be set, or given here).
  static LrSchedule from_training(const TrainingConfig& t, int64_t global_batch_size,
                                  int64_t train_iters_override = 0);

  // Megatron's get_lr() after `num_steps` samples have been consumed.
  double at_samples(double num_steps) const;
  // The learning rate of the optimizer step of 0-based iteration `iteration` (Megatron's
  // args.iteration before the step): at_samples(iteration · G). Megatron's log line for
  // iteration k (1-based, printed after the step) shows lr(k).
  double lr(int64_t iteration) const {
    return at_samples(static_cast<double>(iteration) * static_cast<double>(global_batch_size));
  }
};

}  // namespace mplan::exec
