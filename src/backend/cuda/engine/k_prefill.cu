// Prefill-only kernels of the engine (k_prefill.h).
#include "backend/cuda/engine/k_prefill.h"

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/engine/k_math.cuh"
#include "backend/cuda/launch.cuh"

namespace mere::cuda::k {
namespace {

constexpr int kMaxConvK = 8;

// x_i for i in [-(K-1), T): raw row i, or history row i + K - 1 for i < 0
__global__ void conv_rows_kernel(const float* state, const float* w, const float* raw, int C, int K, float* out) {
  pdl_begin();
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  const int t = blockIdx.y;
  if (c >= C) return;
  float acc = 0.0f;
  for (int j = 0; j < K - 1; ++j) {
    const int i = t - (K - 1) + j;
    const float x = i >= 0 ? raw[static_cast<int64_t>(i) * C + c] : state[static_cast<int64_t>(i + K - 1) * C + c];
    acc = __fmaf_rn(w[c * K + j], x, acc);
  }
  acc = __fmaf_rn(w[c * K + K - 1], raw[static_cast<int64_t>(t) * C + c], acc);
  out[static_cast<int64_t>(t) * C + c] = silu(acc);
}

// history row j <- x_{T-(K-1)+j}; ascending j reads row T+j >= j+1 before any write reaches it
__global__ void conv_shift_kernel(float* state, const float* raw, int T, int C, int K) {
  pdl_begin();
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  for (int j = 0; j < K - 1; ++j) {
    const int i = T - (K - 1) + j;
    state[static_cast<int64_t>(j) * C + c] =
        i >= 0 ? raw[static_cast<int64_t>(i) * C + c] : state[static_cast<int64_t>(i + K - 1) * C + c];
  }
}

}  // namespace

void conv_silu_rows(cudaStream_t s, float* state, const float* w, const float* raw, int64_t T, int64_t C, int64_t K,
                    float* out) {
  MERE_CHECK(K >= 1 && K <= kMaxConvK && T >= 1 && T < 65536, "cuda conv", "conv width 1..", kMaxConvK,
             " and T 1..65535 expected, got K = ", K, ", T = ", T);
  const unsigned bx = static_cast<unsigned>((C + 255) / 256);
  launch("conv_rows_kernel", conv_rows_kernel, dim3(bx, static_cast<unsigned>(T)), 256, 0, s, state, w, raw,
         static_cast<int>(C), static_cast<int>(K), out);
  launch("conv_shift_kernel", conv_shift_kernel, bx, 256, 0, s, state, raw, static_cast<int>(T), static_cast<int>(C),
         static_cast<int>(K));
}

}  // namespace mere::cuda::k
