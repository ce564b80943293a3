// 4-bit affine group-64 matvec on the tensor cores (contract: qmatvec.h; notes: docs/cuda-kernels.md
// §1 "v4: tensor cores").
//
// mma.sync m16n8k16 f16 x f16 -> f32. A = 16 weight rows x 16 k: the codes as exact f16 integers,
// (word & 0x000F000F) | 0x64006400 = {1024 + q, 1024 + q'} and one HFMA2 gives q (the 0x00F000F0
// nibbles give 1024 + 16q: HFMA2 by 1/16 and -64 gives q, also exactly). B = x: each token takes
// two n-columns, f16 hi and lo parts of x * 2^s (s per token and group of 64 columns, chosen so the
// group's max |x| * 2^s lies in [2^14, 2^15)): 4 tokens an n-tile. A quad of lanes (groupID g, t =
// lane & 3) loads 8 bytes of rows g and g+8 of each group (a warp load: 8 rows x 32 contiguous
// bytes); the k order inside a group is permuted to match the nibble order (k = 2t, 2t+1, 2t+8,
// 2t+9 of k-step ks are columns 16t+ks, 16t+ks+4, 16t+8+ks, 16t+12+ks), and the prepare step writes
// B fragments in that order, so nothing is shuffled. One group = 4 k-steps into a zeroed fragment;
// then v = (hi + lo) * 2^-s and acc = fma(scale, v, fma(bias, sum_group(x), acc)) per (row, token)
// (tile_group, shared by both kernels). K is split into 4 slices (group index mod 4), each summed in
// group order and the 4 partials in slice order through shared memory. Two pipelines feed the
// codes: registers (qmatvec_tc_kernel: each warp loads its own groups, two register stages) and
// shared memory (qmatvec_tcs_kernel: the block copies 4 groups of all its rows a stage with
// cp.async, S stages deep, warp w computing group w). Nothing depends on T or the launch shape.
#include "backend/cuda/qmatvec_tc.h"

#include <cuda_fp16.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <utility>

#include "backend/cuda/async_copy.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/qmatvec_common.cuh"
#include "backend/cuda/qmatvec_prep.cuh"

