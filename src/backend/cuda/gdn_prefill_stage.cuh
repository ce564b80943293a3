// The GatedDeltaNet prefill kernels' shared staging (gdn_prefill.cu, gdn_prefill_c4.cu): a block owns
// kRowsPerBlock rows of one value head's S and walks the tokens in chunks of kChunk, whose k, q (of the
// head's key head), v (the block's rows), g and beta are copied into shared memory with cp.async,
// double-buffered.
#pragma once
#include <cstddef>
#include <cstdint>

namespace mere::cuda::gdn_stage {

constexpr int kD = 128, kRowsPerBlock = 16, kChunk = 32;

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void cp16(void* dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem_u32(dst)), "l"(src));
}
__device__ __forceinline__ void cp4(void* dst, const void* src) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(smem_u32(dst)), "l"(src));
}

struct Stage {
  float k[kChunk][kD];
  float q[kChunk][kD];
  float v[kChunk][kRowsPerBlock];
  float g[kChunk];
  float beta[kChunk];
};

// Issues (and commits as one group) the copies of tokens t0 .. t0 + n - 1, n = min(kChunk, T - t0),
// into s; NT threads, tid this one's index. q, k: [T, Hk, kD]; v: [T, Hv, kD]; g, beta: [T, Hv].
template <int NT>
__device__ __forceinline__ void stage_chunk(Stage& s, int tid, int t0, int T, const float* q, const float* k,
                                            const float* v, const float* g, const float* beta, int Hk, int Hv,
                                            int kh, int h, int row0) {
  const int n = min(kChunk, T - t0);
  for (int c = tid; c < n * 32; c += NT) {
    const int t = c >> 5, j = c & 31;
    const size_t off = (static_cast<size_t>(t0 + t) * Hk + kh) * kD + j * 4;
    cp16(&s.k[t][j * 4], k + off);
    cp16(&s.q[t][j * 4], q + off);
  }
  for (int c = tid; c < n * 4; c += NT) {
    const int t = c >> 2, j = c & 3;
    cp16(&s.v[t][j * 4], v + (static_cast<size_t>(t0 + t) * Hv + h) * kD + row0 + j * 4);
  }
  for (int c = tid; c < n; c += NT) {
    cp4(&s.g[c], g + static_cast<size_t>(t0 + c) * Hv + h);
    cp4(&s.beta[c], beta + static_cast<size_t>(t0 + c) * Hv + h);
  }
  asm volatile("cp.async.commit_group;\n" ::);
}

}  // namespace mere::cuda::gdn_stage
