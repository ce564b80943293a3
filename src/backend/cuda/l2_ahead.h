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

namespace mere::cuda {

struct L2Ahead {
  static constexpr int kSpans = 12;  // up to 4 matrices of a multi-matrix launch: codes, scales, biases
  const char* p[kSpans] = {};
  uint64_t bytes[kSpans] = {};
  int n = 0;  // spans in use (0: nothing asked)
};

#if defined(__CUDACC__)
// Block b of the grid asks for bytes [bytes * b / nb, bytes * (b + 1) / nb) of every span, thread s of
// the block for span s (constant indices only, so `a` stays in the parameter bank), rounded inward to
// 16 bytes (the bulk prefetch's alignment): at most 15 bytes at each share's ends are not asked for.
__device__ __forceinline__ void l2_ahead(const L2Ahead& a) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const int tid = static_cast<int>(threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z));
  if (tid >= a.n) return;
  const uint64_t nb = static_cast<uint64_t>(gridDim.x) * gridDim.y * gridDim.z;
  const uint64_t b = blockIdx.x + static_cast<uint64_t>(gridDim.x) * (blockIdx.y + static_cast<uint64_t>(gridDim.y) * blockIdx.z);
#pragma unroll
  for (int s = 0; s < L2Ahead::kSpans; ++s) {
    if (s != tid) continue;
    const uint64_t b0 = a.bytes[s] * b / nb, b1 = a.bytes[s] * (b + 1) / nb;
    const uintptr_t lo = (reinterpret_cast<uintptr_t>(a.p[s]) + b0 + 15u) & ~uintptr_t{15};
    const uintptr_t hi = (reinterpret_cast<uintptr_t>(a.p[s]) + b1) & ~uintptr_t{15};
    if (hi > lo)
      asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" ::"l"(lo), "r"(static_cast<uint32_t>(hi - lo))
                   : "memory");
  }
#endif
}
#endif

}  // namespace mere::cuda
