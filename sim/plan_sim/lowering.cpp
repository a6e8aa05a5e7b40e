// Lowering of a plan into a des::Program (the recipe: sim/README.md, "How a plan becomes a
// program"). Megatron-LM behaviour reproduced here:
// - p2p: each Megatron p2p call (one schedule group) is posted after the previous compute pass and
//   completes before the next one starts (batch_isend_irecv + wait); the k-th send from a rank to
//   a peer meets the k-th receive there (NCCL's per-peer ordering). With overlap_p2p_comm (the
//   interleaved schedule's isend/irecv, schedules.py forward_backward_pipelining_with_interleaving)
//   each transfer is posted after the previous compute pass and waited for only before the next
//   pass of its direction (fwd_wait_handles before a forward, bwd_wait_handles before a
//   backward), so in the steady 1F1B phase it runs beside the pass of the other direction; with
//   overlap_p2p_comm_warmup_flush a pass waits only for the receives of its direction (sends are
//   waited for when the next send of the stream is posted: stream order).
// - data parallel (distributed_data_parallel.py, param_and_grad_buffer.py,
// finalize_model_grads.py):
//   with overlap_grad_reduce each bucket's all-reduce (reduce-scatter with the distributed
//   optimizer) starts on its own stream when the last micro-batch's backward has produced its
//   gradients; without it, all buckets are reduced after the pipeline flush. The step then waits
//   for them, all-reduces the tied embedding's gradient between the first and last stage, the
//   sequence-parallel norm gradients over tp, the gradient norm over the model-parallel group,
//   and runs the optimizer. With the distributed optimizer the updated parameters are
//   all-gathered per bucket: overlapped with the next step's first forward
//   (overlap_param_gather: modelled as gathers at the start of this step, each bucket's before
//   the first forward that needs it), or after the optimizer.
// - Megatron-FSDP (megatron/core/distributed/fsdp): with sharded parameters (optim_grads_params)
//   every forward and backward pass of a chunk first all-gathers the chunk's parameters on the
//   data-parallel stream, at most one pass ahead of the compute (the prefetch, into the second
//   of two buffers), and no gather follows the optimizer; with sharded gradients (optim_grads
//   and optim_grads_params) every backward reduce-scatters the chunk's gradients on that stream
//   instead of the buckets' reductions after the last micro-batch. Units are chunks here
//   (Megatron-FSDP gathers per transformer layer: the same bytes, one latency per chunk).
#include "sim/plan_sim/lowering.hpp"

#include <algorithm>
#include <numeric>
#include <string>
#include <unordered_map>

#include "sim/cost/dp_sharding_memory.hpp"
#include "sim/cost/memory_bound_cost.hpp"
#include "sim/cost/model_state_memory.hpp"
#include "sim/cost/offload_cost.hpp"
#include "sim/cost/precision_cost.hpp"
#include "src/common/error.hpp"
#include "src/model/model_stats.hpp"

namespace mplan::sim {

namespace {

using cost::CollectiveKind;
using des::OpId;
using des::OpKind;
using des::OpLabel;
using des::RendezvousId;

// Collective groups an op may span.
enum Slot : int32_t {
  kSlotSync = 0,   // full grid: the ranks that run each pass in lock step (tp x cp, + ep, etp)
  kSlotDpCp,       // dense gradients / parameters
  kSlotExpertDp,   // expert gradients / parameters
  kSlotEmbedding,  // first and last stage (tied embedding)
  kSlotGradNorm,   // gradient norm
  kSlotTp,         // tensor parallel (sequence-parallel norm gradients)
  kNumSlots
};

struct Names {
  uint16_t fwd, bwd, bwd_input, wgrad, send_fwd, recv_fwd, send_bwd, recv_bwd, grad_reduce,
      param_gather, embedding_ar, sp_norm_ar, grad_norm_ar, optimizer;
};

// The parts Megatron-FSDP shards; nothing without FSDP (the distributed optimizer's state
// sharding is modelled by its buckets).
cost::DpShardedParts fsdp_parts(const ParallelConfig& p) {
  return p.use_megatron_fsdp ? cost::dp_sharded_parts(p) : cost::DpShardedParts{};
}

// One collective over a chunk's parameters: the dense ones over dp·cp, the experts' over expert
// dp, `bytes_per_param` each.
int64_t chunk_collective_ns(const Plan& plan, CollectiveKind kind, const StageGroups& g,
                            const ChunkCosts& ch, double bytes_per_param) {
  int64_t ns = cost::collective_time_ns(
      plan.cluster, kind, static_cast<double>(ch.dense_params) * bytes_per_param, g.dp_cp);
  if (ch.expert_params > 0)
    ns += cost::collective_time_ns(
        plan.cluster, kind, static_cast<double>(ch.expert_params) * bytes_per_param, g.expert_dp);
  return ns;
}

}  // namespace

FsdpCollectives fsdp_collectives(const Plan& plan, const StageGroups& g, const ChunkCosts& ch) {
  const cost::DpShardedParts parts = fsdp_parts(plan.parallel);
  const cost::BytesPerParameter bytes = cost::bytes_per_parameter(plan.training);
  FsdpCollectives out;
  if (parts.weights)
    out.gather_ns = chunk_collective_ns(plan, CollectiveKind::kAllGather, g, ch, bytes.weights);
  if (parts.grads)
    out.reduce_ns = chunk_collective_ns(plan, CollectiveKind::kReduceScatter, g, ch, bytes.grads);
  return out;
}

namespace {

class Builder {
 public:
  Builder(const Plan& plan, const Schedule& sch, const RankGrid& grid, const SimOptions& opt,
          Lowered& L)
      : plan_(plan), par_(plan.parallel), sch_(sch), grid_(grid), opt_(opt), L_(L), P_(L.program) {}

