// Gated full attention pieces: per-head q/k RMSNorm + partial rotate-half RoPE + KV append, causal
// split attention with positions read on the device, sigmoid output gate. Mirrors
// Qwen35Model::attention_block; the split is fixed (kSpans ranges of ceil(len/spans) positions).
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/engine/kernels.h"

namespace mere::cuda::k {
namespace {

constexpr int kThreads = 128;
constexpr int kMaxHd = 512;
constexpr int kDims = kMaxHd / kThreads;  // output dims a thread owns

__device__ float block_sum(float v, float* partial) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v = __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, off));
  if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = v;
  __syncthreads();
  float total = 0.0f;
  for (int i = 0; i < static_cast<int>(blockDim.x >> 5); ++i) total = __fadd_rn(total, partial[i]);
  __syncthreads();
  return total;
}

__device__ float block_max(float v, float* partial) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
  if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = v;
  __syncthreads();
  float m = -INFINITY;
  for (int i = 0; i < static_cast<int>(blockDim.x >> 5); ++i) m = fmaxf(m, partial[i]);
  __syncthreads();
  return m;
}

__global__ void __launch_bounds__(kThreads)
    attn_prepare_kernel(const float* qg, const float* k, const float* v, const float* q_norm, const float* k_norm,
                        const int32_t* pos, int nh, int nkv, int hd, int rotary_dim, double theta, float eps, float* q,
                        float* kc, float* vc) {
  __shared__ float partial[kThreads / 32];
  __shared__ float buf[kMaxHd];
  const int blk = blockIdx.x, t = blockIdx.y, tid = threadIdx.x;
  const int p = pos[0] + t;
  const bool is_q = blk < nh;
  const int h = is_q ? blk : blk - nh;
  const float* src = is_q ? qg + (static_cast<int64_t>(t) * nh + h) * 2 * hd : k + (static_cast<int64_t>(t) * nkv + h) * hd;
  const float* w = is_q ? q_norm : k_norm;
  float* dst = is_q ? q + (static_cast<int64_t>(t) * nh + h) * hd : kc + (static_cast<int64_t>(p) * nkv + h) * hd;
  float ss = 0.0f;
  for (int i = tid; i < hd; i += kThreads) ss = __fmaf_rn(src[i], src[i], ss);
  const float r = 1.0f / sqrtf(__fadd_rn(__fdiv_rn(block_sum(ss, partial), static_cast<float>(hd)), eps));
  for (int i = tid; i < hd; i += kThreads) buf[i] = __fmul_rn(__fmul_rn(src[i], r), w[i]);
  __syncthreads();
  const int half = rotary_dim / 2;
  for (int i = tid; i < hd; i += kThreads) {
    float y = buf[i];
    if (i < rotary_dim) {
      const int j = i < half ? i : i - half;
      const float inv = static_cast<float>(1.0 / pow(theta, static_cast<double>(2 * j) / static_cast<double>(rotary_dim)));
      const float ang = __fmul_rn(static_cast<float>(p), inv);
      const float c = cosf(ang), sn = sinf(ang);
      const float a = buf[j], b = buf[j + half];
      y = i < half ? __fsub_rn(__fmul_rn(a, c), __fmul_rn(b, sn)) : __fadd_rn(__fmul_rn(b, c), __fmul_rn(a, sn));
    }
    dst[i] = y;
  }
  if (!is_q) {
    const float* vs = v + (static_cast<int64_t>(t) * nkv + h) * hd;
    float* vd = vc + (static_cast<int64_t>(p) * nkv + h) * hd;
    for (int i = tid; i < hd; i += kThreads) vd[i] = vs[i];
  }
}

// block per (head, span, row): running max / sum over tiles of kThreads positions
__global__ void __launch_bounds__(kThreads)
    attn_split_kernel(const float* q, const float* kc, const float* vc, const int32_t* pos, int nh, int nkv, int hd,
                      float scale, float* ws) {
  __shared__ float partial[kThreads / 32];
  __shared__ float qs[kMaxHd];
  __shared__ float pr[kThreads];
  const int h = blockIdx.x, span = blockIdx.y, spans = gridDim.y, t = blockIdx.z, tid = threadIdx.x;
  const int kh = h / (nh / nkv);
  const int len = pos[0] + t + 1;
  const int chunk = (len + spans - 1) / spans;
  const int p0 = span * chunk;
  const int n = max(0, min(chunk, len - p0));
  const float* qh = q + (static_cast<int64_t>(t) * nh + h) * hd;
  for (int i = tid; i < hd; i += kThreads) qs[i] = qh[i];
  __syncthreads();
  float m = -INFINITY, l = 0.0f;
  float o[kDims];
#pragma unroll
  for (int d = 0; d < kDims; ++d) o[d] = 0.0f;
  for (int j0 = 0; j0 < n; j0 += kThreads) {
    const int nt = min(kThreads, n - j0);
    float sc = -INFINITY;
    if (tid < nt) {
      const float* kr = kc + (static_cast<int64_t>(p0 + j0 + tid) * nkv + kh) * hd;
      float acc = 0.0f;
      for (int d = 0; d < hd; ++d) acc = __fmaf_rn(qs[d], kr[d], acc);
      sc = __fmul_rn(acc, scale);
    }
    const float mt = block_max(sc, partial);
    const float mn = fmaxf(m, mt);
    const float f = expf(m - mn);  // m = -inf at first: f = 0
    const float e = tid < nt ? expf(sc - mn) : 0.0f;
    pr[tid] = e;
    const float es = block_sum(e, partial);  // also a barrier for pr
    l = __fadd_rn(__fmul_rn(l, f), es);
    m = mn;
#pragma unroll
    for (int d = 0; d < kDims; ++d) {
      const int dd = tid + d * kThreads;
      if (dd >= hd) break;
      float acc = __fmul_rn(o[d], f);
      for (int j = 0; j < nt; ++j)
        acc = __fmaf_rn(pr[j], vc[(static_cast<int64_t>(p0 + j0 + j) * nkv + kh) * hd + dd], acc);
      o[d] = acc;
    }
    __syncthreads();
  }
  float* out = ws + ((static_cast<int64_t>(t) * nh + h) * spans + span) * (hd + 2);
#pragma unroll
  for (int d = 0; d < kDims; ++d) {
    const int dd = tid + d * kThreads;
    if (dd < hd) out[dd] = o[d];
  }
  if (tid == 0) {
    out[hd] = m;
    out[hd + 1] = l;
  }
}

