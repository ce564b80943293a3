// Affine-quantised (MLX, group 64, 4- or 8-bit) matrix times T skinny rows, for decode and MTP
// verification: y[t] = W x[t], t < T <= 9, W: [rows, cols] dequantised as w = scale * q + bias.
// CPU reference: ops::linear (src/backend/cpu/ref_ops.cpp) on the same mere::Matrix.
//
// Exact contract (what makes it batch-width invariant, mtp.md §6): row r of output t is
//   for each lane l < 32, chunks j = l, l+32, ... (a chunk = 16 bytes of codes = 128/bits columns):
//     qx  = sum over the chunk's columns c, in order, of fma(q[r,c], x[t,c], qx)       (fp32)
//     acc = fma(scale[r,g], qx, fma(bias[r,g], sum_chunk(x[t]), acc))                  (g = c/64)
//   y = butterfly sum of the 32 lane accumulators (xor 16, 8, 4, 2, 1)
// Nothing in it depends on T, the rows per warp or the unroll depth, so row t of a T-row call is
// bitwise the 1-row call, and every launch configuration gives bitwise the same result.
#pragma once
#include <cstdint>

#include "backend/cuda/device.h"

namespace mere::cuda {

inline constexpr int kMaxSkinnyRows = 9;  // T = 1..9 (verification width of MTP)

// Device view of one quantised weight: MLX layout, uploaded unchanged.
struct QWeightView {
  const uint32_t* codes = nullptr;   // [rows, cols*bits/32] u32, LSB-first packed codes
  const uint16_t* scales = nullptr;  // [rows, cols/64] bf16
  const uint16_t* biases = nullptr;  // [rows, cols/64] bf16
  int64_t rows = 0, cols = 0;
  int bits = 4;                      // 4 or 8; group size is always 64
  size_t bytes() const { return static_cast<size_t>(rows * cols * bits / 8 + rows * (cols / 64) * 4); }
};

// Launch shape: rows per warp (the x slice a lane loads is reused over them) and 16-byte chunks
// per row a lane keeps in flight. 0 = choose automatically. Results do not depend on it.
struct QMatvecConfig {
  int rows_per_warp = 0;  // 2, 4 or 8
  int unroll = 0;         // 1, 2 or 4
};

// Floats of workspace qmatvec needs for T rows of `cols` inputs: prescaled x, lane-interleaved
// [T, spans of 32 chunks, float4 unit, lane] (padded to whole spans), and the per-chunk sums of x
// [T, cols/(128/bits)].
int64_t qmatvec_workspace_floats(int64_t T, int64_t cols, int bits);

// Writes the prepared input into `ws` (device, qmatvec_workspace_floats floats). x: [T, cols] f32.
void qmatvec_prepare(CudaDevice& dev, const float* x, int64_t T, int64_t cols, int bits, float* ws);
// y: [T, rows] f32 (device) from a prepared workspace.
void qmatvec(CudaDevice& dev, const QWeightView& W, const float* ws, int64_t T, float* y, QMatvecConfig cfg = {});
// Both steps: y[t] = W x[t].
void qlinear(CudaDevice& dev, const QWeightView& W, const float* x, int64_t T, float* ws, float* y,
             QMatvecConfig cfg = {});

// Whether a configuration is compiled in for (bits, T) (benchmarks try several).
bool qmatvec_config_available(int bits, int64_t T, QMatvecConfig cfg);
// The launch shape used when cfg is {0, 0}: picked from the H200 sweep (docs/cuda-kernels.md).
QMatvecConfig qmatvec_default_config(int bits, int64_t T, int64_t rows);

}  // namespace mere::cuda
