// GatedDeltaNet prefill, 4 tokens an exchange (gdn_prefill.h gdn_prefill_c4; MERE_CUDA_GDN_PREFILL=c4).
//
// Why: every single-token form pays, per token, one cross-lane reduction of its dot products and a
// broadcast of d, ~300 cycles of shuffles on the token's dependency chain, and that chain bounds the
// kernel (docs/cuda-kernels.md "GDN prefill v3": v1 181 µs at 27B T = 512, 124 instructions a token a
// warp at 0.53 issued a scheduler). Here the dot products of 4 consecutive tokens against the state
// at the block's start are reduced in one exchange, then a 4 x 4 triangular recurrence a row gives the
// 4 tokens' d from scalars:
//   with S_0 = c R at the block's start, Γ_j = e^{g_0} .. e^{g_j}, P_ij = Γ_j / Γ_i = e^{g_{i+1}} .. e^{g_j},
//   A_j = R k_j, B_j = R q_j (one exchange for the 8 sums of a row);
//   m_j = c Γ_j A_j + Σ_{i<j} P_ij (k_i.k_j) d_i;  d_j = beta_j (v_j - m_j);
//   o_j = c Γ_j B_j + Σ_{i<=j} P_ij (k_i.q_j) d_i;
//   S_3 = c Γ_3 R + Σ_i P_i3 d_i k_i = c' (R + Σ_i P_i3 d_i / c' k_i), c' = c Γ_3
// (c' below 2^-60 folds into R, as in gdn_prefill_lazy). The Gram entries k_i.k_j and k_i.q_j of each
// 4-token block and key head are computed once by gdn_gram4_kernel (shared by the Hv / Hk value heads
// and the 8 row blocks of each) into a scratch of gdn_c4_scratch_floats(T, Hk) floats; the products
// P_ij, Γ_j and the coefficients once a block a chunk in shared memory.
// Layout: as gdn_prefill_lazy with 4 rows a warp — a lane holds 4 columns (4 lane .. 4 lane + 3) of
// its warp's 4 rows, slot i = row i ^ ((lane >> 2) & 3), lanes 16..31 take q as their first operand.
// The 32 partial sums a lane (2 kinds x 4 rows x 4 tokens) are reduce-scattered over lane bits 4, 3, 2
// and summed over bits 1, 0, so the 4 lanes of a group hold A_0..3 (lanes 0..15) or B_0..3 (16..31)
// of one row. Same results up to fp32 reassociation (prefill_check: NMSE vs ops::gdn_step).
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/gdn_prefill.h"
#include "backend/cuda/gdn_prefill_c4.cuh"
#include "backend/cuda/gdn_prefill_stage.cuh"
#include "backend/cuda/launch.cuh"

