// GatedDeltaNet prefill with the 4-token blocks' products on the tensor cores (gdn_prefill.h
// gdn_prefill_tc; MERE_CUDA_GDN_PREFILL=tc).
//
// Why: gdn_prefill_c4 is issue-bound (ncu, session 19: 422 instructions a 4-token block a warp of 4
// rows, 0.70 issued a scheduler), and 192 of those 422 are the FMAs of two small matrix products a
// block: the dot products R [k_0..3 q_0..3] ([rows x 128] x [128 x 8]) and the update R += F K^T
// ([rows x 4] x [4 x 128]). Here they run as mma.sync; the rest is c4's math unchanged (S = c R, the
// 4 x 4 recurrence a row from the Gram entries, the same coefficients: gdn_prefill_c4.cu's header).
//
// Precision (3xTF32): x = hi + lo, hi = x truncated to tf32, lo = x - hi (read as tf32 by the tensor
// core, which ignores its low 13 bits); a product is lo hi + hi lo + hi hi (lo lo, ~2^-21 relative,
// dropped), accumulated in fp32 by the tensor core: ~2^-20 relative a product.
//
// Layout: a block owns the stage's kRowsPerBlock = 16 rows of one value head (the mma's M) and has P
// warps (1, 2 or 4); warp w holds the columns col0 = 128 w / P .. + 128 / P - 1. Lane (g = lane / 4,
// t = lane % 4) holds rows g and g + 8 at columns col0 + 16 i + 4 t .. + 3, i < 8 / P (ra[i], rb[i]:
// 64 / P floats, in registers for all T). The order of the columns inside an mma is free as long as its
// operands agree:
//   * dot products, m16n8k8 tile (i, e = 0, 1): its k-columns t and t + 4 are the lane's columns
//     col0 + 16 i + 4 t + 2 e and + 1, so A = {ra.x, rb.x, ra.y, rb.y} (e = 0) or {ra.z, rb.z, ra.w,
//     rb.w} (e = 1), and B (k t, t + 4 at n g) the same two columns of token n's k (n < 4) or q (n >= 4):
//     one float4 of shared memory a lane and i;
//   * update, m16n8k4 tile (i, e): its C columns 2 t, 2 t + 1 stand for the same two columns, so the
//     product's C fragment adds onto R's registers as they are (no shuffle), A = F (rows g, g + 8 at
//     token t) and B = k_t at the column that C column g stands for (col0 + 16 i + 4 (g / 2) + g % 2 + 2 e).
// The dot products' C fragment gives lane t A_{2t}, A_{2t+1} (t < 2) or B_{2t-4}, B_{2t-3} (t >= 2) of
// rows g and g + 8 (summed over the P warps in shared memory); one xor-1 exchange gives each lane all 4
// of row g + 8 (t % 2). The a lanes (t < 2) solve the recurrence, the b lanes take d with an xor-2
// exchange (warp 0's write o), and one shuffle gives every lane F of both its rows at its token. k and
// q are staged with an odd token's 16-byte chunks at j ^ 4, so the 8 lanes of a quarter-warp (tokens g
// and g + 1) read both halves of the banks.
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/env_choice.h"
#include "backend/cuda/gdn_prefill.h"
#include "backend/cuda/gdn_prefill_c4.cuh"
#include "backend/cuda/gdn_prefill_stage.cuh"
#include "backend/cuda/launch.cuh"

