// Causal flash attention for Hopper (sm_90a): the same contract as attention.cu (layout qkv
// (s, b, 3, heads, d), out/dout (s, b, heads, d), lse/dsum (b, heads, s) f32, bf16 in and out,
// deterministic), with every tile product on wgmma: two warpgroups per block, operands in
// 128-byte-swizzled shared memory (exec/cuda/wgmma.cuh), loaded by cp.async one stage ahead.
// Head dims 64 and 128. Compiled for sm_90a only; attention.cu calls it on devices of compute
// capability 9.0 and keeps its mma.sync kernels for the others (and as MPLAN_ATTENTION=flash2).
//
// Forward: a block owns 128 query rows (64 per warpgroup) and walks key blocks of 128 up to its
// diagonal: S = Q·K^T (K-major operands), an online softmax in registers, O += P·V with P as the
// register A operand and V read N-major. The two warpgroups' softmax and tensor-core work
// overlap each other.
// Backward: a block owns a key block of 128 (64 keys per warpgroup) and walks query steps of 64
// from its diagonal: S^T = K·Q^T and dP^T = V·dO^T, P^T and dS^T in registers, dV += P^T·dO and
// dK += dS^T·Q with them as register A operands; dS^T goes to shared memory for
// dQ_part = dS·K (each warpgroup a half of the head dim), added into the block's own f32 buffer
// of dQ partial sums by fixed threads in program order (attention.cu's splits and finalize).
#include "exec/cuda/attention_hopper.hpp"

#include <cuda_bf16.h>

#include "exec/cuda/attention_layout.cuh"
#include "exec/cuda/device_utils.cuh"
#include "exec/cuda/mma_utils.cuh"
#include "exec/cuda/wgmma.cuh"

