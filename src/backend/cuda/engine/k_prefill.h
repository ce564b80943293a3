// Kernels of the engine's prefill path (engine_prefill.cpp) that the 9-row pass does not need.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace mere::cuda::k {

// Causal depthwise conv + SiLU over T rows, a thread per (8 rows, 4 channels) instead of k::conv_silu's
// walk over all rows (same products in the same order, so bitwise its result), then the last K-1
// raw rows shifted into the history. state: [K-1, C]; w: [C, K]; raw, out: [T, C]
void conv_silu_rows(cudaStream_t s, float* state, const float* w, const float* raw, int64_t T, int64_t C, int64_t K,
                    float* out);

}  // namespace mere::cuda::k
