// Tensor-core prefill matmul over affine-quantised weights (gemm.h).
//
// Block tile BM (tokens) x 128 (weight rows) x 64 (k = one quantisation group), 256 threads =
// 8 warps as 2 (M) x 4 (N), warp tile (BM/2) x 32, mma.sync m16n8k16 bf16 -> fp32.
// Per k-tile: X tile (bf16, prepared) and the raw codes go global -> shared by cp.async through a
// STAGES-deep ring; each thread dequantises the 32 codes it copied itself (one weight row, half a
// group) into a bf16 W tile (double-buffered), then one barrier, then ldmatrix + mma.
// Shared tiles are [rows][64] bf16 = 128 bytes a row with 16-byte chunks XOR-swizzled by row & 7,
// so ldmatrix and the dequant stores are free of bank conflicts.
#include "backend/cuda/gemm.h"

#include <cuda_bf16.h>

#include <algorithm>

#include "backend/cuda/async_copy.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/engine/k_math.cuh"
#include "backend/cuda/gemm_dequant.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/moe_tiles.cuh"

namespace mere::cuda {
namespace {

constexpr int kBN = 128, kBK = 64, kThreads = 256;

__device__ __forceinline__ void ldmatrix_x4(uint32_t addr, uint32_t& r0, uint32_t& r1, uint32_t& r2, uint32_t& r3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(addr));
}
__device__ __forceinline__ void mma_bf16(float* c, const uint32_t* a, uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// byte offset of (row, 16-byte chunk c) in a [rows][64] bf16 swizzled tile
__device__ __forceinline__ uint32_t swz(int row, int c) { return static_cast<uint32_t>(row * 128 + ((c ^ (row & 7)) << 4)); }

// SBA: scales/biases through the cp.async ring (true) or register-prefetched one tile ahead (false).
// Stages: as many as keep 2 blocks an SM (<= 113 KB each).
template <int BITS, int BM, bool SBA>
struct Geo {
  static constexpr int kRawRowBytes = kBK * BITS / 8;         // 32 or 64 bytes of codes per row per tile
  static constexpr int kRawStage = kBN * kRawRowBytes;       // 4 or 8 KB
  static constexpr int kSbStage = SBA ? kThreads * 8 : 0;
  static constexpr int kPerStage = BM * 128 + kRawStage + kSbStage;
  static constexpr int kStages = (4 * kPerStage + 2 * kBN * 128 <= 113 * 1024) ? 4 : 3;
  static constexpr int kSmem = kStages * kPerStage + 2 * kBN * 128;
};

struct Params {
  const uint16_t* x;       // [M rows, K] prepared bf16
  const uint32_t* codes;   // [rows_total, K*bits/32]
  const uint16_t* scales;  // [rows_total, K/64]
  const uint16_t* biases;
  float* y;                // [M, ldy]
  int64_t ldy;
  int K, N;                // N: weight rows per expert (dense: all)
  int M;                   // dense: T
  int ktiles_per_split;    // k tiles a split handles
  int64_t split_stride;    // floats between split outputs (split-K workspace), 0 if none
  const int32_t* offsets;  // grouped: [E+1]; nullptr: dense
  int E;                   // grouped: experts
  int64_t sb_total;        // elements of the scales (and biases) array
  int tiled;               // 4-bit tiled layout (qmatvec.h): codes [tiles, K/64, 32] uint4, scales = {s, b} pairs
};

// Dequantise this thread's 32 codes (raw smem, 16 or 32 bytes) into the bf16 W tile.
template <int BITS>
__device__ __forceinline__ void dequant_store(const uint8_t* raw, uint8_t* wtile, int row, int half, uint32_t s_raw,
                                              uint32_t b_raw) {
  if constexpr (BITS == 4) {
    const uint4 w = *reinterpret_cast<const uint4*>(raw);
    const uint32_t ws[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      uint32_t o[4];
      dq::q4_word(ws[i], s_raw, b_raw, o);
      *reinterpret_cast<uint4*>(wtile + swz(row, half * 4 + i)) = make_uint4(o[0], o[1], o[2], o[3]);
    }
  } else {
    const uint4 wa = *reinterpret_cast<const uint4*>(raw);
    const uint4 wb = *reinterpret_cast<const uint4*>(raw + 16);
    const uint32_t ws[8] = {wa.x, wa.y, wa.z, wa.w, wb.x, wb.y, wb.z, wb.w};
    const float s = __uint_as_float(s_raw << 16), b = __uint_as_float(b_raw << 16);
#pragma unroll
    for (int i = 0; i < 4; ++i) {  // 8 codes = words 2i (codes 0..3) and 2i+1 (codes 4..7)
      uint32_t o[4];
      dq::q8_words(ws[2 * i], ws[2 * i + 1], s, b, o);
      *reinterpret_cast<uint4*>(wtile + swz(row, half * 4 + i)) = make_uint4(o[0], o[1], o[2], o[3]);
    }
  }
}

// TILED: 4-bit weights in qmatvec's tiled layout (p.tiled; register scale prefetch only).
template <int BITS, int MI, bool SBA, bool TILED>
__global__ void __launch_bounds__(kThreads, 2) qgemm_kernel(const Params p) {
  pdl_begin();
  constexpr int BM = 32 * MI;
  using G = Geo<BITS, BM, SBA>;
  constexpr int S = G::kStages;
  constexpr int RAW_ROW = G::kRawRowBytes;
  extern __shared__ __align__(128) uint8_t smem[];
  uint8_t* xs = smem;                                  // [S][BM][128 B]
  uint8_t* raw = smem + S * BM * 128;                  // [S][BN][RAW_ROW]
  uint8_t* wt = raw + S * G::kRawStage;        // [2][BN][128 B]
  uint32_t* sbs = reinterpret_cast<uint32_t*>(wt + 2 * kBN * 128);  // SBA: [S][threads][2] scale, bias words

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int warp_m = warp >> 2, warp_n = warp & 3;
  const int n0 = blockIdx.y * kBN;

  // rows of X / Y this block covers
  int m0, m_end;
  int64_t wrow0 = 0;  // first weight row of this expert
  if (p.offsets != nullptr) {
    // grouped: blockIdx.x enumerates the (expert, BM-row tile) pairs in expert order; warp 0 finds ours
    __shared__ int s_tile[3];
    if (warp == 0) {
      const ExpertTile t = find_expert_tile(p.offsets, p.E, blockIdx.x, BM, lane);
      if (lane == 0) {
        s_tile[0] = t.expert;
        s_tile[1] = t.m0;
        s_tile[2] = t.m_end;
      }
    }
    __syncthreads();
    if (s_tile[0] < 0) return;
    m0 = s_tile[1];
    m_end = s_tile[2];
    wrow0 = static_cast<int64_t>(s_tile[0]) * p.N;
  } else {
    m0 = blockIdx.x * BM;
    m_end = p.M;
  }
  const int nkt_total = p.K / kBK;
  const int kt0 = blockIdx.z * p.ktiles_per_split;
  const int kt1 = min(nkt_total, kt0 + p.ktiles_per_split);
  float* y = p.y + blockIdx.z * p.split_stride;

  // ---- this thread's W row (dequant + raw copy) and its scale/bias pointers
  const int my_row = tid >> 1, my_half = tid & 1;
  const int my_n = n0 + my_row;
  const bool my_n_ok = my_n < p.N;
  const int64_t wr = wrow0 + (my_n_ok ? my_n : p.N - 1);
  const uint8_t* my_codes = reinterpret_cast<const uint8_t*>(p.codes) + wr * (static_cast<int64_t>(p.K) * BITS / 8) +
                            my_half * (RAW_ROW / 2);
  const int groups = p.K / 64;
  const int64_t my_sb0 = wr * groups;  // element index of this row's first scale
  // tiled layout (4-bit): row wr's quarter q of group kt is 8 bytes at block (wr/16 * groups + kt),
  // lane (wr%8)*4 + q, half wr%16 >= 8; its {scale | bias << 16} word at ((block * 8 + wr%8) * 2 + half)
  const uint8_t* my_tile = reinterpret_cast<const uint8_t*>(p.codes) + (wr >> 4) * groups * 512 +
                           ((wr & 7) * 4 + 2 * my_half) * 16 + ((wr >> 3) & 1) * 8;
  const uint32_t* my_tsb = reinterpret_cast<const uint32_t*>(p.scales) + ((wr >> 4) * groups * 8 + (wr & 7)) * 2 +
                           ((wr >> 3) & 1);
  auto sb_word = [&](int kt) { return __ldg(my_tsb + static_cast<int64_t>(kt) * 16); };

  auto load_stage = [&](int stage, int kt) {
    // X: BM rows x 8 chunks
#pragma unroll
    for (int i = 0; i < BM * 8 / kThreads; ++i) {
      const int c = tid + i * kThreads;
      const int r = c >> 3, ch = c & 7;
      const int m = m0 + r;
      const bool ok = m < m_end;
      const uint16_t* src = p.x + static_cast<int64_t>(ok ? m : m0) * p.K + kt * kBK + ch * 8;
      cp_async16(smem_u32(xs + stage * BM * 128 + swz(r, ch)), src, ok ? 16 : 0);
    }
    // raw codes: this thread's half row (tiled: its two quarters, 16 bytes apart in the block)
    uint8_t* dst = raw + stage * G::kRawStage + my_row * RAW_ROW + my_half * (RAW_ROW / 2);
    if constexpr (TILED) {
      const uint8_t* src = my_tile + static_cast<int64_t>(kt) * 512;
      cp_async8(smem_u32(dst), src);
      cp_async8(smem_u32(dst + 8), src + 16);
    } else {
      const uint8_t* src = my_codes + static_cast<int64_t>(kt) * RAW_ROW;
#pragma unroll
      for (int i = 0; i < RAW_ROW / 32; ++i) cp_async16(smem_u32(dst + 16 * i), src + 16 * i, my_n_ok ? 16 : 0);
    }
    // scale and bias: the aligned 4-byte word holding element si (a plain copy for the one case
    // where that word would run past the end of the array); read back by this same thread
    if constexpr (SBA) {
      const int64_t si = my_sb0 + kt;
      uint32_t* sd = sbs + (stage * kThreads + tid) * 2;
      if ((si & 1) || si + 1 < p.sb_total) {
        cp_async4(smem_u32(sd), p.scales + (si & ~int64_t{1}));
        cp_async4(smem_u32(sd + 1), p.biases + (si & ~int64_t{1}));
      } else {
        sd[0] = p.scales[si];
        sd[1] = p.biases[si];
      }
    }
  };

  float acc[MI][4][4];
#pragma unroll
  for (int a = 0; a < MI; ++a)
#pragma unroll
    for (int b = 0; b < 4; ++b)
#pragma unroll
      for (int c = 0; c < 4; ++c) acc[a][b][c] = 0.0f;

#pragma unroll
  for (int s = 0; s < S - 1; ++s) {
    if (kt0 + s < kt1) load_stage(s, kt0 + s);
    cp_async_commit();
  }
  uint32_t s_next = 0, b_next = 0;
  if constexpr (!SBA) {
    if constexpr (TILED) {
      const uint32_t w = sb_word(kt0);
      s_next = w & 0xFFFFu, b_next = w >> 16;
    } else {
      s_next = p.scales[my_sb0 + kt0];
      b_next = p.biases[my_sb0 + kt0];
    }
  }

  // ldmatrix lane addressing
  const int a_row = warp_m * (16 * MI) + (lane & 15);  // + mi*16
  const int a_chunk = lane >> 4;                       // + 2*kk
  const int b_row = warp_n * 32 + ((lane >> 4) << 3) + (lane & 7);  // + nj*16
  const int b_chunk = (lane >> 3) & 1;                               // + 2*kk

  for (int kt = kt0; kt < kt1; ++kt) {
    const int it = kt - kt0;
    const int stage = it % S;
    cp_async_wait<S - 2>();
    uint32_t s_cur, b_cur;
    if constexpr (SBA) {
      const uint32_t* sd = sbs + (stage * kThreads + tid) * 2;
      const int sh = static_cast<int>((my_sb0 + kt) & 1) * 16;
      s_cur = (sd[0] >> sh) & 0xFFFFu;
      b_cur = (sd[1] >> sh) & 0xFFFFu;
    } else {
      s_cur = s_next;
      b_cur = b_next;
      if (kt + 1 < kt1) {
        if constexpr (TILED) {
          const uint32_t w = sb_word(kt + 1);
          s_next = w & 0xFFFFu, b_next = w >> 16;
        } else {
          s_next = p.scales[my_sb0 + kt + 1];
          b_next = p.biases[my_sb0 + kt + 1];
        }
      }
    }
    uint8_t* wtile = wt + (it & 1) * (kBN * 128);
    dequant_store<BITS>(raw + stage * G::kRawStage + my_row * RAW_ROW + my_half * (RAW_ROW / 2), wtile, my_row,
                        my_half, s_cur, b_cur);
    __syncthreads();
    if (kt + S - 1 < kt1) load_stage((it + S - 1) % S, kt + S - 1);
    cp_async_commit();

    const uint8_t* xt = xs + stage * BM * 128;
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      uint32_t af[MI][4];
#pragma unroll
      for (int mi = 0; mi < MI; ++mi)
        ldmatrix_x4(smem_u32(xt + swz(a_row + mi * 16, a_chunk + 2 * kk)), af[mi][0], af[mi][1], af[mi][2], af[mi][3]);
      uint32_t bf[4][2];
#pragma unroll
      for (int nj = 0; nj < 2; ++nj)
        ldmatrix_x4(smem_u32(wtile + swz(b_row + nj * 16, b_chunk + 2 * kk)), bf[2 * nj][0], bf[2 * nj][1],
                    bf[2 * nj + 1][0], bf[2 * nj + 1][1]);
#pragma unroll
      for (int mi = 0; mi < MI; ++mi)
#pragma unroll
        for (int ni = 0; ni < 4; ++ni) mma_bf16(acc[mi][ni], af[mi], bf[ni][0], bf[ni][1]);
    }
  }
  cp_async_wait<0>();

  // ---- epilogue: fp32 out
  const bool vec = (p.ldy & 1) == 0;
#pragma unroll
  for (int mi = 0; mi < MI; ++mi)
#pragma unroll
    for (int hrow = 0; hrow < 2; ++hrow) {
      const int m = m0 + warp_m * (16 * MI) + mi * 16 + (lane >> 2) + hrow * 8;
      if (m >= m_end) continue;
      float* yr = y + static_cast<int64_t>(m) * p.ldy;
#pragma unroll
      for (int ni = 0; ni < 4; ++ni) {
        const int n = n0 + warp_n * 32 + ni * 8 + 2 * (lane & 3);
        const float v0 = acc[mi][ni][2 * hrow], v1 = acc[mi][ni][2 * hrow + 1];
        if (vec && n + 1 < p.N) {
          *reinterpret_cast<float2*>(yr + n) = make_float2(v0, v1);
        } else {
          if (n < p.N) yr[n] = v0;
          if (n + 1 < p.N) yr[n + 1] = v1;
        }
      }
    }
}

__global__ void splitk_reduce_kernel(const float* __restrict__ ws, int splits, int64_t stride, int M, int N,
                                     float* __restrict__ y, int64_t ldy) {
  pdl_begin();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= static_cast<int64_t>(M) * N) return;
  const int64_t m = i / N, n = i - m * N;
  float s = ws[i];
  for (int z = 1; z < splits; ++z) s += ws[z * stride + i];
  y[m * ldy + n] = s;
}