  void run() {
    pp_ = par_.pp;
    vpp_ = par_.vpp;
    full_ = opt_.full_grid;
    // arguments.py: overlap_p2p_comm only with the interleaved schedule.
    overlap_p2p_ = par_.overlap_p2p_comm && par_.schedule == ScheduleKind::kInterleaved;
    overlap_sends_ = overlap_p2p_ && par_.overlap_p2p_comm_warmup_flush;
    split_ = sch_.split_backward;
    L_.microbatches = sch_.spec.microbatches;
    const int64_t gpn = plan_.cluster.gpus_per_node;
    const int32_t ranks = full_ ? grid_.world_size() : static_cast<int32_t>(pp_);

    // Groups, costs and chunks per stage.
    L_.groups.resize(static_cast<size_t>(pp_));
    L_.chunks.chunks.clear();
    L_.chunks.units.clear();
    L_.chunks.buckets.clear();
    for (int64_t s = 0; s < pp_; ++s) {
      L_.groups[s] = stage_groups(grid_, gpn, s, L_.scratch, cp_a2a_size(par_));
      const bool same = s > 0 && same_cost_groups(L_.groups[s - 1], L_.groups[s]);
      if (!same) build_plan_costs(plan_, opt_, L_.groups[s], opt_.record_trace, L_.plan_costs);
      append_stage_chunks(plan_, L_.plan_costs, s, L_.chunks);
      if (opt_.record_trace) trace_costs_.push_back(L_.plan_costs);
    }
    dims_ = L_.plan_costs.dims;

    // Engine ranks.
    L_.stage_of_rank.resize(static_cast<size_t>(ranks));
    L_.global_rank.resize(static_cast<size_t>(ranks));
    L_.rank_of_stage.resize(static_cast<size_t>(pp_));
    for (int32_t r = 0; r < ranks; ++r) {
      L_.global_rank[r] = full_ ? r : L_.groups[r].rank;
      L_.stage_of_rank[r] = full_ ? grid_.coord(r).pp : r;
    }
    for (int64_t s = 0; s < pp_; ++s)
      L_.rank_of_stage[s] =
          full_ ? static_cast<int32_t>(L_.groups[s].rank) : static_cast<int32_t>(s);
    if (full_) build_sync_groups(ranks);

    P_.reset(ranks, kNumLoweredStreams);
    P_.set_stream_name(kStreamCompute, "compute");
    P_.set_stream_name(kStreamDp, "dp");
    P_.set_stream_name(kStreamSendFwd, "pp_send_fwd");
    P_.set_stream_name(kStreamRecvFwd, "pp_recv_fwd");
    P_.set_stream_name(kStreamSendBwd, "pp_send_bwd");
    P_.set_stream_name(kStreamRecvBwd, "pp_recv_bwd");
    P_.set_mem_class_name(kMemWeights, "weights");
    P_.set_mem_class_name(kMemGrads, "grads");
    P_.set_mem_class_name(kMemOptimizer, "optimizer");
    P_.set_mem_class_name(kMemActivations, "activations");
    P_.set_mem_class_name(kMemOther, "other");
    names_ = {P_.intern_name("forward"),        P_.intern_name("backward"),
              P_.intern_name("backward_input"), P_.intern_name("weight_grad"),
              P_.intern_name("send_fwd"),       P_.intern_name("recv_fwd"),
              P_.intern_name("send_bwd"),       P_.intern_name("recv_bwd"),
              P_.intern_name("grad_reduce"),    P_.intern_name("param_gather"),
              P_.intern_name("embedding_ar"),   P_.intern_name("sp_norm_ar"),
              P_.intern_name("grad_norm_ar"),   P_.intern_name("optimizer")};
    const size_t per_rank_ops = sch_.actions.size() / static_cast<size_t>(pp_) + 64;
    P_.reserve(per_rank_ops * static_cast<size_t>(ranks),
               2 * per_rank_ops * static_cast<size_t>(ranks),
               2 * per_rank_ops * static_cast<size_t>(ranks));
    L_.meta.clear();
    L_.costs.clear();
    L_.deps.clear();

    // Rendezvous tables.
    L_.channels.resize(static_cast<size_t>(2 * ranks));
    for (auto& ch : L_.channels) ch.ids.clear(), ch.sends = ch.recvs = 0;
    L_.p2p_kind.clear();
    L_.collectives.resize(kNumSlots);
    for (auto& slot : L_.collectives)
      for (auto& g : slot) g.clear();
    L_.collective_counts.assign(static_cast<size_t>(ranks) * kNumSlots, 0);

    p2p_bytes_ = static_cast<double>(dims_.e) * static_cast<double>(dims_.tokens) *
                 static_cast<double>(dims_.h) / static_cast<double>(dims_.r);
    grad_bytes_ = cost::bytes_per_parameter(plan_.training).grads;
    param_bytes_ = cost::bytes_per_parameter(plan_.training).weights;

    for (int32_t r = 0; r < ranks; ++r) build_rank(r);
    L_.meta.resize(static_cast<size_t>(P_.num_ops()));
    check_channels(ranks);
  }

  std::vector<PlanCosts>& trace_costs() { return trace_costs_; }

 private:
  static bool same_placement(const cost::GroupPlacement& a, const cost::GroupPlacement& b) {
    return a.size == b.size && a.nodes == b.nodes && a.per_node == b.per_node;
  }
  static bool same_cost_groups(const StageGroups& a, const StageGroups& b) {
    return same_placement(a.tp, b.tp) && same_placement(a.cp, b.cp) && same_placement(a.ep, b.ep) &&
           same_placement(a.expert_tp, b.expert_tp) && a.cp_ring_same_node == b.cp_ring_same_node &&
           same_placement(a.cp_a2a, b.cp_a2a) &&
           a.cp_outer_ring_same_node == b.cp_outer_ring_same_node;
  }

