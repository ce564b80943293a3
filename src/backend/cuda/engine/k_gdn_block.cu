// The middle of a GatedDeltaNet layer's decode step for one token in ONE launch (MERE_CUDA_GDN_BLOCK=on;
// kernels.h gdn_mid): between the input projections and out_proj, a decode step ran three launches
// (s24c trace, H200: conv_gdn_prepare 3.9-4.0 µs, gdn_decode 2.5-3.3, gated_rms_norm<PREP> 3.7-4.9; 27B
// 48 layers, 35B-A3B 30), each mostly a dependent chain of L2 round trips behind a kernel boundary. Here
// the blocks, all resident at once, meet at two grid-wide barriers instead (grid_sync.cuh):
//   before the PDL wait: each warp asks the L2 for the S rows of its step rows (state, written by
//      no launch of this step before this one);
//   B  conv + SiLU + the q/k l2 norm + the gates, a warp a unit (a q head, a k head, a v head, the
//      gates): conv_gdn_prepare_kernel's block b as one warp, its 128-thread block sum as
//      warp_block_sum (bitwise the same q, k, v, g, beta and conv state)              -> barrier
//   C  the recurrent step, a warp an S row (gdn_decode's row_step, inputs read through the L2)
//                                                                                     -> barrier
//   D  the gated RMSNorm + prepare of out_proj's input, a block a head (gated_rms_norm_kernel<PREP>'s
//      gated_norm_head, which gives a 256-thread block the 128-thread block's bits).
// Every value comes from the device functions of the three launches (k_gdn_common.cuh, gdn_step.cuh,
// qmatvec_prep.cuh) in the same order, so decode steps through it and verification passes through the
// separate launches agree bit for bit (the batch-width contract).
// Measured (session 26, H100; docs/cuda-kernels.md §5.13): 24.1 µs a layer in sequence against the three
// launches' 10.9, decode -11% (27B) / -12% (35B-A3B): at 2 blocks an SM the step runs 2-3 rows a warp
// one after another and phase B 4 channels a lane, where the separate launches have a warp a row and a
// thread a channel. Opt-in.
#include <algorithm>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/engine/grid_sync.cuh"
#include "backend/cuda/engine/k_gdn_common.cuh"
#include "backend/cuda/engine/kernels.h"
#include "backend/cuda/gdn_step.cuh"
#include "backend/cuda/launch.cuh"

