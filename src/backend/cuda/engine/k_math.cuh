// Scalar activation functions of the engine's kernels, defined once so that every kernel (and the
// producers fused with qmatvec's prepare step) rounds them the same way.
#pragma once

namespace mere::cuda::k {

__device__ __forceinline__ float silu(float x) { return x / (1.0f + expf(-x)); }
__device__ __forceinline__ float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

}  // namespace mere::cuda::k
