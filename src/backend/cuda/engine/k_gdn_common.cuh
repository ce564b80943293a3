// Device-side pieces of the GatedDeltaNet decode kernels (k_gdn.cu) shared with the one-launch GDN
// middle (k_gdn_block.cu): the causal conv step of a channel, the one-warp equivalent of a 128-thread
// block_sum (k_block_reduce.cuh), the gated RMSNorm (+ prepare) of a head. Every kernel that uses them gets the same bits.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/engine/k_block_reduce.cuh"
#include "backend/cuda/engine/k_math.cuh"
#include "backend/cuda/qmatvec_prep.cuh"

namespace mere::cuda::k {
namespace {

constexpr int kMaxConvK = 8;
__device__ __forceinline__ float softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

// One token of the causal conv of a channel (weight j = wt(j), j < K; history hist[0 .. K-2], oldest
// first): SiLU of the dot product; then x joins the history. The one fma chain of every conv kernel.
template <class W>
__device__ __forceinline__ float conv_step_by(float (&hist)[kMaxConvK], const W& wt, int K, float x) {
  float acc = 0.0f;
  for (int j = 0; j < K - 1; ++j) acc = __fmaf_rn(wt(j), hist[j], acc);
  acc = __fmaf_rn(wt(K - 1), x, acc);
  for (int j = 0; j + 1 < K - 1; ++j) hist[j] = hist[j + 1];
  if (K > 1) hist[K - 2] = x;
  return silu(acc);
}
// Channel c's weights read from w[c*K .. c*K + K-1] as the chain reaches them.
__device__ __forceinline__ float conv_step(float (&hist)[kMaxConvK], const float* w, int c, int K, float x) {
  return conv_step_by(hist, [w, c, K](int j) { return w[c * K + j]; }, K, x);
}
// The same with the weights already loaded (wk[j] = w[c * K + j]; conv_gdn_prepare may load them before
// its PDL wait).
__device__ __forceinline__ float conv_step_w(float (&hist)[kMaxConvK], const float (&wk)[kMaxConvK], int K, float x) {
  return conv_step_by(hist, [&wk](int j) { return wk[j]; }, K, x);
}

constexpr int kPrepThreads = 128;  // the threads of conv_gdn_prepare's and the gated norm's blocks

// A block_sum over kPrepThreads = 128 threads reproduced by one warp: lane l stands for the former
// threads l, 32 + l, 64 + l, 96 + l (the former warps 0..3); p[w] is former thread 32 w + l's value.
// The same four xor butterflies, then the four warp results added in warp order to 0.0f: bitwise
// block_sum's result (every lane ends with it: the butterfly's sums are commutative).
constexpr int kFormerWarps = kPrepThreads / 32;
__device__ __forceinline__ float warp_block_sum(const float (&p)[kFormerWarps]) {
  float v[kFormerWarps];
#pragma unroll
  for (int w = 0; w < kFormerWarps; ++w) v[w] = p[w];
#pragma unroll
  for (int off = 16; off > 0; off >>= 1)
#pragma unroll
    for (int w = 0; w < kFormerWarps; ++w) v[w] = __fadd_rn(v[w], __shfl_xor_sync(0xffffffffu, v[w], off));
  float total = 0.0f;
#pragma unroll
  for (int w = 0; w < kFormerWarps; ++w) total = __fadd_rn(total, v[w]);
  return total;
}

// 1 / rms of a head of Dv columns from the threads' partial sums of squares (block_sum's order).
__device__ __forceinline__ float head_inv_rms(float ss, float* partial, int Dv, float eps) {
  return 1.0f / sqrtf(__fadd_rn(__fdiv_rn(block_sum(ss, partial), static_cast<float>(Dv)), eps));
}

// The prepared input of head h's columns of token t from y (PREP != 0), after every thread of the block
// wrote its y: read back through the L2.
template <int PREP>
__device__ __forceinline__ void prepare_head(const float* y, int Hv, int Dv, const prep::Layout& L, int h, int t) {
  if constexpr (PREP != 0) {
    __syncthreads();
    const float* yr = y + static_cast<int64_t>(t) * Hv * Dv;
    prep::prepare_block<PREP>([yr](int c) { return __ldcg(yr + c); }, t, h * Dv, (h + 1) * Dv, L);
  }
}

// The gated RMSNorm of head h of token t (x, z, y: [T, Hv, Dv]), by the threads of one block: the
// first kPrepThreads threads hold the values (a thread per column, stride kPrepThreads) and the
// others add zeros to the block sum (exact), so a 256-thread block gives the 128-thread block's bits.
// PREP = 4 or 8: then the block prepares the head's columns of y as qmatvec's input (into L).
template <int PREP>
__device__ __forceinline__ void gated_norm_head(const float* x, const float* z, const float* w, int Hv, int Dv,
                                                float eps, float* y, const prep::Layout& L, int h, int t,
                                                float* partial) {
  const int64_t off = (static_cast<int64_t>(t) * Hv + h) * Dv;
  const bool holder = threadIdx.x < kPrepThreads;
  float ss = 0.0f;
  if (holder)
    for (int i = threadIdx.x; i < Dv; i += kPrepThreads) ss = __fmaf_rn(__ldcg(x + off + i), __ldcg(x + off + i), ss);
  const float r = head_inv_rms(ss, partial, Dv, eps);
  if (holder)
    for (int i = threadIdx.x; i < Dv; i += kPrepThreads)
      y[off + i] = __fmul_rn(__fmul_rn(w[i], __fmul_rn(__ldcg(x + off + i), r)), silu(z[off + i]));
  prepare_head<PREP>(y, Hv, Dv, L, h, t);
}

// gated_norm_head for Dv <= kPrepThreads, with the thread's norm weight wi (column threadIdx.x) loaded
// before the PDL wait (MERE_CUDA_NORM_W=early: weights are never written) and its x and z asked for
// together before the reduction, so that no load waits after it: the same values, the same bits.
template <int PREP>
__device__ __forceinline__ void gated_norm_head_w(const float* x, const float* z, float wi, int Hv, int Dv, float eps,
                                                  float* y, const prep::Layout& L, int h, int t, float* partial) {
  const int64_t off = (static_cast<int64_t>(t) * Hv + h) * Dv;
  const int i = static_cast<int>(threadIdx.x);
  const bool mine = i < Dv;
  const float xv = mine ? __ldcg(x + off + i) : 0.0f, zv = mine ? z[off + i] : 0.0f;
  const float ss = mine ? __fmaf_rn(xv, xv, 0.0f) : 0.0f;
  const float r = head_inv_rms(ss, partial, Dv, eps);
  if (mine) y[off + i] = __fmul_rn(__fmul_rn(wi, __fmul_rn(xv, r)), silu(zv));
  prepare_head<PREP>(y, Hv, Dv, L, h, t);
}

}  // namespace
}  // namespace mere::cuda::k