namespace mere::cuda::detail {
namespace {

constexpr int kSlices = 4;      // K slices (group index mod 4), summed in this order: part of the contract
// Tokens an n-tile: 4 (columns 2i, 2i+1 of the tile for token 4j+i); 1 puts every token at columns
// 0, 1 of its own tile (for hardware whose mma results would depend on the column position).
constexpr int kTokensPerTile = 4;
constexpr uint32_t kFull = 0xffffffffu;

// 8-byte streaming load of codes: read-only path, not kept in L1 (x and the scales are what L1 holds).
__device__ __forceinline__ uint2 ld_stream_v2(const uint2* p) {
  uint2 v;
  asm("ld.global.nc.L1::no_allocate.v2.u32 {%0, %1}, [%2];" : "=r"(v.x), "=r"(v.y) : "l"(p));
  return v;
}

// (w & mask) | magic in one LOP3 (the magic in a register: plain C++ gave two).
template <uint32_t kMask>
__device__ __forceinline__ uint32_t mask_or(uint32_t w, uint32_t magic) {
  uint32_t r;
  asm("lop3.b32 %0, %1, %2, %3, 0xEA;" : "=r"(r) : "r"(w), "n"(kMask), "r"(magic));
  return r;
}

__device__ __forceinline__ uint32_t hfma2(uint32_t a, uint32_t b, uint32_t c) {
  uint32_t d;
  asm("fma.rn.f16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}

// A-fragment half2 of k-step ks from one code word (nibbles n0..n7 = 8 consecutive columns):
// ks 0: {n0, n4}, 1: {n1, n5}, 2: {n2, n6}, 3: {n3, n7} (low half = the even k), exact integers.
struct Dq {
  uint32_t magic, one, m1024, sixteenth, m64;
};
__device__ __forceinline__ void dequant_word(uint32_t w, const Dq& c, uint32_t (&h)[4]) {
  const uint32_t w8 = w >> 8;
  h[0] = hfma2(mask_or<0x000F000Fu>(w, c.magic), c.one, c.m1024);
  h[1] = hfma2(mask_or<0x00F000F0u>(w, c.magic), c.sixteenth, c.m64);
  h[2] = hfma2(mask_or<0x000F000Fu>(w8, c.magic), c.one, c.m1024);
  h[3] = hfma2(mask_or<0x00F000F0u>(w8, c.magic), c.sixteenth, c.m64);
}

__device__ __forceinline__ void mma16816(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                         uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

template <int U, int R>
struct Stage {
  uint2 c0[U][R];     // codes of row g (8 bytes: 16 columns)
  uint2 c1[U][R];     // codes of row g + 8
  uint32_t sb[U][R];  // this lane's bf16 of {scale g, bias g, scale g+8, bias g+8}[lane & 3]
};

// One group (64 columns) of one 16-row tile for NT n-tiles: the contract's arithmetic, shared by both
// kernels. c0/c1: the lane's 8 code bytes of rows g and g+8; s/b: scale and bias of rows g, g+8;
// bq: B fragments of the group (per n-tile), si: {sum of the group's x, 2^-s} of the lane's token.
template <int NT>
__device__ __forceinline__ void tile_group(float (&acc)[NT][2], const uint2& c0, const uint2& c1, float s0, float b0,
                                           float s1, float b1, const uint4 (&bq)[NT][2], const float2 (&si)[NT],
                                           const Dq& dq) {
  uint32_t h00[4], h01[4], h10[4], h11[4];
  dequant_word(c0.x, dq, h00);  // row g, columns 16tq + 0..7
  dequant_word(c0.y, dq, h01);  // row g, columns 16tq + 8..15
  dequant_word(c1.x, dq, h10);  // row g+8
  dequant_word(c1.y, dq, h11);
#pragma unroll
  for (int j = 0; j < NT; ++j) {
    float d[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    mma16816(d, h00[0], h10[0], h01[0], h11[0], bq[j][0].x, bq[j][0].y);
    mma16816(d, h00[1], h10[1], h01[1], h11[1], bq[j][0].z, bq[j][0].w);
    mma16816(d, h00[2], h10[2], h01[2], h11[2], bq[j][1].x, bq[j][1].y);
    mma16816(d, h00[3], h10[3], h01[3], h11[3], bq[j][1].z, bq[j][1].w);
    const float v0 = __fmul_rn(__fadd_rn(d[0], d[1]), si[j].y);
    const float v1 = __fmul_rn(__fadd_rn(d[2], d[3]), si[j].y);
    acc[j][0] = __fmaf_rn(s0, v0, __fmaf_rn(b0, si[j].x, acc[j][0]));
    acc[j][1] = __fmaf_rn(s1, v1, __fmaf_rn(b1, si[j].x, acc[j][1]));
  }
}

__device__ __forceinline__ Dq make_dq() {
  Dq dq;
  asm("mov.b32 %0, %1;" : "=r"(dq.magic) : "n"(0x64006400));
  dq.one = 0x3C003C00u;        // 1.0
  dq.m1024 = 0xE400E400u;      // -1024
  dq.sixteenth = 0x2C002C00u;  // 1/16
  dq.m64 = 0xD400D400u;        // -64
  return dq;
}

// B fragments and {sum, 2^-s} of group G for this lane (zeros for lanes whose token is >= T).
template <int T, int NT, int TPT>
__device__ __forceinline__ void load_x(const uint4* xbase, const float2* sbase, size_t xtile, size_t stile, int G,
                                       bool xlane, bool slane, int g, int tq, uint4 (&bq)[NT][2], float2 (&si)[NT]) {
#pragma unroll
  for (int j = 0; j < NT; ++j) {
    if (xlane && TPT * j + (g >> 1) < T) {
      const uint4* xp = xbase + j * xtile + 16 * static_cast<size_t>(G);
      bq[j][0] = __ldg(xp);
      bq[j][1] = __ldg(xp + 1);
    } else {
      bq[j][0] = bq[j][1] = make_uint4(0u, 0u, 0u, 0u);
    }
    si[j] = slane && TPT * j + tq < T ? __ldg(sbase + j * stile + G) : make_float2(0.0f, 0.0f);
  }
}

// y[t, r] for T tokens; block = W warps on R tiles of 16 rows. Warp w owns slices w, w+W, ... (slice
// S = groups S, S+8, S+16, ...) and walks them one after another, so one accumulator set is live; U
// groups a stage, two stages in flight (the loads run U groups ahead across slice boundaries).
// ws: frag [T][ngroups][8 lane slots][2 uint4], gsx [T][ngroups] {sum of the group's x, 2^-s}.
// A warp's accumulator fragment (R tiles of 16 rows x NT n-tiles; this lane: rows g and g + 8 of
// each tile, token TPT*j + tq of n-tile j) stored as its slice partial dst[row][token].
template <int R, int NT, int T, int TPT>
__device__ __forceinline__ void store_partial(float (*dst)[T], const float (&acc)[R][NT][2], int g, int tq,
                                              bool slane) {
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int j = 0; j < NT; ++j) {
      const int te = TPT * j + tq;
      if (slane && te < T) {
        dst[16 * r + g][te] = acc[r][j][0];
        dst[16 * r + g + 8][te] = acc[r][j][1];
      }
    }
}

// y[t, row0 + rr] = the kSlices partials red[s][rr][t] summed in slice order (after a barrier);
// `threads` threads of the block share the RB * T outputs.
template <int RB, int T>
__device__ __forceinline__ void sum_slices(const float (*red)[RB][T], int row0, int rows, int threads, float* y) {
  for (int i = threadIdx.x; i < RB * T; i += threads) {
    const int te = i / RB, rr = i - te * RB;
    float v = red[0][rr][te];
#pragma unroll
    for (int s = 1; s < kSlices; ++s) v = __fadd_rn(v, red[s][rr][te]);
    const int row = row0 + rr;
    if (row < rows) y[static_cast<size_t>(te) * rows + row] = v;
  }
}

template <int T, int W, int R, int U, int MINB>
__global__ void __launch_bounds__(W * 32, MINB)
    qmatvec_tc_kernel(const uint32_t* __restrict__ codes, const uint16_t* __restrict__ scales,
                      const uint16_t* __restrict__ biases, const uint4* __restrict__ frag,
                      const float2* __restrict__ gsx, int rows, int cols, float* __restrict__ y) {
  pdl_begin();
  constexpr int TPT = kTokensPerTile;
  constexpr int NT = (T + TPT - 1) / TPT;  // n-tiles of 8 columns (TPT tokens x hi/lo)
  constexpr int SPW = kSlices / W;
  static_assert(kSlices % W == 0, "the 8 slices must spread evenly over the warps");
  __shared__ float red[kSlices][16 * R][T];

  const int ng = cols >> 6;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, tq = lane & 3;
  const int row0 = blockIdx.x * (16 * R);
  const size_t wpr = static_cast<size_t>(cols) >> 3;  // u32 words a row
  const Dq dq = make_dq();

  const uint2* cp0[R];
  const uint2* cp1[R];
  const uint16_t* sbp[R];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    // tail rows repeat the last row; their results are dropped
    const int r0 = min(row0 + 16 * r + g, rows - 1), r1 = min(row0 + 16 * r + g + 8, rows - 1);
    cp0[r] = reinterpret_cast<const uint2*>(codes + static_cast<size_t>(r0) * wpr) + tq;
    cp1[r] = reinterpret_cast<const uint2*>(codes + static_cast<size_t>(r1) * wpr) + tq;
    sbp[r] = ((tq & 1) ? biases : scales) + static_cast<size_t>((tq & 2) ? r1 : r0) * ng;
  }
  // B fragments: this lane supplies column g of n-tile j: token TPT*j + g/2, part g&1 (slot lane & 7);
  // D fragments: this lane holds columns 2tq, 2tq+1 of n-tile j: token TPT*j + tq (hi, lo)
  const bool xlane = (g >> 1) < TPT, slane = tq < TPT;
  const uint4* xbase = frag + (static_cast<size_t>(xlane ? g >> 1 : 0) * ng * 8 + (lane & 7)) * 2;
  const float2* sbase = gsx + static_cast<size_t>(slane ? tq : 0) * ng;
  const size_t xtile = static_cast<size_t>(TPT) * ng * 16, stile = static_cast<size_t>(TPT) * ng;  // one n-tile on

  float acc[R][NT][2];
  auto reset = [&]() {
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int j = 0; j < NT; ++j) acc[r][j][0] = acc[r][j][1] = 0.0f;
  };
  auto flush = [&](int m) {  // this warp's partial of slice warp + W*m
    store_partial<R, NT, T, TPT>(red[warp + W * m], acc, g, tq, slane);
  };
  reset();

  // cursor over this warp's groups, slice-major; once past the end it stays past it
  struct Cur {
    int G, m;
  };
  auto valid = [&](const Cur& c) { return c.m < SPW && c.G < ng; };
  auto advance = [&](Cur& c) {
    c.G += kSlices;
    if (c.G >= ng) {
      ++c.m;
      c.G = warp + W * c.m;
    }
  };

  auto load = [&](Stage<U, R>& S, Cur& c) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      if (valid(c)) {  // warp-uniform
        const int G = c.G;
#pragma unroll
        for (int r = 0; r < R; ++r) {
          S.c0[u][r] = ld_stream_v2(cp0[r] + 4 * G);
          S.c1[u][r] = ld_stream_v2(cp1[r] + 4 * G);
          S.sb[u][r] = __ldg(sbp[r] + G);
        }
      }
      advance(c);
    }
  };

