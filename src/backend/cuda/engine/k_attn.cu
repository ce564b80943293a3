// Gated full attention pieces: per-head q/k RMSNorm + partial rotate-half RoPE + KV append, causal
// split attention with positions read on the device (a block per query head, or with
// MERE_CUDA_ATTN=gqa a block per KV head for all its query heads), sigmoid output gate. Mirrors
// Qwen35Model::attention_block; the split is fixed (kSpans ranges of ceil(len/spans) positions).
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/engine/k_block_reduce.cuh"
#include "backend/cuda/engine/k_math.cuh"
#include "backend/cuda/engine/kernels.h"
#include "backend/cuda/launch.cuh"

namespace mere::cuda::k {
namespace {

constexpr int kThreads = 128;
constexpr int kMaxHd = 512;
constexpr int kDims = kMaxHd / kThreads;  // output dims a thread owns

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
  pdl_begin();
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
  pdl_begin();
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
  pdl_begin();
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

// The same merge (MERE_CUDA_ATTN_COMBINE=v2, the engine's default since session 25: H100 35B-A3B decode
// +1.5%, 27B +0.7-1.0%; docs/cuda-kernels.md §5.9b). The s24c trace put
// attn_combine at ~8 µs a launch in sequence, the slowest small kernel of a decode step: every thread
// walks the SP spans three times (M, L, then its outputs), each step a dependent L2 read and an exp.
// Here warp 0 reads the spans' (m, l) once (a lane a span), computes M (fmaxf: exact in any order) and
// each span's factor exp(m - M) once, and lane 0 runs L's fma chain in span order; then every thread's
// outputs take their SP loads at once (the span loop unrolled) and the same fma chain in span order
// with the same factors. Each value is computed by the same operations in the same order as above:
// bitwise attn_combine_kernel.
template <int SP>
__global__ void __launch_bounds__(kThreads) attn_combine_v2_kernel(const float* ws, int nh, int hd, float* out,
                                                                   L2Ahead ahead) {
  static_assert(SP >= 1 && SP <= 32, "a lane a span");
  pdl_begin();
  __shared__ float fs[SP];  // exp(m_s - M), or 0 for an empty span (never used: the chains skip it)
  __shared__ bool live[SP];
  __shared__ float Ls;
  const int h = blockIdx.x, t = blockIdx.y, lane = threadIdx.x & 31;
  const float* base = ws + (static_cast<int64_t>(t) * nh + h) * SP * (hd + 2);
  if (threadIdx.x < 32) {
    const float ms = lane < SP ? base[lane * (hd + 2) + hd] : -INFINITY;
    const float ls = lane < SP ? base[lane * (hd + 2) + hd + 1] : 0.0f;
    float M = ms;
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) M = fmaxf(M, __shfl_xor_sync(0xffffffffu, M, off));
    const float f = ms != -INFINITY ? expf(ms - M) : 0.0f;
    if (lane < SP) fs[lane] = f, live[lane] = ms != -INFINITY;
    float L = 0.0f;  // lane 0: the fma chain in span order, as attn_combine_kernel
#pragma unroll
    for (int s = 0; s < SP; ++s) {
      const float fl = __shfl_sync(0xffffffffu, f, s), ll = __shfl_sync(0xffffffffu, ls, s);
      const float msv = __shfl_sync(0xffffffffu, ms, s);
      if (msv != -INFINITY) L = __fmaf_rn(ll, fl, L);
    }
    if (lane == 0) Ls = L;
  }
  __syncthreads();
  l2_ahead(ahead);  // the spans' (m, l) are in: the later weights (o_proj) queue behind nothing of ours
  const float L = Ls;
  for (int d = threadIdx.x; d < hd; d += kThreads) {
    float o[SP];
#pragma unroll
    for (int s = 0; s < SP; ++s) o[s] = live[s] ? base[s * (hd + 2) + d] : 0.0f;
    float acc = 0.0f;
#pragma unroll
    for (int s = 0; s < SP; ++s)
      if (live[s]) acc = __fmaf_rn(o[s], fs[s], acc);
    out[(static_cast<int64_t>(t) * nh + h) * hd + d] = __fdiv_rn(acc, L);
  }
}

// attn_combine_kernel, or its v2 for the engine's 16 spans (only v2 asks the L2 for `ahead`)
void launch_combine(cudaStream_t s, const float* ws, int nh, int hd, int spans, int64_t T, float* out, bool v2,
                    const L2Ahead* ahead) {
  dim3 g2(static_cast<unsigned>(nh), static_cast<unsigned>(T));
  if (v2 && spans == 16)
    launch("attn_combine_v2_kernel", &attn_combine_v2_kernel<16>, g2, kThreads, 0, s, ws, nh, hd, out,
           ahead ? *ahead : L2Ahead{});
  else
    launch("attn_combine_kernel", attn_combine_kernel, g2, kThreads, 0, s, ws, nh, hd, spans, out);
}

// ---- GQA-aware split attention (MERE_CUDA_ATTN=gqa) ----
// Block per (KV head, span, row t): the G = nh/nkv query heads of the KV head share every K and V
// row the block reads (the split kernel above reads them once per query head). The span is walked
// in tiles of kGqaTile positions, three phases a tile:
//  1. scores: warp w takes tile positions 8w..8w+7; lanes split head_dim (lane owns the dims
//     (c*32 + lane)*VEC.., coalesced rows), all 8 rows' loads in flight, one fma chain a (head,
//     position) per lane, then a halving butterfly over the lanes (offsets 16, 8, 4 each halve the
//     positions a lane keeps, 2 and 1 finish the sum): 7G + 2G shuffles for 8 positions instead of 40G
//  2. online softmax: warp g owns head g's running max m and sum l (same recurrence as the split
//     kernel: f = exp(m_old - m_new), l = l*f + sum e); p = exp(s - m_new) to shared
//  3. V: thread owns 4 output dims of all G heads for one position group (groups interleave the
//     tile's positions); every V row is read once (float4, coalesced) for all G heads. The V loads
//     (half of them at head_dim 256 and G >= 6: registers) are issued in phase 1, so they fly
//     across the barrier and the softmax
// At the span's end the groups' partial outputs are summed in group order. Partials go to ws in the
// split kernel's layout (o[hd], m, l a (t, query head, span)), merged by attn_combine_kernel.
// Every reduction order is fixed by the thread layout and the span bounds (pos[] on the device):
// row t's result depends only on its own query and the cache (batch-width invariant).
constexpr int kGqaThreads = 256;
constexpr int kGqaWarps = kGqaThreads / 32;
constexpr int kGqaPpw = 8;  // positions a warp scores a tile (the 3 halving steps of the reduction)
constexpr int kGqaTile = kGqaWarps * kGqaPpw;
constexpr int kGqaMaxG = 8;
constexpr int kGqaMaxHd = 256;

template <int VEC>
__device__ __forceinline__ void load_vec(const float* __restrict__ p, float* r) {
  if constexpr (VEC == 4) {
    const float4 x = __ldg(reinterpret_cast<const float4*>(p));
    r[0] = x.x, r[1] = x.y, r[2] = x.z, r[3] = x.w;
  } else if constexpr (VEC == 2) {
    const float2 x = __ldg(reinterpret_cast<const float2*>(p));
    r[0] = x.x, r[1] = x.y;
  } else {
    r[0] = __ldg(p);
  }
}

// one halving step of the score reduction: lanes with `bit` set keep the upper half of a[g][0..2H),
// the others the lower half, each adding its partner's copy of the half it keeps
template <int G, int H>
__device__ __forceinline__ void halve(float (&a)[G][kGqaPpw], int lane, int bit) {
  const bool up = (lane & bit) != 0;
#pragma unroll
  for (int g = 0; g < G; ++g)
#pragma unroll
    for (int i = 0; i < H; ++i) {
      const float send = up ? a[g][i] : a[g][i + H];
      const float keep = up ? a[g][i + H] : a[g][i];
      a[g][i] = __fadd_rn(keep, __shfl_xor_sync(0xffffffffu, send, bit));
    }
}

template <int HD, int G>
__global__ void __launch_bounds__(kGqaThreads, 1)
    attn_gqa_split_kernel(const float* __restrict__ q, const float* __restrict__ kc, const float* __restrict__ vc,
                          const int32_t* __restrict__ pos, int nh, int nkv, float scale, float* __restrict__ ws) {
  pdl_begin();
  constexpr int PER = HD / 32;                // score pass: dims a lane owns
  constexpr int VEC = PER >= 4 ? 4 : PER;     // ... in chunks of VEC
  constexpr int NCH = PER / VEC;
  constexpr int VT = HD / 4;                  // V pass: threads a row (4 dims each)
  constexpr int NGRP = kGqaThreads / VT;      // position groups
  constexpr int VU = kGqaTile / NGRP;         // positions a group takes a tile
  constexpr int VE = HD * G >= 256 * 6 ? VU / 2 : VU;  // ... loaded early (in phase 1): register budget
  static_assert(HD % 32 == 0 && PER % VEC == 0 && kGqaThreads % VT == 0 && kGqaTile % NGRP == 0, "geometry");
  static_assert(G >= 1 && G <= kGqaWarps && kGqaTile == 64, "one softmax warp a head; 2 scores a lane");
  __shared__ float sc[G][kGqaTile];                 // scores of the tile
  __shared__ float pr[G][kGqaTile];                 // exp(s - m) of the tile
  __shared__ float fs[G];                           // rescale factor of the tile
  __shared__ float mls[G][2];                       // final m, l
  __shared__ __align__(16) float red[NGRP][G][HD];  // the groups' outputs (NGRP * HD = 1024 floats a head)

  const int kh = blockIdx.x, span = blockIdx.y, spans = gridDim.y, t = blockIdx.z;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int len = pos[0] + t + 1;
  const int chunk = (len + spans - 1) / spans;
  const int p0 = span * chunk;
  const int n = max(0, min(chunk, len - p0));
  const int64_t rs = static_cast<int64_t>(nkv) * HD;  // cache row stride
  const float* kbase = kc + (static_cast<int64_t>(p0) * nkv + kh) * HD;
  const float* vbase = vc + (static_cast<int64_t>(p0) * nkv + kh) * HD;

  float qr[G][PER];  // this lane's dims of the G queries
#pragma unroll
  for (int g = 0; g < G; ++g) {
    const float* qh = q + (static_cast<int64_t>(t) * nh + kh * G + g) * HD;
#pragma unroll
    for (int c = 0; c < NCH; ++c) load_vec<VEC>(qh + (c * 32 + lane) * VEC, &qr[g][c * VEC]);
  }
  const int vcol = (tid % VT) * 4, vgrp = tid / VT;
  float m = -INFINITY, l = 0.0f;  // head `warp`'s running max and sum (warps < G)
  float o[G][4];
#pragma unroll
  for (int g = 0; g < G; ++g) o[g][0] = o[g][1] = o[g][2] = o[g][3] = 0.0f;

  for (int j0 = 0; j0 < n; j0 += kGqaTile) {
    const int nt = min(kGqaTile, n - j0);
    float4 vr[VU];  // V rows of phase 3; the first VE loaded in phase 1 (in flight across phases 1-2)
    {  // 1. scores of tile positions warp*8 + u
      float kr[kGqaPpw][PER];
#pragma unroll
      for (int u = 0; u < kGqaPpw; ++u) {
        const int j = warp * kGqaPpw + u;
        if (j < nt) {
          const float* kp = kbase + static_cast<int64_t>(j0 + j) * rs;
#pragma unroll
          for (int c = 0; c < NCH; ++c) load_vec<VEC>(kp + (c * 32 + lane) * VEC, &kr[u][c * VEC]);
        } else {
#pragma unroll
          for (int i = 0; i < PER; ++i) kr[u][i] = 0.0f;
        }
      }
      float a[G][kGqaPpw];
#pragma unroll
      for (int u = 0; u < kGqaPpw; ++u)
#pragma unroll
        for (int g = 0; g < G; ++g) {
          float acc = 0.0f;
#pragma unroll
          for (int i = 0; i < PER; ++i) acc = __fmaf_rn(qr[g][i], kr[u][i], acc);
          a[g][u] = acc;
        }
      halve<G, 4>(a, lane, 16);  // lane keeps positions 4*b4 + 0..3
      halve<G, 2>(a, lane, 8);   // 4*b4 + 2*b3 + 0..1
      halve<G, 1>(a, lane, 4);   // 4*b4 + 2*b3 + b2 = lane >> 2
#pragma unroll
      for (int g = 0; g < G; ++g) {
        a[g][0] = __fadd_rn(a[g][0], __shfl_xor_sync(0xffffffffu, a[g][0], 2));
        a[g][0] = __fadd_rn(a[g][0], __shfl_xor_sync(0xffffffffu, a[g][0], 1));
      }
#pragma unroll
      for (int u = 0; u < VE; ++u) {
        const int j = vgrp + NGRP * u;
        vr[u] = j < nt ? __ldg(reinterpret_cast<const float4*>(vbase + static_cast<int64_t>(j0 + j) * rs + vcol))
                       : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      }
      if ((lane & 3) == 0) {
        const int j = warp * kGqaPpw + (lane >> 2);
#pragma unroll
        for (int g = 0; g < G; ++g) sc[g][j] = j < nt ? __fmul_rn(a[g][0], scale) : -INFINITY;
      }
    }
    __syncthreads();
    if (warp < G) {  // 2. online softmax of head `warp`
      const float s0 = sc[warp][lane], s1 = sc[warp][lane + 32];
      float mt = fmaxf(s0, s1);
#pragma unroll
      for (int off = 16; off > 0; off >>= 1) mt = fmaxf(mt, __shfl_xor_sync(0xffffffffu, mt, off));
      const float mn = fmaxf(m, mt);
      const float f = expf(m - mn);  // m = -inf at first: f = 0
      const float e0 = lane < nt ? expf(s0 - mn) : 0.0f;
      const float e1 = lane + 32 < nt ? expf(s1 - mn) : 0.0f;
      pr[warp][lane] = e0;
      pr[warp][lane + 32] = e1;
      float es = __fadd_rn(e0, e1);
#pragma unroll
      for (int off = 16; off > 0; off >>= 1) es = __fadd_rn(es, __shfl_xor_sync(0xffffffffu, es, off));
      l = __fadd_rn(__fmul_rn(l, f), es);
      m = mn;
      if (lane == 0) fs[warp] = f;
    }
    __syncthreads();
    {  // 3. V: group vgrp takes tile positions vgrp + NGRP*u (p = 0 past nt, so the sums skip them)
#pragma unroll
      for (int u = VE; u < VU; ++u) {
        const int j = vgrp + NGRP * u;
        vr[u] = j < nt ? __ldg(reinterpret_cast<const float4*>(vbase + static_cast<int64_t>(j0 + j) * rs + vcol))
                       : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      }
#pragma unroll
      for (int g = 0; g < G; ++g) {
        const float f = fs[g];
        o[g][0] = __fmul_rn(o[g][0], f), o[g][1] = __fmul_rn(o[g][1], f);
        o[g][2] = __fmul_rn(o[g][2], f), o[g][3] = __fmul_rn(o[g][3], f);
      }
#pragma unroll
      for (int u = 0; u < VU; ++u) {
        const int j = vgrp + NGRP * u;
#pragma unroll
        for (int g = 0; g < G; ++g) {
          const float p = pr[g][j];
          o[g][0] = __fmaf_rn(p, vr[u].x, o[g][0]);
          o[g][1] = __fmaf_rn(p, vr[u].y, o[g][1]);
          o[g][2] = __fmaf_rn(p, vr[u].z, o[g][2]);
          o[g][3] = __fmaf_rn(p, vr[u].w, o[g][3]);
        }
      }
    }
    // no barrier here: the next tile writes sc first; pr and fs only after the next barrier
  }
#pragma unroll
  for (int g = 0; g < G; ++g)
    *reinterpret_cast<float4*>(&red[vgrp][g][vcol]) = make_float4(o[g][0], o[g][1], o[g][2], o[g][3]);
  if (warp < G && lane == 0) mls[warp][0] = m, mls[warp][1] = l;
  __syncthreads();
  for (int i = tid; i < G * HD; i += kGqaThreads) {
    const int g = i / HD, d = i % HD;
    float acc = red[0][g][d];
#pragma unroll
    for (int r = 1; r < NGRP; ++r) acc = __fadd_rn(acc, red[r][g][d]);
    ws[((static_cast<int64_t>(t) * nh + kh * G + g) * spans + span) * (HD + 2) + d] = acc;
  }
  if (tid < G) {
    float* out = ws + ((static_cast<int64_t>(t) * nh + kh * G + tid) * spans + span) * (HD + 2);
    out[HD] = mls[tid][0];
    out[HD + 1] = mls[tid][1];
  }
}

template <int HD, int G>
void launch_gqa(cudaStream_t s, dim3 grid, const float* q, const float* kc, const float* vc, const int32_t* pos,
                int nh, int nkv, float scale, float* ws) {
  launch("attn_gqa_split_kernel", &attn_gqa_split_kernel<HD, G>, grid, kGqaThreads, 0, s, q, kc, vc, pos, nh, nkv, scale,
         ws);
}

template <int HD>
void launch_gqa_g(int G, cudaStream_t s, dim3 grid, const float* q, const float* kc, const float* vc,
                  const int32_t* pos, int nh, int nkv, float scale, float* ws) {
  switch (G) {
    case 1: launch_gqa<HD, 1>(s, grid, q, kc, vc, pos, nh, nkv, scale, ws); break;
    case 2: launch_gqa<HD, 2>(s, grid, q, kc, vc, pos, nh, nkv, scale, ws); break;
    case 3: launch_gqa<HD, 3>(s, grid, q, kc, vc, pos, nh, nkv, scale, ws); break;
    case 4: launch_gqa<HD, 4>(s, grid, q, kc, vc, pos, nh, nkv, scale, ws); break;
    case 5: launch_gqa<HD, 5>(s, grid, q, kc, vc, pos, nh, nkv, scale, ws); break;
    case 6: launch_gqa<HD, 6>(s, grid, q, kc, vc, pos, nh, nkv, scale, ws); break;
    case 7: launch_gqa<HD, 7>(s, grid, q, kc, vc, pos, nh, nkv, scale, ws); break;
    default: launch_gqa<HD, 8>(s, grid, q, kc, vc, pos, nh, nkv, scale, ws); break;
  }
}

// xq (prefill, nullable): the gated values also go to the o projection's bf16 X (xq_store)
__global__ void sigmoid_gate_kernel(float* out, const float* qg, int nh, int hd, int64_t n, uint16_t* xq) {
  pdl_begin();
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const int64_t row = i / hd;  // (t, h)
  const int d = static_cast<int>(i % hd);
  const float gate = qg[row * 2 * hd + hd + d];
  const float v = __fmul_rn(out[i], sigmoid(gate));
  out[i] = v;
  if (xq) xq_store(xq, i, v);
}

}  // namespace

