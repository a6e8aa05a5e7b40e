// Causal flash attention for Hopper (sm_90a): the same contract as attention.cu (layout qkv
// (s, b, heads + 2 groups, d), out/dout (s, b, heads, d), lse/dsum (b, heads, s) f32, bf16 in and
// out, grouped-query attention in place, deterministic), with every tile product on wgmma and
// FlashAttention-3's structure: blocks of three warpgroups, one producer that loads the tiles by
// the tensor memory accelerator (TMA) into stages guarded by mbarriers (exec/cuda/tma.cuh), and two
// consumers that run the products (exec/cuda/wgmma.cuh) on 128-byte-swizzled shared tiles. Head
// dims 64 and 128. Compiled for sm_90a only; attention.cu calls it on devices of compute
// capability 9.0 and keeps its mma.sync kernels for the others (and as MPLAN_ATTENTION=flash2).
//
// Forward: a persistent grid; a tile is 128 query rows (64 per consumer) that walk key blocks of
// 128 up to their diagonal: S = Q·K^T (K-major operands; at head dim 128 Q is the register A
// operand, kFwdQInRegs), an online softmax in registers, O += P·V with P as the register A
// operand and V read N-major. Tiles go in sections of heads whose K and V fit in L2 (fwd_tile).
// Backward: a persistent grid whose blocks take tiles from a counter, in sections of head sets
// whose Q, dO and dQ fit in L2, heaviest first within a section (BwdTiles); a tile is a
// key block of 128 (64 keys per consumer) of one K/V group and a chunk of its heads
// (attention_layout::BwdWork; dK and dV summed in registers over them) and walks query steps of
// 64 (128 at head dim 64) from the last down to its diagonal, each step for every head of the
// chunk: S^T = K·Q^T and dP^T = V·dO^T, P^T and dS^T in registers, dV += P^T·dO and
// dK += dS^T·Q with them as register A operands; dS^T goes to shared memory for dQ_part = dS·K
// (each consumer a half of the head dim, or at head dim 64 a half of the step's queries), which
// a writer warp adds into one f32 accumulator per (batch, head) in key-block order
// (counters per query step order the blocks); the last key block of a query step hands the
// complete tile to finalizer warps of the same block, which write it as bf16. Asked for dqkv's
// column sums (the QKV layer's bias gradient; one head chunk), the consumers sum each tile's dK
// and dV and the finalizer each dQ tile as they write them, into rows of parts that attention.cu
// adds in a fixed order (launch_column_partials_finalize).
//
// Compiler hazards (ptxas reports them as C7514 / C7520, "wgmma serialized"): a branch it cannot
// prove warp-uniform near in-flight wgmma, or a varying number of committed groups per loop
// step. Hence the warpgroup index through a shuffle, predicated stores and arrivals, waits with
// their loop inside the asm, and the forward's first step peeled off its loop.
#include "exec/cuda/attention_hopper.hpp"

#include <cudaTypedefs.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <string>
#include <type_traits>

#include "exec/cuda/attention_layout.cuh"
#include "exec/cuda/cuda_check.hpp"
#include "exec/cuda/device_attribute.hpp"
#include "exec/cuda/device_utils.cuh"
#include "exec/cuda/mma_utils.cuh"
#include "exec/cuda/tma.cuh"
#include "exec/cuda/wgmma.cuh"

namespace mplan::exec::cuda {
namespace {

using attention_layout::BwdWork;
using attention_layout::Dims;
using attention_layout::FwdTileOrder;
using attention_layout::kLn2;
using attention_layout::kLog2e;
using attention_layout::Plane;
// Both kernels: a producer warpgroup and two consumer warpgroups per block, one block per SM.
constexpr int kThreads = 384;
constexpr int kConsumerWarps = 8;  // what the "empty" barriers count

// 2^x by the MUFU unit alone, results below 2^-126 flushed to zero: exp2f (no -ftz) wraps each
// MUFU.EX2 in a compare and two multiplies for denormal results, which cost the softmax an ALU
// and two FMA slots per score (Nsight Compute: the ALU pipe was the forward's busiest at head
// dim 64). Softmax terms that small do not count against sums of at least 1.
__device__ __forceinline__ float exp2_ftz(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// This thread's warpgroup (threadIdx.x / 128) through a shuffle, which tells the compiler it is
// uniform in the warp: a branch it cannot prove uniform serialises the wgmma pipeline.
__device__ __forceinline__ int uniform_warpgroup() {
  return __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x) >> 7, 0);
}

__device__ __forceinline__ unsigned char* align1024(unsigned char* p) {
  const uint32_t a = smem_addr(p);
  return p + ((1024u - (a & 1023u)) & 1023u);
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

// This thread's A fragments (wgmma.cuh's layout) of the 64 rows row0 .. + 63 of a tile stored
// swizzled (sw128_offset, `rows` rows a 64-column region), over its D columns: k-step kk holds
// columns 16 kk .. + 15. A tile the products read every step is read once this way, so that
// they take it from registers (wgmma's RS form) and shared memory serves only their B operand.
template <int D>
__device__ __forceinline__ void load_a_fragments(const unsigned char* tile, int rows, int row0,
                                                 uint32_t (&f)[D / 16][4]) {
  const int warp = (threadIdx.x >> 5) & 3, g = (threadIdx.x & 31) >> 2, t = threadIdx.x & 3;
  const int r = row0 + warp * 16 + g;
  const auto word = [&](int row, int col) {
    return *reinterpret_cast<const uint32_t*>(tile + sw128_offset(rows, row, col));
  };
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    const int c = 16 * kk + 2 * t;
    f[kk][0] = word(r, c);
    f[kk][1] = word(r + 8, c);
    f[kk][2] = word(r, c + 8);
    f[kk][3] = word(r + 8, c + 8);
  }
}

// ------------------------------------------------------------------------------------------
// Forward, warp-specialised and persistent (FlashAttention-3's structure). min(tiles, SMs)
// blocks of 384 threads walk the tiles (b·heads × query blocks of 128, in fwd_tile's order, dealt
// in snake order: fwd_tile_index). Warpgroup 0 is the producer: one
// thread issues the tensor-memory-accelerator loads of Q and of every key block's K and V into
// two stages each, each load completing on a "full" mbarrier; it waits on the matching "empty"
// barrier, which the 8 consumer warps arrive on when their tensor-core reads of that stage are
// done. Warpgroups 1 and 2 are the consumers (64 query rows each): S = Q·K^T (K-major operands),
// an online softmax in registers, O += P·V with P as the register A operand and V read N-major.
// Each consumer issues S_j and the previous step's P·V back to back and then runs its softmax
// while they execute (intra-warpgroup overlap); the two consumers take turns at issuing through
// two named barriers (ping-pong), so that one's softmax runs while the other's products occupy
// the tensor cores. Registers move from the producer (24) to the consumers (240).
constexpr int kFwdM = 128;  // query rows per tile
constexpr int kFwdN = 128;  // keys per step: equal to kFwdM, so every warpgroup has live keys
constexpr int kFwdStages = 2;
constexpr int kFwdQBuffers = 2;          // the next tile's Q loads while this tile runs
constexpr int kFwdRegion = kFwdM * 128;  // one 64-column block of a 128-row Q, K or V tile

template <int D>
constexpr int fwd_tile_bytes() {
  return kFwdM * D * 2;
}
template <int D>
constexpr int fwd_smem_bytes() {
  return 1024 + (kFwdQBuffers + 2 * kFwdStages) * fwd_tile_bytes<D>();  // alignment, Q, K, V
}

struct FwdBarriers {
  uint64_t q_full[kFwdQBuffers], q_empty[kFwdQBuffers];
  uint64_t k_full[kFwdStages], k_empty[kFwdStages];
  uint64_t v_full[kFwdStages], v_empty[kFwdStages];
};

// Tile t of the forward: (batch·head, first query row, key blocks up to the diagonal), in
// attention_layout::FwdTileOrder's order: sections of `sec` (batch, head)s, a multiple of the
// heads per K/V group sized on the host so that a section's K and V stay in L2, so that the
// blocks of one wave share a few heads' K and V instead of reading every head's from memory
// (FlashAttention-3's L2 swizzle of its tile scheduler).
struct FwdTile {
  int bh, q0, n_kb;
};
__device__ __forceinline__ FwdTile fwd_tile(int t, int n_bh, int n_qb, int sec, int s) {
  FwdTile r;
  int qb;
  FwdTileOrder{n_bh, n_qb, sec}.at(t, r.bh, qb);
  r.q0 = qb * kFwdM;
  r.n_kb = (min(s, r.q0 + kFwdM) + kFwdN - 1) / kFwdN;
  return r;
}

// The index of this block's k-th tile: the grid deals the tiles (fwd_tile's order) in snake order,
// blocks 0..G-1, then G-1..0, which evens the blocks' causal work where consecutive rounds have
// similar tiles.
__device__ __forceinline__ int fwd_tile_index(int k) {
  const int g = static_cast<int>(gridDim.x), c = static_cast<int>(blockIdx.x);
  const int base = (k >> 1) * 2 * g;
  return (k & 1) ? base + 2 * g - 1 - c : base + c;
}

// A consumer warp is done with a stage: its lane 0 arrives (the barriers count warps), through a
// predicate rather than a branch.
__device__ __forceinline__ void warp_release(uint64_t* bar, bool pred = true) {
  mbar_arrive_if(bar, pred && (threadIdx.x & 31) == 0);
}

// The producer thread: Q of each tile, then K_j and V_j of its key blocks (the head's K/V group),
// in the consumers' order. The tensor map's planes are qkv's (Dims::qkv_plane_index).
template <int D>
__device__ void fwd_produce(const CUtensorMap* map, unsigned char* sQ, unsigned char* sK,
                            unsigned char* sV, FwdBarriers& bar, const Dims& dm, int n_tiles,
                            int n_qb, int sec) {
  constexpr int kTile = fwd_tile_bytes<D>();
  int kv = 0;
  for (int tile_i = 0;; ++tile_i) {
    const int t = fwd_tile_index(tile_i);
    if (t >= n_tiles) break;
    const FwdTile tl = fwd_tile(t, dm.b * dm.heads, n_qb, sec, dm.s);
    const int bi = tl.bh / dm.heads, hh = tl.bh % dm.heads;
    const int plane_q = dm.qkv_plane_index(bi, hh, 0), plane_k = dm.qkv_plane_index(bi, hh, 1);
    const int qb = tile_i % kFwdQBuffers;
    mbar_wait(&bar.q_empty[qb], ((tile_i / kFwdQBuffers) & 1) ^ 1);
    mbar_arrive_expect_tx(&bar.q_full[qb], kTile);
#pragma unroll
    for (int c = 0; c < D / 64; ++c)
      tma_load_3d(sQ + qb * kTile + c * kFwdRegion, map, &bar.q_full[qb], c * 64, plane_q, tl.q0);
    for (int j = 0; j < tl.n_kb; ++j, ++kv) {
      const int st = kv % kFwdStages;
      const uint32_t ph = (kv / kFwdStages) & 1;
      mbar_wait(&bar.k_empty[st], ph ^ 1);
      mbar_arrive_expect_tx(&bar.k_full[st], kTile);
#pragma unroll
      for (int c = 0; c < D / 64; ++c)
        tma_load_3d(sK + st * kTile + c * kFwdRegion, map, &bar.k_full[st], c * 64, plane_k,
                    j * kFwdN);
      mbar_wait(&bar.v_empty[st], ph ^ 1);
      mbar_arrive_expect_tx(&bar.v_full[st], kTile);
#pragma unroll
      for (int c = 0; c < D / 64; ++c)
        tma_load_3d(sV + st * kTile + c * kFwdRegion, map, &bar.v_full[st], c * 64,
                    plane_k + dm.groups, j * kFwdN);
    }
  }
}

// Online softmax of one step in log2 units over S (64 rows × kFwdN keys of the warpgroup; this
// thread's rows row0, row0 + 8): P = exp2(S·scale − m) left in f32 in sc, the running max m (of
// the scaled scores) and sum updated, alpha the factor for O. The max is taken over the raw
// scores (scale > 0) and S·scale − m is one fused multiply-add. kMask: keys past the row or past
// s are masked (the blocks that reach the diagonal or the sequence's end: fwd_first_masked);
// a run-time flag instead left the compares and selects in every step, if-converted, the ALU
// pipe's largest load at head dim 64.
template <bool kMask>
__device__ __forceinline__ void fwd_softmax(float (&sc)[kFwdN / 2], float (&row_m)[2],
                                            float (&row_l)[2], float (&alpha)[2], float scale_log2,
                                            int k0, int row0, int s) {
  const int t = threadIdx.x & 3;
  float base[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float mx = -INFINITY;  // of the raw scores
#pragma unroll
    for (int j = 0; j < kFwdN / 8; ++j) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        float v = sc[4 * j + 2 * r + e];
        if constexpr (kMask) {
          const int key = k0 + 8 * j + 2 * t + e;
          if (key > row0 + 8 * r || key >= s) v = -INFINITY;
        }
        sc[4 * j + 2 * r + e] = v;
        mx = fmaxf(mx, v);
      }
    }
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    const float m_new = fmaxf(row_m[r], mx * scale_log2);
    base[r] = m_new == -INFINITY ? 0.0f : m_new;  // a row with every key masked so far
    alpha[r] = exp2_ftz(row_m[r] - base[r]);
    row_m[r] = m_new;
    row_l[r] *= alpha[r];
  }
