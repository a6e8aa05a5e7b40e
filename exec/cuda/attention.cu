// Causal flash attention for one tensor-parallel shard of heads, bf16 in and out, f32 softmax
// statistics and accumulators, tensor cores through mma.sync m16n8k16 (exec/cuda/mma_utils.cuh).
// Layout: qkv (s, b, heads + 2 groups, d) (per token the heads' Q, the groups' K, the groups' V;
// groups == heads is multi-head attention), out/dout (s, b, heads, d), lse/dsum (b, heads, s) f32.
// Grouped-query attention reads each head's K/V group in place; a backward block owns a K/V group
// (or a chunk of its heads, when there are too few groups to fill the GPU) and walks those heads,
// summing dK and dV in registers in head order; chunks' sums are added in chunk order by a
// finalize kernel (bwd_plan).
// Invariants: the s×s scores never reach device memory (forward keeps a running max and sum per
// row and saves lse = log-sum-exp; backward recomputes P = exp(S - lse)); no float atomics whose
// order depends on timing, so results are bitwise reproducible: every dQ partial sum is added by
// one fixed thread in program order (see the backward below). Head dims are padded in shared
// memory to DP ∈ {32, 64, 128} with zeros; sequence tails are zero-filled and masked.
//
// Forward: a block of 4 warps owns 128 query rows (32 per warp: two 16-row MMA tiles, so each
// K/V fragment read from shared memory feeds two MMAs) and walks key blocks of 64 up to its
// diagonal, K/V double-buffered with cp.async; 2 blocks per SM. Heaviest query blocks first.
// One online-softmax update per 64 keys (0.347 ms on an H200 at the reference shape); the
// variant with two updates of 32 keys (fewer registers, Q fragments read twice; 0.403 ms) stays
// selectable with MPLAN_ATTN_FWD_SUB=32 for comparison.
// Backward: dsum = rowsum(dO∘O); then one kernel over key blocks of 128 (8 warps) walking query
// steps of 64: S = Q·K^T and dP = dO·V^T (warps 2 × 4 over queries × keys), P and dS to shared
// memory as bf16, dV += P^T·dO and dK += dS^T·Q (warps 4 × 2 over keys × d, accumulators in
// registers for the whole key block), and dQ_part = dS·K (warps over queries × d) added into a
// per-split f32 buffer; a last kernel sums the splits in a fixed order into dQ.
#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "exec/cuda/attention_layout.cuh"
#include "exec/cuda/device_attribute.hpp"
#include "exec/cuda/device_utils.cuh"
#include "exec/cuda/kernels.hpp"
#include "exec/cuda/mma_utils.cuh"
#if MPLAN_HAVE_HOPPER_ATTENTION
#include "exec/cuda/attention_hopper.hpp"
#endif

