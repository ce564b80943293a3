// Embedding gather, RMSNorm with strides, elementwise ops, the generic (float / gathered-expert)
// matvec and argmax. kernels.h has the contracts.
#include <cooperative_groups.h>
#include <cuda_bf16.h>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/engine/k_math.cuh"
#include "backend/cuda/engine/k_norm.cuh"
#include "backend/cuda/engine/kernels.h"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/qmatvec_prep.cuh"

namespace mere::cuda::k {
namespace {

namespace cg = cooperative_groups;

inline unsigned blocks(int64_t n, int threads) { return static_cast<unsigned>((n + threads - 1) / threads); }
__device__ __forceinline__ float bf(uint16_t b) { return __uint_as_float(static_cast<uint32_t>(b) << 16); }

__global__ void embed_kernel(const void* data, const uint16_t* scales, const uint16_t* biases, int bits, bool is_bf16,
                             const int32_t* ids, int H, float* out) {
  pdl_begin();
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  const int t = blockIdx.y;
  if (c >= H) return;
  const int64_t r = ids[t];
  float v;
  if (bits) {
    const int per = 32 / bits;
    const uint32_t* row = static_cast<const uint32_t*>(data) + r * (H / per);
    const uint32_t q = (row[c / per] >> ((c % per) * bits)) & ((1u << bits) - 1u);
    const int64_t g = r * (H / 64) + c / 64;
    v = __fmaf_rn(bf(scales[g]), static_cast<float>(q), bf(biases[g]));
  } else if (is_bf16) {
    v = bf(static_cast<const uint16_t*>(data)[r * H + c]);
  } else {
    v = static_cast<const float*>(data)[r * H + c];
  }
  out[static_cast<int64_t>(t) * H + c] = v;
}

// PREP = 4 or 8: after the row is written, the block prepares it as qmatvec's input at that bit
// width (qmatvec_prep.cuh) into L; 0: no prepare.
// Columns [c0, c1) (multiples of 64; the whole row: 0, L.cols).
template <int PREP>
__device__ __forceinline__ void prepare_tail(const float* yr, const prep::Layout& L, int c0, int c1) {
  if constexpr (PREP != 0) {
    __syncthreads();  // the row was written by every thread of the block: read it back from L2
    prep::prepare_block<PREP>([yr](int c) { return __ldcg(yr + c); }, static_cast<int>(blockIdx.x), c0, c1, L);
  }
}

template <int PREP>
__global__ void __launch_bounds__(kNormThreads)
    rms_norm_kernel(float* x, int64_t xs, const float* __restrict__ add, const float* __restrict__ w, int n,
                    float eps, float* y, int64_t ys, prep::Layout L) {
  pdl_begin_producer(L.early);
  float* xr = x + blockIdx.x * xs;
  float* yr = y + blockIdx.x * ys;
  float ss = 0.0f;
  if (add) {  // fused residual add: x += add (row stride n), then the norm of the sum
    const float* ar = add + static_cast<int64_t>(blockIdx.x) * n;
    for (int i = threadIdx.x; i < n; i += kNormThreads) {
      const float v = __fadd_rn(xr[i], ar[i]);
      xr[i] = v;
      ss = __fmaf_rn(v, v, ss);
    }
  } else {
    for (int i = threadIdx.x; i < n; i += kNormThreads) ss = __fmaf_rn(xr[i], xr[i], ss);
  }
  const float r = row_inv_rms(ss, n, eps);
  for (int i = threadIdx.x; i < n; i += kNormThreads) yr[i] = __fmul_rn(__fmul_rn(xr[i], r), w[i]);
  prepare_tail<PREP>(yr, L, 0, L.cols);
}

// Vectorised form for rows of n % 4 == 0, n <= kNormMaxV4 * 4 * kNormThreads, 16-byte aligned
// rows: one pass over x (float4 loads kept in registers), then the scaled store. Thread i owns
// float4 units i, i + 256, ...; its sum of squares runs over them in order (fma chain, lanes x, y,
// z, w), then the same warp butterfly and in-order sum of the 8 warp partials as the scalar kernel.
// Each row depends on its own values only (batch-width invariant).
// Split (gridDim.y = nb > 1, PREP only, n % 64 == 0): the nb blocks of a row form a cluster; each
// computes the row's norm exactly as above (the whole row, same order, same bits), then, after a
// cluster barrier (every block has read x before any block writes it), writes x, y and the
// prepared input of its own groups [ng*b/nb, ng*(b+1)/nb) only. v1 prepared a 5120-wide row with
// one block of 256 threads: ~8 us a launch, 1.03 ms of a 27B decode step (ncu, session 8).
// XQ (prefill): y is also written rounded to bf16 into xq [T, n] in qgemm_prepare_x's layout (each 8
// columns as {0,4,1,5,2,6,3,7}; the same round-to-nearest), so the GEMMs of this input need no
// prepare launch: bitwise rms_norm then qgemm_prepare_x.
constexpr int kNormMaxV4 = 8;  // n <= 8192
template <int PREP, bool XQ = false>
__global__ void __launch_bounds__(kNormThreads)
    rms_norm_v4_kernel(float* x, int64_t xs, const float* __restrict__ add, const float* __restrict__ w, int n,
                       float eps, float* y, int64_t ys, prep::Layout L, uint16_t* __restrict__ xq, bool w_early) {
  const float4* wr = reinterpret_cast<const float4*>(w);
  const int n4 = n / 4;
  const int nb = static_cast<int>(gridDim.y), b = static_cast<int>(blockIdx.y);
  int u0 = 0, u1 = n4;  // float4 units this block writes
  if (nb > 1) {
    const int ng = n / 64;
    u0 = ng * b / nb * 16, u1 = ng * (b + 1) / nb * 16;
  }
  float4 wv[kNormMaxV4];
  if (w_early) load_w_units(wr, u0, u1, wv);  // weights only, before the wait (MERE_CUDA_NORM_W)
  pdl_begin_producer(L.early);
  float4* xr = reinterpret_cast<float4*>(x + blockIdx.x * xs);
  float4* yr = reinterpret_cast<float4*>(y + blockIdx.x * ys);
  const float4* ar = add ? reinterpret_cast<const float4*>(add + static_cast<int64_t>(blockIdx.x) * n) : nullptr;
  float4 v[kNormMaxV4];
  const float r = row_inv_rms(load_units_sumsq(xr, ar, n4, v), n, eps);
  if (nb > 1) cg::this_cluster().sync();
#pragma unroll
  for (int k = 0; k < kNormMaxV4; ++k) {
    const int i = threadIdx.x + k * kNormThreads;
    if (i < n4 && i >= u0 && i < u1) {
      if (ar) xr[i] = v[k];
      const float4 o = norm_unit(v[k], r, w_early ? wv[k] : wr[i]);
      yr[i] = o;
      if constexpr (XQ) {
        // units 2m (columns a = 8m..8m+3) and 2m + 1 (b = 8m+4..8m+7) sit in adjacent lanes (n % 128 == 0
        // keeps the branch warp-uniform); the group's bf16 are {a.x, b.x, a.y, b.y | a.z, b.z, a.w, b.w}:
        // the even lane stores the first 8 bytes, the odd lane the last 8, each with 2 values of the other
        const bool odd = i & 1;
        const float r0 = __shfl_xor_sync(0xffffffffu, odd ? o.x : o.z, 1);
        const float r1 = __shfl_xor_sync(0xffffffffu, odd ? o.y : o.w, 1);
        const __nv_bfloat162 p0 = odd ? __floats2bfloat162_rn(r0, o.z) : __floats2bfloat162_rn(o.x, r0);
        const __nv_bfloat162 p1 = odd ? __floats2bfloat162_rn(r1, o.w) : __floats2bfloat162_rn(o.y, r1);
        uint2 pair;
        pair.x = *reinterpret_cast<const uint32_t*>(&p0), pair.y = *reinterpret_cast<const uint32_t*>(&p1);
        *reinterpret_cast<uint2*>(xq + static_cast<int64_t>(blockIdx.x) * n + 8 * (i >> 1) + 4 * odd) = pair;
      }
    }
  }
  prepare_tail<PREP>(reinterpret_cast<const float*>(yr), L, 4 * u0, 4 * u1);
}

bool norm_v4_ok(const void* x, int64_t xs, const void* add, const void* w, int64_t n, const void* y, int64_t ys) {
  auto al = [](const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; };
  return n % 4 == 0 && n <= int64_t{kNormMaxV4} * 4 * kNormThreads && xs % 4 == 0 && ys % 4 == 0 && al(x) &&
         al(y) && al(w) && (add == nullptr || al(add));
}

__global__ void add_kernel(float* x, const float* y, int64_t n) {
  pdl_begin();
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) x[i] = __fadd_rn(x[i], y[i]);
}

__global__ void swiglu_kernel(float* g, const float* u, int64_t n) {
  pdl_begin();
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) g[i] = __fmul_rn(silu(g[i]), u[i]);
}