#pragma unroll
  for (int i = 0; i < kFwdN / 2; ++i) {
    sc[i] = exp2_ftz(fmaf(sc[i], scale_log2, -base[(i >> 1) & 1]));
    row_l[(i >> 1) & 1] += sc[i];
  }
}

// O (rows row0, row0 + 8; columns 8 j + 2 t, + 1) / l into out, and the rows' log-sum-exp. The
// stores are predicated, not branched around: a divergent branch serialises the next tile's wgmma.
template <int D>
__device__ __forceinline__ void fwd_store(const float (&o)[D / 2], const float (&row_m)[2],
                                          const float (&row_l)[2], const Plane& po, float* lse_row,
                                          int row0, int s) {
  const int t = threadIdx.x & 3;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float l = row_l[r];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    const float inv = l > 0.0f ? __frcp_rn(l) : 0.0f;  // no slow-path branch
    const int row = row0 + 8 * r;
    const bool live = row < s;
    const int row_c = live ? row : 0;
    st_global_u32_if(lse_row + row_c, __float_as_uint((row_m[r] + __log2f(l)) * kLn2),
                     live && t == 0);
    bf16* dst = const_cast<bf16*>(po.base) + static_cast<int64_t>(row_c) * po.row_stride + 2 * t;
#pragma unroll
    for (int j = 0; j < D / 8; ++j) {
      st_global_u32_if(dst + 8 * j, pack_bf16(o[4 * j + 2 * r] * inv, o[4 * j + 2 * r + 1] * inv),
                       live);
    }
  }
}

// The first key block from which a warpgroup's steps need the mask (at least 1: step 0 is
// always masked): the first that holds a key past the warpgroup's first row wg_row0, or past s.
__device__ __forceinline__ int fwd_first_masked(int wg_row0, int s) {
  const auto first_above = [](int x) { return x >= 0 ? x / kFwdN + 1 : 0; };  // kFwdN·i > x
  return max(1, min(first_above(wg_row0 - (kFwdN - 1)), first_above(s - kFwdN)));
}

// Whether the forward holds Q in registers: at head dim 128 S = Q·K^T then reads only K from
// shared memory (reference shape 530 -> 535-539 TFLOP/s on an H200); at head dim 64 it was
// slower (Llama's shape 432 -> 413), so there both operands stay in shared memory.
template <int D>
constexpr bool kFwdQInRegs = D == 128;

// S = Q·K^T over the head dim for one warpgroup (64 rows × kFwdN keys), issued, not waited for:
// Q from this thread's A fragments qf (load_a_fragments, once a tile) where kFwdQInRegs, else
// from shared memory at q_addr; K read K-major.
template <int D>
__device__ __forceinline__ void fwd_issue_s(float (&sc)[kFwdN / 2], const uint32_t (&qf)[D / 16][4],
                                            uint32_t q_addr, uint32_t k_addr) {
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    const uint32_t koff = (kk >> 2) * kFwdRegion + (kk & 3) * 32;
    if constexpr (kFwdQInRegs<D>) {
      mma_rs<kFwdN, 0>(sc, qf[kk], sw128_desc(k_addr + koff, 16, 1024), kk > 0);
    } else {
      mma_ss<kFwdN, 0, 0>(sc, sw128_desc(q_addr + koff, 16, 1024),
                          sw128_desc(k_addr + koff, 16, 1024), kk > 0);
    }
  }
}
// O += P·V for one step: P the register A fragments, V (kFwdN keys × D) read N-major.
template <int D>
__device__ __forceinline__ void fwd_issue_pv(float (&o)[D / 2], const uint32_t (&pa)[kFwdN / 16][4],
                                             uint32_t v_addr) {
#pragma unroll
  for (int kk = 0; kk < kFwdN / 16; ++kk)
    mma_rs<D, 1>(o, pa[kk], sw128_desc(v_addr + kk * 16 * 128, kFwdRegion, 1024), true);
}
// P (f32, in S's registers) packed as the A fragments of P·V: key chunk j is half (j & 1) of the
// fragment of k-step j / 2.
__device__ __forceinline__ void fwd_pack_p(const float (&sc)[kFwdN / 2],
                                           uint32_t (&pa)[kFwdN / 16][4]) {
#pragma unroll
  for (int j = 0; j < kFwdN / 8; ++j) {
    pa[j >> 1][2 * (j & 1)] = pack_bf16(sc[4 * j], sc[4 * j + 1]);
    pa[j >> 1][2 * (j & 1) + 1] = pack_bf16(sc[4 * j + 2], sc[4 * j + 3]);
  }
}

