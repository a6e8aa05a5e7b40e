// LayerNorm over the last dim h of a (rows, h) tensor. The forward runs one warp per row; rows
// with h % 8 == 0 and h <= 2048 keep the row in registers (16-byte loads, two-pass
// mean/variance from registers), others take a plain three-pass loop. The weight gradients
// (dgamma = sum dy·xhat, dbeta = sum dy) are column sums: per-block partials over a row
// partition fixed by the shape, then an ordered pass adding into the f32 outputs. For 16-byte
// aligned rows with h % 8 == 0 the backward is one pass over dy and x (W warps per row, the row
// in registers): each block computes dx for its rows and its dgamma/dbeta partials together
// (each lane sums its own columns; the partial sums are added in a fixed order), so results do
// not depend on timing. For bf16 rows of h in (1024, 2048] (the training shape h = 2048) or
// (256, 512] that pass is software-pipelined (the next row's loads in flight while a row is
// reduced and stored) on persistent blocks; that moves loads only, so the results are the same
// bits. Other rows take one warp per row for dx and a separate partials pass. RMSNorm's backward
// runs on the same one-pass kernel (no mean, no dbeta) for the rows it takes (llama_ops.cu has
// the others).
#include <algorithm>

#include "exec/cuda/device_attribute.hpp"
#include "exec/cuda/device_utils.cuh"
#include "exec/cuda/kernels.hpp"