namespace mere::cuda {
namespace {

using namespace gdn_stage;
using namespace gdn_c4;
constexpr int kThreads = 128;        // 4 warps x 4 rows = kRowsPerBlock
constexpr int kBlocks = kChunk / 4;  // 4-token blocks a chunk

__device__ __forceinline__ float dot4(const float4& a, const float4& b) {
  return __fmaf_rn(a.w, b.w, __fmaf_rn(a.z, b.z, __fmaf_rn(a.y, b.y, __fmul_rn(a.x, b.x))));
}

// Gram entries of each 4-token block b and key head: gram[(b * Hk + kh) * 16 + e], e = KK01 KK02 KK03
// KK12 KK13 KK23 KQ00 KQ01 KQ02 KQ03 KQ11 KQ12 KQ13 KQ22 KQ23 KQ33 (KQij = k_i . q_j); tokens past T
// count as zero vectors. One warp a (block, key head).
__global__ void __launch_bounds__(128) gdn_gram4_kernel(const float* __restrict__ q, const float* __restrict__ k, int T,
                                                        int Hk, float* __restrict__ gram) {
  pdl_begin();
  const int wid = static_cast<int>((blockIdx.x * blockDim.x + threadIdx.x) >> 5), lane = threadIdx.x & 31;
  const int nb = (T + 3) / 4;
  if (wid >= nb * Hk) return;
  const int b = wid / Hk, kh = wid - b * Hk;
  float4 kk[4], qq[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const int t = 4 * b + j;
    const size_t off = (static_cast<size_t>(t) * Hk + kh) * kD + 4 * lane;
    kk[j] = t < T ? *reinterpret_cast<const float4*>(k + off) : make_float4(0.f, 0.f, 0.f, 0.f);
    qq[j] = t < T ? *reinterpret_cast<const float4*>(q + off) : make_float4(0.f, 0.f, 0.f, 0.f);
  }
  float p[16] = {dot4(kk[0], kk[1]), dot4(kk[0], kk[2]), dot4(kk[0], kk[3]), dot4(kk[1], kk[2]),
                 dot4(kk[1], kk[3]), dot4(kk[2], kk[3]), dot4(kk[0], qq[0]), dot4(kk[0], qq[1]),
                 dot4(kk[0], qq[2]), dot4(kk[0], qq[3]), dot4(kk[1], qq[1]), dot4(kk[1], qq[2]),
                 dot4(kk[1], qq[3]), dot4(kk[2], qq[2]), dot4(kk[2], qq[3]), dot4(kk[3], qq[3])};
#pragma unroll
  for (int e = 0; e < 16; ++e)
#pragma unroll
    for (int off = 16; off >= 1; off >>= 1) p[e] = __fadd_rn(p[e], __shfl_xor_sync(0xffffffffu, p[e], off));
  if (lane == 0) {
    float4* out = reinterpret_cast<float4*>(gram + (static_cast<size_t>(b) * Hk + kh) * 16);
#pragma unroll
    for (int e = 0; e < 4; ++e) out[e] = make_float4(p[4 * e], p[4 * e + 1], p[4 * e + 2], p[4 * e + 3]);
  }
}

__global__ void __launch_bounds__(kThreads) gdn_prefill_c4_kernel(float* __restrict__ S, const float* __restrict__ q,
                                                                  const float* __restrict__ k,
                                                                  const float* __restrict__ v,
                                                                  const float* __restrict__ g,
                                                                  const float* __restrict__ beta,
                                                                  const float* __restrict__ gram, int T, int Hk,
                                                                  int Hv, float* __restrict__ o) {
  pdl_begin();
  extern __shared__ __align__(16) uint8_t smem_raw[];
  Stage* st = reinterpret_cast<Stage*>(smem_raw);               // [2]
  float* os = reinterpret_cast<float*>(st + 2);                 // [kChunk][kRowsPerBlock]
  float* cfs = os + kChunk * kRowsPerBlock;                     // [kBlocks][kCoef]
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int h = blockIdx.x / (kD / kRowsPerBlock);
  const int row0 = (blockIdx.x % (kD / kRowsPerBlock)) * kRowsPerBlock;
  const int kh = h / (Hv / Hk);
  const int perm = (lane >> 2) & 3;  // slot i holds row i ^ perm of the warp's 4; the lane's group row
  const bool qfirst = lane >= 16;    // x1 = q, x2 = k (else x1 = k, x2 = q)
  const int wr = warp * 4;           // the warp's first row within the block

  float4 r[4];  // slot i: row row0 + wr + (i ^ perm), columns 4 lane .. 4 lane + 3
  load_rows<4>(S, h, row0, wr, lane, perm, r);
  float c = 1.0f;  // S = c R (block-uniform)

  auto load = [&](int buf, int t0) { stage_chunk<kThreads>(st[buf], tid, t0, T, q, k, v, g, beta, Hk, Hv, kh, h, row0); };
  load(0, 0);
  const int nchunks = (T + kChunk - 1) / kChunk;
  for (int ch = 0; ch < nchunks; ++ch) {
    const int t0 = ch * kChunk, n = min(kChunk, T - t0), nb = (n + 3) / 4;
    wait_chunk(ch, nchunks, t0, load);
    const Stage& sg = st[ch & 1];
    if (tid < nb) block_coefficients(sg, tid, n, gram + (static_cast<size_t>(t0 / 4 + tid) * Hk + kh) * 16, cfs + tid * kCoef);
    __syncthreads();
    const float* px1 = (qfirst ? &sg.q[0][0] : &sg.k[0][0]) + 4 * lane;  // this lane's columns, token 0
    const float* px2 = (qfirst ? &sg.k[0][0] : &sg.q[0][0]) + 4 * lane;
    const float* pv = &sg.v[0][wr + perm];
    for (int b = 0; b < nb; ++b) {
      const BlockCoef kc = load_block(cfs + b * kCoef);
      float4 x1[4], x2[4];
      float vr[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int t = min(4 * b + j, n - 1);  // a token past the chunk re-reads the last (beta 0 drops it)
        x1[j] = *reinterpret_cast<const float4*>(px1 + t * kD);
        x2[j] = *reinterpret_cast<const float4*>(px2 + t * kD);
        vr[j] = pv[t * kRowsPerBlock];
      }
      // p[4 i + j] = R_slot i . x1_j, p[16 + 4 i + j] = R_slot i . x2_j (this lane's 4 columns)
      float p[32];
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          p[4 * i + j] = dot4(r[i], x1[j]);
          p[16 + 4 * i + j] = dot4(r[i], x2[j]);
        }
      // reduce-scatter over lane bits 4 (kind), 3, 2 (row slots), then sum over bits 1, 0
#pragma unroll
      for (int e = 0; e < 16; ++e) p[e] = __fadd_rn(p[e], __shfl_xor_sync(0xffffffffu, p[16 + e], 16));
#pragma unroll
      for (int e = 0; e < 8; ++e) p[e] = __fadd_rn(p[e], __shfl_xor_sync(0xffffffffu, p[8 + e], 8));
#pragma unroll
      for (int e = 0; e < 4; ++e) p[e] = __fadd_rn(p[e], __shfl_xor_sync(0xffffffffu, p[4 + e], 4));
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        p[e] = __fadd_rn(p[e], __shfl_xor_sync(0xffffffffu, p[e], 2));
        p[e] = __fadd_rn(p[e], __shfl_xor_sync(0xffffffffu, p[e], 1));
      }
      // lanes 0..15: p[j] = A_j of row perm; lanes 16..31: B_j
      const float pr[4] = {p[0], p[1], p[2], p[3]};
      float cn[4], d[4], dd[4];
      block_decays(kc, c, cn);
      block_d(kc, cn, pr, vr, d);
      // the b lanes take d of their row from the a lane 16 below
      float e[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) e[j] = __shfl_xor_sync(0xffffffffu, d[j], 16);
#pragma unroll
      for (int j = 0; j < 4; ++j) dd[j] = qfirst ? e[j] : d[j];
      if (qfirst && (lane & 3) == 0) {
        float ov[4];
        block_o(kc, cn, pr, dd, ov);
        float* ob = os + (4 * b) * kRowsPerBlock + wr + perm;
        ob[0] = ov[0];  // rows past the chunk's tokens land in os but are never copied out
        if (4 * b + 1 < n) ob[kRowsPerBlock] = ov[1];
        if (4 * b + 2 < n) ob[2 * kRowsPerBlock] = ov[2];
        if (4 * b + 3 < n) ob[3 * kRowsPerBlock] = ov[3];
      }
      // the block's end: c' = c Γ_3; fold it into R below 2^-60
      const bool renorm = cn[3] < kRenorm;  // block-uniform
      const float scale = renorm ? 1.0f : rcp_approx(cn[3]);
      c = renorm ? 1.0f : cn[3];
      if (renorm) scale_rows<4>(r, cn[3]);
      // f_j = P_j3 d_j / c' of this lane's group row; slots 1..3 fetch their rows' from the groups
      // perm ^ s of the same half (lane bits 4, 1, 0 kept)
      float f[4][4];
      block_f(kc, dd, scale, f[0]);
#pragma unroll
      for (int s = 1; s < 4; ++s) {
        const int src = (lane & 0x13) | ((perm ^ s) << 2);
#pragma unroll
        for (int j = 0; j < 4; ++j) f[s][j] = __shfl_sync(0xffffffffu, f[0][j], src);
      }
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const float4 kv = qfirst ? x2[j] : x1[j];
#pragma unroll
        for (int s = 0; s < 4; ++s) {
          r[s].x = __fmaf_rn(f[s][j], kv.x, r[s].x);
          r[s].y = __fmaf_rn(f[s][j], kv.y, r[s].y);
          r[s].z = __fmaf_rn(f[s][j], kv.z, r[s].z);
          r[s].w = __fmaf_rn(f[s][j], kv.w, r[s].w);
        }
      }
    }
    write_chunk<kThreads>(os, o, tid, t0, n, Hv, h, row0);  // (the coefficients too are free then)
  }
  store_rows<4>(S, h, row0, wr, lane, perm, c, r);
}

}  // namespace

