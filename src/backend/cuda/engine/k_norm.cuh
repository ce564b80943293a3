// The RMSNorm's row reduction, shared by the norm kernels (k_basic.cu) and the kernels that compute
// a row's norm themselves (k_moe_block.cu, k_moe_router.cu, the 4-bit matvec with its input norm in
// qmatvec_int.cu), so all get the same 1 / rms bit for bit.
#pragma once
#include <cuda_runtime.h>

namespace mere::cuda::k {
namespace {

constexpr int kNormThreads = 256;
// 1 / rms of a row from the partial sums of squares of the kNormThreads layout threads, computed by a
// block of kNormThreads / V threads where thread i holds ss[k] of layout thread i + k * (kNormThreads / V)
// (the lanes of a layout warp are one real warp's lanes): the warp butterfly of each, the 8 layout
// warps' sums added in order by thread 0, broadcast through shared memory. V = 1: rms_norm_v4's block.
template <int V>
__device__ __forceinline__ float row_inv_rms_folded(float (&ss)[V], int n, float eps) {
  constexpr int kThreads = kNormThreads / V;
  __shared__ float partial[kNormThreads / 32];
  __shared__ float scale;
#pragma unroll
  for (int k = 0; k < V; ++k) {
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) ss[k] = __fadd_rn(ss[k], __shfl_xor_sync(0xffffffffu, ss[k], off));
    if ((threadIdx.x & 31) == 0) partial[(threadIdx.x + k * kThreads) >> 5] = ss[k];
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    float total = 0.0f;
#pragma unroll
    for (int i = 0; i < kNormThreads / 32; ++i) total = __fadd_rn(total, partial[i]);
    scale = 1.0f / sqrtf(__fadd_rn(__fdiv_rn(total, static_cast<float>(n)), eps));
  }
  __syncthreads();
  return scale;
}
// The same for a block of kNormThreads threads, each with its own partial sum.
__device__ __forceinline__ float row_inv_rms(float ss, int n, float eps) {
  float one[1] = {ss};
  return row_inv_rms_folded<1>(one, n, eps);
}

// One float4 unit's squares added to a layout thread's sum, in the order x, y, z, w.
__device__ __forceinline__ float unit_sumsq(float4 v, float ss) {
  ss = __fmaf_rn(v.x, v.x, ss);
  ss = __fmaf_rn(v.y, v.y, ss);
  ss = __fmaf_rn(v.z, v.z, ss);
  return __fmaf_rn(v.w, v.w, ss);
}

// The vectorised row layout of rms_norm_v4_kernel (and of the kernels that compute a row's norm
// themselves): thread i owns float4 units i, i + kNormThreads, ... (unit k of the thread: v[k], k < KMAX,
// present while i < n4); loads them (+ add's units where add is given, each lane rounded once) and
// returns their sum of squares in the order x, y, z, w of k = 0, 1, ...
template <int KMAX>
__device__ __forceinline__ float load_units_sumsq(const float4* xr, const float4* ar, int n4, float4 (&v)[KMAX]) {
  float ss = 0.0f;
#pragma unroll
  for (int k = 0; k < KMAX; ++k) {
    const int i = static_cast<int>(threadIdx.x) + k * kNormThreads;
    if (i < n4) {
      v[k] = xr[i];
      if (ar) {
        const float4 a = ar[i];
        v[k].x = __fadd_rn(v[k].x, a.x), v[k].y = __fadd_rn(v[k].y, a.y);
        v[k].z = __fadd_rn(v[k].z, a.z), v[k].w = __fadd_rn(v[k].w, a.w);
      }
      ss = unit_sumsq(v[k], ss);
    }
  }
  return ss;
}

// One unit of the normalised row: (v * r) * w, each product rounded.
__device__ __forceinline__ float4 norm_unit(float4 v, float r, float4 w) {
  float4 o;
  o.x = __fmul_rn(__fmul_rn(v.x, r), w.x);
  o.y = __fmul_rn(__fmul_rn(v.y, r), w.y);
  o.z = __fmul_rn(__fmul_rn(v.z, r), w.z);
  o.w = __fmul_rn(__fmul_rn(v.w, r), w.w);
  return o;
}

// The norm weights' float4 units of this thread's layout slots (unit i = threadIdx.x + k * kNormThreads)
// in [u0, u1): weights are never written, so a kernel may load them before its PDL wait and hand them to
// norm_unit after the row's reduction instead of asking the L2 (or DRAM) then.
template <int KMAX>
__device__ __forceinline__ void load_w_units(const float4* w4, int u0, int u1, float4 (&wv)[KMAX]) {
#pragma unroll
  for (int k = 0; k < KMAX; ++k) {
    const int i = static_cast<int>(threadIdx.x) + k * kNormThreads;
    if (i >= u0 && i < u1) wv[k] = __ldg(w4 + i);
  }
}

// The normalised row y = (x * r) * w of n (% 4 == 0) columns in rms_norm_v4's thread layout and order,
// by a block of kNormThreads threads (KMAX float4 units a thread at most): into y (shared memory) and,
// where yg is not null, to global memory as well. Ends without a barrier.
// w_pre: wv holds the weights' units as load_w_units(w4, 0, n / 4) loaded them; else they are loaded here.
template <int KMAX>
__device__ __forceinline__ void norm_row(const float4* x4, const float4* w4, int n, float eps, float4* y, float4* yg,
                                         const float4 (&wv)[KMAX], bool w_pre) {
  const int n4 = n / 4;
  float4 v[KMAX];
  const float r = row_inv_rms(load_units_sumsq(x4, nullptr, n4, v), n, eps);
#pragma unroll
  for (int k = 0; k < KMAX; ++k) {
    const int i = static_cast<int>(threadIdx.x) + k * kNormThreads;
    if (i < n4) {
      const float4 o = norm_unit(v[k], r, w_pre ? wv[k] : w4[i]);
      y[i] = o;
      if (yg != nullptr) yg[i] = o;
    }
  }
}
template <int KMAX>
__device__ __forceinline__ void norm_row(const float4* x4, const float4* w4, int n, float eps, float4* y, float4* yg) {
  const float4 none[KMAX] = {};
  norm_row<KMAX>(x4, w4, n, eps, y, yg, none, false);
}

}  // namespace
}  // namespace mere::cuda::k
