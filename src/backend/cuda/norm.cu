// RMSNorm kernel (norm.h): a 256-thread block per row; each thread sums its strided elements in
// order, then warps reduce by butterfly and warp 0 adds the 8 warp sums in order.
#include "backend/cuda/norm.h"

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/engine/k_norm.cuh"
#include "backend/cuda/launch.cuh"

namespace mere::cuda {
namespace {

constexpr int kThreads = k::kNormThreads;

__global__ void __launch_bounds__(kThreads)
    rms_norm_kernel(const float* __restrict__ x, const float* __restrict__ w, int n, float eps, float* __restrict__ y) {
  pdl_begin();
  const float* xr = x + static_cast<size_t>(blockIdx.x) * n;
  float* yr = y + static_cast<size_t>(blockIdx.x) * n;
  float ss = 0.0f;
  for (int i = threadIdx.x; i < n; i += kThreads) ss = __fmaf_rn(xr[i], xr[i], ss);
  const float r = k::row_inv_rms(ss, n, eps);
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