  int accm = 0;  // slice index (within the warp) the accumulators hold
  auto compute = [&](const Stage<U, R>& S, Cur& c) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      if (valid(c)) {  // warp-uniform
        const int G = c.G;
        if (c.m != accm) {
          flush(accm);
          reset();
          accm = c.m;
        }
        uint4 bq[NT][2];
        float2 si[NT];
        load_x<T, NT, TPT>(xbase, sbase, xtile, stile, G, xlane, slane, g, tq, bq, si);
#pragma unroll
        for (int r = 0; r < R; ++r) {
          const float sbv = __uint_as_float(S.sb[u][r] << 16);
          const int qb = lane & ~3;
          const float s0 = __shfl_sync(kFull, sbv, qb), b0 = __shfl_sync(kFull, sbv, qb + 1);
          const float s1 = __shfl_sync(kFull, sbv, qb + 2), b1 = __shfl_sync(kFull, sbv, qb + 3);
          tile_group<NT>(acc[r], S.c0[u][r], S.c1[u][r], s0, b0, s1, b1, bq, si, dq);
        }
      }
      advance(c);
    }
  };

  Cur lc{warp, 0}, cc{warp, 0};
  Stage<U, R> A, B;
  load(A, lc);
  while (valid(cc)) {
    load(B, lc);
    compute(A, cc);
    load(A, lc);
    compute(B, cc);
  }
  flush(accm);  // the last slice; slices never reached (no groups) are zero
  reset();
  for (int m = accm + 1; m < SPW; ++m) flush(m);
  __syncthreads();

  sum_slices<16 * R, T>(red, row0, rows, 32 * W, y);  // fixed-order sum of the slice partials
}