// 8 consecutive floats -> 8 bf16 in the order {0,4,1,5,2,6,3,7}
__global__ void prepare_x_kernel(const float* __restrict__ x, const int32_t* __restrict__ idx, int64_t P, int K,
                                 int64_t ldx, uint16_t* __restrict__ xq) {
  pdl_begin();
  const int per_row = K / 8;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= P * per_row) return;
  const int64_t p = i / per_row;
  const int c = static_cast<int>(i - p * per_row);
  const int64_t src_row = idx != nullptr ? idx[p] : p;
  const float4* s = reinterpret_cast<const float4*>(x + src_row * ldx + c * 8);
  const float4 a = s[0], b = s[1];
  uint4 o;
  o.x = dq::bf2_u32(__floats2bfloat162_rn(a.x, b.x));
  o.y = dq::bf2_u32(__floats2bfloat162_rn(a.y, b.y));
  o.z = dq::bf2_u32(__floats2bfloat162_rn(a.z, b.z));
  o.w = dq::bf2_u32(__floats2bfloat162_rn(a.w, b.w));
  reinterpret_cast<uint4*>(xq + p * K)[c] = o;
}

// prepare_x_kernel of silu(g) * u (k::swiglu's rounding), 8 columns a thread
__global__ void prepare_x_swiglu_kernel(const float* __restrict__ g, const float* __restrict__ u, int64_t T, int K,
                                        uint16_t* __restrict__ xq) {
  pdl_begin();
  const int per_row = K / 8;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= T * per_row) return;
  const float4* gs = reinterpret_cast<const float4*>(g) + 2 * i;
  const float4* us = reinterpret_cast<const float4*>(u) + 2 * i;
  const float4 ga = gs[0], gb = gs[1], ua = us[0], ub = us[1];
  auto sw = [](float a, float b) { return __fmul_rn(k::silu(a), b); };
  uint4 o;
  o.x = dq::bf2_u32(__floats2bfloat162_rn(sw(ga.x, ua.x), sw(gb.x, ub.x)));
  o.y = dq::bf2_u32(__floats2bfloat162_rn(sw(ga.y, ua.y), sw(gb.y, ub.y)));
  o.z = dq::bf2_u32(__floats2bfloat162_rn(sw(ga.z, ua.z), sw(gb.z, ub.z)));
  o.w = dq::bf2_u32(__floats2bfloat162_rn(sw(ga.w, ua.w), sw(gb.w, ub.w)));
  reinterpret_cast<uint4*>(xq)[i] = o;
}

