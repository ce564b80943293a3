// Device side shared by the two implementations of the 4-bit integer contract (qmatvec.h
// "4-bit, integer"): the register kernel (qmatvec_int.cu) and the cp.async pipelined one
// (qmatvec_int_pipe.cu). Both take the same launch arguments and split the flat row space of a
// multi-matrix launch the same way; they differ only in how the code words reach the registers.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdint>

#include "backend/cuda/async_copy.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/qmatvec.h"
#include "backend/cuda/qmatvec_common.cuh"
#include "backend/cuda/qmatvec_prep.cuh"
#include "backend/cuda/smem_opt_in.h"

namespace mere::cuda::detail::qi {

constexpr int kWarps = 4;  // warps a block

struct IntMat {
  const uint4* codes;  // [rows, cols/32] 16-byte chunks
  const uint16_t* scales;
  const uint16_t* biases;
  float* y;
  int rows, row_end, accumulate;  // row_end: end of this matrix in the launch's flat row space
};
struct IntArgs {
  IntMat m[kMaxMultiMatrices];
  int n, total;
};

// The matrix that holds flat row `row` (constant indices only, so the arguments stay in the
// parameter bank) and the flat row where it begins.
struct MatRef {
  const uint4* codes;
  const uint16_t* scales;
  const uint16_t* biases;
  float* y;
  int rows, accumulate, begin, end;
};
__device__ __forceinline__ MatRef locate(const IntArgs& a, int row) {
  MatRef m{a.m[0].codes, a.m[0].scales, a.m[0].biases, a.m[0].y, a.m[0].rows, a.m[0].accumulate, 0, a.m[0].row_end};
#pragma unroll
  for (int i = 1; i < kMaxMultiMatrices; ++i)
    if (i < a.n && row >= a.m[i - 1].row_end)
      m = MatRef{a.m[i].codes, a.m[i].scales, a.m[i].biases, a.m[i].y, a.m[i].rows, a.m[i].accumulate,
                 a.m[i - 1].row_end, a.m[i].row_end};
  return m;
}

// Flat rows [rb, re) of global warp gw out of W warps: the even split both kernels use.
__device__ __forceinline__ void warp_rows(const IntArgs& a, int64_t gw, int64_t W, int* rb, int* re) {
  *rb = static_cast<int>(gw * static_cast<int64_t>(a.total) / W);
  *re = static_cast<int>((gw + 1) * static_cast<int64_t>(a.total) / W);
}

// L2 prefetch of the start of this warp's first rows, issued before the PDL wait (weights are
// written by no kernel, so reading them early is allowed by launch.cuh's contract): while the
// previous kernel (a norm, a prepare, the GDN or attention pieces) still runs, the resident warps
// of this launch already pull their first bytes from DRAM. `budget` bytes of codes a warp (0: off),
// split over its first min(rows, R) rows (each from its start), plus the scales and biases of the
// same groups; lane r < n takes row r's codes, n + r its scales, 2n + r its biases.
template <int R>
__device__ __forceinline__ void prefetch_first_rows(const IntArgs& a, int rb, int re, int cols, int budget) {
  const int n = min(re - rb, R);
  const int lane = static_cast<int>(threadIdx.x & 31);
  if (budget <= 0 || n <= 0 || lane >= 3 * n) return;
  const int r = lane % n, kind = lane / n;
  const MatRef M = locate(a, rb + r);
  const size_t row = static_cast<size_t>(rb + r - M.begin);
  const size_t row_code = static_cast<size_t>(cols) / 2, row_groups = static_cast<size_t>(cols) / 64;
  const size_t code = min(row_code, static_cast<size_t>(budget / n));
  if (kind == 0) {
    prefetch_l2_inward(reinterpret_cast<const char*>(M.codes) + row * row_code, code);
  } else {
    const size_t groups = min(row_groups, (code + 31) / 32);
    const uint16_t* base = kind == 1 ? M.scales : M.biases;
    prefetch_l2_inward(base + row * row_groups, groups * 2);
  }
}

// Where a warp is in its sequence of sub-batches (a batch of at most R rows, cut at matrix
// boundaries) and iterations (32-chunk steps along the row; nit a row, the same for every lane).
struct Cursor {
  MatRef M;
  int k, r0, bend, nr, l0, i;
  bool done;
};
__device__ __forceinline__ void cursor_rows(Cursor& c, const IntArgs& a) {
  c.M = qi::locate(a, c.r0);
  c.nr = min(c.bend, c.M.end) - c.r0;
  c.l0 = c.r0 - c.M.begin;
  c.i = 0;
}
// First non-empty batch at or after c.k (batch k = flat rows [rb + k*rows_w/nb, rb + (k+1)*rows_w/nb)).
__device__ __forceinline__ void cursor_batch(Cursor& c, const IntArgs& a, int rb, int rows_w, int nb) {
  for (; c.k < nb; ++c.k) {
    c.r0 = rb + static_cast<int>(static_cast<int64_t>(c.k) * rows_w / nb);
    c.bend = rb + static_cast<int>((static_cast<int64_t>(c.k) + 1) * rows_w / nb);
    if (c.r0 < c.bend) {
      cursor_rows(c, a);
      return;
    }
  }
  c.done = true;
}
__device__ __forceinline__ void cursor_next(Cursor& c, const IntArgs& a, int rb, int rows_w, int nb, int nit) {
  if (++c.i < nit) return;
  c.r0 += c.nr;
  if (c.r0 < c.bend) {
    cursor_rows(c, a);
    return;
  }
  ++c.k;
  cursor_batch(c, a, rb, rows_w, nb);
}

// The contract's exact chunk sum V = sum q * X for one 32-column chunk: lo/hi = the code word's even
// / odd nibbles as bytes, d[0..5] = the digit units (2*dig: even columns, 2*dig+1: odd). The three
// digit sums are independent chains (integers: any order gives the same V).
__device__ __forceinline__ int chunk_dot(const uint32_t (&lo)[4], const uint32_t (&hi)[4], const uint4 (&d)[6]) {
  int P[3];
#pragma unroll
  for (int dig = 0; dig < 3; ++dig) {
    const uint4& e = d[2 * dig];
    const uint4& o = d[2 * dig + 1];
    int s = __dp4a(static_cast<int>(lo[0]), static_cast<int>(e.x), 0);
    s = __dp4a(static_cast<int>(hi[0]), static_cast<int>(o.x), s);
    s = __dp4a(static_cast<int>(lo[1]), static_cast<int>(e.y), s);
    s = __dp4a(static_cast<int>(hi[1]), static_cast<int>(o.y), s);
    s = __dp4a(static_cast<int>(lo[2]), static_cast<int>(e.z), s);
    s = __dp4a(static_cast<int>(hi[2]), static_cast<int>(o.z), s);
    s = __dp4a(static_cast<int>(lo[3]), static_cast<int>(e.w), s);
    P[dig] = __dp4a(static_cast<int>(hi[3]), static_cast<int>(o.w), s);
  }
  return (P[2] * 256 + P[1]) * 256 + P[0];
}

// Even / odd nibbles of a code word as bytes.
__device__ __forceinline__ void split_nibbles(const uint4& w, uint32_t (&lo)[4], uint32_t (&hi)[4]) {
  lo[0] = w.x & 0x0F0F0F0Fu, hi[0] = (w.x >> 4) & 0x0F0F0F0Fu;
  lo[1] = w.y & 0x0F0F0F0Fu, hi[1] = (w.y >> 4) & 0x0F0F0F0Fu;
  lo[2] = w.z & 0x0F0F0F0Fu, hi[2] = (w.z >> 4) & 0x0F0F0F0Fu;
  lo[3] = w.w & 0x0F0F0F0Fu, hi[3] = (w.w >> 4) & 0x0F0F0F0Fu;
}


// A load of the prepared x: from the read-only global path, or (SMEM: a launch that computed its own
// input into shared memory, qmatvec_norm_multi) a plain load of the shared copy.
template <bool SMEM, class V>
__device__ __forceinline__ V ldx(const V* p) {
  if constexpr (SMEM) return *p;
  else return __ldg(p);
}

// One iteration of a streamed kernel (the cp.async ring) for R rows and T tokens, once the lane's code
// words are split (lo/hi) and its group's scale and bias are in sc/bi: the register kernel's chunk
// arithmetic, acc[r][t] = fma(sc, fl(V) * 2^-e, fma(bi, sum x, acc)). xt0 = dg + 192 i + lane (this
// iteration's digits of token 0), cj = dsx + j (the chunk's {2^-e, sum} of token 0); SX: x in shared memory.
template <int T, int R, bool SX = false>
__device__ __forceinline__ void chunk_step(const uint32_t (&lo)[R][4], const uint32_t (&hi)[R][4], const float (&sc)[R],
                                           const float (&bi)[R], const uint4* __restrict__ xt0, size_t tstride,
                                           const float2* __restrict__ cj, int nchunk, float (&acc)[R][T]) {
#pragma unroll
  for (int t = 0; t < T; ++t) {
    const uint4* xt = xt0 + t * tstride;
    uint4 d[6];
#pragma unroll
    for (int e = 0; e < 6; ++e) d[e] = ldx<SX>(xt + 32 * e);
    const float2 ci = ldx<SX>(cj + static_cast<size_t>(t) * nchunk);
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const float qx = __fmul_rn(__int2float_rn(chunk_dot(lo[r], hi[r], d)), ci.x);
      acc[r][t] = __fmaf_rn(sc[r], qx, __fmaf_rn(bi[r], ci.y, acc[r][t]));
    }
  }
}