// Consumer warpgroup cw (0 or 1): rows q0 + 64 cw .. + 63 of each tile. Named barrier 1 + cw is
// this warpgroup's turn to issue; it passes when the other warpgroup has issued (bar.arrive).
// The first step of a tile (no P·V yet) is peeled off the loop, so that every step of the loop
// commits the same two wgmma groups (a data-dependent count makes the compiler serialise them).
template <int D>
__device__ void fwd_consume(int cw, unsigned char* sQ, unsigned char* sK, unsigned char* sV,
                            FwdBarriers& bar, bf16* out, float* lse, const Dims& dm, int n_tiles,
                            int n_qb, int sec, float scale_log2) {
  constexpr int kTile = fwd_tile_bytes<D>();
  const int warp = (threadIdx.x >> 5) & 3, g = (threadIdx.x & 31) >> 2;
  const int s = dm.s;
  const uint32_t k_base = smem_addr(sK), v_base = smem_addr(sV);
  const int my_turn = 1 + cw, other_turn = 2 - cw;
  if (cw == 1) named_bar_arrive(1, 256);  // warpgroup 0 issues first
  int kv = 0;
  for (int tile_i = 0;; ++tile_i) {
    const int t = fwd_tile_index(tile_i);
    if (t >= n_tiles) break;
    const FwdTile tl = fwd_tile(t, dm.b * dm.heads, n_qb, sec, s);
    const int wg_row0 = tl.q0 + cw * 64;       // this warpgroup's first query row
    const int row0 = wg_row0 + warp * 16 + g;  // this thread's rows: row0, row0 + 8
    float o[D / 2];
#pragma unroll
    for (int i = 0; i < D / 2; ++i) o[i] = 0.0f;
    float row_m[2] = {-INFINITY, -INFINITY}, row_l[2] = {0.0f, 0.0f};
    uint32_t pa[kFwdN / 16][4];  // P of the previous step, the A operand of its P·V
    float alpha[2];
    const int qb = tile_i % kFwdQBuffers;
    const uint32_t q_addr = smem_addr(sQ + qb * kTile) + cw * 64 * 128;
    mbar_wait(&bar.q_full[qb], (tile_i / kFwdQBuffers) & 1);
    // This warpgroup's 64 rows of Q where kFwdQInRegs (the previous tile's products are done).
    uint32_t qf[D / 16][4];
    if constexpr (kFwdQInRegs<D>) load_a_fragments<D>(sQ + qb * kTile, kFwdM, cw * 64, qf);

    // Step 0: S_0 only.
    {
      const int st = kv % kFwdStages;
      mbar_wait(&bar.k_full[st], (kv / kFwdStages) & 1);
      float sc[kFwdN / 2];
      named_bar_sync(my_turn, 256);
      wgmma_fence();
      fwd_issue_s<D>(sc, qf, q_addr, k_base + st * kTile);
      wgmma_commit();
      named_bar_arrive(other_turn, 256);
      wgmma_wait<0>();
      fence_regs(sc);
      warp_release(&bar.k_empty[st]);
      warp_release(&bar.q_empty[qb], tl.n_kb == 1);
      fwd_softmax<true>(sc, row_m, row_l, alpha, scale_log2, 0, row0, s);
      fwd_pack_p(sc, pa);
      ++kv;
    }
    // Steps 1..: S_it and P_{it-1}·V_{it-1} issued together; the softmax of S_it runs while the
    // P·V executes; O is rescaled and P_it packed once it is done. The steps before
    // fwd_first_masked run the softmax without the mask, the rest with it.
    const auto step = [&](int it, auto masked) {
      const int st = kv % kFwdStages, pst = (kv + kFwdStages - 1) % kFwdStages;
      mbar_wait(&bar.k_full[st], (kv / kFwdStages) & 1);
      mbar_wait(&bar.v_full[pst], ((kv - 1) / kFwdStages) & 1);
      float sc[kFwdN / 2];
      named_bar_sync(my_turn, 256);
      wgmma_fence();
      fwd_issue_s<D>(sc, qf, q_addr, k_base + st * kTile);
      wgmma_commit();
      fwd_issue_pv<D>(o, pa, v_base + pst * kTile);
      wgmma_commit();
      named_bar_arrive(other_turn, 256);
      wgmma_wait<1>();  // S is done; the P·V may still run
      fence_regs(sc);
      warp_release(&bar.k_empty[st]);
      warp_release(&bar.q_empty[qb], it == tl.n_kb - 1);
      fwd_softmax<decltype(masked)::value>(sc, row_m, row_l, alpha, scale_log2, it * kFwdN, row0,
                                           s);
      wgmma_wait<0>();
      fence_regs(o);
      fence_regs(pa);
      warp_release(&bar.v_empty[pst]);
#pragma unroll
      for (int j = 0; j < D / 8; ++j) {
        o[4 * j] *= alpha[0];
        o[4 * j + 1] *= alpha[0];
        o[4 * j + 2] *= alpha[1];
        o[4 * j + 3] *= alpha[1];
      }
      fwd_pack_p(sc, pa);
    };
    int it = 1;
    for (const int unmasked_end = fwd_first_masked(wg_row0, s); it < unmasked_end && it < tl.n_kb;
         ++it, ++kv)
      step(it, std::false_type{});
    for (; it < tl.n_kb; ++it, ++kv) step(it, std::true_type{});
    // The last step's O += P·V.
    {
      const int pst = (kv + kFwdStages - 1) % kFwdStages;
      mbar_wait(&bar.v_full[pst], ((kv - 1) / kFwdStages) & 1);
      wgmma_fence();
      fwd_issue_pv<D>(o, pa, v_base + pst * kTile);
      wgmma_commit();
      wgmma_wait<0>();
      fence_regs(o);
      fence_regs(pa);
      if constexpr (kFwdQInRegs<D>) fence_regs(qf);
      warp_release(&bar.v_empty[pst]);
    }
    const int bi = tl.bh / dm.heads, hh = tl.bh % dm.heads;
    fwd_store<D>(o, row_m, row_l, dm.out_plane(out, bi, hh), lse + static_cast<int64_t>(tl.bh) * s,
                 row0, s);
  }
  if (cw == 0) named_bar_sync(1, 256);  // warpgroup 1's last arrival
}

template <int D>
__global__ void __launch_bounds__(kThreads, 1)
    hopper_fwd_kernel(const __grid_constant__ CUtensorMap qkv_map, bf16* __restrict__ out,
                      float* __restrict__ lse, Dims dm, float scale_log2, int n_tiles, int n_qb,
                      int sec) {
  constexpr int kTile = fwd_tile_bytes<D>();
  extern __shared__ unsigned char smem_raw[];
  __shared__ FwdBarriers bar;
  unsigned char* sQ = align1024(smem_raw);
  unsigned char* sK = sQ + kFwdQBuffers * kTile;  // kFwdStages tiles
  unsigned char* sV = sK + kFwdStages * kTile;    // kFwdStages tiles
  if (threadIdx.x == 0) {
    prefetch_tensormap(&qkv_map);
#pragma unroll
    for (int i = 0; i < kFwdQBuffers; ++i) {
      mbar_init(&bar.q_full[i], 1);
      mbar_init(&bar.q_empty[i], kConsumerWarps);
    }
#pragma unroll
    for (int i = 0; i < kFwdStages; ++i) {
      mbar_init(&bar.k_full[i], 1);
      mbar_init(&bar.k_empty[i], kConsumerWarps);
      mbar_init(&bar.v_full[i], 1);
      mbar_init(&bar.v_empty[i], kConsumerWarps);
    }
    mbar_init_fence();
  }
  __syncthreads();
  const int wg = uniform_warpgroup();
  if (wg == 0) {
    setmaxnreg_dec<24>();
    if (threadIdx.x == 0) fwd_produce<D>(&qkv_map, sQ, sK, sV, bar, dm, n_tiles, n_qb, sec);
  } else {
    setmaxnreg_inc<240>();
    fwd_consume<D>(wg - 1, sQ, sK, sV, bar, out, lse, dm, n_tiles, n_qb, sec, scale_log2);
  }
}

// ------------------------------------------------------------------------------------------
// Backward: tile sizes and the helpers of its consumers. A tile is one key block of one head set
// (BwdWork::block: a batch, a K/V group and a chunk of its heads); blocks take tiles from a
// counter (BwdTiles), and the dQ parts of all the key blocks of a head add into one f32
// accumulator in key-block order (bwd_write_dq): deterministic.

// The SM count the backward's plan (hopper_bwd_chunks) assumes, an H100's or H200's, so that the
// plan and the results depend on the shape only; another count changes only the speed.
constexpr int64_t kHopperBwdSlots = 132;
constexpr int kBwdN = 128;  // keys per key block (64 per warpgroup)
// Queries per step: 64 at head dim 128; 128 at head dim 64, where a step of 64 left the tensor
// cores idle at the step's barriers (the products per step scale with the head dim) and the dQ
// product on one warpgroup; at 128 each consumer takes dQ's rows of a half of the queries.
__host__ __device__ constexpr int bwd_m(int d) { return d == 64 ? 128 : 64; }
template <int D>
constexpr int kBwdM = bwd_m(D);
// Query steps of a sequence of s rows (the last one partial where the step does not divide s).
__host__ __device__ constexpr int bwd_query_steps(int s, int d) {
  return (s + bwd_m(d) - 1) / bwd_m(d);
}
// Key blocks of a sequence of s rows (the last one partial where kBwdN does not divide s).
constexpr int64_t bwd_key_blocks(int64_t s) { return (s + kBwdN - 1) / kBwdN; }
constexpr int kRegK = kBwdN * 128;  // a 64-column block of K or V (bytes)
template <int D>
constexpr int kRegQ = kBwdM<D> * 128;  // a 64-column block of Q or dO (bytes)
// The dQ tile of a query step (kBwdM × D, f32) goes through the finalizer in two chunks of 64 rows
// × 64 columns: its column blocks at head dim 128, its halves of rows at head dim 64. Chunk c is
// also what consumer warpgroup c computes (bwd_stage_dq).
constexpr int kDqChunk = 64;
constexpr int dq_chunks(int d) { return bwd_m(d) * d / (kDqChunk * kDqChunk); }
static_assert(dq_chunks(64) == 2 && dq_chunks(128) == 2, "one dQ chunk per consumer");