  // Full grid: ranks joined by a tensor-, context- or expert-parallel group run every pass
  // together (their collectives synchronise them), so a pass is one rendezvous of that closure.
  void build_sync_groups(int32_t ranks) {
    std::vector<int32_t>& parent = L_.sync_group;
    parent.resize(static_cast<size_t>(ranks));
    std::iota(parent.begin(), parent.end(), 0);
    auto find = [&](int32_t x) {
      while (parent[x] != x) x = parent[x] = parent[parent[x]];
      return x;
    };
    auto unite = [&](int32_t a, int32_t b) { parent[find(a)] = find(b); };
    const bool moe = plan_.model.moe.has_value();
    for (int32_t g = 0; g < ranks; ++g) {
      const RankCoord c = grid_.coord(g);
      unite(g, grid_.rank_at(0, 0, c.dp, c.pp));
      if (moe) {
        unite(g, grid_.expert_rank_at(c.expert_tp, 0, c.expert_dp, c.pp));
        unite(g, grid_.expert_rank_at(0, c.ep, c.expert_dp, c.pp));
      }
    }
    std::vector<int32_t> index(static_cast<size_t>(ranks), -1);
    L_.sync_group_size.clear();
    std::vector<int32_t> group(static_cast<size_t>(ranks));
    for (int32_t g = 0; g < ranks; ++g) {
      const int32_t root = find(g);
      if (index[root] < 0) {
        index[root] = static_cast<int32_t>(L_.sync_group_size.size());
        L_.sync_group_size.push_back(0);
      }
      group[g] = index[root];
      ++L_.sync_group_size[index[root]];
    }
    L_.sync_group = group;
  }

  // (group index, members) of `slot` for engine rank `er`; members 1: the op is local.
  std::pair<int32_t, int32_t> slot_group(int32_t er, Slot slot) const {
    if (!full_) {
      if (slot == kSlotEmbedding) return {0, pp_ > 1 ? 2 : 1};
      if (slot == kSlotGradNorm) return {0, static_cast<int32_t>(pp_)};
      return {0, 1};
    }
    switch (slot) {
      case kSlotSync:
        return {L_.sync_group[er], L_.sync_group_size[L_.sync_group[er]]};
      case kSlotDpCp:
        return {grid_.group_index_of(GroupKind::kDpCp, er), grid_.group_size(GroupKind::kDpCp)};
      case kSlotExpertDp:
        return {grid_.group_index_of(GroupKind::kExpertDp, er),
                grid_.group_size(GroupKind::kExpertDp)};
      case kSlotEmbedding:
        return {grid_.group_index_of(GroupKind::kEmbedding, er), pp_ > 1 ? 2 : 1};
      case kSlotGradNorm:
        if (par_.distributed_optimizer) return {0, grid_.world_size()};
        return {grid_.group_index_of(GroupKind::kTpPp, er), grid_.group_size(GroupKind::kTpPp)};
      case kSlotTp:
        return {grid_.group_index_of(GroupKind::kTp, er), grid_.group_size(GroupKind::kTp)};
      default:
        break;
    }
    return {0, 1};
  }

  // An op of `duration` on `stream` that the members of `slot`'s group run together.
  OpId collective(int32_t er, int32_t stream, Slot slot, int64_t duration, OpLabel label,
                  OpKind kind = OpKind::kCollective) {
    const auto [gi, members] = slot_group(er, slot);
    if (members <= 1) return P_.add_op(er, stream, duration, label, kind);
    auto& table = L_.collectives[slot];
    if (table.size() <= static_cast<size_t>(gi)) table.resize(static_cast<size_t>(gi) + 1);
    auto& seq = table[gi];
    int32_t& k = L_.collective_counts[static_cast<size_t>(er) * kNumSlots + slot];
    if (static_cast<size_t>(k) == seq.size()) seq.push_back(P_.add_rendezvous(members, duration));
    const RendezvousId rv = seq[k++];
    return P_.join(er, stream, rv, kind, label);
  }

  // Records a compute-stream op's cost and the transfers / DP ops it waited on.
  void note(OpId op, const PassCost& cost, bool with_deps) {
    if (L_.meta.size() <= static_cast<size_t>(op)) L_.meta.resize(static_cast<size_t>(op) + 1);
    OpMeta& m = L_.meta[op];
    m.cost = static_cast<int32_t>(L_.costs.size());
    L_.costs.push_back(cost);
    m.dep_begin = static_cast<int32_t>(L_.deps.size());
    if (with_deps)
      for (OpId d : L_.pending) L_.deps.push_back(d);
    m.dep_end = static_cast<int32_t>(L_.deps.size());
  }

  // A compute pass (or piece of one) on the compute stream, after every pending transfer (with
  // overlap_p2p_comm: the pending transfers that block a pass of direction `fwd`).
  OpId compute_op(int32_t er, const PassCost& cost, OpLabel label, bool fwd = true) {
    OpId op =
        full_ ? collective(er, kStreamCompute, kSlotSync, cost.total_ns(), label, OpKind::kCompute)
              : P_.add_op(er, kStreamCompute, cost.total_ns(), label);
    L_.kept.clear();
    if (overlap_p2p_) keep_other_transfers(fwd);
    for (OpId d : L_.pending) P_.add_wait(op, d);
    note(op, cost, true);
    L_.pending.swap(L_.kept);
    L_.group_ops.clear();
    L_.prev_group.clear();
    last_compute_ = op;
    return op;
  }
  // overlap_p2p_comm: moves the pending transfers a pass of direction `fwd` does not wait for
  // from L_.pending to L_.kept.
  void keep_other_transfers(bool fwd) {
    size_t n = 0;
    for (OpId d : L_.pending) {
      const uint8_t k = static_cast<size_t>(d) < L_.p2p_kind.size()
                            ? L_.p2p_kind[d]
                            : static_cast<uint8_t>(kP2pNone);
      const bool own = fwd ? (k == kP2pRecvFwd || (k == kP2pSendFwd && !overlap_sends_))
                           : (k == kP2pRecvBwd || (k == kP2pSendBwd && !overlap_sends_));
      if (k == kP2pNone || own)
        L_.pending[n++] = d;
      else
        L_.kept.push_back(d);
    }
    L_.pending.resize(n);
  }

  // The engine rank of stage `stage` that talks to engine rank `er`.
  int32_t peer_rank(int32_t er, int64_t stage) const {
    if (!full_) return static_cast<int32_t>(stage);
    const RankCoord c = grid_.coord(er);
    return grid_.rank_at(c.tp, c.cp, c.dp, static_cast<int>(stage));
  }
  bool same_node(int32_t a, int32_t b) const {
    const int64_t gpn = plan_.cluster.gpus_per_node;
    return L_.global_rank[a] / gpn == L_.global_rank[b] / gpn;
  }