namespace mplan::exec::cuda {
namespace {

using attention_layout::BwdWork;
using attention_layout::Dims;
using attention_layout::kLn2;
using attention_layout::kLog2e;
using attention_layout::Plane;

// cp.async of rows [row0, row0 + kRows) × [0, DP) of a plane into a shared tile (kRows × ld) by
// kThreads threads; rows >= s and columns >= d are zero-filled. A thread copies one fixed
// 16-byte column chunk of every (kThreads / (DP / 8))-th row, walking one pointer down the rows
// (a few registers, whatever the tile size).
template <int kThreads, int kRows, int DP>
__device__ __forceinline__ void load_tile(bf16* tile, const Plane& p, int row0, int s, int d) {
  constexpr int kChunks = DP / 8;
  constexpr int ld = DP + 8;
  constexpr int kRowStep = kThreads / kChunks;
  static_assert(kThreads % kChunks == 0 && kRows % kRowStep == 0, "tile does not tile");
  const int c = threadIdx.x % kChunks;
  int r = threadIdx.x / kChunks;
  const bool col_ok = c * 8 < d;
  const bf16* src = p.base + static_cast<int64_t>(row0 + r) * p.row_stride + c * 8;
  const int64_t step = static_cast<int64_t>(kRowStep) * p.row_stride;
  bf16* dst = tile + r * ld + c * 8;
#pragma unroll
  for (int k = 0; k < kRows / kRowStep; ++k) {
    const bool valid = col_ok && row0 + r < s;
    cp_async16(dst, valid ? src : p.base, valid);
    src += step;
    dst += kRowStep * ld;
    r += kRowStep;
  }
}

// Writes a warp's 16 rows from its f32 accumulators acc[DP/8][4] (row g times mul0, row g + 8
// times mul1) to global rows [row0, row0 + 16) of a plane, through `stage` (16 × ld shared
// elements that only this warp touches).
template <int DP>
__device__ __forceinline__ void store_rows(const float (&acc)[DP / 8][4], float mul0, float mul1,
                                           bf16* stage, bf16* base, int64_t row_stride, int row0,
                                           int s, int d) {
  constexpr int ld = DP + 8;
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  __syncwarp();
#pragma unroll
  for (int nt = 0; nt < DP / 8; ++nt) {
    *reinterpret_cast<uint32_t*>(stage + g * ld + nt * 8 + 2 * t) =
        pack_bf16(acc[nt][0] * mul0, acc[nt][1] * mul0);
    *reinterpret_cast<uint32_t*>(stage + (g + 8) * ld + nt * 8 + 2 * t) =
        pack_bf16(acc[nt][2] * mul1, acc[nt][3] * mul1);
  }
  __syncwarp();
  constexpr int kChunks = DP / 8;
#pragma unroll
  for (int k = 0; k < 16 * kChunks / 32; ++k) {
    const int i = lane + k * 32;
    const int r = i / kChunks, c = i % kChunks;
    if (row0 + r < s && c * 8 < d) {
      *reinterpret_cast<uint4*>(base + static_cast<int64_t>(row0 + r) * row_stride + c * 8) =
          *reinterpret_cast<const uint4*>(stage + r * ld + c * 8);
    }
  }
  __syncwarp();
}

template <int N, int M>
__device__ __forceinline__ void zero(float (&a)[N][M][4]) {
#pragma unroll
  for (int i = 0; i < N; ++i)
#pragma unroll
    for (int j = 0; j < M; ++j) a[i][j][0] = a[i][j][1] = a[i][j][2] = a[i][j][3] = 0.0f;
}

// acc += A·B^T for one warp: A is 32 rows from a_row0 of a tile stored (m, k), B is 16·NP rows
// from b_row0 of a tile stored (n, k) (e.g. K for S = Q·K^T), both KT k-steps of 16 wide; acc is
// [m-tile][n-tile] in C fragments. Each B fragment feeds both m-tiles.
template <int KT, int NP>
__device__ __forceinline__ void warp_mma_abt(const bf16* ta, int a_row0, const bf16* tb, int b_row0,
                                             int ld, float (&acc)[2][2 * NP][4]) {
#pragma unroll
  for (int kk = 0; kk < KT; ++kk) {
    uint32_t a[2][4];
#pragma unroll
    for (int mt = 0; mt < 2; ++mt) load_a(ta, ld, a_row0 + mt * 16, kk * 16, a[mt]);
#pragma unroll
    for (int np = 0; np < NP; ++np) {
      uint32_t b[4];
      load_b_nk(tb, ld, b_row0 + np * 16, kk * 16, b);
#pragma unroll
      for (int mt = 0; mt < 2; ++mt) {
        mma_bf16(acc[mt][2 * np], a[mt], b[0], b[1]);
        mma_bf16(acc[mt][2 * np + 1], a[mt], b[2], b[3]);
      }
    }
  }
}

// S = A·B^T as warp_mma_abt, with the k-loop software-pipelined by hand (fragments of step k + 1
// load while step k multiplies; two buffers, rolled by pairs): fully unrolled, the compiler's
// own look-ahead loads pass 255 registers in the forward with two 32-key updates per step.
template <int KT, int NP>
__device__ __forceinline__ void warp_mma_abt_pipelined(const bf16* ta, int a_row0, const bf16* tb,
                                                       int b_row0, int ld,
                                                       float (&acc)[2][2 * NP][4]) {
  uint32_t qa[2][2][4], kb[2][NP][4];
  auto load_k_step = [&](int kk, int buf) {
#pragma unroll
    for (int mt = 0; mt < 2; ++mt) load_a(ta, ld, a_row0 + mt * 16, kk * 16, qa[buf][mt]);
#pragma unroll
    for (int np = 0; np < NP; ++np) load_b_nk(tb, ld, b_row0 + np * 16, kk * 16, kb[buf][np]);
  };
  load_k_step(0, 0);
#pragma unroll 1
  for (int kk = 0; kk < KT; kk += 2) {
#pragma unroll
    for (int u = 0; u < 2; ++u) {
      if (kk + u + 1 < KT) load_k_step(kk + u + 1, (u + 1) & 1);
#pragma unroll
      for (int np = 0; np < NP; ++np)
#pragma unroll
        for (int mt = 0; mt < 2; ++mt) {
          mma_bf16(acc[mt][2 * np], qa[u][mt], kb[u][np][0], kb[u][np][1]);
          mma_bf16(acc[mt][2 * np + 1], qa[u][mt], kb[u][np][2], kb[u][np][3]);
        }
    }
  }
}

// One online-softmax update of a warp's 32 query rows (from wq0) over the SUB keys from kh, in
// log2 units: masks key > row and key >= s when need_mask, rescales O and the running max and
// sum, and packs P = exp2(S - max) into A fragments (k-step j of the P·V product in pa[j]).
template <int SUB, int DP>
__device__ __forceinline__ void warp_softmax_update(float (&sc)[2][SUB / 8][4], bool need_mask,
                                                    int kh, int wq0, int s, float scale_log2,
                                                    float (&row_m)[2][2], float (&row_l)[2][2],
                                                    float (&o)[2][DP / 8][4],
                                                    uint32_t (&pa)[SUB / 16][2][4]) {
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int mt = 0; mt < 2; ++mt) {
#pragma unroll
    for (int nt = 0; nt < SUB / 8; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        float v = sc[mt][nt][e] * scale_log2;
        if (need_mask) {
          const int key = kh + nt * 8 + 2 * t + (e & 1);
          const int row = wq0 + mt * 16 + g + 8 * (e >> 1);
          if (key > row || key >= s) v = -INFINITY;
        }
        sc[mt][nt][e] = v;
      }
    }
    float base[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float mx = row_m[mt][r];
#pragma unroll
      for (int nt = 0; nt < SUB / 8; ++nt)
        mx = fmaxf(mx, fmaxf(sc[mt][nt][2 * r], sc[mt][nt][2 * r + 1]));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      base[r] = mx == -INFINITY ? 0.0f : mx;  // a row with every key masked so far
      const float alpha = exp2f(row_m[mt][r] - base[r]);
      row_m[mt][r] = mx;
      row_l[mt][r] *= alpha;
#pragma unroll
      for (int nt = 0; nt < DP / 8; ++nt) {
        o[mt][nt][2 * r] *= alpha;
        o[mt][nt][2 * r + 1] *= alpha;
      }
    }
#pragma unroll
    for (int nt = 0; nt < SUB / 8; ++nt) {
      float e[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) e[i] = exp2f(sc[mt][nt][i] - base[i >> 1]);
      row_l[mt][0] += e[0] + e[1];
      row_l[mt][1] += e[2] + e[3];
      // acc_to_a's layout: n-tile nt is half (nt & 1) of k-step nt / 2.
      pa[nt >> 1][mt][2 * (nt & 1)] = pack_bf16(e[0], e[1]);
      pa[nt >> 1][mt][2 * (nt & 1) + 1] = pack_bf16(e[2], e[3]);
    }
  }
}

// O += P·V for a warp's two 16-row m-tiles: P in A fragments (k-step j in pa[j]), V the SUB key
// rows from v_row0 of a tile stored (key, d); each V fragment feeds both m-tiles.
template <int SUB, int KT>
__device__ __forceinline__ void warp_pv(const uint32_t (&pa)[SUB / 16][2][4], const bf16* cV,
                                        int v_row0, int ld, float (&o)[2][2 * KT][4]) {
#pragma unroll
  for (int j = 0; j < SUB / 16; ++j) {
#pragma unroll
    for (int dp = 0; dp < KT; ++dp) {
      uint32_t b[4];
      load_b_kn(cV, ld, v_row0 + j * 16, dp * 16, b);
#pragma unroll
      for (int mt = 0; mt < 2; ++mt) {
        mma_bf16(o[mt][2 * dp], pa[j][mt], b[0], b[1]);
        mma_bf16(o[mt][2 * dp + 1], pa[j][mt], b[2], b[3]);
      }
    }
  }
}

// ------------------------------------------------------------------------------------------
// Forward. grid (b·heads, query blocks); block 128 threads; 2 blocks per SM.
constexpr int kFwdWarps = 4;
constexpr int kFwdThreads = kFwdWarps * 32;
constexpr int kFwdRows = 128;  // query rows per block (32 per warp)
constexpr int kFwdKeys = 64;   // keys per step (one K/V stage)

template <int DP>
constexpr int fwd_smem_bytes() {
  return (kFwdRows + 4 * kFwdKeys) * (DP + 8) * 2;  // Q, 2 stages of K and V
}

