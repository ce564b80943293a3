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

}  // namespace
}  // namespace mere::cuda::k
