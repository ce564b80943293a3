// Prefill attention (attention_prefill.h). Block = (kv head, 8 query positions), G warps (one a
// query head of the group), each warp 8 rows (the 8 positions). Per 32-key tile: lane j scores key
// j for the 8 rows (K row j from shared memory, padded to 260 floats so float4 reads are conflict
// free; q rows broadcast), online softmax per row (max across the warp, per-lane running sums reduced
// once at the end), P through shared memory, then lane l accumulates output columns 4l..4l+3 and
// 128+4l..128+4l+3 for the 8 rows.
#include "backend/cuda/attention_prefill.h"

#include <cuda_bf16.h>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/launch.cuh"

namespace mere::cuda {
namespace {

constexpr int kHd = 256, kKeys = 32, kRows = 8, kKStride = kHd + 4;

template <int G>
constexpr int smem_floats() {
  return G * kRows * kHd + kKeys * kKStride + kKeys * kHd + G * kRows * kKeys;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
  return v;
}
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

template <bool BF16>
__device__ __forceinline__ void load8(const void* base, size_t elem, float4& a, float4& b) {
  if constexpr (BF16) {
    const uint4 u = *reinterpret_cast<const uint4*>(static_cast<const uint16_t*>(base) + elem);
    a = make_float4(__uint_as_float(u.x << 16), __uint_as_float(u.x & 0xFFFF0000u), __uint_as_float(u.y << 16),
                    __uint_as_float(u.y & 0xFFFF0000u));
    b = make_float4(__uint_as_float(u.z << 16), __uint_as_float(u.z & 0xFFFF0000u), __uint_as_float(u.w << 16),
                    __uint_as_float(u.w & 0xFFFF0000u));
  } else {
    const float4* p = reinterpret_cast<const float4*>(static_cast<const float*>(base) + elem);
    a = p[0];
    b = p[1];
  }
}

template <int G, bool BF16>
__global__ void __launch_bounds__(G * 32) attention_prefill_kernel(const float* __restrict__ q, const void* __restrict__ k,
                                                                   const void* __restrict__ v, int T, int pos0, int nkv,
                                                                   float scale, float* __restrict__ out) {
  pdl_begin();
  extern __shared__ __align__(16) float sm[];
  float* qs = sm;                              // [G][kRows][256], pre-scaled
  float* ks = qs + G * kRows * kHd;            // [32][260]
  float* vs = ks + kKeys * kKStride;           // [32][256]
  float* ps = vs + kKeys * kHd;                // [G][kRows][32]
  constexpr int NT = G * 32;
  const int tid = threadIdx.x, lane = tid & 31, w = tid >> 5;
  const int nqt = (T + kRows - 1) / kRows;
  // heaviest (latest) query tiles first
  const int qt = nqt - 1 - static_cast<int>(blockIdx.x / nkv);
  const int kh = static_cast<int>(blockIdx.x % nkv);
  const int nh = nkv * G;
  const int t0 = qt * kRows;
  const int rows = min(kRows, T - t0);

  // q rows of the group: [G][rows][256]
  for (int c = tid; c < G * kRows * (kHd / 4); c += NT) {
    const int d4 = c % (kHd / 4), r = (c / (kHd / 4)) % kRows, gh = c / (kRows * kHd / 4);
    float4 val = make_float4(0.f, 0.f, 0.f, 0.f);
    if (r < rows) {
      val = *reinterpret_cast<const float4*>(q + (static_cast<size_t>(t0 + r) * nh + kh * G + gh) * kHd + d4 * 4);
      val.x *= scale;
      val.y *= scale;
      val.z *= scale;
      val.w *= scale;
    }
    *reinterpret_cast<float4*>(qs + (gh * kRows + r) * kHd + d4 * 4) = val;
  }

  float o[kRows][8];
  float mrow[kRows], lsum[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    mrow[r] = -INFINITY;
    lsum[r] = 0.0f;
#pragma unroll
    for (int c = 0; c < 8; ++c) o[r][c] = 0.0f;
  }
  const int last_key = pos0 + t0 + rows - 1;  // inclusive
  const int ntiles = last_key / kKeys + 1;
  const float* qw = qs + w * kRows * kHd;
  float* pw = ps + w * kRows * kKeys;

  for (int tile = 0; tile < ntiles; ++tile) {
    const int j0 = tile * kKeys;
    __syncthreads();  // previous tile's K/V (and, first time, q) use finished / q visible below
    for (int c = tid; c < kKeys * (kHd / 8); c += NT) {
      const int j = c / (kHd / 8), d8 = c % (kHd / 8);
      float4 a = make_float4(0.f, 0.f, 0.f, 0.f), b = a, va = a, vb = a;
      if (j0 + j <= last_key) {
        const size_t e = (static_cast<size_t>(j0 + j) * nkv + kh) * kHd + d8 * 8;
        load8<BF16>(k, e, a, b);
        load8<BF16>(v, e, va, vb);
      }
      *reinterpret_cast<float4*>(ks + j * kKStride + d8 * 8) = a;
      *reinterpret_cast<float4*>(ks + j * kKStride + d8 * 8 + 4) = b;
      *reinterpret_cast<float4*>(vs + j * kHd + d8 * 8) = va;
      *reinterpret_cast<float4*>(vs + j * kHd + d8 * 8 + 4) = vb;
    }
    __syncthreads();
    // scores: lane = key
    float sc[kRows];
#pragma unroll
    for (int r = 0; r < kRows; ++r) sc[r] = 0.0f;
    const float* kr = ks + lane * kKStride;
#pragma unroll 4
    for (int d4 = 0; d4 < kHd / 4; ++d4) {
      const float4 kv = *reinterpret_cast<const float4*>(kr + d4 * 4);
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        const float4 qv = *reinterpret_cast<const float4*>(qw + r * kHd + d4 * 4);
        sc[r] = fmaf(qv.x, kv.x, sc[r]);
        sc[r] = fmaf(qv.y, kv.y, sc[r]);
        sc[r] = fmaf(qv.z, kv.z, sc[r]);
        sc[r] = fmaf(qv.w, kv.w, sc[r]);
      }
    }
    const int j = j0 + lane;
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const bool valid = r < rows && j <= pos0 + t0 + r;
      const float s = valid ? sc[r] : -INFINITY;
      const float mt = warp_max(s);
      const float mn = fmaxf(mrow[r], mt);
      const float corr = mrow[r] == -INFINITY ? 0.0f : expf(mrow[r] - mn);
      const float p = valid ? expf(s - mn) : 0.0f;
      mrow[r] = mn;
      lsum[r] = fmaf(lsum[r], corr, p);
      pw[r * kKeys + lane] = p;
#pragma unroll
      for (int c = 0; c < 8; ++c) o[r][c] *= corr;
    }
    __syncwarp();
    // o += P V: lane owns columns 4*lane..+3 and 128+4*lane..+3
#pragma unroll 2
    for (int j4 = 0; j4 < kKeys / 4; ++j4) {
      float4 pr[kRows];
#pragma unroll
      for (int r = 0; r < kRows; ++r) pr[r] = *reinterpret_cast<const float4*>(pw + r * kKeys + j4 * 4);
#pragma unroll
      for (int jj = 0; jj < 4; ++jj) {
        const float4 va = *reinterpret_cast<const float4*>(vs + (j4 * 4 + jj) * kHd + 4 * lane);
        const float4 vb = *reinterpret_cast<const float4*>(vs + (j4 * 4 + jj) * kHd + 128 + 4 * lane);
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
          const float pj = jj == 0 ? pr[r].x : jj == 1 ? pr[r].y : jj == 2 ? pr[r].z : pr[r].w;
          o[r][0] = fmaf(pj, va.x, o[r][0]);
          o[r][1] = fmaf(pj, va.y, o[r][1]);
          o[r][2] = fmaf(pj, va.z, o[r][2]);
          o[r][3] = fmaf(pj, va.w, o[r][3]);
          o[r][4] = fmaf(pj, vb.x, o[r][4]);
          o[r][5] = fmaf(pj, vb.y, o[r][5]);
          o[r][6] = fmaf(pj, vb.z, o[r][6]);
          o[r][7] = fmaf(pj, vb.w, o[r][7]);
        }
      }
    }
    __syncwarp();
  }
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const float l = warp_sum(lsum[r]);
    if (r < rows) {
      const float inv = 1.0f / l;
      float* dst = out + (static_cast<size_t>(t0 + r) * nh + kh * G + w) * kHd;
      *reinterpret_cast<float4*>(dst + 4 * lane) = make_float4(o[r][0] * inv, o[r][1] * inv, o[r][2] * inv, o[r][3] * inv);
      *reinterpret_cast<float4*>(dst + 128 + 4 * lane) =
          make_float4(o[r][4] * inv, o[r][5] * inv, o[r][6] * inv, o[r][7] * inv);
    }
  }
}

