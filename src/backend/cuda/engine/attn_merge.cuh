// The split attention's span merge (attn_combine_kernel, k::combine_gate_prep): one (token, head)'s
// spans each hold o[hd], m (the span's max score, -inf when it saw no position) and l (its sum of
// exp(score - m)); out[d] = sum_s o_s[d] exp(m_s - M) / L with M = max_s m_s, L = sum_s l_s exp(m_s - M),
// every sum in span order. Both launches use these, so their results are the same bits.
#pragma once

namespace mere::cuda::k {

// M and L of the spans at base ([spans][hd + 2])
__device__ __forceinline__ void span_merge_scale(const float* base, int spans, int hd, float* M_out, float* L_out) {
  float M = -INFINITY;
  for (int s = 0; s < spans; ++s) M = fmaxf(M, base[s * (hd + 2) + hd]);
  float L = 0.0f;
  for (int s = 0; s < spans; ++s) {
    const float ms = base[s * (hd + 2) + hd];
    if (ms != -INFINITY) L = __fmaf_rn(base[s * (hd + 2) + hd + 1], expf(ms - M), L);
  }
  *M_out = M;
  *L_out = L;
}

}  // namespace mere::cuda::k
