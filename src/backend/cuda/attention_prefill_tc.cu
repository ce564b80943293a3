// Prefill attention on the tensor cores (attention_prefill.h, attention_prefill_tc). Why: the SIMT
// kernel (attention_prefill.cu) runs at ~17 TFLOP/s, ~190 us a layer at T = 512 (27B 24/4 heads,
// 35B-A3B 16/2): 5% of a 27B prompt and 7% of a 35B-A3B prompt (docs/cuda-kernels.md "attention
// prefill v2").
//
// Rows: the G query heads of one kv head share every key, so the (position t, head g) pairs of a kv
// head are one flattened row space i = t G + g; a warp takes 16 consecutive rows, a block 4 warps (64
// rows) of one kv head. Per tile of 16 keys the block stages K and V into shared memory and each warp
// runs FlashAttention-2's loop on mma.m16n8k16: S = Q K^T (16 k-steps of head dims), an online
// softmax on S's C fragments, O += P V (P's C fragments are the A fragments of the next mma, no
// shuffle), O (16 x 256 fp32) in registers.
//
// Numerics: fp32 operands as bf16 pairs, x = hi + lo (hi = bf16(x), lo = bf16(x - hi): ~16 bits),
// and each product as lo_a hi_b + hi_a lo_b + hi_a hi_b (the lo lo term, ~2^-16 relative, dropped);
// the tensor cores add in fp32. q is scaled by scale * log2(e) before the split, so the softmax is
// exp2 of score differences. Every row's result depends only on its own query and the keys, whatever
// T or the other rows (the same k-steps in the same order).
#include <cuda_bf16.h>

#include "backend/cuda/attention_prefill.h"
#include "backend/cuda/async_copy.cuh"  // smem_u32
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/launch.cuh"

namespace mere::cuda {
namespace {

constexpr int kHd = 256;                   // head dim
constexpr int kWarps = 4, kRowsWarp = 16;  // a block: 4 warps x 16 rows
constexpr int kBlockRows = kWarps * kRowsWarp;
constexpr int kKeys = 16;                  // keys a tile
// bf16 row stride of every shared array: 256 + 8 elements (528 bytes), so the 8 rows one ldmatrix
// phase reads start 16 bytes apart in the banks (conflict-free)
constexpr int kStride = kHd + 8;
constexpr int kQBytes = kBlockRows * kStride * 2;  // one of Q hi / Q lo
constexpr int kTBytes = kKeys * kStride * 2;       // one of K hi / K lo / V hi / V lo
constexpr int kSmem = 2 * kQBytes + 4 * kTBytes;   // 101,376 bytes: 2 blocks an SM

__device__ __forceinline__ void split(float x, __nv_bfloat16& hi, __nv_bfloat16& lo) {
  hi = __float2bfloat16_rn(x);
  lo = __float2bfloat16_rn(x - __bfloat162float(hi));
}

// 4 floats -> 4 bf16 hi at dst_hi, 4 bf16 lo at dst_lo (8 bytes each)
__device__ __forceinline__ void store_split4(float4 v, __nv_bfloat16* dst_hi, __nv_bfloat16* dst_lo) {
  __nv_bfloat16 h[4], l[4];
  split(v.x, h[0], l[0]);
  split(v.y, h[1], l[1]);
  split(v.z, h[2], l[2]);
  split(v.w, h[3], l[3]);
  uint2 uh, ul;
  uh.x = static_cast<uint32_t>(__bfloat16_as_ushort(h[0])) | static_cast<uint32_t>(__bfloat16_as_ushort(h[1])) << 16;
  uh.y = static_cast<uint32_t>(__bfloat16_as_ushort(h[2])) | static_cast<uint32_t>(__bfloat16_as_ushort(h[3])) << 16;
  ul.x = static_cast<uint32_t>(__bfloat16_as_ushort(l[0])) | static_cast<uint32_t>(__bfloat16_as_ushort(l[1])) << 16;
  ul.y = static_cast<uint32_t>(__bfloat16_as_ushort(l[2])) | static_cast<uint32_t>(__bfloat16_as_ushort(l[3])) << 16;
  *reinterpret_cast<uint2*>(dst_hi) = uh;
  *reinterpret_cast<uint2*>(dst_lo) = ul;
}

// 4 consecutive elements of a K or V row as floats (f32 or bf16 cache)
template <bool BF16>
__device__ __forceinline__ float4 load4(const void* base, size_t elem) {
  if constexpr (BF16) {
    const uint2 u = *reinterpret_cast<const uint2*>(static_cast<const uint16_t*>(base) + elem);
    return make_float4(__uint_as_float(u.x << 16), __uint_as_float(u.x & 0xFFFF0000u), __uint_as_float(u.y << 16),
                       __uint_as_float(u.y & 0xFFFF0000u));
  } else {
    return *reinterpret_cast<const float4*>(static_cast<const float*>(base) + elem);
  }
}

__device__ __forceinline__ void ldsm_x4(uint32_t addr, uint32_t (&r)[4]) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldsm_x4_trans(uint32_t addr, uint32_t (&r)[4]) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
// c += a (16x16, row) * b (16x8, col), bf16 in, fp32 accumulate
__device__ __forceinline__ void mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
// c += (a_hi + a_lo)(b_hi + b_lo) less the lo lo term, small terms first
__device__ __forceinline__ void mma3(float (&c)[4], const uint32_t (&ah)[4], const uint32_t (&al)[4], uint32_t bh0,
                                     uint32_t bh1, uint32_t bl0, uint32_t bl1) {
  mma(c, al, bh0, bh1);
  mma(c, ah, bl0, bl1);
  mma(c, ah, bh0, bh1);
}
__device__ __forceinline__ uint32_t pack_bf16(float lo_elem, float hi_elem) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo_elem, hi_elem);  // .x (low half) = lo_elem
  return *reinterpret_cast<const uint32_t*>(&v);
}