// Shared-memory pipeline: block = 4 warps on R tiles of 16 rows (RB rows). Stage c holds groups
// 4c..4c+3 of the block's rows (codes [group][row][32 bytes], scales and biases [row][4 groups]),
// copied by all threads with cp.async, S stages in flight; warp w computes group 4c + w (slice w,
// so one accumulator set). ASYNC_SB: scales through the pipeline (needs cols/64 % 4 == 0 for the
// 8-byte copies); else each lane reads its four bf16 from global memory (L1).
template <int T, int R, int S, int MINB, bool ASYNC_SB>
__global__ void __launch_bounds__(128, MINB)
    qmatvec_tcs_kernel(const uint32_t* __restrict__ codes, const uint16_t* __restrict__ scales,
                       const uint16_t* __restrict__ biases, const uint4* __restrict__ frag,
                       const float2* __restrict__ gsx, int rows, int cols, float* __restrict__ y) {
  pdl_begin();
  constexpr int W = 4;
  static_assert(W == kSlices, "one slice a warp");
  constexpr int TPT = kTokensPerTile;
  constexpr int NT = (T + TPT - 1) / TPT;
  constexpr int RB = 16 * R;
  __shared__ __align__(16) uint8_t sc[S][W][RB][32];
  __shared__ __align__(16) uint16_t ss[S][RB][4];
  __shared__ __align__(16) uint16_t sbias[S][RB][4];
  __shared__ float red[kSlices][RB][T];

  const int ng = cols >> 6, nchunk = (ng + W - 1) / W;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, tq = lane & 3;
  const int row0 = blockIdx.x * RB;
  const size_t row_bytes = static_cast<size_t>(cols) >> 1;
  const uint8_t* cbytes = reinterpret_cast<const uint8_t*>(codes);
  const Dq dq = make_dq();

  // copy work of this thread: codes pieces p = tid + 128 i (i < R) of 8*RB 16-byte pieces a stage:
  // group gi = p / (2 RB), row pr = (p / 2) % RB, half ph = p % 2 (contiguous shared-memory writes)
  const uint8_t* csrc[R];  // the row's first byte (also the harmless source of zero-fill copies)
  uint32_t cdst[R];
  int cgrp[R], coff[R];
#pragma unroll
  for (int i = 0; i < R; ++i) {
    const int p = tid + 128 * i, gi = p / (2 * RB), pr = (p >> 1) % RB, ph = p & 1;
    const int row = min(row0 + pr, rows - 1);  // tail rows repeat the last row; their results are dropped
    csrc[i] = cbytes + static_cast<size_t>(row) * row_bytes;
    coff[i] = 32 * gi + 16 * ph;
    cdst[i] = smem_u32(&sc[0][gi][pr][16 * ph]);
    cgrp[i] = gi;
  }
  constexpr uint32_t kCodeStage = W * RB * 32, kSbStage = RB * 8;
  // scales/biases: threads < 2*RB copy 8 bytes (4 groups) of one row of one array
  const bool sb_copier = ASYNC_SB && tid < 2 * RB;
  const uint16_t* sbsrc = nullptr;
  uint32_t sbdst = 0;
  if (sb_copier) {
    const int arr = tid / RB, pr = tid % RB, row = min(row0 + pr, rows - 1);
    sbsrc = (arr ? biases : scales) + static_cast<size_t>(row) * ng;
    sbdst = arr ? smem_u32(&sbias[0][pr][0]) : smem_u32(&ss[0][pr][0]);
  }
  auto issue = [&](int c) {  // chunk c into slot c % S (nothing past the end); always one commit group
    if (c < nchunk) {
      const int slot = c % S;
#pragma unroll
      for (int i = 0; i < R; ++i) {
        const int G = W * c + cgrp[i];
        const bool ok = G < ng;
        cp_async16(cdst[i] + slot * kCodeStage, ok ? csrc[i] + static_cast<size_t>(W * 32) * c + coff[i] : csrc[i],
                   ok ? 16 : 0);
      }
      if (sb_copier) cp_async8(sbdst + slot * kSbStage, sbsrc + W * c);
    }
    cp_async_commit();
  };

  // x: as in the register kernel
  const bool xlane = (g >> 1) < TPT, slane = tq < TPT;
  const uint4* xbase = frag + (static_cast<size_t>(xlane ? g >> 1 : 0) * ng * 8 + (lane & 7)) * 2;
  const float2* sbase = gsx + static_cast<size_t>(slane ? tq : 0) * ng;
  const size_t xtile = static_cast<size_t>(TPT) * ng * 16, stile = static_cast<size_t>(TPT) * ng;
  // direct scale loads (!ASYNC_SB): offsets of rows g and g+8 of each tile
  size_t sdir[R][2];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    sdir[r][0] = static_cast<size_t>(min(row0 + 16 * r + g, rows - 1)) * ng;
    sdir[r][1] = static_cast<size_t>(min(row0 + 16 * r + g + 8, rows - 1)) * ng;
  }

  float acc[R][NT][2];
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int j = 0; j < NT; ++j) acc[r][j][0] = acc[r][j][1] = 0.0f;

