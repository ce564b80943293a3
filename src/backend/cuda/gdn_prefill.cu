// GatedDeltaNet prefill (gdn_prefill.h): recurrent, 16 rows of S a block, 4 warps of 4 rows,
// 8 lanes a row (lane holds columns 32*jj + 4*l8 + c, jj, c < 4), tokens staged in chunks of 32.
#include "backend/cuda/gdn_prefill.h"

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/gdn_prefill_stage.cuh"
#include "backend/cuda/launch.cuh"

namespace mere::cuda {
namespace {

using namespace gdn_stage;
constexpr int kThreads = 128;

__device__ __forceinline__ float sum8(float v) {  // over the 8 lanes of a row group
  v = __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, 1));
  v = __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, 2));
  v = __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, 4));
  return v;
}

__global__ void __launch_bounds__(kThreads) gdn_prefill_kernel(float* __restrict__ S, const float* __restrict__ q,
                                                               const float* __restrict__ k, const float* __restrict__ v,
                                                               const float* __restrict__ g,
                                                               const float* __restrict__ beta, int T, int Hk, int Hv,
                                                               float* __restrict__ o) {
  pdl_begin();
  extern __shared__ __align__(16) uint8_t smem_raw[];
  Stage* st = reinterpret_cast<Stage*>(smem_raw);         // [2]
  float* os = reinterpret_cast<float*>(st + 2);           // [kChunk][kRowsPerBlock]
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int h = blockIdx.x / (kD / kRowsPerBlock);
  const int row0 = (blockIdx.x % (kD / kRowsPerBlock)) * kRowsPerBlock;
  const int kh = h / (Hv / Hk);
  const int sub = lane >> 3, l8 = lane & 7;
  const int rl = warp * 4 + sub;  // row within block
  const int i = row0 + rl;        // row of S (value dim)

  auto load = [&](int buf, int t0) { stage_chunk<kThreads>(st[buf], tid, t0, T, q, k, v, g, beta, Hk, Hv, kh, h, row0); };

  float4 s[4];
  float* srow = S + (static_cast<size_t>(h) * kD + i) * kD;
#pragma unroll
  for (int jj = 0; jj < 4; ++jj) s[jj] = *reinterpret_cast<const float4*>(srow + 32 * jj + 4 * l8);

  load(0, 0);
  const int nchunks = (T + kChunk - 1) / kChunk;
  for (int ch = 0; ch < nchunks; ++ch) {
    const int t0 = ch * kChunk, n = min(kChunk, T - t0);
    wait_chunk(ch, nchunks, t0, load);
    const Stage& sg = st[ch & 1];
    for (int t = 0; t < n; ++t) {
      const float decay = expf(sg.g[t]);
      const float bt = sg.beta[t];
      const float vi = sg.v[t][rl];
      float4 kk[4], qq[4];
#pragma unroll
      for (int jj = 0; jj < 4; ++jj) {
        kk[jj] = *reinterpret_cast<const float4*>(&sg.k[t][32 * jj + 4 * l8]);
        qq[jj] = *reinterpret_cast<const float4*>(&sg.q[t][32 * jj + 4 * l8]);
      }
      float m0 = 0.0f, m1 = 0.0f;
#pragma unroll
      for (int jj = 0; jj < 4; ++jj) {
        s[jj].x = __fmul_rn(s[jj].x, decay);
        s[jj].y = __fmul_rn(s[jj].y, decay);
        s[jj].z = __fmul_rn(s[jj].z, decay);
        s[jj].w = __fmul_rn(s[jj].w, decay);
        m0 = __fmaf_rn(s[jj].x, kk[jj].x, m0);
        m1 = __fmaf_rn(s[jj].y, kk[jj].y, m1);
        m0 = __fmaf_rn(s[jj].z, kk[jj].z, m0);
        m1 = __fmaf_rn(s[jj].w, kk[jj].w, m1);
      }
      const float m = sum8(__fadd_rn(m0, m1));
      const float d = __fmul_rn(bt, __fsub_rn(vi, m));
      float o0 = 0.0f, o1 = 0.0f;
#pragma unroll
      for (int jj = 0; jj < 4; ++jj) {
        s[jj].x = __fmaf_rn(d, kk[jj].x, s[jj].x);
        s[jj].y = __fmaf_rn(d, kk[jj].y, s[jj].y);
        s[jj].z = __fmaf_rn(d, kk[jj].z, s[jj].z);
        s[jj].w = __fmaf_rn(d, kk[jj].w, s[jj].w);
        o0 = __fmaf_rn(s[jj].x, qq[jj].x, o0);
        o1 = __fmaf_rn(s[jj].y, qq[jj].y, o1);
        o0 = __fmaf_rn(s[jj].z, qq[jj].z, o0);
        o1 = __fmaf_rn(s[jj].w, qq[jj].w, o1);
      }
      const float oi = sum8(__fadd_rn(o0, o1));
      if (l8 == 0) os[t * kRowsPerBlock + rl] = oi;
    }
    write_chunk<kThreads>(os, o, tid, t0, n, Hv, h, row0);
  }
#pragma unroll
  for (int jj = 0; jj < 4; ++jj) *reinterpret_cast<float4*>(srow + 32 * jj + 4 * l8) = s[jj];
}