// warp per (p, r); lane order fixed: chunks j = lane, lane+32, ..., then an xor butterfly
constexpr int kGemvWarps = 4;
template <int BITS>
__global__ void __launch_bounds__(kGemvWarps * 32)
    gemv_q_kernel(const uint32_t* __restrict__ codes, const uint16_t* __restrict__ scales,
                  const uint16_t* __restrict__ biases, int rows, int cols, const float* __restrict__ x, int x_div,
                  const int32_t* __restrict__ sel, float* __restrict__ y) {
  pdl_begin();
  constexpr int kPer = 128 / BITS;  // columns in a 16-byte chunk
  const int lane = threadIdx.x & 31;
  const int r = blockIdx.x * kGemvWarps + (threadIdx.x >> 5);
  const int p = blockIdx.y;
  if (r >= rows) return;
  const int64_t m = sel ? sel[p] : 0;
  const int64_t row = m * rows + r;
  const uint4* cr = reinterpret_cast<const uint4*>(codes + row * (cols * BITS / 32));
  const uint16_t* sr = scales + row * (cols / 64);
  const uint16_t* br = biases + row * (cols / 64);
  const float* xr = x + static_cast<int64_t>(p / x_div) * cols;
  float acc = 0.0f;
  for (int j = lane; j < cols / kPer; j += 32) {
    const uint4 w4 = __ldg(cr + j);
    const int g = j * kPer / 64;
    const float s = bf(sr[g]), b = bf(br[g]);
    const uint32_t w[4] = {w4.x, w4.y, w4.z, w4.w};
    const float* xc = xr + j * kPer;
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int e = 0; e < 32 / BITS; ++e) {
        const float q = static_cast<float>((w[i] >> (e * BITS)) & ((1u << BITS) - 1u));
        acc = __fmaf_rn(__fmaf_rn(s, q, b), xc[i * (32 / BITS) + e], acc);
      }
  }
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) acc = __fadd_rn(acc, __shfl_xor_sync(0xffffffffu, acc, off));
  if (lane == 0) y[static_cast<int64_t>(p) * rows + r] = acc;
}