#pragma unroll
  for (int c = 0; c < S - 1; ++c) issue(c);
  for (int c = 0; c < nchunk; ++c) {
    const int G = W * c + warp;
    const bool active = G < ng;  // warp-uniform
    uint4 bq[NT][2];
    float2 si[NT];
    if (active) load_x<T, NT, TPT>(xbase, sbase, xtile, stile, G, xlane, slane, g, tq, bq, si);
    cp_async_wait<S - 2>();  // this thread's copies of chunk c have landed
    __syncthreads();         // everyone's have; everyone is done with slot (c - 1) % S
    issue(c + S - 1);
    if (active) {
      const int slot = c % S;
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const uint2 c0 = *reinterpret_cast<const uint2*>(&sc[slot][warp][16 * r + g][8 * tq]);
        const uint2 c1 = *reinterpret_cast<const uint2*>(&sc[slot][warp][16 * r + g + 8][8 * tq]);
        float s0, b0, s1, b1;
        if constexpr (ASYNC_SB) {
          s0 = __uint_as_float(static_cast<uint32_t>(ss[slot][16 * r + g][warp]) << 16);
          b0 = __uint_as_float(static_cast<uint32_t>(sbias[slot][16 * r + g][warp]) << 16);
          s1 = __uint_as_float(static_cast<uint32_t>(ss[slot][16 * r + g + 8][warp]) << 16);
          b1 = __uint_as_float(static_cast<uint32_t>(sbias[slot][16 * r + g + 8][warp]) << 16);
        } else {
          s0 = __uint_as_float(static_cast<uint32_t>(__ldg(scales + sdir[r][0] + G)) << 16);
          b0 = __uint_as_float(static_cast<uint32_t>(__ldg(biases + sdir[r][0] + G)) << 16);
          s1 = __uint_as_float(static_cast<uint32_t>(__ldg(scales + sdir[r][1] + G)) << 16);
          b1 = __uint_as_float(static_cast<uint32_t>(__ldg(biases + sdir[r][1] + G)) << 16);
        }
        tile_group<NT>(acc[r], c0, c1, s0, b0, s1, b1, bq, si, dq);
      }
    }
  }
  cp_async_wait<0>();

  // slice partials (slice = warp) -> shared memory -> fixed-order sum
  store_partial<R, NT, T, TPT>(red[warp], acc, g, tq, slane);
  __syncthreads();
  sum_slices<RB, T>(red, row0, rows, 128, y);
}

