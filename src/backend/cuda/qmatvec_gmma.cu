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

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/qmatvec_common.cuh"
#include "backend/cuda/qmatvec_int.h"
#include "backend/cuda/qmatvec_prep.cuh"

namespace mere::cuda::detail {
namespace {

constexpr int kWarps = 8;                 // warps a block (units of one matrix)
constexpr int kResidentWarpsPerSm = 16;   // the resident-warp estimate of gm_splits (fixed: no T, no P)
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

// 16 bytes of codes (lane (g, t) of a tiled block: quarter t of rows g and g + 8), not kept in L1;
// L2PF = the L2 prefetch size asked for (256, 128 or 0 bytes).
template <int L2PF>
__device__ __forceinline__ uint4 ld_codes(const uint4* p) {
  uint4 v;
  if constexpr (L2PF == 256)
    asm("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];"
        : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  else if constexpr (L2PF == 128)
    asm("ld.global.nc.L1::no_allocate.L2::128B.v4.u32 {%0, %1, %2, %3}, [%4];"
        : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  else
    asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}

// c += A (16x32 s8, rows g / g+8) * B (32x8 s8, column g), s32 accumulate.
__device__ __forceinline__ void mma_s8(const uint32_t (&a)[4], uint32_t b0, uint32_t b1, int (&c)[4]) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// One 16-row tile x one K-split per warp; T tokens; P groups of codes and scales in flight; L2PF
// the L2 prefetch size of the code loads.
template <int T, int P, int L2PF>
__global__ void __launch_bounds__(kWarps * 32, 2)
    qmatvec_gmma_kernel(const GmArgs args, const uint4* __restrict__ gdg, const float2* __restrict__ gsx2, int cols) {
  constexpr int NJ = (T + 3) / 4;  // D01 n-tiles; also the tokens t + 4k a lane holds
  constexpr int NP = (T + 7) / 8;  // D2 n-tiles
  __shared__ float part[kWarps][T][16];
  const int lane = threadIdx.x & 31, wib = static_cast<int>(threadIdx.x >> 5);
  const int unit0 = blockIdx.x * kWarps;
  GmMat M = args.m[0];
  int ubegin = 0;
#pragma unroll
  for (int i = 1; i < kMaxMultiMatrices; ++i)
    if (i < args.n && unit0 >= args.m[i - 1].unit_end) M = args.m[i], ubegin = args.m[i - 1].unit_end;
  const int S = M.splits;  // block-uniform
  const int unit = unit0 - ubegin + wib;
  const int tile = unit / S, split = unit - tile * S;
  const int ng = cols >> 6;
  const bool active = tile < (M.rows + 15) >> 4;
  const int gb = active ? ng * split / S : 0;
  const int n = active ? ng * (split + 1) / S - gb : 0;  // groups of this unit
  const int g = lane >> 2, t = lane & 3;
  const int ra = tile * 16 + g, rb = ra + 8;
  const bool va = active && ra < M.rows, vb = active && rb < M.rows;
  const size_t blk = static_cast<size_t>(active ? tile : 0) * ng + gb;  // first (tile, group) block
  const uint4* cp = M.codes + blk * 32 + lane;
  const uint2* sp = M.sb + blk * 8 + g;

  // the ring: codes (rows g and g+8, quarter t) and the scale | bias words of groups i .. i+P-1
  uint4 wv[P];
  uint2 qv[P];
  auto fetch = [&](int slot, int i) {
    const bool ok = i < n;
    wv[slot] = ok ? ld_codes<L2PF>(cp + 32 * i) : make_uint4(0u, 0u, 0u, 0u);
    qv[slot] = ok ? __ldg(sp + 8 * i) : make_uint2(0u, 0u);
  };
#pragma unroll
  for (int p = 0; p < P; ++p) fetch(p, p);
  pdl_begin();

  // B sources of this lane (uint4 index of group 0; 12 uint4 a group), -1: an absent token
  int bj[NJ], bp[NP];
#pragma unroll
  for (int j = 0; j < NJ; ++j) {
    const int tok = 4 * j + (g >> 1);
    bj[j] = tok < T ? ((g & 1) * T + tok) * 4 + t : -1;
  }
#pragma unroll
  for (int q = 0; q < NP; ++q) {
    const int tok = 8 * q + 4 * (g & 1) + (g >> 1);
    bp[q] = tok < T ? (2 * T + tok) * 4 + t : -1;
  }

  // x of a group (its digits: 192 T contiguous bytes; its {2^-e, sum}: 8 T) is read by every warp
  // of the SM at about the same time, so the first touch missed L1 in every warp (hit rate 25%, ncu)
  // and each group waited for an L2 round trip before its mma and another before its epilogue:
  // ~1000 cycles a group, 1.07 TB/s at 8 warps an SM (v8b). The warp prefetches the lines of group
  // i + P into L1 while it computes group i (no registers held).
  auto prefetch_x = [&](int G) {
    const uintptr_t d0 = reinterpret_cast<uintptr_t>(gdg + static_cast<size_t>(12) * T * G);
    const uintptr_t d1 = d0 + 192 * T, line = (d0 & ~uintptr_t{127}) + 128 * lane;
    if (line < d1) asm volatile("prefetch.global.L1 [%0];" ::"l"(line));
    if (lane >= 30) {
      const uintptr_t s0 = reinterpret_cast<uintptr_t>(gsx2 + static_cast<size_t>(G) * T), s1 = s0 + 8 * T;
      const uintptr_t sl = (s0 & ~uintptr_t{127}) + 128 * (lane - 30);
      if (sl < s1) asm volatile("prefetch.global.L1 [%0];" ::"l"(sl));
    }
  };
#pragma unroll
  for (int p = 0; p < P; ++p)
    if (p < n) prefetch_x(gb + p);

  float acc[2][NJ];
#pragma unroll
  for (int k = 0; k < NJ; ++k) acc[0][k] = 0.0f, acc[1][k] = 0.0f;

  for (int i0 = 0; i0 < n; i0 += P) {
#pragma unroll
    for (int p = 0; p < P; ++p) {
      const int i = i0 + p;
      if (i >= n) break;  // warp-uniform
      const int G = gb + i;
      if (i + P < n) prefetch_x(G + P);
      uint4 xj[NJ], xp[NP];
#pragma unroll
      for (int j = 0; j < NJ; ++j) xj[j] = bj[j] >= 0 ? __ldg(gdg + bj[j] + 12 * T * G) : make_uint4(0u, 0u, 0u, 0u);
#pragma unroll
      for (int q = 0; q < NP; ++q) xp[q] = bp[q] >= 0 ? __ldg(gdg + bp[q] + 12 * T * G) : make_uint4(0u, 0u, 0u, 0u);
      const uint4 W = wv[p];  // .x, .y: row g words 2t, 2t+1; .z, .w: row g+8
      const uint32_t QA = qv[p].x, QB = qv[p].y;
      fetch(p, i + P);
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
      const float sca = qm::bf16_to_f32(static_cast<uint16_t>(QA & 0xFFFFu)), bia = qm::bf16_to_f32(static_cast<uint16_t>(QA >> 16));
      const float scb = qm::bf16_to_f32(static_cast<uint16_t>(QB & 0xFFFFu)), bib = qm::bf16_to_f32(static_cast<uint16_t>(QB >> 16));
#pragma unroll
      for (int k = 0; k < NJ; ++k) {
        if (4 * k + t < T) {
          const float2 gs = __ldg(gsx2 + static_cast<size_t>(G) * T + 4 * k + t);  // {2^-e, sum of the group}
          const int Va = (c2[k >> 1][k & 1] * 256 + c01[k][1]) * 256 + c01[k][0];
          const int Vb = (c2[k >> 1][2 + (k & 1)] * 256 + c01[k][3]) * 256 + c01[k][2];
          const float qxa = __fmul_rn(__int2float_rn(Va), gs.x), qxb = __fmul_rn(__int2float_rn(Vb), gs.x);
          acc[0][k] = __fmaf_rn(sca, qxa, __fmaf_rn(bia, gs.y, acc[0][k]));
          acc[1][k] = __fmaf_rn(scb, qxb, __fmaf_rn(bib, gs.y, acc[1][k]));
        }
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

struct GmVariant {
  int P, l2pf;
  GmFn fns[kMaxSkinnyRows];
};

template <int P, int L2PF>
GmVariant make_gm() {
  GmVariant v{P, L2PF, {}};
  qm::fill_by_T<1, kMaxSkinnyRows>(v.fns, [](auto t) { return &qmatvec_gmma_kernel<decltype(t)::value, P, L2PF>; });
  return v;
}

// cfg.warps of this kernel selects the L2 prefetch size: 0 = 256 bytes (default), 1 = 128, 2 = none
int l2pf_of(const QMatvecConfig& cfg) { return cfg.warps == 1 ? 128 : (cfg.warps == 2 ? 0 : 256); }

const GmVariant* find_gm(int P, int l2pf) {
  static const GmVariant table[] = {make_gm<4, 256>(), make_gm<6, 256>(), make_gm<8, 256>(), make_gm<6, 128>(),
                                    make_gm<6, 0>()};
  for (const GmVariant& v : table)
    if (v.P == P && v.l2pf == l2pf) return &v;
  return nullptr;
}

}  // namespace

int q4gm_splits(int64_t rows, int64_t cols, int sms) {
  // as many K-splits as keep the units within one wave of resident warps, at least 8 groups a split
  const int64_t tiles = (rows + 15) / 16, ng = cols / 64;
  const int64_t resident = static_cast<int64_t>(std::max(sms, 1)) * kResidentWarpsPerSm;
  int S = 1;
  while (S < 8 && tiles * 2 * S <= resident && ng / (2 * S) >= 8) S *= 2;
  return S;
}

int q4gm_ring(int64_t T, const QMatvecConfig& cfg) {
  if (cfg.stages > 0) return cfg.stages;
  // the deepest ring without spills (ptxas, 128 registers at 2 blocks an SM): 6 groups, 4 at T = 9
  return T <= 8 ? 6 : 4;
}

bool q4gm_available(int64_t T, const QMatvecConfig& cfg) {
  return T >= 1 && T <= kMaxSkinnyRows && cfg.rows_per_warp == 16 && cfg.warps >= 0 && cfg.warps <= 2 && find_gm(q4gm_ring(T, cfg), l2pf_of(cfg)) != nullptr;
}

void q4gm_launch(cudaStream_t s, const QMatvecOut* outs, int n, const float* ws, int64_t T, int64_t cols,
                 const QMatvecConfig& cfg, int sms) {
  const GmVariant* v = find_gm(q4gm_ring(T, cfg), l2pf_of(cfg));
  MERE_CHECK(v != nullptr, "qmatvec", "no compiled group-integer tensor-core kernel for ring depth ", cfg.stages,
             " and L2 prefetch variant ", cfg.warps);
  GmArgs args{};
  args.n = n;
  int64_t units = 0;
  for (int i = 0; i < n; ++i) {
    const QWeightView& W = outs[i].W;
    MERE_CHECK(W.tiled && W.bits == 4 && W.biases == nullptr &&
                   (reinterpret_cast<uintptr_t>(W.codes) & 15u) == 0 && (reinterpret_cast<uintptr_t>(W.scales) & 7u) == 0,
               "qmatvec", "the group-integer kernel needs tiled 4-bit weights (16-byte aligned codes); matrix ", i,
               " is not");
    const int S = q4gm_splits(W.rows, cols, sms);
    units += ((W.rows + 15) / 16 * S + kWarps - 1) / kWarps * kWarps;
    MERE_CHECK(units < (int64_t{1} << 30), "qmatvec", "too many rows for one launch");
    args.m[i] = GmMat{reinterpret_cast<const uint4*>(W.codes), reinterpret_cast<const uint2*>(W.scales), outs[i].y,
                      static_cast<int>(W.rows), static_cast<int>(units), S, outs[i].accumulate ? 1 : 0};
  }
  const prep::Layout L = prep::layout(const_cast<float*>(ws), T, cols, 4);
  launch("qmatvec_gmma_kernel", v->fns[T - 1], dim3(static_cast<unsigned>(units / kWarps)), dim3(kWarps * 32), 0, s,
         args, L.gdg, L.gsx2, static_cast<int>(cols));
}

}  // namespace mere::cuda::detail
