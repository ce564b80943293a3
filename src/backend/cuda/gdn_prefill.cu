// GatedDeltaNet prefill (gdn_prefill.h): recurrent, 16 rows of S a block, 4 warps of 4 rows,
// 8 lanes a row (lane holds columns 32*jj + 4*l8 + c, jj, c < 4), tokens staged in chunks of 32.
#include "backend/cuda/gdn_prefill.h"

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/launch.cuh"

namespace mere::cuda {
namespace {

constexpr int kD = 128, kRowsPerBlock = 16, kThreads = 128, kChunk = 32;

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void cp16(void* dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem_u32(dst)), "l"(src));
}
__device__ __forceinline__ void cp4(void* dst, const void* src) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(smem_u32(dst)), "l"(src));
}

struct Stage {
  float k[kChunk][kD];
  float q[kChunk][kD];
  float v[kChunk][kRowsPerBlock];
  float g[kChunk];
  float beta[kChunk];
};

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

  auto load = [&](int buf, int t0) {
    Stage& s = st[buf];
    const int n = min(kChunk, T - t0);
    // k, q: n tokens x 32 float4 each
    for (int c = tid; c < n * 32; c += kThreads) {
      const int t = c >> 5, j = c & 31;
      const size_t off = (static_cast<size_t>(t0 + t) * Hk + kh) * kD + j * 4;
      cp16(&s.k[t][j * 4], k + off);
      cp16(&s.q[t][j * 4], q + off);
    }
    for (int c = tid; c < n * 4; c += kThreads) {
      const int t = c >> 2, j = c & 3;
      cp16(&s.v[t][j * 4], v + (static_cast<size_t>(t0 + t) * Hv + h) * kD + row0 + j * 4);
    }
    for (int c = tid; c < n; c += kThreads) {
      cp4(&s.g[c], g + static_cast<size_t>(t0 + c) * Hv + h);
      cp4(&s.beta[c], beta + static_cast<size_t>(t0 + c) * Hv + h);
    }
    asm volatile("cp.async.commit_group;\n" ::);
  };

  float4 s[4];
  float* srow = S + (static_cast<size_t>(h) * kD + i) * kD;
#pragma unroll
  for (int jj = 0; jj < 4; ++jj) s[jj] = *reinterpret_cast<const float4*>(srow + 32 * jj + 4 * l8);

  load(0, 0);
  const int nchunks = (T + kChunk - 1) / kChunk;
  for (int ch = 0; ch < nchunks; ++ch) {
    const int t0 = ch * kChunk, n = min(kChunk, T - t0);
    if (ch + 1 < nchunks) {
      load((ch + 1) & 1, t0 + kChunk);
      asm volatile("cp.async.wait_group 1;\n" ::);
    } else {
      asm volatile("cp.async.wait_group 0;\n" ::);
    }
    __syncthreads();
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
    __syncthreads();  // os complete; stage ch&1 free for the load of chunk ch+2
    for (int c = tid; c < n * 4; c += kThreads) {
      const int t = c >> 2, j = c & 3;
      *reinterpret_cast<float4*>(o + (static_cast<size_t>(t0 + t) * Hv + h) * kD + row0 + j * 4) =
          *reinterpret_cast<const float4*>(os + t * kRowsPerBlock + j * 4);
    }
    __syncthreads();  // os read before the next chunk overwrites it
  }
#pragma unroll
  for (int jj = 0; jj < 4; ++jj) *reinterpret_cast<float4*>(srow + 32 * jj + 4 * l8) = s[jj];
}

// ---------------------------------------------------------------- v3: lazy decay (gdn_prefill_lazy)
// The same 16-rows-a-block layout, with the state kept as S = c R (c one scalar a block: the decay is
// per head) so a token costs three 16-element FMA passes instead of four and the two dot products
// run side by side instead of one after the other:
//   a = R k, b = R q (one pass, 4 independent chains each, reduced together);
//   c' = e^g c;  m = c' a;  d = beta (v - m);  o = c' b + d (k.q);  R <- R + (d / c') k
// (e^g S k = c' R k;  o = S' q = c' R q + d k.q). c' below 2^-60 folds into R (R <- c' R, c' = 1;
// also when e^g underflows to 0), so R stays finite; S = c R is written back at the end. e^g and
// k.q are per token and head, computed once a chunk into shared memory. Only the per-token chain
// a, b -> reduce -> d -> R is left on the critical path (v1: e^g, then m, then the update, then o,
// each waiting on the last). Same results up to fp32 reassociation (prefill_check: NMSE vs
// ops::gdn_step).
constexpr float kRenorm = 8.6736174e-19f;  // 2^-60

