// What each software stack can run, for the sweep's --stack: Megatron-LM (megatron-te,
// megatron-local) has no zb-h1 or gpipe schedule; mplan's executor refuses what
// exec/runner/trainer.cpp's check_executable refuses (context or expert parallelism, fp16, bf16
// main gradients, optimizer state other than fp32, fp8 / fp4, multi-latent attention,
// multi-token prediction, sliding windows, tensor-parallel userbuffer overlap, Megatron-FSDP,
// partial distributed optimizers, a mixture-of-experts model, a pipeline chunk without a layer),
// under the same field (tied by tests/exec/runner/trainer_test.cpp). Invariant: a plan the stack
// runs gives no violation; each refusal names the field and the stack.
#pragma once

#include <optional>

#include "src/plan/plan.hpp"
#include "src/plan/validate.hpp"

namespace mplan::sweep {

// The first reason the plan's training.implementation cannot run `plan`, or nothing.
std::optional<Violation> stack_violation(const Plan& plan);

// Whether the stack overlaps the interleaved schedule's pipeline sends and receives with the
// passes (overlap_p2p_comm; Megatron-LM does, mplan's executor blocks on them).
bool stack_overlaps_p2p(Implementation impl);
// Whether the stack offloads activations to host memory (cpu_offloading_num_layers and
// fine-grained offloading; Megatron-LM does, mplan's executor keeps them on the GPU).
bool stack_offloads_activations(Implementation impl);
// Whether the stack overlaps sequence parallelism's collectives with the GEMMs (tp_comm_overlap:
// Transformer Engine's userbuffers, so Megatron-LM with Transformer Engine only).
bool stack_overlaps_tp_comm(Implementation impl);
// Whether the stack shards data parallelism with Megatron-FSDP (Megatron-LM does).
bool stack_runs_megatron_fsdp(Implementation impl);

}  // namespace mplan::sweep
