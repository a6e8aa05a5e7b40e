// Enumeration of the search space, loop by loop as candidate_space.hpp lists it. Each loop runs
// over its values in ascending order, so the enumeration index is a stable tie-break.
#include "sim/sweep/candidate_space.hpp"

#include <utility>

#include "src/common/error.hpp"

namespace mplan::sweep {

std::vector<int64_t> divisors(int64_t n) {
  std::vector<int64_t> low, high;
  for (int64_t d = 1; d * d <= n; ++d) {
    if (n % d != 0) continue;
    low.push_back(d);
    if (d != n / d) high.push_back(n / d);
  }
  low.insert(low.end(), high.rbegin(), high.rend());
  return low;
}

UnevenSplit uneven_split(int64_t num_layers, int64_t pp, int64_t vpp) {
  if (pp <= 1 || vpp < 1) return {0, 0, num_layers};
  if (num_layers % pp == 0) return {0, 0, num_layers / pp};
  // Middle stages: ceil(L / pp) rounded up to whole chunks of vpp.
  const int64_t m = ((num_layers + pp - 1) / pp + vpp - 1) / vpp * vpp;
  const int64_t deficit = pp * m - num_layers;  // > 0
  if (deficit % vpp != 0) return {0, 0, m};
  const int64_t chunks = deficit / vpp;  // whole chunks to take off the first and last stage
  const int64_t first = m - vpp * ((chunks + 1) / 2);
  const int64_t last = m - vpp * (chunks / 2);
  if (first < vpp || last < vpp) return {0, 0, m};
  return {first, last, m};
}

namespace {

// Whether pp stages of num_layers layers split into whole chunks of vpp layers.
bool has_split(int64_t num_layers, int64_t pp, int64_t vpp) {
  if (num_layers % pp == 0) return (num_layers / pp) % vpp == 0;
  return uneven_split(num_layers, pp, vpp).first > 0;
}

// `values` unless the axis is fixed, then the fixed value alone.
std::vector<int64_t> axis_values(const std::optional<int64_t>& fixed, std::vector<int64_t> values) {
  if (fixed) return {*fixed};
  return values;
}

template <class T>
bool allowed(const std::optional<T>& fixed, T value) {
  return !fixed || *fixed == value;
}

}  // namespace

std::vector<Candidate> enumerate_candidates(const SpaceInputs& in) {
  MPLAN_CHECK(in.model != nullptr && in.gpus >= 1 && in.gpus_per_node >= 1, "space inputs");
  const ModelSpec& m = *in.model;
  const FixedAxes& f = in.fixed;
  const int64_t n = in.gpus;
  const int64_t layers = m.num_layers;
  std::vector<Candidate> out;

  std::vector<int64_t> tp_default;
  for (int64_t d : divisors(n))
    if (d <= in.gpus_per_node) tp_default.push_back(d);

  for (int64_t tp : axis_values(f.tp, tp_default)) {
    if (n % tp != 0) continue;
    for (int64_t cp : axis_values(f.cp, divisors(n / tp))) {
      if ((n / tp) % cp != 0) continue;
      for (int64_t pp : axis_values(f.pp, divisors(n / (tp * cp)))) {
        if ((n / (tp * cp)) % pp != 0) continue;
        const int64_t dp = n / (tp * cp * pp);
        if (!allowed(f.dp, dp)) continue;
        const UnevenSplit split = uneven_split(layers, pp, 1);

        std::vector<int64_t> ep_values{1};
        if (m.moe) {
          ep_values.clear();
          for (int64_t d : divisors(n / pp))
            if (d <= m.moe->num_experts) ep_values.push_back(d);
        }
        std::vector<int64_t> etp_values{tp};
        if (m.moe && tp != 1) etp_values = {1, tp};

        // vpp >= 2 with a split into whole chunks (even, or uneven per uneven_split).
        std::vector<int64_t> vpps;
        for (int64_t v = 2; v <= split.middle; ++v)
          if (has_split(layers, pp, v)) vpps.push_back(v);
        // (vpp, schedule) pairs.
        std::vector<std::pair<int64_t, ScheduleKind>> scheds;
        if (f.vpp && f.schedule) {
          scheds.push_back({*f.vpp, *f.schedule});
        } else if (f.vpp) {
          scheds.push_back({*f.vpp, *f.vpp > 1 ? ScheduleKind::kInterleaved : ScheduleKind::k1F1B});
          if (*f.vpp == 1 && pp > 1) scheds.push_back({1, ScheduleKind::kZbH1});
        } else if (f.schedule) {
          if (*f.schedule == ScheduleKind::kInterleaved) {
            for (int64_t v : vpps) scheds.push_back({v, ScheduleKind::kInterleaved});
          } else {
            scheds.push_back({1, *f.schedule});
          }
        } else {
          scheds.push_back({1, ScheduleKind::k1F1B});
          if (pp > 1) {
            scheds.push_back({1, ScheduleKind::kZbH1});
            for (int64_t v : vpps) scheds.push_back({v, ScheduleKind::kInterleaved});
          }
        }

        std::vector<int64_t> mbs_values;
        for (int32_t b : kMicroBatchSizes)
          if (b == 1 || b * dp <= in.global_batch_size) mbs_values.push_back(b);
        mbs_values = axis_values(f.micro_batch_size, mbs_values);

        for (int64_t ep : axis_values(f.ep, ep_values)) {
          for (int64_t etp : axis_values(f.etp, etp_values)) {
            const int64_t expert_grid = etp * ep * pp;
            const bool expert_dp_gt1 = n % expert_grid == 0 && n / expert_grid > 1;
            const bool any_dp = dp * cp > 1 || expert_dp_gt1;
            for (const auto& [vpp, sched] : scheds) {
              for (int64_t mbs : mbs_values) {
                for (bool sp : {false, true}) {
                  if (sp && tp == 1) continue;
                  if (!allowed(f.sequence_parallel, sp)) continue;
                  for (Recompute rc : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
                    if (!allowed(f.recompute, rc)) continue;
                    for (bool dist : {false, true}) {
                      if (dist && !any_dp) continue;
                      if (!allowed(f.distributed_optimizer, dist)) continue;
                      Candidate c;
                      c.tp = static_cast<int32_t>(tp);
                      c.cp = static_cast<int32_t>(cp);
                      c.ep = static_cast<int32_t>(ep);
                      c.etp = static_cast<int32_t>(etp);
                      c.pp = static_cast<int32_t>(pp);
                      c.vpp = static_cast<int32_t>(vpp);
                      c.dp = static_cast<int32_t>(dp);
                      c.micro_batch_size = static_cast<int32_t>(mbs);
                      const UnevenSplit sv = vpp > 1 ? uneven_split(layers, pp, vpp) : split;
                      c.first_stage_layers = static_cast<int32_t>(sv.first);
                      c.last_stage_layers = static_cast<int32_t>(sv.last);
                      c.schedule = sched;
                      c.recompute = rc;
                      c.sequence_parallel = sp;
                      c.distributed_optimizer = dist;
                      out.push_back(c);
                    }
                  }
                }
              }
            }
          }
        }
      }
    }
  }
  return out;
}

}  // namespace mplan::sweep
