// Weights a later launch of the same pass will read, asked of the L2 by the blocks of an earlier,
// short launch (MERE_CUDA_L2_AHEAD; docs/cuda-kernels.md §5.22). A decode step alternates DRAM-bound
// matvecs with chains of small kernels (the GDN conv / step / gated norm, the attention pieces, the
// MoE router / experts) during which the DRAM is mostly idle; the matvec after such a chain then reads
// its first bytes only once its own blocks have landed (qmatvec_int's prefetch before its PDL wait).
// Here a kernel in the chain, right after its own PDL wait (the previous matvec's stream is done) and
// after asking for its own inputs, asks the L2 for the later matrix: every block its share of each
// span (`cp.async.bulk.prefetch.L2`: no registers, nothing to wait for). Weights are written by no
// kernel, so reading them at any time is allowed by launch.cuh's contract. A hint: no value changes.
#pragma once
#include <cstdint>

#if defined(__CUDACC__)
#define MERE_L2_FN __host__ __device__ __forceinline__
#else
#define MERE_L2_FN inline
#endif

namespace mere::cuda {

// The 16-byte-aligned part [lo, hi) of share b of nb of the byte range [p, p + bytes): the shares
// [bytes * b / nb, bytes * (b + 1) / nb) cover the range once; each is rounded inward (the bulk
// prefetch's alignment), so at most 15 bytes at each share's ends are not asked for, and nothing outside
// the range ever is (hi <= lo: nothing). Host-callable: tests/unit/l2_ahead_test.cpp checks it.
struct L2Share {
  uint64_t lo, hi;
};
MERE_L2_FN L2Share l2_share(uint64_t p, uint64_t bytes, uint64_t b, uint64_t nb) {
  const uint64_t b0 = bytes * b / nb, b1 = bytes * (b + 1) / nb;
  return L2Share{(p + b0 + 15u) & ~uint64_t{15}, (p + b1) & ~uint64_t{15}};
}

struct L2Ahead {
  static constexpr int kSpans = 12;  // up to 4 matrices of a multi-matrix launch: codes, scales, biases
  const char* p[kSpans] = {};
  uint64_t bytes[kSpans] = {};
  int n = 0;  // spans in use (0: nothing asked)
};

#if defined(__CUDACC__)
// Block b of the grid asks for its share (l2_share) of every span, thread s of the block for span s
// (constant indices only, so `a` stays in the parameter bank).
__device__ __forceinline__ void l2_ahead(const L2Ahead& a) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const int tid = static_cast<int>(threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z));
  if (tid >= a.n) return;
  const uint64_t nb = static_cast<uint64_t>(gridDim.x) * gridDim.y * gridDim.z;
  const uint64_t b = blockIdx.x + static_cast<uint64_t>(gridDim.x) * (blockIdx.y + static_cast<uint64_t>(gridDim.y) * blockIdx.z);
#pragma unroll
  for (int s = 0; s < L2Ahead::kSpans; ++s) {
    if (s != tid) continue;
    const L2Share sh = l2_share(reinterpret_cast<uintptr_t>(a.p[s]), a.bytes[s], b, nb);
    if (sh.hi > sh.lo)
      asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" ::"l"(sh.lo), "r"(static_cast<uint32_t>(sh.hi - sh.lo))
                   : "memory");
  }
#endif
}
#endif

}  // namespace mere::cuda
