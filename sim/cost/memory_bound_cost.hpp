// Time of a memory-bound op (norms, elementwise, softmax, optimizer update, casts): the bytes it
// reads and writes over the HBM bandwidth times an achieved fraction from the hardware profile —
// the kind's own curve over bytes where the profile has one (memory_bound_kinds, measured by
// `mplan calibrate`), else the profile's single memory_bound_efficiency over the cost model's
// pass counts. The bytes each kind moves are defined here, once, for the simulator and the
// calibration alike. Invariant: linear in bytes for a fixed efficiency; zero bytes take zero time.
#pragma once

#include <cstdint>

#include "src/plan/cluster_spec.hpp"

namespace mplan::cost {

// bytes / (hbm_bandwidth_gbps · 1e9 · memory_bound_efficiency), in seconds.
double memory_bound_seconds(const GpuSpec& gpu, double bytes);
int64_t memory_bound_time_ns(const GpuSpec& gpu, double bytes);

// The bytes a kernel of kind `k` reads and writes on `rows` × `cols` elements of `e` bytes
// (activations; fp32 where the kind says so):
//   copy 2rc·e; add (out = a + b; the position-embedding add too) 3rc·e;
//   layernorm forward 2rc·e + 8r (mean, rstd); backward with the residual-gradient add
//   (read dy, x, dres; write dres) 4rc·e + 8r; rmsnorm the same with 4r;
//   gelu forward 2rc·e, backward 3rc·e (c = F); swiglu forward 3rc·e, backward 5rc·e (c = F, the
//   output width); bias gradient rc·e (column sums); rope 2rc·e (c = the rotated Q and K width);
//   embedding forward 2rc·e + 4r (token ids); embedding backward rc·e + 8rc (fp32 rows read and
//   written); position-embedding backward rc·e; cross entropy 4rc·e + 16r (c = V/t: max, sum of
//   exp, loss and gradient in place); AdamW 30r (fp32 master, gradient, m, v read, three written,
//   the 16-bit copy written; c = 1); gradient norm 4r; fill 4r (fp32).
double mem_kernel_bytes(MemKernel k, double rows, double cols, int64_t e);

// Time of one kernel of kind `k` moving `bytes` (mem_kernel_bytes) in `kernels` launches: with
// the kind's curve, bytes / (HBM · curve(bytes)); without it, `legacy_bytes` (the cost model's
// pass count) / (HBM · memory_bound_efficiency). A row-wise kind measured at several row widths
// (GpuSpec::memory_bound_widths) takes the curve of the width nearest `width` in octaves (width
// 0: the kind's curve). The profile's per-kernel costs apply (sim/cost/kernel_overhead.hpp).
int64_t mem_kernel_time_ns(const GpuSpec& gpu, MemKernel k, double bytes, double legacy_bytes,
                           int kernels = 1, double width = 0);
// Whether the profile has a curve of its own for `k`.
bool has_kind_rate(const GpuSpec& gpu, MemKernel k);

}  // namespace mplan::cost