  // The rendezvous of the next transfer from engine rank `src` to `dst`.
  RendezvousId channel_rv(int32_t src, int32_t dst, bool send) {
    const int64_t s_stage = L_.stage_of_rank[src], d_stage = L_.stage_of_rank[dst];
    const int32_t slot = d_stage == (s_stage + 1) % pp_ ? 0 : 1;
    Lowered::Channel& ch = L_.channels[static_cast<size_t>(src) * 2 + slot];
    int32_t& k = send ? ch.sends : ch.recvs;
    if (static_cast<size_t>(k) == ch.ids.size()) {
      const bool same = same_node(src, dst);
      int64_t& ns = same ? p2p_same_ns_ : p2p_cross_ns_;
      if (ns < 0) {
        if (opt_.pipeline_scatter_gather && dims_.t > 1 && !dims_.sp) {
          const StageGroups& g = L_.groups[L_.stage_of_rank[src]];
          ns =
              cost::p2p_time_ns(plan_.cluster, p2p_bytes_ / static_cast<double>(dims_.t), same) +
              cost::collective_time_ns(plan_.cluster, CollectiveKind::kAllGather, p2p_bytes_, g.tp);
        } else {
          ns = cost::p2p_time_ns(plan_.cluster, p2p_bytes_, same);
        }
      }
      ch.ids.push_back(P_.add_rendezvous(2, ns));
    }
    return ch.ids[k++];
  }

  void p2p(int32_t er, const Action& a) {
    const int32_t peer = peer_rank(er, a.peer);
    const bool send = is_send(a.kind);
    const RendezvousId rv = send ? channel_rv(er, peer, true) : channel_rv(peer, er, false);
    int32_t stream = kStreamSendFwd;
    uint16_t name = names_.send_fwd;
    switch (a.kind) {
      case ActionKind::kSendForward:
        break;
      case ActionKind::kRecvForward:
        stream = kStreamRecvFwd, name = names_.recv_fwd;
        break;
      case ActionKind::kSendBackward:
        stream = kStreamSendBwd, name = names_.send_bwd;
        break;
      default:
        stream = kStreamRecvBwd, name = names_.recv_bwd;
        break;
    }
    const OpId op = P_.join(er, stream, rv, send ? OpKind::kSend : OpKind::kRecv,
                            {name, a.microbatch, a.chunk});
    if (overlap_p2p_) {
      // Posted asynchronously after the previous compute pass (isend / irecv).
      if (L_.p2p_kind.size() <= static_cast<size_t>(op))
        L_.p2p_kind.resize(static_cast<size_t>(op) + 1, kP2pNone);
      L_.p2p_kind[op] = static_cast<uint8_t>(stream - kStreamSendFwd + 1);
      if (last_compute_ != des::kNone) P_.add_wait(op, last_compute_);
      L_.pending.push_back(op);
      return;
    }
    // Posted after the previous compute pass, or after the previous group completed.
    if (L_.prev_group.empty()) {
      if (last_compute_ != des::kNone) P_.add_wait(op, last_compute_);
    } else {
      for (OpId d : L_.prev_group) P_.add_wait(op, d);
    }
    L_.group_ops.push_back(op);
    L_.pending.push_back(op);
    if (a.ends_group) {
      L_.prev_group.swap(L_.group_ops);
      L_.group_ops.clear();
    }
  }

  // ---- data-parallel ops -------------------------------------------------------------------

  int64_t grad_reduce_ns(int64_t stage, const GradBucket& b) const {
    const StageGroups& g = L_.groups[stage];
    const auto kind =
        par_.distributed_optimizer ? CollectiveKind::kReduceScatter : CollectiveKind::kAllReduce;
    return cost::collective_time_ns(plan_.cluster, kind, static_cast<double>(b.numel) * grad_bytes_,
                                    b.expert ? g.expert_dp : g.dp_cp);
  }
  int64_t param_gather_ns(int64_t stage, const GradBucket& b) const {
    const StageGroups& g = L_.groups[stage];
    return cost::collective_time_ns(plan_.cluster, CollectiveKind::kAllGather,
                                    static_cast<double>(b.numel) * param_gather_bytes_,
                                    b.expert ? g.expert_dp : g.dp_cp);
  }
  bool has_dp(int64_t stage, const GradBucket& b) const {
    const StageGroups& g = L_.groups[stage];
    return (b.expert ? g.expert_dp.size : g.dp_cp.size) > 1;
  }
  OpId dp_op(int32_t er, int32_t stream, const GradBucket& b, int64_t ns, uint16_t name,
             int32_t chunk) {
    const Slot slot = b.expert ? kSlotExpertDp : kSlotDpCp;
    const OpId op = collective(er, stream, slot, ns, {name, -1, chunk});
    if (stream == kStreamCompute) {
      for (OpId d : L_.pending) P_.add_wait(op, d);
      note(op, single_cost(Cat::kDp, ns), true);
      L_.pending.clear();
      L_.prev_group.clear();
      last_compute_ = op;
    }
    return op;
  }

  // ---- one engine rank ---------------------------------------------------------------------