// ---------------------------------------------------------------- v3: lazy decay (gdn_prefill_lazy)
// v1 above is bound by shared memory and latency (ncu, H100, 27B T = 512: L1 74% busy, MIO the top
// stall, 124 instructions a token a warp): each of a warp's 4 row groups of 8 lanes reads the whole k
// and q vectors, 8 LDS.128 (32 wavefronts) a token for 4 rows. v3 gives a warp RW rows (4 or 8) and
// a lane 4 columns (4 lane .. 4 lane + 3) of all of them, so a token's k and q cost one LDS.128 each
// (8 wavefronts) for RW rows, and keeps the state as S = c R (c one scalar a block: the decay is per
// head):
//   a_r = R_r k, b_r = R_r q (2 RW partial sums a lane);
//   c' = e^g c;  m_r = c' a_r;  d_r = beta (v_r - m_r);  o_r = c' b_r + d_r (k.q);  R_r <- R_r + (d_r / c') k
// (e^g S k = c' R k;  o = S' q = c' R q + d k.q), three FMA passes a token instead of four. c' below
// 2^-60 folds into R (R <- c' R, c' = 1; also when e^g underflows to 0); S = c R is written back at
// the end. The partial sums are reduce-scattered over the warp without selects: lanes 16..31 take q
// as their first operand and k as their second (x1 / x2), and lane L's register slot i holds row
// i ^ perm(L), perm(L) = (L >> SH) & (RW - 1) with SH = 4 - log2 RW, so every exchange (xor 16, 8, ..,
// 2^SH) sends slots the partner keeps; xor 2^SH-1 .. 1 then finish the sum. Lane L holds the sum for
// row perm(L): a on lanes 0..15, b on lanes 16..31; the a lanes compute d, RW shuffles bring each lane
// the d of its slots' rows (a b lane's slot 0 is its own row, for o). e^g, k.q and beta are per token
// and head, staged once a chunk in shared memory. Same results up to fp32 reassociation
// (prefill_check: NMSE vs ops::gdn_step, both RW).
// Measured (session 19, 27B / 35B-A3B shapes, T = 512; docs/cuda-kernels.md "GDN prefill v3"): v3a
// (the lazy decay on v1's layout) 243.6 µs vs v1's 180.2 (H100); v3b (RW = 4) 204.9 vs 181.1 (H200;
// 156 instructions a token a warp); v3c (this code: 1/c' off the token's chain as one rcp.approx,
// the staged chunk's addresses once a chunk) RW = 4 181.4 / 154.5 vs v1 181.4 / 156.2 µs, RW = 8
// 224.7 / 181.0 (H100). Not faster than v1, so opt-in (MERE_CUDA_GDN_PREFILL=lazy, RW = 4); kept as
// the measured base of a form that reduces several tokens' dot products in one exchange.
constexpr float kRenorm = 8.6736174e-19f;  // 2^-60

__device__ __forceinline__ float rcp_approx(float x) {
  float r;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
}