namespace mplan::exec::cuda {
namespace {

using attention_layout::Dims;
using attention_layout::kLn2;
using attention_layout::kLog2e;
using attention_layout::Plane;
constexpr int kThreads = 256;  // two warpgroups

__device__ __forceinline__ unsigned char* align1024(unsigned char* p) {
  const uint32_t a = smem_addr(p);
  return p + ((1024u - (a & 1023u)) & 1023u);
}

// cp.async of rows [row0, row0 + kRows) × [0, D) of a plane into a swizzled tile (sw128_offset);
// rows >= s are zero-filled. A thread copies one fixed 16-byte column chunk of every
// (kThreads / (D / 8))-th row, walking one source pointer down the rows: its destination chunk
// keeps the same swizzle (rows 8 apart), so few registers whatever the tile size.
template <int kRows, int D>
__device__ __forceinline__ void load_tile(unsigned char* tile, const Plane& p, int row0, int s) {
  constexpr int kChunks = D / 8;
  constexpr int kRowStep = kThreads / kChunks;
  static_assert(kRows % kRowStep == 0 && kRowStep % 8 == 0, "tile does not tile");
  const int c = threadIdx.x % kChunks, r = threadIdx.x / kChunks;
  const bf16* src = p.base + static_cast<int64_t>(row0 + r) * p.row_stride + c * 8;
  const int64_t step = static_cast<int64_t>(kRowStep) * p.row_stride;
  unsigned char* dst = tile + sw128_offset(kRows, r, c * 8);
#pragma unroll
  for (int k = 0; k < kRows / kRowStep; ++k) {
    const bool valid = row0 + r + k * kRowStep < s;
    cp_async16(dst + k * kRowStep * 128, valid ? src : p.base, valid);
    src += step;
  }
}

// d (+)= A·B over one k-step of 16 for an N-wide tile (N = 64 or 128).
template <int N, int kTransA, int kTransB>
__device__ __forceinline__ void mma_ss(float (&d)[N / 2], uint64_t a, uint64_t b, bool acc) {
  if constexpr (N == 64) {
    wgmma_m64n64k16_ss<kTransA, kTransB>(d, a, b, acc);
  } else {
    wgmma_m64n128k16_ss<kTransA, kTransB>(d, a, b, acc);
  }
}
template <int N, int kTransB>
__device__ __forceinline__ void mma_rs(float (&d)[N / 2], const uint32_t (&a)[4], uint64_t b,
                                       bool acc) {
  if constexpr (N == 64) {
    wgmma_m64n64k16_rs<kTransB>(d, a, b, acc);
  } else {
    wgmma_m64n128k16_rs<kTransB>(d, a, b, acc);
  }
}

// ------------------------------------------------------------------------------------------
// Forward. grid (b·heads, query blocks of 128): the heaviest query blocks of every head first,
// which balances the causal work across the SMs (ordering the blocks of one head together for
// L2 reuse of its K and V cost 30 % at the reference shape: reports/attention-hopper.md).
// 256 threads; 1 block per SM. Three stages each of K and
// V: step j loads K_{j+2} and V_{j+1} while O += P_{j-1}·V_{j-1} (issued after S_j = Q·K_j^T)
// still reads V_{j-1}, so each warpgroup's softmax of S_j overlaps its own previous P·V on the
// tensor cores (FlashAttention-3's intra-warpgroup pipelining) and every tile is requested two
// steps before it is read.
constexpr int kFwdM = 128;  // query rows per block
constexpr int kFwdN = 128;  // keys per step: equal to kFwdM, so every warpgroup has live keys
constexpr int kFwdStages = 3;

template <int D>
constexpr int fwd_tile_bytes() {
  return kFwdM * D * 2;
}
template <int D>
constexpr int fwd_smem_bytes() {
  return 1024 + (1 + 2 * kFwdStages) * fwd_tile_bytes<D>();  // alignment, Q, stages of K and V
}

template <int D>
__global__ void __launch_bounds__(kThreads, 1)
    hopper_fwd_kernel(const bf16* __restrict__ qkv, bf16* __restrict__ out, float* __restrict__ lse,
                      Dims dm, float scale_log2) {
  constexpr int kTile = fwd_tile_bytes<D>();
  constexpr int kRegion = kFwdM * 128;  // one 64-column block of a 128-row tile
  static_assert(kFwdM == kFwdN, "a warpgroup with no live key in a step is not handled");
  extern __shared__ unsigned char smem_raw[];
  unsigned char* sQ = align1024(smem_raw);
  unsigned char* sK = sQ + kTile;               // kFwdStages tiles
  unsigned char* sV = sK + kFwdStages * kTile;  // kFwdStages tiles

  const int bh = blockIdx.x;
  const int bi = bh / dm.heads, hh = bh % dm.heads;
  const int q0 = (gridDim.y - 1 - blockIdx.y) * kFwdM;
  const int wg = threadIdx.x >> 7, warp = (threadIdx.x >> 5) & 3, lane = threadIdx.x & 31;
  const int g = lane >> 2, t = lane & 3;
  const int s = dm.s;
  const Plane pq = dm.qkv_plane(qkv, bi, hh, 0);
  const Plane pk = dm.qkv_plane(qkv, bi, hh, 1);
  const Plane pv = dm.qkv_plane(qkv, bi, hh, 2);
  const int kv_end = min(s, q0 + kFwdM);
  const int n_kb = (kv_end + kFwdN - 1) / kFwdN;

  // cp.async groups: {Q, K_0, V_0}, {K_1}, then one per step j: {K_{j+2}, V_{j+1}} (possibly
  // empty). At the top of step j all but the newest are complete: K_j and V_{j-1} have landed.
  load_tile<kFwdM, D>(sQ, pq, q0, s);
  load_tile<kFwdN, D>(sK, pk, 0, s);
  load_tile<kFwdN, D>(sV, pv, 0, s);
  cp_async_commit();
  if (n_kb > 1) load_tile<kFwdN, D>(sK + kTile, pk, kFwdN, s);
  cp_async_commit();

  const int wg_row0 = q0 + wg * 64;          // this warpgroup's first query row
  const int row0 = wg_row0 + warp * 16 + g;  // this thread's rows: row0, row0 + 8
  const uint32_t q_addr = smem_addr(sQ) + wg * 64 * 128;
  float o[D / 2];
#pragma unroll
  for (int i = 0; i < D / 2; ++i) o[i] = 0.0f;
  float row_m[2] = {-INFINITY, -INFINITY}, row_l[2] = {0.0f, 0.0f};
  uint32_t pa[kFwdN / 16][4];  // P of the previous step, the A operand of its P·V

  for (int it = 0; it < n_kb; ++it) {
    cp_async_wait<1>();
    fence_proxy_async_shared();
    // K_it and V_{it-1} landed for all threads; S_{it-1} and P_{it-2}·V_{it-2} are done
    // everywhere, so their stages (it + 2, it + 1 mod 3) may be refilled.
    __syncthreads();
    if (it + 2 < n_kb) {
      load_tile<kFwdN, D>(sK + ((it + 2) % kFwdStages) * kTile, pk, (it + 2) * kFwdN, s);
    }
    if (it + 1 < n_kb) {
      load_tile<kFwdN, D>(sV + ((it + 1) % kFwdStages) * kTile, pv, (it + 1) * kFwdN, s);
    }
    cp_async_commit();
    const int k0 = it * kFwdN;
    const uint32_t k_addr = smem_addr(sK + (it % kFwdStages) * kTile);

    // S = Q·K^T (64 rows × 128 keys per warpgroup), then O += P·V of the previous step.
    float sc[kFwdN / 2];
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      const uint32_t koff = (kk >> 2) * kRegion + (kk & 3) * 32;
      mma_ss<kFwdN, 0, 0>(sc, sw128_desc(q_addr + koff, 16, 1024),
                          sw128_desc(k_addr + koff, 16, 1024), kk > 0);
    }
    wgmma_commit();
    if (it > 0) {
      const uint32_t v_prev = smem_addr(sV + ((it - 1) % kFwdStages) * kTile);
#pragma unroll
      for (int kk = 0; kk < kFwdN / 16; ++kk)
        mma_rs<D, 1>(o, pa[kk], sw128_desc(v_prev + kk * 16 * 128, kRegion, 1024), true);
      wgmma_commit();
      wgmma_wait<1>();  // S is done; the P·V may still run
    } else {
      wgmma_wait<0>();
    }
    fence_regs(sc);

    // Online softmax in log2 units; only the diagonal block and the sequence tail are masked.
    const bool need_mask = k0 + kFwdN - 1 > wg_row0 || k0 + kFwdN > s;
    float base[2], alpha[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float mx = row_m[r];
#pragma unroll
      for (int j = 0; j < kFwdN / 8; ++j) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          float v = sc[4 * j + 2 * r + e] * scale_log2;
          if (need_mask) {
            const int key = k0 + 8 * j + 2 * t + e;
            if (key > row0 + 8 * r || key >= s) v = -INFINITY;
          }
          sc[4 * j + 2 * r + e] = v;
          mx = fmaxf(mx, v);
        }
      }
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      base[r] = mx == -INFINITY ? 0.0f : mx;  // a row with every key masked so far
      alpha[r] = exp2f(row_m[r] - base[r]);
      row_m[r] = mx;
      row_l[r] *= alpha[r];
    }
    // P stays in f32 in S's registers while the previous P·V runs: the registers of the A
    // operand it reads (pa) are written only after it completes.
#pragma unroll
    for (int i = 0; i < kFwdN / 2; ++i) {
      sc[i] = exp2f(sc[i] - base[(i >> 1) & 1]);
      row_l[(i >> 1) & 1] += sc[i];
    }
    wgmma_wait<0>();
    fence_regs(o);
    fence_regs(pa);
#pragma unroll
    for (int j = 0; j < D / 8; ++j) {
      o[4 * j] *= alpha[0];
      o[4 * j + 1] *= alpha[0];
      o[4 * j + 2] *= alpha[1];
      o[4 * j + 3] *= alpha[1];
    }
#pragma unroll
    for (int j = 0; j < kFwdN / 8; ++j) {
      // Key chunk j is half (j & 1) of the A fragment of k-step j / 2.
      pa[j >> 1][2 * (j & 1)] = pack_bf16(sc[4 * j], sc[4 * j + 1]);
      pa[j >> 1][2 * (j & 1) + 1] = pack_bf16(sc[4 * j + 2], sc[4 * j + 3]);
    }
  }
  // The last step's O += P·V, once V_{n_kb-1} has landed for all threads.
  cp_async_wait<0>();
  fence_proxy_async_shared();
  __syncthreads();
  {
    const uint32_t v_last = smem_addr(sV + ((n_kb - 1) % kFwdStages) * kTile);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kFwdN / 16; ++kk)
      mma_rs<D, 1>(o, pa[kk], sw128_desc(v_last + kk * 16 * 128, kRegion, 1024), true);
    wgmma_commit();
    wgmma_wait<0>();
    fence_regs(o);
    fence_regs(pa);
  }

  // Rows: row0 and row0 + 8; columns 8 j + 2 t, + 1.
  const Plane po = dm.out_plane(out, bi, hh);
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float l = row_l[r];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;
    const int row = row0 + 8 * r;
    if (row >= s) continue;
    if (t == 0) lse[static_cast<int64_t>(bh) * s + row] = (row_m[r] + log2f(l)) * kLn2;
    bf16* dst = const_cast<bf16*>(po.base) + static_cast<int64_t>(row) * po.row_stride + 2 * t;