__global__ void prepare_x_scalar_kernel(const float* __restrict__ x, const int32_t* __restrict__ idx, int64_t P, int K,
                                        int64_t ldx, uint16_t* __restrict__ xq) {
  pdl_begin();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= P * K) return;
  const int64_t p = i / K;
  const int k = static_cast<int>(i - p * K);
  const int pos = k & 7, src = (pos >> 1) + ((pos & 1) << 2);  // position -> source column in the group of 8
  const int64_t src_row = idx != nullptr ? idx[p] : p;
  const __nv_bfloat16 v = __float2bfloat16_rn(x[src_row * ldx + (k & ~7) + src]);
  xq[i] = *reinterpret_cast<const uint16_t*>(&v);
}

// One block of 1024 threads = 32 warps: stable counting sort of the P = T*k (token, slot) pairs by
// expert. Pairs go in chunks of kSortChunk = 4096; warp w owns pairs [128 w, 128 w + 128) of a chunk,
// in 4 rounds of 32 lanes, and counts them into its own row cnt[w][e] of shared memory (no atomics):
// a pair's rank among its warp's earlier pairs of its expert is the row's count before its round plus
// its rank in the round from __match_any_sync. Then a shuffle scan over the 32 warps per expert gives
// each warp's start, and a block scan over the experts the offsets. One chunk (T = 512 top-8) is
// counted once; more chunks take a counting pass for the offsets, then a pass a chunk. (The previous
// form had a 1024-pair chunk, a serial expert scan on one thread and a 32-step loop a chunk: 17 us.)
constexpr int kSortThreads = 1024, kSortRounds = 4, kSortChunk = kSortThreads * kSortRounds;
// shared ints of moe_sort_kernel: cnt [32][E + 1] (the +1 spreads a column over the banks), tot [E],
// base [E], wsum [32]
__host__ __device__ constexpr int sort_smem_ints(int E) { return 32 * (E + 1) + 2 * E + 32; }