namespace mplan::exec::cuda {
namespace {

constexpr int kWarps = 8;  // rows per block in the warp-per-row kernels

// kVpl vectors of 8 per lane held in registers (h <= kVpl·256); kVpl == 0: generic loops.
template <class T, int kVpl>
__global__ void __launch_bounds__(kWarps * 32)
    ln_forward_kernel(const T* __restrict__ x, const T* __restrict__ gamma,
                      const T* __restrict__ beta, float eps, T* __restrict__ y,
                      float* __restrict__ mean_out, float* __restrict__ rstd_out, int64_t rows,
                      int h) {
  const int lane = threadIdx.x & 31;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarps + (threadIdx.x >> 5);
  if (row >= rows) return;
  const T* xr = x + row * h;
  T* yr = y + row * h;
  const float inv_h = 1.0f / static_cast<float>(h);
  float mean = 0.0f, var = 0.0f;
  if constexpr (kVpl > 0) {
    WarpRow<T, kVpl> xw;  // the row as loaded: more rows in flight per SM than as floats
    xw.load(xr, h, lane);
    float s = 0.0f;
    xw.each(h, lane, [&](int64_t, const float(&v)[8]) {
#pragma unroll
      for (int j = 0; j < 8; ++j) s += v[j];
    });
    mean = warp_sum(s) * inv_h;
    float q = 0.0f;
    xw.each(h, lane, [&](int64_t, const float(&v)[8]) {
#pragma unroll
      for (int j = 0; j < 8; ++j) q += (v[j] - mean) * (v[j] - mean);
    });
    var = warp_sum(q) * inv_h;
    const float rstd = rsqrtf(var + eps);
    xw.each(h, lane, [&](int64_t c, const float(&v)[8]) {
      float g[8], b[8], o[8];
      load8(gamma + c, g);
      load8(beta + c, b);
#pragma unroll
      for (int j = 0; j < 8; ++j) o[j] = (v[j] - mean) * rstd * g[j] + b[j];
      store8(yr + c, o);
    });
    if (lane == 0) {
      mean_out[row] = mean;
      rstd_out[row] = rstd;
    }
  } else {
    float s = 0.0f;
    for (int c = lane; c < h; c += 32) s += to_f32(xr[c]);
    mean = warp_sum(s) * inv_h;
    float q = 0.0f;
    for (int c = lane; c < h; c += 32) {
      const float d = to_f32(xr[c]) - mean;
      q += d * d;
    }
    var = warp_sum(q) * inv_h;
    const float rstd = rsqrtf(var + eps);
    for (int c = lane; c < h; c += 32)
      yr[c] = from_f32<T>((to_f32(xr[c]) - mean) * rstd * to_f32(gamma[c]) + to_f32(beta[c]));
    if (lane == 0) {
      mean_out[row] = mean;
      rstd_out[row] = rstd;
    }
  }
}

// dx = rstd · (g - mean(g) - xhat · mean(g · xhat)), g = dy · gamma, xhat = (x - mean) · rstd.
// One warp per row, plain loops: the rows the one-pass kernel below does not take (unaligned,
// h % 8 != 0, or too wide to keep in registers).
template <class T>
__global__ void __launch_bounds__(kWarps * 32)
    ln_backward_dx_kernel(const T* __restrict__ dy, const T* __restrict__ x,
                          const T* __restrict__ gamma, const float* __restrict__ mean_in,
                          const float* __restrict__ rstd_in, T* __restrict__ dx, int64_t rows,
                          int h) {
  const int lane = threadIdx.x & 31;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarps + (threadIdx.x >> 5);
  if (row >= rows) return;
  const T* xr = x + row * h;
  const T* dyr = dy + row * h;
  T* dxr = dx + row * h;
  const float mean = mean_in[row], rstd = rstd_in[row];
  const float inv_h = 1.0f / static_cast<float>(h);
  float s1 = 0.0f, s2 = 0.0f;
  for (int c = lane; c < h; c += 32) {
    const float g = to_f32(dyr[c]) * to_f32(gamma[c]);
    s1 += g;
    s2 += g * (to_f32(xr[c]) - mean) * rstd;
  }
  const float c1 = warp_sum(s1) * inv_h;
  const float c2 = warp_sum(s2) * inv_h;
  for (int c = lane; c < h; c += 32) {
    const float xhat = (to_f32(xr[c]) - mean) * rstd;
    dxr[c] = from_f32<T>(rstd * (to_f32(dyr[c]) * to_f32(gamma[c]) - c1 - xhat * c2));
  }
}

// The fused backward below software-pipelines its row loop where a lane holds 2 vectors of 8
// bf16 of a row (kVpl == 2: h in (256, 512] with W = 1, (1024, 2048] with W = 4): there two rows'
// loads fit in the registers of 2 blocks per SM (<= 128 a thread). Elsewhere it did not pay on
// an H200: at kVpl == 1 (bf16 or f32) the plain loop already runs 4 blocks per SM, and wider
// rows would drop to 1 block per SM.
template <class T, int kVpl>
constexpr bool ln_fused_pipelined() {
  return sizeof(T) == 2 && kVpl == 2;
}
constexpr int kLnPipelinedBlocksPerSm = 2;

// dx, and the dgamma/dbeta partials of row parts (the register path: kVpl > 0, 16-byte aligned).
// Part p is rows [p·rows_per_part, ...) ∩ [0, rows). The block's kWarps warps form kWarps / W
// groups of W warps; a group takes one row of a part at a time (group q every (kWarps / W)-th
// row from the part's q-th). Lane l of warp w of a group owns the columns
// (32·w + l + 32·W·i)·8 + [0, 8), i < kVpl, of every row, and sums dy·xhat and dy of those
// columns over its group's rows of the part in registers. The two row sums that dx needs are
// added across a group's warps through shared memory in warp order. At the end of a part the
// groups add their column sums into shared memory in group order and the block writes partials
// pg[p], pb[p] (h floats each): every part is summed the same way whichever block takes it.
// Several warps per row keep the registers per thread low enough for several blocks per SM.
// With resid (which may be dx itself), dx = resid + dL/dx with dL/dx rounded to T first, as a
// separate add would do it.
//
// The kernel streams 3 (4 with resid) tensors through a few flops per element, so its speed is
// the bytes it keeps in flight. The plain loop (block p takes part p; a grid of `parts` blocks)
// loads a row's x and dy, reduces them, waits at the barrier, then loads resid and stores dx:
// about two memory latencies per row with little in flight. Where ln_fused_pipelined (the
// training shape h = 2048 bf16) the loop is software-pipelined instead: the group's next row's
// x, dy, resid, mean and rstd are loaded into a second set of registers before the current row
// is reduced, waits at the barrier and is stored (gamma stays in registers), so every lane has a
// row of loads in flight all the time. And the blocks are persistent: the launcher starts only
// as many as run at once (kLnPipelinedBlocksPerSm per SM, fewer so that each takes the same
// number of parts), block b takes parts b, b + gridDim.x, ... and its pipeline runs on from one
// part into the next, so a part's first loads are not exposed. The arithmetic and its order are
// those of the plain loop, and a part's sums do not depend on which block takes it, so dx and
// the partials are the same bits on either loop and on any grid.
// (A minimum of 0 blocks per SM is none: the plain loop's register allocation is left as is.)
//
// kRms: RMSNorm's backward on the same loops (mean_in and pb unused): xhat = x·rstd, no c1 term,
// no dbeta; dx = rstd·(g - xhat·c2), the same value as rstd·g - rstd³·x·mean(g·x).
// kResSum (with resid): also the column sums of resid as loaded, before the add, into partials
// pr (the bias gradient of the row-parallel layer whose output gradient resid is). Those sums
// are kept in shared memory, one row of h per group (registers are full at 2 blocks per SM), and
// added in group order at the end of a part.
template <class T, int kVpl, int W, bool kRms, bool kResSum = false>
__global__ void __launch_bounds__(kWarps * 32,
                                  ln_fused_pipelined<T, kVpl>() ? kLnPipelinedBlocksPerSm : 0)
    ln_backward_fused_kernel(const T* __restrict__ dy, const T* __restrict__ x,
                             const T* __restrict__ gamma, const float* __restrict__ mean_in,
                             const float* __restrict__ rstd_in, T* dx, const T* resid, int64_t rows,
                             int h, int64_t rows_per_part, int64_t parts, float* __restrict__ pg,
                             float* __restrict__ pb, float* __restrict__ pr) {
  constexpr int G = kWarps / W;  // row groups per block
  static_assert(kWarps % W == 0, "W must divide kWarps");
  extern __shared__ __align__(16) unsigned char smem[];
  float* sum_g = reinterpret_cast<float*>(smem);  // h
  float* sum_b = sum_g + h;                       // h (LayerNorm only)
  float* res_acc = sum_g + (kRms ? 1 : 2) * h;    // G × h (kResSum only): resid's column sums
  __shared__ float red[2][G][W][2];               // per-row sums, double-buffered by parity
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int grp = warp / W, wi = warp % W;
  const int glane = wi * 32 + lane;
  const float inv_h = 1.0f / static_cast<float>(h);
  float ag[kVpl][8], ab[kVpl][8];
  // (res_acc: each thread clears what it reads at the end of a part; a barrier follows.)
  const auto clear_sums = [&] {
#pragma unroll
    for (int i = 0; i < kVpl; ++i)
#pragma unroll
      for (int j = 0; j < 8; ++j) ag[i][j] = ab[i][j] = 0.0f;
  };
  clear_sums();
  if constexpr (kResSum) {
    for (int c = threadIdx.x; c < G * h; c += kWarps * 32) res_acc[c] = 0.0f;
    __syncthreads();
  }
  // Adds the groups' column sums in group order and writes them as part p's partials.
  const auto write_partials = [&](int64_t p) {
    for (int q = 0; q < G; ++q) {
      if (grp == q) {
#pragma unroll
        for (int i = 0; i < kVpl; ++i) {
          const int c = (glane + 32 * W * i) * 8;
          if (c >= h) continue;
#pragma unroll
          for (int j = 0; j < 8; ++j) {
            sum_g[c + j] = (q == 0 ? 0.0f : sum_g[c + j]) + ag[i][j];
            if constexpr (!kRms) sum_b[c + j] = (q == 0 ? 0.0f : sum_b[c + j]) + ab[i][j];
          }
        }
      }
      __syncthreads();
    }
    for (int c = threadIdx.x; c < h; c += kWarps * 32) {
      pg[p * h + c] = sum_g[c];
      if constexpr (!kRms) pb[p * h + c] = sum_b[c];
      if constexpr (kResSum) {
        float r = res_acc[c];
        res_acc[c] = 0.0f;
        for (int q = 1; q < G; ++q) {
          r += res_acc[q * h + c];
          res_acc[q * h + c] = 0.0f;
        }
        pr[p * h + c] = r;
      }
    }
  };
  // The arithmetic of a row, the same on both loops below. Over the 8 columns of the lane's
  // vector i: s1 += g, s2 += g·xhat (g = dy·gamma), ag += dy·xhat, ab += dy (kRms: s2, ag).
  const auto accumulate = [&](int i, const float(&xv)[8], const float(&dv)[8], const float(&gv)[8],
                              float mean, float rstd, float& s1, float& s2) {
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const float xhat = kRms ? xv[j] * rstd : (xv[j] - mean) * rstd;
      const float g = dv[j] * gv[j];
      s2 += g * xhat;
      ag[i][j] += dv[j] * xhat;
      if constexpr (!kRms) {
        s1 += g;
        ab[i][j] += dv[j];
      }
    }
  };
  // The lanes' s1, s2 added across the warp, then across the group's warps in warp order (one
  // block-wide barrier), as the row means c1 = mean(g), c2 = mean(g·xhat) (kRms: c1 = 0).
  const auto row_means = [&](float s1, float s2, int par, float& c1, float& c2) {
    if constexpr (!kRms) s1 = warp_sum(s1);
    s2 = warp_sum(s2);
    c1 = s1, c2 = s2;
    if constexpr (W > 1) {
      if (lane == 0) red[par][grp][wi][0] = s1, red[par][grp][wi][1] = s2;
      __syncthreads();  // with the parity buffer, also orders the reads of two rows back
      c1 = c2 = 0.0f;
#pragma unroll
      for (int w = 0; w < W; ++w) {
        if constexpr (!kRms) c1 += red[par][grp][w][0];
        c2 += red[par][grp][w][1];
      }
    }
    c1 = kRms ? 0.0f : c1 * inv_h;
    c2 *= inv_h;
  };
  // dL/dx of 8 columns: rstd·(g - c1 - xhat·c2) (kRms: rstd·(g - xhat·c2)).
  const auto dx8 = [&](const float(&xv)[8], const float(&dv)[8], const float(&gv)[8], float mean,
                       float rstd, float c1, float c2, float(&o)[8]) {
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      if constexpr (kRms) {
        o[j] = rstd * (dv[j] * gv[j] - xv[j] * rstd * c2);
      } else {
        const float xhat = (xv[j] - mean) * rstd;
        o[j] = rstd * (dv[j] * gv[j] - c1 - xhat * c2);
      }
    }
  };
  // With resid: dx = resid + dL/dx rounded to T (kResSum: resid's 8 columns at c added into
  // this group's row of res_acc; the group's lanes own distinct columns).
  const auto add_resid = [&](int c, const float(&rv)[8], float(&o)[8]) {
    if constexpr (kResSum) {
      float4* a = reinterpret_cast<float4*>(res_acc + grp * h + c);
      float4 lo = a[0], hi = a[1];
      lo.x += rv[0], lo.y += rv[1], lo.z += rv[2], lo.w += rv[3];
      hi.x += rv[4], hi.y += rv[5], hi.z += rv[6], hi.w += rv[7];
      a[0] = lo, a[1] = hi;
    }
#pragma unroll
    for (int j = 0; j < 8; ++j) o[j] = rv[j] + to_f32(from_f32<T>(o[j]));
  };
  // One row on both loops: its sums, the row means (a block-wide barrier where W > 1, reached by
  // every group: `valid` only masks the arithmetic), dx stored. xr, dr: the row's x and dy as
  // loaded; gam(i, c, gv) and res(i, c, rv) give gamma's and resid's 8 columns at c.
  const auto row_step = [&](int64_t row, bool valid, float mean, float rstd, int par,
                            const Raw8<T>(&xr)[kVpl], const Raw8<T>(&dr)[kVpl], auto&& gam,
                            auto&& res) {
    float s1 = 0.0f, s2 = 0.0f;
#pragma unroll
    for (int i = 0; i < kVpl; ++i) {
      const int c = (glane + 32 * W * i) * 8;
      if (valid && c < h) {
        float xv[8], dv[8], gv[8];
        unpack8(xr[i], xv);
        unpack8(dr[i], dv);
        gam(i, c, gv);
        accumulate(i, xv, dv, gv, mean, rstd, s1, s2);
      }
    }
    float c1, c2;
    row_means(s1, s2, par, c1, c2);
#pragma unroll
    for (int i = 0; i < kVpl; ++i) {
      const int c = (glane + 32 * W * i) * 8;
      if (valid && c < h) {
        float xv[8], dv[8], gv[8], o[8];
        unpack8(xr[i], xv);
        unpack8(dr[i], dv);
        gam(i, c, gv);
        dx8(xv, dv, gv, mean, rstd, c1, c2, o);
        if (resid != nullptr) {
          float rv[8];
          res(i, c, rv);
          add_resid(c, rv, o);
        }
        store8(dx + row * h + c, o);
      }
    }
  };

