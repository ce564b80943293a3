// Device helpers shared by the 4/8-bit matvec kernels (qmatvec.cu: SIMT, qmatvec_int.cu: integer).
#pragma once
#include <cstdint>

namespace mere::cuda::qm {

// 16-byte streaming load of codes: read-only path, not kept in L1 (x is what L1 should hold).
__device__ __forceinline__ uint4 ld_stream(const uint4* p) {
  uint4 v;
  asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(p));
  return v;
}

// Word k (0..3, a compile-time constant after unrolling) of a 16-byte chunk.
__device__ __forceinline__ uint32_t word_of(const uint4& v, int k) {
  return k == 0 ? v.x : (k == 1 ? v.y : (k == 2 ? v.z : v.w));
}

__device__ __forceinline__ float bf16_to_f32(uint16_t b) { return __uint_as_float(static_cast<uint32_t>(b) << 16); }

}  // namespace mere::cuda::qm
