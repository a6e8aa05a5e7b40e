// RankGrid: Megatron-LM's generate_masked_orthogonal_rank_groups in closed form. A grid lists its
// axes fastest first; axis a has stride = product of the sizes before it. A group kind masks some
// axes: group g holds the ranks whose unmasked coordinates, read as a mixed-radix number in order,
// equal g; members are enumerated by the masked coordinates, first order axis fastest.
#include "src/parallel/rank_grid.hpp"

#include <algorithm>
#include <cctype>
#include <climits>
#include <tuple>
#include <utility>

#include "src/common/error.hpp"

namespace mplan {

namespace {

constexpr std::array<GroupKind, kNumGroupKinds> kAllKinds = {GroupKind::kTp,
                                                             GroupKind::kPp,
                                                             GroupKind::kDp,
                                                             GroupKind::kCp,
                                                             GroupKind::kDpCp,
                                                             GroupKind::kTpPp,
                                                             GroupKind::kTpCp,
                                                             GroupKind::kTpDp,
                                                             GroupKind::kTpDpCp,
                                                             GroupKind::kEmbedding,
                                                             GroupKind::kPositionEmbedding,
                                                             GroupKind::kEp,
                                                             GroupKind::kExpertTp,
                                                             GroupKind::kExpertDp,
                                                             GroupKind::kTpEp,
                                                             GroupKind::kTpEpPp};

// Axis names as Megatron spells them, indexed like RankGrid's private Axis enum.
constexpr std::array<const char*, 5> kAxisNames = {"tp", "cp", "ep", "dp", "pp"};
// RankGenerator appends the axes an order leaves out in its name_to_size order.
constexpr std::array<int, 5> kAppendOrder = {0, 4, 3, 2, 1};  // tp, pp, dp, ep, cp

struct ParsedOrder {
  std::vector<int> axes;  // as given (lower case), fastest first
  std::string lowered;
  std::string error;  // empty when the tokens are valid
};

ParsedOrder parse_order(const std::string& order) {
  ParsedOrder r;
  r.lowered = order;
  for (char& c : r.lowered) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  size_t start = 0;
  while (true) {
    size_t dash = r.lowered.find('-', start);
    std::string tok =
        r.lowered.substr(start, dash == std::string::npos ? std::string::npos : dash - start);
    auto it = std::find(kAxisNames.begin(), kAxisNames.end(), tok);
    if (tok.empty()) {
      r.error =
          cat("empty axis name in order '", order, "' (axes are tp, cp, ep, dp, pp joined by '-')");
      return r;
    }
    if (it == kAxisNames.end()) {
      r.error =
          cat("unknown axis '", tok, "' in order '", order, "' (axes are tp, cp, ep, dp, pp)");
      return r;
    }
    int axis = static_cast<int>(it - kAxisNames.begin());
    if (std::find(r.axes.begin(), r.axes.end(), axis) != r.axes.end()) {
      r.error = cat("axis '", tok, "' appears twice in order '", order, "'");
      return r;
    }
    r.axes.push_back(axis);
    if (dash == std::string::npos) break;
    start = dash + 1;
  }
  return r;
}

// The full order Megatron uses: the given axes, then the missing ones in its append order.
std::vector<int> complete_order(const std::vector<int>& given) {
  std::vector<int> out = given;
  for (int a : kAppendOrder)
    if (std::find(out.begin(), out.end(), a) == out.end()) out.push_back(a);
  return out;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Strides of a grid with per-axis `size` laid out in `order` (fastest first).
std::array<int64_t, 5> strides_for(const std::array<int64_t, 5>& size,
                                   const std::vector<int>& order) {
  std::array<int64_t, 5> stride{};
  int64_t s = 1;
  for (int a : order) {
    stride[a] = s;
    s *= size[a];
  }
  return stride;
}

// Pipeline group g of a grid: members g's unmasked coordinates + k·stride_pp, k = 0..pp-1.
int64_t pp_group_base(int64_t g, const std::array<int64_t, 5>& size,
                      const std::array<int64_t, 5>& stride, const std::vector<int>& order) {
  int64_t base = 0;
  for (int a : order) {
    if (a == 4) continue;  // pp
    base += (g % size[a]) * stride[a];
    g /= size[a];
  }
  return base;
}

}  // namespace

const std::array<GroupKind, kNumGroupKinds>& all_group_kinds() { return kAllKinds; }

const char* to_string(GroupKind k) {
  switch (k) {
    case GroupKind::kTp:
      return "tp";
    case GroupKind::kPp:
      return "pp";
    case GroupKind::kDp:
      return "dp";
    case GroupKind::kCp:
      return "cp";
    case GroupKind::kDpCp:
      return "dp-cp";
    case GroupKind::kTpPp:
      return "tp-pp";
    case GroupKind::kTpCp:
      return "tp-cp";
    case GroupKind::kTpDp:
      return "tp-dp";
    case GroupKind::kTpDpCp:
      return "tp-dp-cp";
    case GroupKind::kEmbedding:
      return "embedding";
    case GroupKind::kPositionEmbedding:
      return "position-embedding";
    case GroupKind::kEp:
      return "ep";
    case GroupKind::kExpertTp:
      return "expert-tp";
    case GroupKind::kExpertDp:
      return "expert-dp";
    case GroupKind::kTpEp:
      return "tp-ep";
    case GroupKind::kTpEpPp:
      return "tp-ep-pp";
  }
  return "?";
}

std::optional<GroupKind> group_kind_from_string(std::string_view name) {
  for (GroupKind k : kAllKinds)
    if (name == to_string(k)) return k;
  return std::nullopt;
}

bool group_kind_covers_world(GroupKind k) {
  return k != GroupKind::kEmbedding && k != GroupKind::kPositionEmbedding;
}

std::vector<RankGridProblem> rank_grid_problems(const ParallelConfig& p) {
  std::vector<RankGridProblem> out;
  auto add = [&](const std::string& field, std::string msg) {
    out.push_back({field, std::move(msg)});
  };
  const std::pair<const char*, int64_t> sizes[] = {{"tp", p.tp},   {"cp", p.cp}, {"ep", p.ep},
                                                   {"etp", p.etp}, {"pp", p.pp}, {"dp", p.dp}};
  for (const auto& [name, v] : sizes)
    if (v < 1) add(cat("parallel.", name), cat("must be >= 1, got ", v));
  if (!out.empty()) return out;
  // Ranks are int (as in the executor's GroupMembers): bound the world before multiplying on.
  const int64_t limit = INT_MAX;
  int64_t world = 1;
  for (int64_t v : {p.tp, p.cp, p.pp, p.dp}) {
    if (v > limit / world) {
      add("parallel", cat("GPU count tp x cp x pp x dp exceeds ", limit));
      return out;
    }
    world *= v;
  }

  // The expert grid: etp·ep·pp must divide the world (initialize_model_parallel).
  int64_t expert_mp = 0;  // 0 when the product overflows
  if (__builtin_mul_overflow(p.etp, p.ep, &expert_mp) ||
      __builtin_mul_overflow(expert_mp, p.pp, &expert_mp))
    expert_mp = 0;
  bool expert_ok = expert_mp > 0 && world % expert_mp == 0;
  // Same field and wording as validate()'s rule, so validate() reports it once.
  if (!expert_ok)
    add(expert_mp > 0 && world % (p.etp * p.pp) != 0 ? "parallel.etp" : "parallel.ep",
        cat("world_size (", world,
            ") is not divisible by expert_tensor_model_pipeline_parallel size (etp x ep x pp = ",
            expert_mp > 0 ? cat(expert_mp) : cat(p.etp, " x ", p.ep, " x ", p.pp), ")"));
  int64_t expert_dp = expert_ok ? world / expert_mp : 0;

  ParsedOrder order = parse_order(p.order);
  if (!order.error.empty()) {
    add("parallel.order", order.error);
    return out;
  }
  // RankGenerator: an axis of size > 1 must be listed in the order (decoder and expert grids).
  auto listed = [&](int axis) {
    return std::find(order.axes.begin(), order.axes.end(), axis) != order.axes.end();
  };
  // initialize_model_parallel inserts its 'gtp_remat' axis into the order, and RankGenerator
  // tests for each axis by substring: an order without tp passes that test (via "gtp_remat") but
  // then has no tp axis, and building the tp groups fails. So tp must be listed, even at size 1.
  if (!listed(0))
    add("parallel.order", cat("order '", p.order,
                              "' must list tp (Megatron cannot build the tp "
                              "groups of an order without it, even for tp 1)"));
  std::array<bool, 5> reported{};
  reported[0] = !listed(0);
  const std::pair<int, int64_t> decoder_axes[] = {{0, p.tp}, {1, p.cp}, {3, p.dp}, {4, p.pp}};
  for (const auto& [axis, size] : decoder_axes) {
    if (size > 1 && !listed(axis)) {
      add("parallel.order", cat(kAxisNames[axis], " is ", size, " but order '", p.order,
                                "' does not list ", kAxisNames[axis]));
      reported[axis] = true;
    }
  }
  if (expert_ok) {
    const std::tuple<int, int64_t, const char*> expert_axes[] = {
        {0, p.etp, "etp"}, {2, p.ep, "ep"}, {3, expert_dp, "world / (etp x ep x pp)"}};
    for (const auto& [axis, size, what] : expert_axes)
      if (size > 1 && !listed(axis) && !reported[axis])
        add("parallel.order", cat("the expert grid's ", kAxisNames[axis], " (", what, ") is ", size,
                                  " but order '", p.order, "' does not list ", kAxisNames[axis]));
  }
  if (!out.empty()) return out;

  // initialize_model_parallel: without pp-last ordering, attention and MoE layers must share
  // the data parallel size.
  // (Megatron tests the order as given, before lower-casing.)
  if (!(ends_with(p.order, "pp") || p.pp == 1 || expert_dp == p.dp))
    add("parallel.order", cat("order '", p.order, "' does not end in pp and pp is ", p.pp,
                              ", so the expert data parallel size world / (etp x ep x pp) = ",
                              expert_dp, " must equal dp (", p.dp,
                              ") (Megatron: the data parallel size of the attention and "
                              "moe layers must be the same)"));
  if (!out.empty()) return out;

  // initialize_model_parallel: the decoder and expert grids must build the same pp groups.
  std::vector<int> full = complete_order(order.axes);
  std::array<int64_t, 5> dsize = {p.tp, p.cp, 1, p.dp, p.pp};
  std::array<int64_t, 5> esize = {p.etp, 1, p.ep, expert_dp, p.pp};
  auto dstride = strides_for(dsize, full), estride = strides_for(esize, full);
  // pp 1: singleton groups. pp the slowest axis of both grids (stride world / pp): pipeline group
  // g starts at rank g in both. Otherwise compare group by group (O(world / pp)).
  bool same = p.pp == 1 || dstride[4] == estride[4];
  bool trivially = p.pp == 1 || (same && dstride[4] == world / p.pp);
  for (int64_t g = 0; same && !trivially && g < world / p.pp; ++g)
    same = pp_group_base(g, dsize, dstride, full) == pp_group_base(g, esize, estride, full);
  if (!same)
    add("parallel.order", cat("with order '", p.order, "', tp ", p.tp, " x cp ", p.cp, " and etp ",
                              p.etp, " x ep ", p.ep,
                              " the decoder and expert grids build different pipeline groups "
                              "(Megatron requires them to be the same)"));
  return out;
}

int64_t data_parallel_size_for_world(int64_t world_size, const ParallelConfig& p,
                                     const std::string& field) {
  int64_t model = p.tp * p.pp * p.cp;
  if (world_size < 1 || model < 1 || world_size % model != 0)
    throw Error(cat(field, ": world size (", world_size, ") is not divisible by tp x pp x cp (",
                    model, ")"));
  return world_size / model;
}

RankGrid::RankGrid(const ParallelConfig& p) {
  auto problems = rank_grid_problems(p);
  if (!problems.empty()) throw Error(problems.front().field + ": " + problems.front().message);
  world_ = static_cast<int>(p.world_size());
  std::vector<int> full = complete_order(parse_order(p.order).axes);
  for (size_t i = 0; i < full.size(); ++i) {
    axis_at_[i] = static_cast<Axis>(full[i]);
    if (i > 0) order_.push_back('-');
    order_.append(kAxisNames[full[i]]);
  }
  auto fill = [&](Grid& g, std::array<int64_t, 5> size) {
    auto stride = strides_for(size, full);
    for (int a = 0; a < kNumAxes; ++a) {
      g.size[a] = static_cast<int>(size[a]);
      g.stride[a] = stride[a];
    }
  };
  fill(dec_, {p.tp, p.cp, 1, p.dp, p.pp});
  fill(exp_, {p.etp, 1, p.ep, world_ / (p.etp * p.ep * p.pp), p.pp});
}

RankCoord RankGrid::coord(int rank) const {
  MPLAN_CHECK(rank >= 0 && rank < world_, "rank ", rank, " outside world ", world_);
  auto at = [rank](const Grid& g, int a) {
    return static_cast<int>((rank / g.stride[a]) % g.size[a]);
  };
  RankCoord c;
  c.tp = at(dec_, kTpAxis);
  c.cp = at(dec_, kCpAxis);
  c.dp = at(dec_, kDpAxis);
  c.pp = at(dec_, kPpAxis);
  c.expert_tp = at(exp_, kTpAxis);
  c.ep = at(exp_, kEpAxis);
  c.expert_dp = at(exp_, kDpAxis);
  return c;
}

int RankGrid::rank_at(int tp, int cp, int dp, int pp) const {
  MPLAN_CHECK(tp >= 0 && tp < this->tp() && cp >= 0 && cp < this->cp() && dp >= 0 &&
                  dp < this->dp() && pp >= 0 && pp < this->pp(),
              "coordinate (tp ", tp, ", cp ", cp, ", dp ", dp, ", pp ", pp, ") outside the grid");
  return static_cast<int>(tp * dec_.stride[kTpAxis] + cp * dec_.stride[kCpAxis] +
                          dp * dec_.stride[kDpAxis] + pp * dec_.stride[kPpAxis]);
}

int RankGrid::expert_rank_at(int expert_tp, int ep, int expert_dp, int pp) const {
  MPLAN_CHECK(expert_tp >= 0 && expert_tp < this->expert_tp() && ep >= 0 && ep < this->ep() &&
                  expert_dp >= 0 && expert_dp < this->expert_dp() && pp >= 0 && pp < this->pp(),
              "expert coordinate (etp ", expert_tp, ", ep ", ep, ", edp ", expert_dp, ", pp ", pp,
              ") outside the grid");
  return static_cast<int>(expert_tp * exp_.stride[kTpAxis] + ep * exp_.stride[kEpAxis] +
                          expert_dp * exp_.stride[kDpAxis] + pp * exp_.stride[kPpAxis]);
}

RankPlacement RankGrid::placement(int rank, int gpus_per_node) {
  MPLAN_CHECK(rank >= 0 && gpus_per_node >= 1, "rank ", rank, ", gpus_per_node ", gpus_per_node);
  return {rank / gpus_per_node, rank % gpus_per_node};
}

const RankGrid::Grid& RankGrid::grid_of(GroupKind k) const {
  switch (k) {
    case GroupKind::kEp:
    case GroupKind::kExpertTp:
    case GroupKind::kExpertDp:
    case GroupKind::kTpEp:
    case GroupKind::kTpEpPp:
      return exp_;
    default:
      return dec_;
  }
}

unsigned RankGrid::mask_of(GroupKind k) {
  constexpr unsigned tp = 1u << kTpAxis, cp = 1u << kCpAxis, ep = 1u << kEpAxis, dp = 1u << kDpAxis,
                     pp = 1u << kPpAxis;
  switch (k) {
    case GroupKind::kTp:
      return tp;
    case GroupKind::kPp:
      return pp;
    case GroupKind::kDp:
      return dp;
    case GroupKind::kCp:
      return cp;
    case GroupKind::kDpCp:
      return dp | cp;
    case GroupKind::kTpPp:
      return tp | pp;
    case GroupKind::kTpCp:
      return tp | cp;
    case GroupKind::kTpDp:
      return tp | dp;
    case GroupKind::kTpDpCp:
      return tp | dp | cp;
    case GroupKind::kEmbedding:
    case GroupKind::kPositionEmbedding:
      return pp;  // derived from the pp groups
    case GroupKind::kEp:
      return ep;
    case GroupKind::kExpertTp:
      return tp;
    case GroupKind::kExpertDp:
      return dp;
    case GroupKind::kTpEp:
      return tp | ep;
    case GroupKind::kTpEpPp:
      return tp | ep | pp;
  }
  return 0;
}

int RankGrid::group_size(GroupKind k) const {
  if (k == GroupKind::kEmbedding) return pp() == 1 ? 1 : 2;
  if (k == GroupKind::kPositionEmbedding) return 1;
  const Grid& g = grid_of(k);
  unsigned m = mask_of(k);
  int n = 1;
  for (int a = 0; a < kNumAxes; ++a)
    if (m & (1u << a)) n *= g.size[a];
  return n;
}

int RankGrid::num_groups(GroupKind k) const {
  if (k == GroupKind::kEmbedding || k == GroupKind::kPositionEmbedding) return world_ / pp();
  return world_ / group_size(k);
}

std::vector<int> RankGrid::group_members(GroupKind k, int group_index) const {
  MPLAN_CHECK(group_index >= 0 && group_index < num_groups(k), to_string(k), " group ", group_index,
              " of ", num_groups(k));
  const Grid& g = grid_of(k);
  unsigned m = mask_of(k);
  // Base rank: the group index decomposed over the unmasked axes, in order.
  int64_t base = 0, rest = group_index;
  std::array<int, kNumAxes> msize{};
  std::array<int64_t, kNumAxes> mstride{};
  int nm = 0, count = 1;
  for (Axis a : axis_at_) {
    if (m & (1u << a)) {
      msize[nm] = g.size[a];
      mstride[nm] = g.stride[a];
      count *= g.size[a];
      ++nm;
    } else {
      base += (rest % g.size[a]) * g.stride[a];
      rest /= g.size[a];
    }
  }
  if (k == GroupKind::kEmbedding || k == GroupKind::kPositionEmbedding) {
    int64_t last = base + (pp() - 1) * g.stride[kPpAxis];
    if (k == GroupKind::kPositionEmbedding || pp() == 1) return {static_cast<int>(base)};
    return {static_cast<int>(base), static_cast<int>(last)};
  }
  // Members: odometer over the masked axes, first order axis fastest.
  std::vector<int> out(count);
  std::array<int, kNumAxes> idx{};
  int64_t off = base;
  for (int i = 0; i < count; ++i) {
    out[i] = static_cast<int>(off);
    for (int a = 0; a < nm; ++a) {
      off += mstride[a];
      if (++idx[a] < msize[a]) break;
      off -= mstride[a] * msize[a];
      idx[a] = 0;
    }
  }
  return out;
}

std::vector<std::vector<int>> RankGrid::groups(GroupKind k) const {
  std::vector<std::vector<int>> out(num_groups(k));
  for (int i = 0; i < static_cast<int>(out.size()); ++i) out[i] = group_members(k, i);
  return out;
}

int RankGrid::group_index_of(GroupKind k, int rank) const {
  MPLAN_CHECK(rank >= 0 && rank < world_, "rank ", rank, " outside world ", world_);
  const Grid& g = grid_of(k);
  unsigned m = mask_of(k);
  if (k == GroupKind::kEmbedding || k == GroupKind::kPositionEmbedding) {
    int stage = static_cast<int>((rank / g.stride[kPpAxis]) % g.size[kPpAxis]);
    bool in = stage == 0 || (k == GroupKind::kEmbedding && stage == pp() - 1);
    if (!in) return -1;
  }
  int64_t index = 0, radix = 1;
  for (Axis a : axis_at_) {
    if (m & (1u << a)) continue;
    index += ((rank / g.stride[a]) % g.size[a]) * radix;
    radix *= g.size[a];
  }
  return static_cast<int>(index);
}

std::vector<int> RankGrid::group_of(GroupKind k, int rank) const {
  int i = group_index_of(k, rank);
  return i < 0 ? std::vector<int>{} : group_members(k, i);
}

RankGroupMap RankGrid::groups_of_rank(int rank) const {
  RankGroupMap out;
  for (GroupKind k : kAllKinds) {
    int i = group_index_of(k, rank);
    if (i >= 0) out.emplace(to_string(k), group_members(k, i));
  }
  return out;
}

int nodes_spanned(const std::vector<int>& ranks, int gpus_per_node) {
  MPLAN_CHECK(gpus_per_node >= 1, "gpus_per_node ", gpus_per_node);
  std::vector<int> nodes;
  nodes.reserve(ranks.size());
  for (int r : ranks) nodes.push_back(r / gpus_per_node);
  std::sort(nodes.begin(), nodes.end());
  return static_cast<int>(std::unique(nodes.begin(), nodes.end()) - nodes.begin());
}

}  // namespace mplan
