// Inline-PTX wrappers of Hopper's warpgroup MMA (wgmma, sm_90a) for the prefill GEMMs
// (gemm_wgmma.cu): the shared-memory descriptor of a 128-byte-swizzled K-major tile, the fences,
// commit and wait, m64nNk16 bf16 -> fp32 with A from registers (N = 32, 128) and from shared memory
// (N = 128, 256).
#pragma once
#include <cstdint>

#include "backend/cuda/gemm_dequant.cuh"

namespace mere::cuda::wg {

// Shared-memory matrix descriptor of a K-major bf16 tile with 128-byte rows and the 128-byte
// swizzle: start address >> 4 (bits 0-13), leading byte offset 1 (unused for swizzled K-major),
// stride byte offset 1024 >> 4 (8 rows x 128 bytes between core-matrix groups), layout 1 = SW128.
__device__ __forceinline__ uint64_t sw128_desc(uint32_t addr) {
  return static_cast<uint64_t>((addr & 0x3FFFFu) >> 4) | (uint64_t{1} << 16) | (uint64_t{1024 >> 4} << 32) |
         (uint64_t{1} << 62);
}

__device__ __forceinline__ void wg_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
// Waits until at most N of this warpgroup's committed wgmma groups are still running.
template <int N>
__device__ __forceinline__ void wg_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory"); }
__device__ __forceinline__ void wg_wait0() { wg_wait<0>(); }
// cp.async's (generic-proxy) writes become visible to wgmma's (async-proxy) reads
__device__ __forceinline__ void fence_async_smem() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
// Keeps registers that an in-flight wgmma reads or writes where they are until this point.
template <int N>
__device__ __forceinline__ void pin(float (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}
__device__ __forceinline__ void pin(uint32_t (&a)[4][4]) {
#pragma unroll
  for (int s = 0; s < 4; ++s)
#pragma unroll
    for (int i = 0; i < 4; ++i) asm volatile("" : "+r"(a[s][i])::"memory");
}

// The accumulator operands of the wrappers below ("+f"(d[i]) for consecutive i) and the PTX lists
// naming them ({%0, ..., %N-1}): one definition for every instruction shape.
#define MERE_WG_D8(i)                                                                                          \
  "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), "+f"(d[i + 6]), \
      "+f"(d[i + 7])
#define MERE_WG_D16(i) MERE_WG_D8(i), MERE_WG_D8(i + 8)
#define MERE_WG_D64(i) MERE_WG_D16(i), MERE_WG_D16(i + 16), MERE_WG_D16(i + 32), MERE_WG_D16(i + 48)
#define MERE_WG_D128 MERE_WG_D64(0), MERE_WG_D64(64)
#define MERE_WG_R16 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}"
#define MERE_WG_R64 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, " \
  "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, " \
  "%39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, " \
  "%58, %59, %60, %61, %62, %63}"
#define MERE_WG_R128 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, " \
  "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, " \
  "%39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, " \
  "%58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, " \
  "%77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, " \
  "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, " \
  "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}"

// D[64 x 128] += A[64 x 16] (registers, bf16) · B[16 x 128] (shared, K-major via desc), fp32.
__device__ __forceinline__ void wgmma_k16(float (&d)[64], const uint32_t (&a)[4], uint64_t desc) {
  asm volatile(
      "{\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
      MERE_WG_R64 ", {%64, %65, %66, %67}, %68, 1, 1, 1, 0;\n"
      "}\n"
      : MERE_WG_D64(0)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc));
}

// D[64 x 32] += A[64 x 16] (registers, bf16) · B[16 x 32] (shared, K-major via desc), fp32.
__device__ __forceinline__ void wgmma_k16(float (&d)[16], const uint32_t (&a)[4], uint64_t desc) {
  asm volatile(
      "{\n"
      "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 "
      MERE_WG_R16 ", {%16, %17, %18, %19}, %20, 1, 1, 1, 0;\n"
      "}\n"
      : MERE_WG_D16(0)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc));
}

// 16 bytes to shared memory (a 32-bit shared-window address)
__device__ __forceinline__ void st_shared_v4(uint32_t addr, uint32_t a, uint32_t b, uint32_t c, uint32_t d) {
  asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(a), "r"(b), "r"(c), "r"(d) : "memory");
}

// One thread's share of an A tile in shared memory (the v6c/v6d GEMMs): the 4 code words of half h
// of one row's 64-column group (words 4h .. 4h + 3), dequantised with the row's scale / bias bits
// (dq::q4_word, the same bf16 values as every other path) into 16-byte chunks 4h .. 4h + 3 of that
// row at `row_addr` (the row's 128 bytes), 128-byte swizzled by `sw` = row & 7.
__device__ __forceinline__ void dequant_a_half(const uint32_t (&w)[4], uint32_t s_raw, uint32_t b_raw, int h,
                                               uint32_t row_addr, uint32_t sw) {
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    uint32_t o[4];
    dq::q4_word(w[j], s_raw, b_raw, o);
    const uint32_t ch = static_cast<uint32_t>(4 * h + j);
    st_shared_v4(row_addr + ((ch ^ sw) << 4), o[0], o[1], o[2], o[3]);
  }
}

// D[64 x 128] += A[64 x 16] · B[16 x 128], both in shared memory (K-major via descriptors), fp32.
__device__ __forceinline__ void wgmma_ss_k16(float (&d)[64], uint64_t desc_a, uint64_t desc_b) {
  asm volatile(
      "{\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
      MERE_WG_R64 ", %64, %65, 1, 1, 1, 0, 0;\n"
      "}\n"
      : MERE_WG_D64(0)
      : "l"(desc_a), "l"(desc_b));
}

// D[64 x 256] += A[64 x 16] · B[16 x 256], both in shared memory (K-major via descriptors), fp32.
__device__ __forceinline__ void wgmma_ss_k16(float (&d)[128], uint64_t desc_a, uint64_t desc_b) {
  asm volatile(
      "{\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 "
      MERE_WG_R128 ", %128, %129, 1, 1, 1, 0, 0;\n"
      "}\n"
      : MERE_WG_D128
      : "l"(desc_a), "l"(desc_b));
}

// The D fragment of this thread: d[4j + i] = (row (lane >> 2) + 8 (i >> 1) of the warp's 16 in its
// half, x row 8j + 2t + (i & 1)). f(x row, row within the 128) for each.
template <int NT, class F>
__device__ __forceinline__ void for_fragment(F&& f) {
  const int lane = static_cast<int>(threadIdx.x) & 31, warp = static_cast<int>(threadIdx.x) >> 5;
  const int la = (warp >> 2) * 64 + (warp & 3) * 16 + (lane >> 2), t = lane & 3;
#pragma unroll
  for (int j = 0; j < NT / 8; ++j)
#pragma unroll
    for (int i = 0; i < 4; ++i) f(4 * j + i, 8 * j + 2 * t + (i & 1), la + 8 * (i >> 1));
}

}  // namespace mere::cuda::wg

#undef MERE_WG_D8
#undef MERE_WG_D16
#undef MERE_WG_D64
#undef MERE_WG_D128
#undef MERE_WG_R16
#undef MERE_WG_R64
#undef MERE_WG_R128