namespace mere::cuda {
namespace {

using namespace gdn_stage;
using namespace gdn_c4;
constexpr int kBlocks = kChunk / 4;  // 4-token blocks a chunk
constexpr int kSwz = 4;              // an odd token's 16-byte k / q chunk j at j ^ 4 (columns ^ 16)
constexpr unsigned kFull = 0xffffffffu;

struct Tf32 {
  uint32_t hi, lo;
};
// x = hi + lo with hi = x truncated to tf32 (its low 13 bits cleared: one LOP3) and lo = x - hi (exact,
// |lo| < 2^-10 |x|), which the tensor core reads as tf32 by ignoring its low 13 bits: hi + tf32(lo)
// keeps ~21 bits of x. (cvt.rna.tf32.f32 costs several integer instructions on sm_90: ncu, s20a.)
__device__ __forceinline__ Tf32 split(float x) {
  const uint32_t hi = __float_as_uint(x) & 0xFFFFE000u;
  return {hi, __float_as_uint(__fsub_rn(x, __uint_as_float(hi)))};
}
// d += a b (m16n8k8: a rows g, g + 8 at k t, then at k t + 4; b k t, t + 4 at n g; d rows g, g + 8 at n 2t, 2t + 1)
__device__ __forceinline__ void mma8(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                     uint32_t b1) {
  asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
// d = a b (mma8 with a zero accumulator)
__device__ __forceinline__ void mma8z(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                      uint32_t b1) {
  asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%10, %10, %10, %10};"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1), "f"(0.0f));
}
// c += a b (m16n8k4: a rows g, g + 8 at k t; b k t at n g; c rows g, g + 8 at n 2t, 2t + 1)
__device__ __forceinline__ void mma4(float& c0, float& c1, float& c2, float& c3, uint32_t a0, uint32_t a1, uint32_t b0) {
  asm("mma.sync.aligned.m16n8k4.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5}, {%6}, {%0, %1, %2, %3};"
      : "+f"(c0), "+f"(c1), "+f"(c2), "+f"(c3)
      : "r"(a0), "r"(a1), "r"(b0));
}
// acc[0..2] (+)= the 3xTF32 product of A = {a0, a1, a2, a3} and B = {b0, b1} (lo hi, hi lo, hi hi);
// First: the accumulators start at zero
template <bool First>
__device__ __forceinline__ void mma8x3(float (&acc)[3][4], float a0, float a1, float a2, float a3, float b0, float b1) {
  const Tf32 A0 = split(a0), A1 = split(a1), A2 = split(a2), A3 = split(a3), B0 = split(b0), B1 = split(b1);
  if constexpr (First) {
    mma8z(acc[0], A0.lo, A1.lo, A2.lo, A3.lo, B0.hi, B1.hi);
    mma8z(acc[1], A0.hi, A1.hi, A2.hi, A3.hi, B0.lo, B1.lo);
    mma8z(acc[2], A0.hi, A1.hi, A2.hi, A3.hi, B0.hi, B1.hi);
  } else {
    mma8(acc[0], A0.lo, A1.lo, A2.lo, A3.lo, B0.hi, B1.hi);
    mma8(acc[1], A0.hi, A1.hi, A2.hi, A3.hi, B0.lo, B1.lo);
    mma8(acc[2], A0.hi, A1.hi, A2.hi, A3.hi, B0.hi, B1.hi);
  }
}
// u = the 3xTF32 product of A = {fa, fb} and B = kb (lo hi, hi lo, hi hi; from zero)
__device__ __forceinline__ void mma4x3(float (&u)[4], const Tf32& fa, const Tf32& fb, float kb) {
  const Tf32 K = split(kb);
  u[0] = u[1] = u[2] = u[3] = 0.0f;
  mma4(u[0], u[1], u[2], u[3], fa.lo, fb.lo, K.hi);
  mma4(u[0], u[1], u[2], u[3], fa.hi, fb.hi, K.lo);
  mma4(u[0], u[1], u[2], u[3], fa.hi, fb.hi, K.hi);
}

// P warps share a block's 16 rows: warp w owns the columns 16 m + 0..15 of m = w kM .. w kM + kM - 1
// (kM = 8 / P). Their dot products' partial sums meet in shared memory (xb, double-buffered by block
// parity: the one barrier a block also orders the reuse), each warp sums them in warp order, so all P
// warps hold the same A_j, B_j and run the same recurrence; warp 0 writes o.
template <int P>
__global__ void __launch_bounds__(32 * P) gdn_prefill_tc_kernel(float* __restrict__ S, const float* __restrict__ q,
                                                                const float* __restrict__ k, const float* __restrict__ v,
                                                                const float* __restrict__ g,
                                                                const float* __restrict__ beta,
                                                                const float* __restrict__ gram, int T, int Hk, int Hv,
                                                                float* __restrict__ o) {
  constexpr int kM = 8 / P, NT = 32 * P;
  pdl_begin();
  extern __shared__ __align__(16) uint8_t smem_raw[];
  Stage* st = reinterpret_cast<Stage*>(smem_raw);                // [2]
  float* os = reinterpret_cast<float*>(st + 2);                  // [kChunk][kRowsPerBlock]
  float* cfs = os + kChunk * kRowsPerBlock;                      // [kBlocks][kCoef]
  float4* xb = reinterpret_cast<float4*>(cfs + kBlocks * kCoef);  // [2][P][32] partial dot products
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, gq = lane >> 2, tq = lane & 3;
  const int h = blockIdx.x / (kD / kRowsPerBlock);
  const int row0 = (blockIdx.x % (kD / kRowsPerBlock)) * kRowsPerBlock;
  const int kh = h / (Hv / Hk);
  const bool odd = (tq & 1) != 0, blane = tq >= 2;
  const int rr = gq + 8 * (tq & 1);  // the row of this lane's recurrence (a lanes) or o (b lanes)
  const int col0 = 16 * kM * warp;   // the warp's first column

  float4 ra[kM], rb[kM];  // rows g and g + 8 of the block, columns col0 + 16 i + 4 t .. + 3
  {
    const float* base = S + (static_cast<size_t>(h) * kD + row0 + gq) * kD + col0 + 4 * tq;
#pragma unroll
    for (int i = 0; i < kM; ++i) {
      ra[i] = *reinterpret_cast<const float4*>(base + 16 * i);
      rb[i] = *reinterpret_cast<const float4*>(base + 8 * kD + 16 * i);
    }
  }
  float c = 1.0f;  // S = c R (block-uniform)

  auto load = [&](int buf, int t0) {
    stage_chunk<NT, kSwz>(st[buf], tid, t0, T, q, k, v, g, beta, Hk, Hv, kh, h, row0);
  };
  load(0, 0);
  const int nchunks = (T + kChunk - 1) / kChunk;
  int parity = 0;
  for (int ch = 0; ch < nchunks; ++ch) {
    const int t0 = ch * kChunk, n = min(kChunk, T - t0), nb = (n + 3) / 4;
    wait_chunk(ch, nchunks, t0, load);
    Stage& sg = st[ch & 1];
    if (tid < nb)
      block_coefficients(sg, tid, n, gram + (static_cast<size_t>(t0 / 4 + tid) * Hk + kh) * 16, cfs + tid * kCoef);
    // a last block with fewer than 4 tokens: zero k, q and v of its missing tokens (beta 0 drops them;
    // zeros keep the products finite), so every block reads 4 whole tokens
    for (int e = tid; e < (4 * nb - n) * kD; e += NT) {
      const int t = n + e / kD, j = e % kD;
      sg.k[t][j] = 0.0f;
      sg.q[t][j] = 0.0f;
      if (j < kRowsPerBlock) sg.v[t][j] = 0.0f;
    }
    __syncthreads();
    // B of the dot products: token 4 b + g's k (g < 4) or 4 b + g - 4's q; the lane's columns col0 +
    // 16 i + 4 t .. + 3 are chunk (col0 / 4 + 4 i + t), at ^ 4 (columns ^ 16) for an odd token, i.e.
    // 16 columns right (i even) or left (i odd); kM is even, so i's parity is the column block's
    const int xs = (gq & 1) ? 16 : 0;  // token 4 b + (g & 3) is odd iff g is
    const float* xrow = (gq < 4 ? &sg.k[gq & 3][0] : &sg.q[gq & 3][0]) + col0 + 4 * tq;
    // B of the update: token 4 b + t's k at column col0 + 16 i + 4 (g / 2) + g % 2 (tile 2i) and + 2
    // (tile 2i + 1), bit 4 of the column flipped for an odd token (t odd)
    const int us = (tq & 1) ? 16 : 0;
    const float* krow = &sg.k[tq][0] + col0 + 4 * (gq >> 1) + (gq & 1);
    for (int b = 0; b < nb; ++b, parity ^= 1) {
      const BlockCoef kc = load_block(cfs + b * kCoef);
      const float* xb_row = xrow + 4 * b * kD;
      float acc[2][3][4];  // [tile e][lo hi, hi lo, hi hi][C fragment]
      {
        const float4 x = *reinterpret_cast<const float4*>(xb_row + xs);
        mma8x3<true>(acc[0], ra[0].x, rb[0].x, ra[0].y, rb[0].y, x.x, x.y);
        mma8x3<true>(acc[1], ra[0].z, rb[0].z, ra[0].w, rb[0].w, x.z, x.w);
      }
#pragma unroll
      for (int i = 1; i < kM; ++i) {
        const float4 x = *reinterpret_cast<const float4*>(xb_row + 16 * i + ((i & 1) ? -xs : xs));
        mma8x3<false>(acc[0], ra[i].x, rb[i].x, ra[i].y, rb[i].y, x.x, x.y);
        mma8x3<false>(acc[1], ra[i].z, rb[i].z, ra[i].w, rb[i].w, x.z, x.w);
      }
      float dsum[4];  // rows g, g (columns 2t, 2t + 1), g + 8, g + 8
#pragma unroll
      for (int i = 0; i < 4; ++i)
        dsum[i] = __fadd_rn(__fadd_rn(acc[0][2][i], acc[1][2][i]),
                            __fadd_rn(__fadd_rn(acc[0][0][i], acc[1][0][i]),
                                      __fadd_rn(acc[0][1][i], acc[1][1][i])));
      if constexpr (P > 1) {  // the P warps' partial sums, added in warp order
        float4* xp = xb + parity * (P * 32);
        xp[warp * 32 + lane] = make_float4(dsum[0], dsum[1], dsum[2], dsum[3]);
        asm volatile("bar.sync 1, %0;" ::"n"(NT) : "memory");
        float4 a = xp[lane];
#pragma unroll
        for (int w = 1; w < P; ++w) {
          const float4 y = xp[w * 32 + lane];
          a = make_float4(__fadd_rn(a.x, y.x), __fadd_rn(a.y, y.y), __fadd_rn(a.z, y.z), __fadd_rn(a.w, y.w));
        }
        dsum[0] = a.x, dsum[1] = a.y, dsum[2] = a.z, dsum[3] = a.w;
      }
      // p[j]: A_j (a lanes) or B_j (b lanes) of row rr — an even lane keeps row g's pair and gets the
      // odd lane's, the odd lane keeps row g + 8's
      const float s0 = odd ? dsum[0] : dsum[2], s1 = odd ? dsum[1] : dsum[3];
      const float x0 = __shfl_xor_sync(kFull, s0, 1), x1 = __shfl_xor_sync(kFull, s1, 1);
      const float pr[4] = {odd ? x0 : dsum[0], odd ? x1 : dsum[1], odd ? dsum[2] : x0, odd ? dsum[3] : x1};
      const float* vb = &sg.v[4 * b][rr];
      const float vr[4] = {vb[0], vb[kRowsPerBlock], vb[2 * kRowsPerBlock], vb[3 * kRowsPerBlock]};
      // the recurrence (the b lanes' results are dropped); the b lanes take d with an xor-2 exchange
      float cn[4], d[4], dd[4];
      block_decays(kc, c, cn);
      block_d(kc, cn, pr, vr, d);
      float e[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) e[j] = __shfl_xor_sync(kFull, d[j], 2);
#pragma unroll
      for (int j = 0; j < 4; ++j) dd[j] = blane ? e[j] : d[j];
      if (warp == 0 && blane) {
        float ov[4];
        block_o(kc, cn, pr, dd, ov);
        float* ob = os + (4 * b) * kRowsPerBlock + rr;  // tokens past the chunk's land in os, never copied out
        ob[0] = ov[0];
        ob[kRowsPerBlock] = ov[1];
        ob[2 * kRowsPerBlock] = ov[2];
        ob[3 * kRowsPerBlock] = ov[3];
      }
      // the block's end: c' = c Γ_3, folded into R below 2^-60
      const bool renorm = cn[3] < kRenorm;  // block-uniform
      const float scale = renorm ? 1.0f : rcp_approx(cn[3]);
      c = renorm ? 1.0f : cn[3];
      if (renorm) {
#pragma unroll
        for (int i = 0; i < kM; ++i) {
          ra[i] = make_float4(__fmul_rn(ra[i].x, cn[3]), __fmul_rn(ra[i].y, cn[3]), __fmul_rn(ra[i].z, cn[3]),
                              __fmul_rn(ra[i].w, cn[3]));
          rb[i] = make_float4(__fmul_rn(rb[i].x, cn[3]), __fmul_rn(rb[i].y, cn[3]), __fmul_rn(rb[i].z, cn[3]),
                              __fmul_rn(rb[i].w, cn[3]));
        }
      }
      // F[row][j] = P_j3 d_j / c'; this lane has row rr's; the other row's at token t comes from lane
      // (g, t - 1), which sends its f_{t'+1} (t' = t - 1 has the other parity, so the other row)
      float f[4];
      block_f(kc, dd, scale, f);
      const float f0 = f[0], f1 = f[1], f2 = f[2], f3 = f[3];
      const float own = tq == 0 ? f0 : tq == 1 ? f1 : tq == 2 ? f2 : f3;
      const float send = tq == 0 ? f1 : tq == 1 ? f2 : tq == 2 ? f3 : f0;
      const float other = __shfl_sync(kFull, send, (lane & ~3) | ((tq + 3) & 3));
      const Tf32 fa = split(odd ? other : own), fb = split(odd ? own : other);  // F[g][t], F[g + 8][t]
      // the update: U = F K^T of each tile from zero, then R += U (fp32 adds)
      const float* kb = krow + 4 * b * kD;
#pragma unroll
      for (int i = 0; i < kM; ++i) {
        const float* kp = kb + 16 * i + ((i & 1) ? -us : us);
        float u0[4], u1[4];
        mma4x3(u0, fa, fb, kp[0]);
        mma4x3(u1, fa, fb, kp[2]);
        ra[i] = make_float4(__fadd_rn(ra[i].x, u0[0]), __fadd_rn(ra[i].y, u0[1]), __fadd_rn(ra[i].z, u1[0]),
                            __fadd_rn(ra[i].w, u1[1]));
        rb[i] = make_float4(__fadd_rn(rb[i].x, u0[2]), __fadd_rn(rb[i].y, u0[3]), __fadd_rn(rb[i].z, u1[2]),
                            __fadd_rn(rb[i].w, u1[3]));
      }
    }
    write_chunk<NT>(os, o, tid, t0, n, Hv, h, row0);  // (the coefficients too are free then)
  }
  float* base = S + (static_cast<size_t>(h) * kD + row0 + gq) * kD + col0 + 4 * tq;
#pragma unroll
  for (int i = 0; i < kM; ++i) {
    *reinterpret_cast<float4*>(base + 16 * i) =
        make_float4(__fmul_rn(c, ra[i].x), __fmul_rn(c, ra[i].y), __fmul_rn(c, ra[i].z), __fmul_rn(c, ra[i].w));
    *reinterpret_cast<float4*>(base + 8 * kD + 16 * i) =
        make_float4(__fmul_rn(c, rb[i].x), __fmul_rn(c, rb[i].y), __fmul_rn(c, rb[i].z), __fmul_rn(c, rb[i].w));
  }
}

// MERE_CUDA_GDN_TC_WARPS: the warps P a 16 rows share (1, 2 or 4); unset: 0, the launch's choice
int tc_warps() {
  static const int p = [] {
    const int i = env_choice("MERE_CUDA_GDN_TC_WARPS", {"1", "2", "4"});
    return i < 0 ? 0 : 1 << i;
  }();
  return p;
}

template <int P>
void launch_tc(CudaDevice& dev, float* S, const float* q, const float* k, const float* v, const float* g,
               const float* beta, int64_t T, int64_t Hk, int64_t Hv, const float* gram, float* o) {
  const int smem = static_cast<int>(2 * sizeof(Stage) + kChunk * kRowsPerBlock * sizeof(float) +
                                    kBlocks * kCoef * sizeof(float) + 2 * P * 32 * sizeof(float4));
  MERE_CUDA_CHECK(cudaFuncSetAttribute(gdn_prefill_tc_kernel<P>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  const int blocks = static_cast<int>(Hv * (kD / kRowsPerBlock));
  launch("gdn_prefill_tc_kernel", gdn_prefill_tc_kernel<P>, blocks, 32 * P, smem, dev.stream(), S, q, k, v, g, beta,
         gram, static_cast<int>(T), static_cast<int>(Hk), static_cast<int>(Hv), o);
}

}  // namespace

void gdn_prefill_tc(CudaDevice& dev, float* S, const float* q, const float* k, const float* v, const float* g,
                    const float* beta, int64_t T, int64_t Hk, int64_t Hv, int64_t Dk, int64_t Dv, float* scratch,
                    float* o, int warps) {
  MERE_CHECK(warps == 0 || warps == 1 || warps == 2 || warps == 4, "cuda gdn_prefill_tc", "warps must be 0, 1, 2 or 4, got ", warps);
  gdn_c4_prepare(dev, "cuda gdn_prefill_tc", q, k, T, Hk, Hv, Dk, Dv, scratch);
  DeviceGuard guard(dev.ordinal());
  const float* gram = scratch;
  // P by the blocks an SM (shared memory fits 3 at P <= 2, 2 at P = 4): above 2, one warp a block (27B,
  // H100: w1 132.8 µs, w2 138.9, w4 199.8 in two waves); at most 2, four (35B-A3B: w4 105.7, w1 127.7; s20c)
  if (warps == 0) warps = tc_warps();
  if (warps == 0) warps = Hv * (kD / kRowsPerBlock) > 2 * dev.sm_count() ? 1 : 4;
  switch (warps) {
    case 1: launch_tc<1>(dev, S, q, k, v, g, beta, T, Hk, Hv, gram, o); break;
    case 2: launch_tc<2>(dev, S, q, k, v, g, beta, T, Hk, Hv, gram, o); break;
    default: launch_tc<4>(dev, S, q, k, v, g, beta, T, Hk, Hv, gram, o); break;
  }
}

}  // namespace mere::cuda