void attn_prepare(cudaStream_t s, const float* qg, const float* k, const float* v, const float* q_norm,
                  const float* k_norm, const int32_t* pos, int64_t T, int64_t nh, int64_t nkv, int64_t hd,
                  int64_t rotary_dim, double theta, float eps, float* q, float* kc, float* vc) {
  MERE_CHECK(hd <= kMaxHd && rotary_dim <= hd && rotary_dim % 2 == 0, "cuda attention", "head_dim ", hd,
             " / rotary_dim ", rotary_dim, " unsupported: expected head_dim <= ", kMaxHd);
  dim3 grid(static_cast<unsigned>(nh + nkv), static_cast<unsigned>(T));
  launch("attn_prepare_kernel", attn_prepare_kernel, grid, kThreads, 0, s, qg, k, v, q_norm, k_norm, pos,
         static_cast<int>(nh), static_cast<int>(nkv), static_cast<int>(hd), static_cast<int>(rotary_dim), theta, eps, q,
         kc, vc);
}

int64_t attention_ws_floats(int64_t T, int64_t nh, int64_t hd, int spans) { return T * nh * spans * (hd + 2); }

void attention(cudaStream_t s, const float* q, const float* kc, const float* vc, const int32_t* pos, int64_t T,
               int64_t nh, int64_t nkv, int64_t hd, float scale, int spans, float* ws, float* out, bool combine_v2,
               const L2Ahead* ahead) {
  MERE_CHECK(hd <= kMaxHd && nh % nkv == 0, "cuda attention", "unsupported heads ", nh, "/", nkv, " head_dim ", hd);
  dim3 grid(static_cast<unsigned>(nh), static_cast<unsigned>(spans), static_cast<unsigned>(T));
  launch("attn_split_kernel", attn_split_kernel, grid, kThreads, 0, s, q, kc, vc, pos, static_cast<int>(nh),
         static_cast<int>(nkv), static_cast<int>(hd), scale, ws);
  launch_combine(s, ws, static_cast<int>(nh), static_cast<int>(hd), spans, T, out, combine_v2, ahead);
}

