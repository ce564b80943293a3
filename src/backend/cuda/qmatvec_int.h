// Internal to qmatvec.cu: the 4-bit integer-product matvec (IDP4A on exact base-256 digits of x),
// the 4-bit default (contract: qmatvec.h "4-bit, integer"; design and measurements:
// docs/cuda-kernels.md §1 "v6").
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/qmatvec.h"

namespace mere::cuda::detail {

// cfg.rows_per_warp of the integer kernel that lets each launch pick R (2, 3 or 4 rows a batch, one
// chunk in flight) by how well its rows fill the batches.
inline constexpr int kIntFitRows = -1;

// Whether an integer-kernel shape (cfg.rows_per_warp rows a batch, cfg.unroll chunks in flight) is
// compiled for T.
bool q4int_available(int64_t T, const QMatvecConfig& cfg);
// The default integer shape for T.
QMatvecConfig q4int_default(int64_t T);
// y = W x (or y += W x) for up to kMaxMultiMatrices matrices of the same width over one prepared
// workspace `ws` (the whole workspace, qmatvec_prep.cuh), in one launch on `s`. The rows of all
// matrices are spread evenly over a grid of resident warps (at most one wave, so no tail wave).
void q4int_launch(cudaStream_t s, const QMatvecOut* outs, int n, const float* ws, int64_t T, int64_t cols,
                  const QMatvecConfig& cfg, int sms);

}  // namespace mere::cuda::detail