template <bool BF16>
__global__ void __launch_bounds__(kWarps * 32, 2)
    attention_prefill_tc_kernel(const float* __restrict__ q, const void* __restrict__ k, const void* __restrict__ v, int T,
                                int pos0, int nkv, int G, float qscale, float* __restrict__ out) {
  pdl_begin();
  extern __shared__ __align__(16) unsigned char smem[];
  __nv_bfloat16* const qh = reinterpret_cast<__nv_bfloat16*>(smem);  // [64][kStride]
  __nv_bfloat16* const ql = qh + kBlockRows * kStride;
  __nv_bfloat16* const kh_s = ql + kBlockRows * kStride;             // [16][kStride] each
  __nv_bfloat16* const kl_s = kh_s + kKeys * kStride;
  __nv_bfloat16* const vh_s = kl_s + kKeys * kStride;
  __nv_bfloat16* const vl_s = vh_s + kKeys * kStride;
  const int tid = threadIdx.x, lane = tid & 31, w = tid >> 5, g = lane >> 2, t4 = lane & 3;
  const int rows = T * G;                                  // flattened rows of one kv head
  const int nrb = (rows + kBlockRows - 1) / kBlockRows;
  const int rb = nrb - 1 - static_cast<int>(blockIdx.x) / nkv;  // latest (heaviest) row blocks first
  const int kvh = static_cast<int>(blockIdx.x) % nkv;
  const int nh = nkv * G;
  const int r0 = rb * kBlockRows;
  // the last key a flattened row sees (rows past the end: the last real row's)
  auto limit = [&](int i) { return pos0 + min(i, rows - 1) / G; };

  // Q rows of the block, scaled, as hi / lo bf16
  for (int c = tid; c < kBlockRows * (kHd / 4); c += kWarps * 32) {
    const int r = c / (kHd / 4), d4 = c % (kHd / 4), i = r0 + r;
    float4 x = make_float4(0.f, 0.f, 0.f, 0.f);
    if (i < rows) {
      const int t = i / G, hq = kvh * G + i % G;
      x = *reinterpret_cast<const float4*>(q + (static_cast<size_t>(t) * nh + hq) * kHd + d4 * 4);
      x.x *= qscale, x.y *= qscale, x.z *= qscale, x.w *= qscale;
    }
    store_split4(x, qh + r * kStride + d4 * 4, ql + r * kStride + d4 * 4);
  }

  const int wr0 = r0 + w * kRowsWarp;                 // the warp's first row
  const int lim_a = limit(wr0 + g), lim_b = limit(wr0 + g + 8);
  const int warp_last = limit(wr0 + kRowsWarp - 1);   // the warp's last key
  const int block_last = limit(r0 + kBlockRows - 1);
  const int ntiles = block_last / kKeys + 1;
  const int kv_len = pos0 + T;                         // keys in the cache

  float o[kHd / 8][4];
#pragma unroll
  for (int n = 0; n < kHd / 8; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
  float m_a = -INFINITY, m_b = -INFINITY, l_a = 0.0f, l_b = 0.0f;

  // ldmatrix lane addresses (byte offsets): Q A fragments (rows r + 8 (m & 1), cols 8 (m >> 1)),
  // K B fragments (keys r + 8 (m >> 1), dims 8 (m & 1)), V B fragments via .trans (keys r + 8 (m & 1),
  // dims 8 (m >> 1)); m = lane / 8, r = lane % 8
  const int lm = lane >> 3, lr = lane & 7;
  const uint32_t q_off = static_cast<uint32_t>(((w * kRowsWarp + lr + 8 * (lm & 1)) * kStride + 8 * (lm >> 1)) * 2);
  const uint32_t k_off = static_cast<uint32_t>(((lr + 8 * (lm >> 1)) * kStride + 8 * (lm & 1)) * 2);
  const uint32_t v_off = static_cast<uint32_t>(((lr + 8 * (lm & 1)) * kStride + 8 * (lm >> 1)) * 2);
  const uint32_t qh_a = smem_u32(qh) + q_off, ql_a = smem_u32(ql) + q_off;
  const uint32_t kh_a = smem_u32(kh_s) + k_off, kl_a = smem_u32(kl_s) + k_off;
  const uint32_t vh_a = smem_u32(vh_s) + v_off, vl_a = smem_u32(vl_s) + v_off;

  for (int tile = 0; tile < ntiles; ++tile) {
    const int j0 = tile * kKeys;
    __syncthreads();  // the previous tile's K / V reads are done (and Q is in, the first time)
    // 8 float4 of K and 8 of V a thread, all loaded before any is split and stored: a tile costs one
    // L2 round trip, not eight (ptxas: no spills at 252 registers)
    constexpr int kPer = kKeys * (kHd / 4) / (kWarps * 32), kBatch = 8;
    static_assert(kPer % kBatch == 0, "whole batches");
#pragma unroll
    for (int b0 = 0; b0 < kPer; b0 += kBatch) {
      float4 kx[kBatch], vx[kBatch];
#pragma unroll
      for (int u = 0; u < kBatch; ++u) {
        const int c = tid + (b0 + u) * kWarps * 32, j = c / (kHd / 4), d4 = c % (kHd / 4);
        // keys past the cache read its last key (no branch around the loads) and are zeroed below
        const size_t e = (static_cast<size_t>(min(j0 + j, kv_len - 1)) * nkv + kvh) * kHd + d4 * 4;
        kx[u] = load4<BF16>(k, e);
        vx[u] = load4<BF16>(v, e);
      }
#pragma unroll
      for (int u = 0; u < kBatch; ++u) {
        const int j = (tid + (b0 + u) * kWarps * 32) / (kHd / 4);
        if (j0 + j >= kv_len) kx[u] = vx[u] = make_float4(0.f, 0.f, 0.f, 0.f);
      }
#pragma unroll
      for (int u = 0; u < kBatch; ++u) {
        const int c = tid + (b0 + u) * kWarps * 32, j = c / (kHd / 4), d4 = c % (kHd / 4);
        store_split4(kx[u], kh_s + j * kStride + d4 * 4, kl_s + j * kStride + d4 * 4);
        store_split4(vx[u], vh_s + j * kStride + d4 * 4, vl_s + j * kStride + d4 * 4);
      }
    }
    __syncthreads();
    if (j0 > warp_last) continue;  // warp-uniform: no key of this tile is visible to the warp's rows

    // S = Q K^T: n-tile nt = keys j0 + 8 nt .. + 7
    float s[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
#pragma unroll 4
    for (int ks = 0; ks < kHd / 16; ++ks) {
      uint32_t ah[4], al[4], bh[4], bl[4];
      ldsm_x4(qh_a + ks * 32, ah);
      ldsm_x4(ql_a + ks * 32, al);
      ldsm_x4(kh_a + ks * 32, bh);
      ldsm_x4(kl_a + ks * 32, bl);
      mma3(s[0], ah, al, bh[0], bh[1], bl[0], bl[1]);
      mma3(s[1], ah, al, bh[2], bh[3], bl[2], bl[3]);
    }
    // mask (key j visible to a row iff j <= its limit), then the online softmax of rows g (a) and
    // g + 8 (b): C fragment element e of n-tile nt is (row g + 8 (e >> 1), key j0 + 8 nt + 2 t4 + (e & 1))
    float mx_a = -INFINITY, mx_b = -INFINITY;
#pragma unroll
    for (int nt = 0; nt < 2; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int j = j0 + 8 * nt + 2 * t4 + (e & 1);
        const bool vis = j <= ((e >> 1) ? lim_b : lim_a);
        s[nt][e] = vis ? s[nt][e] : -INFINITY;
        if (e >> 1) mx_b = fmaxf(mx_b, s[nt][e]);
        else mx_a = fmaxf(mx_a, s[nt][e]);
      }
#pragma unroll
    for (int off = 1; off <= 2; off <<= 1) {
      mx_a = fmaxf(mx_a, __shfl_xor_sync(0xffffffffu, mx_a, off));
      mx_b = fmaxf(mx_b, __shfl_xor_sync(0xffffffffu, mx_b, off));
    }
    // a row with no visible key yet keeps m = -inf and adds nothing (its p are exp2(-inf) = 0)
    const float mn_a = fmaxf(m_a, mx_a), mn_b = fmaxf(m_b, mx_b);
    const float base_a = mn_a == -INFINITY ? 0.0f : mn_a, base_b = mn_b == -INFINITY ? 0.0f : mn_b;
    const float corr_a = exp2f(m_a - base_a), corr_b = exp2f(m_b - base_b);  // exp2(-inf) = 0 the first time
    m_a = mn_a, m_b = mn_b;
    float p[2][4];
    float sum_a = 0.0f, sum_b = 0.0f;
#pragma unroll
    for (int nt = 0; nt < 2; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        p[nt][e] = exp2f(s[nt][e] - ((e >> 1) ? base_b : base_a));
        if (e >> 1) sum_b += p[nt][e];
        else sum_a += p[nt][e];
      }
    l_a = fmaf(l_a, corr_a, sum_a);
    l_b = fmaf(l_b, corr_b, sum_b);
    if (__any_sync(0xffffffffu, corr_a != 1.0f || corr_b != 1.0f)) {  // no row's max moved: nothing to rescale
#pragma unroll
      for (int n = 0; n < kHd / 8; ++n) {
        o[n][0] *= corr_a, o[n][1] *= corr_a;
        o[n][2] *= corr_b, o[n][3] *= corr_b;
      }
    }
    // P as A fragments (k = the tile's 16 keys), hi and lo
    uint32_t ph[4], pl[4];
    {
      float lo[2][4];
#pragma unroll
      for (int nt = 0; nt < 2; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) lo[nt][e] = p[nt][e] - __bfloat162float(__float2bfloat16_rn(p[nt][e]));
      ph[0] = pack_bf16(p[0][0], p[0][1]), ph[1] = pack_bf16(p[0][2], p[0][3]);
      ph[2] = pack_bf16(p[1][0], p[1][1]), ph[3] = pack_bf16(p[1][2], p[1][3]);
      pl[0] = pack_bf16(lo[0][0], lo[0][1]), pl[1] = pack_bf16(lo[0][2], lo[0][3]);
      pl[2] = pack_bf16(lo[1][0], lo[1][1]), pl[3] = pack_bf16(lo[1][2], lo[1][3]);
    }
    // O += P V: n-tiles of 8 head dims, two a ldmatrix
#pragma unroll
    for (int dp = 0; dp < kHd / 16; ++dp) {
      uint32_t bh[4], bl[4];
      ldsm_x4_trans(vh_a + dp * 32, bh);
      ldsm_x4_trans(vl_a + dp * 32, bl);
      mma3(o[2 * dp], ph, pl, bh[0], bh[1], bl[0], bl[1]);
      mma3(o[2 * dp + 1], ph, pl, bh[2], bh[3], bl[2], bl[3]);
    }
  }

  // the row sums (each lane holds a quarter of every row's keys), then the stores
#pragma unroll
  for (int off = 1; off <= 2; off <<= 1) {
    l_a += __shfl_xor_sync(0xffffffffu, l_a, off);
    l_b += __shfl_xor_sync(0xffffffffu, l_b, off);
  }
  const float inv_a = 1.0f / l_a, inv_b = 1.0f / l_b;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int i = wr0 + g + 8 * half;
    if (i >= rows) continue;
    const int tq = i / G, hq = kvh * G + i % G;
    float* dst = out + (static_cast<size_t>(tq) * nh + hq) * kHd + 2 * t4;
    const float inv = half ? inv_b : inv_a;
#pragma unroll
    for (int n = 0; n < kHd / 8; ++n)
      *reinterpret_cast<float2*>(dst + 8 * n) = make_float2(o[n][2 * half] * inv, o[n][2 * half + 1] * inv);
  }
}

}  // namespace

