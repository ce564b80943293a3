// Scalar activation functions of the engine's kernels, defined once so that every kernel (and the
// producers fused with qmatvec's prepare step) rounds them the same way.
#pragma once
#include <cuda_bf16.h>

#include <cstdint>

namespace mere::cuda::k {

__device__ __forceinline__ float silu(float x) { return x / (1.0f + expf(-x)); }
__device__ __forceinline__ float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

// v rounded to bf16 (nearest, even on ties: __floats2bfloat162_rn's rounding), as its bits
__device__ __forceinline__ uint16_t bf16_bits(float v) { return __bfloat16_as_ushort(__float2bfloat16_rn(v)); }

// Element f of a row-major [rows, K] activation (K % 8 == 0) stored into xq in qgemm_prepare_x's
// layout (gemm.h): each 8 columns {0,4,1,5,2,6,3,7}, so column p of a group goes to slot 2 (p & 3) +
// (p >> 2). A producer that stores every element this way writes xq bitwise as the prepare launch.
__device__ __forceinline__ void xq_store(uint16_t* xq, int64_t f, float v) {
  const int p = static_cast<int>(f & 7);
  xq[(f & ~int64_t{7}) + (((p & 3) << 1) | (p >> 2))] = bf16_bits(v);
}

}  // namespace mere::cuda::k