namespace mere::cuda::k {
namespace {

constexpr int kMidWarps = 8, kMidThreads = kMidWarps * 32;
constexpr int kD = gdn::kD;  // Dk = Dv = 128: a unit's channels are the 4 former warps' lanes

struct MidArgs {
  GdnMidWeights m;
  GdnMidIo io;
  int K, Hk, Hv;
  float eps;
  prep::Layout L;
  unsigned* bar;
};

// Unit u of phase B (conv_gdn_prepare_kernel's block u) by one warp: u < 2 Hk a q / k head, then the
// Hv v heads, then the gates. Lane l holds the former threads l + 32 w, w = 0..3 (channel base + l + 32 w).
__device__ __forceinline__ void conv_unit(const MidArgs& a, int u, int lane) {
  const GdnMidWeights& m = a.m;
  const GdnMidIo& io = a.io;
  const int Hk = a.Hk, Hv = a.Hv, kd = Hk * kD, C = 2 * kd + Hv * kD, K = a.K;
  if (u == 2 * Hk + Hv) {  // the gates
    for (int h = lane; h < Hv; h += 32) {
      const float bv = sigmoid(io.b[h]), gv = __fmul_rn(m.neg_a[h], softplus(__fadd_rn(io.a[h], m.dt_bias[h])));
      io.beta[h] = bv;
      io.g[h] = gv;
      if (io.tr.g) io.tr.beta[h] = bv, io.tr.g[h] = gv;
    }
    return;
  }
  const bool qk = u < 2 * Hk;
  const int base = qk ? u * kD : 2 * kd + (u - 2 * Hk) * kD;
  float y[kFormerWarps], p[kFormerWarps];
#pragma unroll
  for (int w = 0; w < kFormerWarps; ++w) {
    const int c = base + 32 * w + lane;
    float hist[kMaxConvK];
    for (int j = 0; j < K - 1; ++j) hist[j] = io.conv_state[static_cast<int64_t>(j) * C + c];
    const float in = io.raw[c];
    if (io.tr.raw) io.tr.raw[c] = in;
    y[w] = conv_step(hist, m.conv_w, c, K, in);
    for (int j = 0; j < K - 1; ++j) io.conv_state[static_cast<int64_t>(j) * C + c] = hist[j];
    p[w] = __fmaf_rn(y[w], y[w], 0.0f);
  }
  if (!qk) {
#pragma unroll
    for (int w = 0; w < kFormerWarps; ++w) {
      const int i = base + 32 * w + lane - 2 * kd;
      io.v[i] = y[w];
      if (io.tr.v) io.tr.v[i] = y[w];
    }
    return;
  }
  const float r = 1.0f / sqrtf(__fadd_rn(warp_block_sum(p), 1e-6f));
  const float qscale = 1.0f / sqrtf(static_cast<float>(kD));
#pragma unroll
  for (int w = 0; w < kFormerWarps; ++w) {
    const int c = base + 32 * w + lane;
    const float n = __fmul_rn(y[w], r);
    if (u < Hk) {
      const float qv = __fmul_rn(n, qscale);
      io.q[c] = qv;
      if (io.tr.q) io.tr.q[c] = qv;
    } else {
      io.k[c - kd] = n;
      if (io.tr.k) io.tr.k[c - kd] = n;
    }
  }
}

template <int PREP>
__global__ void __launch_bounds__(kMidThreads) gdn_mid_kernel(const __grid_constant__ MidArgs a) {
  __shared__ float partial[kMidWarps];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int gw = static_cast<int>(blockIdx.x) * kMidWarps + warp, W = static_cast<int>(gridDim.x) * kMidWarps;
  const int Hk = a.Hk, Hv = a.Hv, units = 2 * Hk + Hv + 1, rows = Hv * kD;
  // before the wait: state and weights only (no launch of this step has written them yet)
  for (int row = gw; row < rows; row += W)
    if (lane < 4) asm volatile("prefetch.global.L2 [%0];" ::"l"(a.io.S + static_cast<size_t>(row) * kD + 32 * lane));
  pdl_begin_producer(a.L.early);

  if (gw < units) conv_unit(a, gw, lane);
  grid_sync(a.bar, gridDim.x);
  for (int row = gw; row < rows; row += W)
    gdn::row_step<true>(a.io.S, a.io.q, a.io.k, a.io.v, a.io.g, a.io.beta, 1, Hk, Hv, row, lane, a.io.o);
  grid_sync(a.bar, gridDim.x);
  for (int h = static_cast<int>(blockIdx.x); h < Hv; h += static_cast<int>(gridDim.x))
    gated_norm_head<PREP>(a.io.o, a.io.z, a.m.norm_w, Hv, kD, a.eps, a.io.y, a.L, h, 0, partial);
}

using MidFn = void (*)(MidArgs);
MidFn mid_fn(int bits) { return bits == 8 ? &gdn_mid_kernel<8> : &gdn_mid_kernel<4>; }

}  // namespace

int gdn_mid_grid(int64_t Hk, int64_t Dk, int64_t Hv, int64_t Dv, int64_t K, int bits, int sms) {
  if (!(Dk == kD && Dv == kD && Hk >= 1 && Hv >= Hk && Hv % Hk == 0 && K >= 1 && K <= kMaxConvK &&
        (bits == 4 || bits == 8) && Hv * kD < (int64_t{1} << 30)))
    return 0;
  int per_sm = 0;
  MERE_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, mid_fn(bits), kMidThreads, 0));
  if (per_sm < 1) return 0;
  // at most 2 blocks an SM (each barrier is one atomic a block), and no more than the widest phase
  // has warps' worth of tasks (the step's rows)
  const int64_t tasks = std::max(2 * Hk + Hv + 1, Hv * kD);
  return static_cast<int>(std::min<int64_t>(int64_t{std::min(per_sm, 2)} * sms, (tasks + kMidWarps - 1) / kMidWarps));
}

void gdn_mid(cudaStream_t s, int grid, const GdnMidWeights& m, const GdnMidIo& io, int64_t K, int64_t Hk, int64_t Hv,
             float eps, int bits, float* ws, unsigned* bar) {
  MERE_CHECK(grid >= 1 && bar != nullptr && (bits == 4 || bits == 8), "cuda gdn_mid",
             "no resident grid for these shapes (gdn_mid_grid)");
  const MidArgs a{m, io, static_cast<int>(K), static_cast<int>(Hk), static_cast<int>(Hv), eps,
                  prep::producer_layout(ws, 1, Hv * kD, bits), bar};
  launch(bits == 8 ? "gdn_mid_kernel<8>" : "gdn_mid_kernel<4>", mid_fn(bits), static_cast<unsigned>(grid),
         kMidThreads, 0, s, a);
}

}  // namespace mere::cuda::k
