// Split-K decode attention kernels (attention.h). Partial kernel, 128 threads: scores with one
// position per thread (K rows streamed 16 bytes at a time, q broadcast from shared memory), fp32
// softmax statistics per query head, then V rows read whole by a warp (8 dims a lane) and the four
// warps' sums added in warp order. Combine kernel: one block per query head, spans merged in order.
// Tried (docs/cuda-kernels.md, attention v2): 8 lanes a position with coalesced K reads; faster on
// f32 caches, slower on bf16 ones (too few loads in flight), so this one-position-a-thread pass stays.
#include "backend/cuda/attention.h"

#include <cuda_bf16.h>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/launch.cuh"

namespace mere::cuda {
namespace {

constexpr int kHD = 256;
constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
constexpr size_t kSmemLimit = 48 * 1024;

__device__ __forceinline__ void unpack(const uint4& r, float* f, float) {
  f[0] = __uint_as_float(r.x);
  f[1] = __uint_as_float(r.y);
  f[2] = __uint_as_float(r.z);
  f[3] = __uint_as_float(r.w);
}
__device__ __forceinline__ void unpack(const uint4& r, float* f, __nv_bfloat16) {
  const uint32_t w[4] = {r.x, r.y, r.z, r.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    f[2 * i] = __uint_as_float(w[i] << 16);
    f[2 * i + 1] = __uint_as_float(w[i] & 0xFFFF0000u);
  }
}

template <typename KV, int G>
__global__ void __launch_bounds__(kThreads)
    attn_partial_kernel(const float* __restrict__ q, const KV* __restrict__ k, const KV* __restrict__ v, int len,
                        int nkv, float scale, int span, int nsplit, float* __restrict__ part_o,
                        float* __restrict__ part_ml) {
  pdl_begin();
  constexpr int VE = 16 / static_cast<int>(sizeof(KV));  // elements per 16-byte load
  constexpr int KB = 8;                                  // loads in flight per thread (K pass)
  extern __shared__ float smem[];
  float* qs = smem;              // [G][256]
  float* sc = qs + G * kHD;      // [G][span] scores, then probabilities
  float* ob = sc + G * span;     // [G][256] block sum of the warps' o
  const int kvh = blockIdx.x, split = blockIdx.y;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int p0 = split * span;
  const int n = min(len - p0, span);

  for (int i = tid; i < G * kHD; i += kThreads) qs[i] = q[static_cast<size_t>(kvh) * G * kHD + i];
  __syncthreads();

  // scores: one position per thread
  for (int pp = tid; pp < n; pp += kThreads) {
    const KV* kr = k + (static_cast<size_t>(p0 + pp) * nkv + kvh) * kHD;
    float acc[G];
#pragma unroll
    for (int g = 0; g < G; ++g) acc[g] = 0.0f;
#pragma unroll
    for (int c0 = 0; c0 < kHD; c0 += VE * KB) {
      uint4 raw[KB];
#pragma unroll
      for (int b = 0; b < KB; ++b) raw[b] = __ldg(reinterpret_cast<const uint4*>(kr + c0 + b * VE));
#pragma unroll
      for (int b = 0; b < KB; ++b) {
        float kf[VE];
        unpack(raw[b], kf, KV{});
#pragma unroll
        for (int g = 0; g < G; ++g) {
#pragma unroll
          for (int e = 0; e < VE; e += 4) {
            const float4 qv = *reinterpret_cast<const float4*>(qs + g * kHD + c0 + b * VE + e);
            acc[g] = __fmaf_rn(qv.x, kf[e], acc[g]);
            acc[g] = __fmaf_rn(qv.y, kf[e + 1], acc[g]);
            acc[g] = __fmaf_rn(qv.z, kf[e + 2], acc[g]);
            acc[g] = __fmaf_rn(qv.w, kf[e + 3], acc[g]);
          }
        }
      }
    }
#pragma unroll
    for (int g = 0; g < G; ++g) sc[g * span + pp] = __fmul_rn(acc[g], scale);
  }
  __syncthreads();

  // softmax statistics (fp32), probabilities written back in place
  for (int g = warp; g < G; g += kWarps) {
    float m = -INFINITY;
    for (int i = lane; i < n; i += 32) m = fmaxf(m, sc[g * span + i]);
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
    float l = 0.0f;
    for (int i = lane; i < n; i += 32) {
      const float p = expf(__fsub_rn(sc[g * span + i], m));
      sc[g * span + i] = p;
      l = __fadd_rn(l, p);
    }
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) l = __fadd_rn(l, __shfl_xor_sync(0xffffffffu, l, off));
    if (lane == 0) {
      float* ml = part_ml + ((static_cast<size_t>(kvh) * nsplit + split) * G + g) * 2;
      ml[0] = m;
      ml[1] = l;
    }
  }
  __syncthreads();

