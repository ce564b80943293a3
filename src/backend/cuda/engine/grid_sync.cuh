// A barrier across all blocks of one launch, for kernels whose blocks are all resident at once (the
// launcher sizes the grid from the occupancy: k_moe_block.cu). bar[0] counts the blocks arrived,
// bar[1] is the generation; both start at 0 (zeroed at allocation) and the barrier leaves the count at
// 0 again, so consecutive launches (a replayed graph included) reuse the same two words. Launches
// that use one barrier must not run concurrently (one stream a device: device.h).
#pragma once
#include <cuda_runtime.h>

namespace mere::cuda::k {
namespace {

__device__ __forceinline__ unsigned ld_acquire_gpu(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// Every thread of every block calls it; returns when all blocks have arrived, with every write made
// before the call by any block visible to every thread after it (read shared data with __ldcg: no L1
// line of it may predate the barrier).
__device__ __forceinline__ void grid_sync(unsigned* bar, unsigned nblocks) {
  __syncthreads();
  if (threadIdx.x == 0) {
    const unsigned gen = ld_acquire_gpu(bar + 1);  // before arriving: it cannot move until this block has
    __threadfence();                               // this block's writes, before its arrival
    if (atomicAdd(bar, 1u) == nblocks - 1) {
      atomicExch(bar, 0u);  // the last to arrive resets the count, then opens the next generation
      __threadfence();
      atomicAdd(bar + 1, 1u);
    } else {
      while (ld_acquire_gpu(bar + 1) == gen) __nanosleep(32);
    }
    __threadfence();
  }
  __syncthreads();
}

}  // namespace
}  // namespace mere::cuda::k