// P^T = exp2(S^T·scale·log2 e − lse·log2 e) of this thread's 2 keys (key0, key0 + 8) × M / 4
// queries of the step (columns 8 j + 2 t, + 1), zero where key > query or query >= s (kMask and
// need_mask: the steps that reach the diagonal or the sequence's end; at head dim 64 the caller
// knows them at compile time, BwdMaskedSteps), packed as the A fragments (k = queries) of
// dV += P^T·dO. cL: the step's lse.
template <bool kMask, int M>
__device__ __forceinline__ void bwd_p_fragments(const float (&sc)[M / 2], const float* cL,
                                                float scale_log2, bool need_mask, int key0, int q0,
                                                int s, uint32_t (&pa)[M / 16][4]) {
  const int t = threadIdx.x & 3;
#pragma unroll
  for (int j = 0; j < M / 8; ++j) {
    const int qc = 8 * j + 2 * t;  // this thread's query columns qc, qc + 1 of the step
    const float2 l2 = *reinterpret_cast<const float2*>(cL + qc);
    float pv[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int c = e & 1;
      const float lse_log2 = (c ? l2.y : l2.x) * kLog2e;
      float p = exp2_ftz(sc[4 * j + e] * scale_log2 - lse_log2);
      const int key = key0 + 8 * (e >> 1), query = q0 + qc + c;
      if (kMask && need_mask && (key > query || query >= s)) p = 0.0f;
      pv[e] = p;
    }
    pa[j >> 1][2 * (j & 1)] = pack_bf16(pv[0], pv[1]);
    pa[j >> 1][2 * (j & 1) + 1] = pack_bf16(pv[2], pv[3]);
  }
}