template <int DP, int SUB>
__global__ void __launch_bounds__(kFwdThreads, 2)
    flash_fwd_kernel(const bf16* __restrict__ qkv, bf16* __restrict__ out, float* __restrict__ lse,
                     Dims dm, float scale_log2) {
  constexpr int ld = DP + 8;
  constexpr int KT = DP / 16;  // k-steps over the head dim
  extern __shared__ __align__(16) unsigned char smem[];
  bf16* sQ = reinterpret_cast<bf16*>(smem);  // kFwdRows × ld
  bf16* sK = sQ + kFwdRows * ld;             // 2 stages × kFwdKeys × ld
  bf16* sV = sK + 2 * kFwdKeys * ld;         // 2 stages × kFwdKeys × ld

  const int bh = blockIdx.x;
  const int bi = bh / dm.heads, hh = bh % dm.heads;
  const int q0 = (gridDim.y - 1 - blockIdx.y) * kFwdRows;  // heaviest (last) query block first
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int s = dm.s, d = dm.d;
  const Plane pq = dm.qkv_plane(qkv, bi, hh, 0);
  const Plane pk = dm.qkv_plane(qkv, bi, hh, 1);
  const Plane pv = dm.qkv_plane(qkv, bi, hh, 2);

  const int kv_end = min(s, q0 + kFwdRows);
  const int n_kb = (kv_end + kFwdKeys - 1) / kFwdKeys;

  load_tile<kFwdThreads, kFwdRows, DP>(sQ, pq, q0, s, d);
  load_tile<kFwdThreads, kFwdKeys, DP>(sK, pk, 0, s, d);
  load_tile<kFwdThreads, kFwdKeys, DP>(sV, pv, 0, s, d);
  cp_async_commit();

  const int wq0 = q0 + warp * 32;  // this warp's first query row
  float o[2][DP / 8][4];
  zero(o);
  float row_m[2][2], row_l[2][2];  // [m-tile][row g / g + 8]: running max (log2 units), sum part
#pragma unroll
  for (int mt = 0; mt < 2; ++mt)
#pragma unroll
    for (int r = 0; r < 2; ++r) row_m[mt][r] = -INFINITY, row_l[mt][r] = 0.0f;

  for (int it = 0; it < n_kb; ++it) {
    // Stage it is complete for this thread; the barrier makes it complete for all and ends
    // every warp's reads of step it - 1, whose buffers the next prefetch overwrites.
    cp_async_wait<0>();
    __syncthreads();
    if (it + 1 < n_kb) {
      const int st = (it + 1) & 1;
      load_tile<kFwdThreads, kFwdKeys, DP>(sK + st * kFwdKeys * ld, pk, (it + 1) * kFwdKeys, s, d);
      load_tile<kFwdThreads, kFwdKeys, DP>(sV + st * kFwdKeys * ld, pv, (it + 1) * kFwdKeys, s, d);
      cp_async_commit();
    }
    const int k0 = it * kFwdKeys;
    if (k0 > wq0 + 31) continue;  // every key of this step is after every row of this warp
    const bf16* cK = sK + (it & 1) * kFwdKeys * ld;
    const bf16* cV = sV + (it & 1) * kFwdKeys * ld;
    // The 64 keys in kFwdKeys / SUB parts of SUB keys, each a full online-softmax update.
#pragma unroll
    for (int half = 0; half < kFwdKeys / SUB; ++half) {
      const int kh = k0 + half * SUB;
      if (kh > wq0 + 31) break;

      // S = Q·K^T: 32 rows × SUB keys per warp. With SUB = 64 the k-loop is fully unrolled with
      // one fragment buffer (the compiler schedules the loads; a few bytes spill outside the
      // loop); with SUB = 32 it is software-pipelined by hand (two fragment buffers, rolled by
      // pairs): fully unrolled, the compiler's own look-ahead loads pass 255 registers.
      constexpr int NP = SUB / 16;
      float sc[2][SUB / 8][4];
      zero(sc);
      if constexpr (SUB == 64) {
        warp_mma_abt<KT, NP>(sQ, warp * 32, cK, half * SUB, ld, sc);
      } else {
        warp_mma_abt_pipelined<KT, NP>(sQ, warp * 32, cK, half * SUB, ld, sc);
      }

      // Online softmax in log2 units (only the diagonal and the sequence tail are masked); P is
      // packed to bf16 A fragments straight from the accumulators (no shared memory).
      const bool need_mask = kh + SUB - 1 > wq0 || kh + SUB > s;
      uint32_t pa[SUB / 16][2][4];
      warp_softmax_update<SUB, DP>(sc, need_mask, kh, wq0, s, scale_log2, row_m, row_l, o, pa);

      // O += P·V; each V fragment feeds both m-tiles.
      warp_pv<SUB, KT>(pa, cV, half * SUB, ld, o);
    }
  }

  // Each warp reads only its own 32 rows of sQ: they are free for staging its output.
  const Plane po = dm.out_plane(out, bi, hh);
#pragma unroll
  for (int mt = 0; mt < 2; ++mt) {
    float inv[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float l = row_l[mt][r];
      l += __shfl_xor_sync(0xffffffffu, l, 1);
      l += __shfl_xor_sync(0xffffffffu, l, 2);
      inv[r] = l > 0.0f ? 1.0f / l : 0.0f;
      const int row = wq0 + mt * 16 + g + 8 * r;
      if (t == 0 && row < s)
        lse[static_cast<int64_t>(bh) * s + row] = (row_m[mt][r] + log2f(l)) * kLn2;
    }
    store_rows<DP>(o[mt], inv[0], inv[1], sQ + (warp * 32 + mt * 16) * ld,
                   const_cast<bf16*>(po.base), po.row_stride, wq0 + mt * 16, s, d);
  }
}

// ------------------------------------------------------------------------------------------
// Backward. grid (b·groups·chunks, splits); block 256 threads; 1 block per SM.
//
// Key blocks of one (batch, K/V group, head chunk) are dealt to `splits` blocks in a snake order
// (block j takes key blocks j, 2·splits - 1 - j, 2·splits + j, ...), which gives every block nearly
// the same causal work. Block j walks its key blocks in ascending order and adds its dQ
// contributions into its own f32 buffer part[j] (s × DP per head): the first key block writes every
// row it covers (rows ≥ 128·j, all later key blocks cover fewer), later ones add with red.global.
// An element of part[j] is always handled by the same thread (its position in the 64 × DP step tile
// is fixed), so the additions apply in program order: deterministic. The finalize kernel sums
// part[0..splits) in index order.
constexpr int kBwdWarps = 8;
constexpr int kBwdThreads = kBwdWarps * 32;
constexpr int kBwdKeys = 128;  // keys per key block
constexpr int kBwdQ = 64;      // queries per step
constexpr int kBwdLdp = kBwdKeys + 8;

template <int DP>
struct BwdCfg {
  static constexpr int ld = DP + 8;
  // dQ = dS·K: warps kDqWarpsQ × kDqWarpsD over (64 queries, DP), tiles kDqRows × kDqCols.
  static constexpr int kDqWarpsD = DP >= 64 ? 4 : 2;
  static constexpr int kDqWarpsQ = kBwdWarps / kDqWarpsD;
  static constexpr int kDqRows = kBwdQ / kDqWarpsQ;
  static constexpr int kDqCols = DP / kDqWarpsD;
  static constexpr int kSmemBytes = (2 * kBwdKeys + 4 * kBwdQ) * ld * 2  // K, V, 2 × (Q, dO)
                                    + 2 * kBwdQ * kBwdLdp * 2            // P, dS
                                    + 4 * kBwdQ * 4;                     // 2 × (lse, dsum)
};