__global__ void __launch_bounds__(kThreads)
    attn_combine_kernel(const float* ws, int nh, int hd, int spans, float* out) {
  const int h = blockIdx.x, t = blockIdx.y;
  const float* base = ws + (static_cast<int64_t>(t) * nh + h) * spans * (hd + 2);
  float M = -INFINITY;
  for (int s = 0; s < spans; ++s) M = fmaxf(M, base[s * (hd + 2) + hd]);
  float L = 0.0f;
  for (int s = 0; s < spans; ++s) {
    const float ms = base[s * (hd + 2) + hd];
    if (ms != -INFINITY) L = __fmaf_rn(base[s * (hd + 2) + hd + 1], expf(ms - M), L);
  }
  for (int d = threadIdx.x; d < hd; d += kThreads) {
    float acc = 0.0f;
    for (int s = 0; s < spans; ++s) {
      const float ms = base[s * (hd + 2) + hd];
      if (ms != -INFINITY) acc = __fmaf_rn(base[s * (hd + 2) + d], expf(ms - M), acc);
    }
    out[(static_cast<int64_t>(t) * nh + h) * hd + d] = __fdiv_rn(acc, L);
  }
}

__global__ void sigmoid_gate_kernel(float* out, const float* qg, int nh, int hd, int64_t n) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const int64_t row = i / hd;  // (t, h)
  const int d = static_cast<int>(i % hd);
  const float gate = qg[row * 2 * hd + hd + d];
  out[i] = __fmul_rn(out[i], 1.0f / (1.0f + expf(-gate)));
}

}  // namespace

void attn_prepare(cudaStream_t s, const float* qg, const float* k, const float* v, const float* q_norm,
                  const float* k_norm, const int32_t* pos, int64_t T, int64_t nh, int64_t nkv, int64_t hd,
                  int64_t rotary_dim, double theta, float eps, float* q, float* kc, float* vc) {
  MERE_CHECK(hd <= kMaxHd && rotary_dim <= hd && rotary_dim % 2 == 0, "cuda attention", "head_dim ", hd,
             " / rotary_dim ", rotary_dim, " unsupported: expected head_dim <= ", kMaxHd);
  dim3 grid(static_cast<unsigned>(nh + nkv), static_cast<unsigned>(T));
  attn_prepare_kernel<<<grid, kThreads, 0, s>>>(qg, k, v, q_norm, k_norm, pos, static_cast<int>(nh),
                                                static_cast<int>(nkv), static_cast<int>(hd),
                                                static_cast<int>(rotary_dim), theta, eps, q, kc, vc);
  MERE_CUDA_CHECK_LAUNCH("attn_prepare_kernel");
}

int64_t attention_ws_floats(int64_t T, int64_t nh, int64_t hd, int spans) { return T * nh * spans * (hd + 2); }

void attention(cudaStream_t s, const float* q, const float* kc, const float* vc, const int32_t* pos, int64_t T,
               int64_t nh, int64_t nkv, int64_t hd, float scale, int spans, float* ws, float* out) {
  MERE_CHECK(hd <= kMaxHd && nh % nkv == 0, "cuda attention", "unsupported heads ", nh, "/", nkv, " head_dim ", hd);
  dim3 grid(static_cast<unsigned>(nh), static_cast<unsigned>(spans), static_cast<unsigned>(T));
  attn_split_kernel<<<grid, kThreads, 0, s>>>(q, kc, vc, pos, static_cast<int>(nh), static_cast<int>(nkv),
                                              static_cast<int>(hd), scale, ws);
  MERE_CUDA_CHECK_LAUNCH("attn_split_kernel");
  dim3 g2(static_cast<unsigned>(nh), static_cast<unsigned>(T));
  attn_combine_kernel<<<g2, kThreads, 0, s>>>(ws, static_cast<int>(nh), static_cast<int>(hd), spans, out);
  MERE_CUDA_CHECK_LAUNCH("attn_combine_kernel");
}

void sigmoid_gate(cudaStream_t s, float* out, const float* qg, int64_t T, int64_t nh, int64_t hd) {
  const int64_t n = T * nh * hd;
  sigmoid_gate_kernel<<<static_cast<unsigned>((n + 255) / 256), 256, 0, s>>>(out, qg, static_cast<int>(nh),
                                                                             static_cast<int>(hd), n);
  MERE_CUDA_CHECK_LAUNCH("sigmoid_gate_kernel");
}

}  // namespace mere::cuda::k
