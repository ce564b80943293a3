// 4-bit affine group-64 matvec on the tensor cores with the group-integer contract (qmatvec.h
// "4-bit, group integer"; design, prediction and measurements: docs/cuda-kernels.md §1 "v8").
//
// Why: the IDP4A kernels pay 24 IDP4A per 32 weights and token (a quarter-rate pipe), so T = 8
// verification costs 2.5x a T = 1 step, and at T = 1 their issue cost (3.65 lane instructions a
// weight, ncu) keeps them at ~55% of the copy bandwidth. One mma.sync m16n8k32 s8 multiplies 16
// rows x 32 columns by 8 (token, digit) columns: ~0.04 warp instructions a weight at T = 1 and
// hardly more at T = 9, so the kernel can be bound by the bytes at every width.
//
// Contract (why it is batch-width invariant by construction): per (token t, group G of 64 columns)
// the prepare (qmatvec_prep.cuh gm_emit) writes the three balanced base-256 digits of X = rint(x *
// 2^e) with one exponent e a group; the mma gives the exact int32 digit sums P0, P1, P2 of the
// group's 64 codes (any order of the products gives the same integers), V = (P2 * 256 + P1) * 256
// + P0, qx = fl(V) * 2^-e, acc_s = fma(scale, qx, fma(bias, sum_G(x), acc_s)) over the groups of
// K-split s in increasing order, y = ((acc_0 + acc_1) + ...) + acc_{S-1}. The split count S is a
// function of the matrix shape and the device's SM count only (gm_splits), never of T, the other
// matrices of a launch or the ring depth; a token's column of the mma depends on that token only.
//
// Layout of the work: a warp owns one (16-row tile, K-split) unit; the units of a matrix are padded
// to whole blocks of 8 warps, so a block holds units of one matrix and the S splits of a tile sit
// in consecutive warps of one block (their partials meet in shared memory). Lane (g = lane/4,
// t = lane%4) loads the 8 bytes of quarter t of the group (words 2t, 2t+1: columns 16t..16t+15) of
// rows g and g+8, so a warp reads whole 32-byte sectors; A = {even nibbles row g, row g+8, odd
// nibbles row g, row g+8} of word 2t (k-half 0) or 2t+1 (k-half 1), B = the matching uint4 of
// digits (.x/.y for word 2t, .z/.w for word 2t+1). n-tiles: "D01" tile j holds digits 0, 1 of
// tokens 4j..4j+3 (column n: token 4j + n/2, digit n%2) and "D2" tile p digit 2 of tokens 8p..8p+7
// (column n: token 8p + 4(n%2) + n/2), so the C fragment of lane (g, t) holds all three digit sums
// of rows g and g+8 for tokens t, t+4, t+8: the epilogue needs no shuffles or shared memory. The
// codes and scales of P groups are in flight in a register ring (issued before the programmatic
// launch wait: weights depend on no earlier kernel).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <string_view>

#include "backend/cuda/async_copy.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/qmatvec_common.cuh"
#include "backend/cuda/qmatvec_int.h"
#include "backend/cuda/qmatvec_prep.cuh"
#include "backend/cuda/smem_opt_in.h"

