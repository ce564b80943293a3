// Prefill matmuls on the tensor cores: Y[T, N] = X[T, K] · W^T for W an MLX affine-quantised
// matrix (4- or 8-bit, group 64, bf16 scales and biases: the same QWeightView qmatvec uses, so the
// engine passes the weights it uploaded once), T from 1 to thousands (meant for T >= 10; T <= 9
// belongs to qmatvec, which is batch-width invariant and exact in fp32).
//
// Numerics: X is rounded to bf16 once (qgemm_prepare_x), each weight is dequantised to
// bf16(round(scale * q + bias)) (one rounding; 8-bit: fp32 fma then one rounding), products
// accumulate in fp32 on the tensor cores (mma.sync m16n8k16 bf16). Against ops::linear (fp32
// throughout) the NMSE is ~1e-5 on random data (two bf16 roundings, relative 2^-9 each); the
// checks bound it by 1e-4 (tools/cuda/prefill_check.cu, docs/cuda-kernels.md §5). Deterministic:
// each output element is the same sequence of mma k-steps whatever BM (so whatever T) is; split-K
// sums its partials in a fixed order (but a different split_k is a different summation order).
//
// Prepared X: bf16 [T, K] with the 8 columns of every aligned group of 8 stored in the order
// {0, 4, 1, 5, 2, 6, 3, 7} (the order in which one LOP3 pulls code pairs out of a 32-bit word of
// 4-bit codes); the weights are dequantised into the same order in shared memory, so the products
// are unchanged. K must be a multiple of 64 (the group size) — every Qwen3.5 matrix is.
#pragma once
#include <cstdint>

#include "backend/cuda/device.h"
#include "backend/cuda/qmatvec.h"  // QWeightView

namespace mere::cuda {

// x: [T, K] f32 (row stride ldx floats, >= K) -> xq: [T, K] bf16 (raw uint16), permuted as above.
void qgemm_prepare_x(CudaDevice& dev, const float* x, int64_t T, int64_t K, int64_t ldx, uint16_t* xq);
// SwiGLU form: xq = prepared silu(g) * u (the product rounded to fp32 as k::swiglu rounds it, so xq
// is bitwise swiglu then qgemm_prepare_x, without writing the product). g, u: [T, K] f32, 16-byte
// aligned rows.
void qgemm_prepare_x_swiglu(CudaDevice& dev, const float* g, const float* u, int64_t T, int64_t K, uint16_t* xq);
// Gathered form: xq[p] = prepared x[idx[p]], p < P (MoE: rows of X in expert order). idx: device int32 [P].
void qgemm_prepare_x_gather(CudaDevice& dev, const float* x, const int32_t* idx, int64_t P, int64_t K, int64_t ldx,
                            uint16_t* xq);

// Launch shape (0 = automatic). Results are bitwise the same for any bm; split_k changes the fp32
// summation order of the partial sums (fixed for a given split_k).
struct QGemmConfig {
  int bm = 0;       // token rows per block: 32, 64 or 128
  int split_k = 0;  // 1 = none; >1 needs the workspace below
  int scale_prefetch = 0;  // 0/2: scales+biases register-prefetched one tile ahead (default, faster);
                           // 1: through the cp.async ring (v2 experiment, bitwise the same results, slower)
};
// Floats of workspace qgemm needs for split-K at this shape (0 when it would not split).
int64_t qgemm_workspace_floats(const CudaDevice& dev, const QWeightView& W, int64_t T);
QGemmConfig qgemm_default_config(const CudaDevice& dev, const QWeightView& W, int64_t T, bool have_ws);

// y: [T, W.rows] f32 (row stride ldy floats, >= W.rows) = xq · dequant(W)^T. ws: nullptr or
// qgemm_workspace_floats floats (enables split-K when the grid would underfill the GPU).
void qgemm(CudaDevice& dev, const QWeightView& W, const uint16_t* xq, int64_t T, float* y, int64_t ldy,
           float* ws = nullptr, QGemmConfig cfg = {});

// Grouped (MoE) form. W holds E experts stacked: rows [e*Ne, (e+1)*Ne) are expert e (W.rows = E*Ne).
// xq: [P, K] prepared rows in expert order; offsets: device int32 [E+1], expert e owns rows
// [offsets[e], offsets[e+1]) (the grid is sized from P and E alone, no host read-back).
// y: [P, Ne] f32 (row stride ldy). Blocks are 32 rows x 128 weight rows; each expert's weights are
// read once per 32-row tile of its rows (35B-A3B at T = 512: ~16 rows an expert, so once), and
// experts with no rows are never touched.
void qgemm_grouped(CudaDevice& dev, const QWeightView& W, int64_t E, int64_t Ne, const uint16_t* xq,
                   const int32_t* offsets, int64_t P, float* y, int64_t ldy);

// Routing helper for the grouped form: from ids [T, k] (expert of each (token, slot) pair, < E),
// writes offsets [E+1] and, for the P = T*k pairs sorted by expert (stable: by pair index within an
// expert), row_token[r] = token of gathered row r and pair_row[t*k + j] = gathered row of pair (t, j).
// One block; deterministic.
void moe_sort_pairs(CudaDevice& dev, const int32_t* ids, int64_t T, int64_t k, int64_t E, int32_t* offsets,
                    int32_t* row_token, int32_t* pair_row);
// out[t] (+)= sum_j w[t, j] * y[pair_row[t*k + j]] over j in order. y: [P, N] (ldy); out: [T, N].
// With the shared expert (shared: [T, N], sg: [T] its gate logits; accumulate ignored) the chain starts
// from fma(sigmoid(sg[t]), shared[t], 0) instead: bitwise k::moe_combine with no routed experts
// followed by this launch accumulating, in one launch.
void moe_combine(CudaDevice& dev, const float* y, int64_t ldy, const int32_t* pair_row, const float* w, int64_t T,
                 int64_t k, int64_t N, float* out, bool accumulate, const float* shared = nullptr,
                 const float* sg = nullptr);

}  // namespace mere::cuda
