// Block-wide reductions in a fixed order (warp xor butterfly, then the warps' results added in warp
// order by every thread), shared by the engine's kernels that reduce over a block (k_attn.cu, the GDN
// kernels through k_gdn_common.cuh), so each gets the same bits from the same values.
#pragma once
#include <cuda_runtime.h>

namespace mere::cuda::k {
namespace {

// block_sum's two halves, for kernels that reduce several values with one barrier (conv_gdn_prepare's
// v4): the warp's xor butterfly (every lane ends with the warp's sum) ...
__device__ __forceinline__ float warp_xor_sum(float v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v = __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, off));
  return v;
}
// ... and the n warps' sums added to 0.0f in warp order.
__device__ __forceinline__ float warps_in_order(const float* partial, int n) {
  float total = 0.0f;
  for (int i = 0; i < n; ++i) total = __fadd_rn(total, partial[i]);
  return total;
}

// The sum of v over the block's threads; partial: blockDim.x / 32 floats of shared memory.
__device__ float block_sum(float v, float* partial) {  // fixed order: butterfly, then warps in order
  v = warp_xor_sum(v);
  if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = v;
  __syncthreads();
  const float total = warps_in_order(partial, static_cast<int>(blockDim.x >> 5));
  __syncthreads();
  return total;
}

}  // namespace
}  // namespace mere::cuda::k
