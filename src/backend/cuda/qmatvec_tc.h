// Internal to qmatvec.cu: the 4-bit tensor-core matvec (mma.sync m16n8k16 f16 -> fp32) and the 4-bit
// prepare step that writes both the SIMT and the tensor-core layouts of x. The contract is in
// qmatvec.h; the design and measurements in docs/cuda-kernels.md §1 ("v4: tensor cores").
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/qmatvec.h"

namespace mere::cuda::detail {

// Floats of the tensor-core part of the workspace for T rows of `cols` inputs: per (token, group of
// 64 columns) the B fragments of 8 lanes (hi/lo f16 parts, 8 u32 each) and {sum of x, 2^-e}.
int64_t q4tc_floats(int64_t T, int64_t cols);

// 4-bit prepare: writes both layouts of the workspace `ws` (qmatvec_prep.cuh) for T rows of x.
void q4_prepare(cudaStream_t s, const float* x, int T, int cols, float* ws);

// Compiled tensor-core launch shapes (QMatvecConfig, qmatvec.h): cfg.rows_per_warp = 16*R rows a
// block; cfg.stages > 0: shared-memory pipeline with that many stages (4 warps); cfg.stages = 0:
// register pipeline with cfg.warps warps (the 4 K slices spread over them) and cfg.unroll groups a
// register stage.
bool q4tc_available(int64_t T, const QMatvecConfig& cfg);
void q4tc_launch(cudaStream_t s, const QWeightView& W, const float* tc, int64_t T, float* y, const QMatvecConfig& cfg);
// The launch shape for (T, rows) on a device with `sms` multiprocessors: the compiled shape whose
// grid fills whole waves (occupancy from the runtime) with the most bytes in flight.
QMatvecConfig q4tc_default(int64_t T, int64_t rows, int sms);

}  // namespace mere::cuda::detail
