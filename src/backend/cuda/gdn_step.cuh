// The GatedDeltaNet decode step of one S row (gdn.h), shared by gdn_decode (gdn.cu) and the
// engine's step + gated norm launch (engine/k_gdn.cu), so both give bitwise the same o and state.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>

namespace mere::cuda::gdn {

constexpr int kD = 128;  // Dk = Dv of every Qwen3.5 size; 64 (the bundled tiny models) also runs

// A row of D floats is D / 4 lanes' float4s: a whole warp at D = 128, half a warp at D = 64 (two rows
// a warp, each summed within its own 16 lanes).
template <int D>
constexpr int kRowLanes = D / 4;

// Sum over each group of L lanes (L = 32: the whole warp, the butterfly of every release so far).
template <int L = 32>
__device__ __forceinline__ float warp_sum(float v) {
  static_assert(L == 32 || L == 16, "a row is a warp or half a warp");
#pragma unroll
  for (int off = L / 2; off > 0; off >>= 1) v = __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, off));
  return v;
}

__device__ __forceinline__ float dot4(const float4& a, const float4& b) {
  return __fmaf_rn(a.w, b.w, __fmaf_rn(a.z, b.z, __fmaf_rn(a.y, b.y, __fmul_rn(a.x, b.x))));
}

// Loads of the step's inputs: through the read-only path (kL2 false: inputs written by an earlier
// launch), or through the L2 (kL2 true: inputs written by other blocks of the same launch before a
// grid barrier, engine/k_gdn_block.cu). The values are the same either way.
template <bool kL2, class V>
__device__ __forceinline__ V ld_in(const V* p) {
  if constexpr (kL2) return __ldcg(p);
  else return __ldg(p);
}

// One token's inputs of a row step (loaded a token ahead of its use: row_step).
struct StepIn {
  float4 k, q;
  float g, beta, v;
};
template <bool kL2, int D>
__device__ __forceinline__ StepIn load_step(const float* q, const float* k, const float* v, const float* g,
                                            const float* beta, int t, int Hk, int Hv, int h, int kh, int i, int lane) {
  StepIn in;
  in.k = ld_in<kL2>(reinterpret_cast<const float4*>(k + (static_cast<size_t>(t) * Hk + kh) * D) + lane);
  in.q = ld_in<kL2>(reinterpret_cast<const float4*>(q + (static_cast<size_t>(t) * Hk + kh) * D) + lane);
  in.g = ld_in<kL2>(g + t * Hv + h);
  in.beta = ld_in<kL2>(beta + t * Hv + h);
  in.v = ld_in<kL2>(v + (static_cast<size_t>(t) * Hv + h) * D + i);
  return in;
}
// kRowLanes<D> lanes (`lane` = 0..kRowLanes - 1 within them), row `row` = h * D + i of S ([Hv, Dv, Dk],
// Dk = Dv = D) for T tokens in order, a float4 a lane (every lane of the warp must call it: the sums
// shuffle over the whole warp):
// S <- e^g S; m = S k; d = beta (v_i - m); S <- S + d k^T; o_i = S q. Lane 0 stores o[t, h, i].
// Token t + 1's inputs are loaded before token t's arithmetic (two named buffers, each refilled only
// after its last use and never under a branch: no register moves that wait for a load), so a
// width-T pass waits for one load latency instead of T (session 27; the arithmetic is unchanged).
// row_step_from: the same with the lane's float4 of the row already loaded (s = its value in S; gdn_decode
// may load it before its PDL wait: S is written by no launch of the pass before the step's own).
template <bool kL2 = false, int D = kD>
__device__ __forceinline__ void row_step_from(float4 s, float* __restrict__ S, const float* __restrict__ q,
                                              const float* __restrict__ k, const float* __restrict__ v,
                                              const float* __restrict__ g, const float* __restrict__ beta, int T,
                                              int Hk, int Hv, int row, int lane, float* __restrict__ o) {
  constexpr int L = kRowLanes<D>;
  const int h = row / D, i = row - h * D;
  const int kh = h / (Hv / Hk);
  float4* srow = reinterpret_cast<float4*>(S + static_cast<size_t>(row) * D) + lane;
  if (T < 1) return;  // nothing to step (the first load below reads token 0)
  auto step = [&](const StepIn& in, int t) {
    const float decay = expf(in.g);
    s.x = __fmul_rn(s.x, decay);
    s.y = __fmul_rn(s.y, decay);
    s.z = __fmul_rn(s.z, decay);
    s.w = __fmul_rn(s.w, decay);
    const float m = warp_sum<L>(dot4(s, in.k));
    const float d = __fmul_rn(in.beta, __fsub_rn(in.v, m));
    s.x = __fmaf_rn(d, in.k.x, s.x);
    s.y = __fmaf_rn(d, in.k.y, s.y);
    s.z = __fmaf_rn(d, in.k.z, s.z);
    s.w = __fmaf_rn(d, in.k.w, s.w);
    const float oi = warp_sum<L>(dot4(s, in.q));
    if (lane == 0) o[(static_cast<size_t>(t) * Hv + h) * D + i] = oi;
  };
  StepIn a = load_step<kL2, D>(q, k, v, g, beta, 0, Hk, Hv, h, kh, i, lane), b;
  if (T == 1) {  // a decode step: nothing to load ahead
    step(a, 0);
    *srow = s;
    return;
  }
  for (int t = 0; t < T; t += 2) {
    // past the end: re-read, unused
    b = load_step<kL2, D>(q, k, v, g, beta, min(t + 1, T - 1), Hk, Hv, h, kh, i, lane);
    step(a, t);
    if (t + 1 >= T) break;
    a = load_step<kL2, D>(q, k, v, g, beta, min(t + 2, T - 1), Hk, Hv, h, kh, i, lane);
    step(b, t + 1);
  }
  *srow = s;
}

template <bool kL2 = false, int D = kD>
__device__ __forceinline__ void row_step(float* __restrict__ S, const float* __restrict__ q,
                                         const float* __restrict__ k, const float* __restrict__ v,
                                         const float* __restrict__ g, const float* __restrict__ beta, int T, int Hk,
                                         int Hv, int row, int lane, float* __restrict__ o) {
  if (T < 1) return;
  const float4 s = reinterpret_cast<const float4*>(S + static_cast<size_t>(row) * D)[lane];
  row_step_from<kL2, D>(s, S, q, k, v, g, beta, T, Hk, Hv, row, lane, o);
}

}  // namespace mere::cuda::gdn
