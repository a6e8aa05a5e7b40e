// Enumeration of the search space as candidate_space.hpp lists it: the layouts (tp, cp, pp, dp),
// then for each the product of its other axes, the last varying fastest. Each axis runs over its
// values in ascending order, so the enumeration index is a stable tie-break.
#include "sim/sweep/candidate_space.hpp"

#include <algorithm>
#include <array>
#include <optional>
#include <utility>

#include "sim/sweep/stack_rules.hpp"
#include "src/common/error.hpp"
#include "src/model/model_stats.hpp"
#include "src/plan/validate.hpp"

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

double output_layer_weight(const ModelSpec& m) {
  // Forward FLOPs per token: the output GEMM 2·h·V against a layer's 2·(active parameters) plus
  // causal attention's QK^T and AV, 2·s·(heads·kv_channels) (sim/cost prices both exactly).
  double layers = 0;
  for (int64_t i = 0; i < m.num_layers; ++i) {
    const LayerParams l = layer_params(m, i);
    layers += 2.0 * static_cast<double>(l.active()) +
              2.0 * static_cast<double>(m.seq_length * m.num_attention_heads * m.kv_channels);
  }
  if (layers <= 0) return 0;
  const double output = 2.0 * static_cast<double>(m.hidden_size * m.padded_vocab_size(1));
  return output / (layers / static_cast<double>(m.num_layers));
}

