// Hopper (sm_90) asynchronous copies and the barriers that order them: mbarriers in shared
// memory (init, arrive, arrive with an expected byte count, wait on a phase's parity), tile loads
// by the tensor memory accelerator (cp.async.bulk.tensor, completing on an mbarrier) and plain bulk
// loads, TMA tile stores (tracked by bulk groups, wgmma.cuh's bulk_commit / bulk_wait), named
// barriers between warpgroups, setmaxnreg (sm_90a), which moves registers from a producer
// warpgroup to the consumer warpgroups, and counters in global memory that order blocks (acquire
// loads, release additions). Used by exec/cuda/attention_hopper.cu.
//
// Phases: an mbarrier completes a phase when its pending arrivals reach zero and every byte it
// expects has landed; mbar_wait(bar, p) returns once the phase of parity p has completed. A fresh
// barrier is in phase 0, and a wait on parity 1 returns at once (the phase before it counts as
// complete), so a producer waits on an "empty" barrier with parity (round & 1) ^ 1 and a consumer
// on a "full" one with parity round & 1.
#pragma once

#include <cuda.h>

#include <cstdint>

#include "exec/cuda/mma_utils.cuh"

namespace mplan::exec::cuda {

__device__ __forceinline__ void mbar_init(uint64_t* bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(count)
               : "memory");
}
// Makes the initialised barriers visible to the async proxy (the copy engine) and to the other
// threads of the block once they pass the next __syncthreads.
__device__ __forceinline__ void mbar_init_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_addr(bar)) : "memory");
}
// An arrival by this thread where `pred` holds (predicated: no branch, so the warp stays converged
// around in-flight wgmma).
__device__ __forceinline__ void mbar_arrive_if(uint64_t* bar, bool pred) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %1, 0;\n@p mbarrier.arrive.shared::cta.b64 _, [%0];\n}\n" ::
          "r"(smem_addr(bar)),
      "r"(static_cast<int>(pred))
      : "memory");
}
// One arrival that also adds `bytes` to the bytes the current phase waits for.
__device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_addr(bar)),
               "r"(bytes)
               : "memory");
}
// The loop is inside the asm: a loop on a per-thread result would be a branch the compiler
// cannot prove uniform, and it serialises wgmma around divergent paths.
__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) {
  asm volatile(
      "{\n.reg .pred p;\nWAIT_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
      "@!p bra WAIT_%=;\n}\n" ::"r"(smem_addr(bar)),
      "r"(parity)
      : "memory");
}

// The box at coordinates (c0, c1, c2) of a 3-dimensional tensor map into shared memory at dst
// (aligned as the map's swizzle needs: 1024 bytes for 128-byte swizzle); its bytes complete on bar.
// Coordinates past the tensor's end read as zeros. `map` is a __grid_constant__ kernel parameter.
__device__ __forceinline__ void tma_load_3d(void* dst, const CUtensorMap* map, uint64_t* bar,
                                            int c0, int c1, int c2) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, "
      "%4, %5}], [%2];\n" ::"r"(smem_addr(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(smem_addr(bar)), "r"(c0), "r"(c1), "r"(c2)
      : "memory");
}
// `bytes` (a multiple of 16; both addresses 16-byte aligned) from global memory into shared memory
// at dst by one bulk copy (no tensor map), completing on bar.
__device__ __forceinline__ void bulk_load(void* dst, const void* src, uint32_t bytes,
                                          uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::
          "r"(smem_addr(dst)),
      "l"(src), "r"(bytes), "r"(smem_addr(bar))
      : "memory");
}
// The box at (c0, c1, c2) of a 3-dimensional tensor map from shared memory at src (laid out as
// the map's swizzle says) by one TMA store, tracked by this thread's bulk groups; coordinates past
// the tensor's end are not written.
__device__ __forceinline__ void tma_store_3d(const CUtensorMap* map, const void* src, int c0,
                                             int c1, int c2) {
  asm volatile(
      "cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%0, {%2, %3, %4}], [%1];\n" ::"l"(
          reinterpret_cast<uint64_t>(map)),
      "r"(smem_addr(src)), "r"(c0), "r"(c1), "r"(c2)
      : "memory");
}
__device__ __forceinline__ void prefetch_tensormap(const CUtensorMap* map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
}

// 32-bit stores to global memory where `pred` holds, without a branch.
__device__ __forceinline__ void st_global_u32_if(void* p, uint32_t v, bool pred) {
  asm volatile("{\n.reg .pred q;\nsetp.ne.b32 q, %2, 0;\n@q st.global.b32 [%0], %1;\n}\n" ::"l"(p),
               "r"(v), "r"(static_cast<int>(pred))
               : "memory");
}

// Two f32 (8 bytes, aligned) stored only where pred holds, as st_global_u32_if.
__device__ __forceinline__ void st_global_f32x2_if(float* p, float x, float y, bool pred) {
  asm volatile(
      "{\n.reg .pred q;\nsetp.ne.b32 q, %3, 0;\n@q st.global.v2.f32 [%0], {%1, %2};\n}\n" ::"l"(p),
      "f"(x), "f"(y), "r"(static_cast<int>(pred))
      : "memory");
}

// A counter in global memory shared by blocks: read with acquire, raised with release (device
// scope), and the fence that orders the async proxy's global accesses (bulk copies) with them.
__device__ __forceinline__ int ld_acquire_gpu(const int* p) {
  int v;
  asm volatile("ld.acquire.gpu.global.b32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void red_release_gpu_add(int* p, int v) {
  asm volatile("red.release.gpu.global.add.s32 [%0], %1;\n" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ void fence_proxy_async_global() {
  asm volatile("fence.proxy.async.global;\n" ::: "memory");
}

// Named barrier `id` (1..15) over `threads` threads: sync waits, arrive does not.
__device__ __forceinline__ void named_bar_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void named_bar_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// The warpgroup's register budget per thread, moved down (producer) or up (consumers); the kernel
// must start with a register cap (__launch_bounds__(threads, 1)).
template <int N>
__device__ __forceinline__ void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
}
template <int N>
__device__ __forceinline__ void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
}

}  // namespace mplan::exec::cuda
