// Causal flash attention for one tensor-parallel shard of heads, bf16 in and out, f32 softmax
// and accumulators, tensor cores through mma.sync m16n8k16 (exec/cuda/mma_utils.cuh).
// Layout: qkv (s, b, 3, heads, d), out/dout (s, b, heads, d), lse/dsum (b, heads, s) f32.
// Invariants: the s×s scores never reach device memory (forward keeps a running max and sum per
// row and saves lse = log-sum-exp; backward recomputes P = exp(S - lse)); no atomics: dK/dV come
// from a kernel over key blocks, dQ from one over query blocks, each summing in a fixed order, so
// results are bitwise reproducible. Head dims are padded in shared memory to DP ∈ {32, 64, 128}
// with zeros; sequence tails are zero-filled and masked.
//
// Work split. Forward and dQ: a block owns 128 query rows (8 warps × 16 rows) and walks key
// blocks of 64 from 0 to its diagonal; each warp skips key blocks entirely after its rows.
// dK/dV: a block owns 128 keys (8 warps × 16 keys) and walks query blocks of 64 from its diagonal
// to the end, computing S^T = K·Q^T so that P^T and dS^T stay in registers as A operands.
// K/V (forward, dQ) and Q/dO (dK/dV) tiles are double-buffered with cp.async; the heaviest
// blocks are scheduled first.
#include <cmath>

#include "exec/cuda/device_utils.cuh"
#include "exec/cuda/kernels.hpp"
#include "exec/cuda/mma_utils.cuh"

