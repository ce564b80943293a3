// Device-side pieces of the MoE kernels (k_moe.cu, k_moe_block.cu): the routing of one token by a
// warp, the dequantisation and prescaled-x staging of qmatvec's SIMT contract, and the warp row-dots
// over staged x. Every kernel that uses them gets bitwise the same ids, weights and row results.
// The contract (qmatvec.h): lane l takes 16-byte code chunks j = l, l+32, ...; per chunk qx = fma
// chain over its columns, acc = fma(scale, qx, fma(bias, sum_chunk(x), acc)); then an xor butterfly.
// x lives in shared memory, prescaled per code slot (as qmatvec_prepare) and padded per chunk
// (stride E+4 floats: the float4 reads of 8 consecutive lanes hit distinct banks).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/async_copy.cuh"
#include "backend/cuda/engine/dmatrix.h"
#include "backend/cuda/engine/k_math.cuh"
#include "backend/cuda/l2_ahead.h"

namespace mere::cuda::k {
namespace {

constexpr int kRouteThreads = 32;

constexpr int kTopkPerLane = 8;  // the sorted top-k's entries a lane holds: E <= 256

// The top-K of p[0, E) by one warp, every lane with its entries e = lane + 32 i sorted in registers
// (by value, then index: the rounds' order), then per round one warp max of the heads' keys and one
// warp min of the indices that hold it (REDUX), and the winner's lane pops its head: the same (bv, bi)
// a round as route_token's rounds of scans and shuffles, which rescan 8 entries a lane and run a
// 10-shuffle butterfly a round. p holds probabilities (>= +0, never -0) or NaN; a NaN entry is never
// taken, as in the rounds (v > bv is false for it); with none left a round gives (-1, E).
__device__ __forceinline__ void topk_round_sorted(const float* p, int E, int K, float* pk, int32_t* sidx,
                                                  int32_t* __restrict__ idx, float& topsum) {
  const int lane = threadIdx.x & 31;
  float v[kTopkPerLane];
  int ix[kTopkPerLane];
#pragma unroll
  for (int i = 0; i < kTopkPerLane; ++i) {
    const int e = lane + 32 * i;
    const float x = e < E ? p[e] : -1.0f;
    const bool ok = e < E && x == x;
    v[i] = ok ? x : -1.0f;
    ix[i] = ok ? e : E;
  }
#pragma unroll
  for (int a = 0; a < kTopkPerLane - 1; ++a)  // bubble network: (value desc, index asc)
#pragma unroll
    for (int b = kTopkPerLane - 1; b > a; --b) {
      const bool swap = v[b] > v[b - 1] || (v[b] == v[b - 1] && ix[b] < ix[b - 1]);
      const float tv = v[b];
      const int ti = ix[b];
      v[b] = swap ? v[b - 1] : v[b];
      ix[b] = swap ? ix[b - 1] : ix[b];
      v[b - 1] = swap ? tv : v[b - 1];
      ix[b - 1] = swap ? ti : ix[b - 1];
    }
  for (int k = 0; k < K; ++k) {
    const unsigned key = v[0] >= 0.0f ? __float_as_uint(v[0]) + 1u : 0u;  // floats >= +0 order as their bits
    const unsigned mk = __reduce_max_sync(0xffffffffu, key);
    const int bi = static_cast<int>(__reduce_min_sync(0xffffffffu, key == mk ? static_cast<unsigned>(ix[0]) : ~0u));
    const float bv = mk == 0u ? -1.0f : __uint_as_float(mk - 1u);
    const bool pop = mk != 0u && ix[0] == bi;
#pragma unroll
    for (int i = 0; i < kTopkPerLane - 1; ++i) {
      v[i] = pop ? v[i + 1] : v[i];
      ix[i] = pop ? ix[i + 1] : ix[i];
    }
    v[kTopkPerLane - 1] = pop ? -1.0f : v[kTopkPerLane - 1];
    ix[kTopkPerLane - 1] = pop ? E : ix[kTopkPerLane - 1];
    const int id = bi >= E ? 0 : bi;  // only with NaN probabilities, as the rounds
    if (lane == 0) {
      pk[k] = bv;
      if (sidx) sidx[k] = id;
      if (idx) idx[k] = id;
    }
    topsum = __fadd_rn(topsum, bv);  // the CPU's order: k = 0, 1, ...
  }
  __syncwarp();
}

// The routing of one token by one warp (lane = threadIdx.x & 31): softmax of lg[0, E) into p[0, E)
// (shared), top-k into p[E, E + K) and sidx[0, K) (shared, may be null), and, where given, the ids
// and (renormalised) weights into idx[0, K) / w[0, K) (global). Every kernel that routes runs this
// code, so their ids and weights are bitwise the same; `sorted` (E <= 256) takes the top-k with
// topk_round_sorted, else K rounds of a scan and a shuffle butterfly: the same ids and weights
// (cuda_check's routing check holds the two to each other and to the host).
__device__ __forceinline__ void route_token(const float* __restrict__ lg, int E, int K, bool renorm, float* p,
                                            int32_t* sidx, int32_t* __restrict__ idx, float* __restrict__ w,
                                            bool sorted = false) {
  const int lane = threadIdx.x & 31;
  float mx = -INFINITY;
  for (int e = lane; e < E; e += 32) mx = fmaxf(mx, lg[e]);
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
  float sum = 0.0f;
  for (int e = lane; e < E; e += 32) {
    const float v = expf(__fsub_rn(lg[e], mx));
    p[e] = v;
    sum = __fadd_rn(sum, v);
  }
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) sum = __fadd_rn(sum, __shfl_xor_sync(0xffffffffu, sum, off));
  for (int e = lane; e < E; e += 32) p[e] = __fdiv_rn(p[e], sum);
  __syncwarp();
  float topsum = 0.0f;
  if (sorted && E <= 32 * kTopkPerLane) {
    topk_round_sorted(p, E, K, p + E, sidx, idx, topsum);
  } else {
    for (int k = 0; k < K; ++k) {
      float bv = -1.0f;
      int bi = E;
      for (int e = lane; e < E; e += 32) {
        const float v = p[e];
        if (v > bv) {  // ascending e per lane: the first of equal values wins
          bv = v;
          bi = e;
        }
      }
#pragma unroll
      for (int off = 16; off > 0; off >>= 1) {
        const float ov = __shfl_xor_sync(0xffffffffu, bv, off);
        const int oi = __shfl_xor_sync(0xffffffffu, bi, off);
        if (ov > bv || (ov == bv && oi < bi)) {
          bv = ov;
          bi = oi;
        }
      }
      // every lane holds the same (bv, bi); taken entries become -2 (probabilities are >= 0)
      if (bi >= E) bi = 0;  // only with NaN logits
      __syncwarp();
      if (lane == 0) {
        p[bi] = -2.0f;
        p[E + k] = bv;
        if (sidx) sidx[k] = bi;
        if (idx) idx[k] = bi;
      }
      __syncwarp();
      topsum = __fadd_rn(topsum, bv);  // the CPU's order: k = 0, 1, ...
    }
  }
  if (w)
    for (int k = lane; k < K; k += 32) w[k] = renorm ? __fdiv_rn(p[E + k], topsum) : p[E + k];
}

__device__ __forceinline__ float bf(uint16_t b) { return __uint_as_float(static_cast<uint32_t>(b) << 16); }

constexpr uint32_t kMagic = 0x4B000000u;
constexpr float kMagicF = 8388608.0f;

template <uint32_t kMask>
__device__ __forceinline__ float magic_minus(uint32_t w) {
  uint32_t r;
  asm("lop3.b32 %0, %1, %2, %3, 0xEA;" : "=r"(r) : "r"(w), "n"(kMask), "r"(kMagic));
  return __fsub_rn(__uint_as_float(r), kMagicF);
}

// one word of codes -> q * 2^(BITS*slot) exactly (x is prescaled by the inverse)
template <int BITS>
__device__ __forceinline__ void dequant_word(uint32_t w, float* d) {
  if constexpr (BITS == 4) {
    d[0] = magic_minus<0x0000000Fu>(w);
    d[1] = magic_minus<0x000000F0u>(w);
    d[2] = magic_minus<0x00000F00u>(w);
    d[3] = magic_minus<0x0000F000u>(w);
    d[4] = magic_minus<0x000F0000u>(w);
    const uint32_t h = w >> 20;
    d[5] = magic_minus<0x0000000Fu>(h);
    d[6] = magic_minus<0x000000F0u>(h);
    d[7] = magic_minus<0x00000F00u>(h);
  } else {
    d[0] = magic_minus<0x000000FFu>(w);
    d[1] = magic_minus<0x0000FF00u>(w);
    const uint32_t h = w >> 16;
    d[2] = magic_minus<0x000000FFu>(h);
    d[3] = magic_minus<0x0000FF00u>(h);
  }
}

template <int BITS>
__device__ __forceinline__ float slot_prescale(int s) {
  if constexpr (BITS == 4) {
    constexpr float k4[8] = {1.0f, 0.0625f, 0.00390625f, 0.000244140625f, 1.52587890625e-05f, 1.0f, 0.0625f,
                             0.00390625f};
    return k4[s];
  } else {
    return (s & 1) ? 0.00390625f : 1.0f;
  }
}

template <int BITS>
struct Geo {
  static constexpr int E = 128 / BITS;  // columns of a 16-byte chunk
  static constexpr int PW = 32 / BITS;  // columns of a word
  static constexpr int S = E + 4;       // padded floats of a chunk in shared memory
};

// Shared x: chunks [0, nchunk) of src (contiguous floats), prescaled, padded; xsum[c] = sum of the
// chunk's raw values in column order. Block-cooperative; the caller synchronises.
// Threads [first, blockDim.x) take the chunks (each chunk's values do not depend on which thread).
// CG: src is read through the L2 only (__ldcg): data other blocks of the same launch wrote before a
// grid barrier (grid_sync.cuh), of which no L1 line may be trusted.
template <int BITS, bool CG = false>
__device__ __forceinline__ void fill_x(const float* __restrict__ src, int nchunk, float* xs, float* xsum,
                                       int first = 0) {
  using G = Geo<BITS>;
  for (int c = static_cast<int>(threadIdx.x) - first; c < nchunk; c += static_cast<int>(blockDim.x) - first) {
    if (c < 0) break;
    const float* xr = src + static_cast<int64_t>(c) * G::E;
    float s = 0.0f;
#pragma unroll
    for (int e = 0; e < G::E; e += 4) {
      const float4 v = CG ? __ldcg(reinterpret_cast<const float4*>(xr + e)) : *reinterpret_cast<const float4*>(xr + e);
      s = __fadd_rn(__fadd_rn(__fadd_rn(__fadd_rn(s, v.x), v.y), v.z), v.w);
      float4 o;
      o.x = __fmul_rn(v.x, slot_prescale<BITS>((e + 0) % G::PW));
      o.y = __fmul_rn(v.y, slot_prescale<BITS>((e + 1) % G::PW));
      o.z = __fmul_rn(v.z, slot_prescale<BITS>((e + 2) % G::PW));
      o.w = __fmul_rn(v.w, slot_prescale<BITS>((e + 3) % G::PW));
      *reinterpret_cast<float4*>(xs + c * G::S + e) = o;
    }
    xsum[c] = s;
  }
}

struct QRow {
  const uint4* codes;  // the row's chunks
  const uint16_t* sc;  // the row's group scales / biases
  const uint16_t* bi;
  int xoff;            // first chunk of this row's x in shared memory
};

__device__ __forceinline__ QRow qrow(const DMat& M, int64_t row, int xoff) {
  const int64_t nchunk = M.cols * M.bits / 128, ng = M.cols / 64;
  return QRow{reinterpret_cast<const uint4*>(M.data) + row * nchunk, M.scales + row * ng, M.biases + row * ng, xoff};
}

// NR row-dots of nchunk chunks each over shared x; returns the butterfly-reduced sums (all lanes).
// The first chunk set (j = lane) may be preloaded into wv by the caller (preloaded = true).
template <int BITS, int NR>
__device__ __forceinline__ void load_rows(const QRow (&r)[NR], int j, int nchunk, uint4 (&wv)[NR]) {
  if (j < nchunk) {
#pragma unroll
    for (int i = 0; i < NR; ++i) wv[i] = __ldg(r[i].codes + j);
  }
}

// Asks the L2 for the chunks j = first, first + 32, ... of a row (first = lane: the lane's chunks;
// lane + 32: those after the first set, which load_rows holds in registers); no registers held.
__device__ __forceinline__ void prefetch_row(const uint4* codes, int first, int nchunk) {
  for (int j = first; j < nchunk; j += 32) asm volatile("prefetch.global.L2 [%0];" ::"l"(codes + j));
}

// One chunk set's step of NR row-dots: chunk j of each row (codes w, group scale sv / bias bv as
// loaded) against shared x, into acc (the contract's per-chunk order). dot_rows and dot_sets both run
// it, so a row's sum has the same bits whichever way its codes and scales were asked for.
template <int BITS, int NR>
__device__ __forceinline__ void chunk_dot(const QRow (&r)[NR], int j, const float* xs, const float* xsum,
                                          const uint4 (&wv)[NR], const uint16_t (&sv)[NR], const uint16_t (&bv)[NR],
                                          float (&acc)[NR]) {
  using G = Geo<BITS>;
  float qx[NR];
#pragma unroll
  for (int i = 0; i < NR; ++i) qx[i] = 0.0f;
#pragma unroll
  for (int k = 0; k < 4; ++k) {
#pragma unroll
    for (int i = 0; i < NR; ++i) {
      const float4* xp = reinterpret_cast<const float4*>(xs + (r[i].xoff + j) * G::S + k * G::PW);
      float xv[G::PW];
#pragma unroll
      for (int e = 0; e < G::PW; e += 4) {
        const float4 v4 = xp[e / 4];
        xv[e] = v4.x;
        xv[e + 1] = v4.y;
        xv[e + 2] = v4.z;
        xv[e + 3] = v4.w;
      }
      const uint32_t word = k == 0 ? wv[i].x : (k == 1 ? wv[i].y : (k == 2 ? wv[i].z : wv[i].w));
      float d[G::PW];
      dequant_word<BITS>(word, d);
#pragma unroll
      for (int e = 0; e < G::PW; ++e) qx[i] = __fmaf_rn(d[e], xv[e], qx[i]);
    }
  }
#pragma unroll
  for (int i = 0; i < NR; ++i) acc[i] = __fmaf_rn(bf(sv[i]), qx[i], __fmaf_rn(bf(bv[i]), xsum[r[i].xoff + j], acc[i]));
}

// The group scales and biases of chunk j of each row (j < nchunk).
template <int BITS, int NR>
__device__ __forceinline__ void load_scales(const QRow (&r)[NR], int j, uint16_t (&sv)[NR], uint16_t (&bv)[NR]) {
  const int g = j * Geo<BITS>::E / 64;
#pragma unroll
  for (int i = 0; i < NR; ++i) {
    sv[i] = __ldg(r[i].sc + g);
    bv[i] = __ldg(r[i].bi + g);
  }
}

// The warp's xor butterfly of each row's per-lane sums: every lane gets the row's dot.
template <int NR>
__device__ __forceinline__ void reduce_rows(const float (&acc)[NR], float (&out)[NR]) {
#pragma unroll
  for (int i = 0; i < NR; ++i) {
    float v = acc[i];
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) v = __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, off));
    out[i] = v;
  }
}