  void build_rank(int32_t er) {
    const int64_t stage = L_.stage_of_rank[er];
    const std::span<const Action> acts = sch_.rank(stage);
    L_.pending.clear();
    L_.group_ops.clear();
    L_.prev_group.clear();
    last_compute_ = des::kNone;
    fsdp_two_back_ = des::kNone;

    // Memory present before the step. The stage's parameters on this GPU are its chunks' (the
    // same count as rank_params(), which a test checks, without rank_params' allocation).
    StageParams rp;
    lp_gemm_params_ = 0;
    for (int64_t c = 0; c < vpp_; ++c) {
      const ChunkCosts& ch = L_.chunks.at(stage, c);
      rp.num_layers += ch.num_layers;
      rp.non_expert += ch.dense_params;
      rp.expert += ch.expert_params;
      lp_gemm_params_ += ch.lp_gemm_params;
    }
    const cost::ModelStateBytes ms = cost::sharded_model_state_bytes(
        plan_.training, par_, rp.non_expert, par_.dp * par_.cp, rp.expert, par_.expert_dp());
    if (par_.use_megatron_fsdp) P_.set_initial_memory(er, kMemOther, fsdp_buffers(stage));
    // fp8 / fp4 layers (sim/cost/precision_cost): the quantized weight copies, and the parameter
    // all-gather's bytes per element, GEMM weights quantized with fp8_param_gather.
    const double lp_gemm = static_cast<double>(lp_gemm_params_);
    const double held = static_cast<double>(std::max<int64_t>(1, rp.total()));
    param_gather_bytes_ = (param_bytes_ * (held - lp_gemm) +
                           cost::gemm_weight_gather_bytes(plan_.training) * lp_gemm) /
                          held;
    P_.set_initial_memory(
        er, kMemWeights,
        ms.weights +
            std::llround(cost::low_precision_weight_extra_bytes(plan_.training) * lp_gemm));
    P_.set_initial_memory(er, kMemGrads, ms.grads);
    P_.set_initial_memory(er, kMemOptimizer, ms.optimizer);
    // Sequence parallelism keeps one all-gather buffer of (s/cp, b, h) (Megatron's global
    // memory buffer for the backward's input all-gather).
    if (dims_.sp) P_.set_initial_memory(er, kMemOther, dims_.e * dims_.tokens * dims_.h);

    // First forward / last backward / last W of each chunk.
    L_.first_fwd.assign(static_cast<size_t>(vpp_), -1);
    L_.last_bwd.assign(static_cast<size_t>(vpp_), -1);
    L_.last_w.assign(static_cast<size_t>(vpp_), -1);
    for (int32_t i = 0; i < static_cast<int32_t>(acts.size()); ++i) {
      const Action& a = acts[i];
      if (a.kind == ActionKind::kForward && L_.first_fwd[a.chunk] < 0) L_.first_fwd[a.chunk] = i;
      if (a.kind == ActionKind::kBackward) L_.last_bwd[a.chunk] = i;
      if (a.kind == ActionKind::kWeightGrad) L_.last_w[a.chunk] = i;
    }

    // Parameter all-gathers of the distributed optimizer, overlapped with the first forwards.
    const bool gather_early =
        par_.distributed_optimizer && par_.overlap_param_gather && !fsdp_.weights;
    L_.ag_ops.assign(L_.chunks.buckets.size(), des::kNone);
    if (gather_early) {
      for (int64_t c = 0; c < vpp_; ++c) {
        const ChunkCosts& ch = L_.chunks.at(stage, c);
        for (int32_t b = ch.bucket_end - 1; b >= ch.bucket_begin; --b) {  // forward order
          const GradBucket& bk = L_.chunks.buckets[b];
          if (!has_dp(stage, bk)) continue;
          L_.ag_ops[b] = dp_op(er, kStreamDp, bk, param_gather_ns(stage, bk), names_.param_gather,
                               static_cast<int32_t>(c));
        }
      }
    }

    for (int32_t i = 0; i < static_cast<int32_t>(acts.size()); ++i) {
      const Action& a = acts[i];
      if (is_p2p(a.kind)) {
        p2p(er, a);
        continue;
      }
      const ChunkCosts& ch = L_.chunks.at(stage, a.chunk);
      const OpLabel label{a.kind == ActionKind::kForward      ? names_.fwd
                          : a.kind == ActionKind::kWeightGrad ? names_.wgrad
                          : split_                            ? names_.bwd_input
                                                              : names_.bwd,
                          a.microbatch, a.chunk};
      if (a.kind == ActionKind::kForward)
        forward(er, stage, ch, label, i == L_.first_fwd[a.chunk] && gather_early);
      else if (a.kind == ActionKind::kBackward)
        backward(er, stage, ch, label, i == L_.last_bwd[a.chunk]);
      else
        weight_grad(er, stage, ch, label, i == L_.last_w[a.chunk]);
    }
    tail(er, stage, rp);
  }

  // Fills L_.piece_ends with the (relative, backward-order) unit at which each piece of a
  // bucketed chunk ends: every bucket end, and the chunk's last unit.
  void piece_ends(const ChunkCosts& ch) {
    auto& ends = L_.piece_ends;
    ends.clear();
    for (int32_t b = ch.bucket_begin; b < ch.bucket_end; ++b) {
      const int32_t e = L_.chunks.buckets[b].last_unit;
      if (ends.empty() || ends.back() != e) ends.push_back(e);
    }
    const int32_t last = ch.unit_end - ch.unit_begin - 1;
    if (ends.empty() || ends.back() != last) ends.push_back(last);
  }
  // Splitting pays off only when some bucket is reduced over more than one GPU.
  bool any_dp(int64_t stage, const ChunkCosts& ch) const {
    for (int32_t b = ch.bucket_begin; b < ch.bucket_end; ++b)
      if (has_dp(stage, L_.chunks.buckets[b])) return true;
    return false;
  }
  PassCost unit_sum(const ChunkCosts& ch, int32_t lo, int32_t hi, char which) const {
    PassCost c;
    for (int32_t u = lo; u <= hi; ++u) {
      const ChunkUnit& cu = L_.chunks.units[ch.unit_begin + u];
      c += which == 'F' ? cu.fwd : cu.bwd;
    }
    return c;
  }

