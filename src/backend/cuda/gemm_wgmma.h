// Prefill matmuls on Hopper's warpgroup MMA (wgmma, sm_90a) straight from 4-bit weights:
// Y[T, N] = X[T, K] · W^T for W an MLX affine 4-bit group-64 matrix, without the bf16 copy of W
// that the cuBLASLt path (gemm_blas.h) writes and reads back (docs/cuda-kernels.md "prefill v6").
//
// Each warpgroup dequantises its 64 weight rows of one 64-column group into the A registers of
// wgmma (A from registers, B = the X tile in shared memory, 128-byte swizzled, K-major); the
// bf16 weight values are dq::q4_pair's, bitwise the ones the cuBLASLt and qgemm paths multiply, and
// X is qgemm_prepare_x's (gemm.h: bf16, the prepared column order, which both operands share). fp32
// accumulation on the tensor cores; the summation order is fixed by the shape (k-steps of 16 in
// column order), so results are deterministic, and with whole tiles independent of T for a given row
// (each output element is the same chain of k-steps whatever tile it lies in); not bitwise cuBLASLt's.
//
// Status (H100): v6a/v6b (session 16) correct but 1.7-1.9x slower than the cuBLASLt path, the MoE
// form 4-9% slower than moe_stream; v6c (wide, session 17) ~1.05x the cuBLASLt path per matrix;
// v6d (ws, session 18) 0.82x on the largest 27B matrices and slower on the small ones, so the
// default MERE_CUDA_PREFILL=auto measures each shape (prefill_choice.h); v6f (wsd) correct, slower.
// docs/cuda-kernels.md "prefill v6" .. "v6f" say why and what each measured.
#pragma once
#include <cstdint>

#include "backend/cuda/device.h"
#include "backend/cuda/gemm_wgmma_ws.h"  // WgemmOut, kWgemmMaxGroup
#include "backend/cuda/qmatvec.h"        // QWeightView

namespace mere::cuda {

// Whether wgemm can run W: 4-bit MLX layout (not tiled), K a positive multiple of 64, 16-byte
// aligned codes; and the device is sm_90.
bool wgemm_supported(const CudaDevice& dev, const QWeightView& W);

// Stream-K scratch of one device (MERE_CUDA_WGEMM=streamk): a persistent grid of every block that fits
// the GPU at once splits the (tile, group) iterations evenly instead of launching whole tiles in
// rounds (27B gate/up at T = 512: 544 tiles on 264 resident blocks = 3 rounds, the last 6% full);
// tiles split between blocks meet through these partial sums and flags (flags are zero between
// launches). Results are deterministic for a given shape, T and GPU, but depend on T (the split moves).
// Forms: StreamK (v6b, 128-token tiles), Wide (MERE_CUDA_WGEMM=wide, v6c: 256-token tiles, one
// block an SM, the weights dequantised into shared memory while the previous group's wgmmas run;
// docs/cuda-kernels.md "v6c"), WarpSpecialized (MERE_CUDA_WGEMM=ws, v6d: v6c's tiles fed by a TMA
// producer warp through mbarriers, no block barrier a group; gemm_wgmma_ws.h), WarpSpecializedTall
// (MERE_CUDA_WGEMM=wst: the same with tiles of 256 weight rows x 128 tokens), WarpSpecializedDequant
// (MERE_CUDA_WGEMM=wsd, v6f: ws's tiles with the producer warpgroup dequantising; bitwise ws).
enum class WgemmForm { StreamK, Wide, WarpSpecialized, WarpSpecializedTall, WarpSpecializedDequant };
const char* wgemm_form_name(WgemmForm f);  // "stream-K", "wide", "ws", "wst", "wsd"

class WgemmStreamK {
 public:
  explicit WgemmStreamK(CudaDevice& dev, WgemmForm form = WgemmForm::StreamK);  // throws mere::Error naming what did not fit
  int blocks() const { return blocks_; }
  WgemmForm form() const { return form_; }
  bool wide() const { return form_ != WgemmForm::StreamK; }  // 128 partial sums a thread
  bool ws() const {
    return form_ == WgemmForm::WarpSpecialized || form_ == WgemmForm::WarpSpecializedTall ||
           form_ == WgemmForm::WarpSpecializedDequant;
  }
  float* partials() const { return ws_.as<float>(); }
  unsigned* flags() const { return flags_.as<unsigned>(); }
  size_t device_bytes() const { return ws_.bytes() + flags_.bytes(); }

 private:
  int blocks_ = 0;
  WgemmForm form_ = WgemmForm::StreamK;
  DeviceBuffer ws_, flags_;
};

// y: [T, W.rows] f32 (row stride ldy >= W.rows) = xq · dequant(W)^T. xq: [T, W.cols] bf16 from
// qgemm_prepare_x, 16-byte aligned rows. sk: nullptr = whole tiles (each row's result independent of
// T), else stream-K through sk (one launch at a time per sk). Throws mere::Error when
// !wgemm_supported or a shape is out of range.
void wgemm(CudaDevice& dev, const QWeightView& W, const uint16_t* xq, int64_t T, float* y, int64_t ldy,
           WgemmStreamK* sk = nullptr, WsGrid grid = WsGrid::StreamK);

// A group: outs[i].y = xq · dequant(outs[i].W)^T for n (1..kWgemmMaxGroup) matrices of the same cols
// in ONE launch of a warp-specialised form (sk.ws()): their 128-row tiles one stream-K iteration space,
// so the small matrices of a layer (27B GDN z / b / a beside qkv; k / v beside q) fill the SMs the
// large one leaves idle instead of paying a launch and a thin grid each. Each matrix as wgemm's
// contract (the same bf16 operands; the split, hence the fp32 summation order, is the launch's).
// Throws mere::Error when a matrix is not wgemm_supported, the cols differ or a shape is out of range.
// grid: how the tiles meet the blocks (a ws form's; the v6a-v6c forms are always stream-K or tiles).
void wgemm_group(CudaDevice& dev, const WgemmOut* outs, int n, const uint16_t* xq, int64_t T, WgemmStreamK& sk,
                 WsGrid grid = WsGrid::StreamK);

// The routed MoE experts on wgmma (prompt passes; docs/cuda-kernels.md "MoE prefill v3"): the same
// contract as moe_stream / moe_stream_gate_up (gemm_moe.h) — W: E experts of Ne rows stacked, xq:
// [P, K] prepared rows in expert order, offsets: device int32 [E + 1], y: [P, Ne] (ldy) — and the
// same bf16 operands; a block is 32 gathered rows of one expert x 128 weight rows (gate/up: 64 rows
// of each, the SwiGLU fused, rounded as k::swiglu). Deterministic; each row independent of P and of
// the routing. Needs wgemm_moe_supported (Ne % 128 == 0).
bool wgemm_moe_supported(const CudaDevice& dev, const QWeightView& W, int64_t Ne);
void wgemm_moe(CudaDevice& dev, const QWeightView& W, int64_t E, int64_t Ne, const uint16_t* xq,
               const int32_t* offsets, int64_t P, float* y, int64_t ldy);
void wgemm_moe_gate_up(CudaDevice& dev, const QWeightView& G, const QWeightView& U, int64_t E, int64_t Ne,
                       const uint16_t* xq, const int32_t* offsets, int64_t P, float* y, int64_t ldy);

}  // namespace mere::cuda