  // o = sum_j p_j v_j: warp w takes positions w, w+4, ...; lane owns dims lane*8 .. lane*8+7
  float o[G][8];
#pragma unroll
  for (int g = 0; g < G; ++g)
#pragma unroll
    for (int d = 0; d < 8; ++d) o[g][d] = 0.0f;
  constexpr int VB = 4;  // rows in flight per warp
  for (int pb = warp; pb < n; pb += kWarps * VB) {
    float vf[VB][8];
#pragma unroll
    for (int b = 0; b < VB; ++b) {
      const int pp = pb + b * kWarps;
      if (pp < n) {
        const KV* vr = v + (static_cast<size_t>(p0 + pp) * nkv + kvh) * kHD + lane * 8;
#pragma unroll
        for (int e = 0; e < 8; e += VE) unpack(__ldg(reinterpret_cast<const uint4*>(vr + e)), &vf[b][e], KV{});
      }
    }
#pragma unroll
    for (int b = 0; b < VB; ++b) {
      const int pp = pb + b * kWarps;
      if (pp < n) {
#pragma unroll
        for (int g = 0; g < G; ++g) {
          const float p = sc[g * span + pp];
#pragma unroll
          for (int d = 0; d < 8; ++d) o[g][d] = __fmaf_rn(p, vf[b][d], o[g][d]);
        }
      }
    }
  }
  for (int w = 0; w < kWarps; ++w) {
    if (warp == w) {
#pragma unroll
      for (int g = 0; g < G; ++g)
#pragma unroll
        for (int d = 0; d < 8; ++d) {
          float* dst = ob + g * kHD + lane * 8 + d;
          *dst = (w == 0) ? o[g][d] : __fadd_rn(*dst, o[g][d]);
        }
    }
    __syncthreads();
  }
  float* po = part_o + (static_cast<size_t>(kvh) * nsplit + split) * G * kHD;
  for (int i = tid; i < G * kHD; i += kThreads) po[i] = ob[i];
}

// out[h, d] = sum_s e^(m_s - M) o_s[d] / sum_s e^(m_s - M) l_s, spans in order
__global__ void __launch_bounds__(kHD)
    attn_combine_kernel(const float* __restrict__ part_o, const float* __restrict__ part_ml, int nsplit, int G,
                        float* __restrict__ out) {
  pdl_begin();
  const int h = blockIdx.x, d = threadIdx.x;
  const int kvh = h / G, g = h - kvh * G;
  float M = -INFINITY;
  for (int s = 0; s < nsplit; ++s) M = fmaxf(M, part_ml[((static_cast<size_t>(kvh) * nsplit + s) * G + g) * 2]);
  float L = 0.0f, acc = 0.0f;
  for (int s = 0; s < nsplit; ++s) {
    const size_t idx = (static_cast<size_t>(kvh) * nsplit + s) * G + g;
    const float f = expf(__fsub_rn(part_ml[idx * 2], M));
    L = __fmaf_rn(part_ml[idx * 2 + 1], f, L);
    acc = __fmaf_rn(part_o[idx * kHD + d], f, acc);
  }
  out[static_cast<size_t>(h) * kHD + d] = __fdiv_rn(acc, L);
}

size_t smem_bytes(int G, int span) { return static_cast<size_t>(2 * G * kHD + G * span) * sizeof(float); }

// Positions per block: 128, doubled while there are more than 4 blocks per SM and shared memory allows.
int choose_span(int64_t len, int64_t nkv, int G, int sms) {
  int span = 128;
  while (nkv * ((len + span - 1) / span) > 4 * static_cast<int64_t>(sms) && smem_bytes(G, span * 2) <= kSmemLimit)
    span *= 2;
  return span;
}

template <typename KV>
using PartialFn = void (*)(const float*, const KV*, const KV*, int, int, float, int, int, float*, float*);

template <typename KV>
PartialFn<KV> pick(int G) {
  switch (G) {
    case 1: return &attn_partial_kernel<KV, 1>;
    case 2: return &attn_partial_kernel<KV, 2>;
    case 4: return &attn_partial_kernel<KV, 4>;
    case 6: return &attn_partial_kernel<KV, 6>;
    case 8: return &attn_partial_kernel<KV, 8>;
    case 16: return &attn_partial_kernel<KV, 16>;
    default: return nullptr;
  }
}

template <typename KV>
void launch(CudaDevice& dev, const float* q, const void* k, const void* v, int len, int nh, int nkv, float scale,
            float* ws, float* out) {
  const int G = nh / nkv;
  PartialFn<KV> fn = pick<KV>(G);
  MERE_CHECK(fn != nullptr, "cuda attention_decode",
             "query heads per kv head: expected one of 1, 2, 4, 6, 8, 16, got ", G);
  const int span = choose_span(len, nkv, G, dev.sm_count());
  const int nsplit = (len + span - 1) / span;
  float* part_o = ws;
  float* part_ml = ws + static_cast<size_t>(nkv) * nsplit * G * kHD;
  const size_t smem = smem_bytes(G, span);
  MERE_CHECK(smem <= kSmemLimit, "cuda attention_decode", "shared memory: expected <= ", kSmemLimit, " bytes, got ", smem);
  cuda::launch("attn_partial_kernel", fn, dim3(static_cast<unsigned>(nkv), static_cast<unsigned>(nsplit)), kThreads,
               smem, dev.stream(), q, static_cast<const KV*>(k), static_cast<const KV*>(v), len, nkv, scale, span,
               nsplit, part_o, part_ml);
  cuda::launch("attn_combine_kernel", attn_combine_kernel, static_cast<unsigned>(nh), kHD, 0, dev.stream(), part_o,
               part_ml, nsplit, G, out);
}

}  // namespace

