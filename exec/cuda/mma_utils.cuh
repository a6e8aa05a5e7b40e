// Tensor-core building blocks for the attention kernels (sm_80+ instructions, run on Hopper):
// cp.async 16-byte copies with zero fill, ldmatrix fragment loads and mma.sync m16n8k16 bf16 with
// f32 accumulators. Fragment layouts follow the PTX ISA: for a thread, g = lane / 4 and
// t = lane % 4; A (16×16): regs {(g, 2t..), (g+8, 2t..), (g, 2t+8..), (g+8, 2t+8..)};
// B (16×8): regs {(k 2t.., n g), (k 2t+8.., n g)}; C (16×8): {(g, 2t), (g, 2t+1), (g+8, 2t), (g+8,
// 2t+1)}. Shared tiles are row-major with a row stride of ld elements (a multiple of 8).
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

namespace mplan::exec::cuda {

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16 bytes global -> shared; when !valid the 16 bytes are zero-filled and nothing is read.
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, bool valid) {
  const int src_bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(smem)), "l"(gmem),
               "r"(src_bytes));
}
// 4 bytes global -> shared (cp.async.ca: the .cg form takes only 16); zero-filled when !valid.
__device__ __forceinline__ void cp_async4(void* smem, const void* gmem, bool valid) {
  const int src_bytes = valid ? 4 : 0;
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(smem_addr(smem)), "l"(gmem),
               "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

__device__ __forceinline__ void ldsm_x4(const void* p, uint32_t& r0, uint32_t& r1, uint32_t& r2,
                                        uint32_t& r3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(smem_addr(p)));
}
__device__ __forceinline__ void ldsm_x4_trans(const void* p, uint32_t& r0, uint32_t& r1,
                                              uint32_t& r2, uint32_t& r3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(smem_addr(p)));
}

// c += a · b for one 16×8×16 tile.
__device__ __forceinline__ void mma_bf16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                         uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// A fragment of the 16×16 block at (row0, col0) of a tile stored (m, k).
__device__ __forceinline__ void load_a(const __nv_bfloat16* tile, int ld, int row0, int col0,
                                       uint32_t (&a)[4]) {
  const int lane = threadIdx.x & 31;
  ldsm_x4(tile + (row0 + (lane & 15)) * ld + col0 + (lane >> 4) * 8, a[0], a[1], a[2], a[3]);
}
// The A fragment of the 16×16 block (rows m0.., columns k0..) of A from a tile stored (k, m),
// i.e. A = T^T for a row-major T (e.g. P^T from P stored (query, key)), through ldmatrix.trans.
__device__ __forceinline__ void load_a_kmajor(const __nv_bfloat16* tile, int ld, int m0, int k0,
                                              uint32_t (&a)[4]) {
  const int lane = threadIdx.x & 31, mat = lane >> 3;
  ldsm_x4_trans(tile + (k0 + (lane & 7) + (mat >> 1) * 8) * ld + m0 + (mat & 1) * 8, a[0], a[1],
                a[2], a[3]);
}
// B fragments of n-tiles n0 and n0 + 8 at k-step k0, from a tile stored (n, k) (B transposed,
// e.g. K for S = Q·K^T): {b[0], b[1]} for n0, {b[2], b[3]} for n0 + 8.
__device__ __forceinline__ void load_b_nk(const __nv_bfloat16* tile, int ld, int n0, int k0,
                                          uint32_t (&b)[4]) {
  const int lane = threadIdx.x & 31;
  ldsm_x4(tile + (n0 + (lane & 7) + (lane >> 4) * 8) * ld + k0 + ((lane >> 3) & 1) * 8, b[0], b[1],
          b[2], b[3]);
}
// The same from a tile stored (k, n) (e.g. V for O = P·V), through ldmatrix.trans.
__device__ __forceinline__ void load_b_kn(const __nv_bfloat16* tile, int ld, int k0, int n0,
                                          uint32_t (&b)[4]) {
  const int lane = threadIdx.x & 31;
  ldsm_x4_trans(tile + (k0 + (lane & 7) + ((lane >> 3) & 1) * 8) * ld + n0 + (lane >> 4) * 8, b[0],
                b[1], b[2], b[3]);
}

// p[0..1] += {a, b} in global memory (one vector reduction, sm_90; relaxed, performed at L2).
// Two such operations on one address from one thread apply in program order.
__device__ __forceinline__ void red_add_f32x2(float* p, float a, float b) {
  asm volatile("red.global.add.v2.f32 [%0], {%1, %2};\n" ::"l"(p), "f"(a), "f"(b) : "memory");
}
__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&v);
}
__device__ __forceinline__ float bf16_lo(uint32_t w) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float bf16_hi(uint32_t w) { return __uint_as_float(w & 0xffff0000u); }

// The A fragment of k-step j (16 columns) from C accumulators c[n-tile][4] of a 16×(8·N) tile.
template <int N>
__device__ __forceinline__ void acc_to_a(const float (&c)[N][4], int j, uint32_t (&a)[4]) {
  a[0] = pack_bf16(c[2 * j][0], c[2 * j][1]);
  a[1] = pack_bf16(c[2 * j][2], c[2 * j][3]);
  a[2] = pack_bf16(c[2 * j + 1][0], c[2 * j + 1][1]);
  a[3] = pack_bf16(c[2 * j + 1][2], c[2 * j + 1][3]);
}

}  // namespace mplan::exec::cuda
