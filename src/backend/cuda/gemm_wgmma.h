// Prefill matmuls on Hopper's warpgroup MMA (wgmma, sm_90a) straight from 4-bit weights:
// Y[T, N] = X[T, K] · W^T for W an MLX affine 4-bit group-64 matrix, without the bf16 copy of W
// that the cuBLASLt path (gemm_blas.h) writes and reads back (docs/cuda-kernels.md "prefill v6").
//
// Each warpgroup dequantises its 64 weight rows of one 64-column group into the A registers of
// wgmma (A from registers, B = the X tile in shared memory, 128-byte swizzled, K-major); the
// bf16 weight values are dq::q4_pair's, bitwise the ones the cuBLASLt and qgemm paths multiply, and
// X is qgemm_prepare_x's (gemm.h: bf16, the prepared column order, which both operands share). fp32
// accumulation on the tensor cores; the summation order is fixed by the shape (k-steps of 16 in
// column order), so results are deterministic and independent of T for a given row (each output
// element is the same chain of k-steps whatever tile it lies in), but not bitwise cuBLASLt's.
#pragma once
#include <cstdint>

#include "backend/cuda/device.h"
#include "backend/cuda/qmatvec.h"  // QWeightView

namespace mere::cuda {

// Whether wgemm can run W: 4-bit MLX layout (not tiled), K a positive multiple of 64, 16-byte
// aligned codes; and the device is sm_90.
bool wgemm_supported(const CudaDevice& dev, const QWeightView& W);

// y: [T, W.rows] f32 (row stride ldy >= W.rows) = xq · dequant(W)^T. xq: [T, W.cols] bf16 from
// qgemm_prepare_x, 16-byte aligned rows. Throws mere::Error when !wgemm_supported or a shape is out
// of range.
void wgemm(CudaDevice& dev, const QWeightView& W, const uint16_t* xq, int64_t T, float* y, int64_t ldy);

}  // namespace mere::cuda