// The end of a cursor's sub-batch: butterfly-reduce each (row, token), store (or add) the live rows,
// clear the accumulators for the next sub-batch.
template <int T, int R>
__device__ __forceinline__ void store_rows(float (&acc)[R][T], const Cursor& c, int lane) {
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int t = 0; t < T; ++t) {
      const float v = qm::butterfly_sum(acc[r][t]);
      acc[r][t] = 0.0f;
      if (r < c.nr && lane == (r * T + t) % 32) {
        float* yp = c.M.y + static_cast<size_t>(t) * c.M.rows + c.l0 + r;
        *yp = c.M.accumulate ? __fadd_rn(*yp, v) : v;
      }
    }
}


// ---- host side of the streamed kernels (the cp.async ring): their compiled shapes, occupancy and grid.
using RingFn = void (*)(IntArgs, const uint4*, const float2*, int, int, int);
// R rows a batch, D stages, compiled for T in [t_lo, t_hi], `smem` bytes of dynamic shared memory.
struct RingVariant {
  int R, D, t_lo, t_hi, smem;
  RingFn fns[kMaxSkinnyRows];
};
inline const RingVariant* find_ring(const RingVariant* v, int n, int64_t T, int R, int D, int* index) {
  for (int i = 0; i < n; ++i)
    if (v[i].R == R && v[i].D == D && T >= v[i].t_lo && T <= v[i].t_hi) {
      *index = i;
      return &v[i];
    }
  return nullptr;
}
// Blocks a multiprocessor holds of a table's variant at T with its ring (the dynamic shared-memory
// limit raised first, on the current device: opt_in_smem); at least 1. One object per table (a
// function-local static). The occupancy is cached per process: a property of the GPU model, the same
// on every device of a host of one kind of GPU.
class RingOccupancy {
 public:
  int get(int index, int64_t T, const RingVariant& v) {
    opt_in_smem(v.fns[T - 1], v.smem);
    return std::max(1, cache_.get(index, T, v.fns[T - 1], kWarps * 32, static_cast<size_t>(v.smem)));
  }