// NR row-dots of nchunk chunks each over shared x (lane l: chunks l, l + 32, ...); the first set's codes
// preloaded in wv (load_rows), the scales and later sets asked for as the loop reaches them.
template <int BITS, int NR>
__device__ __forceinline__ void dot_rows(const QRow (&r)[NR], int nchunk, const float* xs, const float* xsum,
                                         uint4 (&wv)[NR], float (&out)[NR]) {
  const int lane = threadIdx.x & 31;
  float acc[NR];
#pragma unroll
  for (int i = 0; i < NR; ++i) acc[i] = 0.0f;
  for (int j = lane; j < nchunk; j += 32) {
    uint16_t sv[NR], bv[NR];
    load_scales<BITS, NR>(r, j, sv, bv);
    chunk_dot<BITS, NR>(r, j, xs, xsum, wv, sv, bv, acc);
    if (j + 32 < nchunk) load_rows<BITS, NR>(r, j + 32, nchunk, wv);
  }
  reduce_rows<NR>(acc, out);
}

// A row's chunks when they fit NS chunk sets (nchunk <= 32 NS; lane l: chunks l + 32 s, s < NS), with
// their group scales and biases, all asked for at once (load_sets, before a barrier or the PDL wait),
// so that dot_sets waits for one round trip where dot_rows waits for the codes, then the scales, then
// each later set; the rows' addresses are dead once asked for.
template <int NR, int NS>
struct RowSets {
  uint4 w[NS][NR];
  uint16_t s[NS][NR], b[NS][NR];
};