// P = exp2(S·scale·log2 e − lse·log2 e) and dS = P ∘ (dP − dsum) of one warp's 32 queries (from
// q_row0 of the step at q0) × 32 keys (from k_col0 of the block at k0), zero where key > query,
// query >= s or key >= s when need_mask, to shared memory as bf16 (rows of ldp).
__device__ __forceinline__ void warp_p_ds_to_shared(const float (&sacc)[2][4][4],
                                                    const float (&pacc)[2][4][4], const float* cL,
                                                    const float* cD, int q_row0, int k_col0, int q0,
                                                    int k0, int s, bool need_mask, float scale_log2,
                                                    bf16* sP, bf16* sdS) {
  constexpr int ldp = kBwdLdp;
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int mt = 0; mt < 2; ++mt) {
#pragma unroll
    for (int rr = 0; rr < 2; ++rr) {
      const int lr = q_row0 + mt * 16 + g + 8 * rr;  // row within the step
      const int row = q0 + lr;
      const float l2 = cL[lr] * kLog2e, dd = cD[lr];
#pragma unroll
      for (int nt = 0; nt < 4; ++nt) {
        const int lk = k_col0 + nt * 8 + 2 * t;  // key within the block
        float p[2], ds[2];
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          float pe = exp2f(sacc[mt][nt][2 * rr + e] * scale_log2 - l2);
          const int key = k0 + lk + e;
          if (need_mask && (key > row || row >= s || key >= s)) pe = 0.0f;
          p[e] = pe;
          ds[e] = pe * (pacc[mt][nt][2 * rr + e] - dd);
        }
        *reinterpret_cast<uint32_t*>(sP + lr * ldp + lk) = pack_bf16(p[0], p[1]);
        *reinterpret_cast<uint32_t*>(sdS + lr * ldp + lk) = pack_bf16(ds[0], ds[1]);
      }
    }
  }
}

// acc += A^T·B over one k-step of 16 for one warp: A^T's 32 rows from m0 of a tile stored (k, m)
// (P or dS, rows of lda), B the HD columns from n0 of a tile stored (k, n) (dO or Q).
template <int HD>
__device__ __forceinline__ void warp_mma_atb_step(const bf16* ta, int lda, int m0, int k0,
                                                  const bf16* tb, int ldb, int n0,
                                                  float (&acc)[2][HD / 8][4]) {
  uint32_t a[2][4];
#pragma unroll
  for (int mt = 0; mt < 2; ++mt) load_a_kmajor(ta, lda, m0 + mt * 16, k0, a[mt]);
#pragma unroll
  for (int np = 0; np < HD / 16; ++np) {
    uint32_t b[4];
    load_b_kn(tb, ldb, k0, n0 + np * 16, b);
#pragma unroll
    for (int mt = 0; mt < 2; ++mt) {
      mma_bf16(acc[mt][2 * np], a[mt], b[0], b[1]);
      mma_bf16(acc[mt][2 * np + 1], a[mt], b[2], b[3]);
    }
  }
}

// dQ_part = dS·K for one warp's C::kDqRows queries (from q_row0 of the step at q0) × C::kDqCols
// columns (from col0), k = the 128 keys of the block at k0; stored into this split's f32 buffer
// (first: the split's first key block) or added there with red.global by this fixed thread.
template <class C, int DP>
__device__ __forceinline__ void warp_dq_part(const bf16* sdS, const bf16* sK, int q_row0, int col0,
                                             int q0, int k0, int s, bool first, float* part) {
  constexpr int ld = C::ld, ldp = kBwdLdp;
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  constexpr int MT = C::kDqRows / 16, NT = C::kDqCols / 8;
  float dq[MT][NT][4];
  zero(dq);
  const int row_hi = q0 + q_row0 + C::kDqRows - 1;  // this warp's last row
#pragma unroll
  for (int kk = 0; kk < kBwdKeys / 16; ++kk) {
    if (k0 + kk * 16 > row_hi) break;  // dS is zero from here on for these rows
    uint32_t a[MT][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) load_a(sdS, ldp, q_row0 + mt * 16, kk * 16, a[mt]);
#pragma unroll
    for (int np = 0; np < NT / 2; ++np) {
      uint32_t b[4];
      load_b_kn(sK, ld, kk * 16, col0 + np * 16, b);
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        mma_bf16(dq[mt][2 * np], a[mt], b[0], b[1]);
        mma_bf16(dq[mt][2 * np + 1], a[mt], b[2], b[3]);
      }
    }
  }
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int rr = 0; rr < 2; ++rr) {
      const int row = q0 + q_row0 + mt * 16 + g + 8 * rr;
      if (row >= s) continue;
      float* dst = part + static_cast<int64_t>(row) * DP + col0 + 2 * t;
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        if (first) {
          *reinterpret_cast<float2*>(dst + nt * 8) =
              make_float2(dq[mt][nt][2 * rr], dq[mt][nt][2 * rr + 1]);
        } else {
          red_add_f32x2(dst + nt * 8, dq[mt][nt][2 * rr], dq[mt][nt][2 * rr + 1]);
        }
      }
    }
  }
}

