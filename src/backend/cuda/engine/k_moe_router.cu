// The post-attention RMSNorm and the MoE router in ONE launch (kernels.h moe_norm_router;
// MERE_CUDA_MOE_NORM=fused, the default). A 35B-A3B MoE layer ran rms_norm_prep (a cluster of 8 blocks
// a token: the norm, then the 8-bit prepared x) and then the router + shared-gate matvec; the norm's
// launch cost ~4.2 µs a layer that PDL did not hide (docs/cuda-kernels.md §5.17: 13% of a step for
// the 81 norms). Here every block of the router launch computes the row's norm itself (16 KB from the
// L2) and stages its prepared x in shared memory:
//   before the PDL wait: each warp loads its router row with its scales (weights: never written; with
//   MERE_CUDA_MOE_LOADS=rows, or rows wider than kRouterSets chunk sets: the first chunks, then an L2
//   prefetch of the rest); with MERE_CUDA_NORM_W=early each thread also loads its norm-weight units;
//   the norm of x in rms_norm_v4's thread layout and order (k_norm.cuh): the same 1 / rms and y; block
//   0 of each token stores y for the experts (moe_gate_up / moe_down read the float row);
//   y staged as qmatvec's 8-bit SIMT x (fill_x: the prescale and chunk sums of q8_emit);
//   a warp a row of the router (E rows), then the shared-expert gate (1 row), in the SIMT contract
//   (dot_rows, as moe_block's phase C).
// So the logits, sg and y are bitwise rms_norm_prep + the router launch (engine_check pairs the two).
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/engine/k_moe_common.cuh"
#include "backend/cuda/engine/k_norm.cuh"
#include "backend/cuda/engine/kernels.h"
#include "backend/cuda/launch.cuh"