#pragma unroll
    for (int j = 0; j < D / 8; ++j) {
      *reinterpret_cast<uint32_t*>(dst + 8 * j) =
          pack_bf16(o[4 * j + 2 * r] * inv, o[4 * j + 2 * r + 1] * inv);
    }
  }
}

// A barrier of one warpgroup's 128 threads (named barriers 1 and 2).
__device__ __forceinline__ void wg_barrier(int wg) {
  if (wg == 0) {
    named_barrier_sync<1, 128>();
  } else {
    named_barrier_sync<2, 128>();
  }
}

// ------------------------------------------------------------------------------------------
// Backward. grid (b·heads, splits); 256 threads; 1 block per SM. Key blocks are dealt to the
// splits in attention.cu's snake order; the first key block of a split stores its dQ rows, later
// ones add (red.global, one fixed thread per element: deterministic).
constexpr int kBwdN = 128;          // keys per key block (64 per warpgroup)
constexpr int kBwdM = 64;           // queries per step
constexpr int kRegK = kBwdN * 128;  // a 64-column block of K or V (bytes)
constexpr int kRegQ = kBwdM * 128;  // a 64-column block of Q or dO (bytes)

template <int D>
struct BwdSmem {
  static constexpr int kTileK = kBwdN * D * 2;   // K or V
  static constexpr int kTileQ = kBwdM * D * 2;   // Q or dO, one stage
  static constexpr int kDs = kBwdN * kBwdM * 2;  // dS^T (keys × queries)
  static constexpr int kDqLd = 68;               // f32 per staged dQ row (64 + 4: fewer conflicts)
  static constexpr int kDq = 2 * kBwdM * kDqLd * 4;  // a staged dQ tile per warpgroup
  static constexpr int kStages = 3;  // of Q, dO, lse and dsum: steps are requested 2 ahead
  static constexpr int kBytes =
      1024 + 2 * kTileK + 2 * kStages * kTileQ + kDs + kDq + 2 * kStages * kBwdM * 4;
};