template <int RW>
__global__ void __launch_bounds__(kRowsPerBlock / RW * 32) gdn_prefill_lazy_kernel(
    float* __restrict__ S, const float* __restrict__ q, const float* __restrict__ k, const float* __restrict__ v,
    const float* __restrict__ g, const float* __restrict__ beta, int T, int Hk, int Hv, float* __restrict__ o) {
  constexpr int NT = kRowsPerBlock / RW * 32;  // threads a block
  constexpr int SH = RW == 8 ? 1 : 2;          // perm = (lane >> SH) & (RW - 1)
  static_assert(RW == 4 || RW == 8, "4 or 8 rows a warp");
  pdl_begin();
  extern __shared__ __align__(16) uint8_t smem_raw[];
  Stage* st = reinterpret_cast<Stage*>(smem_raw);                      // [2]
  float* os = reinterpret_cast<float*>(st + 2);                        // [kChunk][kRowsPerBlock]
  float4* tk = reinterpret_cast<float4*>(os + kChunk * kRowsPerBlock);  // [kChunk] {e^g, k.q, beta, 0}
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int h = blockIdx.x / (kD / kRowsPerBlock);
  const int row0 = (blockIdx.x % (kD / kRowsPerBlock)) * kRowsPerBlock;
  const int kh = h / (Hv / Hk);
  const int perm = (lane >> SH) & (RW - 1);  // slot i holds row i ^ perm of the warp's RW
  const bool qfirst = lane >= 16;            // x1 = q, x2 = k (else x1 = k, x2 = q)
  const int wr = warp * RW;                  // the warp's first row within the block

  auto load = [&](int buf, int t0) { stage_chunk<NT>(st[buf], tid, t0, T, q, k, v, g, beta, Hk, Hv, kh, h, row0); };

  float4 r[RW];  // slot i: row row0 + wr + (i ^ perm), columns 4 lane .. 4 lane + 3
  load_rows<RW>(S, h, row0, wr, lane, perm, r);
  float c = 1.0f;  // S = c R (block-uniform)

  load(0, 0);
  const int nchunks = (T + kChunk - 1) / kChunk;
  for (int ch = 0; ch < nchunks; ++ch) {
    const int t0 = ch * kChunk, n = min(kChunk, T - t0);
    wait_chunk(ch, nchunks, t0, load);
    const Stage& sg = st[ch & 1];
    for (int t = warp; t < n; t += NT / 32) {  // the chunk's per-token scalars, a warp a token
      const float4 a = *reinterpret_cast<const float4*>(&sg.k[t][4 * lane]);
      const float4 b = *reinterpret_cast<const float4*>(&sg.q[t][4 * lane]);
      float p = __fmaf_rn(a.x, b.x, __fmaf_rn(a.y, b.y, __fmaf_rn(a.z, b.z, __fmul_rn(a.w, b.w))));
#pragma unroll
      for (int off = 16; off >= 1; off >>= 1) p = __fadd_rn(p, __shfl_xor_sync(0xffffffffu, p, off));
      if (lane == 0) tk[t] = make_float4(expf(sg.g[t]), p, sg.beta[t], 0.0f);
    }
    __syncthreads();
    const float* px1 = (qfirst ? &sg.q[0][0] : &sg.k[0][0]) + 4 * lane;  // this lane's columns, token 0
    const float* px2 = (qfirst ? &sg.k[0][0] : &sg.q[0][0]) + 4 * lane;
    const float* pv = &sg.v[0][wr + perm];
    for (int t = 0; t < n; ++t) {
      const float4 tt = tk[t];
      float cn = __fmul_rn(c, tt.x);  // c' (the dots below use it before any renormalisation)
      const bool renorm = cn < kRenorm;  // block-uniform
      c = renorm ? 1.0f : cn;
      const float inv = renorm ? 1.0f : rcp_approx(cn);
      const float4 x1 = *reinterpret_cast<const float4*>(px1 + t * kD);
      const float4 x2 = *reinterpret_cast<const float4*>(px2 + t * kD);
      const float vr = pv[t * kRowsPerBlock];
      float p[2 * RW];  // p[i] = R_slot i . x1, p[RW + i] = R_slot i . x2 (this lane's 4 columns)
#pragma unroll
      for (int i = 0; i < RW; ++i) {
        p[i] = __fmaf_rn(r[i].w, x1.w, __fmaf_rn(r[i].z, x1.z, __fmaf_rn(r[i].y, x1.y, __fmul_rn(r[i].x, x1.x))));
        p[RW + i] = __fmaf_rn(r[i].w, x2.w, __fmaf_rn(r[i].z, x2.z, __fmaf_rn(r[i].y, x2.y, __fmul_rn(r[i].x, x2.x))));
      }
      // reduce-scatter: keep the x1 sums of slots 0..RW-1 plus the partner's x2 sums (its x2 is this
      // lane's x1), then halve the slots at each exchange; the last 4 - log2 RW exchanges finish the sum
#pragma unroll
      for (int i = 0; i < RW; ++i) p[i] = __fadd_rn(p[i], __shfl_xor_sync(0xffffffffu, p[RW + i], 16));
#pragma unroll
      for (int w = RW / 2, m = 8; w >= 1; w >>= 1, m >>= 1)
#pragma unroll
        for (int i = 0; i < w; ++i) p[i] = __fadd_rn(p[i], __shfl_xor_sync(0xffffffffu, p[w + i], m));
      float sum = p[0];
#pragma unroll
      for (int m = (1 << SH) >> 1; m >= 1; m >>= 1) sum = __fadd_rn(sum, __shfl_xor_sync(0xffffffffu, sum, m));
      // lanes 0..15: sum = a of row perm; lanes 16..31: b of row perm
      const float dl = __fmul_rn(tt.z, __fsub_rn(vr, __fmul_rn(cn, sum)));  // meaningful on lanes 0..15
      float dv[RW];
#pragma unroll
      for (int i = 0; i < RW; ++i) dv[i] = __shfl_sync(0xffffffffu, dl, (i ^ perm) << SH);
      if (qfirst && (lane & ((1 << SH) - 1)) == 0)
        os[t * kRowsPerBlock + wr + perm] = __fmaf_rn(cn, sum, __fmul_rn(dv[0], tt.y));
      if (renorm) scale_rows<RW>(r, cn);  // fold c' into R
      const float4 kv = qfirst ? x2 : x1;
#pragma unroll
      for (int i = 0; i < RW; ++i) {
        const float dd = __fmul_rn(dv[i], inv);
        r[i].x = __fmaf_rn(dd, kv.x, r[i].x);
        r[i].y = __fmaf_rn(dd, kv.y, r[i].y);
        r[i].z = __fmaf_rn(dd, kv.z, r[i].z);
        r[i].w = __fmaf_rn(dd, kv.w, r[i].w);
      }
    }
    write_chunk<NT>(os, o, tid, t0, n, Hv, h, row0);  // (tk too is free after its first barrier)
  }
  store_rows<RW>(S, h, row0, wr, lane, perm, c, r);
}

