// The MoE half of a decoder layer for one token in ONE launch (MERE_CUDA_MOE_BLOCK=on; kernels.h
// moe_block). A 35B-A3B decode step spends ~31 µs a MoE layer in four launches (s24c trace: the
// post-attention RMSNorm + prepare 4.2, the router matvec 3.4, routing + gate/up 13.4, down 9.9), most
// of it kernel boundaries and dependent latencies, not bytes (~16 MB a layer = ~4 µs of copy). Here
// the blocks, all resident at once, meet at two grid-wide barriers instead:
//   before the PDL wait: each warp asks for the weights of its first router / shared-expert rows;
//   B  every block computes the row's RMSNorm itself (rms_norm_v4's order: the same 1 / rms and y)
//      and stages y for the router (RB bits) and the experts (BITS) in shared memory;
//   C  router rows, the shared-expert gate row, the shared expert's gate/up + SwiGLU  -> barrier
//   D  every block routes (route_token, warp 0; the other warps load their first shared-expert down
//      row meanwhile), then the K experts' gate/up + SwiGLU; each warp then asks for its first down
//      rows of the K experts, which arrive while it waits                             -> barrier
//   E  down rows of the K experts and the shared expert, combined in moe_down's order, added to x.
// Every value comes from the same device functions in the same order as the launches it replaces
// (rms_norm_v4 + the router qmatvec + moe_route_gate_up + moe_down): bitwise the same x, ids and
// weights, so decode steps through it and verification passes through the separate launches agree
// bit for bit (the batch-width contract). Data written by other blocks is read through the L2.
// Measured (session 26, H100; docs/cuda-kernels.md §5.12): 39.2 µs a layer in sequence against the four
// launches' 32.0, 35B-A3B decode -17%: 16 warps an SM (128 registers) where the launches keep up to 64
// resident, so each phase's dependent loads run as a few long chains a warp. Opt-in.
#include <algorithm>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/engine/grid_sync.cuh"
#include "backend/cuda/engine/k_math.cuh"
#include "backend/cuda/engine/k_moe_common.cuh"
#include "backend/cuda/engine/k_norm.cuh"
#include "backend/cuda/engine/kernels.h"
#include "backend/cuda/launch.cuh"

