// Ramp-up arithmetic: the legacy calculator's formula in Python floats, its step-schedule form,
// and the way back by trying the increments that divide every step.
#include "src/interop/megatron/megatron_rampup.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <numeric>

#include "src/common/error.hpp"

namespace mplan {

int64_t legacy_rampup_batch(const RampupBatchSize& r, int64_t global_batch, int64_t consumed) {
  // RampupBatchsizeNumMicroBatchesCalculator.update(): past ramp_samples the final batch; before,
  // start + int(consumed / (ramp_samples / num_increments)) * increment, in Python floats.
  if (consumed > r.samples) return global_batch;
  int64_t increments = (global_batch - r.start) / r.increment;
  double per_increment = static_cast<double>(r.samples) / static_cast<double>(increments);
  auto steps = static_cast<int64_t>(static_cast<double>(consumed) / per_increment);
  return r.start + steps * r.increment;
}

std::vector<std::pair<int64_t, int64_t>> rampup_as_steps(const RampupBatchSize& r,
                                                         int64_t global_batch) {
  MPLAN_CHECK(
      r.increment > 0 && global_batch > r.start && (global_batch - r.start) % r.increment == 0,
      "rampup ", r.start, " ", r.increment, " to ", global_batch);
  std::vector<std::pair<int64_t, int64_t>> steps = {{0, legacy_rampup_batch(r, global_batch, 0)}};
  int64_t increments = (global_batch - r.start) / r.increment;
  for (int64_t k = 1; k <= increments; ++k) {
    int64_t target = r.start + k * r.increment;
    // Smallest sample count whose batch reaches `target` (the batch never decreases).
    int64_t lo = 0, hi = r.samples + 1;
    while (lo < hi) {
      int64_t mid = lo + (hi - lo) / 2;
      if (legacy_rampup_batch(r, global_batch, mid) >= target) {
        hi = mid;
      } else {
        lo = mid + 1;
      }
    }
    int64_t batch = legacy_rampup_batch(r, global_batch, lo);
    if (steps.back().first == lo) {
      steps.back().second = batch;
    } else if (batch != steps.back().second) {
      steps.push_back({lo, batch});
    }
  }
  return steps;
}

// Python's int(float(text) * multiplier) for Megatron-LM's "2.4B"-style numbers.
std::optional<int64_t> parse_suffixed(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  double mult = 1;
  if (!s.empty()) {
    char last = s.back();
    if (last == 'T') mult = 1e12;
    if (last == 'B') mult = 1e9;
    if (last == 'M') mult = 1e6;
    if (last == 'K') mult = 1e3;
    if (mult != 1) s.pop_back();
  }
  char* end = nullptr;
  double x = std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size() || !std::isfinite(x)) return std::nullopt;
  return static_cast<int64_t>(std::trunc(x * mult));
}

// The schedule of --step-batch-size-schedule as (threshold in samples, batch), as
// StepBatchsizeNumMicroBatchesCalculator parses it (thresholds in tokens when seq_length is set).
std::vector<std::pair<int64_t, int64_t>> parse_step_schedule(const std::string& text,
                                                             int64_t seq_length) {
  const std::string flag = "--step-batch-size-schedule";
  std::vector<std::pair<int64_t, int64_t>> out;
  std::string s = text;
  std::replace(s.begin(), s.end(), ',', ' ');
  size_t p = 0;
  while (p < s.size()) {
    size_t b = s.find_first_not_of(" \t\n", p);
    if (b == std::string::npos) break;
    size_t e = s.find_first_of(" \t\n", b);
    std::string entry = s.substr(b, e == std::string::npos ? std::string::npos : e - b);
    p = e == std::string::npos ? s.size() : e;
    size_t colon = entry.find(':');
    if (colon == std::string::npos)
      throw Error(cat(flag, ": entry '", entry, "' is not THRESHOLD:BATCH_SIZE"));
    auto th = parse_suffixed(entry.substr(0, colon));
    auto bs = parse_suffixed(entry.substr(colon + 1));
    if (!th || !bs || *th < 0 || *bs < 1)
      throw Error(cat(flag, ": entry '", entry, "' is not THRESHOLD:BATCH_SIZE"));
    out.push_back({*th / seq_length, *bs});
  }
  if (out.empty()) throw Error(cat(flag, ": empty schedule"));
  std::stable_sort(out.begin(), out.end(), [](auto& a, auto& b) { return a.first < b.first; });
  if (out[0].first != 0)
    throw Error(
        cat(flag, ": the first entry must have threshold 0, got ", out[0].first, " samples"));
  for (size_t i = 1; i < out.size(); ++i)
    if (out[i].first <= out[i - 1].first)
      throw Error(cat(flag, ": thresholds must increase, got ", out[i - 1].first, " then ",
                      out[i].first, " samples"));
  return out;
}

// The legacy ramp-up that gives exactly `steps`, when there is one. Its increment divides every
// step (several increments can share a threshold), and its ramp length is the last threshold
// (or one less, where the float division lands just below a whole increment).
std::optional<RampupBatchSize> steps_as_rampup(
    const std::vector<std::pair<int64_t, int64_t>>& steps) {
  if (steps.size() < 2) return std::nullopt;
  int64_t start = steps[0].second;
  int64_t global = steps.back().second;
  int64_t last = steps.back().first;
  int64_t g = 0;
  for (size_t i = 1; i < steps.size(); ++i) {
    int64_t d = steps[i].second - steps[i - 1].second;
    if (d < 1) return std::nullopt;
    g = std::gcd(g, d);
  }
  std::vector<int64_t> divisors;
  for (int64_t d = 1; d * d <= g; ++d)
    if (g % d == 0) divisors.insert(divisors.end(), {d, g / d});
  std::sort(divisors.rbegin(), divisors.rend());
  for (int64_t incr : divisors) {
    for (int64_t samples : {last, last - 1}) {
      if (samples < 1) continue;
      RampupBatchSize r{start, incr, samples};
      if (rampup_as_steps(r, global) == steps) return r;
    }
  }
  return std::nullopt;
}

}  // namespace mplan
