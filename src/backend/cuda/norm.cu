// RMSNorm kernel (norm.h): a 256-thread block per row; each thread sums its strided elements in
// order, then warps reduce by butterfly and warp 0 adds the 8 warp sums in order.
#include "backend/cuda/norm.h"

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/launch.cuh"

namespace mere::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads)
    rms_norm_kernel(const float* __restrict__ x, const float* __restrict__ w, int n, float eps, float* __restrict__ y) {
  pdl_begin();
  __shared__ float partial[kThreads / 32];
  __shared__ float scale;
  const float* xr = x + static_cast<size_t>(blockIdx.x) * n;
  float* yr = y + static_cast<size_t>(blockIdx.x) * n;
  float ss = 0.0f;
  for (int i = threadIdx.x; i < n; i += kThreads) ss = __fmaf_rn(xr[i], xr[i], ss);
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) ss = __fadd_rn(ss, __shfl_xor_sync(0xffffffffu, ss, off));
  if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = ss;
  __syncthreads();
  if (threadIdx.x == 0) {
    float total = 0.0f;
#pragma unroll
    for (int i = 0; i < kThreads / 32; ++i) total = __fadd_rn(total, partial[i]);
    scale = 1.0f / sqrtf(__fadd_rn(__fdiv_rn(total, static_cast<float>(n)), eps));
  }
  __syncthreads();
  const float r = scale;
  for (int i = threadIdx.x; i < n; i += kThreads) yr[i] = __fmul_rn(__fmul_rn(xr[i], r), w[i]);
}

}  // namespace

void rms_norm(CudaDevice& dev, const float* x, const float* w, int64_t T, int64_t n, float eps, float* y) {
  MERE_CHECK(T >= 1 && T < (int64_t{1} << 31), "cuda rms_norm", "row count out of range: expected >= 1, got ", T);
  MERE_CHECK(n >= 1 && n < (int64_t{1} << 31), "cuda rms_norm", "width out of range: expected >= 1, got ", n);
  DeviceGuard guard(dev.ordinal());
  launch("rms_norm_kernel", rms_norm_kernel, static_cast<unsigned>(T), kThreads, 0, dev.stream(), x, w,
         static_cast<int>(n), eps, y);
}

}  // namespace mere::cuda