  if constexpr (ln_fused_pipelined<T, kVpl>()) {
    // One row's inputs as this lane holds them: raw 16-byte words, unpacked where used.
    struct RowIn {
      Raw8<T> x[kVpl], dy[kVpl], res[kVpl];
      float mean, rstd;
    };
    // Issues the loads of `row` (none past `end`, nor of columns past h).
    const auto load_row = [&](RowIn& in, int64_t row, int64_t end) {
      const bool valid = row < end;
      in.mean = valid && !kRms ? mean_in[row] : 0.0f;
      in.rstd = valid ? rstd_in[row] : 0.0f;
#pragma unroll
      for (int i = 0; i < kVpl; ++i) {
        const int c = (glane + 32 * W * i) * 8;
        if (valid && c < h) {
          in.x[i] = ld_raw8(x + row * h + c);
          in.dy[i] = ld_raw8(dy + row * h + c);
          if (resid != nullptr) in.res[i] = ld_raw8(resid + row * h + c);
        }
      }
    };
    Raw8<T> gam[kVpl];
#pragma unroll
    for (int i = 0; i < kVpl; ++i) {
      const int c = (glane + 32 * W * i) * 8;
      if (c < h) gam[i] = ld_raw8(gamma + c);
    }
    // The block's current part p (rows below r_end) and step base (its group's row: base + grp),
    // the same for every thread of the block, so all reach the barriers equally often.
    int64_t p = blockIdx.x;
    int64_t base = p * rows_per_part;
    int64_t r_end = min(rows, base + rows_per_part);
    RowIn cur, nxt;
    load_row(cur, base + grp, r_end);
    int par = 0;
    for (;;) {
      // The next step: G rows on in this part, else the first rows of the block's next part.
      int64_t np = p, nbase = base + G, n_end = r_end;
      if (nbase >= r_end) {
        np = p + gridDim.x;
        nbase = np * rows_per_part;
        n_end = min(rows, nbase + rows_per_part);
      }
      // In flight while the current row is reduced, waits and is stored.
      if (np < parts) load_row(nxt, nbase + grp, n_end);
      if (base < r_end) {  // (false only for a part past the last row)
        const int64_t row = base + grp;
        row_step(
            row, row < r_end, cur.mean, cur.rstd, par, cur.x, cur.dy,
            [&](int i, int, float(&gv)[8]) { unpack8(gam[i], gv); },
            [&](int i, int, float(&rv)[8]) { unpack8(cur.res[i], rv); });
        par ^= 1;
      }
      if (np != p) {  // part p is done
        write_partials(p);
        if (np >= parts) break;
        clear_sums();
        __syncthreads();  // the next part's write_partials overwrites sum_g, sum_b
      }
      cur = nxt;
      p = np;
      base = nbase;
      r_end = n_end;
    }
  } else {
    const int64_t r_begin = static_cast<int64_t>(blockIdx.x) * rows_per_part;
    const int64_t r_end = min(rows, r_begin + rows_per_part);
    int par = 0;
    // Every group runs the same number of iterations (the barrier below is block-wide).
    for (int64_t base = r_begin; base < r_end; base += G, par ^= 1) {
      const int64_t row = base + grp;
      const bool valid = row < r_end;
      const float mean = valid && !kRms ? mean_in[row] : 0.0f;
      const float rstd = valid ? rstd_in[row] : 0.0f;
      Raw8<T> xraw[kVpl], draw[kVpl];
#pragma unroll
      for (int i = 0; i < kVpl; ++i) {
        const int c = (glane + 32 * W * i) * 8;
        if (valid && c < h) {
          xraw[i] = ld_raw8(x + row * h + c);
          draw[i] = ld_raw8(dy + row * h + c);
        }
      }
      row_step(
          row, valid, mean, rstd, par, xraw, draw,
          [&](int, int c, float(&gv)[8]) { load8(gamma + c, gv); },
          [&](int, int c, float(&rv)[8]) { load8(resid + row * h + c, rv); });
    }
    write_partials(blockIdx.x);
  }
}