// P^T = exp2(S^T·scale·log2 e − lse·log2 e) of this thread's 2 keys (key0, key0 + 8) × 16
// queries of the step (columns 8 j + 2 t, + 1), zero where key > query or query >= s, packed as
// the A fragments (k = queries) of dV += P^T·dO. cL: the step's lse.
__device__ __forceinline__ void bwd_p_fragments(const float (&sc)[32], const float* cL,
                                                float scale_log2, bool need_mask, int key0, int q0,
                                                int s, uint32_t (&pa)[4][4]) {
  const int t = threadIdx.x & 3;
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const int qc = 8 * j + 2 * t;  // this thread's query columns qc, qc + 1 of the step
    const float2 l2 = *reinterpret_cast<const float2*>(cL + qc);
    float pv[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int c = e & 1;
      const float lse_log2 = (c ? l2.y : l2.x) * kLog2e;
      float p = exp2f(sc[4 * j + e] * scale_log2 - lse_log2);
      const int key = key0 + 8 * (e >> 1), query = q0 + qc + c;
      if (need_mask && (key > query || query >= s)) p = 0.0f;
      pv[e] = p;
    }
    pa[j >> 1][2 * (j & 1)] = pack_bf16(pv[0], pv[1]);
    pa[j >> 1][2 * (j & 1) + 1] = pack_bf16(pv[2], pv[3]);
  }
}