// Whether rows of nchunk chunks fit NS sets (the callers' host-side check).
constexpr bool fits_sets(int64_t nchunk, int NS) { return nchunk >= 1 && nchunk <= 32 * int64_t{NS}; }

template <int BITS, int NR, int NS>
__device__ __forceinline__ void load_sets(const QRow (&r)[NR], int nchunk, RowSets<NR, NS>& q) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int s = 0; s < NS; ++s) {
    const int j = lane + 32 * s;
    if (j < nchunk) {
      load_rows<BITS, NR>(r, j, nchunk, q.w[s]);
      load_scales<BITS, NR>(r, j, q.s[s], q.b[s]);
    }
  }
}

// dot_rows over the sets load_sets asked for (nchunk <= 32 NS): the same per-chunk steps in the same
// order, so bitwise the same sums.
template <int BITS, int NR, int NS>
__device__ __forceinline__ void dot_sets(const QRow (&r)[NR], int nchunk, const float* xs, const float* xsum,
                                         const RowSets<NR, NS>& q, float (&out)[NR]) {
  const int lane = threadIdx.x & 31;
  float acc[NR];
#pragma unroll
  for (int i = 0; i < NR; ++i) acc[i] = 0.0f;
#pragma unroll
  for (int s = 0; s < NS; ++s)
    if (lane + 32 * s < nchunk) chunk_dot<BITS, NR>(r, lane + 32 * s, xs, xsum, q.w[s], q.s[s], q.b[s], acc);
  reduce_rows<NR>(acc, out);
}