namespace mplan::exec::cuda {
namespace {

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr int kBlockM = 128;     // forward / dQ: query rows per block
constexpr int kBlockN = 64;      // forward / dQ: keys per step
constexpr int kBwdKeys = 128;    // dK/dV: keys per block
constexpr int kBwdQueries = 64;  // dK/dV: queries per step
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

// Where one (batch, head) plane of the inputs lives: element (row, c) is at
// base + row · row_stride + c.
struct Plane {
  const bf16* base;
  int64_t row_stride;
};

// cp.async of rows [row0, row0 + kRows) × [0, DP) of a plane into a shared tile (kRows × ld);
// rows >= s and columns >= d are zero-filled.
template <int kRows, int DP>
__device__ __forceinline__ void load_tile(bf16* tile, const Plane& p, int row0, int s, int d) {
  constexpr int kChunks = DP / 8;
  constexpr int ld = DP + 8;
  constexpr int kIters = (kRows * kChunks + kThreads - 1) / kThreads;
#pragma unroll
  for (int k = 0; k < kIters; ++k) {
    const int i = threadIdx.x + k * kThreads;
    if (kRows * kChunks % kThreads != 0 && i >= kRows * kChunks) break;
    const int r = i / kChunks, c = i % kChunks;
    const bool valid = row0 + r < s && c * 8 < d;
    const bf16* src =
        valid ? p.base + static_cast<int64_t>(row0 + r) * p.row_stride + c * 8 : p.base;
    cp_async16(tile + r * ld + c * 8, src, valid);
  }
}

// Writes a warp's 16 rows from its f32 accumulators acc[DP/8][4] (times `mul`) to global rows
// [row0, row0 + 16) of a plane, through `stage` (16 × ld shared elements owned by this warp).
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
}

struct Dims {
  int s, b, heads, d;
  // qkv plane of (batch bi, head hh, slot 0/1/2 = Q/K/V).
  __device__ Plane qkv_plane(const bf16* qkv, int bi, int hh, int slot) const {
    const int64_t hd = static_cast<int64_t>(heads) * d;
    return {qkv + (static_cast<int64_t>(bi) * 3 + slot) * hd + static_cast<int64_t>(hh) * d,
            static_cast<int64_t>(b) * 3 * hd};
  }
  // out/dout plane of (bi, hh).
  __device__ Plane out_plane(const bf16* o, int bi, int hh) const {
    const int64_t hd = static_cast<int64_t>(heads) * d;
    return {o + static_cast<int64_t>(bi) * hd + static_cast<int64_t>(hh) * d,
            static_cast<int64_t>(b) * hd};
  }
};

template <int DP>
constexpr int fwd_smem_bytes() {
  return (kBlockM + 4 * kBlockN) * (DP + 8) * 2;
}
template <int DP>
constexpr int dq_smem_bytes() {
  return (2 * kBlockM + 4 * kBlockN) * (DP + 8) * 2;
}
template <int DP>
constexpr int dkdv_smem_bytes() {
  return (2 * kBwdKeys + 4 * kBwdQueries) * (DP + 8) * 2 + 4 * kBwdQueries * 4;
}

// ------------------------------------------------------------------------------------------
// Forward. grid (b·heads, query blocks); block 256 threads.
template <int DP>
__global__ void __launch_bounds__(kThreads)
    flash_fwd_kernel(const bf16* __restrict__ qkv, bf16* __restrict__ out, float* __restrict__ lse,
                     Dims dm, float scale_log2) {
  constexpr int ld = DP + 8;
  extern __shared__ __align__(16) unsigned char smem[];
  bf16* sQ = reinterpret_cast<bf16*>(smem);  // kBlockM × ld
  bf16* sK = sQ + kBlockM * ld;              // 2 stages × kBlockN × ld
  bf16* sV = sK + 2 * kBlockN * ld;          // 2 stages × kBlockN × ld

  const int bh = blockIdx.x;
  const int bi = bh / dm.heads, hh = bh % dm.heads;
  const int q0 = (gridDim.y - 1 - blockIdx.y) * kBlockM;  // heaviest (last) query block first
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int s = dm.s, d = dm.d;
  const Plane pq = dm.qkv_plane(qkv, bi, hh, 0);
  const Plane pk = dm.qkv_plane(qkv, bi, hh, 1);
  const Plane pv = dm.qkv_plane(qkv, bi, hh, 2);

  const int kv_end = min(s, q0 + kBlockM);
  const int n_kb = (kv_end + kBlockN - 1) / kBlockN;

  load_tile<kBlockM, DP>(sQ, pq, q0, s, d);
  load_tile<kBlockN, DP>(sK, pk, 0, s, d);
  load_tile<kBlockN, DP>(sV, pv, 0, s, d);
  cp_async_commit();

  const int wq0 = q0 + warp * 16;              // this warp's first query row
  const int qrow[2] = {wq0 + g, wq0 + g + 8};  // the rows this thread's accumulators hold
  float o[DP / 8][4];
#pragma unroll
  for (int nt = 0; nt < DP / 8; ++nt) o[nt][0] = o[nt][1] = o[nt][2] = o[nt][3] = 0.0f;
  float row_m[2] = {-INFINITY, -INFINITY};  // running max, in units of log2
  float row_l[2] = {0.0f, 0.0f};            // this thread's part of the running sum
  uint32_t qf[DP / 16][4];

  for (int it = 0; it < n_kb; ++it) {
    if (it + 1 < n_kb) {
      const int st = (it + 1) & 1;
      load_tile<kBlockN, DP>(sK + st * kBlockN * ld, pk, (it + 1) * kBlockN, s, d);
      load_tile<kBlockN, DP>(sV + st * kBlockN * ld, pv, (it + 1) * kBlockN, s, d);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    if (it == 0) {
#pragma unroll
      for (int kk = 0; kk < DP / 16; ++kk) load_a(sQ, ld, warp * 16, kk * 16, qf[kk]);
    }
    const int k0 = it * kBlockN;
    if (k0 <= wq0 + 15) {
      const bf16* cK = sK + (it & 1) * kBlockN * ld;
      const bf16* cV = sV + (it & 1) * kBlockN * ld;
      float sc[kBlockN / 8][4];
#pragma unroll
      for (int nt = 0; nt < kBlockN / 8; ++nt) sc[nt][0] = sc[nt][1] = sc[nt][2] = sc[nt][3] = 0;
#pragma unroll
      for (int kk = 0; kk < DP / 16; ++kk) {
#pragma unroll
        for (int np = 0; np < kBlockN / 16; ++np) {
          uint32_t b[4];
          load_b_nk(cK, ld, np * 16, kk * 16, b);
          mma_bf16(sc[2 * np], qf[kk], b[0], b[1]);
          mma_bf16(sc[2 * np + 1], qf[kk], b[2], b[3]);
        }
      }
      const bool need_mask = k0 + kBlockN - 1 > wq0 || k0 + kBlockN > s;
#pragma unroll
      for (int nt = 0; nt < kBlockN / 8; ++nt) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int key = k0 + nt * 8 + 2 * t + (e & 1);
          float v = sc[nt][e] * scale_log2;
          if (need_mask && (key > qrow[e >> 1] || key >= s)) v = -INFINITY;
          sc[nt][e] = v;
        }
      }
      float mx[2] = {row_m[0], row_m[1]};
#pragma unroll
      for (int nt = 0; nt < kBlockN / 8; ++nt) {
        mx[0] = fmaxf(mx[0], fmaxf(sc[nt][0], sc[nt][1]));
        mx[1] = fmaxf(mx[1], fmaxf(sc[nt][2], sc[nt][3]));
      }
      float base[2], alpha[2];
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
        mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
        base[r] = mx[r] == -INFINITY ? 0.0f : mx[r];
        alpha[r] = exp2f(row_m[r] - base[r]);
        row_m[r] = mx[r];
      }
      float rs[2] = {0.0f, 0.0f};
#pragma unroll
      for (int nt = 0; nt < kBlockN / 8; ++nt) {
        sc[nt][0] = exp2f(sc[nt][0] - base[0]);
        sc[nt][1] = exp2f(sc[nt][1] - base[0]);
        sc[nt][2] = exp2f(sc[nt][2] - base[1]);
        sc[nt][3] = exp2f(sc[nt][3] - base[1]);
        rs[0] += sc[nt][0] + sc[nt][1];
        rs[1] += sc[nt][2] + sc[nt][3];
      }
      row_l[0] = row_l[0] * alpha[0] + rs[0];
      row_l[1] = row_l[1] * alpha[1] + rs[1];
#pragma unroll
      for (int nt = 0; nt < DP / 8; ++nt) {
        o[nt][0] *= alpha[0];
        o[nt][1] *= alpha[0];
        o[nt][2] *= alpha[1];
        o[nt][3] *= alpha[1];
      }
#pragma unroll
      for (int j = 0; j < kBlockN / 16; ++j) {
        uint32_t pa[4];
        acc_to_a(sc, j, pa);
#pragma unroll
        for (int dp = 0; dp < DP / 16; ++dp) {
          uint32_t b[4];
          load_b_kn(cV, ld, j * 16, dp * 16, b);
          mma_bf16(o[2 * dp], pa, b[0], b[1]);
          mma_bf16(o[2 * dp + 1], pa, b[2], b[3]);
        }
      }
    }
    __syncthreads();
  }

  float inv[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    row_l[r] += __shfl_xor_sync(0xffffffffu, row_l[r], 1);
    row_l[r] += __shfl_xor_sync(0xffffffffu, row_l[r], 2);
    inv[r] = row_l[r] > 0.0f ? 1.0f / row_l[r] : 0.0f;
    if (t == 0 && qrow[r] < s)
      lse[static_cast<int64_t>(bh) * s + qrow[r]] = (row_m[r] + log2f(row_l[r])) * kLn2;
  }
  // Each warp reads only its own 16 rows of sQ (into qf, at it == 0): they are free for staging.
  const Plane po = dm.out_plane(out, bi, hh);
  store_rows<DP>(o, inv[0], inv[1], sQ + warp * 16 * ld, const_cast<bf16*>(po.base), po.row_stride,
                 wq0, s, d);
}