// dS^T = P^T ∘ (dP^T − dsum) as the A fragments of dK += dS^T·Q, and into the shared dS^T tile
// (keys × queries, swizzled: M / 64 blocks of 64 queries) at key rows kl, kl + 8 of the block.
// cD: the step's dsum.
template <int M>
__device__ __forceinline__ void bwd_ds_fragments(const uint32_t (&pa)[M / 16][4],
                                                 const float (&dp)[M / 2], const float* cD, int kl,
                                                 unsigned char* sdS, uint32_t (&da)[M / 16][4]) {
  const int t = threadIdx.x & 3;
#pragma unroll
  for (int j = 0; j < M / 8; ++j) {
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

// One warpgroup's dQ part (64 queries × 64 columns, accumulators dq: chunk cb of the tile,
// dq_chunks) into the staged dQ tile in the accumulators' own order ("fragment order"): float4 k
// of thread tw of chunk cb at ((cb · 8 + k) · 128 + tw) · 4, so that a warp writes 512
// consecutive bytes (no bank conflicts) and the tile goes out as one bulk copy. bwd_finalize_dq
// maps it back to rows.
__device__ __forceinline__ void bwd_stage_dq(const float (&dq)[32], float* tile, int cb) {
  const int tw = threadIdx.x & 127;
#pragma unroll
  for (int k = 0; k < 8; ++k)
    *reinterpret_cast<float4*>(tile + ((cb * 8 + k) * 128 + tw) * 4) =
        make_float4(dq[4 * k], dq[4 * k + 1], dq[4 * k + 2], dq[4 * k + 3]);
}

// dK (times scale) and dV of this thread's keys key0, key0 + 8 (< s) from the accumulators,
// through predicated stores (no divergent branch near the wgmma): as bf16 into dqkv's planes
// when `direct` (the block's chunk is its whole K/V group), else as f32 into the chunk's partial
// rows pk, pv (rows of N · 2 floats) for attention.cu's finalize.
template <int N>  // accumulator registers: head dim / 2
__device__ __forceinline__ void bwd_store_dk_dv(const float (&dk)[N], const float (&dv)[N],
                                                const Plane& pdk, const Plane& pdv, float* pk,
                                                float* pv, bool direct, int key0, int s,
                                                float scale) {
  const int t = threadIdx.x & 3;
#pragma unroll
  for (int rr = 0; rr < 2; ++rr) {
    const int key = key0 + 8 * rr;
    const bool live = key < s;
    const int64_t foff = static_cast<int64_t>(live ? key : 0) * (2 * N) + 2 * t;
#pragma unroll
    for (int j = 0; j < N / 4; ++j) {
      st_global_f32x2_if(pk + foff + 8 * j, dk[4 * j + 2 * rr] * scale,
                         dk[4 * j + 2 * rr + 1] * scale, live && !direct);
      st_global_f32x2_if(pv + foff + 8 * j, dv[4 * j + 2 * rr], dv[4 * j + 2 * rr + 1],
                         live && !direct);
    }
    const bool live_direct = live && direct;
    const int64_t off = static_cast<int64_t>(live ? key : 0) * pdk.row_stride + 2 * t;
#pragma unroll
    for (int j = 0; j < N / 4; ++j) {
      st_global_u32_if(const_cast<bf16*>(pdk.base) + off + 8 * j,
                       pack_bf16(dk[4 * j + 2 * rr] * scale, dk[4 * j + 2 * rr + 1] * scale),
                       live_direct);
      st_global_u32_if(const_cast<bf16*>(pdv.base) + off + 8 * j,
                       pack_bf16(dv[4 * j + 2 * rr], dv[4 * j + 2 * rr + 1]), live_direct);
    }
  }
}

// Lanes that share x's positions (a warp's lanes g·4 + t of one t, g < 8) add them pairwise
// across lane bit `mask`, each keeping one half: the upper half where `upper`, into x[0, L / 2).
template <int L, int V>
__device__ __forceinline__ void halve_across_lanes(float (&x)[V], int mask, bool upper) {
#pragma unroll
  for (int i = 0; i < L / 2; ++i) {
    const float keep = upper ? x[i + L / 2] : x[i];
    const float send = upper ? x[i] : x[i + L / 2];
    x[i] = keep + __shfl_xor_sync(0xffffffffu, send, mask);
  }
}

// The column sums of this warp's 16 keys of dK (times scale) and dV, of the bf16 values
// bwd_store_dk_dv writes (keys past s count zero), into dst: D floats of dK's columns, and D of
// dV's kv_stride floats on.
// Each thread adds its two keys into x (its D / 4 columns 8 j + 2 t + c of dK, then of dV); the
// 8 lanes of each t then halve x three times (halve_across_lanes: 7/8 of the shuffles of every
// lane adding every value), so lane g ends with x[g·N / 8, (g + 1)·N / 8) summed over all 16 keys:
// a fixed order, the same bits on every run.
template <int N>  // accumulator registers: head dim / 2
__device__ __forceinline__ void bwd_colsum_dk_dv(const float (&dk)[N], const float (&dv)[N],
                                                 int key0, int s, float scale, float* dst,
                                                 int kv_stride) {
  constexpr int kHalf = N / 2;  // x: kHalf values of dK, then kHalf of dV
  const int lane = threadIdx.x & 31, t = lane & 3, g = lane >> 2;
  float x[N];
#pragma unroll
  for (int i = 0; i < N; ++i) x[i] = 0.0f;
#pragma unroll
  for (int rr = 0; rr < 2; ++rr) {
    const bool live = key0 + 8 * rr < s;
#pragma unroll
    for (int j = 0; j < N / 4; ++j) {
      const uint32_t k2 = pack_bf16(dk[4 * j + 2 * rr] * scale, dk[4 * j + 2 * rr + 1] * scale);
      const uint32_t v2 = pack_bf16(dv[4 * j + 2 * rr], dv[4 * j + 2 * rr + 1]);
      x[2 * j] += live ? bf16_lo(k2) : 0.0f;
      x[2 * j + 1] += live ? bf16_hi(k2) : 0.0f;
      x[kHalf + 2 * j] += live ? bf16_lo(v2) : 0.0f;
      x[kHalf + 2 * j + 1] += live ? bf16_hi(v2) : 0.0f;
    }
  }
  halve_across_lanes<N>(x, 16, (g & 4) != 0);
  halve_across_lanes<N / 2>(x, 8, (g & 2) != 0);
  halve_across_lanes<N / 4>(x, 4, (g & 1) != 0);
#pragma unroll
  for (int i = 0; i < N / 8; i += 2) {
    const int idx = g * (N / 8) + i;  // even: the pair (c = 0, 1) of one column block j
    const int kv = idx / kHalf, j = (idx % kHalf) / 2;
    *reinterpret_cast<float2*>(dst + kv * kv_stride + 8 * j + 2 * t) = make_float2(x[i], x[i + 1]);
  }
}

// acc (64 keys × kBwdM queries of a warpgroup) = A·B^T over the head dim, A a K or V tile and B a
// Q or dO tile, each in 64-column blocks of 128-byte swizzled rows (kBwdN and kBwdM rows a block).
// (K's fragments in registers, as the forward holds Q's, leave the head-dim-64 backward too few
// registers: ptxas serialises its wgmma, C7512.)
template <int D>
__device__ __forceinline__ void bwd_keys_x_queries(float (&acc)[kBwdM<D> / 2], uint32_t a_addr,
                                                   uint32_t b_addr) {
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    const uint32_t ka = (kk >> 2) * kRegK + (kk & 3) * 32;
    const uint32_t kq = (kk >> 2) * kRegQ<D> + (kk & 3) * 32;
    mma_ss<kBwdM<D>, 0, 0>(acc, sw128_desc(a_addr + ka, 16, 1024),
                           sw128_desc(b_addr + kq, 16, 1024), kk > 0);
  }
}

// Backward, warp-specialised and persistent: min(tiles, SMs) blocks of 384 threads. Warpgroup 0:
// warp 0 is the producer, warp 1 the dQ writer (bwd_write_dq), warps 2 and 3 the dQ finalizer
// (bwd_finalize_dq), which turns each dQ tile the writer completes into bf16. The producer takes
// the block's next tile from the counter, loads its K and V (TMA, 128 rows) on the kv barriers and,
// for each query step, Q and dO (TMA, 64 rows) and the step's lse and dsum (plain loads, zero past
// s) into one of kBwdStages stages on its full barrier, once the consumers have released the stage.
// Warpgroups 1 and 2 are the consumers (64 keys each), as described at the top of the file; they
// meet at named barrier 3 for the dS^T exchange of each step (dS^T is double-buffered, so that
// one warpgroup may write the next step's while the other still reads this one's), and hand each
// step's dQ part to the writer through one staged tile (the dq barriers).
constexpr int kBwdStages = 2;

template <int D>
struct BwdSmem {
  static constexpr int kTileK = kBwdN * D * 2;      // K or V
  static constexpr int kTileQ = kBwdM<D> * D * 2;   // Q or dO, one stage
  static constexpr int kDs = kBwdN * kBwdM<D> * 2;  // dS^T (keys × queries), one of two buffers
  static constexpr int kDq = kBwdM<D> * D * 4;      // the staged dQ tile (f32, fragment order)
  static constexpr int kFinIn = kDqChunk * kDqChunk * 4;   // the finalizer's chunk, f32
  static constexpr int kFinOut = kDqChunk * kDqChunk * 2;  // the same as bf16 (swizzled rows)
  static constexpr int kBytes = 1024 + 2 * kTileK + 2 * kBwdStages * kTileQ + 2 * kDs + kDq +
                                kFinOut + kFinIn + 2 * kBwdStages * kBwdM<D> * 4;
  static_assert(kBytes <= 227 * 1024, "the backward's shared memory exceeds an SM's");
};

struct BwdBarriers {
  uint64_t kv_full, kv_empty;
  uint64_t full[kBwdStages], empty[kBwdStages];
  uint64_t dq_full, dq_empty;
  uint64_t fin_full, fin_empty, fin_load;
  int tile;             // the tile whose K and V kv_full announces; -1: no more
  int dq_index, dq_kb;  // the staged dQ tile's accumulator index and key block; -1: no more
  int fin_index;        // the complete dQ tile fin_full announces; -1: no more
};

// The tiles, in the order blocks take them: attention_layout::BwdTileOrder, in sections of head
// sets whose Q, dO and dQ fit in L2 and at least two waves of tiles (the launcher's choice). A
// tile's dQ predecessors come before it, so they were taken by running blocks: no tile waits on
// one that no block holds.
using BwdTiles = attention_layout::BwdTileOrder;

// The query steps of a tile (key block kb, `heads` heads): step i is query step
// n_q − 1 − i / heads, from the last down to the key block's diagonal, of head i % heads. Every
// key block of a head set reaches a query step at the same pace, so the lower key blocks, taken
// earlier, add their dQ parts to it first, and tiles taken together read its Q and dO from L2.
template <int D>
struct BwdSteps {
  static constexpr int kPerKeyBlock = kBwdN / kBwdM<D>;  // query steps a key block spans
  int n_q, heads;
  __device__ int count(int kb) const { return heads * (n_q - kb * kPerKeyBlock); }
  // The highest key block whose steps reach query step q (the one whose diagonal it is): the last
  // to add its dQ part there.
  __device__ static int last_key_block(int q_step) { return q_step / kPerKeyBlock; }
  __device__ int q_step(int i) const { return n_q - 1 - i / heads; }
  __device__ int head(int i) const { return i % heads; }
};

// Which of a tile's steps (BwdSteps) a consumer's 64 keys from wg_key0 need masked: the first
// `tail_end` (the last query step, where kBwdM does not divide s) and those from `diag_begin` on
// (query steps that hold a query before one of the keys). The others run without the mask's
// compares and selects, which a run-time flag left in every step, if-converted.
template <int D>
struct BwdMaskedSteps {
  int tail_end, diag_begin;
  __device__ BwdMaskedSteps(const BwdSteps<D>& st, int n_steps, int wg_key0, int s) {
    tail_end = s % kBwdM<D> != 0 ? min(st.heads, n_steps) : 0;
    const int diag_q = (wg_key0 + 63) / kBwdM<D>;  // query steps up to it hold a query before a key
    diag_begin = max(tail_end, min(n_steps, (st.n_q - 1 - diag_q) * st.heads));
  }
};

// The producer warp. map_q / map_kv: qkv with boxes of kBwdM / kBwdN rows; map_do: dout.
template <int D>
__device__ void bwd_produce(const CUtensorMap* map_q, const CUtensorMap* map_kv,
                            const CUtensorMap* map_do, unsigned char* sK, unsigned char* sV,
                            unsigned char* sQ, unsigned char* sdO, float* sL, float* sD,
                            BwdBarriers& bar, const BwdTiles& tiles, const BwdWork& work,
                            const Dims& dm, int* counter, const float* lse, const float* dsum) {
  using S = BwdSmem<D>;
  constexpr int M = kBwdM<D>;
  const int lane = threadIdx.x & 31;
  const int s = dm.s, n_q = bwd_query_steps(s, D);
  int ctr = 0;
  for (int n = 0;; ++n) {
    int t = 0;
    if (lane == 0) t = atomicAdd(counter, 1);
    t = __shfl_sync(0xffffffffu, t, 0);
    mbar_wait(&bar.kv_empty, (n & 1) ^ 1);
    if (t >= tiles.count()) {
      if (lane == 0) {
        bar.tile = -1;
        mbar_arrive(&bar.kv_full);
      }
      break;
    }
    int hs, kb;
    tiles.at(t, hs, kb);
    const BwdWork::Block blk = work.block(dm, hs);
    if (lane == 0) {
      bar.tile = t;
      const int plane_k = dm.qkv_plane_index(blk.bi, blk.h0, 1);
      const int plane_v = dm.qkv_plane_index(blk.bi, blk.h0, 2);
      mbar_arrive_expect_tx(&bar.kv_full, 2 * S::kTileK);
#pragma unroll
      for (int c = 0; c < D / 64; ++c) {
        tma_load_3d(sK + c * kRegK, map_kv, &bar.kv_full, c * 64, plane_k, kb * kBwdN);
        tma_load_3d(sV + c * kRegK, map_kv, &bar.kv_full, c * 64, plane_v, kb * kBwdN);
      }
    }
    const int n_steps = BwdSteps<D>{n_q, blk.heads}.count(kb);
    // Step i's query step and head (BwdSteps), counted rather than divided.
    int q0 = (n_q - 1) * M, j = 0;
    for (int i = 0; i < n_steps; ++i, ++ctr) {
      const int st = ctr % kBwdStages;
      mbar_wait(&bar.empty[st], ((ctr / kBwdStages) & 1) ^ 1);
      const int hh = blk.h0 + j;
      const int bh = blk.bi * dm.heads + hh;
      const float* lse_row = lse + static_cast<int64_t>(bh) * s;
      const float* dsum_row = dsum + static_cast<int64_t>(bh) * s;
      if (lane == 0) {
        const int plane_q = dm.qkv_plane_index(blk.bi, hh, 0);
        mbar_arrive_expect_tx(&bar.full[st], 2 * S::kTileQ);
#pragma unroll
        for (int c = 0; c < D / 64; ++c) {
          tma_load_3d(sQ + st * S::kTileQ + c * kRegQ<D>, map_q, &bar.full[st], c * 64, plane_q,
                      q0);
          tma_load_3d(sdO + st * S::kTileQ + c * kRegQ<D>, map_do, &bar.full[st], c * 64, bh, q0);
        }
      }
#pragma unroll
      for (int x = lane; x < M; x += 32) {
        const bool ok = q0 + x < s;
        sL[st * M + x] = ok ? lse_row[q0 + x] : 0.0f;
        sD[st * M + x] = ok ? dsum_row[q0 + x] : 0.0f;
      }
      mbar_arrive(&bar.full[st]);  // every lane, after its lse and dsum stores
      if (++j == blk.heads) {
        j = 0;
        q0 -= M;
      }
    }
  }
}

// The dQ writer (warp 1; its lane 0 acts): each staged dQ tile into the f32 accumulator of its
// (batch, head, query step) once that step's lower key blocks have added theirs (`sems` counts
// them): key block 0 copies, the others add (bulk reductions), so the additions into every
// element happen in key-block order whichever blocks run the tiles: deterministic. The stage is
// released as soon as the copy has read it, and the count raised once the copy is complete. The
// query step's last key block (the diagonal's) then hands the complete tile to the finalizer.
template <int D>
__device__ void bwd_write_dq(const float* sDq, BwdBarriers& bar, float* dq_acc, int* sems,
                             int n_q) {
  constexpr int kTileFloats = kBwdM<D> * D;
  const bool leader = (threadIdx.x & 31) == 0;
  int fin = 0;  // tiles handed to the finalizer (the leader's count)
  for (int n = 0;; ++n) {
    mbar_wait(&bar.dq_full, n & 1);
    const int idx = *reinterpret_cast<volatile int*>(&bar.dq_index);
    const int kb = *reinterpret_cast<volatile int*>(&bar.dq_kb);
    if (idx < 0) break;
    if (leader) {
      int* sem = sems + idx;
      while (ld_acquire_gpu(sem) < kb) {
      }
      fence_proxy_async_global();  // the earlier key blocks' additions before this one
      float* dst = dq_acc + static_cast<int64_t>(idx) * kTileFloats;
      if (kb == 0) {
        bulk_store_f32(dst, sDq, kTileFloats * 4);
      } else {
        bulk_reduce_add_f32(dst, sDq, kTileFloats * 4);
      }
      bulk_commit();
      bulk_wait_read<0>();
      mbar_arrive(&bar.dq_empty);
      bulk_wait<0>();
      fence_proxy_async_global();
      red_release_gpu_add(sem, 1);
      if (kb == BwdSteps<D>::last_key_block(idx % n_q)) {
        mbar_wait(&bar.fin_empty, (fin++ & 1) ^ 1);
        bar.fin_index = idx;
        mbar_arrive(&bar.fin_full);
      }
    }
    __syncwarp();
  }
  if (leader) {  // no more
    mbar_wait(&bar.fin_empty, (fin & 1) ^ 1);
    bar.fin_index = -1;
    mbar_arrive(&bar.fin_full);
  }
}

// The dQ finalizer (warps 2 and 3; thread 64 issues the copies): each complete dQ tile the writer
// hands over, times scale, as bf16 into dqkv's slot 0, a chunk of 64 rows × 64 columns at a time
// (dq_chunks): the chunk (contiguous in fragment order, bwd_stage_dq) by one bulk copy into sIn,
// back into rows in sOut (128-byte swizzled: conflict-free stores, as a warp's float4 cover
// eight rows × four 4-byte columns of eight 16-byte chunks), and out by one TMA store (map_dq:
// dqkv, boxes of 64 columns × 64 rows; rows past s are not written, a chunk wholly past s not
// stored). The writer raised the tile's counter after its copy completed, so every key block's
// part is in. With colsum_q, the column sums of the bf16 rows (< s) it writes, in two parts a
// chunk (one per warp, 32 rows each: a thread's four rows, then the 8 lanes of its columns by
// shuffles): rows (batch, query step, chunk row, warp) of heads·D floats, the head's D columns.
template <int D>
__device__ void bwd_finalize_dq(float* sIn, unsigned char* sOut, BwdBarriers& bar,
                                const float* dq_acc, const CUtensorMap* map_dq, const Dims& dm,
                                float scale, float* colsum_q) {
  constexpr int kChunk = kDqChunk * kDqChunk;      // floats of a chunk
  constexpr int kColChunks = D / kDqChunk;         // chunks across a tile's columns
  constexpr int kRowChunks = kBwdM<D> / kDqChunk;  // and down its rows
  const int ft = static_cast<int>(threadIdx.x) - 64;
  const bool leader = ft == 0;
  const int n_q = bwd_query_steps(dm.s, D);
  int loads = 0;
  for (int n = 0;; ++n) {
    mbar_wait(&bar.fin_full, n & 1);
    const int idx = *reinterpret_cast<volatile int*>(&bar.fin_index);
    mbar_arrive(&bar.fin_empty);
    if (idx < 0) break;
    const int bh = idx / n_q;
    const int plane = dm.qkv_plane_index(bh / dm.heads, bh % dm.heads, 0);
    const int tile_row0 = (idx % n_q) * kBwdM<D>;
    // This thread's column-sum part row for chunk row 0 (batch, query step, 0, warp).
    const int64_t part0 =
        static_cast<int64_t>(bh / dm.heads * n_q + idx % n_q) * kRowChunks * 2 + (ft >> 5);
    for (int h = 0; h < dq_chunks(D); ++h, ++loads) {
      const int rc = h / kColChunks, cc = h % kColChunks;  // the chunk's row and column
      const int row0 = tile_row0 + rc * kDqChunk;
      const int rows = min(kDqChunk, dm.s - row0);  // those < s (none: rows <= 0)
      // This thread's place in the column-sum parts: its part's row, the head's columns.
      const int64_t q_part =
          (part0 + rc * 2) * (dm.heads * D) + bh % dm.heads * D + cc * 64 + 2 * (ft & 3);
      if (leader) {
        bulk_wait_read<0>();         // the previous store has read sOut
        fence_proxy_async_global();  // the writer's additions before this copy
        mbar_arrive_expect_tx(&bar.fin_load, kChunk * 4);
        bulk_load(sIn, dq_acc + static_cast<int64_t>(idx) * (kBwdM<D> * D) + h * kChunk, kChunk * 4,
                  &bar.fin_load);
      }
      mbar_wait(&bar.fin_load, loads & 1);
      // Column block c (columns 8 c + 2 t, + 1) of this thread's rows 16 (warp + 2 k) + g, + 8
      // for k = 0, 1: float4s c·128 + tw, tw = ft + 64 k (fragment order, bwd_stage_dq).
#pragma unroll 2
      for (int c = 0; c < 8; ++c) {
        float sum0 = 0.0f, sum1 = 0.0f;  // the column sums of this thread's four rows
#pragma unroll
        for (int k = 0; k < 2; ++k) {
          const int tw = ft + 64 * k;
          const float4 x = reinterpret_cast<const float4*>(sIn)[c * 128 + tw];
          const int g = (tw & 31) >> 2, row = (tw >> 5) * 16 + g;
          const int off = row * 128 + ((c ^ g) << 4) + 4 * (tw & 3);  // row % 8 = g
          const uint32_t lo = pack_bf16(x.x * scale, x.y * scale);
          const uint32_t hi = pack_bf16(x.z * scale, x.w * scale);
          *reinterpret_cast<uint32_t*>(sOut + off) = lo;
          *reinterpret_cast<uint32_t*>(sOut + off + 8 * 128) = hi;
          const bool live_lo = row < rows, live_hi = row + 8 < rows;
          sum0 += (live_lo ? bf16_lo(lo) : 0.0f) + (live_hi ? bf16_lo(hi) : 0.0f);
          sum1 += (live_lo ? bf16_hi(lo) : 0.0f) + (live_hi ? bf16_hi(hi) : 0.0f);
        }
        if (colsum_q != nullptr) {  // over the warp's 8 lanes of each t: its 32 rows
#pragma unroll
          for (int m = 4; m < 32; m <<= 1) {
            sum0 += __shfl_xor_sync(0xffffffffu, sum0, m);
            sum1 += __shfl_xor_sync(0xffffffffu, sum1, m);
          }
          if ((ft & 31) < 4)
            *reinterpret_cast<float2*>(colsum_q + q_part + 8 * c) = make_float2(sum0, sum1);
        }
      }
      fence_proxy_async_shared();  // the rows, before the store reads them
      named_bar_sync(4, 64);       // and every read of sIn, before the next copy
      if (leader) {
        if (rows > 0) tma_store_3d(map_dq, sOut, cc * 64, plane, row0);
        bulk_commit();
      }
    }
  }
  if (leader) bulk_wait<0>();
}

// Consumer warpgroup cw (0 or 1): keys k0 + 64 cw .. + 63 of each tile's key block.
template <int D>
__device__ void bwd_consume(int cw, unsigned char* sK, unsigned char* sV, unsigned char* sQ,
                            unsigned char* sdO, unsigned char* sdS, float* sDq, const float* sL,
                            const float* sD, BwdBarriers& bar, const BwdTiles& tiles,
                            const BwdWork& work, const Dims& dm, bf16* dqkv, float scale_log2,
                            float scale) {
  using S = BwdSmem<D>;
  constexpr int M = kBwdM<D>;
  const int warp = (threadIdx.x >> 5) & 3, g = (threadIdx.x & 31) >> 2;
  const int s = dm.s, n_q = bwd_query_steps(s, D);
  // This warpgroup's dQ part, chunk cw of the step's tile (dq_chunks): 64 queries × 64 columns
  // over the key block, at D = 128 every query and a half of the head dim, at D = 64 a half of
  // the queries (dS^T's 64-query block cw) and the whole head dim.
  constexpr int kDqN = 64;
  const uint32_t ds_off = D == 64 ? cw * kBwdN * 128 : 0;
  const uint32_t kcol_off = D == 128 ? cw * kRegK : 0;
  const bool recorder = cw == 0 && (threadIdx.x & 127) == 0;
  const uint32_t k_addr = smem_addr(sK) + cw * 64 * 128;
  const uint32_t v_addr = smem_addr(sV) + cw * 64 * 128;
  // One chunk: dK and dV go to dqkv, else to the chunk's partial rows for attention.cu's finalize.
  const bool direct = work.chunks == 1;
  int ctr = 0;
  for (int n = 0;; ++n) {
    mbar_wait(&bar.kv_full, n & 1);
    const int t = *reinterpret_cast<volatile int*>(&bar.tile);
    if (t < 0) break;
    int hs, kb;
    tiles.at(t, hs, kb);
    const BwdWork::Block blk = work.block(dm, hs);
    const BwdSteps<D> steps{n_q, blk.heads};
    const int wg_key0 = kb * kBwdN + cw * 64;
    const int key0 = wg_key0 + warp * 16 + g;  // this thread's keys: key0, key0 + 8
    float dk[D / 2], dv[D / 2];
#pragma unroll
    for (int i = 0; i < D / 2; ++i) dk[i] = dv[i] = 0.0f;

    // dS^T of the previous step: the register A operand of its dK product, which runs on into
    // this step (until this step's S^T is done), so that the tensor cores have work while the
    // dQ part goes out and this step's operands are awaited. (At D = 64, whose step of 128
    // queries holds S^T's and dP^T's accumulators of 64 registers each, only while the dQ part
    // goes out: with da kept across steps, ptxas serialised the wgmma, C7512; so it did with
    // the dQ product run on into the next step instead.)
    constexpr bool kDkOverlap = D == 128;
    uint32_t da[M / 16][4];
    const int n_steps = steps.count(kb);
    const auto step = [&](int i, auto masked) {
      const int st = ctr % kBwdStages;
      mbar_wait(&bar.full[st], (ctr / kBwdStages) & 1);
      const int q_step = steps.q_step(i);
      const int q0 = q_step * M;
      const uint32_t q_addr = smem_addr(sQ + st * S::kTileQ);
      const uint32_t do_addr = smem_addr(sdO + st * S::kTileQ);
      const float* cL = sL + st * M;
      const float* cD = sD + st * M;
      unsigned char* ds_tile = sdS + (ctr & 1) * S::kDs;
      // (Head dim 128: a run-time flag; its step copied three times spilled.)
      const bool need_mask = D == 64 || wg_key0 + 63 > q0 || q0 + M > s;

      // S^T = K·Q^T and dP^T = V·dO^T issued together; P^T from S^T while dP^T runs; dV += P^T·dO
      // issued; dS^T = P^T ∘ (dP^T − dsum) into registers and shared memory.
      uint32_t pa[M / 16][4];
      {
        float sc[M / 2], dp[M / 2];
        wgmma_fence();
        bwd_keys_x_queries<D>(sc, k_addr, q_addr);
        wgmma_commit();
        bwd_keys_x_queries<D>(dp, v_addr, do_addr);
        wgmma_commit();
        wgmma_wait<1>();  // S^T is done, and before it (D = 128) the previous step's dK
        fence_regs(sc);
        if constexpr (kDkOverlap) {
          fence_regs(dk);
          fence_regs(da);
        }
        // The previous step's stage: its Q was the last operand read, by that dK (at D = 64
        // waited for in its own step).
        warp_release(&bar.empty[(ctr + kBwdStages - 1) % kBwdStages], i > 0);
        bwd_p_fragments<decltype(masked)::value, M>(sc, cL, scale_log2, need_mask, key0, q0, s, pa);
        wgmma_fence();
#pragma unroll
        for (int kq = 0; kq < M / 16; ++kq)
          mma_rs<D, 1>(dv, pa[kq], sw128_desc(do_addr + kq * 16 * 128, kRegQ<D>, 1024), true);
        wgmma_commit();
        wgmma_wait<1>();  // dP^T is done; dV may still run
        fence_regs(dp);
        bwd_ds_fragments<M>(pa, dp, cD, cw * 64 + warp * 16 + g, ds_tile, da);
      }
      fence_proxy_async_shared();
      named_bar_sync(3, 256);  // both warpgroups' dS^T are in shared memory

      // dQ_part (64 queries × kDqN) = dS·K: dS (M-major, from dS^T) and K (N-major); then
      // dK += dS^T·Q.
      float dq[kDqN / 2];
      wgmma_fence();
      const uint32_t ds_addr = smem_addr(ds_tile) + ds_off;
      const uint32_t kcol_addr = smem_addr(sK) + kcol_off;
#pragma unroll
      for (int kk = 0; kk < kBwdN / 16; ++kk) {
        mma_ss<kDqN, 1, 1>(dq, sw128_desc(ds_addr + kk * 16 * 128, kRegK, 1024),
                           sw128_desc(kcol_addr + kk * 16 * 128, kRegK, 1024), kk > 0);
      }
      wgmma_commit();
      wgmma_fence();
#pragma unroll
      for (int kq = 0; kq < M / 16; ++kq)
        mma_rs<D, 1>(dk, da[kq], sw128_desc(q_addr + kq * 16 * 128, kRegQ<D>, 1024), true);
      wgmma_commit();
      wgmma_wait<1>();  // dQ is done, and dV; dK runs on (at D = 64 until the dQ part is out)
      fence_regs(dv);
      fence_regs(pa);
      // The dQ part to the writer, once it has read the previous one.
      mbar_wait(&bar.dq_empty, (ctr & 1) ^ 1);
      fence_regs(dq);
      bwd_stage_dq(dq, sDq, cw);
      if (recorder) {
        bar.dq_index = (blk.bi * dm.heads + blk.h0 + steps.head(i)) * n_q + q_step;
        bar.dq_kb = kb;
      }
      fence_proxy_async_shared();
      mbar_arrive(&bar.dq_full);
      if constexpr (!kDkOverlap) {
        wgmma_wait<0>();  // dK is done
        fence_regs(dk);
        fence_regs(da);
      }
    };
    if constexpr (D == 64) {
      const BwdMaskedSteps<D> ms(steps, n_steps, wg_key0, s);
      int i = 0;
      for (; i < ms.tail_end; ++i, ++ctr) step(i, std::true_type{});
      for (; i < ms.diag_begin; ++i, ++ctr) step(i, std::false_type{});
      for (; i < n_steps; ++i, ++ctr) step(i, std::true_type{});
    } else {
      for (int i = 0; i < n_steps; ++i, ++ctr) step(i, std::true_type{});
    }
    wgmma_wait<0>();  // the last step's dK (at D = 64 its step waited already: nothing left)
    fence_regs(dk);
    fence_regs(da);
    warp_release(&bar.empty[(ctr + kBwdStages - 1) % kBwdStages]);
    warp_release(&bar.kv_empty);  // every product reading K and V is done
    // (One chunk: the partial-row pointers are unused stand-ins.)
    float* dk_rows = direct ? work.dq_part : work.dkv_rows(dm, blk.chunk, 0, blk.bg);
    float* dv_rows = direct ? work.dq_part : work.dkv_rows(dm, blk.chunk, 1, blk.bg);
    bwd_store_dk_dv(dk, dv, dm.qkv_plane(dqkv, blk.bi, blk.h0, 1),
                    dm.qkv_plane(dqkv, blk.bi, blk.h0, 2), dk_rows, dv_rows, direct, key0, s,
                    scale);
    if (work.colsum_kv != nullptr) {  // (one chunk only: the launcher's rule)
      // Row (batch, key block, consumer warp) of the parts; columns: the groups' dK, then dV.
      const int64_t part =
          (static_cast<int64_t>(blk.bi) * tiles.n_kb + kb) * kConsumerWarps + cw * 4 + warp;
      const int gd = dm.groups * D;
      bwd_colsum_dk_dv(dk, dv, key0, s, scale,
                       work.colsum_kv + part * 2 * gd + (blk.bg % dm.groups) * D, gd);
    }
  }
  // No more tiles: the writer stops.
  mbar_wait(&bar.dq_empty, (ctr & 1) ^ 1);
  if (recorder) bar.dq_index = -1;
  mbar_arrive(&bar.dq_full);
}

template <int D>
__global__ void __launch_bounds__(kThreads, 1)
    hopper_bwd_kernel(const __grid_constant__ CUtensorMap map_q,
                      const __grid_constant__ CUtensorMap map_kv,
                      const __grid_constant__ CUtensorMap map_do,
                      const __grid_constant__ CUtensorMap map_dq, const float* __restrict__ lse,
                      const float* __restrict__ dsum, bf16* __restrict__ dqkv, BwdWork work,
                      BwdTiles tiles, int* sems, int* counter, Dims dm, float scale_log2,
                      float scale) {
  using S = BwdSmem<D>;
  extern __shared__ unsigned char smem_raw[];
  __shared__ BwdBarriers bar;
  unsigned char* sK = align1024(smem_raw);
  unsigned char* sV = sK + S::kTileK;
  unsigned char* sQ = sV + S::kTileK;                       // kBwdStages stages
  unsigned char* sdO = sQ + kBwdStages * S::kTileQ;         // kBwdStages stages
  unsigned char* sdS = sdO + kBwdStages * S::kTileQ;        // two buffers (keys, queries)
  float* sDq = reinterpret_cast<float*>(sdS + 2 * S::kDs);  // the staged dQ tile
  unsigned char* sFinOut = reinterpret_cast<unsigned char*>(sDq + kBwdM<D> * D);
  float* sFinIn = reinterpret_cast<float*>(sFinOut + S::kFinOut);
  float* sL = sFinIn + kDqChunk * kDqChunk;  // kBwdStages stages of lse
  float* sD = sL + kBwdStages * kBwdM<D>;    // kBwdStages stages of dsum

  if (threadIdx.x == 0) {
    prefetch_tensormap(&map_q);
    prefetch_tensormap(&map_kv);
    prefetch_tensormap(&map_do);
    prefetch_tensormap(&map_dq);
    mbar_init(&bar.kv_full, 1);
    mbar_init(&bar.kv_empty, kConsumerWarps);
#pragma unroll
    for (int i = 0; i < kBwdStages; ++i) {
      mbar_init(&bar.full[i], 1 + 32);  // the expected bytes, and the producer warp's lanes
      mbar_init(&bar.empty[i], kConsumerWarps);
    }
    mbar_init(&bar.dq_full, 2 * 128);  // every consumer thread, after its stores
    mbar_init(&bar.dq_empty, 1);
    mbar_init(&bar.fin_full, 1);
    mbar_init(&bar.fin_empty, 64);  // every finalizer thread, once it has read the index
    mbar_init(&bar.fin_load, 1);
    mbar_init_fence();
  }
  __syncthreads();
  const int wg = uniform_warpgroup();
  // (32 registers here and 232 for the consumers took the spills of the finalizer's column
  // sums away but slowed the consumers: the reference shape 0.421 -> 0.479 ms.)
  if (wg == 0) {
    setmaxnreg_dec<24>();
    const int warp = __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x) >> 5, 0);
    if (warp == 0) {
      bwd_produce<D>(&map_q, &map_kv, &map_do, sK, sV, sQ, sdO, sL, sD, bar, tiles, work, dm,
                     counter, lse, dsum);
    } else if (warp == 1) {
      bwd_write_dq<D>(sDq, bar, work.dq_part, sems, bwd_query_steps(dm.s, D));
    } else {
      bwd_finalize_dq<D>(sFinIn, sFinOut, bar, work.dq_part, &map_dq, dm, scale, work.colsum_q);
    }
  } else {
    setmaxnreg_inc<240>();
    bwd_consume<D>(wg - 1, sK, sV, sQ, sdO, sdS, sDq, sL, sD, bar, tiles, work, dm, dqkv,
                   scale_log2, scale);
  }
}