// One thread per (token, group, lane slot 0..7): slot = 4*(part lo) + quarter q; the thread loads
// the 16 columns 16q..16q+15 of the group and emits its part of both layouts (qmatvec_prep.cuh).
__global__ void q4_prepare_kernel(const float* __restrict__ x, int T, int cols, prep::Layout L) {
  pdl_begin();
  const int ng = cols >> 6;
  const int idx = blockIdx.x * blockDim.x + threadIdx.x;
  const bool valid = idx < T * ng * 8;  // whole 8-lane sets are valid or not (T*ng*8 is a multiple of 8)
  const int slot = idx & 7, q = slot & 3;
  const int tg = valid ? idx >> 3 : 0;  // t * ng + G
  const int t = tg / ng, G = tg - t * ng;
  float v[16];
  const float4* xr = reinterpret_cast<const float4*>(x + static_cast<size_t>(t) * cols + 64 * G + 16 * q);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float4 f = valid ? __ldg(xr + i) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    v[4 * i] = f.x;
    v[4 * i + 1] = f.y;
    v[4 * i + 2] = f.z;
    v[4 * i + 3] = f.w;
  }
  prep::q4_emit(v, t, G, slot, valid, L);
}

using TcFn = void (*)(const uint32_t*, const uint16_t*, const uint16_t*, const uint4*, const float2*, int, int, float*);

