// Affine-quantised (MLX, group 64, 4- or 8-bit) matrix times T skinny rows, for decode and MTP
// verification: y[t] = W x[t], t < T <= 9, W: [rows, cols] dequantised as w = scale * q + bias.
// CPU reference: ops::linear (src/backend/cpu/ref_ops.cpp) on the same mere::Matrix.
//
// Two kernels, each with an exact contract that makes it batch-width invariant (mtp.md §6): row t of
// a T-row call is bitwise the 1-row call, and every launch shape of a kernel gives bitwise the same
// result (cuda_check tests both for every shape).
//
// 4-bit, integer (the default; MERE_CUDA_QMATVEC=simt or =tc select the others for the whole
// process; docs/cuda-kernels.md §1 "v6"): for row r, token t, chunk j of 32 columns (group g = j/2),
// with e = e(t, j) the exponent that puts the chunk's max |x| in [2^20, 2^21) and X = rint(x * 2^e):
//     V   = sum over the chunk's columns c of q[r,c] * X[t,c]                    (exact, int32)
//     qx  = fl(V) * 2^-e                      (NaN if the chunk of x holds a non-finite value)
//     acc = fma(scale[r,g], qx, fma(bias[r,g], sum_chunk(x[t]), acc))    for lane l < 32, chunks
//           j = l, l+32, ... in order (fp32); y = butterfly sum of the 32 lane accumulators (xor 16..1)
//   (sum_chunk as in the SIMT contract). x enters with ~22 significant bits relative to its chunk's
//   max instead of 24 per element; everything else is the SIMT contract.
//
// 4-bit, group integer (MERE_CUDA_QMATVEC=mma; qmatvec_gmma.cu, docs/cuda-kernels.md §1 "v8"): for
// row r, token t, group G of 64 columns, with e = e(t, G) the exponent that puts the group's max |x|
// in [2^20, 2^21) and X = rint(x * 2^e):
//     V     = sum over the group's columns c of q[r,c] * X[t,c]                   (exact, int32)
//     qx    = fl(V) * 2^-e                     (NaN if the group of x holds a non-finite value)
//     acc_s = fma(scale[r,G], qx, fma(bias[r,G], sum_G(x[t]), acc_s))   over the groups of K-split s
//             (groups [ng*s/S, ng*(s+1)/S), increasing; fp32), y = ((acc_0 + acc_1) + ...) + acc_{S-1}
//   (sum_G as in the tensor-core contract below). S in {1, 2, 4, 8} is a function of (rows, cols,
//   the device's SM count, and MERE_CUDA_GM_WARPS when set for the process) only, so T, the other
//   matrices of a launch, the ring depth, the groups a step and ring vs batches change nothing: one
//   kernel for every T is batch-width invariant by construction.
//
// 4-bit, tensor cores (selected by a tensor-core QMatvecConfig or MERE_CUDA_QMATVEC=tc;
// docs/cuda-kernels.md §1 "v4"): for row r, token t, group G of 64
// columns, with s = s(t, G) the power of two that puts the group's max |x| in [2^14, 2^15) and
// xh = f16(x * 2^s), xl = f16(x * 2^s - xh) (0 for an all-zero group, s = 0 for non-finite x):
//     h = mma.m16n8k16 f16 -> f32 of the group's 64 codes (exact f16 integers) with xh, as 4 k-steps
//         into a zeroed accumulator, k order fixed (columns 16q+ks, +4, +8, +12 at k-step ks)
//     l = the same with xl (another n-column of the same mma)
//     acc_S = fma(scale[r,G], (h + l) * 2^-s, fma(bias[r,G], sum_G(x[t]), acc_S))     (fp32)
//   over the groups G = S, S+4, S+8, ... of slice S in increasing order (4 slices), sum_G(x) =
//   (q0 + q1) + (q2 + q3) of the in-order fp32 sums q of its four 16-column quarters; then
//   y = ((acc_0 + acc_1) + acc_2) + acc_3.
// Each token occupies its own two columns of the mma (tokens 4j..4j+3 share n-tile j); a column's
// result depends only on A and that column of B, so nothing depends on T, the other tokens, the warps
// a block, the rows a block or the groups in flight.
//
// SIMT (8-bit, and 4-bit with MERE_CUDA_QMATVEC=simt; rows_per_warp 2, 4 or 8): row r of output t is
//   for each lane l < 32, chunks j = l, l+32, ... (a chunk = 16 bytes of codes = 128/bits columns):
//     qx  = sum over the chunk's columns c, in order, of fma(q[r,c], x[t,c], qx)       (fp32)
//     acc = fma(scale[r,g], qx, fma(bias[r,g], sum_chunk(x[t]), acc))                  (g = c/64)
//   y = butterfly sum of the 32 lane accumulators (xor 16, 8, 4, 2, 1)
// (4-bit: sum_chunk = sum of the chunk's two 16-column quarters, each in order.)
#pragma once
#include <cstdint>

