// The 4-token blocks of gdn_prefill_c4.cu and gdn_prefill_tc.cu (the math is in gdn_prefill_c4.cu's
// header): each block's coefficients from the staged g and beta and the Gram entries of
// gdn_c4_prepare (gdn_prefill.h), a row's 4 x 4 recurrence, outputs and update coefficients from them,
// and the fold of S = c R's scalar below 2^-60.
#pragma once
#include "backend/cuda/gdn_prefill_stage.cuh"

namespace mere::cuda::gdn_c4 {

constexpr int kCoef = 32;                  // floats of coefficients a block (layout below)
constexpr float kRenorm = 8.6736174e-19f;  // 2^-60

__device__ __forceinline__ float rcp_approx(float x) {
  float r;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
}
// Coefficients of one 4-token block (kCoef floats): [0..3] Γ_j, [4..7] beta_j (0 past the chunk's
// tokens), [8..13] MK01 MK02 MK03 MK12 MK13 MK23 (P_ij k_i.k_j), [14..23] MQ00 MQ01 MQ02 MQ03 MQ11
// MQ12 MQ13 MQ22 MQ23 MQ33 (P_ij k_i.q_j, P_jj = 1), [24..27] UP_i = P_i3 (UP_3 = 1), [28..31] 0.
__device__ inline void block_coefficients(const gdn_stage::Stage& sg, int b, int n, const float* __restrict__ gr,
                                          float* cf) {
  float gm[4], bt[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const int t = 4 * b + j;
    gm[j] = t < n ? expf(sg.g[t]) : 1.0f;  // a token past the chunk: no decay, no update (beta 0)
    bt[j] = t < n ? sg.beta[t] : 0.0f;
  }
  const float4 g0 = __ldg(reinterpret_cast<const float4*>(gr)), g1 = __ldg(reinterpret_cast<const float4*>(gr) + 1),
               g2 = __ldg(reinterpret_cast<const float4*>(gr) + 2), g3 = __ldg(reinterpret_cast<const float4*>(gr) + 3);
  const float P01 = gm[1], P12 = gm[2], P23 = gm[3];
  const float P02 = __fmul_rn(P01, P12), P13 = __fmul_rn(P12, P23), P03 = __fmul_rn(P02, P23);
  const float G0 = gm[0], G1 = __fmul_rn(G0, gm[1]), G2 = __fmul_rn(G1, gm[2]), G3 = __fmul_rn(G2, gm[3]);
  float4* o = reinterpret_cast<float4*>(cf);
  o[0] = make_float4(G0, G1, G2, G3);
  o[1] = make_float4(bt[0], bt[1], bt[2], bt[3]);
  // g0 = KK01 KK02 KK03 KK12, g1 = KK13 KK23 KQ00 KQ01, g2 = KQ02 KQ03 KQ11 KQ12, g3 = KQ13 KQ22 KQ23 KQ33
  o[2] = make_float4(__fmul_rn(P01, g0.x), __fmul_rn(P02, g0.y), __fmul_rn(P03, g0.z), __fmul_rn(P12, g0.w));
  o[3] = make_float4(__fmul_rn(P13, g1.x), __fmul_rn(P23, g1.y), g1.z, __fmul_rn(P01, g1.w));
  o[4] = make_float4(__fmul_rn(P02, g2.x), __fmul_rn(P03, g2.y), g2.z, __fmul_rn(P12, g2.w));
  o[5] = make_float4(__fmul_rn(P13, g3.x), g3.y, __fmul_rn(P23, g3.z), g3.w);
  o[6] = make_float4(P03, P13, P23, 1.0f);
  o[7] = make_float4(0.f, 0.f, 0.f, 0.f);
}

// One block's coefficients as block_coefficients wrote them.
struct BlockCoef {
  float4 Gm, Bt, c2, c3, c4, c5, Up;
};
__device__ __forceinline__ BlockCoef load_block(const float* cf) {
  const float4* q = reinterpret_cast<const float4*>(cf);
  return {q[0], q[1], q[2], q[3], q[4], q[5], q[6]};
}
// cn_j = c Γ_j (S = c R at the block's start)
__device__ __forceinline__ void block_decays(const BlockCoef& k, float c, float (&cn)[4]) {
  cn[0] = __fmul_rn(c, k.Gm.x), cn[1] = __fmul_rn(c, k.Gm.y), cn[2] = __fmul_rn(c, k.Gm.z), cn[3] = __fmul_rn(c, k.Gm.w);
}
// The 4 x 4 recurrence of one row: d_j = beta_j (v_j - m_j), m_j = cn_j A_j + Σ_{i<j} MK_ij d_i
// (a: the row's A_j = R k_j)
__device__ __forceinline__ void block_d(const BlockCoef& k, const float (&cn)[4], const float (&a)[4], const float (&v)[4],
                                        float (&d)[4]) {
  d[0] = __fmul_rn(k.Bt.x, __fsub_rn(v[0], __fmul_rn(cn[0], a[0])));
  d[1] = __fmul_rn(k.Bt.y, __fsub_rn(v[1], __fmaf_rn(k.c2.x, d[0], __fmul_rn(cn[1], a[1]))));
  d[2] = __fmul_rn(k.Bt.z, __fsub_rn(v[2], __fmaf_rn(k.c2.w, d[1], __fmaf_rn(k.c2.y, d[0], __fmul_rn(cn[2], a[2])))));
  d[3] = __fmul_rn(k.Bt.w,
                   __fsub_rn(v[3], __fmaf_rn(k.c3.y, d[2], __fmaf_rn(k.c3.x, d[1], __fmaf_rn(k.c2.z, d[0], __fmul_rn(cn[3], a[3]))))));
}
// The row's outputs o_j = cn_j B_j + Σ_{i<=j} MQ_ij d_i (b: B_j = R q_j; c3.z = MQ00, c3.w = MQ01, c4 =
// MQ02 MQ03 MQ11 MQ12, c5 = MQ13 MQ22 MQ23 MQ33)
__device__ __forceinline__ void block_o(const BlockCoef& k, const float (&cn)[4], const float (&b)[4], const float (&d)[4],
                                        float (&o)[4]) {
  o[0] = __fmaf_rn(k.c3.z, d[0], __fmul_rn(cn[0], b[0]));
  o[1] = __fmaf_rn(k.c4.z, d[1], __fmaf_rn(k.c3.w, d[0], __fmul_rn(cn[1], b[1])));
  o[2] = __fmaf_rn(k.c5.y, d[2], __fmaf_rn(k.c4.w, d[1], __fmaf_rn(k.c4.x, d[0], __fmul_rn(cn[2], b[2]))));
  o[3] = __fmaf_rn(k.c5.w, d[3], __fmaf_rn(k.c5.z, d[2], __fmaf_rn(k.c5.x, d[1], __fmaf_rn(k.c4.y, d[0], __fmul_rn(cn[3], b[3])))));
}
// The update's coefficients of the row, f_j = P_j3 d_j scale (scale = 1 / c', or 1 when c' folds into R)
__device__ __forceinline__ void block_f(const BlockCoef& k, const float (&d)[4], float scale, float (&f)[4]) {
  f[0] = __fmul_rn(__fmul_rn(k.Up.x, d[0]), scale);
  f[1] = __fmul_rn(__fmul_rn(k.Up.y, d[1]), scale);
  f[2] = __fmul_rn(__fmul_rn(k.Up.z, d[2]), scale);
  f[3] = __fmul_rn(d[3], scale);
}

}  // namespace mere::cuda::gdn_c4
