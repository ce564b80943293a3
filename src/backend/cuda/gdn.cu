// GatedDeltaNet decode kernel (gdn.h). Memory-bound on the state: Hv*Dv*Dk*4 bytes read and
// written once per call whatever T is. 8 warps a block, one S row (128 floats, a float4 a lane)
// per warp (64-float rows: two a warp), dot products by butterfly shuffles.
#include "backend/cuda/gdn.h"

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/gdn_step.cuh"
#include "backend/cuda/launch.cuh"

namespace mere::cuda {
namespace {

constexpr int kWarps = 8;

// D = 128: a warp a row; D = 64: two rows a warp (gdn_step.cuh). Hv * D rows fill whole blocks
// (8 warps = 8 or 16 rows, Hv * D a multiple of 64).
// S_EARLY (MERE_CUDA_GDN_STATE=early): the lane's float4 of its S row is loaded before the PDL wait, through
// the L2 (__ldcg: S was last written by an earlier pass's launch, not by any launch this one overlaps).
// ahead: the later weights every block asks the L2 for once its own S loads are out (l2_ahead.h).
template <int D, bool S_EARLY>
__global__ void __launch_bounds__(kWarps * 32)
    gdn_decode_kernel(float* __restrict__ S, const float* __restrict__ q, const float* __restrict__ k,
                      const float* __restrict__ v, const float* __restrict__ g, const float* __restrict__ beta, int T,
                      int Hk, int Hv, float* __restrict__ o, L2Ahead ahead) {
  constexpr int L = gdn::kRowLanes<D>;
  const int row = blockIdx.x * (kWarps * 32 / L) + static_cast<int>(threadIdx.x) / L;  // h * Dv + i
  const int lane = static_cast<int>(threadIdx.x) % L;
  const bool mine = row < Hv * D && T >= 1;  // never splits a warp: whole blocks
  const float4* srow = reinterpret_cast<const float4*>(S + static_cast<size_t>(mine ? row : 0) * D) + lane;
  float4 s{};
  if (S_EARLY && mine) s = __ldcg(srow);
  pdl_begin();
  if (!S_EARLY && mine) s = *srow;
  l2_ahead(ahead);
  if (!mine) return;
  gdn::row_step_from<false, D>(s, S, q, k, v, g, beta, T, Hk, Hv, row, lane, o);
}

}  // namespace

bool gdn_decode_supported(int64_t Dk, int64_t Dv) { return Dk == Dv && (Dk == 128 || Dk == 64); }

void gdn_decode(CudaDevice& dev, float* S, const float* q, const float* k, const float* v, const float* g,
                const float* beta, int64_t T, int64_t Hk, int64_t Hv, int64_t Dk, int64_t Dv, float* o,
                const L2Ahead* ahead) {
  MERE_CHECK(gdn_decode_supported(Dk, Dv), "cuda gdn_decode", "head size: expected Dk = Dv = 128 or 64, got Dk = ", Dk,
             ", Dv = ", Dv);
  MERE_CHECK(Hk >= 1 && Hv >= Hk && Hv % Hk == 0, "cuda gdn_decode",
             "heads: expected Hv a positive multiple of Hk, got Hk = ", Hk, ", Hv = ", Hv);
  MERE_CHECK(T >= 1 && T * Hv * Dv < (int64_t{1} << 31), "cuda gdn_decode", "token count out of range, got ", T);
  DeviceGuard guard(dev.ordinal());
  const int rows = static_cast<int>(Hv * Dv), per_block = kWarps * 32 / static_cast<int>(Dv / 4);
  const bool early = gdn_state_early();
  auto kernel = Dv == 128 ? (early ? &gdn_decode_kernel<128, true> : &gdn_decode_kernel<128, false>)
                          : (early ? &gdn_decode_kernel<64, true> : &gdn_decode_kernel<64, false>);
  launch("gdn_decode_kernel", kernel, (rows + per_block - 1) / per_block, kWarps * 32, 0, dev.stream(), S, q, k, v, g,
         beta, static_cast<int>(T), static_cast<int>(Hk), static_cast<int>(Hv), o, ahead ? *ahead : L2Ahead{});
}

}  // namespace mere::cuda