// dS^T = P^T ∘ (dP^T − dsum) as the A fragments of dK += dS^T·Q, and into the shared dS^T tile
// (keys × queries, swizzled) at key rows kl, kl + 8 of the block. cD: the step's dsum.
__device__ __forceinline__ void bwd_ds_fragments(const uint32_t (&pa)[4][4], const float (&dp)[32],
                                                 const float* cD, int kl, unsigned char* sdS,
                                                 uint32_t (&da)[4][4]) {
  const int t = threadIdx.x & 3;
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const int qc = 8 * j + 2 * t;
    const float2 dd = *reinterpret_cast<const float2*>(cD + qc);
    const uint32_t lo = pa[j >> 1][2 * (j & 1)], hi = pa[j >> 1][2 * (j & 1) + 1];
    const float pv[4] = {bf16_lo(lo), bf16_hi(lo), bf16_lo(hi), bf16_hi(hi)};
    float dsv[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) dsv[e] = pv[e] * (dp[4 * j + e] - ((e & 1) ? dd.y : dd.x));
    da[j >> 1][2 * (j & 1)] = pack_bf16(dsv[0], dsv[1]);
    da[j >> 1][2 * (j & 1) + 1] = pack_bf16(dsv[2], dsv[3]);
    *reinterpret_cast<uint32_t*>(sdS + sw128_offset(kBwdN, kl, qc)) = da[j >> 1][2 * (j & 1)];
    *reinterpret_cast<uint32_t*>(sdS + sw128_offset(kBwdN, kl + 8, qc)) =
        da[j >> 1][2 * (j & 1) + 1];
  }
}

// One warpgroup's dQ part (64 queries × 64 columns, accumulators dq) out to global memory: staged
// in `stage` (64 rows of kLd f32), then one bulk copy (first: the split's first key block) or
// bulk reduction per row of 256 bytes to dst + row · ld, rows < rows_left. A row is touched
// once per key block and the previous key block's operations are complete (the caller's
// bulk_wait), so the additions into each element happen in key-block order: deterministic.
template <int kLd>
__device__ __forceinline__ void bwd_send_dq(const float (&dq)[32], float* stage, int wg, float* dst,
                                            int ld, int rows_left, bool first) {
  const int tw = threadIdx.x & 127, warp = tw >> 5, g = (tw & 31) >> 2, t = tw & 3;
  if (tw < kBwdM) bulk_wait_read<0>();  // the previous step's copies have read the tile
  wg_barrier(wg);
#pragma unroll
  for (int rr = 0; rr < 2; ++rr) {
    float* row_stage = stage + (warp * 16 + g + 8 * rr) * kLd + 2 * t;
#pragma unroll
    for (int j = 0; j < 8; ++j)
      *reinterpret_cast<float2*>(row_stage + 8 * j) =
          make_float2(dq[4 * j + 2 * rr], dq[4 * j + 2 * rr + 1]);
  }
  fence_proxy_async_shared();
  wg_barrier(wg);
  if (tw < kBwdM && tw < rows_left) {
    float* row_dst = dst + static_cast<int64_t>(tw) * ld;
    const float* src = stage + tw * kLd;
    if (first) {
      bulk_store_f32(row_dst, src, 64 * 4);
    } else {
      bulk_reduce_add_f32(row_dst, src, 64 * 4);
    }
    bulk_commit();
  }
}

// dK (times scale) and dV of this thread's keys key0, key0 + 8 (< s) from the accumulators.
template <int N>  // accumulator registers: head dim / 2
__device__ __forceinline__ void bwd_store_dk_dv(const float (&dk)[N], const float (&dv)[N],
                                                const Plane& pdk, const Plane& pdv, int key0, int s,
                                                float scale) {
  const int t = threadIdx.x & 3;
#pragma unroll
  for (int rr = 0; rr < 2; ++rr) {
    const int key = key0 + 8 * rr;
    if (key >= s) continue;
    const int64_t off = static_cast<int64_t>(key) * pdk.row_stride + 2 * t;
#pragma unroll
    for (int j = 0; j < N / 4; ++j) {
      *reinterpret_cast<uint32_t*>(const_cast<bf16*>(pdk.base) + off + 8 * j) =
          pack_bf16(dk[4 * j + 2 * rr] * scale, dk[4 * j + 2 * rr + 1] * scale);
      *reinterpret_cast<uint32_t*>(const_cast<bf16*>(pdv.base) + off + 8 * j) =
          pack_bf16(dv[4 * j + 2 * rr], dv[4 * j + 2 * rr + 1]);
    }
  }
}