template <int DP>
__global__ void __launch_bounds__(kBwdThreads, 1)
    flash_bwd_kernel(const bf16* __restrict__ qkv, const bf16* __restrict__ dout,
                     const float* __restrict__ lse, const float* __restrict__ dsum,
                     bf16* __restrict__ dqkv, BwdWork work, Dims dm, float scale_log2,
                     float scale) {
  using C = BwdCfg<DP>;
  constexpr int ld = C::ld, ldp = kBwdLdp;
  constexpr int KT = DP / 16;
  extern __shared__ __align__(16) unsigned char smem[];
  bf16* sK = reinterpret_cast<bf16*>(smem);                 // kBwdKeys × ld
  bf16* sV = sK + kBwdKeys * ld;                            // kBwdKeys × ld
  bf16* sQ = sV + kBwdKeys * ld;                            // 2 × kBwdQ × ld
  bf16* sdO = sQ + 2 * kBwdQ * ld;                          // 2 × kBwdQ × ld
  bf16* sP = sdO + 2 * kBwdQ * ld;                          // kBwdQ × ldp (query, key)
  bf16* sdS = sP + kBwdQ * ldp;                             // kBwdQ × ldp (query, key)
  float* sL = reinterpret_cast<float*>(sdS + kBwdQ * ldp);  // 2 × kBwdQ: lse
  float* sD = sL + 2 * kBwdQ;                               // 2 × kBwdQ: dsum

  const int split = blockIdx.y, splits = work.splits;
  const BwdWork::Block blk = work.block(dm, blockIdx.x);
  const int bi = blk.bi, h0 = blk.h0, per = blk.heads;  // the chunk's heads h0 .. h0 + per - 1
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int s = dm.s, d = dm.d;
  const Plane pk = dm.qkv_plane(qkv, bi, h0, 1);
  const Plane pv = dm.qkv_plane(qkv, bi, h0, 2);
  // Per head of the chunk: its lse and dsum rows and this split's dQ partial sums.
  auto bh_of = [&](int j) { return static_cast<int64_t>(bi) * dm.heads + h0 + j; };
  auto part_of = [&](int j) { return work.dq_rows(dm, split, bi, h0 + j); };

  const int n_key_blocks = (s + kBwdKeys - 1) / kBwdKeys;
  const int n_q_steps = (s + kBwdQ - 1) / kBwdQ;

  // Warp roles. S/dP: 2 × 4 over (queries, keys), 32 × 32 each. dK/dV: 4 × 2 over (keys, d),
  // 32 × DP/2 each. dQ: C::kDqWarpsQ × C::kDqWarpsD over (queries, d).
  const int wq = warp >> 2, wk = warp & 3;
  const int wk2 = warp >> 1, wd = warp & 1;
  const int wq3 = warp / C::kDqWarpsD, wd3 = warp % C::kDqWarpsD;
  constexpr int HD = DP / 2;  // dK/dV columns per warp

  for (int r = 0;; ++r) {
    const int kb = (r >> 1) * 2 * splits + ((r & 1) ? 2 * splits - 1 - split : split);
    if (kb >= n_key_blocks) break;
    const bool first = r == 0;
    const bool down = (r & 1) != 0;  // alternate sweep directions: the turn reuses L2 lines
    const int k0 = kb * kBwdKeys;
    const int qs_first = k0 / kBwdQ;  // first query step on or after the diagonal
    const int head_steps = n_q_steps - qs_first;
    const int n_steps = per * head_steps;  // step i: head h0 + i / head_steps
    auto step_q0 = [&](int i) {
      const int j = i % head_steps;
      return (down ? n_q_steps - 1 - j : qs_first + j) * kBwdQ;
    };
    auto load_step = [&](int i, int st) {
      const int q0 = step_q0(i), j = i / head_steps;
      const float* lse_row = lse + bh_of(j) * s;
      const float* dsum_row = dsum + bh_of(j) * s;
      load_tile<kBwdThreads, kBwdQ, DP>(sQ + st * kBwdQ * ld, dm.qkv_plane(qkv, bi, h0 + j, 0), q0,
                                        s, d);
      load_tile<kBwdThreads, kBwdQ, DP>(sdO + st * kBwdQ * ld, dm.out_plane(dout, bi, h0 + j), q0,
                                        s, d);
      const int x = threadIdx.x & (kBwdQ - 1);
      const bool ok = q0 + x < s;
      if (threadIdx.x < kBwdQ) {
        cp_async4(sL + st * kBwdQ + x, ok ? lse_row + q0 + x : lse_row, ok);
      } else if (threadIdx.x < 2 * kBwdQ) {
        cp_async4(sD + st * kBwdQ + x, ok ? dsum_row + q0 + x : dsum_row, ok);
      }
    };

    load_tile<kBwdThreads, kBwdKeys, DP>(sK, pk, k0, s, d);
    load_tile<kBwdThreads, kBwdKeys, DP>(sV, pv, k0, s, d);
    load_step(0, 0);
    cp_async_commit();

    float dk[2][HD / 8][4], dv[2][HD / 8][4];
    zero(dk);
    zero(dv);

    for (int i = 0; i < n_steps; ++i) {
      cp_async_wait<0>();
      __syncthreads();  // step i landed for all; every warp is done with step i - 1
      if (i + 1 < n_steps) {
        load_step(i + 1, (i + 1) & 1);
        cp_async_commit();
      }
      const int st = i & 1;
      const int q0 = step_q0(i);
      const bf16* cQ = sQ + st * kBwdQ * ld;
      const bf16* cdO = sdO + st * kBwdQ * ld;
      const float* cL = sL + st * kBwdQ;
      const float* cD = sD + st * kBwdQ;

      // ---- S = Q·K^T and dP = dO·V^T, 32 queries × 32 keys per warp.
      float sacc[2][4][4], pacc[2][4][4];
      zero(sacc);
      zero(pacc);
      const bool tile_live = k0 + wk * 32 <= q0 + wq * 32 + 31;  // some key <= some query
      if (tile_live) {
        warp_mma_abt<KT, 2>(cQ, wq * 32, sK, wk * 32, ld, sacc);
        warp_mma_abt<KT, 2>(cdO, wq * 32, sV, wk * 32, ld, pacc);
      }

      // ---- P = exp2(S·scale·log2e - lse·log2e), dS = P ∘ (dP - dsum); both to shared as bf16.
      const bool need_mask = k0 + kBwdKeys - 1 > q0 || q0 + kBwdQ > s || k0 + kBwdKeys > s;
      warp_p_ds_to_shared(sacc, pacc, cL, cD, wq * 32, wk * 32, q0, k0, s, need_mask, scale_log2,
                          sP, sdS);
      __syncthreads();  // P and dS complete

      // ---- dV += P^T·dO, dK += dS^T·Q: 32 keys × DP/2 per warp; k = the 64 queries.
      if (k0 + wk2 * 32 <= q0 + kBwdQ - 1) {  // else P, dS are zero for this warp's keys
#pragma unroll
        for (int kq = 0; kq < kBwdQ / 16; ++kq) {
          warp_mma_atb_step<HD>(sP, ldp, wk2 * 32, kq * 16, cdO, ld, wd * HD, dv);
          warp_mma_atb_step<HD>(sdS, ldp, wk2 * 32, kq * 16, cQ, ld, wd * HD, dk);
        }
      }

      // ---- dQ_part = dS·K: C::kDqRows queries × C::kDqCols per warp; k = the 128 keys.
      warp_dq_part<C, DP>(sdS, sK, wq3 * C::kDqRows, wd3 * C::kDqCols, q0, k0, s, first,
                          part_of(i / head_steps));
    }

    __syncthreads();  // every warp is done reading sK, sV, sP, sdS
    if (work.chunks > 1) {
      // ---- dK (times scale) and dV of this chunk's heads: f32 partial sums for the finalize.
      float* pk_rows = work.dkv_rows(dm, blk.chunk, 0, blk.bg);
      float* pv_rows = work.dkv_rows(dm, blk.chunk, 1, blk.bg);
#pragma unroll
      for (int mt = 0; mt < 2; ++mt) {
#pragma unroll
        for (int rr = 0; rr < 2; ++rr) {
          const int key = k0 + wk2 * 32 + mt * 16 + g + 8 * rr;
          if (key >= s) continue;
#pragma unroll
          for (int nt = 0; nt < HD / 8; ++nt) {
            const int64_t off = static_cast<int64_t>(key) * DP + wd * HD + nt * 8 + 2 * t;
            *reinterpret_cast<float2*>(pk_rows + off) =
                make_float2(dk[mt][nt][2 * rr] * scale, dk[mt][nt][2 * rr + 1] * scale);
            *reinterpret_cast<float2*>(pv_rows + off) =
                make_float2(dv[mt][nt][2 * rr], dv[mt][nt][2 * rr + 1]);
          }
        }
      }
      continue;
    }
    // ---- dK (times scale) and dV of this key block: staged through sK / sV.
#pragma unroll
    for (int mt = 0; mt < 2; ++mt) {
#pragma unroll
      for (int nt = 0; nt < HD / 8; ++nt) {
        const int rk = wk2 * 32 + mt * 16 + g, c = wd * HD + nt * 8 + 2 * t;
        *reinterpret_cast<uint32_t*>(sK + rk * ld + c) =
            pack_bf16(dk[mt][nt][0] * scale, dk[mt][nt][1] * scale);
        *reinterpret_cast<uint32_t*>(sK + (rk + 8) * ld + c) =
            pack_bf16(dk[mt][nt][2] * scale, dk[mt][nt][3] * scale);
        *reinterpret_cast<uint32_t*>(sV + rk * ld + c) = pack_bf16(dv[mt][nt][0], dv[mt][nt][1]);
        *reinterpret_cast<uint32_t*>(sV + (rk + 8) * ld + c) =
            pack_bf16(dv[mt][nt][2], dv[mt][nt][3]);
      }
    }
    __syncthreads();
    {
      const Plane pdk = dm.qkv_plane(dqkv, bi, h0, 1);
      const Plane pdv = dm.qkv_plane(dqkv, bi, h0, 2);
      constexpr int kChunks = DP / 8;
#pragma unroll
      for (int k = 0; k < kBwdKeys * kChunks / kBwdThreads; ++k) {
        const int i = threadIdx.x + k * kBwdThreads;
        const int rk = i / kChunks, c = i % kChunks;
        if (k0 + rk < s && c * 8 < d) {
          const int64_t off = static_cast<int64_t>(k0 + rk) * pdk.row_stride + c * 8;
          *reinterpret_cast<uint4*>(const_cast<bf16*>(pdk.base) + off) =
              *reinterpret_cast<const uint4*>(sK + rk * ld + c * 8);
          *reinterpret_cast<uint4*>(const_cast<bf16*>(pdv.base) + off) =
              *reinterpret_cast<const uint4*>(sV + rk * ld + c * 8);
        }
      }
    }
    __syncthreads();  // sK, sV free for the next key block
  }
}

