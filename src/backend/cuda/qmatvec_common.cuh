// Helpers shared by the 4-bit matvec kernels (qmatvec.cu: SIMT, qmatvec_int.cu: integer,
// qmatvec_tc.cu: tensor cores).
#pragma once
#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <type_traits>
#include <utility>

namespace mere::cuda::qm {

// 16-byte streaming load of codes: read-only path, not kept in L1 (x is what L1 should hold).
__device__ __forceinline__ uint4 ld_stream(const uint4* p) {
  uint4 v;
  asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(p));
  return v;
}

// ld_stream when `on`, else zeros, as one predicated load into the same registers: no branch, so
// no value is merged from a load on one path and a constant on another (such a merge can become a
// register move that waits for the load: it cost the group-integer kernel a DRAM round trip a
// group, docs/cuda-kernels.md §1 "v9").
__device__ __forceinline__ uint4 ld_stream_if(const uint4* p, bool on) {
  uint4 v = make_uint4(0u, 0u, 0u, 0u);
  asm("{\n .reg .pred q;\n setp.ne.b32 q, %5, 0;\n @q ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];\n}"
      : "+r"(v.x), "+r"(v.y), "+r"(v.z), "+r"(v.w)
      : "l"(p), "r"(static_cast<int>(on)));
  return v;
}

// Word k (0..3, a compile-time constant after unrolling) of a 16-byte chunk.
__device__ __forceinline__ uint32_t word_of(const uint4& v, int k) {
  return k == 0 ? v.x : (k == 1 ? v.y : (k == 2 ? v.z : v.w));
}

__device__ __forceinline__ float bf16_to_f32(uint16_t b) { return __uint_as_float(static_cast<uint32_t>(b) << 16); }

// The contracts' lane reduction: xor butterfly over the 32 lanes (offsets 16, 8, 4, 2, 1), every
// lane ends with the same sum.
__device__ __forceinline__ float butterfly_sum(float v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v = __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, off));
  return v;
}

// fns[T - 1] = pick(std::integral_constant<int, T>{}) for T = TLO..THI: the per-T instantiations of
// one kernel variant (the kernels take T as a template parameter).
template <int TLO, int THI, class Fn, class Pick>
void fill_by_T(Fn* fns, Pick pick) {
  [&]<int... Is>(std::integer_sequence<int, Is...>) {
    ((fns[TLO - 1 + Is] = pick(std::integral_constant<int, TLO + Is>{})), ...);
  }(std::make_integer_sequence<int, THI - TLO + 1>{});
}

// Blocks a multiprocessor holds of each compiled kernel variant, asked of the runtime once per
// (variant, T) and kept: 0 when the runtime cannot tell (the error is cleared, so the next launch
// check does not report it). N = compiled variants at most.
template <int N, int TMAX>
class OccupancyCache {
 public:
  OccupancyCache() {
    for (auto& row : occ_)
      for (auto& v : row) v.store(-1);
  }
  template <class Fn>
  int get(int variant, int64_t T, Fn fn, int threads, size_t smem = 0) {
    if (variant < 0 || variant >= N || T < 1 || T > TMAX) return 0;
    std::atomic<int>& slot = occ_[variant][T - 1];
    int occ = slot.load();
    if (occ < 0) {
      if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, fn, threads, smem) != cudaSuccess) {
        occ = 0;
        (void)cudaGetLastError();
      }
      slot.store(occ);
    }
    return occ;
  }

 private:
  std::atomic<int> occ_[N][TMAX];
};

}  // namespace mere::cuda::qm