void check_args(int64_t T, int64_t Hk, int64_t Hv, int64_t Dk, int64_t Dv) {
  MERE_CHECK(Dk == kD && Dv == kD, "cuda gdn_prefill", "head size: expected Dk = Dv = 128, got Dk = ", Dk, ", Dv = ", Dv);
  MERE_CHECK(Hk >= 1 && Hv >= Hk && Hv % Hk == 0, "cuda gdn_prefill",
             "heads: expected Hv a positive multiple of Hk, got Hk = ", Hk, ", Hv = ", Hv);
  MERE_CHECK(T >= 1 && T * Hv * kD < (int64_t{1} << 31), "cuda gdn_prefill", "token count out of range, got ", T);
}

}  // namespace

void gdn_prefill(CudaDevice& dev, float* S, const float* q, const float* k, const float* v, const float* g,
                 const float* beta, int64_t T, int64_t Hk, int64_t Hv, int64_t Dk, int64_t Dv, float* o) {
  check_args(T, Hk, Hv, Dk, Dv);
  DeviceGuard guard(dev.ordinal());
  const int smem = static_cast<int>(2 * sizeof(Stage) + kChunk * kRowsPerBlock * sizeof(float));
  MERE_CUDA_CHECK(cudaFuncSetAttribute(gdn_prefill_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  const int blocks = static_cast<int>(Hv * (kD / kRowsPerBlock));
  launch("gdn_prefill_kernel", gdn_prefill_kernel, blocks, kThreads, smem, dev.stream(), S, q, k, v, g, beta,
         static_cast<int>(T), static_cast<int>(Hk), static_cast<int>(Hv), o);
}

void gdn_prefill_lazy(CudaDevice& dev, float* S, const float* q, const float* k, const float* v, const float* g,
                      const float* beta, int64_t T, int64_t Hk, int64_t Hv, int64_t Dk, int64_t Dv, float* o,
                      int rows_per_warp) {
  check_args(T, Hk, Hv, Dk, Dv);
  MERE_CHECK(rows_per_warp == 4 || rows_per_warp == 8, "cuda gdn_prefill_lazy", "rows a warp: expected 4 or 8, got ",
             rows_per_warp);
  DeviceGuard guard(dev.ordinal());
  const int smem = static_cast<int>(2 * sizeof(Stage) + kChunk * kRowsPerBlock * sizeof(float) + kChunk * sizeof(float4));
  const int blocks = static_cast<int>(Hv * (kD / kRowsPerBlock));
  auto run = [&](auto kernel, int threads) {
    MERE_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    launch("gdn_prefill_lazy_kernel", kernel, blocks, threads, smem, dev.stream(), S, q, k, v, g, beta,
           static_cast<int>(T), static_cast<int>(Hk), static_cast<int>(Hv), o);
  };
  if (rows_per_warp == 8) run(gdn_prefill_lazy_kernel<8>, kRowsPerBlock / 8 * 32);
  else run(gdn_prefill_lazy_kernel<4>, kRowsPerBlock / 4 * 32);
}

}  // namespace mere::cuda