void attention_prefill_tc(CudaDevice& dev, const float* q, const void* k, const void* v, KvType kv, int64_t T,
                          int64_t pos0, int64_t nh, int64_t nkv, int64_t hd, float scale, float* out) {
  attention_prefill_check_args(T, pos0, nh, nkv, hd, "cuda attention_prefill_tc");
  MERE_CHECK(T * (nh / nkv) < (int64_t{1} << 30), "cuda attention_prefill_tc", "T x heads a kv head too large: ",
             T * (nh / nkv));
  DeviceGuard guard(dev.ordinal());
  const int G = static_cast<int>(nh / nkv), Ti = static_cast<int>(T), nk = static_cast<int>(nkv);
  const int blocks = (Ti * G + kBlockRows - 1) / kBlockRows * nk;
  const float qscale = scale * 1.4426950408889634f;  // log2(e): the softmax runs on exp2
  auto* kernel = kv == KvType::BF16 ? &attention_prefill_tc_kernel<true> : &attention_prefill_tc_kernel<false>;
  // set on every call (cheap), as gemm.cu does: the attribute belongs to the current device, so a
  // process-wide once-flag would leave a second GPU without it
  MERE_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
  cuda::launch("attention_prefill_tc_kernel", kernel, blocks, kWarps * 32, kSmem, dev.stream(), q, k, v, Ti,
               static_cast<int>(pos0), nk, G, qscale, out);
}

}  // namespace mere::cuda
