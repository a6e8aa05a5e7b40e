// Megatron-LM's micro-batch calculators (ConstantNumMicroBatchesCalculator and
// RampupBatchsizeNumMicroBatchesCalculator, megatron/core/num_microbatches_calculator.py, as of
// the last release that ships the ramp-up one), rewritten as a pure function of consumed samples.
#include "src/batch/microbatch_calculator.hpp"

#include <limits>

#include "src/common/error.hpp"

namespace mplan {

const char* BatchFieldNames::name(BatchField f) const {
  switch (f) {
    case BatchField::kGlobalBatch:
      return global_batch;
    case BatchField::kMicroBatch:
      return micro_batch;
    case BatchField::kDataParallel:
      return data_parallel;
    case BatchField::kRampup:
      return rampup;
    case BatchField::kConsumedSamples:
      return consumed_samples;
  }
  return "?";
}

namespace {

template <class... Args>
std::optional<BatchRuleError> broken(BatchField f, const Args&... args) {
  return BatchRuleError{f, cat(args...)};
}

}  // namespace

std::optional<BatchRuleError> check_microbatch_spec(const MicrobatchSpec& s) {
  // megatron/training/arguments.py: assert args.micro_batch_size > 0; data parallel size is
  // world / model size >= 1; assert args.global_batch_size > 0.
  if (s.micro_batch_size < 1)
    return broken(BatchField::kMicroBatch, "micro batch size must be > 0, got ",
                  s.micro_batch_size);
  if (s.data_parallel_size < 1)
    return broken(BatchField::kDataParallel, "data parallel size must be >= 1, got ",
                  s.data_parallel_size);
  if (s.micro_batch_size > std::numeric_limits<int64_t>::max() / s.data_parallel_size)
    return broken(BatchField::kMicroBatch, "micro batch size (", s.micro_batch_size,
                  ") times data parallel size (", s.data_parallel_size, ") is out of range");
  const int64_t md = s.micro_batch_size * s.data_parallel_size;

  if (!s.rampup) {
    if (s.global_batch_size < 1)
      return broken(BatchField::kGlobalBatch, "global batch size must be > 0, got ",
                    s.global_batch_size);
    if (!s.decrease_batch_size_if_needed && s.global_batch_size % md != 0)
      return broken(BatchField::kGlobalBatch, "global batch size (", s.global_batch_size,
                    ") is not divisible by micro batch size (", s.micro_batch_size,
                    ") times data parallel size (", s.data_parallel_size, ")");
    if (s.global_batch_size / md < 1)  // only reachable when decreasing
      return broken(BatchField::kGlobalBatch, "number of microbatches should be at least 1, got ",
                    s.global_batch_size / md, ". (global batch size ", s.global_batch_size,
                    " < micro batch size ", s.micro_batch_size, " x data parallel size ",
                    s.data_parallel_size, ")");
    return std::nullopt;
  }

  // RampupBatchsizeNumMicroBatchesCalculator.__init__, in its order.
  const RampupBatchSize& r = *s.rampup;
  if (s.global_batch_size < 1)
    return broken(BatchField::kGlobalBatch, "global batch size should be positive, got ",
                  s.global_batch_size, ".");
  if (r.start < 1)
    return broken(BatchField::kRampup, "start batch size should be positive, got ", r.start, ".");
  if (r.increment < 1)
    return broken(BatchField::kRampup, "batch size increment should be positive, got ", r.increment,
                  ".");
  if (r.samples < 0)
    return broken(BatchField::kRampup, "ramp-up samples should be non-negative, got ", r.samples,
                  ".");
  const int64_t diff = s.global_batch_size - r.start;
  if (diff < 0)
    return broken(BatchField::kRampup,
                  "expected global batch size to be greater than or equal to start batch size, "
                  "got ",
                  s.global_batch_size, " and ", r.start);
  if (diff % r.increment != 0)
    return broken(BatchField::kRampup, "expected global batch size interval (", diff,
                  ") to be divisible by global batch size increment (", r.increment, ")");
  // Megatron computes ramp_samples / num_increments and then consumed / that quotient; both
  // raise ZeroDivisionError in Python when the divisor is 0, so it cannot start such a run.
  if (diff == 0)
    return broken(BatchField::kRampup, "start batch size (", r.start,
                  ") equals the global batch size: a ramp-up needs at least one increment "
                  "(Megatron divides the ramp-up samples by the number of increments, here 0)");
  if (r.samples == 0)
    return broken(BatchField::kRampup,
                  "ramp-up samples must be > 0 (Megatron divides consumed samples by ramp-up "
                  "samples / increments, here 0)");
  return std::nullopt;
}

std::optional<int64_t> microbatches_if_valid(int64_t global_batch_size, int64_t micro_batch_size,
                                             int64_t data_parallel_size) {
  MicrobatchSpec s{global_batch_size, micro_batch_size, data_parallel_size, std::nullopt, false};
  if (check_microbatch_spec(s)) return std::nullopt;
  return global_batch_size / (micro_batch_size * data_parallel_size);
}

int64_t num_microbatches(int64_t global_batch_size, int64_t micro_batch_size,
                         int64_t data_parallel_size, const BatchFieldNames& names) {
  MicrobatchSpec s{global_batch_size, micro_batch_size, data_parallel_size, std::nullopt, false};
  if (auto e = check_microbatch_spec(s)) throw Error(cat(names.name(e->field), ": ", e->message));
  return global_batch_size / (micro_batch_size * data_parallel_size);
}

MicrobatchCalculator::MicrobatchCalculator(const MicrobatchSpec& spec, const BatchFieldNames& names)
    : spec_(spec), names_(names) {
  if (auto e = check_microbatch_spec(spec_))
    throw Error(cat(names_.name(e->field), ": ", e->message));
  if (spec_.rampup) {
    // Python: self.ramup_samples / num_increments, a correctly rounded double division.
    int64_t num_increments =
        (spec_.global_batch_size - spec_.rampup->start) / spec_.rampup->increment;
    rampup_samples_per_increment_ =
        static_cast<double>(spec_.rampup->samples) / static_cast<double>(num_increments);
  }
}

int64_t MicrobatchCalculator::global_batch_at(int64_t consumed_samples) const {
  if (!spec_.rampup || consumed_samples > spec_.rampup->samples) return spec_.global_batch_size;
  // Python: steps = int(consumed_samples / self.rampup_samples_per_increment): a double
  // division truncated toward zero.
  auto steps =
      static_cast<int64_t>(static_cast<double>(consumed_samples) / rampup_samples_per_increment_);
  int64_t gbs = spec_.rampup->start + steps * spec_.rampup->increment;
  MPLAN_CHECK(gbs <= spec_.global_batch_size, "ramp-up overshoots: ", gbs, " > ",
              spec_.global_batch_size);
  return gbs;
}

BatchState MicrobatchCalculator::state_for(int64_t consumed_samples,
                                           int64_t global_batch_size) const {
  const int64_t md = micro_times_dp();
  BatchState st;
  st.consumed_samples = consumed_samples;
  st.global_batch_size = global_batch_size;
  st.running_global_batch_size = global_batch_size;
  if (spec_.decrease_batch_size_if_needed && global_batch_size % md != 0)
    st.running_global_batch_size = global_batch_size / md * md;  // Megatron's _round()
  st.num_microbatches = st.running_global_batch_size / md;
  return st;
}

BatchState MicrobatchCalculator::at(int64_t consumed_samples, bool consistency_check) const {
  if (consumed_samples < 0)
    throw Error(cat(names_.consumed_samples, ": must be >= 0, got ", consumed_samples));
  const int64_t gbs = global_batch_at(consumed_samples);
  const int64_t md = micro_times_dp();
  if (consistency_check && !spec_.decrease_batch_size_if_needed && gbs % md != 0)
    throw Error(cat(gbs == spec_.global_batch_size ? names_.global_batch : names_.rampup,
                    ": current global batch size (", gbs,
                    ") is not divisible by micro-batch-size (", spec_.micro_batch_size,
                    ") times data parallel size (", spec_.data_parallel_size, ") at ",
                    consumed_samples, " consumed samples"));
  BatchState st = state_for(consumed_samples, gbs);
  // Megatron's ramp-up calculator has no such assert and would run zero micro-batches; the
  // constant one asserts it. mplan refuses both.
  if (st.num_microbatches < 1)
    throw Error(cat(spec_.rampup ? names_.rampup : names_.global_batch,
                    ": number of microbatches should be at least 1, got 0 (global batch size ", gbs,
                    " < micro batch size ", spec_.micro_batch_size, " x data parallel size ",
                    spec_.data_parallel_size, " at ", consumed_samples, " consumed samples)"));
  return st;
}

std::optional<int64_t> MicrobatchCalculator::next_change(int64_t from) const {
  MPLAN_CHECK(from >= 0, "from=", from);
  const int64_t gbs = global_batch_at(from);
  if (gbs == spec_.global_batch_size) return std::nullopt;
  // global_batch_at() never decreases with consumed samples, and is the final size past the
  // ramp: binary search for the first count in (from, samples + 1] that changes it.
  int64_t lo = from, hi = spec_.rampup->samples + 1;  // at(lo) == gbs, at(hi) != gbs
  while (hi - lo > 1) {
    int64_t mid = lo + (hi - lo) / 2;
    if (global_batch_at(mid) == gbs)
      lo = mid;
    else
      hi = mid;
  }
  return hi;
}

template <class Fn>
void MicrobatchCalculator::walk_steps(Fn&& fn) const {
  int64_t consumed = 0, iteration = 0;
  while (true) {
    const int64_t gbs = global_batch_at(consumed);
    std::optional<int64_t> change = next_change(consumed);
    // Iterations at this size: until consumed + k * gbs reaches the next change.
    int64_t k = change ? (*change - consumed + gbs - 1) / gbs : 0;
    if (!fn(consumed, gbs, iteration, k) || !change) return;
    consumed += k * gbs;
    iteration += k;
  }
}

std::vector<RampStep> MicrobatchCalculator::ramp_steps() const {
  std::vector<RampStep> steps;
  walk_steps([&](int64_t consumed, int64_t gbs, int64_t iteration, int64_t iterations) {
    steps.push_back({iteration, iterations, state_for(consumed, gbs)});
    return true;
  });
  return steps;
}

std::optional<BatchState> MicrobatchCalculator::first_inconsistent_step() const {
  if (spec_.decrease_batch_size_if_needed) return std::nullopt;
  const int64_t md = micro_times_dp();
  if (!spec_.rampup)
    return spec_.global_batch_size % md == 0
               ? std::nullopt
               : std::optional<BatchState>(state_for(0, spec_.global_batch_size));
  // Every step is consistent when start, increment and the final size are multiples of M x D.
  if (spec_.rampup->start % md == 0 && spec_.rampup->increment % md == 0 &&
      spec_.global_batch_size % md == 0)
    return std::nullopt;
  std::optional<BatchState> bad;
  walk_steps([&](int64_t consumed, int64_t gbs, int64_t, int64_t) {
    if (gbs % md == 0) return true;
    bad = state_for(consumed, gbs);
    return false;
  });
  return bad;
}

}  // namespace mplan
