// cp.async helpers shared by the tensor-core kernels (gemm.cu, qmatvec_tc.cu): global -> shared
// copies that bypass registers, committed in groups and waited for by count; bulk L2 prefetch.
#pragma once
#include <cstdint>

namespace mere::cuda {

__device__ __forceinline__ uint32_t smem_u32(const void* p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); }
// 16-byte global -> shared copy; src_bytes 0 writes zeros and reads nothing
__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes) : "memory");
}
__device__ __forceinline__ void cp_async8(uint32_t dst, const void* src) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8;\n" ::"r"(dst), "l"(src) : "memory");
}
__device__ __forceinline__ void cp_async4(uint32_t dst, const void* src) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(dst), "l"(src) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
// Bulk L2 prefetch (sm_90): asks the L2 to fetch [p, p + bytes) from DRAM; no registers, no
// completion to wait for. p must be 16-byte aligned and bytes a multiple of 16 (callers round inward).
__device__ __forceinline__ void prefetch_l2_bulk(const void* p, uint32_t bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" ::"l"(p), "r"(bytes) : "memory");
#endif
}
// The 16-byte-aligned part of [p, p + bytes) (empty when none): start rounded up, end rounded down.
__device__ __forceinline__ void prefetch_l2_inward(const void* p, size_t bytes) {
  const uintptr_t b = (reinterpret_cast<uintptr_t>(p) + 15u) & ~uintptr_t{15};
  const uintptr_t e = (reinterpret_cast<uintptr_t>(p) + bytes) & ~uintptr_t{15};
  if (e > b) prefetch_l2_bulk(reinterpret_cast<const void*>(b), static_cast<uint32_t>(e - b));
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

}  // namespace mere::cuda