int64_t gdn_c4_scratch_floats(int64_t T, int64_t Hk) { return (T + 3) / 4 * Hk * 16; }

void gdn_c4_prepare(CudaDevice& dev, const char* who, const float* q, const float* k, int64_t T, int64_t Hk, int64_t Hv,
                    int64_t Dk, int64_t Dv, float* scratch) {
  MERE_CHECK(Dk == kD && Dv == kD, who, "head size: expected Dk = Dv = 128, got Dk = ", Dk, ", Dv = ", Dv);
  MERE_CHECK(Hk >= 1 && Hv >= Hk && Hv % Hk == 0, who, "heads: expected Hv a positive multiple of Hk, got Hk = ", Hk,
             ", Hv = ", Hv);
  MERE_CHECK(T >= 1 && T * Hv * kD < (int64_t{1} << 31), who, "token count out of range, got ", T);
  MERE_CHECK(scratch != nullptr, who, "needs a scratch of gdn_c4_scratch_floats(T, Hk) floats");
  DeviceGuard guard(dev.ordinal());
  const int64_t warps = (T + 3) / 4 * Hk;
  launch("gdn_gram4_kernel", gdn_gram4_kernel, static_cast<int>((warps + 3) / 4), 128, 0, dev.stream(), q, k,
         static_cast<int>(T), static_cast<int>(Hk), scratch);
}

void gdn_prefill_c4(CudaDevice& dev, float* S, const float* q, const float* k, const float* v, const float* g,
                    const float* beta, int64_t T, int64_t Hk, int64_t Hv, int64_t Dk, int64_t Dv, float* scratch,
                    float* o) {
  gdn_c4_prepare(dev, "cuda gdn_prefill_c4", q, k, T, Hk, Hv, Dk, Dv, scratch);
  DeviceGuard guard(dev.ordinal());
  const int smem =
      static_cast<int>(2 * sizeof(Stage) + kChunk * kRowsPerBlock * sizeof(float) + kBlocks * kCoef * sizeof(float));
  MERE_CUDA_CHECK(cudaFuncSetAttribute(gdn_prefill_c4_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  const int blocks = static_cast<int>(Hv * (kD / kRowsPerBlock));
  launch("gdn_prefill_c4_kernel", gdn_prefill_c4_kernel, blocks, kThreads, smem, dev.stream(), S, q, k, v, g, beta,
         static_cast<const float*>(scratch), static_cast<int>(T), static_cast<int>(Hk), static_cast<int>(Hv), o);
}

}  // namespace mere::cuda
