// GatedDeltaNet pieces around the recurrent step: causal conv + SiLU, q/k l2 norm and gates,
// a generic recurrent step (any head width), gated RMSNorm. Mirrors Qwen35Model::gdn_block.
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/engine/k_math.cuh"
#include "backend/cuda/engine/kernels.h"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/qmatvec_prep.cuh"

namespace mere::cuda::k {
namespace {

constexpr int kMaxConvK = 8;
__device__ __forceinline__ float softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

// One token of the causal conv of channel c (weights w[c*K .. c*K + K-1], history hist[0 .. K-2],
// oldest first): SiLU of the dot product; then x joins the history. Shared by both conv kernels.
__device__ __forceinline__ float conv_step(float (&hist)[kMaxConvK], const float* w, int c, int K, float x) {
  float acc = 0.0f;
  for (int j = 0; j < K - 1; ++j) acc = __fmaf_rn(w[c * K + j], hist[j], acc);
  acc = __fmaf_rn(w[c * K + K - 1], x, acc);
  for (int j = 0; j + 1 < K - 1; ++j) hist[j] = hist[j + 1];
  if (K > 1) hist[K - 2] = x;
  return silu(acc);
}

__global__ void conv_silu_kernel(float* state, const float* w, const float* raw, int T, int C, int K, float* out) {
  pdl_begin();
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  float hist[kMaxConvK];
  for (int j = 0; j < K - 1; ++j) hist[j] = state[static_cast<int64_t>(j) * C + c];
  for (int t = 0; t < T; ++t)
    out[static_cast<int64_t>(t) * C + c] = conv_step(hist, w, c, K, raw[static_cast<int64_t>(t) * C + c]);
  for (int j = 0; j < K - 1; ++j) state[static_cast<int64_t>(j) * C + c] = hist[j];
}

constexpr int kPrepThreads = 128;
__device__ float block_sum(float v, float* partial) {  // fixed order: butterfly, then warps in order
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v = __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, off));
  if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = v;
  __syncthreads();
  float total = 0.0f;
  for (int i = 0; i < static_cast<int>(blockDim.x >> 5); ++i) total = __fadd_rn(total, partial[i]);
  __syncthreads();
  return total;
}

__global__ void __launch_bounds__(kPrepThreads)
    gdn_prepare_kernel(const float* mixed, const float* a, const float* b, const float* neg_a, const float* dt_bias,
                       int C, int Hk, int Dk, int Hv, int Dv, float* q, float* k, float* v, float* g, float* beta) {
  pdl_begin();
  __shared__ float partial[kPrepThreads / 32];
  const int blk = blockIdx.x, t = blockIdx.y, tid = threadIdx.x;
  const float* m = mixed + static_cast<int64_t>(t) * C;
  const int kd = Hk * Dk;
  if (blk < 2 * Hk) {
    const bool is_q = blk < Hk;
    const int h = is_q ? blk : blk - Hk;
    const float* src = m + (is_q ? 0 : kd) + h * Dk;
    float* dst = (is_q ? q : k) + static_cast<int64_t>(t) * kd + h * Dk;
    float ss = 0.0f;
    for (int i = tid; i < Dk; i += kPrepThreads) ss = __fmaf_rn(src[i], src[i], ss);
    const float r = 1.0f / sqrtf(__fadd_rn(block_sum(ss, partial), 1e-6f));
    const float qscale = 1.0f / sqrtf(static_cast<float>(Dk));
    for (int i = tid; i < Dk; i += kPrepThreads) {
      const float y = __fmul_rn(src[i], r);
      dst[i] = is_q ? __fmul_rn(y, qscale) : y;
    }
  } else if (blk < 2 * Hk + Hv) {
    const int h = blk - 2 * Hk;
    for (int i = tid; i < Dv; i += kPrepThreads)
      v[static_cast<int64_t>(t) * Hv * Dv + h * Dv + i] = m[2 * kd + h * Dv + i];
  } else {
    for (int h = tid; h < Hv; h += kPrepThreads) {
      const int64_t i = static_cast<int64_t>(t) * Hv + h;
      beta[i] = sigmoid(b[i]);
      g[i] = __fmul_rn(neg_a[h], softplus(__fadd_rn(a[i], dt_bias[h])));
    }
  }
}

