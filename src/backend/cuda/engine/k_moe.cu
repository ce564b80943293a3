// MoE routing and the selected-expert FFN on the device (mirrors Qwen35Model::ffn_block).
//  * moe_route: a warp per token: softmax over the router logits in fp32, top-k by probability with
//    the lowest index first on ties, renormalised (the CPU's semantics), nothing on the host.
//  * moe_gate_up: ONE launch for the gate and up rows of all K selected experts and of the shared
//    expert (expert ids read on the device), SwiGLU fused: h[t,k,r] = silu(g) * u.
//  * moe_down: ONE launch for the down rows of all K experts and the shared expert, combined in a
//    fixed order (sum_k w_k y_k, then + sigmoid(sg) * shared) and optionally added to the residual.
// The quantised dot products follow qmatvec's contract (k_moe_common.cuh). Every value depends on
// its own token's data only, in an order fixed by the shapes: a T-row call gives every row bitwise
// the T=1 result.
#include <algorithm>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/env_choice.h"
#include "backend/cuda/engine/k_math.cuh"
#include "backend/cuda/engine/k_moe_common.cuh"
#include "backend/cuda/engine/k_norm.cuh"
#include "backend/cuda/engine/kernels.h"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/qmatvec_prep.cuh"

namespace mere::cuda::k {
namespace {

__global__ void __launch_bounds__(kRouteThreads)
    moe_route_kernel(const float* __restrict__ logits, int E, int K, bool renorm, int32_t* __restrict__ idx,
                     float* __restrict__ w, bool sorted) {
  pdl_begin();
  extern __shared__ float p[];  // [E] probabilities, then [K] the selected ones
  const int t = blockIdx.x;
  route_token(logits + static_cast<int64_t>(t) * E, E, K, renorm, p, nullptr, idx + t * K, w + t * K, sorted);
}

// MERE_CUDA_MOE_TOPK=sorted|rounds: the top-k of the routing inside moe_gate_up (route_token's two
// forms; the same ids and weights). Unset: sorted. Read once per process.
bool topk_sorted() {
  static const bool v = env_choice("MERE_CUDA_MOE_TOPK", {"sorted", "rounds"}) != 1;
  return v;
}

// The routing inputs of a moe_gate_up that routes its own token (ROUTE): the router logits [T, E],
// and where block (0, 0) of each token writes the ids and weights moe_down reads.
struct RouteIn {
  const float* logits;
  int E;
  bool renorm;
  int32_t* idx;
  float* w;
  bool sorted;  // route_token's top-k form
};

// grid (ceil(max(Ie, Is) / (kWarps*kUpRows)), K + 1, T); block k == K is the shared expert.
// ROUTE: each expert block first routes its token with warp 0 (route_token, the moe_route kernel's
// code: the same ids and weights) while the other warps stage x, so no routing launch sits between
// the router matvec and this one; block (0, 0) of the token also writes idx / w for moe_down.
template <int BITS, bool ROUTE>
__global__ void __launch_bounds__(kWarps * 32)
    moe_gate_up_kernel(DMat gate, DMat up, DMat sgate, DMat sup, const int32_t* __restrict__ idx,
                       const float* __restrict__ x, int K, float* __restrict__ h, float* __restrict__ hs,
                       RouteIn route) {
  pdl_begin();
  using G = Geo<BITS>;
  extern __shared__ float4 smem4[];
  float* xs = reinterpret_cast<float*>(smem4);
  const int H = static_cast<int>(gate.cols), nchunk = H / G::E;
  float* xsum = xs + nchunk * G::S;
  const int k = blockIdx.y, t = blockIdx.z;
  const bool shared = k == K;
  // per-field selects (a reference to either parameter struct would copy both to the stack)
  const int rows = static_cast<int>(shared ? sgate.rows : gate.rows);
  const void* gdata = shared ? sgate.data : gate.data;
  const uint16_t* gsc = shared ? sgate.scales : gate.scales;
  const uint16_t* gbi = shared ? sgate.biases : gate.biases;
  const void* udata = shared ? sup.data : up.data;
  const uint16_t* usc = shared ? sup.scales : up.scales;
  const uint16_t* ubi = shared ? sup.biases : up.biases;
  const int rb = blockIdx.x * kWarps * kUpRows;
  if (rb >= rows) return;  // the whole block
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  bool staged = false;
  int64_t expert = 0;
  if constexpr (ROUTE) {
    if (!shared) {  // route with warp 0 (p, sidx after x in shared memory), stage x with the others
      float* p = xsum + nchunk;
      int32_t* sidx = reinterpret_cast<int32_t*>(p + route.E + K);
      const bool writer = blockIdx.x == 0 && k == 0;
      if (warp == 0)
        route_token(route.logits + static_cast<int64_t>(t) * route.E, route.E, K, route.renorm, p, sidx,
                    writer ? route.idx + t * K : nullptr, writer ? route.w + t * K : nullptr, route.sorted);
      else
        fill_x<BITS>(x + static_cast<int64_t>(t) * H, nchunk, xs, xsum, 32);
      __syncthreads();
      expert = sidx[k];
      staged = true;
    }
  }
  if (!ROUTE && !shared) expert = idx[t * K + k];
  const int64_t base = expert * rows;
  const int r0 = rb + warp * kUpRows;
  QRow rr[2 * kUpRows];
#pragma unroll
  for (int i = 0; i < kUpRows; ++i) {
    const int r = min(r0 + i, rows - 1);
    const int64_t row = base + r, ng = H / 64;
    rr[i] = QRow{reinterpret_cast<const uint4*>(gdata) + row * nchunk, gsc + row * ng, gbi + row * ng, 0};
    rr[kUpRows + i] = QRow{reinterpret_cast<const uint4*>(udata) + row * nchunk, usc + row * ng, ubi + row * ng, 0};
  }
  uint4 wv[2 * kUpRows];
  load_rows<BITS, 2 * kUpRows>(rr, lane, nchunk, wv);  // in flight while x is staged
  if (!staged) {
    fill_x<BITS>(x + static_cast<int64_t>(t) * H, nchunk, xs, xsum);
    __syncthreads();
  }
  float d[2 * kUpRows];
  dot_rows<BITS, 2 * kUpRows>(rr, nchunk, xs, xsum, wv, d);
  if (lane < kUpRows && r0 + lane < rows) {
    float gv = d[0], uv = d[kUpRows];
#pragma unroll
    for (int i = 1; i < kUpRows; ++i)
      if (lane == i) gv = d[i], uv = d[kUpRows + i];
    const float v = __fmul_rn(silu(gv), uv);
    if (shared) hs[static_cast<int64_t>(t) * rows + r0 + lane] = v;
    else h[(static_cast<int64_t>(t) * K + k) * rows + r0 + lane] = v;
  }
}

// The next RMSNorm + prepare, run by the last block of a token's moe_down (MoeDownNext; norm_w null:
// none): rms_norm_v4's row order (k_norm.cuh), x read back through the L2, y and the prepared layout L
// written whole by one block (the same bits as rms_norm_prep's cluster: each group's prepare depends on
// its own values only); tickets[t] counts the token's finished blocks and is reset by the last one.
struct NextNormArgs {
  const float* norm_w;
  float eps;
  float* y;
  int bits;
  prep::Layout L;
  unsigned* tickets;
};

constexpr int kNextUnits = 8;  // float4 units of x a thread holds: H <= 8192

__device__ __forceinline__ void next_norm(const float* __restrict__ xrow, int H, int t, const NextNormArgs& nx) {
  __shared__ bool last;
  __syncthreads();  // every row of this block is stored
  if (threadIdx.x == 0) {
    __threadfence();  // the block's rows, before the ticket that may let the last block read them
    last = atomicAdd(nx.tickets + t, 1u) == gridDim.x - 1;
  }
  __syncthreads();
  if (!last) return;
  __threadfence();
  const float4* x4 = reinterpret_cast<const float4*>(xrow);
  const float4* w4 = reinterpret_cast<const float4*>(nx.norm_w);
  float4* y4 = reinterpret_cast<float4*>(nx.y + static_cast<int64_t>(t) * H);
  const int n4 = H / 4;
  float4 v[kNextUnits];
  float ss = 0.0f;  // load_units_sumsq's order, the other blocks' rows through the L2
#pragma unroll
  for (int k = 0; k < kNextUnits; ++k) {
    const int i = static_cast<int>(threadIdx.x) + k * kNormThreads;
    if (i < n4) {
      v[k] = __ldcg(x4 + i);
      ss = __fmaf_rn(v[k].x, v[k].x, ss);
      ss = __fmaf_rn(v[k].y, v[k].y, ss);
      ss = __fmaf_rn(v[k].z, v[k].z, ss);
      ss = __fmaf_rn(v[k].w, v[k].w, ss);
    }
  }
  const float r = row_inv_rms(ss, H, nx.eps);
#pragma unroll
  for (int k = 0; k < kNextUnits; ++k) {
    const int i = static_cast<int>(threadIdx.x) + k * kNormThreads;
    if (i < n4) y4[i] = norm_unit(v[k], r, w4[i]);
  }
  __syncthreads();  // y is written: the prepare reads it back from the L2
  const float* yr = nx.y + static_cast<int64_t>(t) * H;
  if (nx.bits == 4) prep::prepare_block<4>([yr](int c) { return __ldcg(yr + c); }, t, 0, H, nx.L);
  else prep::prepare_block<8>([yr](int c) { return __ldcg(yr + c); }, t, 0, H, nx.L);
  if (threadIdx.x == 0) nx.tickets[t] = 0;  // for the next launch (stream order)
}

// grid (ceil(H / (kWarps * RPW)), T); RPW = 1: a warp an output row i; RPW = 2 (experts' and shared
// expert's rows of at most 16 chunks): a half-warp a row, the same bits (dot_rows<.., 16>). x in shared:
// h[t] (K*Ie) then hs[t] (Is). nx.norm_w set (residual only): the token's last block then runs the
// next RMSNorm + prepare.
template <int BITS, int RPW>
__global__ void __launch_bounds__(kWarps * 32, 2)
    moe_down_kernel(DMat down, DMat sdown, const int32_t* __restrict__ idx, const float* __restrict__ w,
                    const float* __restrict__ sg, const float* __restrict__ h, const float* __restrict__ hs, int K,
                    bool residual, float* __restrict__ out, NextNormArgs nx) {
  pdl_begin();
  using G = Geo<BITS>;
  constexpr int kLanes = 32 / RPW;
  extern __shared__ float4 smem4[];
  float* xs = reinterpret_cast<float*>(smem4);
  const int H = static_cast<int>(down.rows), Ie = static_cast<int>(down.cols), Is = static_cast<int>(sdown.cols);
  const int ce = Ie / G::E, cs = Is / G::E, nchunk = K * ce + cs;
  float* xsum = xs + nchunk * G::S;
  const int t = blockIdx.y, warp = threadIdx.x >> 5, lane = threadIdx.x & (kLanes - 1);
  const int row = (static_cast<int>(blockIdx.x) * kWarps + warp) * RPW + (static_cast<int>(threadIdx.x & 31) / kLanes);
  const int i = min(row, H - 1);
  const int32_t* id = idx + t * K;
  QRow rr[kDownGroup];
  uint4 wv[kDownGroup];
  auto setup = [&](int g0) {
#pragma unroll
    for (int m = 0; m < kDownGroup; ++m) {
      const int mm = min(g0 + m, K - 1);
      rr[m] = qrow(down, static_cast<int64_t>(id[mm]) * H + i, mm * ce);
    }
    load_rows<BITS, kDownGroup>(rr, lane, ce, wv);
  };
  setup(0);
  QRow rs[1] = {qrow(sdown, i, K * ce)};
  uint4 ws[1];
  load_rows<BITS, 1>(rs, lane, cs, ws);
  fill_x<BITS>(h + static_cast<int64_t>(t) * K * Ie, K * ce, xs, xsum);
  fill_x<BITS>(hs + static_cast<int64_t>(t) * Is, cs, xs + K * ce * G::S, xsum + K * ce);
  __syncthreads();
  float acc = 0.0f;
  for (int g0 = 0; g0 < K; g0 += kDownGroup) {
    if (g0 > 0) setup(g0);
    float d[kDownGroup];
    dot_rows<BITS, kDownGroup, kLanes>(rr, ce, xs, xsum, wv, d);
#pragma unroll
    for (int m = 0; m < kDownGroup; ++m)
      if (g0 + m < K) acc = __fmaf_rn(w[t * K + g0 + m], d[m], acc);
  }
  float ds[1];
  dot_rows<BITS, 1, kLanes>(rs, cs, xs, xsum, ws, ds);
  const float s = sigmoid(sg[t]);
  acc = __fmaf_rn(s, ds[0], acc);
  if (lane == 0 && row < H) {
    float* o = out + static_cast<int64_t>(t) * H + i;
    *o = residual ? __fadd_rn(*o, acc) : acc;
  }
  if (nx.norm_w) next_norm(out + static_cast<int64_t>(t) * H, H, t, nx);
}

__global__ void moe_combine_kernel(const float* y, const float* w, const float* shared, const float* sg, int K, int H,
                                   float* out) {
  pdl_begin();
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  const int t = blockIdx.y;
  if (i >= H) return;
  float acc = 0.0f;
  for (int k = 0; k < K; ++k) acc = __fmaf_rn(w[t * K + k], y[(static_cast<int64_t>(t) * K + k) * H + i], acc);
  const float s = sigmoid(sg[t]);
  out[static_cast<int64_t>(t) * H + i] = __fmaf_rn(s, shared[static_cast<int64_t>(t) * H + i], acc);
}

}  // namespace

void moe_route(cudaStream_t s, const float* logits, int64_t T, int64_t E, int64_t K, bool renorm, int32_t* idx,
               float* w, bool sorted) {
  MERE_CHECK(E >= 1 && E <= 8192 && K >= 1 && K <= E, "cuda moe", "unsupported experts: E ", E, " top-k ", K);
  launch("moe_route_kernel", moe_route_kernel, static_cast<unsigned>(T), kRouteThreads,
         static_cast<size_t>(E + K) * sizeof(float), s, logits, static_cast<int>(E), static_cast<int>(K), renorm, idx, w,
         sorted);
}

bool moe_fused_supported(const DMat& gate, const DMat& up, const DMat& down, const DMat& sgate, const DMat& sup,
                         const DMat& sdown, int64_t K) {
  const int bits = gate.bits;
  if (bits != 4 && bits != 8) return false;
  if (gate.tiled || up.tiled || down.tiled || sgate.tiled || sup.tiled || sdown.tiled) return false;  // MLX only
  const int64_t H = gate.cols, Ie = gate.rows, Is = sgate.rows;
  if (!(fits(gate, bits, H) && fits(up, bits, H) && fits(sgate, bits, H) && fits(sup, bits, H) &&
        fits(down, bits, Ie) && fits(sdown, bits, Is) && up.rows == Ie && sup.rows == Is && down.rows == H &&
        sdown.rows == H))
    return false;
  constexpr size_t kMaxSmem = 48 * 1024;
  return smem_floats(bits, H) * 4 <= kMaxSmem && smem_floats(bits, K * Ie + Is) * 4 <= kMaxSmem && K <= 1024 &&
         H < (int64_t{1} << 30);
}

namespace {
void launch_gate_up(cudaStream_t s, const DMat& gate, const DMat& up, const DMat& sgate, const DMat& sup,
                    const int32_t* idx, const float* x, int64_t T, int64_t K, float* h, float* hs, const RouteIn* route) {
  const int64_t rows = std::max(gate.rows, sgate.rows);
  dim3 grid(static_cast<unsigned>((rows + kWarps * kUpRows - 1) / (kWarps * kUpRows)), static_cast<unsigned>(K + 1),
            static_cast<unsigned>(T));
  const size_t smem = (smem_floats(gate.bits, gate.cols) + (route ? static_cast<size_t>(route->E + 2 * K) : 0)) * 4;
  const RouteIn r = route ? *route : RouteIn{};
  const int k = static_cast<int>(K);
  if (gate.bits == 4 && route)
    launch("moe_gate_up_kernel<4> (routing)", &moe_gate_up_kernel<4, true>, grid, kWarps * 32, smem, s, gate, up,
           sgate, sup, idx, x, k, h, hs, r);
  else if (gate.bits == 4)
    launch("moe_gate_up_kernel<4>", &moe_gate_up_kernel<4, false>, grid, kWarps * 32, smem, s, gate, up, sgate, sup,
           idx, x, k, h, hs, r);
  else if (route)
    launch("moe_gate_up_kernel<8> (routing)", &moe_gate_up_kernel<8, true>, grid, kWarps * 32, smem, s, gate, up,
           sgate, sup, idx, x, k, h, hs, r);
  else
    launch("moe_gate_up_kernel<8>", &moe_gate_up_kernel<8, false>, grid, kWarps * 32, smem, s, gate, up, sgate, sup,
           idx, x, k, h, hs, r);
}
}  // namespace

void moe_gate_up(cudaStream_t s, const DMat& gate, const DMat& up, const DMat& sgate, const DMat& sup,
                 const int32_t* idx, const float* x, int64_t T, int64_t K, float* h, float* hs) {
  launch_gate_up(s, gate, up, sgate, sup, idx, x, T, K, h, hs, nullptr);
}

bool moe_route_gate_up_supported(const DMat& gate, int64_t E, int64_t K) {
  constexpr size_t kMaxSmem = 48 * 1024;
  return E >= 1 && E <= 8192 && K >= 1 && K <= E &&
         (smem_floats(gate.bits, gate.cols) + static_cast<size_t>(E + 2 * K)) * 4 <= kMaxSmem;
}

void moe_route_gate_up(cudaStream_t s, const DMat& gate, const DMat& up, const DMat& sgate, const DMat& sup,
                       const float* logits, int64_t E, bool renorm, int32_t* idx, float* w, const float* x, int64_t T,
                       int64_t K, float* h, float* hs) {
  MERE_CHECK(moe_route_gate_up_supported(gate, E, K), "cuda moe", "routing gate/up: unsupported experts E ", E,
             " top-k ", K, " or width ", gate.cols);
  const RouteIn r{logits, static_cast<int>(E), renorm, idx, w, topk_sorted()};
  launch_gate_up(s, gate, up, sgate, sup, idx, x, T, K, h, hs, &r);
}

bool moe_down_next_supported(int64_t H, const float* x, const float* norm_w, const float* y) {
  auto al = [](const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; };
  return H % 64 == 0 && H <= int64_t{kNextUnits} * 4 * kNormThreads && al(x) && al(norm_w) && al(y);
}

void moe_down(cudaStream_t s, const DMat& down, const DMat& sdown, const int32_t* idx, const float* w, const float* sg,
              const float* h, const float* hs, int64_t T, int64_t K, bool residual, float* out,
              const MoeDownNext* next, int rows_per_warp) {
  MERE_CHECK(rows_per_warp == 1 || rows_per_warp == 2, "moe_down", "rows a warp: expected 1 or 2, got ", rows_per_warp);
  static_assert(kWarps * 32 == kNormThreads, "the last block runs the norm in rms_norm_v4's thread layout");
  const size_t smem = smem_floats(down.bits, K * down.cols + sdown.cols) * 4;
  NextNormArgs nx{};
  if (next) {
    MERE_CHECK(residual && (next->bits == 4 || next->bits == 8) && next->tickets &&
                   moe_down_next_supported(down.rows, out, next->norm_w, next->y),
               "moe_down", "the next norm needs the residual form, 4 or 8 bits, tickets, 16-byte aligned rows and a "
               "width divisible by 64 up to ", kNextUnits * 4 * kNormThreads, ", got width ", down.rows);
    nx = NextNormArgs{next->norm_w, next->eps, next->y, next->bits,
                      prep::producer_layout(next->ws, T, down.rows, next->bits), next->tickets};
  }
  const int64_t E = 128 / down.bits;
  const int rpw = down.cols / E <= 16 && sdown.cols / E <= 16 ? rows_per_warp : 1;
  const dim3 grid(static_cast<unsigned>((down.rows + kWarps * rpw - 1) / (kWarps * rpw)), static_cast<unsigned>(T));
  auto fn = down.bits == 4 ? (rpw == 2 ? &moe_down_kernel<4, 2> : &moe_down_kernel<4, 1>)
                           : (rpw == 2 ? &moe_down_kernel<8, 2> : &moe_down_kernel<8, 1>);
  launch(down.bits == 4 ? "moe_down_kernel<4>" : "moe_down_kernel<8>", fn, grid, kWarps * 32, smem, s, down, sdown, idx,
         w, sg, h, hs, static_cast<int>(K), residual, out, nx);
}

void moe_combine(cudaStream_t s, const float* y, const float* w, const float* shared, const float* sg, int64_t T,
                 int64_t K, int64_t H, float* out) {
  dim3 grid(static_cast<unsigned>((H + 255) / 256), static_cast<unsigned>(T));
  launch("moe_combine_kernel", moe_combine_kernel, grid, 256, 0, s, y, w, shared, sg, static_cast<int>(K),
         static_cast<int>(H), out);
}

}  // namespace mere::cuda::k