template <bool BF16>
__global__ void __launch_bounds__(kGemvWarps * 32)
    gemv_f_kernel(const void* __restrict__ data, int rows, int cols, const float* __restrict__ x, int x_div,
                  const int32_t* __restrict__ sel, float* __restrict__ y) {
  pdl_begin();
  const int lane = threadIdx.x & 31;
  const int r = blockIdx.x * kGemvWarps + (threadIdx.x >> 5);
  const int p = blockIdx.y;
  if (r >= rows) return;
  const int64_t m = sel ? sel[p] : 0;
  const int64_t row = (m * rows + r) * cols;
  const float* xr = x + static_cast<int64_t>(p / x_div) * cols;
  float acc = 0.0f;
  for (int c = lane; c < cols; c += 32) {
    const float w = BF16 ? bf(static_cast<const uint16_t*>(data)[row + c]) : static_cast<const float*>(data)[row + c];
    acc = __fmaf_rn(w, xr[c], acc);
  }
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) acc = __fadd_rn(acc, __shfl_xor_sync(0xffffffffu, acc, off));
  if (lane == 0) y[static_cast<int64_t>(p) * rows + r] = acc;
}

constexpr int kArgThreads = 1024;
// One block a row (the result is one id; a second launch would cost more than it saves at V ~ 250k).
// Thread i scans float4 units i, i + 1024, ... in increasing index order, keeping the first of
// equal maxima (strict >); NaN never wins; -inf wins only when nothing else was seen. The block
// reduction prefers the larger value, then the lower index: the lowest index of the maximum.
__device__ __forceinline__ void arg_take(float x, int i, float& best, int& idx, int n) {
  if (x > best || (idx == n && x == best)) best = x, idx = i;
}
// Merges another candidate (ov, oi) into (best, idx): the larger value, then the lower index; oi = n
// (nothing seen) never wins. A total order, so any merge order gives the same id.
__device__ __forceinline__ void arg_merge(float ov, int oi, float& best, int& idx, int n) {
  if (oi < n && (idx == n || ov > best || (ov == best && oi < idx))) best = ov, idx = oi;
}
// The block's (best, idx) into thread 0's registers (warp butterflies, then warp 0 over the warps);
// THREADS = blockDim.x, at most 1024.
template <int THREADS>
__device__ __forceinline__ void arg_block_reduce(float& best, int& idx, int n) {
  __shared__ float bv[THREADS / 32];
  __shared__ int bi[THREADS / 32];
#pragma unroll
  for (int off = 16; off > 0; off >>= 1)
    arg_merge(__shfl_xor_sync(0xffffffffu, best, off), __shfl_xor_sync(0xffffffffu, idx, off), best, idx, n);
  if ((threadIdx.x & 31) == 0) bv[threadIdx.x >> 5] = best, bi[threadIdx.x >> 5] = idx;
  __syncthreads();
  if (threadIdx.x < 32) {
    best = -INFINITY, idx = n;
    if (threadIdx.x < THREADS / 32) best = bv[threadIdx.x], idx = bi[threadIdx.x];
#pragma unroll
    for (int off = 16; off > 0; off >>= 1)
      arg_merge(__shfl_xor_sync(0xffffffffu, best, off), __shfl_xor_sync(0xffffffffu, idx, off), best, idx, n);
  }
}
__global__ void __launch_bounds__(kArgThreads) argmax_kernel(const float* __restrict__ v, int n, int32_t* out) {
  pdl_begin();
  v += static_cast<int64_t>(blockIdx.x) * n;  // row blockIdx.x of [rows, n]
  out += blockIdx.x;
  float best = -INFINITY;
  int idx = n;  // n: nothing seen (all NaN / -inf)
  const bool vec = (reinterpret_cast<uintptr_t>(v) & 15u) == 0;
  const int n4 = vec ? n / 4 : 0;
  const float4* v4 = reinterpret_cast<const float4*>(v);
  constexpr int kIlp = 4;
  for (int base = threadIdx.x; base < n4; base += kArgThreads * kIlp) {
    float4 q[kIlp];
#pragma unroll
    for (int u = 0; u < kIlp; ++u) {
      const int i = base + u * kArgThreads;
      q[u] = i < n4 ? __ldg(v4 + i) : make_float4(NAN, NAN, NAN, NAN);
    }
#pragma unroll
    for (int u = 0; u < kIlp; ++u) {
      const int i = 4 * (base + u * kArgThreads);
      arg_take(q[u].x, i, best, idx, n);
      arg_take(q[u].y, i + 1, best, idx, n);
      arg_take(q[u].z, i + 2, best, idx, n);
      arg_take(q[u].w, i + 3, best, idx, n);
    }
  }
  for (int i = 4 * n4 + threadIdx.x; i < n; i += kArgThreads) arg_take(v[i], i, best, idx, n);
  arg_block_reduce<kArgThreads>(best, idx, n);
  if (threadIdx.x == 0) *out = idx < n ? idx : 0;
}