// Partials of dgamma and dbeta: block (32 column groups of 8, 8 row lanes) over one row part.
constexpr int kColGroups = 32;
constexpr int kRowLanes = 8;
constexpr int kTileCols = kColGroups * 8;

template <class T>
__global__ void __launch_bounds__(kColGroups* kRowLanes)
    ln_weight_partials_kernel(const T* __restrict__ dy, const T* __restrict__ x,
                              const float* __restrict__ mean_in, const float* __restrict__ rstd_in,
                              int64_t rows, int64_t h, int64_t rows_per_part, bool vec,
                              float* __restrict__ pg, float* __restrict__ pb) {
  __shared__ float tile_g[kRowLanes][kTileCols];
  __shared__ float tile_b[kRowLanes][kTileCols];
  const int64_t c0 = (static_cast<int64_t>(blockIdx.x) * kColGroups + threadIdx.x) * 8;
  const int64_t r_begin = static_cast<int64_t>(blockIdx.y) * rows_per_part;
  const int64_t r_end = min(rows, r_begin + rows_per_part);
  float ag[8] = {0, 0, 0, 0, 0, 0, 0, 0}, ab[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  if (c0 < h) {
    for (int64_t r = r_begin + threadIdx.y; r < r_end; r += kRowLanes) {
      const float mean = mean_in[r], rstd = rstd_in[r];
      float dv[8], xv[8];
      load8_guarded(dy + r * h, c0, h, vec, dv);
      load8_guarded(x + r * h, c0, h, vec, xv);
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        ag[j] += dv[j] * ((xv[j] - mean) * rstd);
        ab[j] += dv[j];
      }
    }
  }
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    tile_g[threadIdx.y][threadIdx.x * 8 + j] = ag[j];
    tile_b[threadIdx.y][threadIdx.x * 8 + j] = ab[j];
  }
  __syncthreads();
  const int t = threadIdx.y * kColGroups + threadIdx.x;
  const int64_t c = static_cast<int64_t>(blockIdx.x) * kTileCols + t;
  if (c < h) {
    float sg = tile_g[0][t], sb = tile_b[0][t];
#pragma unroll
    for (int y = 1; y < kRowLanes; ++y) {
      sg += tile_g[y][t];
      sb += tile_b[y][t];
    }
    pg[static_cast<int64_t>(blockIdx.y) * h + c] = sg;
    pb[static_cast<int64_t>(blockIdx.y) * h + c] = sb;
  }
}

}  // namespace