  void forward(int32_t er, int64_t stage, const ChunkCosts& ch, OpLabel label, bool gather) {
    const OpId fsdp_ag = fsdp_gather(er, stage, ch, label);
    OpId first = des::kNone, last = des::kNone;
    const auto& buckets = L_.chunks.buckets;
    if (gather && ch.bucketed && any_dp(stage, ch)) {
      // Pieces in forward order (the backward-order pieces reversed), each after the
      // parameter gathers of the buckets holding it (the first bucket of each buffer that ends
      // at or after the piece's first unit).
      piece_ends(ch);
      const auto& ends = L_.piece_ends;
      for (int32_t k = static_cast<int32_t>(ends.size()) - 1; k >= 0; --k) {
        const int32_t lo = k == 0 ? 0 : ends[k - 1] + 1, hi = ends[k];
        const OpId op = compute_op(er, unit_sum(ch, lo, hi, 'F'), label);
        if (opt_.record_trace) segments(op, stage, ch, 'F', lo, hi);
        bool dense_done = false, expert_done = false;
        for (int32_t b = ch.bucket_begin; b < ch.bucket_end; ++b) {
          const GradBucket& bk = buckets[b];
          bool& done = bk.expert ? expert_done : dense_done;
          if (done || bk.last_unit < lo) continue;
          done = true;
          if (L_.ag_ops[b] != des::kNone) P_.add_wait(op, L_.ag_ops[b]);
        }
        if (first == des::kNone) first = op;
        last = op;
      }
    } else {
      const OpId op = compute_op(er, ch.fwd, label);
      if (opt_.record_trace) segments(op, stage, ch, 'F', 0, ch.unit_end - ch.unit_begin - 1);
      if (gather)
        for (int32_t b = ch.bucket_begin; b < ch.bucket_end; ++b)
          if (L_.ag_ops[b] != des::kNone) P_.add_wait(op, L_.ag_ops[b]);
      first = last = op;
    }
    if (fsdp_ag != des::kNone) P_.add_wait(first, fsdp_ag);
    P_.add_memory(first, des::MemWhen::kAtStart, kMemActivations, ch.act_bytes);
    P_.add_memory(first, des::MemWhen::kAtStart, kMemOther, ch.ws_fwd_bytes);
    P_.add_memory(last, des::MemWhen::kAtEnd, kMemOther, -ch.ws_fwd_bytes);
  }

  void backward(int32_t er, int64_t stage, const ChunkCosts& ch, OpLabel label, bool last_mb) {
    const auto& buckets = L_.chunks.buckets;
    const bool reduce_now = last_mb && !split_ && par_.overlap_grad_reduce && !fsdp_.grads;
    const OpId fsdp_ag = fsdp_gather(er, stage, ch, label);
    OpId first = des::kNone, last = des::kNone;
    if (reduce_now && ch.bucketed && any_dp(stage, ch)) {
      // One op per piece; each bucket's reduction starts when the piece completing it ends.
      piece_ends(ch);
      int32_t b = ch.bucket_begin;
      for (size_t k = 0; k < L_.piece_ends.size(); ++k) {
        const int32_t lo = k == 0 ? 0 : L_.piece_ends[k - 1] + 1, hi = L_.piece_ends[k];
        const OpId op = compute_op(er, unit_sum(ch, lo, hi, 'B'), label, false);
        if (opt_.record_trace) segments(op, stage, ch, 'B', lo, hi);
        if (first == des::kNone) first = op;
        last = op;
        for (; b < ch.bucket_end && buckets[b].last_unit <= hi; ++b)
          reduce_bucket(er, stage, b, op, ch);
      }
    } else {
      const PassCost& cost = split_ ? ch.bwd_input : ch.bwd;
      const OpId op = compute_op(er, cost, label, false);
      if (opt_.record_trace)
        segments(op, stage, ch, split_ ? 'I' : 'B', 0, ch.unit_end - ch.unit_begin - 1);
      first = last = op;
      if (reduce_now)
        for (int32_t b = ch.bucket_begin; b < ch.bucket_end; ++b)
          reduce_bucket(er, stage, b, op, ch);
    }
    if (fsdp_ag != des::kNone) P_.add_wait(first, fsdp_ag);
    if (!split_) fsdp_reduce(er, stage, ch, label, last);
    P_.add_memory(first, des::MemWhen::kAtStart, kMemActivations, ch.recompute_bytes);
    P_.add_memory(first, des::MemWhen::kAtStart, kMemOther, ch.ws_bwd_bytes);
    const int64_t kept = split_ ? ch.weight_input_bytes : 0;
    if (split_) P_.add_memory(first, des::MemWhen::kAtStart, kMemActivations, ch.weight_dy_bytes);
    P_.add_memory(last, des::MemWhen::kAtEnd, kMemActivations,
                  -(ch.act_bytes - kept) - ch.recompute_bytes);
    P_.add_memory(last, des::MemWhen::kAtEnd, kMemOther, -ch.ws_bwd_bytes);
  }

  void weight_grad(int32_t er, int64_t stage, const ChunkCosts& ch, OpLabel label, bool last_mb) {
    const OpId op = compute_op(er, ch.bwd_weight, label, false);
    if (opt_.record_trace) segments(op, stage, ch, 'W', 0, ch.unit_end - ch.unit_begin - 1);
    P_.add_memory(op, des::MemWhen::kAtEnd, kMemActivations,
                  -ch.weight_input_bytes - ch.weight_dy_bytes);
    fsdp_reduce(er, stage, ch, label, op);
    if (last_mb && par_.overlap_grad_reduce && !fsdp_.grads)
      for (int32_t b = ch.bucket_begin; b < ch.bucket_end; ++b) reduce_bucket(er, stage, b, op, ch);
  }

  // ---- Megatron-FSDP ------------------------------------------------------------------------

  // The chunk's parameters all-gathered (dense over dp·cp, experts over expert dp) before a
  // pass, issued once the pass two passes back is done (its buffer is the one reused).
  OpId fsdp_gather(int32_t er, int64_t stage, const ChunkCosts& ch, OpLabel label) {
    if (!fsdp_.weights) return des::kNone;
    const int64_t ns =
        chunk_collective_ns(plan_, CollectiveKind::kAllGather, L_.groups[stage], ch, param_bytes_);
    const OpId op = collective(er, kStreamDp, kSlotDpCp, ns,
                               {names_.param_gather, label.microbatch, label.chunk});
    if (fsdp_two_back_ != des::kNone) P_.add_wait(op, fsdp_two_back_);
    fsdp_two_back_ = last_compute_;  // the pass before this one: two back for the next gather
    return op;
  }