// conv_silu + gdn_prepare in one launch (decode; bitwise the two kernels): block b < 2 Hk owns the
// Dk channels of q head b (k head b - Hk), block 2 Hk + h the Dv channels of v head h, the last block
// the gates; thread i < D runs channel i's conv over the T tokens (so each conv-state entry has one
// owner) and the q/k blocks l2-normalise each token's head with gdn_prepare's block_sum.
__global__ void __launch_bounds__(kPrepThreads)
    conv_gdn_prepare_kernel(float* state, const float* w, const float* raw, int T, int K, const float* a,
                            const float* b, const float* neg_a, const float* dt_bias, int Hk, int Dk, int Hv, int Dv,
                            float* q, float* k, float* v, float* g, float* beta) {
  pdl_begin();
  __shared__ float partial[kPrepThreads / 32];
  const int blk = blockIdx.x, tid = threadIdx.x, kd = Hk * Dk, C = 2 * kd + Hv * Dv;
  if (blk == 2 * Hk + Hv) {  // gates
    for (int t = 0; t < T; ++t)
      for (int h = tid; h < Hv; h += kPrepThreads) {
        const int64_t i = static_cast<int64_t>(t) * Hv + h;
        beta[i] = sigmoid(b[i]);
        g[i] = __fmul_rn(neg_a[h], softplus(__fadd_rn(a[i], dt_bias[h])));
      }
    return;
  }
  const bool qk = blk < 2 * Hk;
  const int D = qk ? Dk : Dv, c = (qk ? blk * Dk : 2 * kd + (blk - 2 * Hk) * Dv) + tid;
  const bool mine = tid < D;
  float hist[kMaxConvK];
  if (mine)
    for (int j = 0; j < K - 1; ++j) hist[j] = state[static_cast<int64_t>(j) * C + c];
  const float qscale = 1.0f / sqrtf(static_cast<float>(Dk));
  for (int t = 0; t < T; ++t) {
    const float y = mine ? conv_step(hist, w, c, K, raw[static_cast<int64_t>(t) * C + c]) : 0.0f;
    if (qk) {  // block-uniform
      const float r = 1.0f / sqrtf(__fadd_rn(block_sum(__fmaf_rn(y, y, 0.0f), partial), 1e-6f));
      if (mine) {
        const float n = __fmul_rn(y, r);
        if (blk < Hk) q[static_cast<int64_t>(t) * kd + c] = __fmul_rn(n, qscale);
        else k[static_cast<int64_t>(t) * kd + c - kd] = n;
      }
    } else if (mine) {
      v[static_cast<int64_t>(t) * Hv * Dv + c - 2 * kd] = y;
    }
  }
  if (mine)
    for (int j = 0; j < K - 1; ++j) state[static_cast<int64_t>(j) * C + c] = hist[j];
}