__global__ void __launch_bounds__(kThreads) gdn_prefill_lazy_kernel(float* __restrict__ S, const float* __restrict__ q,
                                                                    const float* __restrict__ k,
                                                                    const float* __restrict__ v,
                                                                    const float* __restrict__ g,
                                                                    const float* __restrict__ beta, int T, int Hk,
                                                                    int Hv, float* __restrict__ o) {
  pdl_begin();
  extern __shared__ __align__(16) uint8_t smem_raw[];
  Stage* st = reinterpret_cast<Stage*>(smem_raw);                   // [2]
  float* os = reinterpret_cast<float*>(st + 2);                     // [kChunk][kRowsPerBlock]
  float2* tk = reinterpret_cast<float2*>(os + kChunk * kRowsPerBlock);  // [kChunk] {e^g, k.q}
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int h = blockIdx.x / (kD / kRowsPerBlock);
  const int row0 = (blockIdx.x % (kD / kRowsPerBlock)) * kRowsPerBlock;
  const int kh = h / (Hv / Hk);
  const int sub = lane >> 3, l8 = lane & 7;
  const int rl = warp * 4 + sub;
  const int i = row0 + rl;

  auto load = [&](int buf, int t0) {
    Stage& s = st[buf];
    const int n = min(kChunk, T - t0);
    for (int c = tid; c < n * 32; c += kThreads) {
      const int t = c >> 5, j = c & 31;
      const size_t off = (static_cast<size_t>(t0 + t) * Hk + kh) * kD + j * 4;
      cp16(&s.k[t][j * 4], k + off);
      cp16(&s.q[t][j * 4], q + off);
    }
    for (int c = tid; c < n * 4; c += kThreads) {
      const int t = c >> 2, j = c & 3;
      cp16(&s.v[t][j * 4], v + (static_cast<size_t>(t0 + t) * Hv + h) * kD + row0 + j * 4);
    }
    for (int c = tid; c < n; c += kThreads) {
      cp4(&s.g[c], g + static_cast<size_t>(t0 + c) * Hv + h);
      cp4(&s.beta[c], beta + static_cast<size_t>(t0 + c) * Hv + h);
    }
    asm volatile("cp.async.commit_group;\n" ::);
  };

  float4 r[4];
  float* srow = S + (static_cast<size_t>(h) * kD + i) * kD;
#pragma unroll
  for (int jj = 0; jj < 4; ++jj) r[jj] = *reinterpret_cast<const float4*>(srow + 32 * jj + 4 * l8);
  float c = 1.0f;  // S = c R (block-uniform)

  load(0, 0);
  const int nchunks = (T + kChunk - 1) / kChunk;
  for (int ch = 0; ch < nchunks; ++ch) {
    const int t0 = ch * kChunk, n = min(kChunk, T - t0);
    if (ch + 1 < nchunks) {
      load((ch + 1) & 1, t0 + kChunk);
      asm volatile("cp.async.wait_group 1;\n" ::);
    } else {
      asm volatile("cp.async.wait_group 0;\n" ::);
    }
    __syncthreads();
    const Stage& sg = st[ch & 1];
    for (int t = warp; t < n; t += kThreads / 32) {  // the chunk's per-token scalars, a warp a token
      const float4 a = *reinterpret_cast<const float4*>(&sg.k[t][4 * lane]);
      const float4 b = *reinterpret_cast<const float4*>(&sg.q[t][4 * lane]);
      float p = __fmaf_rn(a.x, b.x, __fmaf_rn(a.y, b.y, __fmaf_rn(a.z, b.z, __fmul_rn(a.w, b.w))));
#pragma unroll
      for (int off = 16; off >= 1; off >>= 1) p = __fadd_rn(p, __shfl_xor_sync(0xffffffffu, p, off));
      if (lane == 0) tk[t] = make_float2(expf(sg.g[t]), p);
    }
    __syncthreads();
    for (int t = 0; t < n; ++t) {
      const float2 gk = tk[t];
      const float bt = sg.beta[t], vi = sg.v[t][rl];
      float4 kk[4], qq[4];
#pragma unroll
      for (int jj = 0; jj < 4; ++jj) {
        kk[jj] = *reinterpret_cast<const float4*>(&sg.k[t][32 * jj + 4 * l8]);
        qq[jj] = *reinterpret_cast<const float4*>(&sg.q[t][32 * jj + 4 * l8]);
      }
      float a[4], b[4];
#pragma unroll
      for (int jj = 0; jj < 4; ++jj) {
        a[jj] = __fmaf_rn(r[jj].w, kk[jj].w, __fmaf_rn(r[jj].z, kk[jj].z, __fmaf_rn(r[jj].y, kk[jj].y, __fmul_rn(r[jj].x, kk[jj].x))));
        b[jj] = __fmaf_rn(r[jj].w, qq[jj].w, __fmaf_rn(r[jj].z, qq[jj].z, __fmaf_rn(r[jj].y, qq[jj].y, __fmul_rn(r[jj].x, qq[jj].x))));
      }
      float sa = __fadd_rn(__fadd_rn(a[0], a[1]), __fadd_rn(a[2], a[3]));
      float sb = __fadd_rn(__fadd_rn(b[0], b[1]), __fadd_rn(b[2], b[3]));
#pragma unroll
      for (int off = 1; off <= 4; off <<= 1) {
        sa = __fadd_rn(sa, __shfl_xor_sync(0xffffffffu, sa, off));
        sb = __fadd_rn(sb, __shfl_xor_sync(0xffffffffu, sb, off));
      }
      float cn = __fmul_rn(c, gk.x);
      const float d = __fmul_rn(bt, __fsub_rn(vi, __fmul_rn(cn, sa)));
      const float oi = __fmaf_rn(cn, sb, __fmul_rn(d, gk.y));
      if (l8 == 0) os[t * kRowsPerBlock + rl] = oi;
      if (cn < kRenorm) {  // block-uniform: fold c' into R
#pragma unroll
        for (int jj = 0; jj < 4; ++jj) {
          r[jj].x = __fmul_rn(r[jj].x, cn);
          r[jj].y = __fmul_rn(r[jj].y, cn);
          r[jj].z = __fmul_rn(r[jj].z, cn);
          r[jj].w = __fmul_rn(r[jj].w, cn);
        }
        cn = 1.0f;
      }
      c = cn;
      const float dd = __fdiv_rn(d, cn);
#pragma unroll
      for (int jj = 0; jj < 4; ++jj) {
        r[jj].x = __fmaf_rn(dd, kk[jj].x, r[jj].x);
        r[jj].y = __fmaf_rn(dd, kk[jj].y, r[jj].y);
        r[jj].z = __fmaf_rn(dd, kk[jj].z, r[jj].z);
        r[jj].w = __fmaf_rn(dd, kk[jj].w, r[jj].w);
      }
    }
    __syncthreads();  // os and tk complete; stage ch&1 free for the load of chunk ch+2
    for (int cc = tid; cc < n * 4; cc += kThreads) {
      const int t = cc >> 2, j = cc & 3;
      *reinterpret_cast<float4*>(o + (static_cast<size_t>(t0 + t) * Hv + h) * kD + row0 + j * 4) =
          *reinterpret_cast<const float4*>(os + t * kRowsPerBlock + j * 4);
    }
    __syncthreads();  // os read before the next chunk overwrites it
  }
#pragma unroll
  for (int jj = 0; jj < 4; ++jj)
    *reinterpret_cast<float4*>(srow + 32 * jj + 4 * l8) =
        make_float4(__fmul_rn(c, r[jj].x), __fmul_rn(c, r[jj].y), __fmul_rn(c, r[jj].z), __fmul_rn(c, r[jj].w));
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
                      const float* beta, int64_t T, int64_t Hk, int64_t Hv, int64_t Dk, int64_t Dv, float* o) {
  check_args(T, Hk, Hv, Dk, Dv);
  DeviceGuard guard(dev.ordinal());
  const int smem = static_cast<int>(2 * sizeof(Stage) + kChunk * kRowsPerBlock * sizeof(float) + kChunk * sizeof(float2));
  MERE_CUDA_CHECK(cudaFuncSetAttribute(gdn_prefill_lazy_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  const int blocks = static_cast<int>(Hv * (kD / kRowsPerBlock));
  launch("gdn_prefill_lazy_kernel", gdn_prefill_lazy_kernel, blocks, kThreads, smem, dev.stream(), S, q, k, v, g, beta,
         static_cast<int>(T), static_cast<int>(Hk), static_cast<int>(Hv), o);
}

}  // namespace mere::cuda