  // The chunk's gradients reduce-scattered after its backward (or weight-gradient) pass.
  void fsdp_reduce(int32_t er, int64_t stage, const ChunkCosts& ch, OpLabel label, OpId after) {
    if (!fsdp_.grads || after == des::kNone) return;
    const int64_t ns = chunk_collective_ns(plan_, CollectiveKind::kReduceScatter, L_.groups[stage],
                                           ch, grad_bytes_);
    const OpId op = collective(er, kStreamDp, kSlotDpCp, ns,
                               {names_.grad_reduce, label.microbatch, label.chunk});
    P_.add_wait(op, after);
  }

  // Megatron-FSDP's buffers on this stage: units are its largest transformer layer.
  int64_t fsdp_buffers(int64_t stage) const {
    int64_t unit = 0;
    for (int64_t c = 0; c < vpp_; ++c) {
      const ChunkCosts& ch = L_.chunks.at(stage, c);
      for (int32_t u = ch.unit_begin; u < ch.unit_end; ++u) {
        const ChunkUnit& cu = L_.chunks.units[u];
        if (cu.kind == ChunkUnit::kLayer) unit = std::max(unit, cu.dense_params + cu.expert_params);
      }
    }
    return cost::fsdp_buffer_bytes(plan_.training, par_, unit);
  }

  void reduce_bucket(int32_t er, int64_t stage, int32_t b, OpId after, const ChunkCosts& ch) {
    const GradBucket& bk = L_.chunks.buckets[b];
    if (!has_dp(stage, bk)) return;
    const OpId op = dp_op(er, kStreamDp, bk, grad_reduce_ns(stage, bk), names_.grad_reduce,
                          static_cast<int32_t>(ch.chunk));
    P_.add_wait(op, after);
  }

  // After the last pass: the rest of the step (finalize_model_grads and the optimizer).
  void tail(int32_t er, int64_t stage, const StageParams& rp) {
    // Wait for the data-parallel stream (finish_grad_sync) and the last p2p group.
    const OpId dp_last = P_.stream_last(P_.stream_index(er, kStreamDp));
    if (dp_last != des::kNone) L_.pending.push_back(dp_last);
    if (!par_.overlap_grad_reduce && !fsdp_.grads) {
      for (int64_t c = 0; c < vpp_; ++c) {
        const ChunkCosts& ch = L_.chunks.at(stage, c);
        for (int32_t b = ch.bucket_begin; b < ch.bucket_end; ++b) {
          const GradBucket& bk = L_.chunks.buckets[b];
          if (has_dp(stage, bk))
            dp_op(er, kStreamCompute, bk, grad_reduce_ns(stage, bk), names_.grad_reduce,
                  static_cast<int32_t>(c));
        }
      }
    }
    const ModelSpec& m = plan_.model;
    auto inline_op = [&](Slot slot, Cat cat, int64_t ns, uint16_t name) {
      const OpId op = collective(
          er, kStreamCompute, slot, ns, {name, -1, -1},
          cat == Cat::kOptimizer && slot == kNumSlots ? OpKind::kCompute : OpKind::kCollective);
      for (OpId d : L_.pending) P_.add_wait(op, d);
      note(op, single_cost(cat, ns), true);
      L_.pending.clear();
      L_.prev_group.clear();
      last_compute_ = op;
      return op;
    };
    const StageGroups& g = L_.groups[stage];
    if (pp_ > 1 && m.tied_embeddings && (stage == 0 || stage == pp_ - 1)) {
      const double bytes = static_cast<double>(dims_.vocab / dims_.t * dims_.h) * grad_bytes_;
      const cost::GroupPlacement pair{2, g.embedding_same_node ? 1 : 2,
                                      g.embedding_same_node ? 2 : 1};
      inline_op(kSlotEmbedding, Cat::kDp,
                cost::collective_time_ns(plan_.cluster, CollectiveKind::kAllReduce, bytes, pair),
                names_.embedding_ar);
    }
    if (dims_.sp) {
      const int64_t norm = (m.normalization == Normalization::kLayerNorm ? 2 : 1) * m.hidden_size;
      const double bytes = static_cast<double>(2 * rp.num_layers * norm) * grad_bytes_;
      inline_op(kSlotTp, Cat::kTp,
                cost::collective_time_ns(plan_.cluster, CollectiveKind::kAllReduce, bytes, g.tp),
                names_.sp_norm_ar);
    }
    // Gradient norm: one fp32 all-reduce over the model-parallel group (the whole world with
    // the distributed optimizer, whose shards hold different gradients).
    const cost::GroupPlacement& norm_group =
        par_.distributed_optimizer ? g.world : g.model_parallel;
    inline_op(kSlotGradNorm, Cat::kOptimizer,
              cost::collective_time_ns(plan_.cluster, CollectiveKind::kAllReduce, 4.0, norm_group),
              names_.grad_norm_ar);
    int64_t owned = rp.total();
    if (par_.distributed_optimizer)
      owned = (rp.non_expert + par_.dp * par_.cp - 1) / (par_.dp * par_.cp) +
              (rp.expert + par_.expert_dp() - 1) / par_.expert_dp();
    // fp8 / fp4: the GEMM weights are quantized once per step (sim/cost/precision_cost); the
    // precision-aware optimizer's 16-bit moments move fewer bytes (sim/cost/dp_sharding_memory).
    const GpuSpec& opt_gpu = plan_.cluster.gpu_for(plan_.training.implementation);
    const double quantize_weights = cost::weight_quantize_bytes_per_param(plan_.training) *
                                    static_cast<double>(lp_gemm_params_);
    const double saved =
        cost::optimizer_step_bytes_saved(plan_.training) * static_cast<double>(owned);
    // The executor zeroes the word embedding's gradient where no output layer's GEMM writes it
    // first (untied, or the first of several stages); the norms', biases' and position
    // embedding's small zeroings are left out.
    const int64_t filled = stage == 0 && (!plan_.model.tied_embeddings || pp_ > 1)
                               ? dims_.vocab / dims_.t * dims_.h
                               : 0;
    int64_t opt_ns = optimizer_time_ns(plan_, owned, rp.total(), filled);
    if (saved > 0)
      opt_ns = std::max<int64_t>(0, opt_ns - cost::memory_bound_time_ns(opt_gpu, saved));
    // --optimizer-cpu-offload: part of the step moves to the host (sim/cost/offload_cost).
    if (plan_.training.optimizer_cpu_offload)
      opt_ns =
          cost::offloaded_optimizer_step(plan_.training, plan_.cluster, owned, opt_ns).total_ns();
    if (quantize_weights > 0) opt_ns += cost::memory_bound_time_ns(opt_gpu, quantize_weights);
    inline_op(kNumSlots, Cat::kOptimizer, opt_ns, names_.optimizer);
    if (par_.distributed_optimizer && !par_.overlap_param_gather && !fsdp_.weights) {
      for (int64_t c = 0; c < vpp_; ++c) {
        const ChunkCosts& ch = L_.chunks.at(stage, c);
        for (int32_t b = ch.bucket_end - 1; b >= ch.bucket_begin; --b) {
          const GradBucket& bk = L_.chunks.buckets[b];
          if (has_dp(stage, bk))
            dp_op(er, kStreamCompute, bk, param_gather_ns(stage, bk), names_.param_gather,
                  static_cast<int32_t>(c));
        }
      }
    }
  }

