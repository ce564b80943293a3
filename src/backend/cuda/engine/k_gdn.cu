// GatedDeltaNet pieces around the recurrent step: causal conv + SiLU, q/k l2 norm and gates,
// a generic recurrent step (any head width), gated RMSNorm. Mirrors Qwen35Model::gdn_block.
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/engine/k_gdn_common.cuh"
#include "backend/cuda/engine/k_math.cuh"
#include "backend/cuda/engine/kernels.h"
#include "backend/cuda/gdn_step.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/qmatvec_prep.cuh"

namespace mere::cuda::k {
namespace {

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

// ---- warp forms (prefill): a warp per (token, head) instead of a 128-thread block, no barriers ----
// Former thread 32 w + lane's sum of squares of row[i], i = 32 w + lane + 128 n < D (the old loop's
// stride), into p[w]. Narrow rows (D <= 128, kWide false): one element a former thread, kept in x[w]
// (0 past D) for the caller's second use.
template <bool kWide>
__device__ __forceinline__ void row_sumsq(const float* row, int D, int lane, float (&x)[kFormerWarps],
                                          float (&p)[kFormerWarps]) {
#pragma unroll
  for (int w = 0; w < kFormerWarps; ++w) {
    const int i0 = w * 32 + lane;
    if constexpr (kWide) {
      p[w] = 0.0f;
      for (int i = i0; i < D; i += kPrepThreads) p[w] = __fmaf_rn(row[i], row[i], p[w]);
    } else {
      x[w] = i0 < D ? row[i0] : 0.0f;
      p[w] = __fmaf_rn(x[w], x[w], 0.0f);  // = the old 0.0f for a thread past D
    }
  }
}

// dst[i] = f(src[i]) for i < D; the narrow form takes src from the values row_sumsq kept
template <bool kWide, class F>
__device__ __forceinline__ void row_map(const float* src, const float (&x)[kFormerWarps], int D, int lane, float* dst,
                                        F f) {
#pragma unroll
  for (int w = 0; w < kFormerWarps; ++w) {
    const int i0 = w * 32 + lane;
    if constexpr (kWide) {
      for (int i = i0; i < D; i += kPrepThreads) dst[i] = f(src[i]);
    } else if (i0 < D) {
      dst[i0] = f(x[w]);
    }
  }
}

constexpr int kUnitThreads = 256;  // 8 warps a block, a unit each

// gdn_prepare_kernel's outputs, bitwise: unit u = t * (2 Hk + Hv + 1) + blk is the old block (blk, t)
// (q heads, k heads, v heads, the gates). The old kernel spent its time on 2 barriers in each of
// T * (2 Hk + Hv + 1) 4-warp blocks that move 512 bytes each; here a warp does a unit with no barrier.
template <bool kWide>
__global__ void __launch_bounds__(kUnitThreads)
    gdn_prepare_kernel(const float* __restrict__ mixed, const float* __restrict__ a, const float* __restrict__ b,
                       const float* __restrict__ neg_a, const float* __restrict__ dt_bias, int units, int C, int Hk,
                       int Dk, int Hv, int Dv, float* __restrict__ q, float* __restrict__ k, float* __restrict__ v,
                       float* __restrict__ g, float* __restrict__ beta) {
  pdl_begin();
  const int nb = 2 * Hk + Hv + 1, lane = threadIdx.x & 31;
  const int unit = static_cast<int>(blockIdx.x) * (kUnitThreads / 32) + static_cast<int>(threadIdx.x >> 5);
  if (unit >= units) return;  // warp-uniform
  const int64_t t = unit / nb;  // 32-bit division (units < 2^31)
  const int blk = unit - static_cast<int>(t) * nb;
  const float* m = mixed + t * C;
  const int kd = Hk * Dk;
  float x[kFormerWarps], p[kFormerWarps];
  if (blk < 2 * Hk) {
    const bool is_q = blk < Hk;
    const int h = is_q ? blk : blk - Hk;
    const float* src = m + (is_q ? 0 : kd) + h * Dk;
    float* dst = (is_q ? q : k) + t * kd + h * Dk;
    row_sumsq<kWide>(src, Dk, lane, x, p);
    const float r = 1.0f / sqrtf(__fadd_rn(warp_block_sum(p), 1e-6f));
    const float qscale = 1.0f / sqrtf(static_cast<float>(Dk));
    row_map<kWide>(src, x, Dk, lane, dst, [=](float s) {
      const float y = __fmul_rn(s, r);
      return is_q ? __fmul_rn(y, qscale) : y;
    });
  } else if (blk < 2 * Hk + Hv) {
    const int h = blk - 2 * Hk;
    const float* src = m + 2 * kd + h * Dv;
    if constexpr (!kWide)
#pragma unroll
      for (int w = 0; w < kFormerWarps; ++w) x[w] = w * 32 + lane < Dv ? src[w * 32 + lane] : 0.0f;
    row_map<kWide>(src, x, Dv, lane, v + t * Hv * Dv + h * Dv, [](float s) { return s; });
  } else {
    for (int h = lane; h < Hv; h += 32) {
      const int64_t i = t * Hv + h;
      beta[i] = sigmoid(b[i]);
      g[i] = __fmul_rn(neg_a[h], softplus(__fadd_rn(a[i], dt_bias[h])));
    }
  }
}

// gated_rms_norm_kernel<0>'s y, bitwise, a warp per (token, head) (unit t * Hv + h), for prefill's
// T >= kWarpNormRows rows; the decode passes (T <= 9) keep the block form, the same launch as the fused
// PREP = 4/8 forms.
constexpr int kWarpNormRows = 16;
template <bool kWide>
__global__ void __launch_bounds__(kUnitThreads)
    gated_rms_norm_warp_kernel(const float* __restrict__ x, const float* __restrict__ z, const float* __restrict__ w,
                               int64_t units, int Dv, float eps, float* __restrict__ y, uint16_t* __restrict__ xq) {
  pdl_begin();
  const int lane = threadIdx.x & 31;
  const int64_t unit = static_cast<int64_t>(blockIdx.x) * (kUnitThreads / 32) + (threadIdx.x >> 5);
  if (unit >= units) return;  // warp-uniform
  const float *xr = x + unit * Dv, *zr = z + unit * Dv;
  float* yr = y + unit * Dv;
  float xv[kFormerWarps], p[kFormerWarps], zv[kFormerWarps];
  if constexpr (!kWide)  // z's loads in flight with x's
#pragma unroll
    for (int c = 0; c < kFormerWarps; ++c) zv[c] = c * 32 + lane < Dv ? zr[c * 32 + lane] : 0.0f;
  row_sumsq<kWide>(xr, Dv, lane, xv, p);
  const float r = 1.0f / sqrtf(__fadd_rn(__fdiv_rn(warp_block_sum(p), static_cast<float>(Dv)), eps));
#pragma unroll
  for (int c = 0; c < kFormerWarps; ++c) {
    const int i0 = c * 32 + lane;
    if constexpr (kWide) {
      for (int i = i0; i < Dv; i += kPrepThreads) {
        const float v = __fmul_rn(__fmul_rn(w[i], __fmul_rn(xr[i], r)), silu(zr[i]));
        yr[i] = v;
        if (xq) xq_store(xq, unit * Dv + i, v);
      }
    } else if (i0 < Dv) {
      const float v = __fmul_rn(__fmul_rn(w[i0], __fmul_rn(xv[c], r)), silu(zv[c]));
      yr[i0] = v;
      if (xq) xq_store(xq, unit * Dv + i0, v);
    }
  }
}

// conv_gdn_prepare's gates (its last block): the T * Hv (token, head) pairs are independent, so they
// spread over the block's threads (`first` = the thread, `stride` = the block's threads; v1 ran the
// tokens one after another, a load latency each).
__device__ __forceinline__ void prep_gates(int first, int stride, int T, int Hv, const float* a, const float* b,
                                           const float* neg_a, const float* dt_bias, float* g, float* beta,
                                           const GdnTraceOut& tr) {
  for (int i = first; i < T * Hv; i += stride) {
    const int h = i % Hv;
    const float bv = sigmoid(b[i]), gv = __fmul_rn(neg_a[h], softplus(__fadd_rn(a[i], dt_bias[h])));
    beta[i] = bv;
    g[i] = gv;
    if (tr.g) tr.beta[i] = bv, tr.g[i] = gv;
  }
}

// Token t's q (blk < Hk) or k (blk < 2 Hk) output of conv channel c: its conv output y times r (1 / the
// l2 norm of its head), q also scaled by 1 / sqrt(Dk); each also at its trace row when tracing.
__device__ __forceinline__ void prep_store_qk(int blk, int Hk, int kd, int c, int t, float y, float r, float qscale,
                                              float* q, float* k, const GdnTraceOut& tr) {
  const float n = __fmul_rn(y, r);
  if (blk < Hk) {
    const int64_t i = static_cast<int64_t>(t) * kd + c;
    const float qv = __fmul_rn(n, qscale);
    q[i] = qv;
    if (tr.q) tr.q[i] = qv;
  } else {
    const int64_t i = static_cast<int64_t>(t) * kd + c - kd;
    k[i] = n;
    if (tr.k) tr.k[i] = n;
  }
}
// Token t's v output of conv channel c: the conv output itself.
__device__ __forceinline__ void prep_store_v(int kd, int Hv, int Dv, int c, int t, float y, float* v,
                                             const GdnTraceOut& tr) {
  const int64_t i = static_cast<int64_t>(t) * Hv * Dv + c - 2 * kd;
  v[i] = y;
  if (tr.v) tr.v[i] = y;
}

// conv_silu + gdn_prepare in one launch (decode; bitwise the two kernels): block b < 2 Hk owns the
// Dk channels of q head b (k head b - Hk), block 2 Hk + h the Dv channels of v head h, the last block
// the gates; thread i < D runs channel i's conv over the T tokens (so each conv-state entry has one
// owner) and the q/k blocks l2-normalise each token's head with gdn_prepare's block_sum.
// With tr.* set (a traced pass), every output is also stored at its trace row, and raw too (the
// copies the engine made with six device copies a layer before, which broke the PDL chain).
// v3 (session 28): the gates block spreads the T * Hv pairs over its threads (prep_gates), and each
// channel loads token t + 1's input before token t's work; the arithmetic of every output is v1's (v2's chunks,
// session 27, measured slower at T = 1 and no faster at T = 8: the gates block's token loop was the
// width-8 pass's long pole, docs/cuda-kernels.md §5.15).
// early (MERE_CUDA_GDN_STATE=early, launch.cuh gdn_state_early): each channel's conv state and conv
// weights are loaded before the PDL wait (the state through the L2: it was last written by an earlier
// pass's launch, and the launch before this one waits before it triggers, so no writer of it still runs;
// the weights by no launch); the same values, the same bits.
template <bool EARLY>
__global__ void __launch_bounds__(kPrepThreads)
    conv_gdn_prepare_kernel(float* state, const float* w, const float* raw, int T, int K, const float* a,
                            const float* b, const float* neg_a, const float* dt_bias, int Hk, int Dk, int Hv, int Dv,
                            float* q, float* k, float* v, float* g, float* beta, GdnTraceOut tr) {
  __shared__ float partial[kPrepThreads / 32];
  const int blk = blockIdx.x, tid = threadIdx.x, kd = Hk * Dk, C = 2 * kd + Hv * Dv;
  const bool qk = blk < 2 * Hk, gates = blk == 2 * Hk + Hv;
  const int D = qk ? Dk : Dv, c = (qk ? blk * Dk : 2 * kd + (blk - 2 * Hk) * Dv) + tid;
  const bool mine = !gates && tid < D;
  float hist[kMaxConvK], wk[EARLY ? kMaxConvK : 1];
  if (EARLY && mine) {
    for (int j = 0; j < K - 1; ++j) hist[j] = __ldcg(state + static_cast<int64_t>(j) * C + c);
    for (int j = 0; j < K; ++j) wk[j] = w[c * K + j];
  }
  pdl_begin();
  if (gates) {
    prep_gates(tid, kPrepThreads, T, Hv, a, b, neg_a, dt_bias, g, beta, tr);
    return;
  }
  if (!EARLY && mine)
    for (int j = 0; j < K - 1; ++j) hist[j] = state[static_cast<int64_t>(j) * C + c];
  const float qscale = 1.0f / sqrtf(static_cast<float>(Dk));
  float next = mine ? raw[c] : 0.0f;  // token t + 1's input is loaded before token t's work
  for (int t = 0; t < T; ++t) {
    const float in = next;
    next = mine && t + 1 < T ? raw[static_cast<int64_t>(t + 1) * C + c] : 0.0f;
    if (mine && tr.raw) tr.raw[static_cast<int64_t>(t) * C + c] = in;
    float y = 0.0f;
    if constexpr (EARLY) y = mine ? conv_step_w(hist, wk, K, in) : 0.0f;
    else y = mine ? conv_step(hist, w, c, K, in) : 0.0f;
    if (qk) {  // block-uniform
      const float r = 1.0f / sqrtf(__fadd_rn(block_sum(__fmaf_rn(y, y, 0.0f), partial), 1e-6f));
      if (mine) prep_store_qk(blk, Hk, kd, c, t, y, r, qscale, q, k, tr);
    } else if (mine) {
      prep_store_v(kd, Hv, Dv, c, t, y, v, tr);
    }
  }
  if (mine)
    for (int j = 0; j < K - 1; ++j) state[static_cast<int64_t>(j) * C + c] = hist[j];
}

// conv_gdn_prepare v4 (session 28; the default for passes of more than one token since session 29): the same
// blocks and outputs, but a block has kPrepThreads threads for each of TB = min(T, kConvTokens)
// tokens; thread (u, i) computes channel i's conv output of token t = t0 + u (t0 = 0, TB, ..) straight
// from its K - 1 predecessors (raw rows, or the conv state before the first token), so a chunk's
// tokens run side by side, and the q / k blocks reduce each token's head with one barrier for the
// chunk (token u's sum in block_sum's order: its 4 warps' butterflies, added in warp order). Every
// output is v1's arithmetic on v1's values. The new conv state is written after a barrier by the
// u = 0 threads, after every read of the old one. It stands beside v3 (the gates and the stores
// shared): v3 stays for the decode step, where it is faster (H100 s29a: 4.2 against 4.7 µs), v4 runs
// the wider passes (6.3 against 10.4 µs at width 8). Why: v3 at width 8 ran 81 blocks of 4 warps at
// 0.12 issued a scheduler, 10.9 µs against 4.2 at width 1 (ncu, bench/cuda/s28/h100-o).
constexpr int kConvTokens = 8;  // tokens a block runs side by side (kPrepThreads x 8 = 1,024 threads)
__global__ void __launch_bounds__(kPrepThreads * kConvTokens)
    conv_gdn_prepare_tokens_kernel(float* state, const float* w, const float* raw, int T, int K, const float* a,
                                   const float* b, const float* neg_a, const float* dt_bias, int Hk, int Dk, int Hv,
                                   int Dv, float* q, float* k, float* v, float* g, float* beta, GdnTraceOut tr) {
  pdl_begin();
  __shared__ float partial[kConvTokens][kPrepThreads / 32];
  const int blk = blockIdx.x, kd = Hk * Dk, C = 2 * kd + Hv * Dv;
  if (blk == 2 * Hk + Hv) {
    prep_gates(static_cast<int>(threadIdx.x), static_cast<int>(blockDim.x), T, Hv, a, b, neg_a, dt_bias, g, beta, tr);
    return;
  }
  const int TB = static_cast<int>(blockDim.x) / kPrepThreads;  // tokens side by side
  const int u = static_cast<int>(threadIdx.x) / kPrepThreads, tid = static_cast<int>(threadIdx.x) % kPrepThreads;
  const bool qk = blk < 2 * Hk;
  const int D = qk ? Dk : Dv, c = (qk ? blk * Dk : 2 * kd + (blk - 2 * Hk) * Dv) + tid;
  const bool mine = tid < D;
  const float qscale = 1.0f / sqrtf(static_cast<float>(Dk));
  // input p of channel c: raw row p, or conv-state row K - 1 + p from before the pass (p < 0)
  auto input = [&](int p) {
    return p >= 0 ? raw[static_cast<int64_t>(p) * C + c] : state[static_cast<int64_t>(K - 1 + p) * C + c];
  };
  for (int t0 = 0; t0 < T; t0 += TB) {  // block-uniform
    const int t = t0 + u;
    const bool live = mine && t < T;
    float y = 0.0f;
    if (live) {
      float hist[kMaxConvK];
      for (int j = 0; j < K - 1; ++j) hist[j] = input(t - (K - 1) + j);
      const float in = raw[static_cast<int64_t>(t) * C + c];
      if (tr.raw) tr.raw[static_cast<int64_t>(t) * C + c] = in;
      y = conv_step(hist, w, c, K, in);
    }
    if (qk) {  // block-uniform: token u's block_sum of y * y over its kPrepThreads threads
      if (t0 > 0) __syncthreads();  // the previous chunk's partials are read
      const float p = warp_xor_sum(__fmaf_rn(y, y, 0.0f));
      if ((tid & 31) == 0) partial[u][tid >> 5] = p;
      __syncthreads();
      const float r = 1.0f / sqrtf(__fadd_rn(warps_in_order(partial[u], kPrepThreads / 32), 1e-6f));
      if (live) prep_store_qk(blk, Hk, kd, c, t, y, r, qscale, q, k, tr);
    } else if (live) {
      prep_store_v(kd, Hv, Dv, c, t, y, v, tr);
    }
  }
  __syncthreads();  // every read of the old conv state is done
  if (mine && u == 0) {  // the new state: inputs T - (K - 1) .. T - 1, oldest first
    float next[kMaxConvK];
    for (int j = 0; j < K - 1; ++j) next[j] = input(T - (K - 1) + j);
    for (int j = 0; j < K - 1; ++j) state[static_cast<int64_t>(j) * C + c] = next[j];
  }
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

template <int PREP>
__global__ void __launch_bounds__(kPrepThreads)
    gated_rms_norm_kernel(const float* x, const float* z, const float* w, int Hv, int Dv, float eps, float* y,
                          prep::Layout L, bool w_early) {
  const bool pre = w_early && Dv <= kPrepThreads;  // block-uniform
  const float wi = pre && static_cast<int>(threadIdx.x) < Dv ? __ldg(w + threadIdx.x) : 0.0f;  // before the wait
  pdl_begin_producer(L.early);
  __shared__ float partial[kPrepThreads / 32];
  if (pre)
    gated_norm_head_w<PREP>(x, z, wi, Hv, Dv, eps, y, L, static_cast<int>(blockIdx.x), static_cast<int>(blockIdx.y),
                            partial);
  else
    gated_norm_head<PREP>(x, z, w, Hv, Dv, eps, y, L, static_cast<int>(blockIdx.x), static_cast<int>(blockIdx.y),
                          partial);
}

// The decode step (gdn_decode's rows, gdn_step.cuh) and the gated RMSNorm + prepare of
// gated_rms_norm_kernel<PREP> in one launch: 8 warps a block, a warp an S row, 16 blocks a head;
// the block that finishes a head last (a counter a head, `done`, zero between launches: that block
// resets it) runs the head's norm for every token. Same bits as the two launches.
constexpr int kStepWarps = 8;
template <int PREP>
__global__ void __launch_bounds__(kStepWarps * 32)
    gdn_step_norm_kernel(float* __restrict__ S, const float* __restrict__ q, const float* __restrict__ k,
                         const float* __restrict__ v, const float* __restrict__ g, const float* __restrict__ beta,
                         int T, int Hk, int Hv, float* o, const float* z, const float* w, float eps, float* y,
                         prep::Layout L, unsigned* done) {
  pdl_begin_producer(L.early);
  __shared__ float partial[kStepWarps];
  __shared__ bool last;
  constexpr int kBlocksPerHead = gdn::kD / kStepWarps;
  const int row = blockIdx.x * kStepWarps + (threadIdx.x >> 5);
  gdn::row_step(S, q, k, v, g, beta, T, Hk, Hv, row, threadIdx.x & 31, o);
  const int h = static_cast<int>(blockIdx.x) / kBlocksPerHead;
  __threadfence();  // this block's o before its count
  __syncthreads();
  if (threadIdx.x == 0) last = atomicAdd(done + h, 1u) == kBlocksPerHead - 1;
  __syncthreads();
  if (!last) return;
  __threadfence();  // the other blocks' o (read through L2: __ldcg)
  if (threadIdx.x == 0) done[h] = 0;
  for (int t = 0; t < T; ++t) gated_norm_head<PREP>(o, z, w, Hv, gdn::kD, eps, y, L, h, t, partial);
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
  const int64_t units = T * (2 * Hk + Hv + 1);
  MERE_CHECK(units < (int64_t{1} << 31) - kUnitThreads, "cuda gdn_prepare", "too many (row, head) units: T = ", T,
             ", heads ", 2 * Hk + Hv + 1);
  const unsigned blocks = static_cast<unsigned>((units + kUnitThreads / 32 - 1) / (kUnitThreads / 32));
  const int C = static_cast<int>(2 * Hk * Dk + Hv * Dv);
  const bool wide = Dk > kPrepThreads || Dv > kPrepThreads;
  launch("gdn_prepare_kernel", wide ? &gdn_prepare_kernel<true> : &gdn_prepare_kernel<false>, blocks, kUnitThreads, 0,
         s, mixed, a, b, neg_a, dt_bias, static_cast<int>(units), C, static_cast<int>(Hk), static_cast<int>(Dk), static_cast<int>(Hv),
         static_cast<int>(Dv), q, k, v, g, beta);
}

bool conv_gdn_prepare_supported(int64_t Hk, int64_t Dk, int64_t Hv, int64_t Dv, int64_t K) {
  return Dk >= 1 && Dk <= kPrepThreads && Dv >= 1 && Dv <= kPrepThreads && K >= 1 && K <= kMaxConvK && Hk >= 1 &&
         Hv >= 1;
}

void conv_gdn_prepare(cudaStream_t s, float* state, const float* w, const float* raw, int64_t T, int64_t K,
                      const float* a, const float* b, const float* neg_a, const float* dt_bias, int64_t Hk, int64_t Dk,
                      int64_t Hv, int64_t Dv, float* q, float* k, float* v, float* g, float* beta,
                      const GdnTraceOut& trace, bool side_by_side) {
  MERE_CHECK(conv_gdn_prepare_supported(Hk, Dk, Hv, Dv, K), "cuda conv_gdn_prepare",
             "head widths and conv width out of range: expected Dk, Dv in 1..", kPrepThreads, " and K in 1..",
             kMaxConvK, ", got Dk ", Dk, ", Dv ", Dv, ", K ", K);
  const unsigned grid = static_cast<unsigned>(2 * Hk + Hv + 1);
  if (side_by_side) {
    const int tb = static_cast<int>(std::min<int64_t>(std::max<int64_t>(T, 1), kConvTokens));  // tokens a block
    launch("conv_gdn_prepare_tokens_kernel", conv_gdn_prepare_tokens_kernel, grid, kPrepThreads * tb, 0, s, state, w,
           raw, static_cast<int>(T), static_cast<int>(K), a, b, neg_a, dt_bias, static_cast<int>(Hk),
           static_cast<int>(Dk), static_cast<int>(Hv), static_cast<int>(Dv), q, k, v, g, beta, trace);
    return;
  }
  launch("conv_gdn_prepare_kernel", gdn_state_early() ? &conv_gdn_prepare_kernel<true> : &conv_gdn_prepare_kernel<false>,
         grid, kPrepThreads, 0, s, state, w, raw, static_cast<int>(T), static_cast<int>(K), a, b, neg_a, dt_bias,
         static_cast<int>(Hk), static_cast<int>(Dk), static_cast<int>(Hv), static_cast<int>(Dv), q, k, v, g, beta, trace);
}

void gdn_generic(cudaStream_t s, float* S, const float* q, const float* k, const float* v, const float* g,
                 const float* beta, int64_t T, int64_t Hk, int64_t Hv, int64_t Dk, int64_t Dv, float* o) {
  MERE_CHECK(Dv >= 1 && Dv <= 1024 && Hv % Hk == 0, "cuda gdn", "unsupported heads: Hv ", Hv, " Hk ", Hk, " Dv ", Dv);
  const int threads = static_cast<int>((Dv + 31) / 32 * 32);
  launch("gdn_generic_kernel", gdn_generic_kernel, static_cast<unsigned>(Hv), threads, 0, s, S, q, k, v, g, beta,
         static_cast<int>(T), static_cast<int>(Hk), static_cast<int>(Hv), static_cast<int>(Dk), static_cast<int>(Dv), o);
}

bool gated_rms_norm(cudaStream_t s, const float* x, const float* z, const float* w, int64_t T, int64_t Hv,
                    int64_t Dv, float eps, float* y, uint16_t* xq) {
  if (T >= kWarpNormRows) {  // prefill: a warp per (row, head)
    const int64_t units = T * Hv;
    const unsigned blocks = static_cast<unsigned>((units + kUnitThreads / 32 - 1) / (kUnitThreads / 32));
    if (Dv % 8 != 0) xq = nullptr;  // a group of 8 columns must not straddle two heads' units
    launch("gated_rms_norm_warp_kernel",
           Dv > kPrepThreads ? &gated_rms_norm_warp_kernel<true> : &gated_rms_norm_warp_kernel<false>, blocks,
           kUnitThreads, 0, s, x, z, w, units, static_cast<int>(Dv), eps, y, xq);
    return xq != nullptr;
  }
  dim3 grid(static_cast<unsigned>(Hv), static_cast<unsigned>(T));
  launch("gated_rms_norm_kernel", &gated_rms_norm_kernel<0>, grid, kPrepThreads, 0, s, x, z, w, static_cast<int>(Hv),
         static_cast<int>(Dv), eps, y, prep::Layout{}, norm_w_early());
  return false;
}

void gated_rms_norm_prep(cudaStream_t s, const float* x, const float* z, const float* w, int64_t T, int64_t Hv,
                         int64_t Dv, float eps, float* y, int bits, float* ws) {
  MERE_CHECK((bits == 4 || bits == 8) && Dv % 64 == 0, "gated_rms_norm_prep",
             "expected 4 or 8 bits and a head width divisible by 64, got ", bits, " bits, head width ", Dv);
  dim3 grid(static_cast<unsigned>(Hv), static_cast<unsigned>(T));
  const prep::Layout L = prep::producer_layout(ws, T, Hv * Dv, bits);
  if (bits == 4)
    launch("gated_rms_norm_kernel<4> (prepare)", &gated_rms_norm_kernel<4>, grid, kPrepThreads, 0, s, x, z, w,
           static_cast<int>(Hv), static_cast<int>(Dv), eps, y, L, norm_w_early());
  else
    launch("gated_rms_norm_kernel<8> (prepare)", &gated_rms_norm_kernel<8>, grid, kPrepThreads, 0, s, x, z, w,
           static_cast<int>(Hv), static_cast<int>(Dv), eps, y, L, norm_w_early());
}

void gdn_step_norm_prep(cudaStream_t s, float* S, const float* q, const float* k, const float* v, const float* g,
                        const float* beta, int64_t T, int64_t Hk, int64_t Hv, int64_t Dk, int64_t Dv, float* o,
                        const float* z, const float* w, float eps, float* y, int bits, float* ws, unsigned* done) {
  MERE_CHECK(gdn_step_norm_supported(Hk, Dk, Hv, Dv) && (bits == 4 || bits == 8) && T >= 1 &&
                 T * Hv * Dv < (int64_t{1} << 31),
             "cuda gdn_step_norm_prep", "expected Dk = Dv = 128, Hv a multiple of Hk, 4 or 8 bits, got Dk ", Dk,
             ", Dv ", Dv, ", Hk ", Hk, ", Hv ", Hv, ", ", bits, " bits, T ", T);
  const prep::Layout L = prep::producer_layout(ws, T, Hv * Dv, bits);
  const unsigned blocks = static_cast<unsigned>(Hv * Dv / kStepWarps);
  const int iT = static_cast<int>(T), iHk = static_cast<int>(Hk), iHv = static_cast<int>(Hv);
  if (bits == 4)
    launch("gdn_step_norm_kernel<4>", &gdn_step_norm_kernel<4>, blocks, kStepWarps * 32, 0, s, S, q, k, v, g, beta, iT,
           iHk, iHv, o, z, w, eps, y, L, done);
  else
    launch("gdn_step_norm_kernel<8>", &gdn_step_norm_kernel<8>, blocks, kStepWarps * 32, 0, s, S, q, k, v, g, beta, iT,
           iHk, iHv, o, z, w, eps, y, L, done);
}

bool gdn_step_norm_supported(int64_t Hk, int64_t Dk, int64_t Hv, int64_t Dv) {
  return Dk == gdn::kD && Dv == gdn::kD && Hk >= 1 && Hv >= Hk && Hv % Hk == 0;
}

}  // namespace mere::cuda::k