// dQ (bf16, slot 0 of dqkv) = scale · Σ_j part[j], j ascending, over the splits that cover the
// row (split j covers rows >= 128·j). One thread per 8 columns of one row.
__global__ void __launch_bounds__(256)
    dq_finalize_kernel(const float* __restrict__ dq_part, int splits, int dp,
                       bf16* __restrict__ dqkv, Dims dm, float scale) {
  const int chunks = dm.d / 8;
  const int64_t n_bh = static_cast<int64_t>(dm.b) * dm.heads;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n_bh * dm.s * chunks) return;
  const int c = static_cast<int>(i % chunks);
  const int64_t rest = i / chunks;
  const int row = static_cast<int>(rest % dm.s);
  const int bh = static_cast<int>(rest / dm.s);
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (int j = 0; j < splits; ++j) {
    if (j * kBwdKeys > row) break;
    const float* p = dq_part + ((j * n_bh + bh) * dm.s + row) * dp + c * 8;
    const float4 x = *reinterpret_cast<const float4*>(p);
    const float4 y = *reinterpret_cast<const float4*>(p + 4);
    acc[0] += x.x, acc[1] += x.y, acc[2] += x.z, acc[3] += x.w;
    acc[4] += y.x, acc[5] += y.y, acc[6] += y.z, acc[7] += y.w;
  }
  uint4 o;
  o.x = pack_bf16(acc[0] * scale, acc[1] * scale);
  o.y = pack_bf16(acc[2] * scale, acc[3] * scale);
  o.z = pack_bf16(acc[4] * scale, acc[5] * scale);
  o.w = pack_bf16(acc[6] * scale, acc[7] * scale);
  const Plane pdq = dm.qkv_plane(dqkv, bh / dm.heads, bh % dm.heads, 0);
  *reinterpret_cast<uint4*>(const_cast<bf16*>(pdq.base) +
                            static_cast<int64_t>(row) * pdq.row_stride + c * 8) = o;
}

template <class F>
void dispatch_dp(int d, F&& f) {
  if (d <= 32) {
    f(std::integral_constant<int, 32>{});
  } else if (d <= 64) {
    f(std::integral_constant<int, 64>{});
  } else {
    f(std::integral_constant<int, 128>{});
  }
}

int padded_dim(int64_t d) { return d <= 32 ? 32 : d <= 64 ? 64 : 128; }

