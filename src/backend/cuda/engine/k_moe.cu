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
#include "backend/cuda/engine/kernels.h"
#include "backend/cuda/launch.cuh"

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

// The down matrices moe_down reads after a routed moe_gate_up (kernels.h moe_route_gate_up's
// `down_l2`): each gate/up block asks the L2 for its share (part of parts) of its expert's down codes,
// scales and biases (the shared expert's block: of the shared down), so moe_down's rows come from the L2.
// A hint only: no value changes. at: 0 none, 1 right after the block's own weights are asked for,
// 2 after its h rows are stored.
struct DownL2 {
  DMat down, sdown;  // the stacked experts' down, the shared expert's
  int at = 0;
};

// A gate/up block of expert `expert` (the shared one: `shared`) asks for its share (thread 0).
__device__ __forceinline__ void prefetch_down(const DownL2& d, bool shared, int64_t expert, int rows) {
  const int parts = (rows + kWarps * kUpRows - 1) / (kWarps * kUpRows), part = static_cast<int>(blockIdx.x);
  if (shared) prefetch_expert_share(d.sdown, 0, part, parts);
  else prefetch_expert_share(d.down, expert, part, parts);
}

// grid (ceil(max(Ie, Is) / (kWarps*kUpRows)), K + 1, T); block k == K is the shared expert.
// ROUTE: each expert block first routes its token with warp 0 (route_token, the moe_route kernel's
// code: the same ids and weights) while the other warps stage x, so no routing launch sits between
// the router matvec and this one; block (0, 0) of the token also writes idx / w for moe_down.
// SETS (kernels.h moe_gate_up's `sets`; rows of at most two chunk sets): each warp asks for its rows'
// chunks and their scales at once (load_sets); else the first set, then the scales and the second set
// as the dot reaches them. The same sums (dot_sets runs dot_rows' per-chunk steps).
template <int BITS, bool ROUTE, bool SETS, bool DL2 = false>
__global__ void __launch_bounds__(kWarps * 32)
    moe_gate_up_kernel(DMat gate, DMat up, DMat sgate, DMat sup, const int32_t* __restrict__ idx,
                       const float* __restrict__ x, int K, float* __restrict__ h, float* __restrict__ hs,
                       RouteIn route, DownL2 dl2) {
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
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int r0 = rb + warp * kUpRows;
  // the rows of expert `expert` (the shared expert's: 0) this warp dots: gate rows, then up rows
  auto qrows = [&](int64_t expert, QRow (&rr)[2 * kUpRows]) {
    const int64_t base = expert * rows, ng = H / 64;
#pragma unroll
    for (int i = 0; i < kUpRows; ++i) {
      const int64_t row = base + min(r0 + i, rows - 1);
      rr[i] = QRow{reinterpret_cast<const uint4*>(gdata) + row * nchunk, gsc + row * ng, gbi + row * ng, 0};
      rr[kUpRows + i] = QRow{reinterpret_cast<const uint4*>(udata) + row * nchunk, usc + row * ng, ubi + row * ng, 0};
    }
  };
  pdl_begin();
  if (rb >= rows) return;  // the whole block
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
  float d[2 * kUpRows];
  QRow rr[2 * kUpRows];
  qrows(expert, rr);
  if constexpr (SETS) {
    RowSets<2 * kUpRows, 2> q;
    load_sets<BITS>(rr, nchunk, q);  // in flight while x is staged
    if (DL2 && dl2.at == 1) prefetch_down(dl2, shared, expert, rows);
    if (!staged) {
      fill_x<BITS>(x + static_cast<int64_t>(t) * H, nchunk, xs, xsum);
      __syncthreads();
    }
    dot_sets<BITS>(rr, nchunk, xs, xsum, q, d);
  } else {
    uint4 wv[2 * kUpRows];
    load_rows<BITS, 2 * kUpRows>(rr, lane, nchunk, wv);  // in flight while x is staged
    if (DL2 && dl2.at == 1) prefetch_down(dl2, shared, expert, rows);
    if (!staged) {
      fill_x<BITS>(x + static_cast<int64_t>(t) * H, nchunk, xs, xsum);
      __syncthreads();
    }
    dot_rows<BITS, 2 * kUpRows>(rr, nchunk, xs, xsum, wv, d);
  }
  // store_pair's arithmetic written out: the call, with its output pointer chosen before it, costs this
  // kernel 16 bytes of spill at 80 registers (ptxas, session 35)
  if (lane < kUpRows && r0 + lane < rows) {
    float gv = d[0], uv = d[kUpRows];
#pragma unroll
    for (int i = 1; i < kUpRows; ++i)
      if (lane == i) gv = d[i], uv = d[kUpRows + i];
    const float v = __fmul_rn(silu(gv), uv);
    if (shared) hs[static_cast<int64_t>(t) * rows + r0 + lane] = v;
    else h[(static_cast<int64_t>(t) * K + k) * rows + r0 + lane] = v;
  }
  if (DL2 && dl2.at == 2) prefetch_down(dl2, shared, expert, rows);
}