UnevenSplit balanced_split(int64_t num_layers, int64_t pp, int64_t vpp, double first_weight,
                           double last_weight) {
  if (pp <= 1 || vpp < 1) return {0, 0, num_layers};
  const int64_t middle_stages = pp - 2;
  UnevenSplit best{0, 0, 0};
  double best_load = 0;
  auto consider = [&](int64_t first, int64_t last, int64_t middle) {
    if (first < vpp || last < vpp || first % vpp != 0 || last % vpp != 0) return;
    const double load =
        std::max({static_cast<double>(first) + first_weight, static_cast<double>(middle),
                  static_cast<double>(last) + last_weight});
    if (best.first == 0 || load < best_load - 1e-9) {
      best = {first, last, middle};
      best_load = load;
    }
  };
  // Each middle size (whole chunks of vpp layers); the rest goes to the two ends, split so that
  // their loads are as equal as whole chunks allow.
  for (int64_t middle = middle_stages > 0 ? vpp : 0; middle <= num_layers;
       middle += std::max<int64_t>(vpp, 1)) {
    const int64_t ends = num_layers - middle_stages * middle;
    if (ends < 2 * vpp) break;
    const double ideal = (static_cast<double>(ends) + last_weight - first_weight) / 2;
    const int64_t low =
        std::clamp<int64_t>(static_cast<int64_t>(ideal) / vpp * vpp, vpp, ends - vpp);
    for (int64_t first : {low, low + vpp}) consider(first, ends - first, middle);
    if (middle_stages == 0) break;
  }
  return best;
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

// The values of `all` a fixed axis allows, in their order.
template <class T>
std::vector<T> allowed_values(const std::optional<T>& fixed, std::initializer_list<T> all) {
  std::vector<T> out;
  for (T v : all)
    if (allowed(fixed, v)) out.push_back(v);
  return out;
}

// tp · cp · pp · dp = N: the layout of the GPUs, before the other axes.
struct Layout {
  int64_t tp = 1, cp = 1, pp = 1, dp = 1;  // dp: the GPUs not yet given to an axis
};

// Splits each layout's remaining GPUs (its dp) by every value of one axis that divides them.
std::vector<Layout> split_axis(const std::vector<Layout>& in, int64_t Layout::*axis,
                               const std::optional<int64_t>& fixed,
                               const std::vector<int64_t>* defaults) {
  std::vector<Layout> out;
  for (const Layout& l : in) {
    for (int64_t v : axis_values(fixed, defaults ? *defaults : divisors(l.dp))) {
      if (v < 1 || l.dp % v != 0) continue;
      Layout next = l;
      next.*axis = v;
      next.dp = l.dp / v;
      out.push_back(next);
    }
  }
  return out;
}

// Every layout in loop order tp, cp, pp (dp = N / (tp·cp·pp)).
std::vector<Layout> layouts(const SpaceInputs& in) {
  const FixedAxes& f = in.fixed;
  std::vector<int64_t> tp_default;
  for (int64_t d : divisors(in.gpus))
    if (d <= in.gpus_per_node) tp_default.push_back(d);
  std::vector<Layout> ls = split_axis({Layout{1, 1, 1, in.gpus}}, &Layout::tp, f.tp, &tp_default);
  ls = split_axis(ls, &Layout::cp, f.cp, nullptr);
  ls = split_axis(ls, &Layout::pp, f.pp, nullptr);
  std::erase_if(ls, [&](const Layout& l) { return !allowed(f.dp, l.dp); });
  return ls;
}

// The (vpp, schedule) pairs of a layout with `pp` stages.
std::vector<std::pair<int64_t, ScheduleKind>> schedule_pairs(const ModelSpec& m, const FixedAxes& f,
                                                             int64_t pp) {
  // vpp >= 2 with a split into whole chunks (even, or uneven per uneven_split).
  std::vector<int64_t> vpps;
  for (int64_t v = 2; v <= uneven_split(m.num_layers, pp, 1).middle; ++v)
    if (has_split(m.num_layers, pp, v)) vpps.push_back(v);
  std::vector<std::pair<int64_t, ScheduleKind>> out;
  if (f.vpp && f.schedule) return {{*f.vpp, *f.schedule}};
  if (f.vpp) {
    out.push_back({*f.vpp, *f.vpp > 1 ? ScheduleKind::kInterleaved : ScheduleKind::k1F1B});
    if (*f.vpp == 1 && pp > 1) out.push_back({1, ScheduleKind::kZbH1});
    return out;
  }
  if (f.schedule && *f.schedule != ScheduleKind::kInterleaved) return {{1, *f.schedule}};
  if (!f.schedule) out.push_back({1, ScheduleKind::k1F1B});
  if (!f.schedule && pp > 1) out.push_back({1, ScheduleKind::kZbH1});
  if (pp > 1 || f.schedule)
    for (int64_t v : vpps) out.push_back({v, ScheduleKind::kInterleaved});
  return out;
}

// A (vpp, schedule) pair with one of its pipeline splits.
struct ScheduleSplit {
  int64_t vpp = 1;
  ScheduleKind schedule = ScheduleKind::k1F1B;
  UnevenSplit split;
};

// The splits of `pp` stages in chunks of `vpp` layers the sweep tries: uneven_split's, then
// (vpp 1 only: whole chunks are too coarse to balance by) those that lighten the loss stage,
// and the embedding and loss stages, by the output layer's weight (balanced_split), each once.
std::vector<UnevenSplit> pipeline_splits(const ModelSpec& m, int64_t pp, int64_t vpp,
                                         double output_weight) {
  std::vector<UnevenSplit> out{uneven_split(m.num_layers, pp, vpp)};
  if (pp <= 1 || vpp > 1) return out;
  for (double first_weight : {0.0, output_weight}) {
    const UnevenSplit b = balanced_split(m.num_layers, pp, vpp, first_weight, output_weight);
    if (b.first == 0) continue;
    UnevenSplit& d = out.front();
    // uneven_split's even answer {0, 0, n} is the split {n, n, n}.
    const bool same_as_default = d.first == 0 ? (b.first == d.middle && b.last == d.middle)
                                              : (b.first == d.first && b.last == d.last);
    bool seen = same_as_default;
    for (size_t i = 1; i < out.size(); ++i)
      seen = seen || (out[i].first == b.first && out[i].last == b.last);
    if (!seen) out.push_back(b);
  }
  return out;
}

std::vector<ScheduleSplit> schedules(const ModelSpec& m, const FixedAxes& f, int64_t pp,
                                     double output_weight) {
  std::vector<ScheduleSplit> out;
  for (const auto& [vpp, sched] : schedule_pairs(m, f, pp))
    for (const UnevenSplit& split : pipeline_splits(m, pp, vpp > 1 ? vpp : 1, output_weight))
      out.push_back({vpp, sched, split});
  return out;
}

// A context-parallel exchange: the type and, for a2a+p2p, the all-to-all group size.
struct CpExchange {
  CpCommType type = CpCommType::kP2p;
  int64_t a2a = 0;
};

// The exchanges of a layout (candidate_space.hpp lists them).
std::vector<CpExchange> cp_exchanges(const SpaceInputs& in, const Layout& l) {
  if (l.cp == 1) return {CpExchange{}};
  const FixedAxes& f = in.fixed;
  const bool pinned = f.cp_comm_type || f.cp_a2a;  // validate() judges what the user pins
  auto wanted = [&](CpCommType t) {
    return f.cp_a2a ? t == CpCommType::kA2aP2p : allowed(f.cp_comm_type, t);
  };
  auto splits = [&](int64_t a2a) { return pinned || cp_a2a_splits_heads(*in.model, l.tp, a2a); };
  std::vector<CpExchange> out;
  for (CpCommType t : {CpCommType::kP2p, CpCommType::kAllGather})
    if (wanted(t)) out.push_back({t, 0});
  if (wanted(CpCommType::kA2a) && splits(l.cp)) out.push_back({CpCommType::kA2a, 0});
  if (!wanted(CpCommType::kA2aP2p)) return out;
  if (f.cp_a2a) {
    if (l.cp % *f.cp_a2a == 0) out.push_back({CpCommType::kA2aP2p, *f.cp_a2a});
    return out;
  }
  for (int64_t h : divisors(l.cp))
    if (h > 1 && h < l.cp && l.tp * h <= in.gpus_per_node && splits(h))
      out.push_back({CpCommType::kA2aP2p, h});
  return out;
}

// Activation offloading: {cpu_offloading_num_layers, offload_modules} (candidate_space.hpp).
using Offload = std::pair<int64_t, uint32_t>;

std::vector<Offload> offloads(const SpaceInputs& in, const Layout& l) {
  const FixedAxes& f = in.fixed;
  const ModelSpec& m = *in.model;
  const bool offloads = stack_offloads_activations(in.implementation);
  std::vector<int64_t> layers{0};
  if (f.offload_layers) {
    layers = {*f.offload_layers};
  } else if (offloads && l.pp == 1) {
    for (int64_t n : {m.num_layers / 4, m.num_layers / 2, m.num_layers - 1})
      if (n >= 1 && n > layers.back()) layers.push_back(n);
  }
  std::vector<uint32_t> modules{0};
  if (f.offload_modules) {
    modules = {*f.offload_modules};
  } else if (offloads && in.implementation == Implementation::kMegatronTe) {
    uint32_t every = kOffloadAttnNorm | kOffloadQkvLinear | kOffloadAttention | kOffloadMlpNorm;
    if (m.moe) every |= kOffloadExpertFc1 | kOffloadMoeAct;
    modules.insert(modules.end(), {kOffloadAttention, every});
  }
  const bool both_pinned = f.offload_layers && f.offload_modules;
  std::vector<Offload> out;
  for (int64_t n : layers)
    for (uint32_t mods : modules)
      if (both_pinned || n == 0 || mods == 0) out.push_back({n, mods});
  return out;
}

// Sequence parallelism with or without tp_comm_overlap.
struct SpChoice {
  bool sp = false;
  bool tp_overlap = false;
};

// tp > 1: off, on, and (Transformer Engine) on with tp_comm_overlap; tp 1: off.
std::vector<SpChoice> sp_choices(const SpaceInputs& in, const Layout& l) {
  const FixedAxes& f = in.fixed;
  std::vector<SpChoice> out;
  if (allowed(f.sequence_parallel, false) && f.tp_comm_overlap != true) out.push_back({});
  if (l.tp == 1 || !allowed(f.sequence_parallel, true)) return out;
  if (f.tp_comm_overlap != true) out.push_back({true, false});
  if (f.tp_comm_overlap == true ||
      (!f.tp_comm_overlap && stack_overlaps_tp_comm(in.implementation)))
    out.push_back({true, true});
  return out;
}

// Data-parallel sharding: none, the distributed optimizer, Megatron-FSDP with a strategy.
struct DpShard {
  bool dist = false;
  std::optional<DpSharding> fsdp;
};

// none, dist-opt, then (stacks that run it) Megatron-FSDP's optim_grads and optim_grads_params
// (its no_shard and optim keep what DDP and the distributed optimizer keep).
std::vector<DpShard> dp_shards(const SpaceInputs& in) {
  const FixedAxes& f = in.fixed;
  std::vector<DpShard> out;
  const bool fsdp_free = !f.fsdp || !*f.fsdp;  // no FSDP, or FSDP not pinned
  if (fsdp_free)
    for (bool dist : allowed_values(f.distributed_optimizer, {false, true}))
      out.push_back({dist, std::nullopt});
  if (f.fsdp && *f.fsdp) {
    out.push_back({true, **f.fsdp});
  } else if (!f.fsdp && stack_runs_megatron_fsdp(in.implementation) &&
             allowed(f.distributed_optimizer, true)) {
    for (DpSharding d : {DpSharding::kOptimGrads, DpSharding::kOptimGradsParams})
      out.push_back({true, d});
  }
  return out;
}

// The values of every other axis for one layout; a candidate is one index into each list.
struct LayoutAxes {
  Layout layout;
  std::vector<CpExchange> cp;
  std::vector<Offload> offload;
  bool offload_pinned = false;  // a fixed offload: tried with every recompute
  bool overlap_p2p = false;     // overlap_p2p_comm of interleaved candidates
  std::vector<int64_t> ep, etp, mbs;
  std::vector<ScheduleSplit> sched;
  std::vector<SpChoice> sp;
  std::vector<Recompute> recompute;
  std::vector<DpShard> dist;
};

LayoutAxes axes_of(const SpaceInputs& in, const Layout& l) {
  const ModelSpec& m = *in.model;
  const FixedAxes& f = in.fixed;
  LayoutAxes a;
  a.layout = l;
  std::vector<int64_t> ep_values{1};
  if (m.moe) {
    ep_values.clear();
    for (int64_t d : divisors(in.gpus / l.pp))
      if (d <= m.moe->num_experts) ep_values.push_back(d);
  }
  a.ep = axis_values(f.ep, ep_values);
  a.etp = axis_values(
      f.etp, m.moe && l.tp != 1 ? std::vector<int64_t>{1, l.tp} : std::vector<int64_t>{l.tp});
  a.sched = schedules(m, f, l.pp, in.output_weight);
  std::vector<int64_t> mbs_values;
  for (int32_t b : kMicroBatchSizes)
    if (b == 1 || b * l.dp <= in.global_batch_size) mbs_values.push_back(b);
  a.mbs = axis_values(f.micro_batch_size, mbs_values);
  a.sp = sp_choices(in, l);
  a.recompute =
      allowed_values(f.recompute, {Recompute::kNone, Recompute::kSelective, Recompute::kFull});
  a.dist = dp_shards(in);
  a.cp = cp_exchanges(in, l);
  a.offload = offloads(in, l);
  a.offload_pinned = f.offload_layers.value_or(0) > 0 || f.offload_modules.value_or(0) != 0;
  a.overlap_p2p = f.overlap_p2p.value_or(stack_overlaps_p2p(in.implementation));
  return a;
}

constexpr size_t kAxes = 9;

// The candidate at index `i` of the product ep × etp × (vpp, schedule) × mbs × sp × recompute ×
// dp sharding × offload × cp exchange, or nothing when that combination is not in the space (a
// distributed optimizer without a data-parallel group, Megatron-FSDP without a dense one,
// offloading beside recomputation unless pinned).
std::optional<Candidate> candidate_at(const SpaceInputs& in, const LayoutAxes& a,
                                      const std::array<size_t, kAxes>& i) {
  const Layout& l = a.layout;
  const int64_t ep = a.ep[i[0]], etp = a.etp[i[1]];
  const int64_t expert_grid = etp * ep * l.pp;
  const bool expert_dp_gt1 = in.gpus % expert_grid == 0 && in.gpus / expert_grid > 1;
  const DpShard& shard = a.dist[i[6]];
  if (shard.dist && !(l.dp * l.cp > 1 || expert_dp_gt1)) return std::nullopt;
  if (shard.fsdp && l.dp * l.cp == 1) return std::nullopt;
  const Recompute recompute = a.recompute[i[5]];
  const auto& [offload_layers, offload_modules] = a.offload[i[7]];
  const bool offloading = offload_layers > 0 || offload_modules != 0;
  if (offloading && recompute != Recompute::kNone && !a.offload_pinned) return std::nullopt;
  const auto& [vpp, sched, split] = a.sched[i[2]];
  Candidate c;
  c.tp = static_cast<int32_t>(l.tp);
  c.cp = static_cast<int32_t>(l.cp);
  c.ep = static_cast<int32_t>(ep);
  c.etp = static_cast<int32_t>(etp);
  c.pp = static_cast<int32_t>(l.pp);
  c.vpp = static_cast<int32_t>(vpp);
  c.dp = static_cast<int32_t>(l.dp);
  c.micro_batch_size = static_cast<int32_t>(a.mbs[i[3]]);
  c.first_stage_layers = static_cast<int32_t>(split.first);
  c.last_stage_layers = static_cast<int32_t>(split.last);
  c.schedule = sched;
  c.sequence_parallel = a.sp[i[4]].sp;
  c.tp_comm_overlap = a.sp[i[4]].tp_overlap;
  c.recompute = recompute;
  c.distributed_optimizer = shard.dist;
  c.use_megatron_fsdp = shard.fsdp.has_value();
  if (shard.fsdp) c.fsdp_sharding = *shard.fsdp;
  c.cp_comm_type = a.cp[i[8]].type;
  c.cp_a2a = static_cast<int32_t>(a.cp[i[8]].a2a);
  c.overlap_p2p_comm = sched == ScheduleKind::kInterleaved && a.overlap_p2p;
  c.offload_layers = static_cast<int32_t>(offload_layers);
  c.offload_modules = offload_modules;
  return c;
}

// Appends the product of a layout's axes, the last axis varying fastest.
void append_product(const SpaceInputs& in, const LayoutAxes& a, std::vector<Candidate>& out) {
  const std::array<size_t, kAxes> size{a.ep.size(),   a.etp.size(),     a.sched.size(),
                                       a.mbs.size(),  a.sp.size(),      a.recompute.size(),
                                       a.dist.size(), a.offload.size(), a.cp.size()};
  for (size_t n : size)
    if (n == 0) return;
  std::array<size_t, kAxes> i{};
  for (;;) {
    if (auto c = candidate_at(in, a, i)) out.push_back(*c);
    size_t axis = size.size();
    while (axis > 0 && ++i[axis - 1] == size[axis - 1]) i[--axis] = 0;
    if (axis == 0) return;
  }
}

}  // namespace

std::vector<Candidate> enumerate_candidates(const SpaceInputs& in) {
  MPLAN_CHECK(in.model != nullptr && in.gpus >= 1 && in.gpus_per_node >= 1, "space inputs");
  std::vector<Candidate> out;
  SpaceInputs with_weight = in;
  with_weight.output_weight = output_layer_weight(*in.model);
  for (const Layout& l : layouts(in)) append_product(with_weight, axes_of(with_weight, l), out);
  return out;
}

}  // namespace mplan::sweep