// ------------------------------------------------------------------------------------------
// dQ = scale · dS·K with dS = P ∘ (dO·V^T - dsum). grid (b·heads, query blocks).
template <int DP>
__global__ void __launch_bounds__(kThreads)
    flash_bwd_dq_kernel(const bf16* __restrict__ qkv, const bf16* __restrict__ dout,
                        const float* __restrict__ lse, const float* __restrict__ dsum,
                        bf16* __restrict__ dqkv, Dims dm, float scale_log2, float scale) {
  constexpr int ld = DP + 8;
  extern __shared__ __align__(16) unsigned char smem[];
  bf16* sQ = reinterpret_cast<bf16*>(smem);  // kBlockM × ld
  bf16* sdO = sQ + kBlockM * ld;             // kBlockM × ld
  bf16* sK = sdO + kBlockM * ld;             // 2 × kBlockN × ld
  bf16* sV = sK + 2 * kBlockN * ld;          // 2 × kBlockN × ld

  const int bh = blockIdx.x;
  const int bi = bh / dm.heads, hh = bh % dm.heads;
  const int q0 = (gridDim.y - 1 - blockIdx.y) * kBlockM;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int s = dm.s, d = dm.d;
  const Plane pq = dm.qkv_plane(qkv, bi, hh, 0);
  const Plane pk = dm.qkv_plane(qkv, bi, hh, 1);
  const Plane pv = dm.qkv_plane(qkv, bi, hh, 2);
  const Plane pdo = dm.out_plane(dout, bi, hh);

  const int kv_end = min(s, q0 + kBlockM);
  const int n_kb = (kv_end + kBlockN - 1) / kBlockN;

  load_tile<kBlockM, DP>(sQ, pq, q0, s, d);
  load_tile<kBlockM, DP>(sdO, pdo, q0, s, d);
  load_tile<kBlockN, DP>(sK, pk, 0, s, d);
  load_tile<kBlockN, DP>(sV, pv, 0, s, d);
  cp_async_commit();

  const int wq0 = q0 + warp * 16;
  const int qrow[2] = {wq0 + g, wq0 + g + 8};
  float lse2[2], dsr[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const bool ok = qrow[r] < s;
    lse2[r] = ok ? lse[static_cast<int64_t>(bh) * s + qrow[r]] * kLog2e : 0.0f;
    dsr[r] = ok ? dsum[static_cast<int64_t>(bh) * s + qrow[r]] : 0.0f;
  }
  float dq[DP / 8][4];
#pragma unroll
  for (int nt = 0; nt < DP / 8; ++nt) dq[nt][0] = dq[nt][1] = dq[nt][2] = dq[nt][3] = 0.0f;
  uint32_t qf[DP / 16][4];

  for (int it = 0; it < n_kb; ++it) {
    if (it + 1 < n_kb) {
      const int st = (it + 1) & 1;
      load_tile<kBlockN, DP>(sK + st * kBlockN * ld, pk, (it + 1) * kBlockN, s, d);
      load_tile<kBlockN, DP>(sV + st * kBlockN * ld, pv, (it + 1) * kBlockN, s, d);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    if (it == 0) {
#pragma unroll
      for (int kk = 0; kk < DP / 16; ++kk) load_a(sQ, ld, warp * 16, kk * 16, qf[kk]);
    }
    const int k0 = it * kBlockN;
    if (k0 <= wq0 + 15) {
      const bf16* cK = sK + (it & 1) * kBlockN * ld;
      const bf16* cV = sV + (it & 1) * kBlockN * ld;
      float sc[kBlockN / 8][4], dp[kBlockN / 8][4];
#pragma unroll
      for (int nt = 0; nt < kBlockN / 8; ++nt) {
        sc[nt][0] = sc[nt][1] = sc[nt][2] = sc[nt][3] = 0.0f;
        dp[nt][0] = dp[nt][1] = dp[nt][2] = dp[nt][3] = 0.0f;
      }
#pragma unroll
      for (int kk = 0; kk < DP / 16; ++kk) {
        uint32_t af[4];
        load_a(sdO, ld, warp * 16, kk * 16, af);
#pragma unroll
        for (int np = 0; np < kBlockN / 16; ++np) {
          uint32_t b[4];
          load_b_nk(cK, ld, np * 16, kk * 16, b);
          mma_bf16(sc[2 * np], qf[kk], b[0], b[1]);
          mma_bf16(sc[2 * np + 1], qf[kk], b[2], b[3]);
          load_b_nk(cV, ld, np * 16, kk * 16, b);
          mma_bf16(dp[2 * np], af, b[0], b[1]);
          mma_bf16(dp[2 * np + 1], af, b[2], b[3]);
        }
      }
      const bool need_mask = k0 + kBlockN - 1 > wq0 || k0 + kBlockN > s;
#pragma unroll
      for (int nt = 0; nt < kBlockN / 8; ++nt) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int key = k0 + nt * 8 + 2 * t + (e & 1);
          float p = exp2f(sc[nt][e] * scale_log2 - lse2[e >> 1]);
          if (need_mask && (key > qrow[e >> 1] || key >= s)) p = 0.0f;
          sc[nt][e] = p * (dp[nt][e] - dsr[e >> 1]);  // dS
        }
      }
#pragma unroll
      for (int j = 0; j < kBlockN / 16; ++j) {
        uint32_t da[4];
        acc_to_a(sc, j, da);
#pragma unroll
        for (int dd = 0; dd < DP / 16; ++dd) {
          uint32_t b[4];
          load_b_kn(cK, ld, j * 16, dd * 16, b);
          mma_bf16(dq[2 * dd], da, b[0], b[1]);
          mma_bf16(dq[2 * dd + 1], da, b[2], b[3]);
        }
      }
    }
    __syncthreads();
  }

  const Plane pdq = dm.qkv_plane(dqkv, bi, hh, 0);
  store_rows<DP>(dq, scale, scale, sQ + warp * 16 * ld, const_cast<bf16*>(pdq.base), pdq.row_stride,
                 wq0, s, d);
}

