// The stream-K fix-up shared by the wgmma prefill GEMMs (gemm_wgmma.cu v6b/v6c, gemm_wgmma_ws.cu
// v6d): a helper piece publishes its partial sums and raises its block's flag; the owner of a split
// tile waits for each helper's flag in block (= group) order, adds the parts in that order and
// lowers the flags, so every launch finds them zero (graph replays included). `nthreads` threads
// take part (thread t holds N accumulators and their slot ws[block][t]); `sync` is their barrier.
#pragma once
#include <cstdint>

#include "backend/cuda/wgemm_split.h"

namespace mere::cuda::wsplit {

template <int N, class Sync>
__device__ __forceinline__ void publish(float* __restrict__ ws, unsigned* __restrict__ flags, int block, int nthreads,
                                        int tid, const float (&d)[N], Sync&& sync) {
  float4* w = reinterpret_cast<float4*>(ws + (static_cast<int64_t>(block) * nthreads + tid) * N);
#pragma unroll
  for (int i = 0; i < N / 4; ++i) __stcg(w + i, make_float4(d[4 * i], d[4 * i + 1], d[4 * i + 2], d[4 * i + 3]));
  __threadfence();
  sync();
  if (tid == 0) asm volatile("st.release.gpu.global.u32 [%0], %1;\n" ::"l"(flags + block), "r"(1u) : "memory");
}

// Adds the parts of helper blocks [first, end) to d, in block order.
template <int N, class Sync>
__device__ __forceinline__ void gather(const float* __restrict__ ws, unsigned* __restrict__ flags, int first, int end,
                                       int nthreads, int tid, float (&d)[N], Sync&& sync) {
  for (int b = first; b < end; ++b) {
    if (tid == 0) {
      unsigned f = 0;
      do {
        asm volatile("ld.acquire.gpu.global.u32 %0, [%1];\n" : "=r"(f) : "l"(flags + b) : "memory");
      } while (f == 0);
    }
    sync();
    const float4* w = reinterpret_cast<const float4*>(ws + (static_cast<int64_t>(b) * nthreads + tid) * N);
#pragma unroll
    for (int i = 0; i < N / 4; ++i) {
      const float4 v = __ldcg(w + i);
      d[4 * i] += v.x, d[4 * i + 1] += v.y, d[4 * i + 2] += v.z, d[4 * i + 3] += v.w;
    }
    sync();  // every thread has read block b's part before its flag is lowered
    if (tid == 0) flags[b] = 0u;
  }
}

// The end of piece `pc` of block c (of P, I iterations, ng groups a tile): a helper piece (only ever
// the first of a block's range) publishes d; the owner adds its helpers' parts in group order and
// calls store(d).
template <int N, class Sync, class Store>
__device__ __forceinline__ void finish_piece(const Piece& pc, int64_t I, int P, int c, int ng, float* __restrict__ ws,
                                             unsigned* __restrict__ flags, int nthreads, int tid, float (&d)[N],
                                             Sync&& sync, Store&& store) {
  if (pc.k0 > 0) {
    publish(ws, flags, c, nthreads, tid, d, sync);
    return;
  }
  const int hend = pc.k1 < ng ? helpers_end(I, P, c, pc.tile, ng) : c + 1;
  gather(ws, flags, c + 1, hend, nthreads, tid, d, sync);
  store(d);
}

}  // namespace mere::cuda::wsplit