__global__ void __launch_bounds__(kSortThreads) moe_sort_kernel(const int32_t* __restrict__ ids, int P, int k, int E,
                                                                int32_t* __restrict__ offsets,
                                                                int32_t* __restrict__ row_token,
                                                                int32_t* __restrict__ pair_row) {
  pdl_begin();
  extern __shared__ int32_t sm[];
  const int S = E + 1;
  int32_t* cnt = sm;             // [32][S]: per-warp counts, then per-warp exclusive starts within the chunk
  int32_t* tot = cnt + 32 * S;   // [E]: pairs of expert e (in the counted pairs)
  int32_t* base = tot + E;       // [E]: offsets[e] + pairs of expert e in earlier chunks
  int32_t* wsum = base + E;      // [32]: the expert scan's warp sums
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const unsigned lanes_below = (1u << lane) - 1u;
  int ex[kSortRounds], rank[kSortRounds];  // this thread's pairs c0 + 128 warp + 32 r + lane
  auto zero_counts = [&] {
    for (int i = tid; i < 32 * S; i += kSortThreads) cnt[i] = 0;
  };
  auto count = [&](int c0) {  // adds the chunk's pairs into cnt[warp][*]; rank[r] (valid on a zeroed row)
    const int i0 = c0 + warp * 128 + lane;
#pragma unroll
    for (int r = 0; r < kSortRounds; ++r) ex[r] = i0 + 32 * r < P ? ids[i0 + 32 * r] : -1 - lane;  // never matches
#pragma unroll
    for (int r = 0; r < kSortRounds; ++r) {
      const int e = ex[r];
      const unsigned same = __match_any_sync(0xffffffffu, e);
      const int below = __popc(same & lanes_below);
      rank[r] = e >= 0 ? cnt[warp * S + e] + below : 0;
      __syncwarp();
      if (e >= 0 && below == 0) cnt[warp * S + e] += __popc(same);
      __syncwarp();
    }
  };
  auto scan_warps = [&] {  // cnt[w][e] -> pairs of e in warps < w; tot[e] = all of them
    for (int e = warp; e < E; e += 32) {
      const int c = cnt[lane * S + e];
      int incl = c;
#pragma unroll
      for (int off = 1; off < 32; off <<= 1) {
        const int n = __shfl_up_sync(0xffffffffu, incl, off);
        if (lane >= off) incl += n;
      }
      cnt[lane * S + e] = incl - c;
      if (lane == 31) tot[e] = incl;
    }
  };
  auto place = [&](int c0) {  // pair i -> row base[e] + cnt[warp][e] + rank
    const int i0 = c0 + warp * 128 + lane;
#pragma unroll
    for (int r = 0; r < kSortRounds; ++r) {
      const int e = ex[r];
      if (e < 0) continue;
      const int i = i0 + 32 * r, pos = base[e] + cnt[warp * S + e] + rank[r];
      row_token[pos] = i / k;
      pair_row[i] = pos;
    }
  };

  zero_counts();
  __syncthreads();
  for (int c0 = 0; c0 < P; c0 += kSortChunk) count(c0);  // ranks hold only for a single chunk
  __syncthreads();
  scan_warps();
  __syncthreads();
  {  // offsets: exclusive scan of tot over the experts (E <= 1024 = a thread an expert)
    const int c = tid < E ? tot[tid] : 0;
    int incl = c;
#pragma unroll
    for (int off = 1; off < 32; off <<= 1) {
      const int n = __shfl_up_sync(0xffffffffu, incl, off);
      if (lane >= off) incl += n;
    }
    if (lane == 31) wsum[warp] = incl;
    __syncthreads();
    if (warp == 0) {
      const int ws = wsum[lane];
      int wincl = ws;
#pragma unroll
      for (int off = 1; off < 32; off <<= 1) {
        const int n = __shfl_up_sync(0xffffffffu, wincl, off);
        if (lane >= off) wincl += n;
      }
      wsum[lane] = wincl - ws;
      if (lane == 31) offsets[E] = wincl;
    }
    __syncthreads();
    if (tid < E) {
      const int start = wsum[warp] + incl - c;
      base[tid] = start;
      offsets[tid] = start;
    }
    __syncthreads();
  }
  if (P <= kSortChunk) {
    place(0);
    return;
  }
  for (int c0 = 0; c0 < P; c0 += kSortChunk) {
    zero_counts();
    __syncthreads();
    count(c0);
    __syncthreads();
    scan_warps();
    __syncthreads();
    place(c0);
    __syncthreads();
    for (int e = tid; e < E; e += kSortThreads) base[e] += tot[e];
    __syncthreads();
  }
}

