// LrSchedule: Megatron's get_lr, and its construction from the iteration-based arguments.
#include "exec/data/lr_schedule.hpp"

#include <cmath>
#include <numbers>

#include "src/common/error.hpp"

namespace mplan::exec {

LrSchedule LrSchedule::from_iterations(double lr, double min_lr, double lr_warmup_init,
                                       LrDecayStyle style, int64_t train_iters,
                                       std::optional<int64_t> lr_decay_iters,
                                       int64_t lr_warmup_iters,
                                       std::optional<double> lr_warmup_fraction,
                                       int64_t global_batch_size) {
  if (global_batch_size < 1)
    throw Error(cat("--global-batch-size: must be >= 1, got ", global_batch_size));
  if (train_iters < 1) throw Error(cat("--train-iters: must be >= 1, got ", train_iters));
  if (min_lr < 0) throw Error(cat("--min-lr: must be >= 0, got ", min_lr));
  if (lr < min_lr) throw Error(cat("--min-lr: must be <= --lr (", lr, "), got ", min_lr));
  if (lr_warmup_init > lr)
    throw Error(cat("--lr-warmup-init: must be <= --lr (", lr, "), got ", lr_warmup_init));
  if (lr_warmup_fraction && lr_warmup_iters != 0)
    throw Error(
        "--lr-warmup-fraction: can only specify one of lr-warmup-fraction and "
        "lr-warmup-iters");
  const int64_t decay_iters = lr_decay_iters.value_or(train_iters);
  if (decay_iters < 1) throw Error(cat("--lr-decay-iters: must be >= 1, got ", decay_iters));
  LrSchedule s;
  s.max_lr = lr;
  s.min_lr = min_lr;
  s.init_lr = lr_warmup_init;
  s.style = style;
  s.global_batch_size = global_batch_size;
  s.decay_steps = static_cast<double>(decay_iters) * static_cast<double>(global_batch_size);
  s.warmup_steps = lr_warmup_fraction ? *lr_warmup_fraction * s.decay_steps
                                      : static_cast<double>(lr_warmup_iters) *
                                            static_cast<double>(global_batch_size);
  if (s.warmup_steps < 0)
    throw Error(cat("--lr-warmup-", lr_warmup_fraction ? "fraction" : "iters", ": must be >= 0"));
  if (!(s.warmup_steps < s.decay_steps))
    throw Error(cat(lr_warmup_fraction ? "--lr-warmup-fraction" : "--lr-warmup-iters", ": warmup (",
                    s.warmup_steps, " samples) must end before the decay does (", s.decay_steps,
                    " samples, --lr-decay-iters)"));
  return s;
}

LrSchedule LrSchedule::from_training(const TrainingConfig& t, int64_t global_batch_size,
                                     int64_t train_iters_override) {
  const int64_t iters = train_iters_override > 0 ? train_iters_override : t.train_iters;
  return from_iterations(t.lr, t.min_lr, t.lr_warmup_init, t.lr_decay_style, iters,
                         t.lr_decay_iters, t.lr_warmup_iters, t.lr_warmup_fraction,
                         global_batch_size);
}

double LrSchedule::at_samples(double num_steps) const {
  if (warmup_steps > 0 && num_steps <= warmup_steps)
    return init_lr + (max_lr - init_lr) * num_steps / warmup_steps;
  if (style == LrDecayStyle::kConstant) return max_lr;
  if (num_steps > decay_steps) return min_lr;
  if (style == LrDecayStyle::kInverseSquareRoot) {
    const double warmup = std::max(warmup_steps, 1.0);
    const double steps = std::max(num_steps, 1.0);
    return std::max(min_lr, max_lr * std::sqrt(warmup) / std::sqrt(steps));
  }
  const double ratio = (num_steps - warmup_steps) / (decay_steps - warmup_steps);
  MPLAN_CHECK(ratio >= 0.0 && ratio <= 1.0, "decay ratio ", ratio);
  const double coeff = style == LrDecayStyle::kLinear
                           ? 1.0 - ratio
                           : 0.5 * (std::cos(std::numbers::pi * ratio) + 1.0);
  return min_lr + coeff * (max_lr - min_lr);
}

}  // namespace mplan::exec