// ------------------------------------------------------------------------------------------
// dV = P^T·dO, dK = scale · dS^T·Q. grid (b·heads, key blocks); key block 0 (most work) first.
template <int DP>
__global__ void __launch_bounds__(kThreads)
    flash_bwd_dkdv_kernel(const bf16* __restrict__ qkv, const bf16* __restrict__ dout,
                          const float* __restrict__ lse, const float* __restrict__ dsum,
                          bf16* __restrict__ dqkv, Dims dm, float scale_log2, float scale) {
  constexpr int ld = DP + 8;
  extern __shared__ __align__(16) unsigned char smem[];
  bf16* sK = reinterpret_cast<bf16*>(smem);                          // kBwdKeys × ld
  bf16* sV = sK + kBwdKeys * ld;                                     // kBwdKeys × ld
  bf16* sQ = sV + kBwdKeys * ld;                                     // 2 × kBwdQueries × ld
  bf16* sdO = sQ + 2 * kBwdQueries * ld;                             // 2 × kBwdQueries × ld
  float* sL = reinterpret_cast<float*>(sdO + 2 * kBwdQueries * ld);  // 2 × kBwdQueries: lse·log2e
  float* sD = sL + 2 * kBwdQueries;                                  // 2 × kBwdQueries: dsum

  const int bh = blockIdx.x;
  const int bi = bh / dm.heads, hh = bh % dm.heads;
  const int k0 = blockIdx.y * kBwdKeys;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int s = dm.s, d = dm.d;
  const Plane pq = dm.qkv_plane(qkv, bi, hh, 0);
  const Plane pk = dm.qkv_plane(qkv, bi, hh, 1);
  const Plane pv = dm.qkv_plane(qkv, bi, hh, 2);
  const Plane pdo = dm.out_plane(dout, bi, hh);
  const float* lse_row = lse + static_cast<int64_t>(bh) * s;
  const float* dsum_row = dsum + static_cast<int64_t>(bh) * s;

  const int qb_first = k0 / kBwdQueries;
  const int n_it = (s + kBwdQueries - 1) / kBwdQueries - qb_first;

  auto load_q_step = [&](int it, int st) {
    const int qs = (qb_first + it) * kBwdQueries;
    load_tile<kBwdQueries, DP>(sQ + st * kBwdQueries * ld, pq, qs, s, d);
    load_tile<kBwdQueries, DP>(sdO + st * kBwdQueries * ld, pdo, qs, s, d);
    if (threadIdx.x < kBwdQueries) {
      const int q = qs + threadIdx.x;
      sL[st * kBwdQueries + threadIdx.x] = q < s ? lse_row[q] * kLog2e : 0.0f;
      sD[st * kBwdQueries + threadIdx.x] = q < s ? dsum_row[q] : 0.0f;
    }
  };

  load_tile<kBwdKeys, DP>(sK, pk, k0, s, d);
  load_tile<kBwdKeys, DP>(sV, pv, k0, s, d);
  load_q_step(0, 0);
  cp_async_commit();

  const int wk0 = k0 + warp * 16;
  const int krow[2] = {wk0 + g, wk0 + g + 8};  // the keys (rows of S^T) this thread holds
  float dk[DP / 8][4], dv[DP / 8][4];
#pragma unroll
  for (int nt = 0; nt < DP / 8; ++nt) {
    dk[nt][0] = dk[nt][1] = dk[nt][2] = dk[nt][3] = 0.0f;
    dv[nt][0] = dv[nt][1] = dv[nt][2] = dv[nt][3] = 0.0f;
  }

  for (int it = 0; it < n_it; ++it) {
    if (it + 1 < n_it) {
      load_q_step(it + 1, (it + 1) & 1);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    const int qs = (qb_first + it) * kBwdQueries;
    if (wk0 <= qs + kBwdQueries - 1) {  // else every query of the step precedes every key here
      const int st = it & 1;
      const bf16* cQ = sQ + st * kBwdQueries * ld;
      const bf16* cdO = sdO + st * kBwdQueries * ld;
      const float* cL = sL + st * kBwdQueries;
      const float* cD = sD + st * kBwdQueries;
      // S^T = K·Q^T (16 keys × 64 queries).
      float sc[kBwdQueries / 8][4];
#pragma unroll
      for (int nt = 0; nt < kBwdQueries / 8; ++nt)
        sc[nt][0] = sc[nt][1] = sc[nt][2] = sc[nt][3] = 0;
#pragma unroll
      for (int kk = 0; kk < DP / 16; ++kk) {
        uint32_t a[4];
        load_a(sK, ld, warp * 16, kk * 16, a);
#pragma unroll
        for (int np = 0; np < kBwdQueries / 16; ++np) {
          uint32_t b[4];
          load_b_nk(cQ, ld, np * 16, kk * 16, b);
          mma_bf16(sc[2 * np], a, b[0], b[1]);
          mma_bf16(sc[2 * np + 1], a, b[2], b[3]);
        }
      }
      // P^T, rounded to bf16 and packed as A fragments (k = queries).
      const bool need_mask = wk0 + 15 > qs || qs + kBwdQueries > s || wk0 + 16 > s;
#pragma unroll
      for (int nt = 0; nt < kBwdQueries / 8; ++nt) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int ql = nt * 8 + 2 * t + (e & 1);
          const int key = krow[e >> 1];
          float p = exp2f(sc[nt][e] * scale_log2 - cL[ql]);
          if (need_mask && (key > qs + ql || qs + ql >= s || key >= s)) p = 0.0f;
          sc[nt][e] = p;
        }
      }
      uint32_t pa[kBwdQueries / 16][4];
#pragma unroll
      for (int j = 0; j < kBwdQueries / 16; ++j) acc_to_a(sc, j, pa[j]);
        // dV += P^T·dO.
#pragma unroll
      for (int j = 0; j < kBwdQueries / 16; ++j) {
#pragma unroll
        for (int dd = 0; dd < DP / 16; ++dd) {
          uint32_t b[4];
          load_b_kn(cdO, ld, j * 16, dd * 16, b);
          mma_bf16(dv[2 * dd], pa[j], b[0], b[1]);
          mma_bf16(dv[2 * dd + 1], pa[j], b[2], b[3]);
        }
      }
      // dP^T = V·dO^T.
      float dpt[kBwdQueries / 8][4];
#pragma unroll
      for (int nt = 0; nt < kBwdQueries / 8; ++nt)
        dpt[nt][0] = dpt[nt][1] = dpt[nt][2] = dpt[nt][3] = 0.0f;
#pragma unroll
      for (int kk = 0; kk < DP / 16; ++kk) {
        uint32_t a[4];
        load_a(sV, ld, warp * 16, kk * 16, a);
#pragma unroll
        for (int np = 0; np < kBwdQueries / 16; ++np) {
          uint32_t b[4];
          load_b_nk(cdO, ld, np * 16, kk * 16, b);
          mma_bf16(dpt[2 * np], a, b[0], b[1]);
          mma_bf16(dpt[2 * np + 1], a, b[2], b[3]);
        }
      }
      // dS^T = P^T ∘ (dP^T - dsum[query]), from the bf16 P^T; dK += dS^T·Q.
#pragma unroll
      for (int j = 0; j < kBwdQueries / 16; ++j) {
        const int c0 = j * 16 + 2 * t;  // query column of regs 0/1; regs 2/3 are at c0 + 8
        const float d00 = cD[c0], d01 = cD[c0 + 1], d10 = cD[c0 + 8], d11 = cD[c0 + 9];
        uint32_t da[4];
        da[0] = pack_bf16(bf16_lo(pa[j][0]) * (dpt[2 * j][0] - d00),
                          bf16_hi(pa[j][0]) * (dpt[2 * j][1] - d01));
        da[1] = pack_bf16(bf16_lo(pa[j][1]) * (dpt[2 * j][2] - d00),
                          bf16_hi(pa[j][1]) * (dpt[2 * j][3] - d01));
        da[2] = pack_bf16(bf16_lo(pa[j][2]) * (dpt[2 * j + 1][0] - d10),
                          bf16_hi(pa[j][2]) * (dpt[2 * j + 1][1] - d11));
        da[3] = pack_bf16(bf16_lo(pa[j][3]) * (dpt[2 * j + 1][2] - d10),
                          bf16_hi(pa[j][3]) * (dpt[2 * j + 1][3] - d11));
#pragma unroll
        for (int dd = 0; dd < DP / 16; ++dd) {
          uint32_t b[4];
          load_b_kn(cQ, ld, j * 16, dd * 16, b);
          mma_bf16(dk[2 * dd], da, b[0], b[1]);
          mma_bf16(dk[2 * dd + 1], da, b[2], b[3]);
        }
      }
    }
    __syncthreads();
  }

  // Each warp reads only its own 16 rows of sK and sV: they are free for staging its results.
  const Plane pdk = dm.qkv_plane(dqkv, bi, hh, 1);
  const Plane pdv = dm.qkv_plane(dqkv, bi, hh, 2);
  store_rows<DP>(dk, scale, scale, sK + warp * 16 * ld, const_cast<bf16*>(pdk.base), pdk.row_stride,
                 wk0, s, d);
  store_rows<DP>(dv, 1.0f, 1.0f, sV + warp * 16 * ld, const_cast<bf16*>(pdv.base), pdv.row_stride,
                 wk0, s, d);
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