bool attention_gqa_supported(int64_t nh, int64_t nkv, int64_t hd) {
  return nkv >= 1 && nh % nkv == 0 && nh / nkv <= kGqaMaxG && (hd == 64 || hd == 128 || hd == kGqaMaxHd);
}

void attention_gqa(cudaStream_t s, const float* q, const float* kc, const float* vc, const int32_t* pos, int64_t T,
                   int64_t nh, int64_t nkv, int64_t hd, float scale, int spans, float* ws, float* out,
                   bool combine_v2, const L2Ahead* ahead) {
  MERE_CHECK(nkv >= 1 && nh % nkv == 0 && nh / nkv <= kGqaMaxG, "cuda attention (MERE_CUDA_ATTN=gqa)",
             "unsupported heads: ", nh, " query heads over ", nkv, " KV heads (", nkv >= 1 ? nh / nkv : 0,
             " a KV head); the GQA kernel takes at most ", kGqaMaxG, " query heads a KV head");
  MERE_CHECK(hd == 64 || hd == 128 || hd == kGqaMaxHd, "cuda attention (MERE_CUDA_ATTN=gqa)", "head_dim ", hd,
             " unsupported: expected 64, 128 or ", kGqaMaxHd);
  const int G = static_cast<int>(nh / nkv), inh = static_cast<int>(nh), inkv = static_cast<int>(nkv);
  dim3 grid(static_cast<unsigned>(nkv), static_cast<unsigned>(spans), static_cast<unsigned>(T));
  if (hd == 64) launch_gqa_g<64>(G, s, grid, q, kc, vc, pos, inh, inkv, scale, ws);
  else if (hd == 128) launch_gqa_g<128>(G, s, grid, q, kc, vc, pos, inh, inkv, scale, ws);
  else launch_gqa_g<256>(G, s, grid, q, kc, vc, pos, inh, inkv, scale, ws);
  launch_combine(s, ws, inh, static_cast<int>(hd), spans, T, out, combine_v2, ahead);
}

bool sigmoid_gate(cudaStream_t s, float* out, const float* qg, int64_t T, int64_t nh, int64_t hd, uint16_t* xq) {
  const int64_t n = T * nh * hd;
  if ((nh * hd) % 8 != 0) xq = nullptr;
  launch("sigmoid_gate_kernel", sigmoid_gate_kernel, static_cast<unsigned>((n + 255) / 256), 256, 0, s, out, qg,
         static_cast<int>(nh), static_cast<int>(hd), n, xq);
  return xq != nullptr;
}

}  // namespace mere::cuda::k