struct TcVariant {
  int S;        // > 0: shared-memory pipeline with S stages (W = 4); 0: register pipeline
  int W, R, U;  // warps a block, tiles of 16 rows a block, groups a register stage
  TcFn fns[kMaxSkinnyRows];   // register pipeline; shared-memory pipeline with scales copied too
  TcFn sync[kMaxSkinnyRows];  // shared-memory pipeline, scales read directly (cols/64 % 4 != 0)
};

// register pipeline: W warps, R tiles, U groups a stage, MINB blocks an SM (register cap), T <= TMAX
template <int W, int R, int U, int MINB, int TMAX = kMaxSkinnyRows>
TcVariant make_tc() {
  TcVariant v{0, W, R, U, {}, {}};
  qm::fill_by_T<1, TMAX>(v.fns, [](auto t) { return &qmatvec_tc_kernel<decltype(t)::value, W, R, U, MINB>; });
  return v;
}
// shared-memory pipeline: R tiles, S stages, MINB blocks an SM
template <int R, int S, int MINB>
TcVariant make_tcs() {
  TcVariant v{S, 4, R, 0, {}, {}};
  qm::fill_by_T<1, kMaxSkinnyRows>(v.fns, [](auto t) { return &qmatvec_tcs_kernel<decltype(t)::value, R, S, MINB, true>; });
  qm::fill_by_T<1, kMaxSkinnyRows>(v.sync, [](auto t) { return &qmatvec_tcs_kernel<decltype(t)::value, R, S, MINB, false>; });
  return v;
}

// Preference order on equal scores (q4tc_default). MINB caps the registers so that the big 27B
// grids can fit in one wave (R2: 544 blocks of [17408,5120] at 5 an SM; W2R1: 1088 at 9); the
// register-pipeline W4R2U2 spills above T = 4 (ptxas -v), so it stops there.
const TcVariant* tc_variants(int* count) {
  static const TcVariant table[] = {
      make_tcs<2, 8, 5>(),      make_tcs<1, 8, 6>(),      make_tcs<2, 6, 5>(),
      make_tc<4, 2, 2, 5, 4>(), make_tc<2, 1, 4, 9>(),    make_tc<4, 1, 2, 6>(),
  };
  static const bool carve = [] {  // the pipeline kernels want shared memory, not L1 (a hint)
    for (const auto& v : table)
      if (v.S > 0)
        for (int t = 0; t < kMaxSkinnyRows; ++t)
          for (TcFn f : {v.fns[t], v.sync[t]})
            if (f != nullptr &&
                cudaFuncSetAttribute(f, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared) !=
                    cudaSuccess)
              (void)cudaGetLastError();
    return true;
  }();
  (void)carve;
  *count = static_cast<int>(sizeof(table) / sizeof(table[0]));
  return table;
}

int tc_index(const QMatvecConfig& c) {
  int n = 0;
  const TcVariant* v = tc_variants(&n);
  for (int i = 0; i < n; ++i) {
    if (16 * v[i].R != c.rows_per_warp || v[i].S != c.stages) continue;
    if (v[i].S > 0 || (v[i].W == c.warps && v[i].U == c.unroll)) return i;
  }
  return -1;
}

QMatvecConfig to_config(const TcVariant& v) {
  return v.S > 0 ? QMatvecConfig{16 * v.R, 1, 4, v.S} : QMatvecConfig{16 * v.R, v.U, v.W, 0};
}

}  // namespace

int64_t q4tc_floats(int64_t T, int64_t cols) {
  const int64_t ng = cols / 64;
  return T * ng * 64 + T * ng * 2;
}