template <class K>
void allow_smem(K kernel, int bytes) {
  MPLAN_CUDA_CHECK(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
}

// A 3-dimensional tensor map over a bf16 tensor (s, planes, d) (qkv: planes = b·(heads + 2 groups),
// Dims::qkv_plane_index; out and dout: planes = b·heads): columns, planes, rows. A box is
// 64 columns (128 bytes, the 128-byte swizzle's span) × one plane × box_rows rows, stored as one
// swizzled region of wgmma.cuh; rows past s read as zeros.
CUtensorMap plane_tensor_map(const AttentionShape& sh, const bf16* base, int64_t planes,
                             int box_rows) {
  using Encode = PFN_cuTensorMapEncodeTiled_v12000;
  static const Encode encode = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found{};
    MPLAN_CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000,
                                                      cudaEnableDefault, &found));
    if (found != cudaDriverEntryPointSuccess || fn == nullptr)
      fatal_abort(__FILE__, __LINE__, "the CUDA driver has no cuTensorMapEncodeTiled");
    return reinterpret_cast<Encode>(fn);
  }();
  const auto d = static_cast<cuuint64_t>(sh.d);
  const cuuint64_t dims[3] = {d, static_cast<cuuint64_t>(planes), static_cast<cuuint64_t>(sh.s)};
  const cuuint64_t strides[2] = {d * 2, static_cast<cuuint64_t>(planes) * d * 2};
  const cuuint32_t box[3] = {64, 1, static_cast<cuuint32_t>(box_rows)};
  const cuuint32_t elem_strides[3] = {1, 1, 1};
  CUtensorMap map;
  const CUresult rc =
      encode(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3, const_cast<bf16*>(base), dims, strides, box,
             elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
             CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (rc != CUDA_SUCCESS)
    fatal_abort(__FILE__, __LINE__,
                "cuTensorMapEncodeTiled failed for an attention operand: error " +
                    std::to_string(static_cast<int>(rc)));
  return map;
}
CUtensorMap qkv_tensor_map(const AttentionShape& sh, const bf16* qkv, int box_rows) {
  return plane_tensor_map(sh, qkv, sh.b * (sh.heads + 2 * sh.groups), box_rows);
}
CUtensorMap out_tensor_map(const AttentionShape& sh, const bf16* out, int box_rows) {
  return plane_tensor_map(sh, out, sh.b * sh.heads, box_rows);
}