void launch_layernorm_forward(const void* x, const void* gamma, const void* beta, DType t,
                              int64_t rows, int64_t h, float eps, void* y, float* mean, float* rstd,
                              cudaStream_t stream) {
  if (rows <= 0) return;
  MPLAN_CHECK(h > 0 && h < (1 << 30), "layernorm: h=", h);
  const bool vec = aligned16(x) && aligned16(gamma) && aligned16(beta) && aligned16(y);
  dispatch_act(t, [&](auto tag) {
    using T = decltype(tag);
    dispatch_vpl(h, vec, [&](auto vpl) {
      ln_forward_kernel<T, decltype(vpl)::value>
          <<<blocks_for(rows, kWarps), kWarps * 32, 0, stream>>>(
              static_cast<const T*>(x), static_cast<const T*>(gamma), static_cast<const T*>(beta),
              eps, static_cast<T*>(y), mean, rstd, rows, static_cast<int>(h));
    });
  });
  MPLAN_CUDA_LAUNCH_CHECK();
}

namespace {
// Row parts of the weight-gradient partial sums: 16 rows each, at most 512 (a fixed function of
// the shape, so the summation order does not depend on the device).
int64_t ln_parts(int64_t rows) {
  return std::max<int64_t>(1, std::min<int64_t>(512, (rows + 15) / 16));
}

// Warps per row of the fused backward: enough that a lane holds few 8-column vectors.
int ln_warps_per_row(int64_t h) { return h <= 512 ? 1 : h <= 4096 ? 4 : 8; }

template <class F>
void dispatch_w(int w, F&& f) {
  if (w == 1) {
    f(std::integral_constant<int, 1>{});
  } else if (w == 4) {
    f(std::integral_constant<int, 4>{});
  } else {
    f(std::integral_constant<int, 8>{});
  }
}
}  // namespace