namespace mere::cuda::detail {
namespace {

constexpr int kWarps = 8;                 // warps a block (units of one matrix)
// The resident-warp estimate of q4gm_splits a multiprocessor (no T, no P: the split count must not
// depend on them): 16, or MERE_CUDA_GM_WARPS (4..64, read once per process; a tuning knob for the
// sweeps of docs/cuda-kernels.md §1 "v9": it changes the fp32 summation order, so every launch of a
// process must see the same value).
int gm_resident_warps() {
  static const int v = [] {
    const char* e = std::getenv("MERE_CUDA_GM_WARPS");
    if (e == nullptr || *e == 0) return 16;
    char* end = nullptr;
    const long w = std::strtol(e, &end, 10);
    MERE_CHECK(end != e && *end == 0 && w >= 4 && w <= 64, "qmatvec", "MERE_CUDA_GM_WARPS must be an integer in 4..64, got '", e, "'");
    return static_cast<int>(w);
  }();
  return v;
}
constexpr uint32_t kNib = 0x0F0F0F0Fu;

struct GmMat {
  const uint4* codes;  // tiled: [tiles, cols/64, 32 lanes] uint4 (qmatvec_tiled.h)
  const uint2* sb;     // tiled: [tiles, cols/64, 8] {scale | bias << 16 of row g, of row g + 8}
  float* y;            // [T, rows]
  int rows, unit_end, splits, accumulate;  // unit_end: end of this matrix in the launch's unit space
};
struct GmArgs {
  GmMat m[kMaxMultiMatrices];
  int n;
};

// 16 bytes of codes (lane (g, t) of a tiled block: quarter t of rows g and g + 8), not kept in L1,
// with a 256-byte L2 prefetch (the next lanes' and groups' bytes of the same tile).
__device__ __forceinline__ uint4 ld_codes(const uint4* p) {
  uint4 v;
  asm("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}

// 0, computed from v: an operand that makes a load wait for v without the compiler seeing through it.
__device__ __forceinline__ uint32_t zero_of(uint32_t v) {
  uint32_t z;
  asm("and.b32 %0, %1, 0;" : "=r"(z) : "r"(v));
  return z;
}

// c += A (16x32 s8, rows g / g+8) * B (32x8 s8, column g), s32 accumulate.
__device__ __forceinline__ void mma_s8(const uint32_t (&a)[4], uint32_t b0, uint32_t b1, int (&c)[4]) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Shared-memory bytes of the x windows: two buffers of GW groups, each group 12 T uint4 of digits
// and T float2 {2^-e, sum}.
__host__ __device__ constexpr size_t gm_smem_bytes(int T, int GW) {
  return static_cast<size_t>(2) * GW * (12 * T * 16 + T * 8);
}

// One 16-row tile x one K-split per warp; T tokens; P groups of codes and scales in flight in
// registers; x staged through shared memory in windows of GW groups (GW / S of each of the S
// K-splits a block holds), double-buffered with cp.async: the block copies window w + 1 while its
// warps compute window w, one barrier a window (v9; v8 read x from global memory at each group and
// waited for an L2 round trip there: 21-25% of copy, docs/cuda-kernels.md §1 "v9").
template <int T, int P, int G, bool DB, int GW>
__global__ void __launch_bounds__(kWarps * 32, 2)
    qmatvec_gmma_kernel(const GmArgs args, const uint4* __restrict__ gdg, const float2* __restrict__ gsx2, int cols) {
  constexpr int NJ = (T + 3) / 4;  // D01 n-tiles; also the tokens t + 4k a lane holds
  constexpr int NP = (T + 7) / 8;  // D2 n-tiles
  constexpr int GU = 12 * T;       // uint4 of digits a group
  extern __shared__ __align__(16) unsigned char gm_smem[];
  uint4* const sdg = reinterpret_cast<uint4*>(gm_smem);                  // [2][GW][GU]
  float2* const sgs = reinterpret_cast<float2*>(sdg + 2 * GW * GU);       // [2][GW][T]
  __shared__ float part[kWarps][T][16];
  const int lane = threadIdx.x & 31, wib = static_cast<int>(threadIdx.x >> 5);
  const int unit0 = blockIdx.x * kWarps;
  GmMat M = args.m[0];
  int ubegin = 0;
#pragma unroll
  for (int i = 1; i < kMaxMultiMatrices; ++i)
    if (i < args.n && unit0 >= args.m[i - 1].unit_end) M = args.m[i], ubegin = args.m[i - 1].unit_end;
  // S is a power of two, so every division by it is a shift (the same integers: all operands are
  // non-negative); ptxas turns a division by a runtime value into ~20 instructions (v14)
  const int S = M.splits;            // block-uniform, a power of two <= 8
  const int lS = __ffs(S) - 1;       // log2 S
  const int lw = __ffs(GW >> lS) - 1;  // log2 of the groups a split has in a window
  const int unit = unit0 - ubegin + wib;
  const int tile = unit >> lS, split = unit & (S - 1);
  const int ng = cols >> 6;
  const int nmax = (ng + S - 1) >> lS;  // the largest split: the block's loop count (barriers)
  const bool active = tile < (M.rows + 15) >> 4;
  const int gb = (ng * split) >> lS;
  const int n = active ? ((ng * (split + 1)) >> lS) - gb : 0;  // groups of this unit
  const int g = lane >> 2, t = lane & 3;
  const int ra = tile * 16 + g, rb = ra + 8;
  const bool va = active && ra < M.rows, vb = active && rb < M.rows;
  const size_t blk = static_cast<size_t>(active ? tile : 0) * ng + gb;  // first (tile, group) block
  const uint4* cp = M.codes + blk * 32 + lane;
  const uint2* sp = M.sb + blk * 8 + g;

  // the ring: codes (rows g and g+8, quarter t) and the scale | bias words of groups i .. i+P-1.
  // The loads are unconditional (groups past the unit's end re-read its last group, whose values are
  // never used), so no value of a slot is merged from two paths (see the loop).
  // DB (double buffer): two batches of P slots instead of a ring; batch B's loads are issued right
  // after the first use of batch A's data (an explicit dependency), so the scoreboard wait at that
  // use covers only loads issued a whole batch earlier (a ring's first use of slot 0 waited for all
  // P refills in flight, the newest issued one group before: v9c ncu).
  uint4 wv[P], wy[DB ? P : 1];
  uint2 qv[P], qy[DB ? P : 1];
  // group i's codes and scale | bias words (clamped to the unit); `dep` is 0 computed from data the
  // loads must wait for (zero_of), or 0
  auto load_group = [&](uint4& w, uint2& q, int i, uint32_t dep) {
    const int ic = max(0, min(i, n - 1));
    w = ld_codes(cp + 32 * ic + dep);
    q = __ldg(sp + 8 * ic + dep);
  };
  auto fetch = [&](int slot, int i) { load_group(wv[slot], qv[slot], i, 0); };
#pragma unroll
  for (int p = 0; p < P; ++p) fetch(p, p);
  pdl_begin();

  // window w of every split of the block into buffer w & 1 (cp.async; one commit group): split s's
  // m groups of the window (fewer where the split ends inside it, none past its end) go to slots
  // [s W, s W + m) of the buffer. A loop a split, no division: v9's single loop over all splits'
  // words divided each index by the window size and the split count: ~27 of the 112 warp
  // instructions a group at T = 8 (ncu source counters of s19b; docs/cuda-kernels.md §1 "v14").
  auto stage = [&](int w) {
    const int W = 1 << lw;
    const uint32_t dg0 = smem_u32(sdg + (w & 1) * GW * GU), gs0 = smem_u32(sgs + (w & 1) * GW * T);
    for (int s = 0; s < S; ++s) {  // block-uniform
      const int g0 = ((ng * s) >> lS) + (w << lw);               // the split's first group of the window
      const int m = min(W, ((ng * (s + 1)) >> lS) - g0);          // its groups in the window (<= 0: none)
      const uint4* src = gdg + static_cast<size_t>(g0) * GU;  // not read where m <= 0
      const uint32_t dst = dg0 + static_cast<uint32_t>(s * W * GU * 16);
      for (int k = threadIdx.x; k < m * GU; k += kWarps * 32) cp_async16(dst + 16u * k, src + k, 16);
      const float2* srt = gsx2 + static_cast<size_t>(g0) * T;
      const uint32_t dst2 = gs0 + static_cast<uint32_t>(s * W * T * 8);
      for (int k = threadIdx.x; k < m * T; k += kWarps * 32) cp_async8(dst2 + 8u * k, srt + k);
    }
    cp_async_commit();
  };
  stage(0);

  // B sources of this lane (uint4 index within a group's GU). An absent token (tok >= T) reads token
  // T-1's digits: a column of the mma depends only on its own B column, and absent tokens' columns
  // are never read, so no load needs a branch.
  int bj[NJ], bp[NP];
#pragma unroll
  for (int j = 0; j < NJ; ++j) {
    const int tok = min(4 * j + (g >> 1), T - 1);
    bj[j] = ((g & 1) * T + tok) * 4 + t;
  }
#pragma unroll
  for (int q = 0; q < NP; ++q) {
    const int tok = min(8 * q + 4 * (g & 1) + (g >> 1), T - 1);
    bp[q] = (2 * T + tok) * 4 + t;
  }

  float acc[2][NJ];
#pragma unroll
  for (int k = 0; k < NJ; ++k) acc[0][k] = 0.0f, acc[1][k] = 0.0f;

  // One group: its mmas and epilogue into acc, kept only where `keep` (a select, not a branch: a
  // group past the unit's end is computed on finite stand-in values and dropped, so the G groups of a
  // step form one basic block the scheduler can interleave). A lane's absent tokens (4k + t >= T)
  // accumulate stand-in values that are never stored or combined (v14: no select for them), and a
  // step whose groups all lie in the unit passes keep = true, which folds the selects away.
  auto group_math = [&](const uint4& W, const uint2& Q, int slot, bool keep) {
    const uint4* xs = sdg + slot * GU;
    const float2* gs2 = sgs + slot * T;
    uint4 xj[NJ], xp[NP];
#pragma unroll
    for (int j = 0; j < NJ; ++j) xj[j] = xs[bj[j]];
#pragma unroll
    for (int q = 0; q < NP; ++q) xp[q] = xs[bp[q]];
    const uint32_t a0[4] = {W.x & kNib, W.z & kNib, (W.x >> 4) & kNib, (W.z >> 4) & kNib};
    const uint32_t a1[4] = {W.y & kNib, W.w & kNib, (W.y >> 4) & kNib, (W.w >> 4) & kNib};
    int c01[NJ][4], c2[NP][4];
#pragma unroll
    for (int j = 0; j < NJ; ++j) {
      c01[j][0] = c01[j][1] = c01[j][2] = c01[j][3] = 0;
      mma_s8(a0, xj[j].x, xj[j].y, c01[j]);
      mma_s8(a1, xj[j].z, xj[j].w, c01[j]);
    }
#pragma unroll
    for (int q = 0; q < NP; ++q) {
      c2[q][0] = c2[q][1] = c2[q][2] = c2[q][3] = 0;
      mma_s8(a0, xp[q].x, xp[q].y, c2[q]);
      mma_s8(a1, xp[q].z, xp[q].w, c2[q]);
    }
    const float sca = qm::bf16_to_f32(static_cast<uint16_t>(Q.x & 0xFFFFu)), bia = qm::bf16_to_f32(static_cast<uint16_t>(Q.x >> 16));
    const float scb = qm::bf16_to_f32(static_cast<uint16_t>(Q.y & 0xFFFFu)), bib = qm::bf16_to_f32(static_cast<uint16_t>(Q.y >> 16));
#pragma unroll
    for (int k = 0; k < NJ; ++k) {
      const float2 gs = gs2[min(4 * k + t, T - 1)];  // {2^-e, sum of the group}
      const int Va = (c2[k >> 1][k & 1] * 256 + c01[k][1]) * 256 + c01[k][0];
      const int Vb = (c2[k >> 1][2 + (k & 1)] * 256 + c01[k][3]) * 256 + c01[k][2];
      const float qxa = __fmul_rn(__int2float_rn(Va), gs.x), qxb = __fmul_rn(__int2float_rn(Vb), gs.x);
      const float na = __fmaf_rn(sca, qxa, __fmaf_rn(bia, gs.y, acc[0][k]));
      const float nb = __fmaf_rn(scb, qxb, __fmaf_rn(bib, gs.y, acc[1][k]));
      acc[0][k] = keep ? na : acc[0][k];
      acc[1][k] = keep ? nb : acc[1][k];
    }
  };

  // Steps of G groups (G divides P and the per-split window). The ring slots of a step are used up
  // and then refilled at its end, after the join of the compute and skip paths: were a refill on
  // only some paths, or an old value still live there, ptxas would load into other registers and
  // move the value into the slot's at the loop edge, and that move waits for the load (ncu of v9b:
  // 55% of all stall samples on six such moves, one DRAM round trip a group whatever the ring
  // depth; v8 had the same moves from its conditional loads).
  const int wmask = (1 << lw) - 1;
  // the groups [i, i + G) of one step from slots (w, q)[p ..]
  auto step = [&](const uint4* w, const uint2* q, int i) {
    if ((i & wmask) == 0) {  // a new window (block-uniform): wait for it, free the other buffer
      cp_async_wait<0>();
      __syncthreads();
      if (((i >> lw) + 1) << lw < nmax) stage((i >> lw) + 1);
    }
    const int slot = (((i >> lw) & 1) * GW) + (split << lw) + (i & wmask);
    if (i + G <= n) {  // warp-uniform: every group of the step is the unit's (no selects)
#pragma unroll
      for (int u = 0; u < G; ++u) group_math(w[u], q[u], slot + u, true);
    } else if (i < n) {  // the unit's last, partial step
#pragma unroll
      for (int u = 0; u < G; ++u) group_math(w[u], q[u], slot + u, i + u < n);
    }
  };
  if constexpr (DB) {
    for (int i0 = 0; i0 < nmax; i0 += 2 * P) {
      const uint32_t dy = zero_of(wv[0].x);  // batch wy is issued after the wait for batch wv
#pragma unroll
      for (int u = 0; u < P; ++u) load_group(wy[u], qy[u], i0 + P + u, dy);
#pragma unroll
      for (int p = 0; p < P; p += G)
        if (i0 + p < nmax) step(wv + p, qv + p, i0 + p);
      if (i0 + P >= nmax) break;  // block-uniform
      const uint32_t dv = zero_of(wy[0].x);
#pragma unroll
      for (int u = 0; u < P; ++u) load_group(wv[u], qv[u], i0 + 2 * P + u, dv);
#pragma unroll
      for (int p = 0; p < P; p += G)
        if (i0 + P + p < nmax) step(wy + p, qy + p, i0 + P + p);
    }
  } else {
    for (int i0 = 0; i0 < nmax; i0 += P) {
#pragma unroll
      for (int p = 0; p < P; p += G) {
        const int i = i0 + p;
        if (i >= nmax) break;  // block-uniform
        step(wv + p, qv + p, i);
#pragma unroll
        for (int u = 0; u < G; ++u) fetch(p + u, i + u + P);
      }
    }
  }

  auto store = [&](int row, int tok, float v) {
    float* yp = M.y + static_cast<size_t>(tok) * M.rows + row;
    *yp = M.accumulate ? __fadd_rn(*yp, v) : v;
  };
  if (S == 1) {
#pragma unroll
    for (int k = 0; k < NJ; ++k) {
      const int tok = 4 * k + t;
      if (tok < T) {
        if (va) store(ra, tok, acc[0][k]);
        if (vb) store(rb, tok, acc[1][k]);
      }
    }
    return;
  }
  // S > 1: the splits of a tile are warps wib - split .. wib - split + S - 1 of this block
#pragma unroll
  for (int k = 0; k < NJ; ++k) {
    const int tok = 4 * k + t;
    if (tok < T) part[wib][tok][g] = acc[0][k], part[wib][tok][g + 8] = acc[1][k];
  }
  __syncthreads();
  if (split != 0) return;
#pragma unroll
  for (int k = 0; k < NJ; ++k) {
    const int tok = 4 * k + t;
    if (tok >= T) continue;
    float va_sum = part[wib][tok][g], vb_sum = part[wib][tok][g + 8];
    for (int s = 1; s < S; ++s) va_sum = __fadd_rn(va_sum, part[wib + s][tok][g]), vb_sum = __fadd_rn(vb_sum, part[wib + s][tok][g + 8]);
    if (va) store(ra, tok, va_sum);
    if (vb) store(rb, tok, vb_sum);
  }
}

using GmFn = void (*)(GmArgs, const uint4*, const float2*, int);

// x window (groups a block stages at a time, over all its splits): 32 up to T = 4, else 16 (two
// buffers: 51 KB at T = 4, 58 KB at T = 9)
constexpr int gm_window(int T) { return T <= 4 ? 32 : 16; }

struct GmVariant {
  int P, G;  // ring depth (or batch size with db), groups a step
  bool db;   // two batches of P instead of a ring
  GmFn fns[kMaxSkinnyRows];
};

template <int P, int G, bool DB>
GmVariant make_gm() {
  GmVariant v{P, G, DB, {}};
  qm::fill_by_T<1, kMaxSkinnyRows>(v.fns, [](auto t) {
    constexpr int T = decltype(t)::value;
    return &qmatvec_gmma_kernel<T, P, G, DB, gm_window(T)>;
  });
  return v;
}

// cfg.unroll of this kernel: 2 = two batches (db), else a ring
bool db_of(const QMatvecConfig& cfg) { return cfg.unroll == 2; }

// cfg.warps of this kernel: groups a step (0: 1 with the ring, the shape measured on the H200 in
// session 10 (v9c); 2 with two batches). G = 2, 4 and the batches are compiled, not yet measured.
int step_of(const QMatvecConfig& cfg) { return cfg.warps > 0 ? cfg.warps : (db_of(cfg) ? 2 : 1); }

const GmVariant* find_gm(int P, int G, bool db) {
  static const GmVariant table[] = {make_gm<6, 1, false>(), make_gm<4, 1, false>(), make_gm<4, 2, false>(), make_gm<6, 2, false>(),
                                    make_gm<8, 2, false>(), make_gm<4, 4, false>(), make_gm<8, 4, false>(),
                                    make_gm<4, 2, true>(),  make_gm<4, 4, true>(),  make_gm<2, 2, true>()};
  for (const GmVariant& v : table)
    if (v.P == P && v.G == G && v.db == db) return &v;
  return nullptr;
}

}  // namespace

int q4gm_splits(int64_t rows, int64_t cols, int sms) {
  // as many K-splits as keep the units within one wave of resident warps, at least 8 groups a split
  const int64_t tiles = (rows + 15) / 16, ng = cols / 64;
  const int64_t resident = static_cast<int64_t>(std::max(sms, 1)) * gm_resident_warps();
  int S = 1;
  while (S < 8 && tiles * 2 * S <= resident && ng / (2 * S) >= 8) S *= 2;
  return S;
}

// MERE_CUDA_GM=width: the shape of each width T = 1..9 ({db, groups a step, ring depth or batch
// size}): at each T the shape with the least time summed over a 27B pass's projections (gate and
// up x 128, down x 64, GDN qkv x 48, attention q x 16) in the H100 sweep of session 28
// (`mere_cuda_check --only "bench qmatvec" --kernels gmma --gm-sweep`, bench/cuda/s28/h100-m;
// docs/cuda-kernels.md §1 "v14").
constexpr GmShape kGmByWidth[kMaxSkinnyRows] = {
    {false, 2, 8}, {false, 4, 8}, {true, 4, 4}, {true, 4, 4}, {false, 4, 8},
    {false, 2, 8}, {false, 4, 8}, {false, 2, 8}, {false, 2, 6}};

GmShape q4gm_shape(int64_t T) {
  static const int v = [] {  // -1: by width, else an index into kFixed
    const char* e = std::getenv("MERE_CUDA_GM");
    const std::string_view s = e == nullptr ? std::string_view() : std::string_view(e);
    if (s.empty() || s == "width") return -1;  // the default since session 28
    if (s == "ring") return 0;
    if (s == "ring2") return 1;
    if (s == "ring4") return 2;
    if (s == "db") return 3;
    if (s == "db4") return 4;
    MERE_CHECK(false, "MERE_CUDA_GM", "expected width, ring, ring2, ring4, db or db4, got '", s, "'");
    return 0;
  }();
  static constexpr GmShape kFixed[] = {{false, 0}, {false, 2}, {false, 4}, {true, 0}, {true, 4}};
  if (v >= 0) return kFixed[v];
  MERE_CHECK(T >= 1 && T <= kMaxSkinnyRows, "MERE_CUDA_GM", "width ", T, " out of 1..", kMaxSkinnyRows);
  return kGmByWidth[T - 1];
}

int q4gm_ring(int64_t T, const QMatvecConfig& cfg) {
  if (cfg.stages > 0) return cfg.stages;
  if (db_of(cfg)) return T <= 8 ? 4 : 2;  // two batches of 4 groups (2 at T = 9)
  // the deepest register rings without spills (ptxas, 128 registers at 2 blocks an SM) that G divides:
  // 6 groups (G = 1, 2), 8 (G = 4); 4 at T = 9
  if (step_of(cfg) == 4) return T <= 8 ? 8 : 4;
  return T <= 8 ? 6 : 4;
}

bool q4gm_available(int64_t T, const QMatvecConfig& cfg) {
  return T >= 1 && T <= kMaxSkinnyRows && cfg.rows_per_warp == 16 && cfg.warps >= 0 && cfg.warps <= 4 &&
         find_gm(q4gm_ring(T, cfg), std::min(step_of(cfg), q4gm_ring(T, cfg)), db_of(cfg)) != nullptr;
}

void q4gm_launch(cudaStream_t s, const QMatvecOut* outs, int n, const float* ws, int64_t T, int64_t cols,
                 const QMatvecConfig& cfg, int sms) {
  GmArgs args{};
  args.n = n;
  int64_t units = 0;
  int G = step_of(cfg);
  for (int i = 0; i < n; ++i) {
    const QWeightView& W = outs[i].W;
    MERE_CHECK(W.tiled && W.bits == 4 && W.biases == nullptr &&
                   (reinterpret_cast<uintptr_t>(W.codes) & 15u) == 0 && (reinterpret_cast<uintptr_t>(W.scales) & 7u) == 0,
               "qmatvec", "the group-integer kernel needs tiled 4-bit weights (16-byte aligned codes); matrix ", i,
               " is not");
    const int S = q4gm_splits(W.rows, cols, sms);
    while (G > 1 && G > gm_window(static_cast<int>(T)) / S) G /= 2;  // a step's groups lie in one window of each split
    units += ((W.rows + 15) / 16 * S + kWarps - 1) / kWarps * kWarps;
    MERE_CHECK(units < (int64_t{1} << 30), "qmatvec", "too many rows for one launch");
    args.m[i] = GmMat{reinterpret_cast<const uint4*>(W.codes), reinterpret_cast<const uint2*>(W.scales), outs[i].y,
                      static_cast<int>(W.rows), static_cast<int>(units), S, outs[i].accumulate ? 1 : 0};
  }
  const int P = q4gm_ring(T, cfg);
  G = std::min(G, P);  // two batches of 2 at T = 9
  const GmVariant* v = find_gm(P, G, db_of(cfg));
  MERE_CHECK(v != nullptr, "qmatvec", "no compiled group-integer tensor-core kernel for ring depth ", P,
             " with ", G, " groups a step");
  const prep::Layout L = prep::layout(const_cast<float*>(ws), T, cols, 4);
  const size_t smem = gm_smem_bytes(static_cast<int>(T), gm_window(static_cast<int>(T)));
  opt_in_smem(v->fns[T - 1], static_cast<int>(smem));
  launch("qmatvec_gmma_kernel", v->fns[T - 1], dim3(static_cast<unsigned>(units / kWarps)), dim3(kWarps * 32), smem, s,
         args, L.gdg, L.gsx2, static_cast<int>(cols));
}

}  // namespace mere::cuda::detail
