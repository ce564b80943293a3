// Zero-centred RMSNorm on the device (the loader has already folded the +1 into w):
//   y[t] = x[t] * (1 / sqrt(mean(x[t]^2) + eps)) * w        x, y: [T, n] f32; w: [n] f32
// One block per row, fixed reduction tree: rows never depend on T (batch-width invariant).
// CPU reference: ops::rms_norm (src/backend/cpu/ref_ops.cpp).
#pragma once
#include <cstdint>

#include "backend/cuda/device.h"

namespace mere::cuda {

void rms_norm(CudaDevice& dev, const float* x, const float* w, int64_t T, int64_t n, float eps, float* y);

}  // namespace mere::cuda