// Raises a kernel's dynamic shared-memory limit (a per-device setting: done at every launch, as
// one process may drive several devices; it costs a host call).
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

bool attention_fast_supported(const AttentionShape& sh, DType t) {
  return t == DType::kBF16 && sh.d >= 8 && sh.d <= 128 && sh.d % 8 == 0 && sh.s >= 1 &&
         sh.s < (1 << 30) && sh.b * sh.heads < (int64_t{1} << 31);
}

void launch_attention_forward(const AttentionShape& sh, const void* qkv, void* out, float* lse,
                              float scale, DType t, bool naive, cudaStream_t stream) {
  if (sh.s <= 0 || sh.b <= 0 || sh.heads <= 0) return;
  if (naive || !attention_fast_supported(sh, t) || !aligned16(qkv) || !aligned16(out)) {
    launch_attention_forward_naive(sh, qkv, out, lse, scale, t, stream);
    return;
  }
  const Dims dm = dims_of(sh);
  dim3 grid(static_cast<unsigned>(sh.b * sh.heads),
            static_cast<unsigned>((sh.s + kBlockM - 1) / kBlockM));
  dispatch_dp(dm.d, [&](auto dpc) {
    constexpr int DP = decltype(dpc)::value;
    constexpr int smem = fwd_smem_bytes<DP>();
    allow_smem(flash_fwd_kernel<DP>, smem);
    flash_fwd_kernel<DP><<<grid, kThreads, smem, stream>>>(
        static_cast<const bf16*>(qkv), static_cast<bf16*>(out), lse, dm, scale * kLog2e);
  });
  MPLAN_CUDA_LAUNCH_CHECK();
}