// acc (64 keys × 64 queries of a warpgroup) = A·B^T over the head dim, A a K or V tile and B a Q
// or dO tile, each in 64-column blocks of 128-byte swizzled rows (kBwdN and kBwdM rows a block).
template <int D>
__device__ __forceinline__ void bwd_keys_x_queries(float (&acc)[32], uint32_t a_addr,
                                                   uint32_t b_addr) {
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    const uint32_t ka = (kk >> 2) * kRegK + (kk & 3) * 32;
    const uint32_t kq = (kk >> 2) * kRegQ + (kk & 3) * 32;
    mma_ss<64, 0, 0>(acc, sw128_desc(a_addr + ka, 16, 1024), sw128_desc(b_addr + kq, 16, 1024),
                     kk > 0);
  }
}

template <int D>
__global__ void __launch_bounds__(kThreads, 1)
    hopper_bwd_kernel(const bf16* __restrict__ qkv, const bf16* __restrict__ dout,
                      const float* __restrict__ lse, const float* __restrict__ dsum,
                      bf16* __restrict__ dqkv, float* __restrict__ dq_part, Dims dm, int splits,
                      float scale_log2, float scale) {
  using S = BwdSmem<D>;
  constexpr int DP = D;  // columns of a dQ partial row
  extern __shared__ unsigned char smem_raw[];
  unsigned char* sK = align1024(smem_raw);
  unsigned char* sV = sK + S::kTileK;
  unsigned char* sQ = sV + S::kTileK;                   // kStages stages
  unsigned char* sdO = sQ + S::kStages * S::kTileQ;     // kStages stages
  unsigned char* sdS = sdO + S::kStages * S::kTileQ;    // (keys, queries), queries contiguous
  float* sDq = reinterpret_cast<float*>(sdS + S::kDs);  // per warpgroup: 64 × kDqLd f32
  float* sL = sDq + 2 * kBwdM * S::kDqLd;               // kStages stages of lse
  float* sD = sL + S::kStages * kBwdM;                  // kStages stages of dsum

  const int bh = blockIdx.x, split = blockIdx.y;
  const int bi = bh / dm.heads, hh = bh % dm.heads;
  const int wg = threadIdx.x >> 7, warp = (threadIdx.x >> 5) & 3, g = (threadIdx.x & 31) >> 2;
  const int s = dm.s;
  const Plane pq = dm.qkv_plane(qkv, bi, hh, 0);
  const Plane pk = dm.qkv_plane(qkv, bi, hh, 1);
  const Plane pv = dm.qkv_plane(qkv, bi, hh, 2);
  const Plane pdo = dm.out_plane(dout, bi, hh);
  const float* lse_row = lse + static_cast<int64_t>(bh) * s;
  const float* dsum_row = dsum + static_cast<int64_t>(bh) * s;
  const int64_t n_bh = static_cast<int64_t>(dm.b) * dm.heads;
  float* part = dq_part + (static_cast<int64_t>(split) * n_bh + bh) * s * DP;
  const int n_key_blocks = (s + kBwdN - 1) / kBwdN;
  const int n_q_steps = (s + kBwdM - 1) / kBwdM;
  // dQ columns of this warpgroup: a half of the head dim at D = 128, all of it (warpgroup 0
  // alone) at D = 64.
  constexpr int kDqN = D == 128 ? 64 : 64;
  const bool dq_worker = D == 128 || wg == 0;
  const int dq_col0 = D == 128 ? wg * 64 : 0;

  for (int r = 0;; ++r) {
    const int kb = (r >> 1) * 2 * splits + ((r & 1) ? 2 * splits - 1 - split : split);
    if (kb >= n_key_blocks) break;
    const bool first = r == 0;
    const bool down = (r & 1) != 0;
    const int k0 = kb * kBwdN;
    const int qs_first = k0 / kBwdM;
    const int n_steps = n_q_steps - qs_first;
    auto step_q0 = [&](int i) { return (down ? n_q_steps - 1 - i : qs_first + i) * kBwdM; };
    auto load_step = [&](int i, int st) {
      const int q0 = step_q0(i);
      load_tile<kBwdM, D>(sQ + st * S::kTileQ, pq, q0, s);
      load_tile<kBwdM, D>(sdO + st * S::kTileQ, pdo, q0, s);
      const int x = threadIdx.x & (kBwdM - 1);
      const bool ok = q0 + x < s;
      if (threadIdx.x < kBwdM) {
        cp_async4(sL + st * kBwdM + x, ok ? lse_row + q0 + x : lse_row, ok);
      } else if (threadIdx.x < 2 * kBwdM) {
        cp_async4(sD + st * kBwdM + x, ok ? dsum_row + q0 + x : dsum_row, ok);
      }
    };
    // cp.async groups: {K, V, step 0}, {step 1}, then one per step i: {step i + 2} (possibly
    // empty); at the top of step i all but the newest are complete.
    load_tile<kBwdN, D>(sK, pk, k0, s);
    load_tile<kBwdN, D>(sV, pv, k0, s);
    load_step(0, 0);
    cp_async_commit();
    if (n_steps > 1) load_step(1, 1);
    cp_async_commit();

    const int wg_key0 = k0 + wg * 64;
    const int key0 = wg_key0 + warp * 16 + g;  // this thread's keys: key0, key0 + 8
    const uint32_t k_addr = smem_addr(sK) + wg * 64 * 128;
    const uint32_t v_addr = smem_addr(sV) + wg * 64 * 128;
    float dk[D / 2], dv[D / 2];
#pragma unroll
    for (int i = 0; i < D / 2; ++i) dk[i] = dv[i] = 0.0f;

    for (int i = 0; i < n_steps; ++i) {
      cp_async_wait<1>();
      fence_proxy_async_shared();
      // Step i landed for all; every wgmma of step i - 1 is done, so its stage may be refilled.
      __syncthreads();
      if (i + 2 < n_steps) load_step(i + 2, (i + 2) % S::kStages);
      cp_async_commit();
      const int st = i % S::kStages;
      const int q0 = step_q0(i);
      const uint32_t q_addr = smem_addr(sQ + st * S::kTileQ);
      const uint32_t do_addr = smem_addr(sdO + st * S::kTileQ);
      const float* cL = sL + st * kBwdM;
      const float* cD = sD + st * kBwdM;

      // The order keeps at most 48 registers of tiles live beside the 128 of dK and dV (no two
      // f32 tiles at once): S^T = K·Q^T; P^T into A fragments; dV += P^T·dO issued while
      // dP^T = V·dO^T runs;
      // dS^T = P^T ∘ (dP^T − dsum) into A fragments and shared memory; dK += dS^T·Q.
      // Tiles are 64 keys × 64 queries per warpgroup; the masks: key > query, query >= s.
      const bool need_mask = wg_key0 + 63 > q0 || q0 + kBwdM > s;
      uint32_t pa[4][4], da[4][4];
      {
        float sc[32];
        {
          wgmma_fence();
          bwd_keys_x_queries<D>(sc, k_addr, q_addr);
          wgmma_commit();
          wgmma_wait<0>();
          fence_regs(sc);
        }
        bwd_p_fragments(sc, cL, scale_log2, need_mask, key0, q0, s, pa);
      }
      {
        float dp[32];
        {
          wgmma_fence();
#pragma unroll
          for (int kq = 0; kq < kBwdM / 16; ++kq)
            mma_rs<D, 1>(dv, pa[kq], sw128_desc(do_addr + kq * 16 * 128, kRegQ, 1024), true);
          bwd_keys_x_queries<D>(dp, v_addr, do_addr);
          wgmma_commit();
          wgmma_wait<0>();
          fence_regs(dp);
          fence_regs(dv);
          fence_regs(pa);
        }
        bwd_ds_fragments(pa, dp, cD, wg * 64 + warp * 16 + g, sdS, da);
      }
      {
        wgmma_fence();
#pragma unroll
        for (int kq = 0; kq < kBwdM / 16; ++kq)
          mma_rs<D, 1>(dk, da[kq], sw128_desc(q_addr + kq * 16 * 128, kRegQ, 1024), true);
        wgmma_commit();
      }
      fence_proxy_async_shared();
      __syncthreads();  // both warpgroups' dS^T are in shared memory

      // dQ_part (64 queries × kDqN) = dS·K: dS (M-major, from dS^T) and K (N-major).
      float dq[kDqN / 2];
      if (dq_worker) {
        wgmma_fence();
        const uint32_t ds_addr = smem_addr(sdS);
        const uint32_t kcol_addr = smem_addr(sK) + (dq_col0 >> 6) * kRegK;
#pragma unroll
        for (int kk = 0; kk < kBwdN / 16; ++kk) {
          mma_ss<kDqN, 1, 1>(dq, sw128_desc(ds_addr + kk * 16 * 128, kRegK, 1024),
                             sw128_desc(kcol_addr + kk * 16 * 128, kRegK, 1024), kk > 0);
        }
        wgmma_commit();
      }
      wgmma_wait<0>();
      fence_regs(dk);
      fence_regs(da);
      if (dq_worker) {
        fence_regs(dq);
        bwd_send_dq<S::kDqLd>(dq, sDq + wg * kBwdM * S::kDqLd, wg,
                              part + static_cast<int64_t>(q0) * DP + dq_col0, DP, s - q0, first);
      }
    }
    bulk_wait<0>();      // this key block's dQ operations are complete before the next one's
    cp_async_wait<0>();  // (only empty groups are left)

    bwd_store_dk_dv(dk, dv, dm.qkv_plane(dqkv, bi, hh, 1), dm.qkv_plane(dqkv, bi, hh, 2), key0, s,
                    scale);
    __syncthreads();  // sK, sV, sdS free for the next key block
  }
}