// grid (ceil(H / kWarps), T); warp = one output row i. x in shared: h[t] (K*Ie) then hs[t] (Is).
// SETS (kernels.h moe_down's `sets`; rows of one chunk set): the shared expert's row with its scales
// before the PDL wait, each group of expert rows with its scales at once, the routing weights, the
// shared gate and the residual asked for before the barrier; else the scales as the dot reaches them.
// The same sums in the same order.
template <int BITS, bool SETS>
__global__ void __launch_bounds__(kWarps * 32, 2)
    moe_down_kernel(DMat down, DMat sdown, const int32_t* __restrict__ idx, const float* __restrict__ w,
                    const float* __restrict__ sg, const float* __restrict__ h, const float* __restrict__ hs, int K,
                    bool residual, float* __restrict__ out, L2Ahead ahead) {
  using G = Geo<BITS>;
  extern __shared__ float4 smem4[];
  float* xs = reinterpret_cast<float*>(smem4);
  const int H = static_cast<int>(down.rows), Ie = static_cast<int>(down.cols), Is = static_cast<int>(sdown.cols);
  const int ce = Ie / G::E, cs = Is / G::E, nchunk = K * ce + cs;
  float* xsum = xs + nchunk * G::S;
  const int t = blockIdx.y, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int i = min(static_cast<int>(blockIdx.x) * kWarps + warp, H - 1);
  QRow rs[1] = {qrow(sdown, i, K * ce)};
  RowSets<1, 1> qs;
  if constexpr (SETS) load_sets<BITS>(rs, cs, qs);  // weights only, before the wait
  pdl_begin();
  const int32_t* id = idx + t * K;
  QRow rr[kDownGroup];
  uint4 wv[kDownGroup];
  RowSets<kDownGroup, 1> qe;
  float wk[kDownGroup];
  auto setup = [&](int g0) {
#pragma unroll
    for (int m = 0; m < kDownGroup; ++m) {
      const int mm = min(g0 + m, K - 1);
      rr[m] = qrow(down, static_cast<int64_t>(id[mm]) * H + i, mm * ce);
    }
    if constexpr (SETS) {
      load_sets<BITS>(rr, ce, qe);
#pragma unroll
      for (int m = 0; m < kDownGroup; ++m) wk[m] = g0 + m < K ? w[t * K + g0 + m] : 0.0f;
    } else {
      load_rows<BITS, kDownGroup>(rr, lane, ce, wv);
    }
  };
  setup(0);
  uint4 ws[1];
  if constexpr (!SETS) load_rows<BITS, 1>(rs, lane, cs, ws);
  const bool writer = lane == 0 && static_cast<int>(blockIdx.x) * kWarps + warp < H;
  float* o = out + static_cast<int64_t>(t) * H + i;
  float sgt = 0.0f, res = 0.0f;
  if constexpr (SETS) {
    sgt = sg[t];
    if (writer && residual) res = *o;
  }
  fill_x<BITS>(h + static_cast<int64_t>(t) * K * Ie, K * ce, xs, xsum);
  fill_x<BITS>(hs + static_cast<int64_t>(t) * Is, cs, xs + K * ce * G::S, xsum + K * ce);
  l2_ahead(ahead);  // the block's own rows are asked for: later weights (the next layer's inputs) behind them
  __syncthreads();
  float acc = 0.0f;
  for (int g0 = 0; g0 < K; g0 += kDownGroup) {
    if (g0 > 0) setup(g0);
    float d[kDownGroup];
    if constexpr (SETS) {
      dot_sets<BITS>(rr, ce, xs, xsum, qe, d);
#pragma unroll
      for (int m = 0; m < kDownGroup; ++m)
        if (g0 + m < K) acc = __fmaf_rn(wk[m], d[m], acc);
    } else {
      dot_rows<BITS, kDownGroup>(rr, ce, xs, xsum, wv, d);
#pragma unroll
      for (int m = 0; m < kDownGroup; ++m)
        if (g0 + m < K) acc = __fmaf_rn(w[t * K + g0 + m], d[m], acc);
    }
  }
  float ds[1];
  if constexpr (SETS) {
    dot_sets<BITS>(rs, cs, xs, xsum, qs, ds);
  } else {
    dot_rows<BITS, 1>(rs, cs, xs, xsum, ws, ds);
    sgt = sg[t];
    if (writer && residual) res = *o;
  }
  acc = __fmaf_rn(sigmoid(sgt), ds[0], acc);
  if (writer) *o = residual ? __fadd_rn(res, acc) : acc;
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

bool moe_topk_sorted() {
  static const bool v = env_choice("MERE_CUDA_MOE_TOPK", {"sorted", "rounds"}) != 1;
  return v;
}

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
                    const int32_t* idx, const float* x, int64_t T, int64_t K, float* h, float* hs, const RouteIn* route,
                    bool sets, const DownL2& dl2 = DownL2{}) {
  const int64_t rows = std::max(gate.rows, sgate.rows);
  dim3 grid(static_cast<unsigned>((rows + kWarps * kUpRows - 1) / (kWarps * kUpRows)), static_cast<unsigned>(K + 1),
            static_cast<unsigned>(T));
  const size_t smem = (smem_floats(gate.bits, gate.cols) + (route ? static_cast<size_t>(route->E + 2 * K) : 0)) * 4;
  const RouteIn r = route ? *route : RouteIn{};
  const int k = static_cast<int>(K);
  sets = sets && fits_sets(gate.cols * gate.bits / 128, 2);
  auto go = [&](const char* name, auto kernel) {
    launch(name, kernel, grid, kWarps * 32, smem, s, gate, up, sgate, sup, idx, x, k, h, hs, r, dl2);
  };
  if (gate.bits == 4 && route && dl2.at)  // the down matrices asked of the L2 (sets only: the experiment's form)
    sets ? go("moe_gate_up_kernel<4> (routing, down L2)", &moe_gate_up_kernel<4, true, true, true>)
         : go("moe_gate_up_kernel<4> (routing, rows, down L2)", &moe_gate_up_kernel<4, true, false, true>);
  else if (gate.bits == 4 && route)
    sets ? go("moe_gate_up_kernel<4> (routing)", &moe_gate_up_kernel<4, true, true>)
         : go("moe_gate_up_kernel<4> (routing, rows)", &moe_gate_up_kernel<4, true, false>);
  else if (gate.bits == 4)
    sets ? go("moe_gate_up_kernel<4>", &moe_gate_up_kernel<4, false, true>)
         : go("moe_gate_up_kernel<4> (rows)", &moe_gate_up_kernel<4, false, false>);
  else if (route)
    sets ? go("moe_gate_up_kernel<8> (routing)", &moe_gate_up_kernel<8, true, true>)
         : go("moe_gate_up_kernel<8> (routing, rows)", &moe_gate_up_kernel<8, true, false>);
  else
    sets ? go("moe_gate_up_kernel<8>", &moe_gate_up_kernel<8, false, true>)
         : go("moe_gate_up_kernel<8> (rows)", &moe_gate_up_kernel<8, false, false>);
}
}  // namespace