void q4_prepare(cudaStream_t s, const float* x, int T, int cols, float* ws) {
  const int64_t ng = cols / 64;
  const int n = static_cast<int>(T * ng * 8);
  const int threads = 256, blocks = (n + threads - 1) / threads;
  launch("q4_prepare_kernel", q4_prepare_kernel, blocks, threads, 0, s, x, T, cols, prep::layout(ws, T, cols, 4));
}

bool q4tc_available(int64_t T, const QMatvecConfig& cfg) {
  int n = 0;
  const TcVariant* table = tc_variants(&n);
  const int i = tc_index(cfg);
  return T >= 1 && T <= kMaxSkinnyRows && i >= 0 && table[i].fns[T - 1] != nullptr;
}

void q4tc_launch(cudaStream_t s, const QWeightView& W, const float* tc, int64_t T, float* y, const QMatvecConfig& cfg) {
  int n = 0;
  const TcVariant* table = tc_variants(&n);
  const int i = tc_index(cfg);
  MERE_CHECK(i >= 0 && T >= 1 && T <= kMaxSkinnyRows && table[i].fns[T - 1] != nullptr, "qmatvec",
             "no compiled tensor-core kernel for T=", T, " warps=", cfg.warps, " rows_per_warp=", cfg.rows_per_warp,
             " unroll=", cfg.unroll);
  const TcVariant& v = table[i];
  const int64_t ng = W.cols / 64;
  const int64_t blocks = (W.rows + 16 * v.R - 1) / (16 * v.R);
  // the pipeline copies 4 groups of scales as 8 bytes: aligned only when cols/64 % 4 == 0
  const bool async_sb = ng % 4 == 0 && reinterpret_cast<uintptr_t>(W.scales) % 8 == 0 &&
                        reinterpret_cast<uintptr_t>(W.biases) % 8 == 0;
  const TcFn fn = (v.S > 0 && !async_sb) ? v.sync[T - 1] : v.fns[T - 1];
  launch("qmatvec_tc_kernel", fn, static_cast<unsigned>(blocks), v.W * 32, 0, s, W.codes, W.scales, W.biases,
         reinterpret_cast<const uint4*>(tc), reinterpret_cast<const float2*>(tc + T * ng * 64), static_cast<int>(W.rows),
         static_cast<int>(W.cols), y);
}

QMatvecConfig q4tc_default(int64_t T, int64_t rows, int sms) {
  int n = 0;
  const TcVariant* table = tc_variants(&n);
  static qm::OccupancyCache<16, kMaxSkinnyRows> occ_cache;  // blocks per SM of each compiled kernel
  double best = -1.0;
  int pick = -1;
  for (int i = 0; i < n && i < 16; ++i) {
    if (table[i].fns[T - 1] == nullptr) continue;
    const int occ = occ_cache.get(i, T, table[i].fns[T - 1], table[i].W * 32);
    if (occ <= 0) continue;
    const double blocks = static_cast<double>((rows + 16 * table[i].R - 1) / (16 * table[i].R));
    const double cap = static_cast<double>(occ) * sms;
    const double waves = blocks / cap;
    const double eff = waves / std::ceil(waves);  // whole waves: a partial last wave runs alone
    // bytes of codes in flight per SM (register pipeline: two stages of U groups of R tiles of 512
    // bytes a warp; shared-memory pipeline: S - 1 stages of 16R rows x 128 bytes a block); more
    // warps an SM break ties
    const double per_sm = std::min(blocks, cap) / sms;
    const double inflight = table[i].S > 0 ? per_sm * (table[i].S - 1) * 16.0 * table[i].R * 128.0
                                           : per_sm * table[i].W * 2.0 * table[i].U * table[i].R * 512.0;
    const double score = eff * (std::min(inflight, 48.0 * 1024.0) + 64.0 * per_sm * table[i].W);
    if (score > best + 1e-9) {
      best = score;
      pick = i;
    }
  }
  for (int i = 0; i < n && pick < 0; ++i)
    if (table[i].fns[T - 1] != nullptr) pick = i;
  return to_config(table[pick]);
}

}  // namespace mere::cuda::detail
