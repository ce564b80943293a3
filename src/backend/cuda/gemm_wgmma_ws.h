// The warp-specialised wgmma prefill GEMM (v6d, gemm_wgmma_ws.cu): reached through wgemm() with a
// WgemmStreamK of form WarpSpecialized (gemm_wgmma.h), which owns the stream-K scratch it uses.
#pragma once
#include <cstdint>

#include "backend/cuda/device.h"
#include "backend/cuda/qmatvec.h"  // QWeightView

namespace mere::cuda {

// Blocks of the kernel resident on the whole device at once (one an SM). tall: tiles of 256 weight
// rows x 128 tokens instead of 128 x 256.
int wgemm_ws_resident_blocks(const CudaDevice& dev, bool tall);
// y[T, ldy] = xq · dequant(W)^T with at most `blocks` blocks and the stream-K scratch partials
// ([blocks][256][128] f32) and flags ([blocks], zero between launches). Shapes checked by wgemm().
void wgemm_ws(CudaDevice& dev, const QWeightView& W, const uint16_t* xq, int64_t T, float* y, int64_t ldy, bool tall,
              int blocks, float* partials, unsigned* flags);

}  // namespace mere::cuda