// Argmax v2 (MERE_CUDA_ARGMAX=split, the default): a row of ~250k logits is 1 MB, which one block of
// v1 reads at ~35 GB/s (s24c trace: 26-30 µs a decode step, as long as a whole MoE layer). Here
// ceil(V / kSplitSpan) blocks a row each scan a contiguous span (float4 loads, kSplitIlp in flight a
// thread), reduce it with v1's rules, and store (value, index); the last block of the row to finish
// (a ticket counter, reset by that block for the next launch) reduces the partials. The order of
// the reduction does not matter: "larger value, then lower index, NaN never, -inf only when nothing
// else was seen" is a total order on the candidates, so the id is v1's for every input. Measured (H100,
// s26): 20.9 µs a step in sequence against v1's 26.3, 35B-A3B decode +0.35%.
constexpr int kSplitThreads = 256, kSplitIlp = 4;
constexpr int kSplitSpan = kSplitThreads * kSplitIlp * 4;  // floats a block scans

// grid (nb, rows): block b of row r scans floats [b * kSplitSpan, (b + 1) * kSplitSpan) of row r.
// part: [>= rows, nb] (value, index as float bits); ticket: [>= rows], zero between launches.
__global__ void __launch_bounds__(kSplitThreads) argmax_split_kernel(const float* __restrict__ v, int n,
                                                                     float2* __restrict__ part, unsigned* ticket,
                                                                     int32_t* out) {
  pdl_begin();
  const int nb = static_cast<int>(gridDim.x), row = static_cast<int>(blockIdx.y);
  v += static_cast<int64_t>(row) * n;
  const int b0 = static_cast<int>(blockIdx.x) * kSplitSpan, b1 = min(n, b0 + kSplitSpan);
  float best = -INFINITY;
  int idx = n;
  if ((reinterpret_cast<uintptr_t>(v) & 15u) == 0 && b1 - b0 == kSplitSpan) {  // a whole aligned span
    const float4* v4 = reinterpret_cast<const float4*>(v + b0);
    float4 q[kSplitIlp];
#pragma unroll
    for (int u = 0; u < kSplitIlp; ++u) q[u] = __ldg(v4 + threadIdx.x + u * kSplitThreads);
#pragma unroll
    for (int u = 0; u < kSplitIlp; ++u) {
      const int i = b0 + 4 * (static_cast<int>(threadIdx.x) + u * kSplitThreads);
      arg_take(q[u].x, i, best, idx, n);
      arg_take(q[u].y, i + 1, best, idx, n);
      arg_take(q[u].z, i + 2, best, idx, n);
      arg_take(q[u].w, i + 3, best, idx, n);
    }
  } else {  // the row's last, partial span, or an unaligned row
    for (int i = b0 + static_cast<int>(threadIdx.x); i < b1; i += kSplitThreads) arg_take(__ldg(v + i), i, best, idx, n);
  }
  arg_block_reduce<kSplitThreads>(best, idx, n);
  __shared__ bool last;
  if (threadIdx.x == 0) {
    __stcg(part + static_cast<int64_t>(row) * nb + blockIdx.x, make_float2(best, __int_as_float(idx)));
    __threadfence();  // the partial, before the ticket that may let the last block read it
    last = atomicAdd(ticket + row, 1u) == static_cast<unsigned>(nb - 1);
  }
  __syncthreads();
  if (!last || threadIdx.x >= 32) return;
  __threadfence();
  best = -INFINITY, idx = n;
  for (int b = static_cast<int>(threadIdx.x); b < nb; b += 32) {
    const float2 p = __ldcg(part + static_cast<int64_t>(row) * nb + b);
    arg_merge(p.x, __float_as_int(p.y), best, idx, n);
  }
#pragma unroll
  for (int off = 16; off > 0; off >>= 1)
    arg_merge(__shfl_xor_sync(0xffffffffu, best, off), __shfl_xor_sync(0xffffffffu, idx, off), best, idx, n);
  if (threadIdx.x == 0) {
    out[row] = idx < n ? idx : 0;
    ticket[row] = 0;  // for the next launch (stream order: nothing else reads it before then)
  }
}

}  // namespace