size_t layernorm_backward_scratch_bytes(int64_t rows, int64_t h) {
  return 3 * static_cast<size_t>(ln_parts(rows) * h) * sizeof(float);  // dgamma, dbeta, resid's
}

namespace {
// How the backward takes rows of h columns: W warps per row, each holding h_per_warp of them
// (a multiple of 8); fused (one pass) for 16-byte aligned rows of h % 8 == 0 columns with at most
// 8 (bf16) or 4 (f32: twice the registers) vectors of 8 per lane.
struct LnBackwardPlan {
  int w;
  int64_t h_per_warp;
  bool fused;
};
LnBackwardPlan ln_backward_plan(int64_t h, DType t, bool vec) {
  const int w = ln_warps_per_row(h);
  const int64_t h_per_warp = ((h + w - 1) / w + 7) / 8 * 8;
  return {w, h_per_warp, vec && h % 8 == 0 && h_per_warp <= (t == DType::kBF16 ? 2048 : 1024)};
}

// The one-pass kernel over rows the plan takes (plan.fused): LayerNorm with mean and dbeta, or
// RMSNorm (kRms: mean and dbeta null). Its partials: pg, pb, pr of ln_parts(rows) × h floats.
// With dres_colsum (LayerNorm with resid only), also dres_colsum += the column sums of resid.
template <bool kRms>
void norm_backward_one_pass(const void* dy, const void* x, const void* gamma, DType t,
                            const float* mean, const float* rstd, int64_t rows, int64_t h,
                            const LnBackwardPlan& plan, void* dx, const void* resid, float* dgamma,
                            float* dbeta, float* dres_colsum, float* pg, float* pb, float* pr,
                            cudaStream_t stream) {
  MPLAN_CHECK(dres_colsum == nullptr || (!kRms && resid != nullptr),
              "norm backward: resid's column sums need LayerNorm with a residual");
  const int64_t parts = ln_parts(rows);
  const int64_t rows_per_part = (rows + parts - 1) / parts;
  dispatch_act(t, [&](auto tag) {
    using T = decltype(tag);
    dispatch_w(plan.w, [&](auto wc) {
      constexpr int W = decltype(wc)::value;
      dispatch_vpl(plan.h_per_warp, true, [&](auto vpl) {
        constexpr int kVpl = decltype(vpl)::value;
        if constexpr (kVpl > 0 && (sizeof(T) == 2 || kVpl <= 4) && (W > 1 || kVpl <= 2)) {
          auto kernel = ln_backward_fused_kernel<T, kVpl, W, kRms, false>;
          if constexpr (!kRms) {
            if (dres_colsum != nullptr) kernel = ln_backward_fused_kernel<T, kVpl, W, kRms, true>;
          }
          const int smem = static_cast<int>(
              ((kRms ? 1 : 2) + (dres_colsum != nullptr ? kWarps / W : 0)) * h * sizeof(float));
          if (smem > 48 * 1024) {
            MPLAN_CUDA_CHECK(
                cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
          }
          // Pipelined: as many blocks as run at once, each taking the same number of parts.
          int64_t grid = parts;
          if constexpr (ln_fused_pipelined<T, kVpl>()) {
            const int64_t slots =
                int64_t{kLnPipelinedBlocksPerSm} *
                std::max(1, current_device_attribute<cudaDevAttrMultiProcessorCount>());
            const int64_t parts_per_block = (parts + slots - 1) / slots;
            grid = (parts + parts_per_block - 1) / parts_per_block;
          }
          kernel<<<static_cast<unsigned>(grid), kWarps * 32, smem, stream>>>(
              static_cast<const T*>(dy), static_cast<const T*>(x), static_cast<const T*>(gamma),
              mean, rstd, static_cast<T*>(dx), static_cast<const T*>(resid), rows,
              static_cast<int>(h), rows_per_part, parts, pg, pb, pr);
        }
      });
    });
  });
  MPLAN_CUDA_LAUNCH_CHECK();
  launch_column_partials_finalize(pg, parts, h, dgamma, stream);
  if (!kRms) launch_column_partials_finalize(pb, parts, h, dbeta, stream);
  if (dres_colsum != nullptr) launch_column_partials_finalize(pr, parts, h, dres_colsum, stream);
}

void layernorm_backward(const void* dy, const void* x, const void* gamma, DType t,
                        const float* mean, const float* rstd, int64_t rows, int64_t h, void* dx,
                        const void* resid, float* dgamma, float* dbeta, float* dres_colsum,
                        void* scratch, cudaStream_t stream) {
  if (rows <= 0) return;
  MPLAN_CHECK(h > 0 && h < (1 << 30), "layernorm: h=", h);
  const bool vec = aligned16(dy) && aligned16(x) && aligned16(gamma) && aligned16(dx) &&
                   (resid == nullptr || aligned16(resid));
  const int64_t parts = ln_parts(rows);
  const int64_t rows_per_part = (rows + parts - 1) / parts;
  float* pg = static_cast<float*>(scratch);
  float* pb = pg + parts * h;
  float* pr = pb + parts * h;
  const LnBackwardPlan plan = ln_backward_plan(h, t, vec);
  MPLAN_CHECK(plan.fused || resid == nullptr, "layernorm: the residual add needs the fused path");
  if (plan.fused) {
    norm_backward_one_pass<false>(dy, x, gamma, t, mean, rstd, rows, h, plan, dx, resid, dgamma,
                                  dbeta, dres_colsum, pg, pb, pr, stream);
    return;
  }
  dispatch_act(t, [&](auto tag) {
    using T = decltype(tag);
    ln_backward_dx_kernel<T><<<blocks_for(rows, kWarps), kWarps * 32, 0, stream>>>(
        static_cast<const T*>(dy), static_cast<const T*>(x), static_cast<const T*>(gamma), mean,
        rstd, static_cast<T*>(dx), rows, static_cast<int>(h));
    MPLAN_CUDA_LAUNCH_CHECK();
    dim3 grid(blocks_for(h, kTileCols), static_cast<unsigned>(parts));
    ln_weight_partials_kernel<T><<<grid, dim3(kColGroups, kRowLanes), 0, stream>>>(
        static_cast<const T*>(dy), static_cast<const T*>(x), mean, rstd, rows, h, rows_per_part,
        vec && h % 8 == 0, pg, pb);
    MPLAN_CUDA_LAUNCH_CHECK();
    launch_column_partials_finalize(pg, parts, h, dgamma, stream);
    launch_column_partials_finalize(pb, parts, h, dbeta, stream);
  });
}

}  // namespace

void launch_layernorm_backward(const void* dy, const void* x, const void* gamma, DType t,
                               const float* mean, const float* rstd, int64_t rows, int64_t h,
                               void* dx, float* dgamma, float* dbeta, void* scratch,
                               cudaStream_t stream) {
  layernorm_backward(dy, x, gamma, t, mean, rstd, rows, h, dx, nullptr, dgamma, dbeta, nullptr,
                     scratch, stream);
}

bool norm_backward_one_pass_fits(int64_t h, DType t, const void* dy, const void* x,
                                 const void* gamma, const void* out) {
  return h > 0 && h < (1 << 30) &&
         ln_backward_plan(h, t, aligned16(dy) && aligned16(x) && aligned16(gamma) && aligned16(out))
             .fused;
}

void launch_layernorm_backward_add(const void* dy, const void* x, const void* gamma, DType t,
                                   const float* mean, const float* rstd, int64_t rows, int64_t h,
                                   void* dres, float* dgamma, float* dbeta, float* dres_colsum,
                                   void* scratch, cudaStream_t stream) {
  layernorm_backward(dy, x, gamma, t, mean, rstd, rows, h, dres, dres, dgamma, dbeta, dres_colsum,
                     scratch, stream);
}

size_t rmsnorm_backward_one_pass_scratch_bytes(int64_t rows, int64_t h) {
  return static_cast<size_t>(ln_parts(rows) * h) * sizeof(float);
}

void launch_rmsnorm_backward_one_pass(const void* dy, const void* x, const void* gamma, DType t,
                                      const float* rstd, int64_t rows, int64_t h, void* dx,
                                      const void* resid, float* dgamma, void* scratch,
                                      cudaStream_t stream) {
  if (rows <= 0) return;
  MPLAN_CHECK(
      norm_backward_one_pass_fits(h, t, dy, x, gamma, dx) && (resid == nullptr || aligned16(resid)),
      "rmsnorm: the one-pass backward does not take h=", h);
  const LnBackwardPlan plan = ln_backward_plan(h, t, true);
  norm_backward_one_pass<true>(dy, x, gamma, t, nullptr, rstd, rows, h, plan, dx, resid, dgamma,
                               nullptr, nullptr, static_cast<float*>(scratch), nullptr, nullptr,
                               stream);
}

}  // namespace mplan::exec::cuda
