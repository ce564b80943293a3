// AVX2/FMA causal GQA attention over the f32 KV cache. Work items are (query row t, kv head): the
// query heads sharing a kv head are processed together so each cached key/value row is loaded once.
// Per (query head, key) the score is an FMA chain over hd then hsum8; softmax in fp32 with a
// vectorised exp; the output is an FMA chain over keys in order. Every step depends only on the
// row's own length, so the result is batch-width invariant. Reference: ops::attention.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "backend/cpu/fast/kernels.h"
#include "backend/cpu/fast/simd_avx2.h"

namespace mere::fast {

using namespace avx2;

namespace {

inline size_t sz(int64_t n) { return static_cast<size_t>(n); }

constexpr int kMaxGroup = 8;  // query heads handled together (larger groups are split)

// ng query heads (q rows, stride hd) against keys [0, len) of one kv head; out rows [ng, hd].
// p: scratch [ng, round_up(len, 8)].
MERE_AVX2 void attend_group(const float* const* q, int ng, const float* k, const float* v, int64_t kstride, int64_t len,
                            int64_t hd, float scale, float* const* out, float* p) {
  const int64_t lp = (len + 7) / 8 * 8;
  // scores
  for (int64_t j = 0; j < len; ++j) {
    const float* kj = k + j * kstride;
    __m256 acc[kMaxGroup];
    for (int g = 0; g < ng; ++g) acc[g] = _mm256_setzero_ps();
    for (int64_t d = 0; d < hd; d += 8) {
      __m256 kv = _mm256_loadu_ps(kj + d);
      for (int g = 0; g < ng; ++g) acc[g] = _mm256_fmadd_ps(_mm256_loadu_ps(q[g] + d), kv, acc[g]);
    }
    for (int g = 0; g < ng; ++g) p[g * lp + j] = hsum8(acc[g]) * scale;
  }
  // softmax per head (padding lanes -> 0)
  float inv[kMaxGroup];
  for (int g = 0; g < ng; ++g) {
    float* pg = p + g * lp;
    for (int64_t j = len; j < lp; ++j) pg[j] = -INFINITY;
    __m256 mx = _mm256_set1_ps(-INFINITY);
    for (int64_t j = 0; j < lp; j += 8) mx = _mm256_max_ps(mx, _mm256_loadu_ps(pg + j));
    const __m256 m = _mm256_set1_ps(hmax8(mx));
    __m256 s = _mm256_setzero_ps();
    for (int64_t j = 0; j < lp; j += 8) {
      __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(pg + j), m));
      _mm256_storeu_ps(pg + j, e);
      s = _mm256_add_ps(s, e);
    }
    inv[g] = 1.0f / hsum8(s);
  }
  // out = sum_j (p_j / sum) v_j, in blocks of 32 output dims
  for (int64_t d0 = 0; d0 < hd; d0 += 32) {
    const int nv = static_cast<int>(std::min<int64_t>(32, hd - d0) / 8);
    for (int g0 = 0; g0 < ng; g0 += 2) {
      const int gn = std::min(2, ng - g0);
      __m256 acc[2][4];
      for (int g = 0; g < 2; ++g)
        for (int c = 0; c < 4; ++c) acc[g][c] = _mm256_setzero_ps();
      for (int64_t j = 0; j < len; ++j) {
        const float* vj = v + j * kstride + d0;
        __m256 w0 = _mm256_set1_ps(p[g0 * lp + j] * inv[g0]);
        __m256 w1 = gn > 1 ? _mm256_set1_ps(p[(g0 + 1) * lp + j] * inv[g0 + 1]) : w0;
        for (int c = 0; c < nv; ++c) {
          __m256 vv = _mm256_loadu_ps(vj + 8 * c);
          acc[0][c] = _mm256_fmadd_ps(w0, vv, acc[0][c]);
          acc[1][c] = _mm256_fmadd_ps(w1, vv, acc[1][c]);
        }
      }
      for (int g = 0; g < gn; ++g)
        for (int c = 0; c < nv; ++c) _mm256_storeu_ps(out[g0 + g] + d0 + 8 * c, acc[g][c]);
    }
  }
}

}  // namespace

void attention_avx2(const AttnArgs& a, ThreadPool& pool) {
  if (a.hd % 8 != 0) return attention_generic(a, pool);
  const int64_t group = a.nh / a.nkv, hd = a.hd, kstride = a.nkv * hd;
  const int64_t splits = (group + kMaxGroup - 1) / kMaxGroup;
  const int64_t items = a.T * a.nkv * splits;
  // later rows are longer: hand them out first
  const double work = double(a.T) * double(a.nh) * double(a.first_len + a.T) * double(hd) * 2.0;
  pool.parallel_for(items, 1, work, 1 << 17, [&](int64_t i0, int64_t i1) {
    thread_local std::vector<float> p;
    for (int64_t ii = i0; ii < i1; ++ii) {
      const int64_t i = items - 1 - ii;
      const int64_t t = i / (a.nkv * splits), rem = i % (a.nkv * splits), kh = rem / splits, sp = rem % splits;
      const int64_t len = a.first_len + t;
      const int64_t h0 = kh * group + sp * kMaxGroup;
      const int ng = static_cast<int>(std::min<int64_t>(kMaxGroup, kh * group + group - h0));
      const float* q[kMaxGroup];
      float* o[kMaxGroup];
      for (int g = 0; g < ng; ++g) {
        q[g] = a.q + (t * a.nh + h0 + g) * hd;
        o[g] = a.out + (t * a.nh + h0 + g) * hd;
      }
      p.resize(sz(ng * ((len + 7) / 8 * 8)));
      attend_group(q, ng, a.k + kh * hd, a.v + kh * hd, kstride, len, hd, a.scale, o, p.data());
    }
  });
}

}  // namespace mere::fast