void embed(cudaStream_t s, const DMat& E, const int32_t* ids, int64_t T, float* out) {
  MERE_CHECK(!E.tiled, "cuda embed", "the embedding must be in the MLX layout, got a tiled matrix");
  dim3 grid(blocks(E.cols, 256), static_cast<unsigned>(T));
  launch("embed_kernel", embed_kernel, grid, 256, 0, s, E.data, E.scales, E.biases, E.bits, E.bf16, ids,
         static_cast<int>(E.cols), out);
}

namespace {
template <int PREP>
void launch_norm(cudaStream_t s, float* x, int64_t xs, const float* add, const float* w, int64_t T, int64_t n, float eps,
                 float* y, int64_t ys, const prep::Layout& L) {
  // prepared rows of decode / verification: a cluster of 8 blocks a row (see rms_norm_v4_kernel)
  const unsigned nb = PREP != 0 && T <= 16 && n % 64 == 0 && n / 64 >= 8 ? 8u : 1u;
  if (norm_v4_ok(x, xs, add, w, n, y, ys))
    launch_cluster("rms_norm_v4_kernel", &rms_norm_v4_kernel<PREP>, dim3(static_cast<unsigned>(T), nb),
                   dim3(kNormThreads), dim3(1, nb, 1), 0, s, x, xs, add, w, static_cast<int>(n), eps, y, ys, L,
                   nullptr, norm_w_early());
  else
    launch("rms_norm_kernel", &rms_norm_kernel<PREP>, static_cast<unsigned>(T), kNormThreads, 0, s, x, xs, add, w,
           static_cast<int>(n), eps, y, ys, L);
}
}  // namespace