__global__ void gdn_generic_kernel(float* S, const float* q, const float* k, const float* v, const float* g,
                                   const float* beta, int T, int Hk, int Hv, int Dk, int Dv, float* o) {
  pdl_begin();
  const int h = blockIdx.x, i = threadIdx.x;
  if (i >= Dv) return;
  const int kh = h / (Hv / Hk);
  float* Si = S + (static_cast<int64_t>(h) * Dv + i) * Dk;
  for (int t = 0; t < T; ++t) {
    const float* qt = q + (static_cast<int64_t>(t) * Hk + kh) * Dk;
    const float* kt = k + (static_cast<int64_t>(t) * Hk + kh) * Dk;
    const float decay = expf(g[t * Hv + h]);
    float m = 0.0f;
    for (int j = 0; j < Dk; ++j) {
      Si[j] = __fmul_rn(Si[j], decay);
      m = __fmaf_rn(Si[j], kt[j], m);
    }
    const float d = __fmul_rn(beta[t * Hv + h], __fsub_rn(v[(static_cast<int64_t>(t) * Hv + h) * Dv + i], m));
    float acc = 0.0f;
    for (int j = 0; j < Dk; ++j) {
      Si[j] = __fmaf_rn(d, kt[j], Si[j]);
      acc = __fmaf_rn(Si[j], qt[j], acc);
    }
    o[(static_cast<int64_t>(t) * Hv + h) * Dv + i] = acc;
  }
}

// PREP = 4 or 8: then the block prepares its head's columns of y as qmatvec's input (into L).
template <int PREP>
__global__ void __launch_bounds__(kPrepThreads)
    gated_rms_norm_kernel(const float* x, const float* z, const float* w, int Hv, int Dv, float eps, float* y,
                          prep::Layout L) {
  pdl_begin();
  __shared__ float partial[kPrepThreads / 32];
  const int64_t off = (static_cast<int64_t>(blockIdx.y) * Hv + blockIdx.x) * Dv;
  float ss = 0.0f;
  for (int i = threadIdx.x; i < Dv; i += kPrepThreads) ss = __fmaf_rn(x[off + i], x[off + i], ss);
  const float r = 1.0f / sqrtf(__fadd_rn(__fdiv_rn(block_sum(ss, partial), static_cast<float>(Dv)), eps));
  for (int i = threadIdx.x; i < Dv; i += kPrepThreads)
    y[off + i] = __fmul_rn(__fmul_rn(w[i], __fmul_rn(x[off + i], r)), silu(z[off + i]));
  if constexpr (PREP != 0) {
    __syncthreads();  // the head's y was written by every thread of the block: read it back from L2
    const float* yr = y + static_cast<int64_t>(blockIdx.y) * Hv * Dv;
    const int c0 = static_cast<int>(blockIdx.x) * Dv;
    prep::prepare_block<PREP>([yr](int c) { return __ldcg(yr + c); }, static_cast<int>(blockIdx.y), c0, c0 + Dv, L);
  }
}

}  // namespace

void conv_silu(cudaStream_t s, float* state, const float* w, const float* raw, int64_t T, int64_t C, int64_t K,
               float* out) {
  MERE_CHECK(K >= 1 && K <= kMaxConvK, "cuda conv", "conv kernel width out of range: expected 1..", kMaxConvK,
             ", got ", K);
  launch("conv_silu_kernel", conv_silu_kernel, static_cast<unsigned>((C + 255) / 256), 256, 0, s, state, w, raw,
         static_cast<int>(T), static_cast<int>(C), static_cast<int>(K), out);
}

void gdn_prepare(cudaStream_t s, const float* mixed, const float* a, const float* b, const float* neg_a,
                 const float* dt_bias, int64_t T, int64_t Hk, int64_t Dk, int64_t Hv, int64_t Dv, float* q, float* k,
                 float* v, float* g, float* beta) {
  dim3 grid(static_cast<unsigned>(2 * Hk + Hv + 1), static_cast<unsigned>(T));
  const int C = static_cast<int>(2 * Hk * Dk + Hv * Dv);
  launch("gdn_prepare_kernel", gdn_prepare_kernel, grid, kPrepThreads, 0, s, mixed, a, b, neg_a, dt_bias, C,
         static_cast<int>(Hk), static_cast<int>(Dk), static_cast<int>(Hv), static_cast<int>(Dv), q, k, v, g, beta);
}

