// Where the attention kernels (attention.cu: mma.sync; attention_hopper.cu: wgmma) find one
// (batch, head) of their operands in the [s, b, (heads + 2·groups)·d] qkv and [s, b, heads·d]
// out tensors, and the constants of their base-2 softmax.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

namespace mplan::exec::cuda::attention_layout {

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

// One (batch, head) plane: element (row, c) is at base + row · row_stride + c.
struct Plane {
  const __nv_bfloat16* base;
  int64_t row_stride;
};

// qkv holds, per token, the heads' Q, then the groups' K, then the groups' V (each d wide);
// query head hh reads K/V group hh / (heads / groups). groups == heads is multi-head attention,
// whose layout is (s, b, 3, heads, d).
struct Dims {
  int s, b, heads, groups, d;
  __host__ __device__ int heads_per_group() const { return heads / groups; }
  // Planes (d-wide rows) per token in qkv.
  __host__ __device__ int qkv_planes() const { return heads + 2 * groups; }
  // The plane index of (batch bi, query head hh, slot 0/1/2 = Q/K/V) among a token's
  // b · qkv_planes() planes (the tensor maps' plane coordinate).
  __host__ __device__ int qkv_plane_index(int bi, int hh, int slot) const {
    const int within = slot == 0 ? hh : heads + (slot - 1) * groups + hh / heads_per_group();
    return bi * qkv_planes() + within;
  }
  // qkv plane of (batch bi, query head hh, slot 0/1/2 = Q/K/V).
  __device__ Plane qkv_plane(const __nv_bfloat16* qkv, int bi, int hh, int slot) const {
    return {qkv + static_cast<int64_t>(qkv_plane_index(bi, hh, slot)) * d,
            static_cast<int64_t>(b) * qkv_planes() * d};
  }
  // out/dout plane of (bi, hh).
  __device__ Plane out_plane(const __nv_bfloat16* o, int bi, int hh) const {
    const int64_t hd = static_cast<int64_t>(heads) * d;
    return {o + static_cast<int64_t>(bi) * hd + static_cast<int64_t>(hh) * d,
            static_cast<int64_t>(b) * hd};
  }
};

// The tensor-core backward's work decomposition (attention.cu's bwd_plan): the heads of each K/V
// group are dealt in `chunks` chunks and each (batch, group, chunk) to `splits` blocks, so grid
// (b·groups·chunks, splits). dq_part: per split, f32 dQ partial sums (b·heads·s·dp each);
// dkv_part (chunks > 1): per chunk, the f32 dK (times the scale) and dV partial sums of its heads
// (2 · b·groups·s·dp each), which a finalize adds in chunk order. With one chunk the blocks write
// dK and dV themselves.
struct BwdWork {
  int splits, chunks, dp;
  float* dq_part;
  float* dkv_part;
  // Optional, the Hopper kernels with one chunk: dqkv's column sums (the QKV layer's bias
  // gradient) as rows of parts, which launch_column_partials_finalize adds in order: colsum_q, a
  // row of heads·d floats per (batch, query step, finalizer warp); colsum_kv, a row of
  // 2·groups·d (dK's columns, then dV's) per (batch, key block, consumer warp). nullptr: none.
  float* colsum_q = nullptr;
  float* colsum_kv = nullptr;

  struct Block {
    int bi, bg, chunk, h0, heads;  // batch, batch·groups + group, chunk, first head, head count
  };
  __device__ Block block(const Dims& dm, int x) const {
    Block r;
    r.bg = x / chunks;
    r.chunk = x % chunks;
    r.bi = r.bg / dm.groups;
    r.heads = dm.heads_per_group() / chunks;
    r.h0 = (r.bg % dm.groups) * dm.heads_per_group() + r.chunk * r.heads;
    return r;
  }
  // This split's dQ partial sums of (batch bi, head hh): s rows of dp.
  __device__ float* dq_rows(const Dims& dm, int split, int bi, int hh) const {
    return dq_part + ((static_cast<int64_t>(split) * dm.b + bi) * dm.heads + hh) * dm.s *
                         static_cast<int64_t>(dp);
  }
  // A chunk's dK (kv 0) or dV (kv 1) partial sums of (batch·groups + group) bg: s rows of dp.
  __device__ float* dkv_rows(const Dims& dm, int chunk, int kv, int bg) const {
    return dkv_part + ((static_cast<int64_t>(chunk) * 2 + kv) * dm.b * dm.groups + bg) * dm.s *
                          static_cast<int64_t>(dp);
  }
};

// The orders in which the Hopper kernels (attention_hopper.cu) walk their tiles. Both go in
// sections of `sec` consecutive units (the launchers size them so that a section's operands stay
// in L2; the last section may be smaller). Host and device code, so that the tests can check
// that each order is a bijection and that the backward's dependencies point backwards.
//
// Backward: tile t is (head set hs, key block kb); within a section, key block 0 (the most query
// steps) of each of its head sets, then key block 1 of each, and so on: heaviest first. A head
// set's key blocks come in ascending order, so a tile's dQ predecessors (its head set's lower key
// blocks) come before it.
struct BwdTileOrder {
  int n_hs, n_kb, sec;
  __host__ __device__ int count() const { return n_hs * n_kb; }
  __host__ __device__ void at(int t, int& hs, int& kb) const {
    const int per_sec = sec * n_kb;
    const int si = t / per_sec, within = t - si * per_sec;
    const int left = n_hs - si * sec;
    const int here = sec < left ? sec : left;
    kb = within / here;
    hs = si * sec + within % here;
  }
};

// Forward: tile t is ((batch, head) bh, query block qb); within a section, by query block, each
// over the section's (batch, head)s. The last section goes from the last query block (the
// heaviest) down and each earlier one in the other direction from the next, so that consecutive
// rounds of the forward's snake dealing get tiles of similar weight across section boundaries
// too, and its last, partial round the lightest.
struct FwdTileOrder {
  int n_bh, n_qb, sec;
  __host__ __device__ void at(int t, int& bh, int& qb) const {
    const int per_sec = sec * n_qb;
    const int si = t / per_sec, within = t - si * per_sec;
    const int left = n_bh - si * sec;
    const int here = sec < left ? sec : left;
    const int n_sec = (n_bh + sec - 1) / sec;
    const int level = within / here;
    bh = si * sec + within % here;
    qb = ((n_sec - 1 - si) & 1) == 0 ? n_qb - 1 - level : level;
  }
};

}  // namespace mplan::exec::cuda::attention_layout