  void check_channels(int32_t ranks) {
    for (int32_t r = 0; r < ranks; ++r)
      for (int32_t slot = 0; slot < 2; ++slot) {
        const Lowered::Channel& ch = L_.channels[static_cast<size_t>(r) * 2 + slot];
        if (ch.sends == ch.recvs) continue;
        const int64_t s = L_.stage_of_rank[r];
        const int64_t peer = slot == 0 ? (s + 1) % pp_ : (s - 1 + pp_) % pp_;
        throw Error(cat("schedule: pipeline rank ", s, " sends ", ch.sends, " tensor",
                        ch.sends == 1 ? "" : "s", " to rank ", peer, " but rank ", peer,
                        " receives ", ch.recvs, " from it"));
      }
  }

  // ---- trace segments ----------------------------------------------------------------------

  // Appends the items of units [lo, hi] (relative, backward order) of `ch` for pass `which`
  // ('F' forward, 'B' backward, 'I' input gradients, 'W' weight gradients) as op's segments.
  void segments(OpId op, int64_t stage, const ChunkCosts& ch, char which, int32_t lo, int32_t hi) {
    const PlanCosts& pc = trace_costs_[stage];
    auto emit = [&](const Pass& pass, int32_t layer, bool recompute) {
      for (const CostItem& it : pass.items) {
        std::string name;
        if (layer >= 0)
          name = cat("L", layer, recompute ? " re " : " ", it.name);
        else
          name = it.name;
        P_.add_segment(op, segment_name(name), it.ns,
                       it.communication ? OpKind::kCollective : OpKind::kCompute);
      }
    };
    auto unit_pass = [&](const ChunkUnit& u) {
      const LayerCosts& lc =
          u.kind == ChunkUnit::kLayer ? layer_costs_of(pc, plan_, u.layer) : pc.dense;
      if (u.kind == ChunkUnit::kLayer) {
        if (which == 'F') {
          emit(lc.fwd, u.layer, false);
          if (u.offloaded) emit(lc.offload_fwd, u.layer, false);
          return;
        }
        if (which == 'W') return emit(lc.bwd_weight, u.layer, false);
        if (u.offloaded) emit(lc.offload_bwd, u.layer, false);
        if (u.recompute_attention) emit(lc.recompute_fwd, u.layer, true);
        for (int32_t l = u.recompute_first; l < u.recompute_first + u.recompute_count; ++l)
          emit(layer_costs_of(pc, plan_, l).fwd, l, true);
        return emit(which == 'B' ? lc.bwd : lc.bwd_input, u.layer, false);
      }
      const ExtraCosts& x = u.kind == ChunkUnit::kEmbedding ? pc.embedding : pc.output;
      emit(which == 'F'   ? x.fwd
           : which == 'B' ? x.bwd
           : which == 'I' ? x.bwd_input
                          : x.bwd_weight,
           -1, false);
    };
    if (which == 'F') {
      for (int32_t u = hi; u >= lo; --u) unit_pass(L_.chunks.units[ch.unit_begin + u]);
    } else {
      for (int32_t u = lo; u <= hi; ++u) unit_pass(L_.chunks.units[ch.unit_begin + u]);
    }
  }

  uint16_t segment_name(const std::string& name) {
    auto it = segment_names_.find(name);
    if (it != segment_names_.end()) return it->second;
    const uint16_t id = P_.intern_name(name);
    segment_names_.emplace(name, id);
    return id;
  }

  const Plan& plan_;
  const ParallelConfig& par_;
  const Schedule& sch_;
  const RankGrid& grid_;
  const SimOptions& opt_;
  Lowered& L_;
  des::Program& P_;
  int64_t pp_ = 1, vpp_ = 1;
  bool full_ = false, split_ = false;
  bool overlap_p2p_ = false, overlap_sends_ = false;  // overlap_p2p_comm (+ warmup_flush)
  PlanDims dims_;
  Names names_{};
  double p2p_bytes_ = 0, grad_bytes_ = 4, param_bytes_ = 2;
  // The rank being built: its GEMM weights in fp8 / fp4 layers, and the parameter all-gather's
  // bytes per element (param_bytes_, less with fp8_param_gather / fp4_param_gather).
  int64_t lp_gemm_params_ = 0;
  double param_gather_bytes_ = 2;
  int64_t p2p_same_ns_ = -1, p2p_cross_ns_ = -1;  // one transfer inside a node / across nodes
  OpId last_compute_ = des::kNone;
  cost::DpShardedParts fsdp_ = fsdp_parts(par_);  // what Megatron-FSDP shards (none without it)
  OpId fsdp_two_back_ = des::kNone;  // the compute op two passes before the next gather
  std::vector<PlanCosts> trace_costs_;
  std::unordered_map<std::string, uint16_t> segment_names_;
};

}  // namespace

void lower(const Plan& plan, const Schedule& schedule, const RankGrid& grid,
           const SimOptions& options, Lowered& out) {
  Builder b(plan, schedule, grid, options, out);
  b.run();
}

}  // namespace mplan::sim