// How many of `units` consecutive work units (batch·head pairs, or backward head sets) a section
// of the tile order holds: whole groups of `align` units whose `group_bytes` each fill at most
// half the device's L2 (the rest is for the streamed operands), but at least min_groups groups,
// and sections of equal size but for the last.
int l2_section(int64_t units, int64_t align, int64_t group_bytes, int64_t min_groups = 1) {
  const int64_t budget = current_device_attribute<cudaDevAttrL2CacheSize>() / 2;
  const int64_t groups = units / align;
  const int64_t fit = budget / std::max<int64_t>(group_bytes, 1);
  const int64_t per = std::clamp<int64_t>(std::max(fit, min_groups), 1, groups);
  const int64_t n_sec = (groups + per - 1) / per;
  return static_cast<int>((groups + n_sec - 1) / n_sec * align);
}

Dims dims_of(const AttentionShape& sh) {
  return {static_cast<int>(sh.s), static_cast<int>(sh.b), static_cast<int>(sh.heads),
          static_cast<int>(sh.groups), static_cast<int>(sh.d)};
}

}  // namespace

bool hopper_attention_shape_ok(const AttentionShape& sh) {
  // The forward's tile indices (b·heads × query blocks, walked in steps of the grid) stay in int.
  // So do the backward's (head set × key block) and its dQ tiles' indices (b·heads × query steps).
  const int64_t tiles = sh.b * sh.heads * ((sh.s + kFwdM - 1) / kFwdM);
  return (sh.d == 64 || sh.d == 128) && sh.s >= 1 && sh.s < (1 << 30) &&
         sh.b * sh.heads < (int64_t{1} << 31) && tiles < (int64_t{1} << 30) &&
         hopper_bwd_sem_count(sh) < (int64_t{1} << 30);
}

