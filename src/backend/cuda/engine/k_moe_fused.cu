// The routed MoE experts of one decode token in ONE launch (MERE_CUDA_MOE_FUSED=on; kernels.h
// moe_gate_up_down): moe_route_gate_up + moe_down (k_moe.cu) with a grid-wide barrier in place of the
// kernel boundary. A 35B-A3B step spends ~20 µs a MoE layer in these two launches in sequence (s34a trace:
// gate/up with the routing 11.6, down 8.4) for ~15 MB (~5 µs of copy); the down launch starts its chain
// (the routing ids, then its expert rows from DRAM, then h) only after the gate/up launch has ended and
// its own blocks have landed, since its 128-register blocks do not fit beside gate/up's.
// Here the blocks are gate/up's (80 registers, 3 an SM: the 288 blocks of the 35B-A3B are resident at
// once, as grid_sync.cuh needs; moe_gate_up_down_grid checks it):
//   every block routes the token with warp 0 (route_token: the same ids and weights) while the other
//   warps stage x; each block computes its gate/up rows (moe_gate_up_kernel<BITS, true, true>'s rows,
//   loads and sums) and asks the L2 for its share of its expert's down rows (as MERE_CUDA_MOE_DOWN_L2=start)
//                                                                                      -> grid barrier
//   each warp takes output rows of down (moe_down_kernel<BITS, true>'s rows, loads, order and combine),
//   its expert rows now from the L2, h staged through the L2, and adds the result to the residual x.
// Every value comes from the same device functions in the same order as the two launches, so decode
// steps through it and verification passes through the launches agree bit for bit (the batch-width
// contract). T = 1, 4-bit experts whose rows fit the chunk sets (gate/up 2, down 1). Opt-in until a GPU
// measures it (docs/cuda-kernels.md §5.22).
#include <algorithm>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/engine/grid_sync.cuh"
#include "backend/cuda/engine/k_math.cuh"
#include "backend/cuda/engine/k_moe_common.cuh"
#include "backend/cuda/engine/kernels.h"
#include "backend/cuda/launch.cuh"