template <class K>
void allow_smem(K kernel, int bytes) {
  MPLAN_CUDA_CHECK(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
}

Dims dims_of(const AttentionShape& sh) {
  return {static_cast<int>(sh.s), static_cast<int>(sh.b), static_cast<int>(sh.heads),
          static_cast<int>(sh.d)};
}

}  // namespace

bool hopper_attention_shape_ok(const AttentionShape& sh) {
  return (sh.d == 64 || sh.d == 128) && sh.s >= 1 && sh.s < (1 << 30) &&
         sh.b * sh.heads < (int64_t{1} << 31);
}

void launch_hopper_attention_forward(const AttentionShape& sh, const bf16* qkv, bf16* out,
                                     float* lse, float scale_log2, cudaStream_t stream) {
  const Dims dm = dims_of(sh);
  const dim3 grid(static_cast<unsigned>(sh.b * sh.heads),
                  static_cast<unsigned>((sh.s + kFwdM - 1) / kFwdM));
  auto run = [&](auto kernel, int smem) {
    allow_smem(kernel, smem);
    kernel<<<grid, kThreads, smem, stream>>>(qkv, out, lse, dm, scale_log2);
  };
  if (sh.d == 64) {
    run(hopper_fwd_kernel<64>, fwd_smem_bytes<64>());
  } else {
    run(hopper_fwd_kernel<128>, fwd_smem_bytes<128>());
  }
  MPLAN_CUDA_LAUNCH_CHECK();
}

void launch_hopper_attention_backward(const AttentionShape& sh, const bf16* qkv, const bf16* dout,
                                      const float* lse, const float* dsum, bf16* dqkv,
                                      float* dq_part, int64_t splits, float scale_log2, float scale,
                                      cudaStream_t stream) {
  const Dims dm = dims_of(sh);
  const dim3 grid(static_cast<unsigned>(sh.b * sh.heads), static_cast<unsigned>(splits));
  auto run = [&](auto kernel, int smem) {
    allow_smem(kernel, smem);
    kernel<<<grid, kThreads, smem, stream>>>(qkv, dout, lse, dsum, dqkv, dq_part, dm,
                                             static_cast<int>(splits), scale_log2, scale);
  };
  if (sh.d == 64) {
    run(hopper_bwd_kernel<64>, BwdSmem<64>::kBytes);
  } else {
    run(hopper_bwd_kernel<128>, BwdSmem<128>::kBytes);
  }
  MPLAN_CUDA_LAUNCH_CHECK();
}

}  // namespace mplan::exec::cuda
