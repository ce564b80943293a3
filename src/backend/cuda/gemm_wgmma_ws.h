// The warp-specialised wgmma prefill GEMM (v6d, gemm_wgmma_ws.cu): reached through wgemm() with a
// WgemmStreamK of form WarpSpecialized (gemm_wgmma.h), which owns the stream-K scratch it uses.
#pragma once
#include <cstdint>

#include "backend/cuda/device.h"
#include "backend/cuda/qmatvec.h"  // QWeightView

namespace mere::cuda {

// Wide: tiles of 128 weight rows x 256 tokens (v6d, MERE_CUDA_WGEMM=ws); Tall: 256 rows x 128 tokens
// (wst); Dequant: Wide's tiles with the producer warpgroup dequantising (v6f, wsd) — bitwise Wide.
enum class WsShape { Wide, Tall, Dequant };
// Blocks of the kernel resident on the whole device at once (one an SM).
int wgemm_ws_resident_blocks(const CudaDevice& dev, WsShape shape);
// Whether v6f takes W at T rows (an even number of groups a row, 4-byte aligned scales and biases);
// wgemm_ws runs v6d instead otherwise.
bool wgemm_ws_dequant_fits(const QWeightView& W, int64_t T);
// How a launch's (row, token) tiles meet its blocks: StreamK splits the (tile, group) iterations evenly
// over the resident blocks (split tiles meet through partial sums); WholeTiles gives each block the same
// number of whole tiles, as few as fit the resident blocks (no partial sums, maybe idle SMs). Neither
// wins everywhere (session 21: at K = 2,048 a split costs more than a tile's worth of idle SMs).
enum class WsGrid { StreamK, WholeTiles };
// One matrix of a launch and its output: y [T, ldy] f32 = xq · dequant(W)^T.
struct WgemmOut {
  QWeightView W;
  float* y;
  int64_t ldy;
};
// The most matrices one launch multiplies (they share X, so the same cols, and one stream-K split).
constexpr int kWgemmMaxGroup = 4;
// outs[i].y = xq · dequant(outs[i].W)^T for n (1..kWgemmMaxGroup) matrices of the same cols in one
// launch, with at most `blocks` blocks and the stream-K scratch partials ([blocks][256][128] f32) and
// flags ([blocks], zero between launches). Shapes checked by wgemm() / wgemm_group().
void wgemm_ws(CudaDevice& dev, const WgemmOut* outs, int n, const uint16_t* xq, int64_t T, WsShape shape, WsGrid grid,
              int blocks, float* partials, unsigned* flags);

}  // namespace mere::cuda