void launch_hopper_attention_forward(const AttentionShape& sh, const bf16* qkv, bf16* out,
                                     float* lse, float scale_log2, cudaStream_t stream) {
  const Dims dm = dims_of(sh);
  const int n_qb = static_cast<int>((sh.s + kFwdM - 1) / kFwdM);
  const int n_tiles = static_cast<int>(sh.b * sh.heads) * n_qb;
  const CUtensorMap map = qkv_tensor_map(sh, qkv, kFwdN);
  const unsigned grid = static_cast<unsigned>(
      std::min(n_tiles, current_device_attribute<cudaDevAttrMultiProcessorCount>()));
  // A section's K and V: s rows of d bf16 each, per K/V group.
  const int sec = l2_section(sh.b * sh.heads, sh.heads / sh.groups, sh.s * sh.d * 2 * 2);
  auto run = [&](auto kernel, int smem) {
    allow_smem(kernel, smem);
    kernel<<<grid, kThreads, smem, stream>>>(map, out, lse, dm, scale_log2, n_tiles, n_qb, sec);
  };
  if (sh.d == 64) {
    run(hopper_fwd_kernel<64>, fwd_smem_bytes<64>());
  } else {
    run(hopper_fwd_kernel<128>, fwd_smem_bytes<128>());
  }
  MPLAN_CUDA_LAUNCH_CHECK();
}

int hopper_bwd_chunks(const AttentionShape& sh) {
  const int64_t per = sh.heads / sh.groups;
  const int64_t n_kb = bwd_key_blocks(sh.s);
  for (int64_t c = 1; c < per; ++c)
    if (per % c == 0 && sh.b * sh.groups * c * n_kb >= 2 * kHopperBwdSlots)
      return static_cast<int>(c);
  return static_cast<int>(per);
}

namespace {
// The backward's dQ tiles: one per (batch, head, query step of bwd_m(d) rows).
int64_t bwd_dq_tiles(const AttentionShape& sh) {
  return sh.b * sh.heads * bwd_query_steps(static_cast<int>(sh.s), static_cast<int>(sh.d));
}
}  // namespace

int64_t hopper_bwd_dq_bytes(const AttentionShape& sh) {
  return bwd_dq_tiles(sh) * bwd_m(static_cast<int>(sh.d)) * sh.d * 4;
}

// A counter per dQ tile, then the tile counter.
int64_t hopper_bwd_sem_count(const AttentionShape& sh) { return bwd_dq_tiles(sh) + 1; }

int64_t hopper_bwd_colsum_q_parts(const AttentionShape& sh) {
  // Two a 64-row chunk of each query step's dQ tile (bwd_finalize_dq).
  const int d = static_cast<int>(sh.d);
  return sh.b * bwd_query_steps(static_cast<int>(sh.s), d) * (bwd_m(d) / kDqChunk) * 2;
}
int64_t hopper_bwd_colsum_kv_parts(const AttentionShape& sh) {
  return sh.b * bwd_key_blocks(sh.s) * kConsumerWarps;
}

void launch_hopper_attention_backward(const AttentionShape& sh, const bf16* qkv, const bf16* dout,
                                      const float* lse, const float* dsum, bf16* dqkv,
                                      const BwdWork& work, int* sems, float scale_log2, float scale,
                                      cudaStream_t stream) {
  const Dims dm = dims_of(sh);
  if ((work.colsum_q != nullptr) != (work.colsum_kv != nullptr) ||
      (work.colsum_q != nullptr && work.chunks != 1))
    fatal_abort(__FILE__, __LINE__, "hopper attention backward: column sums need one head chunk");
  const int64_t n_dq_tiles = bwd_dq_tiles(sh);
  MPLAN_CUDA_CHECK(cudaMemsetAsync(
      sems, 0, static_cast<size_t>(hopper_bwd_sem_count(sh)) * sizeof(int), stream));
  const int sms = current_device_attribute<cudaDevAttrMultiProcessorCount>();
  const int64_t n_hs = sh.b * sh.groups * work.chunks, n_kb = bwd_key_blocks(sh.s);
  // Sections: a head set's Q and dO (bf16) and dQ accumulator (f32), s rows of d per head, in L2,
  // but at least two waves of tiles a section.
  const int64_t hs_bytes = sh.heads / sh.groups / work.chunks * sh.s * sh.d * (2 + 2 + 4);
  const int sec = l2_section(n_hs, 1, hs_bytes, (2 * sms + n_kb - 1) / n_kb);
  const BwdTiles tiles{static_cast<int>(n_hs), static_cast<int>(n_kb), sec};
  const unsigned grid = static_cast<unsigned>(std::min<int64_t>(n_hs * n_kb, sms));
  const int m = bwd_m(static_cast<int>(sh.d));
  const CUtensorMap map_q = qkv_tensor_map(sh, qkv, m);
  const CUtensorMap map_kv = qkv_tensor_map(sh, qkv, kBwdN);
  const CUtensorMap map_do = out_tensor_map(sh, dout, m);
  const CUtensorMap map_dq = qkv_tensor_map(sh, dqkv, kDqChunk);
  auto run = [&](auto kernel, int smem) {
    allow_smem(kernel, smem);
    kernel<<<grid, kThreads, smem, stream>>>(map_q, map_kv, map_do, map_dq, lse, dsum, dqkv, work,
                                             tiles, sems, sems + n_dq_tiles, dm, scale_log2, scale);
  };
  if (sh.d == 64) {
    run(hopper_bwd_kernel<64>, BwdSmem<64>::kBytes);
  } else {
    run(hopper_bwd_kernel<128>, BwdSmem<128>::kBytes);
  }
  MPLAN_CUDA_LAUNCH_CHECK();
}

}  // namespace mplan::exec::cuda