namespace mere::cuda::k {
namespace {

constexpr int kThreads = kWarps * 32;
static_assert(kThreads == kNormThreads, "the block computes the norm with rms_norm_v4's thread layout");
constexpr int kMaxUnits = 4;  // float4 units of x a thread holds: H <= 4096 (the 35B-A3B: 2048)

struct BlockArgs {
  MoeBlockWeights m;
  float eps;
  int E, K;
  bool renorm;
  int route_off;  // floats of shared memory before the routing scratch
  MoeBlockScratch ws;
  float* x;
};

// The row pair c (rows c*kUpRows ..) of gate / up at `base` rows into the stacked matrices.
__device__ __forceinline__ void pair_rows(const DMat& g, const DMat& u, int64_t base, int rows, int c, int nchunk,
                                          QRow (&rr)[2 * kUpRows]) {
  const int64_t ng = g.cols / 64;
#pragma unroll
  for (int i = 0; i < kUpRows; ++i) {
    const int64_t row = base + min(c * kUpRows + i, rows - 1);
    rr[i] = QRow{reinterpret_cast<const uint4*>(g.data) + row * nchunk, g.scales + row * ng, g.biases + row * ng, 0};
    rr[kUpRows + i] = QRow{reinterpret_cast<const uint4*>(u.data) + row * nchunk, u.scales + row * ng,
                           u.biases + row * ng, 0};
  }
}

template <int BITS, int RB>
__global__ void __launch_bounds__(kThreads, 2) moe_block_kernel(const __grid_constant__ BlockArgs a) {
  using G = Geo<BITS>;
  using GR = Geo<RB>;
  extern __shared__ float4 smem4[];
  float* sm = reinterpret_cast<float*>(smem4);
  const MoeBlockWeights& m = a.m;
  const int H = static_cast<int>(m.gate.cols), Ie = static_cast<int>(m.gate.rows), Is = static_cast<int>(m.sgate.rows);
  const int E = a.E, K = a.K;
  const int nrc = H / GR::E, nec = H / G::E;  // chunks of a router row / of an expert gate or up row
  const int ce = Ie / G::E, cs = Is / G::E;   // chunks of an expert / the shared expert's down row
  // shared memory: y [H] | router x | expert x (phases B-D), the down x over the same floats (E);
  // then lg [E] | p [E + K] | sidx [K] | wk [K]
  float* y = sm;
  float* xr = y + H;
  float* xrsum = xr + nrc * GR::S;
  float* xe = xrsum + nrc;
  float* xesum = xe + nec * G::S;
  float* xd = sm;
  float* xdsum = xd + (K * ce + cs) * G::S;
  float* lg = sm + a.route_off;
  float* p = lg + E;
  int32_t* sidx = reinterpret_cast<int32_t*>(p + E + K);
  float* wk = reinterpret_cast<float*>(sidx + K);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int gw = static_cast<int>(blockIdx.x) * kWarps + warp, W = static_cast<int>(gridDim.x) * kWarps;

  // phase C's tasks: [0, nsh) the shared expert's row pairs, then E router rows and the shared gate row
  const int nsh = (Is + kUpRows - 1) / kUpRows, nC = nsh + E + 1;
  QRow pr[2 * kUpRows], rq[1];
  auto rows_c = [&](int c) {
    if (c < nsh) pair_rows(m.sgate, m.sup, 0, Is, c, nec, pr);
    else rq[0] = c - nsh < E ? qrow(m.router, c - nsh, 0) : qrow(m.shared_gate, 0, 0);
  };
  if (gw < nC) {  // weights only, before the wait: the first task's rows to the L2 (no registers held)
    rows_c(gw);
    if (gw < nsh) {
#pragma unroll
      for (int i = 0; i < 2 * kUpRows; ++i) prefetch_row(pr[i].codes, lane, nec);
    } else {
      prefetch_row(rq[0].codes, lane, nrc);
    }
  }
  pdl_begin();

  // B: the norm of x, as rms_norm_v4 (thread i: float4 units i, i + 256, ...; the same sum order)
  norm_row<kMaxUnits>(reinterpret_cast<const float4*>(a.x), reinterpret_cast<const float4*>(m.norm_w), H, a.eps,
                      reinterpret_cast<float4*>(y), nullptr);
  __syncthreads();
  fill_x<RB>(y, nrc, xr, xrsum);
  fill_x<BITS>(y, nec, xe, xesum);
  __syncthreads();

  // C: router logits, the shared gate, the shared expert's SwiGLU
  for (int c = gw; c < nC; c += W) {
    rows_c(c);
    if (c < nsh) {
      uint4 pw[2 * kUpRows];
      load_rows<BITS, 2 * kUpRows>(pr, lane, nec, pw);
      float d[2 * kUpRows];
      dot_rows<BITS, 2 * kUpRows>(pr, nec, xe, xesum, pw, d);
      store_pair(d, c * kUpRows, Is, a.ws.hs);
    } else {
      uint4 rw[1];
      load_rows<RB, 1>(rq, lane, nrc, rw);
      float d[1];
      dot_rows<RB, 1>(rq, nrc, xr, xrsum, rw, d);
      if (lane == 0) {
        if (c - nsh < E) a.ws.logits[c - nsh] = d[0];
        else a.ws.sg[0] = d[0];
      }
    }
  }
  grid_sync(a.ws.bar, gridDim.x);

  // D: the routing (every block), then the experts' SwiGLU
  QRow rs[1];
  uint4 ws[1];
  if (gw < H) {  // the first down task's shared-expert row: no routing needed
    rs[0] = qrow(m.sdown, gw, K * ce);
    load_rows<BITS, 1>(rs, lane, cs, ws);
  }
  if (warp == 0) {
    for (int e = lane; e < E; e += 32) lg[e] = __ldcg(a.ws.logits + e);
    __syncwarp();
    route_token(lg, E, K, a.renorm, p, sidx, nullptr, wk, true);
  }
  __syncthreads();
  if (blockIdx.x == 0)  // the ids and weights where the routing launches leave them
    for (int k = static_cast<int>(threadIdx.x); k < K; k += kThreads) a.ws.idx[k] = sidx[k], a.ws.w[k] = wk[k];
  const int npair = (Ie + kUpRows - 1) / kUpRows;
  for (int c = gw; c < K * npair; c += W) {
    const int k = c / npair, q = c - k * npair;
    QRow rr[2 * kUpRows];
    uint4 wv[2 * kUpRows];
    pair_rows(m.gate, m.up, static_cast<int64_t>(sidx[k]) * Ie, Ie, q, nec, rr);
    load_rows<BITS, 2 * kUpRows>(rr, lane, nec, wv);
    float d[2 * kUpRows];
    dot_rows<BITS, 2 * kUpRows>(rr, nec, xe, xesum, wv, d);
    store_pair(d, q * kUpRows, Ie, a.ws.h + static_cast<int64_t>(k) * Ie);
  }
  QRow dr[kDownGroup];
  uint4 dw[kDownGroup];
  auto setup_down = [&](int i, int g0) {
#pragma unroll
    for (int j = 0; j < kDownGroup; ++j) {
      const int mm = min(g0 + j, K - 1);
      dr[j] = qrow(m.down, static_cast<int64_t>(sidx[mm]) * H + i, mm * ce);
    }
    load_rows<BITS, kDownGroup>(dr, lane, ce, dw);
  };
  if (gw < H) setup_down(gw, 0);  // in flight across the barrier
  grid_sync(a.ws.bar, gridDim.x);

  // E: down + combine (moe_down's order) + the residual
  fill_x<BITS, true>(a.ws.h, K * ce, xd, xdsum);
  fill_x<BITS, true>(a.ws.hs, cs, xd + K * ce * G::S, xdsum + K * ce);
  __syncthreads();
  const float sgate = sigmoid(__ldcg(a.ws.sg));
  for (int i = gw; i < H; i += W) {
    if (i != gw) {
      setup_down(i, 0);
      rs[0] = qrow(m.sdown, i, K * ce);
      load_rows<BITS, 1>(rs, lane, cs, ws);
    }
    float acc = 0.0f;
    for (int g0 = 0; g0 < K; g0 += kDownGroup) {
      if (g0 > 0) setup_down(i, g0);
      float d[kDownGroup];
      dot_rows<BITS, kDownGroup>(dr, ce, xd, xdsum, dw, d);
#pragma unroll
      for (int j = 0; j < kDownGroup; ++j)
        if (g0 + j < K) acc = __fmaf_rn(wk[g0 + j], d[j], acc);
    }
    float ds[1];
    dot_rows<BITS, 1>(rs, cs, xd, xdsum, ws, ds);
    acc = __fmaf_rn(sgate, ds[0], acc);
    if (lane == 0) a.x[i] = __fadd_rn(__ldcg(a.x + i), acc);
  }
}

using BlockFn = void (*)(BlockArgs);
BlockFn block_fn(int bits, int rbits) {
  if (bits == 4) return rbits == 8 ? &moe_block_kernel<4, 8> : &moe_block_kernel<4, 4>;
  return rbits == 8 ? &moe_block_kernel<8, 8> : &moe_block_kernel<8, 4>;
}

// Floats of shared memory before the routing scratch: y and the two staged copies of it, or the
// staged down input, whichever is larger.
int64_t route_offset(const MoeBlockWeights& m, int64_t K) {
  const int64_t H = m.gate.cols, Ie = m.gate.rows, Is = m.sgate.rows;
  const int bits = m.gate.bits, rb = m.router.bits;
  const int64_t front = H + static_cast<int64_t>(smem_floats(rb, H) + smem_floats(bits, H));
  return (std::max(front, static_cast<int64_t>(smem_floats(bits, K * Ie + Is))) + 3) / 4 * 4;
}

size_t smem_bytes(const MoeBlockWeights& m, int64_t E, int64_t K) {
  return static_cast<size_t>(route_offset(m, K) + E + (E + K) + K + K) * 4;
}

}  // namespace

int moe_block_grid(const MoeBlockWeights& m, int64_t E, int64_t K, int sms) {
  const DMat& r = m.router;
  const int bits = m.gate.bits, rb = r.bits;
  const int64_t H = m.gate.cols, Ie = m.gate.rows, Is = m.sgate.rows;
  if (!moe_fused_supported(m.gate, m.up, m.down, m.sgate, m.sup, m.sdown, K)) return 0;
  if (!((rb == 4 || rb == 8) && fits(r, rb, H) && !r.tiled && r.rows == E && r.count == 1 &&
        fits(m.shared_gate, rb, H) && !m.shared_gate.tiled && m.shared_gate.rows == 1 && m.shared_gate.count == 1))
    return 0;
  if (!(H % 4 == 0 && H <= int64_t{kMaxUnits} * 4 * kThreads && E >= 1 && E <= 8192 && K >= 1 && K <= E && Ie >= 1 &&
        Is >= 1 && m.norm_w != nullptr))
    return 0;
  const size_t smem = smem_bytes(m, E, K);
  const BlockFn fn = block_fn(bits, rb);
  int max_smem = 0, dev = 0;
  MERE_CUDA_CHECK(cudaGetDevice(&dev));
  MERE_CUDA_CHECK(cudaDeviceGetAttribute(&max_smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  if (smem > static_cast<size_t>(max_smem)) return 0;
  MERE_CUDA_CHECK(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
  int per_sm = 0;
  MERE_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, fn, kThreads, smem));
  if (per_sm < 1) return 0;
  // no more blocks than the widest phase has warps' worth of tasks
  const int64_t tasks = std::max({(Is + kUpRows - 1) / kUpRows + E + 1, K * ((Ie + kUpRows - 1) / kUpRows), H});
  return static_cast<int>(std::min<int64_t>(int64_t{per_sm} * sms, (tasks + kWarps - 1) / kWarps));
}

void moe_block(cudaStream_t s, int grid, const MoeBlockWeights& m, float eps, int64_t E, int64_t K, bool renorm,
               float* x, const MoeBlockScratch& ws) {
  MERE_CHECK(grid >= 1 && ws.bar != nullptr, "cuda moe_block", "no resident grid for these shapes (moe_block_grid)");
  const int route_off = static_cast<int>(route_offset(m, K));
  const BlockArgs a{m, eps, static_cast<int>(E), static_cast<int>(K), renorm, route_off, ws, x};
  const int b8 = m.gate.bits == 8, r8 = m.router.bits == 8;
  static constexpr const char* kNames[2][2] = {{"moe_block_kernel<4,4>", "moe_block_kernel<4,8>"},
                                               {"moe_block_kernel<8,4>", "moe_block_kernel<8,8>"}};
  launch(kNames[b8][r8], block_fn(m.gate.bits, m.router.bits), static_cast<unsigned>(grid), kThreads,
         smem_bytes(m, E, K), s, a);
}

}  // namespace mere::cuda::k