namespace mere::cuda::k {
namespace {

constexpr int kRouterThreads = kNormThreads;  // the norm's thread layout: 8 warps
constexpr int kRouterWarps = kRouterThreads / 32;
constexpr int kMaxUnits = 4;  // float4 units of x a thread holds: H <= 4096

struct NormRouterArgs {
  const float* x;       // [T, H] the residual stream
  const float* norm_w;  // [H]
  float eps;
  DMat router, shared_gate;  // [E, H], [1, H], RB-bit
  float* y;                  // [T, H] the normalised row (for the experts)
  float* logits;             // [T, E]
  float* sg;                 // [T]
  bool w_early;              // the norm weights before the PDL wait (MERE_CUDA_NORM_W)
};

// grid (ceil((E + 1) / kRouterWarps), T); warp w of block b: row b * kRouterWarps + w (< E: router,
// == E: the shared gate).
// SETS (kernels.h moe_norm_router's `sets`; rows of at most kRouterSets chunk sets): before the wait
// each warp asks for its whole row with its scales (load_sets); else the first chunk set (the rest
// from the L2) and the scales as the dot reaches them. The same sums (dot_sets runs dot_rows' steps).
constexpr int kRouterSets = 4;  // 8-bit: H <= 2048

template <int RB, bool SETS>
__global__ void __launch_bounds__(kRouterThreads) moe_norm_router_kernel(const __grid_constant__ NormRouterArgs a) {
  using GR = Geo<RB>;
  extern __shared__ float4 smem4[];
  float* y = reinterpret_cast<float*>(smem4);  // [H], then the staged x and its chunk sums
  const int H = static_cast<int>(a.router.cols), E = static_cast<int>(a.router.rows), nrc = H / GR::E;
  float* xr = y + H;
  float* xrsum = xr + nrc * GR::S;
  const int t = blockIdx.y, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int row = static_cast<int>(blockIdx.x) * kRouterWarps + warp;
  const bool active = row <= E;
  const DMat& M = row < E ? a.router : a.shared_gate;  // a reference into the grid constant: no copy
  QRow rq[1] = {qrow(M, row < E ? row : 0, 0)};
  uint4 wv[1];
  RowSets<1, kRouterSets> q;
  if (active) {  // weights only, before the wait
    if constexpr (SETS) {
      load_sets<RB>(rq, nrc, q);
    } else {
      load_rows<RB, 1>(rq, lane, nrc, wv);
      prefetch_row(rq[0].codes, lane + 32, nrc);
    }
  }
  float4 wn[kMaxUnits];
  if (a.w_early) load_w_units(reinterpret_cast<const float4*>(a.norm_w), 0, H / 4, wn);
  pdl_begin();

  // the norm, as rms_norm_v4 (thread i: float4 units i, i + 256, ...; the same sum order); block 0 stores y
  norm_row<kMaxUnits>(reinterpret_cast<const float4*>(a.x + static_cast<int64_t>(t) * H),
                      reinterpret_cast<const float4*>(a.norm_w), H, a.eps, reinterpret_cast<float4*>(y),
                      blockIdx.x == 0 ? reinterpret_cast<float4*>(a.y + static_cast<int64_t>(t) * H) : nullptr,
                      wn, a.w_early);
  __syncthreads();
  fill_x<RB>(y, nrc, xr, xrsum);
  __syncthreads();
  if (!active) return;
  float d[1];
  if constexpr (SETS) dot_sets<RB>(rq, nrc, xr, xrsum, q, d);
  else dot_rows<RB, 1>(rq, nrc, xr, xrsum, wv, d);
  if (lane == 0) {
    if (row < E) a.logits[static_cast<int64_t>(t) * E + row] = d[0];
    else a.sg[t] = d[0];
  }
}

size_t smem_bytes(int bits, int64_t H) { return (static_cast<size_t>(H) + smem_floats(bits, H)) * sizeof(float); }

}  // namespace

// 8-bit only: a 4-bit router runs on the integer kernel, whose contract dot_rows does not follow.
bool moe_norm_router_supported(const DMat& router, const DMat& shared_gate, const float* x, const float* norm_w,
                               const float* y) {
  const int64_t H = router.cols;
  auto al = [](const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; };
  return !router.tiled && !shared_gate.tiled && router.bits == 8 &&
         shared_gate.bits == router.bits && shared_gate.cols == H && shared_gate.rows == 1 && fits(router, router.bits, H) &&
         H % 64 == 0 && H <= int64_t{kMaxUnits} * 4 * kRouterThreads && router.rows >= 1 && router.rows < 65536 &&
         al(x) && al(norm_w) && al(y) && smem_bytes(router.bits, H) <= 48 * 1024;
}

void moe_norm_router(cudaStream_t s, const float* x, const float* norm_w, float eps, const DMat& router,
                     const DMat& shared_gate, int64_t T, float* y, float* logits, float* sg, bool sets) {
  MERE_CHECK(moe_norm_router_supported(router, shared_gate, x, norm_w, y) && T >= 1 && T < 65536, "moe_norm_router",
             "these shapes do not take the one-launch norm + router: ", router.bits, "-bit router [", router.rows,
             ", ", router.cols, "], shared gate [", shared_gate.rows, ", ", shared_gate.cols, "], T ", T);
  const NormRouterArgs a{x, norm_w, eps, router, shared_gate, y, logits, sg, norm_w_early()};
  const dim3 grid(static_cast<unsigned>((router.rows + 1 + kRouterWarps - 1) / kRouterWarps), static_cast<unsigned>(T));
  if (sets && fits_sets(router.cols * 8 / 128, kRouterSets))
    launch("moe_norm_router_kernel", &moe_norm_router_kernel<8, true>, grid, kRouterThreads, smem_bytes(8, router.cols),
           s, a);
  else
    launch("moe_norm_router_kernel (rows)", &moe_norm_router_kernel<8, false>, grid, kRouterThreads,
           smem_bytes(8, router.cols), s, a);
}

}  // namespace mere::cuda::k