template <int G>
void launch(CudaDevice& dev, const float* q, const void* k, const void* v, KvType kv, int T, int pos0, int nkv,
            float scale, float* out) {
  constexpr int smem = smem_floats<G>() * 4;
  const int blocks = ((T + kRows - 1) / kRows) * nkv;
  if (kv == KvType::BF16) {
    MERE_CUDA_CHECK(cudaFuncSetAttribute(attention_prefill_kernel<G, true>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    cuda::launch("attention_prefill_kernel", &attention_prefill_kernel<G, true>, blocks, G * 32, smem, dev.stream(), q,
                 k, v, T, pos0, nkv, scale, out);
  } else {
    MERE_CUDA_CHECK(cudaFuncSetAttribute(attention_prefill_kernel<G, false>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    cuda::launch("attention_prefill_kernel", &attention_prefill_kernel<G, false>, blocks, G * 32, smem, dev.stream(),
                 q, k, v, T, pos0, nkv, scale, out);
  }
}

}  // namespace

void attention_prefill_check_args(int64_t T, int64_t pos0, int64_t nh, int64_t nkv, int64_t hd, const char* where) {
  MERE_CHECK(hd == kHd, where, "head_dim: expected 256, got ", hd);
  MERE_CHECK(nkv >= 1 && nh % nkv == 0 && nh / nkv >= 1 && nh / nkv <= 8, where,
             "heads: expected nh a multiple of nkv with nh / nkv in 1..8, got nh = ", nh, ", nkv = ", nkv);
  MERE_CHECK(T >= 1 && pos0 >= 0 && (pos0 + T) * nkv * kHd < (int64_t{1} << 40) && pos0 + T < (int64_t{1} << 30), where,
             "T / pos0 out of range, got T = ", T, ", pos0 = ", pos0);
}

void attention_prefill(CudaDevice& dev, const float* q, const void* k, const void* v, KvType kv, int64_t T,
                       int64_t pos0, int64_t nh, int64_t nkv, int64_t hd, float scale, float* out) {
  attention_prefill_check_args(T, pos0, nh, nkv, hd, "cuda attention_prefill");
  DeviceGuard guard(dev.ordinal());
  const int G = static_cast<int>(nh / nkv), Ti = static_cast<int>(T), p0 = static_cast<int>(pos0),
            nk = static_cast<int>(nkv);
  switch (G) {
    case 1: launch<1>(dev, q, k, v, kv, Ti, p0, nk, scale, out); break;
    case 2: launch<2>(dev, q, k, v, kv, Ti, p0, nk, scale, out); break;
    case 3: launch<3>(dev, q, k, v, kv, Ti, p0, nk, scale, out); break;
    case 4: launch<4>(dev, q, k, v, kv, Ti, p0, nk, scale, out); break;
    case 5: launch<5>(dev, q, k, v, kv, Ti, p0, nk, scale, out); break;
    case 6: launch<6>(dev, q, k, v, kv, Ti, p0, nk, scale, out); break;
    case 7: launch<7>(dev, q, k, v, kv, Ti, p0, nk, scale, out); break;
    default: launch<8>(dev, q, k, v, kv, Ti, p0, nk, scale, out); break;
  }
}

}  // namespace mere::cuda