void rms_norm(cudaStream_t s, const float* x, int64_t xs, const float* w, int64_t T, int64_t n, float eps, float* y,
              int64_t ys) {
  launch_norm<0>(s, const_cast<float*>(x), xs, nullptr, w, T, n, eps, y, ys, {});
}

void add_rms_norm(cudaStream_t s, float* x, const float* o, const float* w, int64_t T, int64_t n, float eps, float* y) {
  launch_norm<0>(s, x, n, o, w, T, n, eps, y, n, {});
}

void rms_norm_prep(cudaStream_t s, float* x, const float* add, const float* w, int64_t T, int64_t n, float eps, float* y,
                   int bits, float* ws) {
  MERE_CHECK((bits == 4 || bits == 8) && n % 64 == 0, "rms_norm_prep", "expected 4 or 8 bits and a width divisible by 64, got ",
             bits, " bits, width ", n);
  const prep::Layout L = prep::producer_layout(ws, T, n, bits);
  if (bits == 4) launch_norm<4>(s, x, n, add, w, T, n, eps, y, n, L);
  else launch_norm<8>(s, x, n, add, w, T, n, eps, y, n, L);
}

bool rms_norm_xq(cudaStream_t s, float* x, const float* add, const float* w, int64_t T, int64_t n, float eps, float* y,
                 uint16_t* xq) {
  if (!norm_v4_ok(x, n, add, w, n, y, n) || n % 128 != 0) return false;
  launch("rms_norm_v4_kernel (bf16 X)", &rms_norm_v4_kernel<0, true>, dim3(static_cast<unsigned>(T), 1u),
         dim3(kNormThreads), 0, s, x, n, add, w, static_cast<int>(n), eps, y, n, prep::Layout{}, xq, norm_w_early());
  return true;
}