#include "backend/cuda/device.h"

namespace mere::cuda {

inline constexpr int kMaxSkinnyRows = 9;  // T = 1..9 (verification width of MTP)
inline constexpr int kMaxMultiMatrices = 4;  // matrices of one qmatvec_multi launch

// Device view of one quantised weight: the MLX layout uploaded unchanged, or (4-bit, tiled) the
// layout of the group-integer kernel (below).
struct QWeightView {
  const uint32_t* codes = nullptr;   // MLX: [rows, cols*bits/32] u32, LSB-first packed codes
  const uint16_t* scales = nullptr;  // MLX: [rows, cols/64] bf16; tiled: the {scale, bias} pairs
  const uint16_t* biases = nullptr;  // MLX: [rows, cols/64] bf16; tiled: nullptr
  int64_t rows = 0, cols = 0;
  int bits = 4;                      // 4 or 8; group size is always 64
  bool tiled = false;                // 4-bit tiled layout (only the group-integer kernel and qgemm read it)
  size_t bytes() const { return static_cast<size_t>(rows * cols * bits / 8 + rows * (cols / 64) * 4); }
  // Same shape and format: a launch over one runs the same kernels with the same timing as over the other.
  bool same_shape(const QWeightView& o) const {
    return rows == o.rows && cols == o.cols && bits == o.bits && tiled == o.tiled;
  }
};

// Tiled 4-bit weights (qmatvec_tiled.cu): a permutation of the MLX bytes for the group-integer
// kernel, rows padded to whole tiles of 16 (zero codes and scales):
//   codes: [tiles, cols/64, 32 lanes] uint4, lane (g = lane/4, t = lane%4) = {row 16*tile + g: u32
//          words 2t, 2t+1 of the group (columns 16t..16t+15); row 16*tile + g + 8: the same words}
//   sb:    [tiles, cols/64, 8] uint2 = {scale | bias << 16 (bf16 bits) of row 16*tile + g, of row + 8}
struct QTiledBytes {
  size_t codes = 0, sb = 0;
};
QTiledBytes qmatvec_tiled_bytes(int64_t rows, int64_t cols);
// Whether 4-bit weights should be uploaded tiled: the process runs the group-integer kernel
// (MERE_CUDA_QMATVEC=mma). MLX-layout 4-bit matrices then run on the integer kernel.
bool qmatvec_tiled_weights();
// Smallest staging buffer qmatvec_tile_upload takes for `cols` (one tile of 16 rows).
size_t qmatvec_tile_staging_min(int64_t cols);
// Host MLX matrix (codes [rows, cols/8] u32, scales / biases [rows, cols/64] bf16) -> tiled layout at
// dst_codes / dst_sb (device, qmatvec_tiled_bytes), in chunks of whole tiles through `staging`
// (device scratch, >= qmatvec_tile_staging_min). Returns when the copy is complete.
void qmatvec_tile_upload(CudaDevice& dev, const void* codes, const uint16_t* scales, const uint16_t* biases,
                         int64_t rows, int64_t cols, void* dst_codes, void* dst_sb, void* staging,
                         size_t staging_bytes);
// Device MLX 4-bit matrix -> tiled copy at dst_codes / dst_sb (stream-ordered); the view of the copy.
QWeightView qmatvec_tile_device(CudaDevice& dev, const QWeightView& src, void* dst_codes, void* dst_sb);

// Launch shape; rows_per_warp = 0: choose automatically (qmatvec_default_config). Results never
// depend on it (within one kernel).
// * SIMT kernel (8-bit; 4-bit with rows_per_warp 2, 4 or 8): rows per warp (the x slice a lane loads
//   is reused over them) and 16-byte chunks per row a lane keeps in flight (unroll 1, 2 or 4).
// * 4-bit tensor cores (rows_per_warp 16 or 32 = rows a block, R tiles of 16 rows that every warp
//   of the block works on), two implementations with the same contract (bitwise equal results):
//   - stages > 0: shared-memory pipeline: 4 warps, the block copies 4 groups (128 bytes) of each of
//     its rows a stage with cp.async, `stages` deep; warp w takes group w of each stage (unroll,
//     warps ignored);
//   - stages = 0: register pipeline: unroll = groups a warp keeps in flight per register stage (two
//     stages), warps = warps a block (1, 2 or 4; the 4 K slices are spread over them).
struct QMatvecConfig {
  int rows_per_warp = 0;
  int unroll = 0;
  int warps = 0;   // tensor cores, register pipeline
  int stages = 0;  // tensor cores, shared-memory pipeline
  int integer = 0;  // 4-bit integer kernel (rows_per_warp 2, 4 or 8 rows a batch; unroll chunks in flight)
};

// Floats of workspace qmatvec needs for T rows of `cols` inputs: prescaled x, lane-interleaved
// [T, spans of 32 chunks, float4 unit, lane] (padded to whole spans), and the per-chunk sums of x
// [T, cols/(128/bits)] (the SIMT layout); 4-bit adds the tensor-core layout (f16 hi/lo B fragments
// [T, cols/64, 8 lanes, 8 words] and {sum, 2^-s} [T, cols/64]): qmatvec_prepare writes both, so
// either kernel can run on it.
int64_t qmatvec_workspace_floats(int64_t T, int64_t cols, int bits);

// Writes the prepared input into `ws` (device, qmatvec_workspace_floats floats). x: [T, cols] f32.
void qmatvec_prepare(CudaDevice& dev, const float* x, int64_t T, int64_t cols, int bits, float* ws);
// y: [T, rows] f32 (device) from a prepared workspace.
void qmatvec(CudaDevice& dev, const QWeightView& W, const float* ws, int64_t T, float* y, QMatvecConfig cfg = {});
// One output of qmatvec_multi: y = W x, or y += W x (fp32 add of the product to y) with accumulate.
struct QMatvecOut {
  QWeightView W;
  float* y = nullptr;  // [T, W.rows]
  bool accumulate = false;
};
// Up to kMaxMultiMatrices matrices of the same bits and width over one prepared x in one launch
// (SIMT; tensor cores: one launch each, no accumulate). Every row is bitwise what qmatvec gives it.
void qmatvec_multi(CudaDevice& dev, const QMatvecOut* outs, int n, const float* ws, int64_t T, QMatvecConfig cfg = {});
// The input of a one-token 4-bit launch computed by every block of the launch itself
// (qmatvec_src_multi), each value as the engine's producer kernel computes it (docs/cuda-kernels.md
// §5.19); all pointers f32 on the device, 16-byte aligned:
//  * RmsNorm (k::rms_norm_prep): y = rmsnorm(x) * w; x, w [cols];
//  * GatedRmsNorm (k::gated_rms_norm_prep): each head of head_dim columns y = (w * (x * r_h)) * silu(z),
//    r_h = 1 / rms of the head's x; x, z [cols], w [head_dim];
//  * SigmoidGate (k::sigmoid_gate_prep): y = x * sigmoid(gate), the gate the second half of each head's
//    row of z [cols / head_dim, 2, head_dim].
struct QMatvecSource {
  enum class Kind { RmsNorm, GatedRmsNorm, SigmoidGate };
  Kind kind = Kind::RmsNorm;
  const float* x = nullptr;
  const float* w = nullptr;
  const float* z = nullptr;
  float eps = 0.0f;
  int head_dim = 0;
};
// Whether qmatvec_src_multi takes this launch: 4-bit MLX-layout matrices, T = 1, the process's 4-bit
// kernel the integer contract (MERE_CUDA_QMATVEC unset, int, int-reg or int-pipe), cols a multiple of
// 64 up to 8192, aligned inputs; heads (of the gated norm and the gate) of a multiple of 16 columns,
// at most 64 of them.
bool qmatvec_src_supported(const QMatvecOut* outs, int n, const QMatvecSource& in);
// qmatvec_multi for one token whose prepared input each block of the launch computes from `in` into
// shared memory (no workspace is read or written): every row bitwise the producer followed by
// qmatvec_multi. cfg: a register shape of the integer kernel (cfg.integer 1); any other runs the
// default register shape ({}: qmatvec's default when it is one). A launch qmatvec_src_supported
// refuses is a mere::Error.
void qmatvec_src_multi(CudaDevice& dev, const QMatvecOut* outs, int n, const QMatvecSource& in, QMatvecConfig cfg = {});
// Whether the default kernel for `bits` is the tensor-core one (MERE_CUDA_QMATVEC=tc, 4-bit).
// (The fused producers of the engine write every layout; only the tensor-core kernel's B fragments
// are not written by them yet.)
bool qmatvec_tensor_cores(int bits);
// Both steps: y[t] = W x[t].
void qlinear(CudaDevice& dev, const QWeightView& W, const float* x, int64_t T, float* ws, float* y,
             QMatvecConfig cfg = {});

// Whether a configuration is compiled in for (bits, T) (benchmarks try several).
bool qmatvec_config_available(int bits, int64_t T, QMatvecConfig cfg);
// The launch shape used when cfg.rows_per_warp is 0 (docs/cuda-kernels.md §1): the SIMT shapes from
// the H200 sweep; with MERE_CUDA_QMATVEC=tc (4-bit) the tensor-core shape of qmatvec_tc_config.
QMatvecConfig qmatvec_default_config(int bits, int64_t T, int64_t rows);
// 4-bit tensor-core launch shape for (T, rows) on the current device: the compiled shape whose grid
// fills whole waves (occupancy from the runtime) with the most bytes in flight.
QMatvecConfig qmatvec_tc_config(int64_t T, int64_t rows);

}  // namespace mere::cuda