void moe_gate_up(cudaStream_t s, const DMat& gate, const DMat& up, const DMat& sgate, const DMat& sup,
                 const int32_t* idx, const float* x, int64_t T, int64_t K, float* h, float* hs, bool sets) {
  launch_gate_up(s, gate, up, sgate, sup, idx, x, T, K, h, hs, nullptr, sets);
}

bool moe_route_gate_up_supported(const DMat& gate, int64_t E, int64_t K) {
  constexpr size_t kMaxSmem = 48 * 1024;
  return E >= 1 && E <= 8192 && K >= 1 && K <= E &&
         (smem_floats(gate.bits, gate.cols) + static_cast<size_t>(E + 2 * K)) * 4 <= kMaxSmem;
}

void moe_route_gate_up(cudaStream_t s, const DMat& gate, const DMat& up, const DMat& sgate, const DMat& sup,
                       const float* logits, int64_t E, bool renorm, int32_t* idx, float* w, const float* x, int64_t T,
                       int64_t K, float* h, float* hs, bool sets, const DMat* down, const DMat* sdown, int down_l2) {
  MERE_CHECK(moe_route_gate_up_supported(gate, E, K), "cuda moe", "routing gate/up: unsupported experts E ", E,
             " top-k ", K, " or width ", gate.cols);
  MERE_CHECK(down_l2 >= 0 && down_l2 <= 2 &&
                 (down_l2 == 0 || (gate.bits == 4 && down && sdown && down->bits && sdown->bits && !down->tiled &&
                                   !sdown->tiled)),
             "cuda moe", "routing gate/up: down_l2 ", down_l2, " needs 4-bit gate/up and quantised down matrices");
  const RouteIn r{logits, static_cast<int>(E), renorm, idx, w, moe_topk_sorted()};
  DownL2 d;
  if (down_l2) d = DownL2{*down, *sdown, down_l2};
  launch_gate_up(s, gate, up, sgate, sup, idx, x, T, K, h, hs, &r, sets, d);
}