void add(cudaStream_t s, float* x, const float* y, int64_t n) {
  launch("add_kernel", add_kernel, blocks(n, 256), 256, 0, s, x, y, n);
}

void swiglu(cudaStream_t s, float* g, const float* u, int64_t n) {
  launch("swiglu_kernel", swiglu_kernel, blocks(n, 256), 256, 0, s, g, u, n);
}

void gemv(cudaStream_t s, const DMat& W, const float* x, int64_t P, int64_t x_div, const int32_t* sel, float* y) {
  MERE_CHECK(P >= 1 && P < 65536, "cuda gemv", "pair count out of range: ", P);
  MERE_CHECK(!W.tiled, "cuda gemv", "tiled weights run on qmatvec / qgemm only");
  dim3 grid(blocks(W.rows, kGemvWarps), static_cast<unsigned>(P));
  const int rows = static_cast<int>(W.rows), cols = static_cast<int>(W.cols), xd = static_cast<int>(x_div);
  if (W.bits == 4)
    launch("gemv_q_kernel<4>", &gemv_q_kernel<4>, grid, kGemvWarps * 32, 0, s, static_cast<const uint32_t*>(W.data),
           W.scales, W.biases, rows, cols, x, xd, sel, y);
  else if (W.bits == 8)
    launch("gemv_q_kernel<8>", &gemv_q_kernel<8>, grid, kGemvWarps * 32, 0, s, static_cast<const uint32_t*>(W.data),
           W.scales, W.biases, rows, cols, x, xd, sel, y);
  else if (W.bf16)
    launch("gemv_f_kernel<bf16>", &gemv_f_kernel<true>, grid, kGemvWarps * 32, 0, s, W.data, rows, cols, x, xd, sel, y);
  else
    launch("gemv_f_kernel<f32>", &gemv_f_kernel<false>, grid, kGemvWarps * 32, 0, s, W.data, rows, cols, x, xd, sel, y);
}

namespace {
int64_t split_blocks(int64_t V) { return (V + kSplitSpan - 1) / kSplitSpan; }  // blocks a row of the split form

int64_t ticket_floats(int64_t rows) { return (rows + 1) / 2 * 2; }  // the tickets, padded for float2 partials
}  // namespace

int64_t argmax_split_floats(int64_t V, int64_t rows) { return ticket_floats(rows) + rows * 2 * split_blocks(V); }

void argmax(cudaStream_t s, const float* logits, int64_t V, int32_t* out, int64_t rows, const ArgmaxWs& ws) {
  MERE_CHECK(V >= 1 && V <= INT32_MAX / 2 && rows >= 1 && rows <= 65535, "cuda argmax", "rows ", rows, " of ", V,
             " logits");
  if (ws.data == nullptr) {
    launch("argmax_kernel", argmax_kernel, static_cast<unsigned>(rows), kArgThreads, 0, s, logits,
           static_cast<int>(V), out);
    return;
  }
  MERE_CHECK(rows <= ws.rows, "cuda argmax", rows, " rows, but the split workspace holds ", ws.rows);
  const int64_t nb = split_blocks(V);
  auto* ticket = reinterpret_cast<unsigned*>(ws.data);
  auto* part = reinterpret_cast<float2*>(ws.data + ticket_floats(ws.rows));
  launch("argmax_split_kernel", argmax_split_kernel, dim3(static_cast<unsigned>(nb), static_cast<unsigned>(rows)),
         kSplitThreads, 0, s, logits, static_cast<int>(V), part, ticket, out);
}

}  // namespace mere::cuda::k