// Raises a kernel's dynamic shared-memory limit (a per-device setting: done at every launch, as
// one process may drive several devices; it costs a host call).
template <class K>
void allow_smem(K kernel, int bytes) {
  MPLAN_CUDA_CHECK(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
}

Dims dims_of(const AttentionShape& sh) {
  return {static_cast<int>(sh.s), static_cast<int>(sh.b), static_cast<int>(sh.heads),
          static_cast<int>(sh.groups), static_cast<int>(sh.d)};
}

// The backward's work plan, a function of the shape only (so results do not depend on the
// device): how many chunks the heads of a K/V group are dealt in (a divisor of heads / groups)
// and how many blocks each (batch, group, chunk) gets, minimizing (waves on kSlots resident
// blocks) × (the largest block's causal work over its heads), then the scratch, with at most
// kMaxPartBytes of partial sums (dQ per split, dK and dV per chunk when there are several).
// kSlots is an H100/H200's SM count (one backward block per SM); another count changes only the
// speed. Multi-head attention has one head a group, so one chunk.
constexpr int64_t kSlots = 132;
constexpr int64_t kMaxPartBytes = int64_t{1} << 30;

struct BwdPlan {
  int64_t splits = 1, chunks = 1;
};

// The largest of p blocks' causal work (query steps, plus one per key block for its overheads)
// when a (batch, group, chunk)'s key blocks are dealt to them in the snake order.
int64_t worst_block_steps(int64_t p, int64_t n_kb, int64_t n_qs) {
  int64_t worst = 0;
  for (int64_t j = 0; j < p; ++j) {
    int64_t w = 0;
    for (int64_t r = 0;; ++r) {
      const int64_t kb = (r >> 1) * 2 * p + ((r & 1) ? 2 * p - 1 - j : j);
      if (kb >= n_kb) break;
      w += n_qs - kb * (kBwdKeys / kBwdQ) + 1;
    }
    worst = std::max(worst, w);
  }
  return worst;
}

int64_t dq_part_bytes(const AttentionShape& sh) {  // one split's
  return sh.b * sh.heads * sh.s * padded_dim(sh.d) * 4;
}
int64_t dkv_part_bytes(const AttentionShape& sh) {  // one chunk's dK and dV
  return 2 * sh.b * sh.groups * sh.s * padded_dim(sh.d) * 4;
}

BwdPlan bwd_plan(const AttentionShape& sh) {
  const int64_t n_kb = (sh.s + kBwdKeys - 1) / kBwdKeys;
  const int64_t n_qs = (sh.s + kBwdQ - 1) / kBwdQ;
  const int64_t per = sh.heads / sh.groups;
  BwdPlan best;
  int64_t best_cost = -1, best_bytes = 0;
  for (int64_t c = 1; c <= per; ++c) {
    if (per % c != 0) continue;
    const int64_t dkv = c > 1 ? c * dkv_part_bytes(sh) : 0;
    for (int64_t p = 1; p <= std::min<int64_t>(n_kb, 64); ++p) {
      const int64_t bytes = p * dq_part_bytes(sh) + dkv;
      if ((p > 1 || c > 1) && bytes > kMaxPartBytes) break;
      const int64_t blocks = sh.b * sh.groups * c * p;
      const int64_t cost =
          (blocks + kSlots - 1) / kSlots * worst_block_steps(p, n_kb, n_qs) * (per / c);
      if (best_cost < 0 || cost < best_cost || (cost == best_cost && bytes < best_bytes)) {
        best = {p, c};
        best_cost = cost;
        best_bytes = bytes;
      }
    }
  }
  return best;
}

// dK and dV (bf16, slots 1 and 2 of dqkv) = Σ_c part[c], c ascending, over the chunks of each
// K/V group's heads (dK's parts are already scaled). One thread per 8 columns of one row.
__global__ void __launch_bounds__(256)
    dkv_finalize_kernel(BwdWork work, bf16* __restrict__ dqkv, Dims dm) {
  const int col_chunks = dm.d / 8;
  const int64_t n_bg = static_cast<int64_t>(dm.b) * dm.groups;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= 2 * n_bg * dm.s * col_chunks) return;
  const int c = static_cast<int>(i % col_chunks);
  int64_t rest = i / col_chunks;
  const int row = static_cast<int>(rest % dm.s);
  rest /= dm.s;
  const int bg = static_cast<int>(rest % n_bg), kv = static_cast<int>(rest / n_bg);
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (int j = 0; j < work.chunks; ++j) {
    const float* p = work.dkv_rows(dm, j, kv, bg) + static_cast<int64_t>(row) * work.dp + c * 8;
    const float4 x = *reinterpret_cast<const float4*>(p);
    const float4 y = *reinterpret_cast<const float4*>(p + 4);
    acc[0] += x.x, acc[1] += x.y, acc[2] += x.z, acc[3] += x.w;
    acc[4] += y.x, acc[5] += y.y, acc[6] += y.z, acc[7] += y.w;
  }
  uint4 o;
  o.x = pack_bf16(acc[0], acc[1]);
  o.y = pack_bf16(acc[2], acc[3]);
  o.z = pack_bf16(acc[4], acc[5]);
  o.w = pack_bf16(acc[6], acc[7]);
  const int bi = bg / dm.groups, h0 = (bg % dm.groups) * dm.heads_per_group();
  const Plane pd = dm.qkv_plane(dqkv, bi, h0, 1 + kv);
  *reinterpret_cast<uint4*>(const_cast<bf16*>(pd.base) + static_cast<int64_t>(row) * pd.row_stride +
                            c * 8) = o;
}

size_t align256(size_t n) { return (n + 255) / 256 * 256; }

// Whether this shape runs on the Hopper (wgmma) kernels: kBest asked, the current device has
// compute capability 9.0 (H100, H200) and the head dim is 64 or 128.
bool use_hopper(const AttentionShape& sh, AttentionKernels kernels) {
#if MPLAN_HAVE_HOPPER_ATTENTION
  return kernels == AttentionKernels::kBest && hopper_attention_shape_ok(sh) &&
         current_device_attribute<cudaDevAttrComputeCapabilityMajor>() == 9 &&
         current_device_attribute<cudaDevAttrComputeCapabilityMinor>() == 0;
#else
  (void)sh;
  (void)kernels;
  return false;
#endif
}

}  // namespace

bool attention_fast_supported(const AttentionShape& sh, DType t) {
  return t == DType::kBF16 && sh.d >= 8 && sh.d <= 128 && sh.d % 8 == 0 && sh.s >= 1 &&
         sh.s < (1 << 30) && sh.b * sh.heads < (int64_t{1} << 31);
}

void launch_attention_forward(const AttentionShape& sh, const void* qkv, void* out, float* lse,
                              float scale, DType t, AttentionKernels kernels, cudaStream_t stream) {
  const bool naive = kernels == AttentionKernels::kReference;
  if (sh.s <= 0 || sh.b <= 0 || sh.heads <= 0) return;
  if (naive || !attention_fast_supported(sh, t) || !aligned16(qkv) || !aligned16(out)) {
    launch_attention_forward_naive(sh, qkv, out, lse, scale, t, stream);
    return;
  }
#if MPLAN_HAVE_HOPPER_ATTENTION
  if (use_hopper(sh, kernels)) {
    launch_hopper_attention_forward(sh, static_cast<const bf16*>(qkv), static_cast<bf16*>(out), lse,
                                    scale * kLog2e, stream);
    return;
  }
#endif
  const Dims dm = dims_of(sh);
  dim3 grid(static_cast<unsigned>(sh.b * sh.heads),
            static_cast<unsigned>((sh.s + kFwdRows - 1) / kFwdRows));
  dispatch_dp(dm.d, [&](auto dpc) {
    constexpr int DP = decltype(dpc)::value;
    constexpr int smem = fwd_smem_bytes<DP>();
    auto run = [&](auto kernel) {
      allow_smem(kernel, smem);
      kernel<<<grid, kFwdThreads, smem, stream>>>(static_cast<const bf16*>(qkv),
                                                  static_cast<bf16*>(out), lse, dm, scale * kLog2e);
    };
    static const int sub = [] {
      const char* e = std::getenv("MPLAN_ATTN_FWD_SUB");
      return e ? std::atoi(e) : 64;
    }();
    if (sub == 64) {
      run(flash_fwd_kernel<DP, 64>);
    } else {
      run(flash_fwd_kernel<DP, 32>);
    }
  });
  MPLAN_CUDA_LAUNCH_CHECK();
}

