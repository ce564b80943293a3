// The RMSNorm's row reduction, shared by the norm kernels (k_basic.cu) and the kernels that compute
// a row's norm themselves (k_moe_block.cu), so both get the same 1 / rms bit for bit.
#pragma once
#include <cuda_runtime.h>

namespace mere::cuda::k {
namespace {

constexpr int kNormThreads = 256;
// 1 / rms of a row from each thread's partial sum of squares (block of kNormThreads): warp
// butterfly, the warps' sums added in order by thread 0, broadcast through shared memory.
__device__ __forceinline__ float row_inv_rms(float ss, int n, float eps) {
  __shared__ float partial[kNormThreads / 32];
  __shared__ float scale;
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) ss = __fadd_rn(ss, __shfl_xor_sync(0xffffffffu, ss, off));
  if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = ss;
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
      ss = __fmaf_rn(v[k].x, v[k].x, ss);
      ss = __fmaf_rn(v[k].y, v[k].y, ss);
      ss = __fmaf_rn(v[k].z, v[k].z, ss);
      ss = __fmaf_rn(v[k].w, v[k].w, ss);
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

}  // namespace
}  // namespace mere::cuda::k