int64_t attention_decode_workspace_floats(const CudaDevice& dev, int64_t len, int64_t nh, int64_t nkv) {
  MERE_CHECK(nkv >= 1 && nh % nkv == 0, "cuda attention_decode", "heads: expected nh a multiple of nkv, got nh = ", nh,
             ", nkv = ", nkv);
  const int G = static_cast<int>(nh / nkv);
  const int span = choose_span(len, nkv, G, dev.sm_count());
  const int64_t nsplit = (len + span - 1) / span;
  return nkv * nsplit * G * (kHD + 2);
}

void attention_decode(CudaDevice& dev, const float* q, const void* k, const void* v, KvType kv, int64_t len, int64_t nh,
                      int64_t nkv, int64_t hd, float scale, float* ws, float* out) {
  MERE_CHECK(hd == kHD, "cuda attention_decode", "head_dim: expected 256, got ", hd);
  MERE_CHECK(len >= 1 && len < (int64_t{1} << 31) / 4, "cuda attention_decode", "cache length out of range, got ", len);
  MERE_CHECK(nkv >= 1 && nh >= nkv && nh % nkv == 0, "cuda attention_decode",
             "heads: expected nh a positive multiple of nkv, got nh = ", nh, ", nkv = ", nkv);
  DeviceGuard guard(dev.ordinal());
  if (kv == KvType::F32)
    launch<float>(dev, q, k, v, static_cast<int>(len), static_cast<int>(nh), static_cast<int>(nkv), scale, ws, out);
  else
    launch<__nv_bfloat16>(dev, q, k, v, static_cast<int>(len), static_cast<int>(nh), static_cast<int>(nkv), scale, ws,
                          out);
}

}  // namespace mere::cuda
