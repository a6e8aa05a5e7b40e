// Fused AdamW step over f32 master weights with f32 gradients and f32 moments, writing the
// activation-dtype copy of the weights in the same pass (one read of p, g, m, v; one write of
// p, m, v and the copy). The update is torch.optim.AdamW's, operation for operation as in the
// CPU backend (decoupled decay first, then the bias-corrected step; see AdamWArgs).
#include "exec/cuda/device_utils.cuh"
#include "exec/cuda/kernels.hpp"

namespace mplan::exec::cuda {
namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ void adamw_one(const AdamWArgs& a, float& p, float g, float& m,
                                          float& v) {
  g *= a.grad_scale;
  p *= a.decay;
  m = a.beta1 * m + (1.0f - a.beta1) * g;
  v = a.beta2 * v + (1.0f - a.beta2) * g * g;
  const float denom = sqrtf(v) / a.bc2_sqrt + a.eps;
  p -= a.step_size * (m / denom);
}

// One thread per 8 elements.
template <class A>
__global__ void __launch_bounds__(kThreads)
    adamw_kernel(AdamWArgs a, float* __restrict__ param, const float* __restrict__ grad,
                 float* __restrict__ m, float* __restrict__ v, A* __restrict__ param_act, int64_t n,
                 bool vec) {
  const int64_t i0 = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * 8;
  if (i0 >= n) return;
  float p[8], g[8], mm[8], vv[8];
  load8_guarded(param, i0, n, vec, p);
  load8_guarded(grad, i0, n, vec, g);
  load8_guarded(m, i0, n, vec, mm);
  load8_guarded(v, i0, n, vec, vv);
#pragma unroll
  for (int j = 0; j < 8; ++j) adamw_one(a, p[j], g[j], mm[j], vv[j]);
  store8_guarded(param, i0, n, vec, p);
  store8_guarded(m, i0, n, vec, mm);
  store8_guarded(v, i0, n, vec, vv);
  if (param_act != nullptr) store8_guarded(param_act, i0, n, vec, p);
}

}  // namespace

void launch_adamw(const AdamWArgs& a, float* param, const float* grad, float* m, float* v,
                  void* param_act, DType act_t, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  bool vec = aligned16(param) && aligned16(grad) && aligned16(m) && aligned16(v);
  if (param_act != nullptr) vec = vec && aligned16(param_act);
  const unsigned grid = blocks_for((n + 7) / 8, kThreads);
  dispatch_act(act_t, [&](auto tag) {
    using A = decltype(tag);
    adamw_kernel<A>
        <<<grid, kThreads, 0, stream>>>(a, param, grad, m, v, static_cast<A*>(param_act), n, vec);
  });
  MPLAN_CUDA_LAUNCH_CHECK();
}

}  // namespace mplan::exec::cuda
