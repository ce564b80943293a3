// GatedDeltaNet decode kernel (gdn.h). Memory-bound on the state: Hv*Dv*Dk*4 bytes read and
// written once per call whatever T is. 8 warps a block, one S row (128 floats, a float4 a lane)
// per warp, dot products by butterfly shuffles.
#include "backend/cuda/gdn.h"

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/launch.cuh"

namespace mere::cuda {
namespace {

constexpr int kD = 128;
constexpr int kWarps = 8;

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v = __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, off));
  return v;
}

__device__ __forceinline__ float dot4(const float4& a, const float4& b) {
  return __fmaf_rn(a.w, b.w, __fmaf_rn(a.z, b.z, __fmaf_rn(a.y, b.y, __fmul_rn(a.x, b.x))));
}

__global__ void __launch_bounds__(kWarps * 32)
    gdn_decode_kernel(float* __restrict__ S, const float* __restrict__ q, const float* __restrict__ k,
                      const float* __restrict__ v, const float* __restrict__ g, const float* __restrict__ beta, int T,
                      int Hk, int Hv, float* __restrict__ o) {
  pdl_begin();
  const int lane = threadIdx.x & 31;
  const int row = blockIdx.x * kWarps + (threadIdx.x >> 5);  // h * Dv + i
  if (row >= Hv * kD) return;
  const int h = row / kD, i = row - h * kD;
  const int kh = h / (Hv / Hk);
  float4* srow = reinterpret_cast<float4*>(S + static_cast<size_t>(row) * kD) + lane;
  float4 s = *srow;
  for (int t = 0; t < T; ++t) {
    const float4 kk = __ldg(reinterpret_cast<const float4*>(k + (static_cast<size_t>(t) * Hk + kh) * kD) + lane);
    const float4 qq = __ldg(reinterpret_cast<const float4*>(q + (static_cast<size_t>(t) * Hk + kh) * kD) + lane);
    const float decay = expf(__ldg(g + t * Hv + h));
    const float bt = __ldg(beta + t * Hv + h);
    const float vi = __ldg(v + (static_cast<size_t>(t) * Hv + h) * kD + i);
    s.x = __fmul_rn(s.x, decay);
    s.y = __fmul_rn(s.y, decay);
    s.z = __fmul_rn(s.z, decay);
    s.w = __fmul_rn(s.w, decay);
    const float m = warp_sum(dot4(s, kk));
    const float d = __fmul_rn(bt, __fsub_rn(vi, m));
    s.x = __fmaf_rn(d, kk.x, s.x);
    s.y = __fmaf_rn(d, kk.y, s.y);
    s.z = __fmaf_rn(d, kk.z, s.z);
    s.w = __fmaf_rn(d, kk.w, s.w);
    const float oi = warp_sum(dot4(s, qq));
    if (lane == 0) o[(static_cast<size_t>(t) * Hv + h) * kD + i] = oi;
  }
  *srow = s;
}

}  // namespace

void gdn_decode(CudaDevice& dev, float* S, const float* q, const float* k, const float* v, const float* g,
                const float* beta, int64_t T, int64_t Hk, int64_t Hv, int64_t Dk, int64_t Dv, float* o) {
  MERE_CHECK(Dk == kD && Dv == kD, "cuda gdn_decode", "head size: expected Dk = Dv = 128, got Dk = ", Dk, ", Dv = ", Dv);
  MERE_CHECK(Hk >= 1 && Hv >= Hk && Hv % Hk == 0, "cuda gdn_decode",
             "heads: expected Hv a positive multiple of Hk, got Hk = ", Hk, ", Hv = ", Hv);
  MERE_CHECK(T >= 1 && T * Hv * kD < (int64_t{1} << 31), "cuda gdn_decode", "token count out of range, got ", T);
  DeviceGuard guard(dev.ordinal());
  const int rows = static_cast<int>(Hv * kD);
  launch("gdn_decode_kernel", gdn_decode_kernel, (rows + kWarps - 1) / kWarps, kWarps * 32, 0, dev.stream(), S, q, k,
         v, g, beta, static_cast<int>(T), static_cast<int>(Hk), static_cast<int>(Hv), o);
}

}  // namespace mere::cuda