 private:
  qm::OccupancyCache<8, kMaxSkinnyRows> cache_;
};
// Whether a streamed kernel can read every matrix of a launch: cols % col_multiple == 0, 16-byte
// aligned codes, scales and biases aligned to scale_align bytes.
inline bool ring_supported(const QMatvecOut* outs, int n, int64_t cols, int64_t col_multiple, uintptr_t scale_align) {
  if (cols % col_multiple != 0) return false;
  for (int i = 0; i < n; ++i) {
    const QWeightView& W = outs[i].W;
    if ((reinterpret_cast<uintptr_t>(W.codes) & 15u) || (reinterpret_cast<uintptr_t>(W.scales) & (scale_align - 1)) ||
        (reinterpret_cast<uintptr_t>(W.biases) & (scale_align - 1)))
      return false;
  }
  return true;
}
// The register kernel's grid rule: every resident warp (at most one wave), rows spread evenly, the
// same batch count nb in every warp. Returns the block count.
inline int64_t ring_grid(int occupancy, int sms, int64_t R, int64_t total, int* nb) {
  const int64_t resident_warps = static_cast<int64_t>(occupancy) * sms * kWarps;
  const int64_t blocks = (std::min((total + R - 1) / R, resident_warps) + kWarps - 1) / kWarps;
  const int64_t per_warp = (total + blocks * kWarps - 1) / (blocks * kWarps);
  *nb = static_cast<int>((per_warp + R - 1) / R);
  return blocks;
}
// The launch of a streamed kernel's variant v (index `index` of its table, occupancy cache occ) on
// the prepared workspace ws, with the register kernel's grid rule.
inline void ring_launch(const char* what, cudaStream_t s, const RingVariant& v, int index, RingOccupancy& occ,
                        const IntArgs& args, const float* ws, int64_t T, int64_t cols, int sms) {
  int nb = 0;
  const int64_t blocks = ring_grid(occ.get(index, T, v), sms, v.R, args.total, &nb);
  const prep::Layout L = prep::layout(const_cast<float*>(ws), T, cols, 4);
  launch(what, v.fns[T - 1], dim3(static_cast<unsigned>(blocks)), dim3(kWarps * 32), static_cast<size_t>(v.smem), s,
         args, L.dg, L.dsx, static_cast<int>(cols), L.spans, nb);
}

}  // namespace mere::cuda::detail::qi
