// Builds the synthetic 1F1B program: rendezvous ids for every transfer are made first (one table
// per direction), then each stage's ops are appended in its 1F1B order.
#include "sim/des/synthetic_pipeline.hpp"

#include <algorithm>
#include <vector>

#include "src/common/error.hpp"

namespace mplan::des {

void build_synthetic_1f1b(const SyntheticPipeline& s, Program& out) {
  const int32_t p = s.stages, m = s.microbatches, L = s.layers_per_stage;
  MPLAN_CHECK(p >= 1 && m >= 1 && L >= 1, "stages ", p, " microbatches ", m, " layers ", L);
  out.reset(p, kSynNumStreams);
  const size_t per_layer = s.tp_collective_ns > 0 ? 4 : 1;
  out.reserve(static_cast<size_t>(p) * m * (2 * L * per_layer + 4) + 2 * p * L,
              static_cast<size_t>(p) * m * 4 + p * L, static_cast<size_t>(p) * m * L * 2);
  out.set_stream_name(kSynCompute, "compute");
  out.set_stream_name(kSynSendFwd, "send_fwd");
  out.set_stream_name(kSynRecvFwd, "recv_fwd");
  out.set_stream_name(kSynSendBwd, "send_bwd");
  out.set_stream_name(kSynRecvBwd, "recv_bwd");
  out.set_stream_name(kSynDp, "dp");
  out.set_mem_class_name(kSynActivationClass, "activations");
  const uint16_t n_fwd = out.intern_name("forward");
  const uint16_t n_bwd = out.intern_name("backward");
  const uint16_t n_tp = out.intern_name("tp_collective");
  const uint16_t n_send_fwd = out.intern_name("send_fwd");
  const uint16_t n_recv_fwd = out.intern_name("recv_fwd");
  const uint16_t n_send_bwd = out.intern_name("send_bwd");
  const uint16_t n_recv_bwd = out.intern_name("recv_bwd");
  const uint16_t n_dp = out.intern_name("dp_reduce");
  const uint16_t n_opt = out.intern_name("optimizer");

  // fwd[st * m + i]: transfer of micro-batch i's activation from stage st to st + 1;
  // bwd[st * m + i]: its gradient from stage st + 1 back to st.
  std::vector<RendezvousId> fwd(static_cast<size_t>(std::max(p - 1, 0)) * m);
  std::vector<RendezvousId> bwd(fwd.size());
  for (size_t i = 0; i < fwd.size(); ++i) {
    fwd[i] = out.add_rendezvous(2, s.p2p_ns);
    bwd[i] = out.add_rendezvous(2, s.p2p_ns);
  }

  // Appends one layer's pass on the compute stream; returns its first and last op.
  auto pass = [&](int32_t st, int64_t ns, uint16_t name, int32_t mb, int32_t layer) {
    OpLabel lab{name, mb, layer};
    if (s.tp_collective_ns == 0) {
      OpId op = out.add_op(st, kSynCompute, ns, lab);
      return std::pair<OpId, OpId>{op, op};
    }
    OpId first = out.add_op(st, kSynCompute, ns / 2, lab);
    out.add_op(st, kSynCompute, s.tp_collective_ns, {n_tp, mb, layer}, OpKind::kCollective);
    out.add_op(st, kSynCompute, ns - ns / 2, lab);
    OpId last =
        out.add_op(st, kSynCompute, s.tp_collective_ns, {n_tp, mb, layer}, OpKind::kCollective);
    return std::pair<OpId, OpId>{first, last};
  };

  for (int32_t st = 0; st < p; ++st) {
    std::vector<OpId> last_backward(static_cast<size_t>(L), kNone);
    auto forward = [&](int32_t mb) {
      OpId recv = kNone;
      if (st > 0)
        recv = out.add_recv(st, kSynRecvFwd, fwd[(st - 1) * m + mb], {n_recv_fwd, mb, -1});
      OpId last = kNone;
      for (int32_t l = 0; l < L; ++l) {
        auto [first, end] = pass(st, s.forward_ns, n_fwd, mb, l);
        if (l == 0 && recv != kNone) out.add_wait(first, recv);
        out.add_memory(first, MemWhen::kAtStart, kSynActivationClass, s.activation_bytes);
        last = end;
      }
      if (st < p - 1) {
        OpId send = out.add_send(st, kSynSendFwd, fwd[st * m + mb], {n_send_fwd, mb, -1});
        out.add_wait(send, last);
      }
    };
    auto backward = [&](int32_t mb) {
      OpId recv = kNone;
      if (st < p - 1) recv = out.add_recv(st, kSynRecvBwd, bwd[st * m + mb], {n_recv_bwd, mb, -1});
      OpId last = kNone;
      for (int32_t l = L - 1; l >= 0; --l) {
        auto [first, end] = pass(st, s.backward_ns, n_bwd, mb, l);
        if (l == L - 1 && recv != kNone) out.add_wait(first, recv);
        out.add_memory(end, MemWhen::kAtEnd, kSynActivationClass, -s.activation_bytes);
        last_backward[l] = end;
        last = end;
      }
      if (st > 0) {
        OpId send = out.add_send(st, kSynSendBwd, bwd[(st - 1) * m + mb], {n_send_bwd, mb, -1});
        out.add_wait(send, last);
      }
      if (mb == m - 1 && s.dp_reduce_ns > 0) {  // gradients of this stage are final
        for (int32_t l = L - 1; l >= 0; --l) {
          OpId dp = out.add_op(st, kSynDp, s.dp_reduce_ns, {n_dp, -1, l}, OpKind::kCollective);
          out.add_wait(dp, last_backward[l]);
        }
      }
    };
    const int32_t warmup = std::min(p - st - 1, m);
    for (int32_t i = 0; i < warmup; ++i) forward(i);
    for (int32_t i = 0; i < m - warmup; ++i) {
      forward(warmup + i);
      backward(i);
    }
    for (int32_t i = m - warmup; i < m; ++i) backward(i);
    if (s.optimizer_ns > 0) {
      OpId opt = out.add_op(st, kSynCompute, s.optimizer_ns, {n_opt, -1, -1});
      // The DP stream runs its reductions in order: waiting on its last one waits on all.
      if (s.dp_reduce_ns > 0) out.add_wait(opt, out.stream_last(out.stream_index(st, kSynDp)));
    }
  }
}

}  // namespace mplan::des
