// The sweep's search space for N GPUs: every candidate in a fixed, documented order (the order
// is the final tie-break of the ranking, so it must not depend on anything but the inputs).
// The space is structural — tp·cp·pp·dp = N and each knob's listed values — and deliberately wider
// than what is valid: validate() judges every candidate, and the sweep counts what it rejects.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/sweep/candidate.hpp"
#include "sim/sweep/fixed_axes.hpp"
#include "src/model/model_spec.hpp"
#include "src/plan/training_config.hpp"

namespace mplan::sweep {

// Micro-batch sizes tried (those <= global batch / dp; 1 always).
inline constexpr int32_t kMicroBatchSizes[] = {1, 2, 4, 8, 16};

struct SpaceInputs {
  const ModelSpec* model = nullptr;
  int64_t gpus = 0;
  int64_t gpus_per_node = 0;
  int64_t global_batch_size = 0;
  FixedAxes fixed;
  double output_weight = 0;  // set by enumerate_candidates (output_layer_weight)
  // The stack the plans are for (sim/sweep/stack_rules): whether the interleaved schedule
  // overlaps its pipeline transfers and whether activation offloading is tried.
  Implementation implementation = Implementation::kMegatronTe;
};

// Activation offloading the sweep tries at recompute none, beside none (stacks that offload):
// with pp 1 (Megatron's rule) cpu_offloading_num_layers of a quarter, half and all but one of the
// layers; with Transformer Engine fine-grained offloading of the attention's large inputs
// (core_attn + attn_proj) and of every module with offloadable inputs.
inline constexpr uint32_t kOffloadAttention = kOffloadCoreAttn | kOffloadAttnProj;

// The candidates, in loop order tp, cp, pp (dp = N / (tp·cp·pp)), ep, etp, (vpp, schedule),
// micro-batch, sequence parallel, recompute, data-parallel sharding, activation offloading, cp
// exchange (innermost: candidates that differ only in it are adjacent, and the sweep validates
// and bounds the memory of the first for all); each loop ascending:
//  tp    divisors of N up to gpus_per_node (tensor parallelism stays inside a node)
//  cp    divisors of N / tp
//  pp    divisors of N / (tp·cp); when pp does not divide num_layers, the first and last stage
//        take fewer layers (uneven_split) so the middle stages get ceil(layers / pp) each (pp
//        larger than that split allows stays, and validate() rejects it)
//  cp exchange  cp 1: none (p2p, the plan default); cp > 1: p2p, all_gather, a2a (when the cp
//        ranks can split each tp rank's heads and query groups: cp_a2a_splits_heads), a2a+p2p
//        with an all-to-all group of every h, 1 < h < cp, h | cp, inside a node (tp·h <=
//        gpus_per_node) that splits the heads
//  ep    dense: 1; MoE: divisors of N / pp up to num_experts
//  etp   dense: tp (the plan default); MoE: 1 and tp
//  vpp, schedule   pp 1: 1f1b; pp > 1: 1f1b and zb-h1 at vpp 1, interleaved at every
//        vpp >= 2 for which the layers split into whole chunks (vpp divides L / pp, or an
//        uneven_split for that vpp exists)
//  split for each (vpp, schedule): uneven_split's (even when pp divides L); at vpp 1 also
//        the balanced_split that lightens the loss stage by output_layer_weight, then the one
//        that lightens the embedding stage by as much too, each only when it differs
//  mbs   kMicroBatchSizes up to global_batch / dp
//  sp    off; on when tp > 1 (Megatron turns it off at tp 1); with Transformer Engine also on
//        with tp_comm_overlap (userbuffers; the GEMMs slow while they overlap, so not always
//        faster)
//  recompute  none, selective, full
//  dp sharding  none; when a data-parallel group has more than one rank (dp·cp or expert dp) the
//        distributed optimizer; when dp·cp > 1 and the stack runs it, Megatron-FSDP with
//        optim_grads (ZeRO-2) and optim_grads_params (ZeRO-3) (its no_shard and optim keep
//        DDP's and the distributed optimizer's bytes)
//  offload    none; at recompute none also the variants above kOffloadAttention (not for
//        stacks that keep activations on the GPU)
// overlap_p2p_comm is not an axis: interleaved candidates overlap when the stack does (never
// slower in the simulator: a pass waits only for the transfers of its own direction; tested in
// candidate_space_test), the others have nothing to overlap.
// A fixed axis replaces its list by the one value (which may be outside the list, e.g. tp 16),
// subject to the product rule; a fixed schedule or vpp alone picks the matching pairs. A fixed
// cp exchange applies to cp > 1 layouts (cp 1 stays, with none); a fixed offload is tried with
// every recompute (validate() judges it); a fixed fsdp strategy (which may be no_shard or optim)
// replaces the sharding list; fixed tp_comm_overlap=on leaves only sp on with it.
std::vector<Candidate> enumerate_candidates(const SpaceInputs& in);

// The uneven split enumerate_candidates uses for `pp` stages of `num_layers` layers in chunks of
// `vpp`: {first, last} layers, or {0, 0} when pp divides num_layers (even) or no such split
// exists. Middle stages take m = ceil(L / pp) rounded up to a multiple of vpp; the deficit
// d = pp·m - L, in whole chunks of vpp layers, is taken off the first (the larger half) and
// last stage, which also hold the embedding and the output layer (as Llama 3 405B's 126 layers
// on 16 stages: 7 + 14 x 8 + 7; with vpp 2: 6 + 14 x 8 + 8). Each of them keeps >= vpp layers.
struct UnevenSplit {
  int64_t first = 0;
  int64_t last = 0;
  int64_t middle = 0;  // layers of each middle stage (num_layers / pp when even)
};
UnevenSplit uneven_split(int64_t num_layers, int64_t pp, int64_t vpp = 1);

// The output layer's forward FLOPs in units of an average transformer layer's (Llama 3 8B's
// 128k vocabulary: about 2.3 layers; GPT-3 175B: about 0.3).
double output_layer_weight(const ModelSpec& m);

// The Megatron first/last split (middle stages equal, every stage whole chunks of vpp layers,
// both ends >= vpp layers) whose heaviest stage is lightest when the first stage also carries
// `first_weight` layers' worth of work and the last `last_weight` (the output layer and loss);
// ties go to the smaller middle stages. {0, 0, 0} when pp <= 1 or no split exists.
UnevenSplit balanced_split(int64_t num_layers, int64_t pp, int64_t vpp, double first_weight,
                           double last_weight);

// Divisors of n, ascending.
std::vector<int64_t> divisors(int64_t n);

}  // namespace mplan::sweep