size_t attention_backward_scratch_bytes(const AttentionShape& sh) {
  return static_cast<size_t>(sh.b * sh.heads * sh.s) * sizeof(float);
}

void launch_attention_backward(const AttentionShape& sh, const void* qkv, const void* out,
                               const void* dout, const float* lse, float scale, void* dqkv, DType t,
                               bool naive, void* scratch, cudaStream_t stream) {
  if (sh.s <= 0 || sh.b <= 0 || sh.heads <= 0) return;
  float* dsum = static_cast<float*>(scratch);
  launch_attention_dsum(sh, out, dout, dsum, t, stream);
  if (naive || !attention_fast_supported(sh, t) || !aligned16(qkv) || !aligned16(dout) ||
      !aligned16(dqkv)) {
    launch_attention_backward_naive(sh, qkv, dout, lse, dsum, scale, dqkv, t, stream);
    return;
  }
  const Dims dm = dims_of(sh);
  const unsigned bh = static_cast<unsigned>(sh.b * sh.heads);
  dispatch_dp(dm.d, [&](auto dpc) {
    constexpr int DP = decltype(dpc)::value;
    constexpr int smem_kv = dkdv_smem_bytes<DP>();
    allow_smem(flash_bwd_dkdv_kernel<DP>, smem_kv);
    flash_bwd_dkdv_kernel<DP>
        <<<dim3(bh, static_cast<unsigned>((sh.s + kBwdKeys - 1) / kBwdKeys)), kThreads, smem_kv,
           stream>>>(static_cast<const bf16*>(qkv), static_cast<const bf16*>(dout), lse, dsum,
                     static_cast<bf16*>(dqkv), dm, scale * kLog2e, scale);
    MPLAN_CUDA_LAUNCH_CHECK();
    constexpr int smem_q = dq_smem_bytes<DP>();
    allow_smem(flash_bwd_dq_kernel<DP>, smem_q);
    flash_bwd_dq_kernel<DP>
        <<<dim3(bh, static_cast<unsigned>((sh.s + kBlockM - 1) / kBlockM)), kThreads, smem_q,
           stream>>>(static_cast<const bf16*>(qkv), static_cast<const bf16*>(dout), lse, dsum,
                     static_cast<bf16*>(dqkv), dm, scale * kLog2e, scale);
    MPLAN_CUDA_LAUNCH_CHECK();
  });
}

}  // namespace mplan::exec::cuda