void moe_down(cudaStream_t s, const DMat& down, const DMat& sdown, const int32_t* idx, const float* w, const float* sg,
              const float* h, const float* hs, int64_t T, int64_t K, bool residual, float* out, bool sets,
              const L2Ahead* ahead) {
  dim3 grid(static_cast<unsigned>((down.rows + kWarps - 1) / kWarps), static_cast<unsigned>(T));
  const size_t smem = smem_floats(down.bits, K * down.cols + sdown.cols) * 4;
  sets = sets && fits_sets(down.cols * down.bits / 128, 1) && fits_sets(sdown.cols * down.bits / 128, 1);
  auto go = [&](const char* name, auto kernel) {
    launch(name, kernel, grid, kWarps * 32, smem, s, down, sdown, idx, w, sg, h, hs, static_cast<int>(K), residual,
           out, ahead ? *ahead : L2Ahead{});
  };
  if (down.bits == 4)
    sets ? go("moe_down_kernel<4>", &moe_down_kernel<4, true>)
         : go("moe_down_kernel<4> (rows)", &moe_down_kernel<4, false>);
  else
    sets ? go("moe_down_kernel<8>", &moe_down_kernel<8, true>)
         : go("moe_down_kernel<8> (rows)", &moe_down_kernel<8, false>);
}

void moe_combine(cudaStream_t s, const float* y, const float* w, const float* shared, const float* sg, int64_t T,
                 int64_t K, int64_t H, float* out) {
  dim3 grid(static_cast<unsigned>((H + 255) / 256), static_cast<unsigned>(T));
  launch("moe_combine_kernel", moe_combine_kernel, grid, 256, 0, s, y, w, shared, sg, static_cast<int>(K),
         static_cast<int>(H), out);
}

}  // namespace mere::cuda::k