constexpr int kWarps = 8;      // warps of a block
constexpr int kUpRows = 2;     // rows a warp of moe_gate_up owns (gate and up of each: 4 row-dots)
constexpr int kDownGroup = 8;  // expert rows of moe_down in flight per warp

// silu(gate) * up of a warp's pair rows r0 + lane (lanes < kUpRows) from its 2 kUpRows row-dots d (the gate
// rows, then the up rows), stored at out[r0 + lane]: how every gate/up kernel stores h.
__device__ __forceinline__ void store_pair(const float (&d)[2 * kUpRows], int r0, int rows, float* out) {
  const int lane = threadIdx.x & 31;
  if (lane < kUpRows && r0 + lane < rows) {
    float gv = d[0], uv = d[kUpRows];
#pragma unroll
    for (int i = 1; i < kUpRows; ++i)
      if (lane == i) gv = d[i], uv = d[kUpRows + i];
    out[r0 + lane] = __fmul_rn(silu(gv), uv);
  }
}

// Asks the L2 for share `part` of `parts` of one matrix's codes (cb bytes from `codes`) and of its g group
// scales and biases (thread-level: the caller picks the thread); rounded inward to 16 bytes.
__device__ __forceinline__ void prefetch_share(const char* codes, const uint16_t* sc, const uint16_t* bi, int64_t cb,
                                               int64_t g, int part, int parts) {
  const L2Share s[3] = {l2_share(reinterpret_cast<uintptr_t>(codes), cb, part, parts),
                        l2_share(reinterpret_cast<uintptr_t>(sc), g * 2, part, parts),
                        l2_share(reinterpret_cast<uintptr_t>(bi), g * 2, part, parts)};
#pragma unroll
  for (int i = 0; i < 3; ++i)
    if (s[i].hi > s[i].lo) prefetch_l2_bulk(reinterpret_cast<const void*>(s[i].lo), static_cast<uint32_t>(s[i].hi - s[i].lo));
}

// Thread 0 of the block asks the L2 for share `part` of `parts` of matrix `expert` of the stacked d
// (codes, scales and biases): a gate/up block's share of the down rows its expert will need.
__device__ __forceinline__ void prefetch_expert_share(const DMat& d, int64_t expert, int part, int parts) {
  if (threadIdx.x != 0) return;
  const int64_t cb = d.rows * d.cols * d.bits / 8, g = d.rows * (d.cols / 64);
  prefetch_share(static_cast<const char*>(d.data) + expert * cb, d.scales + expert * g, d.biases + expert * g, cb, g,
                 part, parts);
}

// Floats of the staged x of `cols` columns at `bits` (chunks of E + 4 floats, then the chunk sums).
inline size_t smem_floats(int bits, int64_t cols) {
  const int64_t E = 128 / bits, nchunk = cols / E;
  return static_cast<size_t>(nchunk * (E + 4) + nchunk);
}

inline bool fits(const DMat& m, int bits, int64_t cols) {
  return m.data && m.bits == bits && m.cols == cols && cols % 128 == 0;
}

}  // namespace
}  // namespace mere::cuda::k