namespace {

// The backward's scratch after dsum: the dQ region (the mma.sync kernels' partial sums of every
// split, or the Hopper kernels' f32 accumulator and counters), then the dK and dV partial sums of
// every head chunk when there are several. Sized for either family, so that it depends on the
// shape only.
struct BwdScratch {
  size_t dq_region = 0, dkv_region = 0;
  size_t hopper_sems = 0;    // where the Hopper kernels' counters start in the dQ region
  size_t colsum_region = 0;  // the Hopper kernels' column-sum parts (q, then kv), after dkv
  size_t colsum_kv = 0;      // where the kv parts start in it
};
BwdScratch bwd_scratch(const AttentionShape& sh) {
  const BwdPlan plan = bwd_plan(sh);
  BwdScratch r;
  r.dq_region = align256(static_cast<size_t>(plan.splits * dq_part_bytes(sh)));
  if (plan.chunks > 1) r.dkv_region = static_cast<size_t>(plan.chunks * dkv_part_bytes(sh));
#if MPLAN_HAVE_HOPPER_ATTENTION
  if (hopper_attention_shape_ok(sh)) {
    r.hopper_sems = align256(static_cast<size_t>(hopper_bwd_dq_bytes(sh)));
    r.dq_region = std::max(
        r.dq_region,
        r.hopper_sems + align256(static_cast<size_t>(hopper_bwd_sem_count(sh)) * sizeof(int)));
    const int64_t chunks = hopper_bwd_chunks(sh);
    if (chunks > 1)
      r.dkv_region = std::max(r.dkv_region, static_cast<size_t>(chunks * dkv_part_bytes(sh)));
    r.dkv_region = align256(r.dkv_region);
    // Rows of dQ's heads·d columns, then of dK's and dV's 2·groups·d.
    r.colsum_kv = align256(static_cast<size_t>(hopper_bwd_colsum_q_parts(sh) * sh.heads * sh.d) *
                           sizeof(float));
    r.colsum_region =
        r.colsum_kv +
        static_cast<size_t>(hopper_bwd_colsum_kv_parts(sh) * 2 * sh.groups * sh.d) * sizeof(float);
  }
#endif
  return r;
}

// dK and dV from the chunks' partial sums (several chunks).
void launch_dkv_finalize(const AttentionShape& sh, const BwdWork& work, void* dqkv, const Dims& dm,
                         cudaStream_t stream) {
  if (work.chunks <= 1) return;
  const int64_t m = 2 * sh.b * sh.groups * sh.s * (sh.d / 8);
  dkv_finalize_kernel<<<static_cast<unsigned>((m + 255) / 256), 256, 0, stream>>>(
      work, static_cast<bf16*>(dqkv), dm);
  MPLAN_CUDA_LAUNCH_CHECK();
}

}  // namespace

// Scratch: dsum, then bwd_scratch's regions.
size_t attention_backward_scratch_bytes(const AttentionShape& sh) {
  const size_t dsum_bytes = static_cast<size_t>(sh.b * sh.heads * sh.s) * sizeof(float);
  if (!attention_fast_supported(sh, DType::kBF16)) return dsum_bytes;
  const BwdScratch sc = bwd_scratch(sh);
  return align256(dsum_bytes) + sc.dq_region + sc.dkv_region + sc.colsum_region;
}

bool launch_attention_backward(const AttentionShape& sh, const void* qkv, const void* out,
                               const void* dout, const float* lse, float scale, void* dqkv, DType t,
                               AttentionKernels kernels, void* scratch, float* colsum,
                               cudaStream_t stream) {
  const bool naive = kernels == AttentionKernels::kReference;
  if (sh.s <= 0 || sh.b <= 0 || sh.heads <= 0) return false;
  float* dsum = static_cast<float*>(scratch);
  launch_attention_dsum(sh, out, dout, dsum, t, stream);
  if (naive || !attention_fast_supported(sh, t) || !aligned16(qkv) || !aligned16(dout) ||
      !aligned16(dqkv)) {
    launch_attention_backward_naive(sh, qkv, dout, lse, dsum, scale, dqkv, t, stream);
    return false;
  }
  const Dims dm = dims_of(sh);
  const BwdScratch sc = bwd_scratch(sh);
  char* dq_bytes =
      static_cast<char*>(scratch) + align256(static_cast<size_t>(sh.b * sh.heads * sh.s) * 4);
  float* dq_part = reinterpret_cast<float*>(dq_bytes);
  float* dkv_part = sc.dkv_region > 0 ? reinterpret_cast<float*>(dq_bytes + sc.dq_region) : nullptr;
  bool summed = false;
  dispatch_dp(dm.d, [&](auto dpc) {
    constexpr int DP = decltype(dpc)::value;
#if MPLAN_HAVE_HOPPER_ATTENTION
    if (use_hopper(sh, kernels)) {
      BwdWork work{1, hopper_bwd_chunks(sh), DP, dq_part, dkv_part};
      summed = colsum != nullptr && work.chunks == 1;
      if (summed) {
        char* parts = dq_bytes + sc.dq_region + sc.dkv_region;
        work.colsum_q = reinterpret_cast<float*>(parts);
        work.colsum_kv = reinterpret_cast<float*>(parts + sc.colsum_kv);
      }
      int* sems = reinterpret_cast<int*>(dq_bytes + sc.hopper_sems);
      launch_hopper_attention_backward(
          sh, static_cast<const bf16*>(qkv), static_cast<const bf16*>(dout), lse, dsum,
          static_cast<bf16*>(dqkv), work, sems, scale * kLog2e, scale, stream);
      launch_dkv_finalize(sh, work, dqkv, dm, stream);
      if (summed) {  // dQ's columns, then dK's and dV's
        const int64_t qd = sh.heads * sh.d;
        launch_column_partials_finalize(work.colsum_q, hopper_bwd_colsum_q_parts(sh), qd, colsum,
                                        stream);
        launch_column_partials_finalize(work.colsum_kv, hopper_bwd_colsum_kv_parts(sh),
                                        2 * sh.groups * sh.d, colsum + qd, stream);
      }
      return;
    }
#endif
    const BwdPlan plan = bwd_plan(sh);
    const BwdWork work{static_cast<int>(plan.splits), static_cast<int>(plan.chunks), DP, dq_part,
                       dkv_part};
    constexpr int smem = BwdCfg<DP>::kSmemBytes;
    allow_smem(flash_bwd_kernel<DP>, smem);
    flash_bwd_kernel<DP><<<dim3(static_cast<unsigned>(sh.b * sh.groups * plan.chunks),
                                static_cast<unsigned>(plan.splits)),
                           kBwdThreads, smem, stream>>>(
        static_cast<const bf16*>(qkv), static_cast<const bf16*>(dout), lse, dsum,
        static_cast<bf16*>(dqkv), work, dm, scale * kLog2e, scale);
    MPLAN_CUDA_LAUNCH_CHECK();
    const int64_t n = sh.b * sh.heads * sh.s * (sh.d / 8);
    dq_finalize_kernel<<<static_cast<unsigned>((n + 255) / 256), 256, 0, stream>>>(
        dq_part, static_cast<int>(plan.splits), DP, static_cast<bf16*>(dqkv), dm, scale);
    MPLAN_CUDA_LAUNCH_CHECK();
    launch_dkv_finalize(sh, work, dqkv, dm, stream);
  });
  return summed;
}

}  // namespace mplan::exec::cuda
