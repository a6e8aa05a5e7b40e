// Costs of fp8 / fp4 training (src/plan/low_precision says which layers and tensors): the GEMM
// rate of each precision, the quantization (cast and amax / scale) kernels as memory-bound
// traffic, and the bytes of low-precision weights. Invariant: for bf16 (neither fp8 nor fp4)
// every extra cost here is zero and gemm_gpu returns the GPU unchanged.
#pragma once

#include "src/plan/cluster_spec.hpp"
#include "src/plan/low_precision.hpp"

namespace mplan::cost {

// The dense tensor-core peak of `p` (peak_bf16_tflops, peak_fp8_tflops, peak_fp4_tflops); an
// Error naming the profile field when the GPU lacks it.
double gemm_peak_tflops(const GpuSpec& gpu, GemmPrecision p);

// The GPU as the GEMMs of precision `p` see it: peak_bf16_tflops replaced by that precision's
// peak, the gemm_efficiency curve unchanged (the achieved fraction of peak at a given FLOP count
// taken to be the same in every precision).
GpuSpec gemm_gpu(const GpuSpec& gpu, GemmPrecision p);

// Bytes one quantization kernel moves for `elems` 16-bit elements: the input read
// quantize_read_passes times (2 bytes) and two quantized copies written (row-wise for this GEMM,
// column-wise / transposed for the GEMM of the other pass: TE's cast_transpose, MXFP8's and
// NVFP4's row- and column-wise data), each quantized_bytes_per_element with its scales.
double quantize_bytes(const TrainingConfig& t, double elems);

// Weight memory per GEMM weight of a low-precision layer, beyond the 16-bit parameter that
// model_state_memory counts: without fp8_param_gather / fp4_param_gather Transformer Engine keeps
// the two quantized copies of each weight across the micro-batches of a step (its weight
// workspace); with it the parameter itself is the quantized row-wise copy (replacing the 16-bit
// one) and the column-wise copy is made after the all-gather.
double low_precision_weight_extra_bytes(const TrainingConfig& t);

// Bytes per GEMM weight of the distributed optimizer's parameter all-gather: the quantized size
// with fp8_param_gather / fp4_param_gather, else the 16-bit parameter (2).
double gemm_weight_gather_bytes(const TrainingConfig& t);

// Once per step, per GEMM weight a GPU holds in a low-precision layer: quantizing it (read the
// 16-bit or fp32 master value, write both quantized copies).
double weight_quantize_bytes_per_param(const TrainingConfig& t);

}  // namespace mplan::cost
