// Prefill MoE experts as a weight stream (docs/cuda-kernels.md "MoE prefill v2"): at T = 512 a
// 35B-A3B layer sends ~16 token rows to each of its 256 experts, so the grouped matmul reads 453 MB
// of 4-bit weights for ~17 GFLOP — a bandwidth problem. qgemm_grouped (gemm.h) stages the weights
// through shared memory with a barrier a 64-column tile and ran at 1.3 TB/s; this kernel has no
// barrier: each warp streams 2 x 16 weight rows over all K with 16-byte loads one span (128
// columns) ahead in registers (or three spans ahead through a per-lane shared-memory ring:
// MoeStreamLoads), dequantises each 32-bit word of codes straight into the A fragments of two
// mma.m16n8k16 k-steps, and takes the B fragments (the expert's tokens, <= 32 a pass) from the
// prepared X, which stays in L1/L2.
//
// Numerics: the operands are bitwise qgemm's (gemm_dequant.cuh: bf16(q * s + b); X prepared by
// qgemm_prepare_x / _gather), products accumulate in fp32 on the tensor cores; the k-step order
// differs from qgemm_grouped's, so results agree to fp32 summation order (checked by
// tools/cuda/prefill_check.cu against ops::linear and against qgemm_grouped). Deterministic: each
// output is one fixed sequence of k-steps whatever P, the routing or the launch shape.
#pragma once
#include <cstdint>

#include "backend/cuda/device.h"
#include "backend/cuda/qmatvec.h"  // QWeightView

namespace mere::cuda {

// How the weight stream keeps bytes in flight: two register buffers (the v1 kernel); the same held
// to 128 registers so that 4 blocks share an SM instead of 3 (Tight: 5% faster, the engine's
// default); or a 4-deep cp.async ring of each lane's own shared-memory slots (~3 spans in flight a
// warp instead of ~1; measured slower). Bitwise the same results: only the loads differ
// (docs/cuda-kernels.md "MoE prefill v2c").
enum class MoeStreamLoads { Registers, Ring, Tight };

// Whether moe_stream runs this stacked expert matrix of Ne rows an expert: 4-bit MLX layout (not
// tiled), cols % 128 == 0, Ne % 16 == 0 (every Qwen3.5 MoE matrix; else use qgemm_grouped).
bool moe_stream_supported(const QWeightView& W, int64_t Ne);

// y[r, n] = xq[r] · dequant(W)[e * Ne + n] for the rows r of expert e (offsets, as qgemm_grouped).
// W: E experts stacked ([E * Ne, K]); xq: [P, K] prepared rows in expert order; offsets: device
// int32 [E + 1]; y: [P, Ne] f32 (row stride ldy). The grid is sized from P and E (no read-back).
void moe_stream(CudaDevice& dev, const QWeightView& W, int64_t E, int64_t Ne, const uint16_t* xq,
                const int32_t* offsets, int64_t P, float* y, int64_t ldy,
                MoeStreamLoads loads = MoeStreamLoads::Registers);

// Gate and up in one pass with the SwiGLU fused: y[r, n] = silu(xq[r] · G[e*Ne + n]) * (xq[r] ·
// U[e*Ne + n]), rounded as k::swiglu (fmul_rn(silu(g), u)). G and U: the same shape.
void moe_stream_gate_up(CudaDevice& dev, const QWeightView& G, const QWeightView& U, int64_t E, int64_t Ne,
                        const uint16_t* xq, const int32_t* offsets, int64_t P, float* y, int64_t ldy,
                        MoeStreamLoads loads = MoeStreamLoads::Registers);

}  // namespace mere::cuda