bool conv_gdn_prepare_supported(int64_t Hk, int64_t Dk, int64_t Hv, int64_t Dv, int64_t K) {
  return Dk >= 1 && Dk <= kPrepThreads && Dv >= 1 && Dv <= kPrepThreads && K >= 1 && K <= kMaxConvK && Hk >= 1 &&
         Hv >= 1;
}

void conv_gdn_prepare(cudaStream_t s, float* state, const float* w, const float* raw, int64_t T, int64_t K,
                      const float* a, const float* b, const float* neg_a, const float* dt_bias, int64_t Hk, int64_t Dk,
                      int64_t Hv, int64_t Dv, float* q, float* k, float* v, float* g, float* beta) {
  MERE_CHECK(conv_gdn_prepare_supported(Hk, Dk, Hv, Dv, K), "cuda conv_gdn_prepare",
             "head widths and conv width out of range: expected Dk, Dv in 1..", kPrepThreads, " and K in 1..",
             kMaxConvK, ", got Dk ", Dk, ", Dv ", Dv, ", K ", K);
  launch("conv_gdn_prepare_kernel", conv_gdn_prepare_kernel, static_cast<unsigned>(2 * Hk + Hv + 1), kPrepThreads, 0,
         s, state, w, raw, static_cast<int>(T), static_cast<int>(K), a, b, neg_a, dt_bias, static_cast<int>(Hk),
         static_cast<int>(Dk), static_cast<int>(Hv), static_cast<int>(Dv), q, k, v, g, beta);
}

void gdn_generic(cudaStream_t s, float* S, const float* q, const float* k, const float* v, const float* g,
                 const float* beta, int64_t T, int64_t Hk, int64_t Hv, int64_t Dk, int64_t Dv, float* o) {
  MERE_CHECK(Dv >= 1 && Dv <= 1024 && Hv % Hk == 0, "cuda gdn", "unsupported heads: Hv ", Hv, " Hk ", Hk, " Dv ", Dv);
  const int threads = static_cast<int>((Dv + 31) / 32 * 32);
  launch("gdn_generic_kernel", gdn_generic_kernel, static_cast<unsigned>(Hv), threads, 0, s, S, q, k, v, g, beta,
         static_cast<int>(T), static_cast<int>(Hk), static_cast<int>(Hv), static_cast<int>(Dk), static_cast<int>(Dv), o);
}

void gated_rms_norm(cudaStream_t s, const float* x, const float* z, const float* w, int64_t T, int64_t Hv,
                    int64_t Dv, float eps, float* y) {
  dim3 grid(static_cast<unsigned>(Hv), static_cast<unsigned>(T));
  launch("gated_rms_norm_kernel", &gated_rms_norm_kernel<0>, grid, kPrepThreads, 0, s, x, z, w, static_cast<int>(Hv),
         static_cast<int>(Dv), eps, y, prep::Layout{});
}

void gated_rms_norm_prep(cudaStream_t s, const float* x, const float* z, const float* w, int64_t T, int64_t Hv,
                         int64_t Dv, float eps, float* y, int bits, float* ws) {
  MERE_CHECK((bits == 4 || bits == 8) && Dv % 64 == 0, "gated_rms_norm_prep",
             "expected 4 or 8 bits and a head width divisible by 64, got ", bits, " bits, head width ", Dv);
  dim3 grid(static_cast<unsigned>(Hv), static_cast<unsigned>(T));
  const prep::Layout L = prep::layout(ws, T, Hv * Dv, bits);
  if (bits == 4)
    launch("gated_rms_norm_kernel<4> (prepare)", &gated_rms_norm_kernel<4>, grid, kPrepThreads, 0, s, x, z, w,
           static_cast<int>(Hv), static_cast<int>(Dv), eps, y, L);
  else
    launch("gated_rms_norm_kernel<8> (prepare)", &gated_rms_norm_kernel<8>, grid, kPrepThreads, 0, s, x, z, w,
           static_cast<int>(Hv), static_cast<int>(Dv), eps, y, L);
}

}  // namespace mere::cuda::k