namespace mere::cuda::k {
namespace {

constexpr int kThreads = kWarps * 32;
constexpr int kBits = 4;
constexpr int kFusedDown = 4;  // expert rows of down in flight per warp (8, as moe_down, spills at 80 registers)

struct FusedArgs {
  MoeFusedWeights m;
  const float* logits;  // [E] router logits
  const float* x;       // [H] the normalised row (gate/up's input)
  const float* sg;      // [1] the shared expert's gate logit
  float* out;           // [H] the residual stream: out += the block's result
  int E, K;
  bool renorm, sorted;
  int gx;         // blocks an expert slot (K routed + the shared one)
  int route_off;  // floats of shared memory before the routing scratch
  MoeBlockScratch ws;
};

__global__ void __launch_bounds__(kThreads, 3) moe_gate_up_down_kernel(const __grid_constant__ FusedArgs a) {
  using G = Geo<kBits>;
  extern __shared__ float4 smem4[];
  float* sm = reinterpret_cast<float*>(smem4);
  const MoeFusedWeights& m = a.m;
  const int H = static_cast<int>(m.gate.cols), K = a.K, E = a.E, nchunk = H / G::E;
  const int Ie = static_cast<int>(m.down.cols), Is = static_cast<int>(m.sdown.cols);
  const int ce = Ie / G::E, cs = Is / G::E;
  float* xs = sm;  // gate/up's staged x, then (after the barrier) down's staged h and hs over the same floats
  float* xsum = xs + nchunk * G::S;
  float* xd = sm;
  float* xdsum = xd + (K * ce + cs) * G::S;
  float* p = sm + a.route_off;  // [E + K] the routing's probabilities, then sidx [K], wk [K]
  int32_t* sidx = reinterpret_cast<int32_t*>(p + E + K);
  float* wk = reinterpret_cast<float*>(sidx + K);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int k = static_cast<int>(blockIdx.x) / a.gx, bx = static_cast<int>(blockIdx.x) - k * a.gx;
  const bool shared = k == K;
  // per-field selects, as moe_gate_up_kernel
  const int rows = static_cast<int>(shared ? m.sgate.rows : m.gate.rows);
  const void* gdata = shared ? m.sgate.data : m.gate.data;
  const uint16_t* gsc = shared ? m.sgate.scales : m.gate.scales;
  const uint16_t* gbi = shared ? m.sgate.biases : m.gate.biases;
  const void* udata = shared ? m.sup.data : m.up.data;
  const uint16_t* usc = shared ? m.sup.scales : m.up.scales;
  const uint16_t* ubi = shared ? m.sup.biases : m.up.biases;
  const int rb = bx * kWarps * kUpRows, r0 = rb + warp * kUpRows;
  pdl_begin();
  if (warp == 0)
    route_token(a.logits, E, K, a.renorm, p, sidx, nullptr, wk, a.sorted);
  else
    fill_x<kBits>(a.x, nchunk, xs, xsum, 32);
  __syncthreads();
  if (rb < rows) {  // gate/up: moe_gate_up_kernel<4, true, true>'s rows and sums
    const int64_t expert = shared ? 0 : sidx[k], base = expert * rows, ng = H / 64;
    QRow rr[2 * kUpRows];
#pragma unroll
    for (int i = 0; i < kUpRows; ++i) {
      const int64_t row = base + min(r0 + i, rows - 1);
      rr[i] = QRow{reinterpret_cast<const uint4*>(gdata) + row * nchunk, gsc + row * ng, gbi + row * ng, 0};
      rr[kUpRows + i] = QRow{reinterpret_cast<const uint4*>(udata) + row * nchunk, usc + row * ng, ubi + row * ng, 0};
    }
    RowSets<2 * kUpRows, 2> q;
    load_sets<kBits>(rr, nchunk, q);
    const int parts = (rows + kWarps * kUpRows - 1) / (kWarps * kUpRows);
    if (shared) prefetch_expert_share(m.sdown, 0, bx, parts);
    else prefetch_expert_share(m.down, expert, bx, parts);
    float d[2 * kUpRows];
    dot_sets<kBits>(rr, nchunk, xs, xsum, q, d);
    store_pair(d, r0, rows, shared ? a.ws.hs : a.ws.h + static_cast<int64_t>(k) * rows);
  }
  if (blockIdx.x == 0)  // the ids and weights where the routing launch leaves them
    for (int i = static_cast<int>(threadIdx.x); i < K; i += kThreads) a.ws.idx[i] = sidx[i], a.ws.w[i] = wk[i];
  // down: moe_down_kernel<4, true>'s rows, loads and order, a warp an output row; the warp's first row's
  // shared-expert set and first group of expert sets are asked for before the barrier (weights: no
  // launch writes them, and the routing is known), so they arrive while the other blocks finish gate/up
  const int W = static_cast<int>(gridDim.x) * kWarps, Hd = static_cast<int>(m.down.rows);
  int i = static_cast<int>(blockIdx.x) * kWarps + warp;
  QRow rs[1], rr[kFusedDown];
  RowSets<1, 1> qs;
  RowSets<kFusedDown, 1> qe;
  auto setup = [&](int row, int g0) {
#pragma unroll
    for (int j = 0; j < kFusedDown; ++j) {
      const int mm = min(g0 + j, K - 1);
      rr[j] = qrow(m.down, static_cast<int64_t>(sidx[mm]) * Hd + row, mm * ce);
    }
    load_sets<kBits>(rr, ce, qe);
  };
  auto setup_shared = [&](int row) {
    rs[0] = qrow(m.sdown, row, K * ce);
    load_sets<kBits>(rs, cs, qs);
  };
  if (i < Hd) {
    setup_shared(i);
    setup(i, 0);
  }
  grid_sync(a.ws.bar, gridDim.x);

  fill_x<kBits, true>(a.ws.h, K * ce, xd, xdsum);
  fill_x<kBits, true>(a.ws.hs, cs, xd + K * ce * G::S, xdsum + K * ce);
  __syncthreads();
  const float sgt = a.sg[0];
  for (bool first = true; i < Hd; i += W, first = false) {
    if (!first) {
      setup_shared(i);
      setup(i, 0);
    }
    float acc = 0.0f;
    for (int g0 = 0; g0 < K; g0 += kFusedDown) {
      if (g0 > 0) setup(i, g0);
      float d[kFusedDown];
      dot_sets<kBits>(rr, ce, xd, xdsum, qe, d);
#pragma unroll
      for (int j = 0; j < kFusedDown; ++j)
        if (g0 + j < K) acc = __fmaf_rn(wk[g0 + j], d[j], acc);
    }
    float ds[1];
    dot_sets<kBits>(rs, cs, xd, xdsum, qs, ds);
    acc = __fmaf_rn(sigmoid(sgt), ds[0], acc);
    if (lane == 0) a.out[i] = __fadd_rn(__ldcg(a.out + i), acc);
  }
}

int64_t route_offset(const MoeFusedWeights& m, int64_t K) {
  const int64_t H = m.gate.cols, Ie = m.down.cols, Is = m.sdown.cols;
  return (static_cast<int64_t>(std::max(smem_floats(kBits, H), smem_floats(kBits, K * Ie + Is))) + 3) / 4 * 4;
}

size_t smem_bytes(const MoeFusedWeights& m, int64_t E, int64_t K) {
  return static_cast<size_t>(route_offset(m, K) + (E + K) + K + K) * 4;
}

}  // namespace

int moe_gate_up_down_grid(const MoeFusedWeights& m, int64_t E, int64_t K, int sms) {
  const int64_t H = m.gate.cols, Ie = m.gate.rows, Is = m.sgate.rows;
  if (!moe_fused_supported(m.gate, m.up, m.down, m.sgate, m.sup, m.sdown, K) || m.gate.bits != kBits) return 0;
  if (!(E >= 1 && E <= 8192 && K >= 1 && K <= E && m.down.rows == H && m.down.cols == Ie && m.sdown.cols == Is))
    return 0;
  if (!(fits_sets(H * kBits / 128, 2) && fits_sets(Ie * kBits / 128, 1) && fits_sets(Is * kBits / 128, 1))) return 0;
  const size_t smem = smem_bytes(m, E, K);
  int max_smem = 0, dev = 0;
  MERE_CUDA_CHECK(cudaGetDevice(&dev));
  MERE_CUDA_CHECK(cudaDeviceGetAttribute(&max_smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  if (smem > static_cast<size_t>(max_smem)) return 0;
  MERE_CUDA_CHECK(cudaFuncSetAttribute(moe_gate_up_down_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(smem)));
  int per_sm = 0;
  MERE_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, moe_gate_up_down_kernel, kThreads, smem));
  const int64_t gx = (std::max(Ie, Is) + kWarps * kUpRows - 1) / (kWarps * kUpRows), grid = gx * (K + 1);
  return grid <= int64_t{per_sm} * sms ? static_cast<int>(grid) : 0;  // every block resident: grid_sync
}

void moe_gate_up_down(cudaStream_t s, int grid, const MoeFusedWeights& m, const float* logits, int64_t E, bool renorm,
                      const float* x, const float* sg, int64_t K, float* out, const MoeBlockScratch& ws) {
  const int64_t gx = (std::max(m.gate.rows, m.sgate.rows) + kWarps * kUpRows - 1) / (kWarps * kUpRows);
  MERE_CHECK(grid >= 1 && grid == gx * (K + 1) && ws.bar != nullptr, "cuda moe_gate_up_down",
             "no resident grid for these shapes (moe_gate_up_down_grid)");
  const FusedArgs a{m,        logits, x, sg, out, static_cast<int>(E), static_cast<int>(K), renorm, moe_topk_sorted(),
                    static_cast<int>(gx), static_cast<int>(route_offset(m, K)), ws};
  launch("moe_gate_up_down_kernel", moe_gate_up_down_kernel, static_cast<unsigned>(grid), kThreads,
         smem_bytes(m, E, K), s, a);
}

}  // namespace mere::cuda::k