__global__ void moe_combine_kernel(const float* __restrict__ y, int64_t ldy, const int32_t* __restrict__ pair_row,
                                   const float* __restrict__ w, int T, int k, int N, float* __restrict__ out, bool accumulate,
                                   const float* __restrict__ shared, const float* __restrict__ sg) {
  pdl_begin();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= static_cast<int64_t>(T) * N) return;
  const int64_t t = i / N, n = i - t * N;
  // the shared expert's term first, as k::moe_combine with no routed experts writes it: fma(g, s, 0)
  float s = shared != nullptr ? __fmaf_rn(k::sigmoid(sg[t]), shared[i], 0.0f) : accumulate ? out[i] : 0.0f;
  for (int j = 0; j < k; ++j) s = fmaf(w[t * k + j], y[static_cast<int64_t>(pair_row[t * k + j]) * ldy + n], s);
  out[i] = s;
}

template <int BITS, int MI, bool SBA, bool TILED = false>
void launch(CudaDevice& dev, const Params& p, dim3 grid) {
  constexpr int smem = Geo<BITS, 32 * MI, SBA>::kSmem;
  // set on every call (cheap): the attribute belongs to the current device, no process-global state here
  MERE_CUDA_CHECK(
      cudaFuncSetAttribute(qgemm_kernel<BITS, MI, SBA, TILED>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  cuda::launch("qgemm_kernel", &qgemm_kernel<BITS, MI, SBA, TILED>, grid, kThreads, smem, dev.stream(), p);
}

template <bool SBA>
void dispatch_sb(CudaDevice& dev, int bits, int bm, const Params& p, dim3 grid) {
  if constexpr (!SBA) {
    if (p.tiled) {  // 4-bit (checked by the caller)
      if (bm == 32) launch<4, 1, false, true>(dev, p, grid);
      else if (bm == 64) launch<4, 2, false, true>(dev, p, grid);
      else launch<4, 4, false, true>(dev, p, grid);
      return;
    }
  }
  if (bits == 4) {
    if (bm == 32) launch<4, 1, SBA>(dev, p, grid);
    else if (bm == 64) launch<4, 2, SBA>(dev, p, grid);
    else launch<4, 4, SBA>(dev, p, grid);
  } else {
    if (bm == 32) launch<8, 1, SBA>(dev, p, grid);
    else if (bm == 64) launch<8, 2, SBA>(dev, p, grid);
    else launch<8, 4, SBA>(dev, p, grid);
  }
}
void dispatch(CudaDevice& dev, int bits, int bm, bool sba, const Params& p, dim3 grid) {
  if (sba) dispatch_sb<true>(dev, bits, bm, p, grid);
  else dispatch_sb<false>(dev, bits, bm, p, grid);
}

void check_weight(const QWeightView& W, const char* where) {
  MERE_CHECK(W.bits == 4 || W.bits == 8, where, "bits: expected 4 or 8, got ", W.bits);
  MERE_CHECK(W.cols > 0 && W.cols % 64 == 0, where, "cols: expected a positive multiple of 64, got ", W.cols);
  MERE_CHECK(W.rows > 0 && W.rows < (int64_t{1} << 31), where, "rows out of range, got ", W.rows);
}

int pick_bm(int64_t T) { return T <= 32 ? 32 : (T <= 64 ? 64 : 128); }

}  // namespace

void qgemm_prepare_x(CudaDevice& dev, const float* x, int64_t T, int64_t K, int64_t ldx, uint16_t* xq) {
  qgemm_prepare_x_gather(dev, x, nullptr, T, K, ldx, xq);
}

void qgemm_prepare_x_swiglu(CudaDevice& dev, const float* g, const float* u, int64_t T, int64_t K, uint16_t* xq) {
  MERE_CHECK(K % 64 == 0 && (reinterpret_cast<uintptr_t>(g) & 15) == 0 && (reinterpret_cast<uintptr_t>(u) & 15) == 0,
             "cuda qgemm_prepare_x_swiglu", "K must be a multiple of 64 and g, u 16-byte aligned (K = ", K, ")");
  if (T <= 0) return;
  DeviceGuard guard(dev.ordinal());
  const int64_t n = T * (K / 8);
  launch("qgemm prepare_x_swiglu", prepare_x_swiglu_kernel, static_cast<unsigned>((n + 255) / 256), 256, 0,
         dev.stream(), g, u, T, static_cast<int>(K), xq);
}

void qgemm_prepare_x_gather(CudaDevice& dev, const float* x, const int32_t* idx, int64_t P, int64_t K, int64_t ldx,
                            uint16_t* xq) {
  MERE_CHECK(K % 64 == 0 && ldx >= K, "cuda qgemm_prepare_x", "K: expected a multiple of 64 <= ldx, got K = ", K,
             ", ldx = ", ldx);
  if (P <= 0) return;
  DeviceGuard guard(dev.ordinal());
  const bool vec = (ldx % 4) == 0 && (reinterpret_cast<uintptr_t>(x) & 15) == 0;
  if (vec) {
    const int64_t n = P * (K / 8);
    launch("qgemm prepare_x", prepare_x_kernel, static_cast<unsigned>((n + 255) / 256), 256, 0, dev.stream(), x, idx,
           P, static_cast<int>(K), ldx, xq);
  } else {
    const int64_t n = P * K;
    launch("qgemm prepare_x_scalar", prepare_x_scalar_kernel, static_cast<unsigned>((n + 255) / 256), 256, 0,
           dev.stream(), x, idx, P, static_cast<int>(K), ldx, xq);
  }
}

QGemmConfig qgemm_default_config(const CudaDevice& dev, const QWeightView& W, int64_t T, bool have_ws) {
  QGemmConfig c;
  c.bm = pick_bm(T);
  c.split_k = 1;
  if (have_ws) {
    const int64_t blocks = ((T + c.bm - 1) / c.bm) * ((W.rows + kBN - 1) / kBN);
    const int64_t slots = 2LL * dev.sm_count();
    const int64_t ktiles = W.cols / kBK;
    // split while the grid fills less than ~80% of one wave and each split keeps >= 16 k-tiles
    while (c.split_k < 4 && blocks * c.split_k * 5 < slots * 4 && ktiles / (c.split_k * 2) >= 16) c.split_k *= 2;
  }
  return c;
}

int64_t qgemm_workspace_floats(const CudaDevice& dev, const QWeightView& W, int64_t T) {
  const QGemmConfig c = qgemm_default_config(dev, W, T, true);
  return c.split_k > 1 ? c.split_k * T * W.rows : 0;
}

void qgemm(CudaDevice& dev, const QWeightView& W, const uint16_t* xq, int64_t T, float* y, int64_t ldy, float* ws,
           QGemmConfig cfg) {
  check_weight(W, "cuda qgemm");
  MERE_CHECK(T >= 1 && T < (int64_t{1} << 31) && ldy >= W.rows, "cuda qgemm", "T / ldy out of range, got T = ", T,
             ", ldy = ", ldy);
  const QGemmConfig def = qgemm_default_config(dev, W, T, ws != nullptr);
  if (cfg.bm == 0) cfg.bm = def.bm;
  if (cfg.split_k == 0) cfg.split_k = def.split_k;
  MERE_CHECK(cfg.bm == 32 || cfg.bm == 64 || cfg.bm == 128, "cuda qgemm", "bm: expected 32, 64 or 128, got ", cfg.bm);
  MERE_CHECK(cfg.split_k == 1 || ws != nullptr, "cuda qgemm", "split_k > 1 needs a workspace");
  DeviceGuard guard(dev.ordinal());
  const int ktiles = static_cast<int>(W.cols / kBK);
  const int per = (ktiles + cfg.split_k - 1) / cfg.split_k;
  const int splits = (ktiles + per - 1) / per;
  Params p{};
  p.x = xq;
  p.codes = W.codes;
  p.scales = W.scales;
  p.biases = W.biases;
  p.K = static_cast<int>(W.cols);
  p.N = static_cast<int>(W.rows);
  p.M = static_cast<int>(T);
  p.ktiles_per_split = per;
  p.offsets = nullptr;
  p.sb_total = W.rows * (W.cols / 64);
  p.tiled = W.tiled ? 1 : 0;
  MERE_CHECK(!W.tiled || (W.bits == 4 && cfg.scale_prefetch != 1), "cuda qgemm",
             "tiled weights: 4-bit with the register scale prefetch only");
  if (splits > 1) {
    p.y = ws;
    p.ldy = W.rows;
    p.split_stride = T * W.rows;
  } else {
    p.y = y;
    p.ldy = ldy;
    p.split_stride = 0;
  }
  const dim3 grid(static_cast<unsigned>((T + cfg.bm - 1) / cfg.bm), static_cast<unsigned>((W.rows + kBN - 1) / kBN),
                  static_cast<unsigned>(splits));
  // v1 (register prefetch) is the default: the cp.async path measured slower (docs/cuda-kernels.md §5)
  dispatch(dev, W.bits, cfg.bm, cfg.scale_prefetch == 1, p, grid);
  if (splits > 1) {
    const int64_t n = T * W.rows;
    launch("qgemm splitk_reduce", splitk_reduce_kernel, static_cast<unsigned>((n + 255) / 256), 256, 0, dev.stream(),
           ws, splits, p.split_stride, static_cast<int>(T), static_cast<int>(W.rows), y, ldy);
  }
}

void qgemm_grouped(CudaDevice& dev, const QWeightView& W, int64_t E, int64_t Ne, const uint16_t* xq,
                   const int32_t* offsets, int64_t P, float* y, int64_t ldy) {
  check_weight(W, "cuda qgemm_grouped");
  MERE_CHECK(!W.tiled, "cuda qgemm_grouped", "tiled weights are not supported for grouped experts");
  MERE_CHECK(E >= 1 && Ne >= 1 && E * Ne == W.rows, "cuda qgemm_grouped", "experts: expected E * Ne = rows (", W.rows,
             "), got E = ", E, ", Ne = ", Ne);
  MERE_CHECK(ldy >= Ne && P >= 0 && P < (int64_t{1} << 31), "cuda qgemm_grouped", "ldy / P out of range");
  if (P == 0) return;
  DeviceGuard guard(dev.ordinal());
  const int bm = 32;
  Params p{};
  p.x = xq;
  p.codes = W.codes;
  p.scales = W.scales;
  p.biases = W.biases;
  p.y = y;
  p.ldy = ldy;
  p.K = static_cast<int>(W.cols);
  p.N = static_cast<int>(Ne);
  p.M = static_cast<int>(P);
  p.ktiles_per_split = static_cast<int>(W.cols / kBK);
  p.split_stride = 0;
  p.offsets = offsets;
  p.E = static_cast<int>(E);
  p.sb_total = W.rows * (W.cols / 64);
  const int64_t tiles = expert_tiles_max(P, E, bm);
  const dim3 grid(static_cast<unsigned>(tiles), static_cast<unsigned>((Ne + kBN - 1) / kBN), 1);
  dispatch(dev, W.bits, bm, false, p, grid);
}

void moe_sort_pairs(CudaDevice& dev, const int32_t* ids, int64_t T, int64_t k, int64_t E, int32_t* offsets,
                    int32_t* row_token, int32_t* pair_row) {
  MERE_CHECK(T >= 1 && k >= 1 && E >= 1 && E <= 1024 && T * k < (int64_t{1} << 30), "cuda moe_sort_pairs",
             "sizes out of range: T = ", T, ", k = ", k, ", E = ", E);
  DeviceGuard guard(dev.ordinal());
  const int smem = sort_smem_ints(static_cast<int>(E)) * 4;
  MERE_CUDA_CHECK(cudaFuncSetAttribute(moe_sort_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  launch("moe_sort_kernel", moe_sort_kernel, 1, kSortThreads, smem, dev.stream(), ids, static_cast<int>(T * k),
         static_cast<int>(k), static_cast<int>(E), offsets, row_token, pair_row);
}

void moe_combine(CudaDevice& dev, const float* y, int64_t ldy, const int32_t* pair_row, const float* w, int64_t T,
                 int64_t k, int64_t N, float* out, bool accumulate, const float* shared, const float* sg) {
  MERE_CHECK((shared == nullptr) == (sg == nullptr), "cuda moe_combine", "the shared expert needs both its output and its gate");
  DeviceGuard guard(dev.ordinal());
  const int64_t n = T * N;
  launch("moe_combine_kernel", moe_combine_kernel, static_cast<unsigned>((n + 255) / 256), 256, 0, dev.stream(), y,
         ldy, pair_row, w, static_cast<int>(T), static_cast<int>(k), static_cast<int>(N), out, accumulate, shared, sg);
}

}  // namespace mere::cuda
