// fp8 / fp4 costs. Sources: NVIDIA datasheets for the peaks (configs/clusters/*.json, each with
// its source); Transformer Engine's Linear / LayerNormLinear / GroupedLinear (the inputs and output
// gradients are quantized per GEMM, with a transposed or column-wise copy for the other pass; the
// weights once per step into a workspace reused by every micro-batch, is_first_microbatch) and
// its recipes (transformer_engine/common/recipe) for the scale layouts (src/plan/low_precision).
#include "sim/cost/precision_cost.hpp"

#include "src/common/error.hpp"

namespace mplan::cost {

double gemm_peak_tflops(const GpuSpec& gpu, GemmPrecision p) {
  switch (p) {
    case GemmPrecision::kBf16:
      return gpu.peak_bf16_tflops;
    case GemmPrecision::kFp8:
      if (gpu.peak_fp8_tflops <= 0)
        throw Error(cat("cluster.gpu.peak_fp8_tflops: missing in profile '", gpu.name,
                        "'; the simulator needs it to time fp8 GEMMs"));
      return gpu.peak_fp8_tflops;
    case GemmPrecision::kFp4:
      if (gpu.peak_fp4_tflops <= 0)
        throw Error(cat("cluster.gpu.peak_fp4_tflops: missing in profile '", gpu.name,
                        "'; the simulator needs it to time fp4 GEMMs"));
      return gpu.peak_fp4_tflops;
  }
  return gpu.peak_bf16_tflops;
}

GpuSpec gemm_gpu(const GpuSpec& gpu, GemmPrecision p) {
  GpuSpec g = gpu;
  g.peak_bf16_tflops = gemm_peak_tflops(gpu, p);
  return g;
}

double quantize_bytes(const TrainingConfig& t, double elems) {
  if (!low_precision(t)) return 0;
  const double read = 2.0 * static_cast<double>(quantize_read_passes(t));
  return elems * (read + 2.0 * quantized_bytes_per_element(t));
}

namespace {
bool param_gather(const TrainingConfig& t) {
  return gemm_precision(t) == GemmPrecision::kFp8 ? t.fp8_param_gather : t.fp4_param_gather;
}
}  // namespace

double low_precision_weight_extra_bytes(const TrainingConfig& t) {
  if (!low_precision(t)) return 0;
  const double q = quantized_bytes_per_element(t);
  return param_gather(t) ? 2 * q - 2 : 2 * q;
}

double gemm_weight_gather_bytes(const TrainingConfig& t) {
  if (!low_precision(t) || !param_gather(t)) return 2;
  return quantized_bytes_per_element(t);
}

double weight_quantize_bytes_per_param(const TrainingConfig& t) {
  if (!low_precision(t)) return 0;
  // The 16-bit weight (or, with param gather, the fp32 master shard's cast: counted here per held
  // parameter as the 16-bit read, the same order of traffic).
  return 2.0 * static_cast<double>(quantize_read_passes(t)) + 2.0 * quantized_bytes_per_element(t);
}

}  // namespace mplan::cost
