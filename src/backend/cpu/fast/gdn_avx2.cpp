// AVX2/FMA GatedDeltaNet, split by value head across the pool. Recurrent: one fused pass per
// state row (decay, read m = S k, delta write, o = S q) so S is read and written once per token.
// Chunked (qwen35.md §3.5.1): per chunk the WY/UT form as ops::gdn_chunked, with the matrix
// products done by a 4x16 fp32 micro-kernel (C = A B, B row-major) on transposed operands.
// References: ops::gdn_step, ops::gdn_chunked (tests/ops/).
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

// One recurrent step for one head. S: [Dv, Dk]; q, k: [Dk]; v, o: [Dv]. Dk % 8 == 0.
// Per state row: m = e^g (S_i . k) (read only), d = beta (v_i - m), S_i = e^g S_i + d k (one store),
// o_i = S_i . q. Four rows at a time for independent FMA chains; the per-row sequence is the same
// for every row count, so T steps in one call equal T calls of one step, bitwise.
template <int R>
MERE_AVX2_INLINE void gdn_rows(float* S, const float* q, const float* k, const float* v, __m256 decay, float fdecay,
                               float beta, int64_t Dk, float* o) {
  __m256 m[R], a[R], d[R];
  for (int r = 0; r < R; ++r) m[r] = _mm256_setzero_ps();
  for (int64_t j = 0; j < Dk; j += 8) {
    const __m256 kj = _mm256_loadu_ps(k + j);
    for (int r = 0; r < R; ++r) m[r] = _mm256_fmadd_ps(_mm256_loadu_ps(S + r * Dk + j), kj, m[r]);
  }
  for (int r = 0; r < R; ++r) {
    d[r] = _mm256_set1_ps(beta * (v[r] - fdecay * hsum8(m[r])));
    a[r] = _mm256_setzero_ps();
  }
  for (int64_t j = 0; j < Dk; j += 8) {
    const __m256 kj = _mm256_loadu_ps(k + j), qj = _mm256_loadu_ps(q + j);
    for (int r = 0; r < R; ++r) {
      const __m256 sv = _mm256_fmadd_ps(d[r], kj, _mm256_mul_ps(_mm256_loadu_ps(S + r * Dk + j), decay));
      _mm256_storeu_ps(S + r * Dk + j, sv);
      a[r] = _mm256_fmadd_ps(sv, qj, a[r]);
    }
  }
  for (int r = 0; r < R; ++r) o[r] = hsum8(a[r]);
}

MERE_AVX2 void gdn_step_head(float* S, const float* q, const float* k, const float* v, float g, float beta, int64_t Dk,
                             int64_t Dv, float* o) {
  const float fdecay = std::exp(g);
  const __m256 decay = _mm256_set1_ps(fdecay);
  int64_t i = 0;
  for (; i + 4 <= Dv; i += 4) gdn_rows<4>(S + i * Dk, q, k, v + i, decay, fdecay, beta, Dk, o + i);
  for (; i < Dv; ++i) gdn_rows<1>(S + i * Dk, q, k, v + i, decay, fdecay, beta, Dk, o + i);
}

// C[M, N] = (accumulate ? C : 0) + A[M, K] B[K, N]; row-major with leading dims. kmax_of_row (optional):
// rows i only use k < kmax_of_row(i) (lower-triangular A); blocks use the block's largest bound.
MERE_AVX2 void mm_nn(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B, int64_t ldb, float* C,
                     int64_t ldc, bool accumulate, bool lower_a = false) {
  int64_t i = 0;
  for (; i < M; i += 4) {
    const int64_t mr = std::min<int64_t>(4, M - i);
    const int64_t kend = lower_a ? std::min(K, i + mr) : K;
    int64_t j = 0;
    for (; j + 16 <= N; j += 16) {
      __m256 c[4][2];
      for (int r = 0; r < 4; ++r)
        for (int h = 0; h < 2; ++h)
          c[r][h] = (accumulate && r < mr) ? _mm256_loadu_ps(C + (i + r) * ldc + j + 8 * h) : _mm256_setzero_ps();
      if (mr == 4) {
        for (int64_t k = 0; k < kend; ++k) {
          __m256 b0 = _mm256_loadu_ps(B + k * ldb + j), b1 = _mm256_loadu_ps(B + k * ldb + j + 8);
          for (int r = 0; r < 4; ++r) {
            __m256 a = _mm256_broadcast_ss(A + (i + r) * lda + k);
            c[r][0] = _mm256_fmadd_ps(a, b0, c[r][0]);
            c[r][1] = _mm256_fmadd_ps(a, b1, c[r][1]);
          }
        }
      } else {
        for (int64_t k = 0; k < kend; ++k) {
          __m256 b0 = _mm256_loadu_ps(B + k * ldb + j), b1 = _mm256_loadu_ps(B + k * ldb + j + 8);
          for (int r = 0; r < mr; ++r) {
            __m256 a = _mm256_broadcast_ss(A + (i + r) * lda + k);
            c[r][0] = _mm256_fmadd_ps(a, b0, c[r][0]);
            c[r][1] = _mm256_fmadd_ps(a, b1, c[r][1]);
          }
        }
      }
      for (int r = 0; r < mr; ++r) {
        _mm256_storeu_ps(C + (i + r) * ldc + j, c[r][0]);
        _mm256_storeu_ps(C + (i + r) * ldc + j + 8, c[r][1]);
      }
    }
    for (; j < N; ++j)  // column tail (N = chunk rows in the K^T products)
      for (int r = 0; r < mr; ++r) {
        float s = accumulate ? C[(i + r) * ldc + j] : 0.0f;
        for (int64_t k = 0; k < kend; ++k) s = std::fma(A[(i + r) * lda + k], B[k * ldb + j], s);
        C[(i + r) * ldc + j] = s;
      }
  }
}

// dst[c, r] = src[r, c]      src: [R, Cn] (ld ls); dst: [Cn, R] (ld ld)
void transpose(const float* src, int64_t R, int64_t Cn, int64_t ls, float* dst, int64_t ld) {
  for (int64_t r = 0; r < R; ++r)
    for (int64_t c = 0; c < Cn; ++c) dst[c * ld + r] = src[r * ls + c];
}

// exp of n floats in place (n any)
MERE_AVX2 void exp_inplace(float* x, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, exp8(_mm256_loadu_ps(x + i)));
  if (i < n) {
    float t[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    std::memcpy(t, x + i, sz(n - i) * 4);
    _mm256_storeu_ps(t, exp8(_mm256_loadu_ps(t)));
    std::memcpy(x + i, t, sz(n - i) * 4);
  }
}

struct ChunkScratch {
  std::vector<float> q, k, v, g, beta, o, oh;         // one head's inputs / output: [T, D]
  std::vector<float> G, A, KT, Kb, Vb, U, Wm, ST, Vn, VnT, M, Kd, Qg;
};

// One head, all chunks. S: [Dv, Dk]; q, k: [T, Dk]; v, o: [T, Dv]; g, beta: [T].
MERE_AVX2 void gdn_chunked_head(float* S, const float* q, const float* k, const float* v, const float* g,
                                const float* beta, int64_t T, int64_t Dk, int64_t Dv, int64_t C, float* o,
                                ChunkScratch& w) {
  w.G.resize(sz(C));
  w.A.resize(sz(C * C));
  w.M.resize(sz(C * C));
  w.KT.resize(sz(Dk * C));
  w.Kb.resize(sz(C * Dk));
  w.Kd.resize(sz(C * Dk));
  w.Qg.resize(sz(C * Dk));
  w.Vb.resize(sz(C * Dv));
  w.U.resize(sz(C * Dv));
  w.Wm.resize(sz(C * Dk));
  w.ST.resize(sz(Dk * Dv));
  w.Vn.resize(sz(C * Dv));
  w.VnT.resize(sz(Dv * C));
  float *G = w.G.data(), *A = w.A.data(), *M = w.M.data(), *KT = w.KT.data(), *Kb = w.Kb.data(), *Kd = w.Kd.data(),
        *Qg = w.Qg.data(), *Vb = w.Vb.data(), *U = w.U.data(), *Wm = w.Wm.data(), *ST = w.ST.data(), *Vn = w.Vn.data(),
        *VnT = w.VnT.data();
  for (int64_t c0 = 0; c0 < T; c0 += C) {
    const int64_t n = std::min(C, T - c0);
    const float *qc = q + c0 * Dk, *kc = k + c0 * Dk, *vc = v + c0 * Dv;
    float acc = 0.0f;
    for (int64_t r = 0; r < n; ++r) G[r] = (acc += g[c0 + r]);
    const float glast = G[n - 1];
    // K^T, then K K^T and Q K^T (full n x n; only the lower part is used)
    transpose(kc, n, Dk, Dk, KT, n);
    mm_nn(n, n, Dk, kc, Dk, KT, n, A, n, false);
    mm_nn(n, n, Dk, qc, Dk, KT, n, M, n, false);
    // decay factors e^{G_r - G_s} for s <= r; A[r, s] = -beta_r (k_r.k_s) e^{..} (s < r), M[r, s] = (q_r.k_s) e^{..}
    std::vector<float>& ed = w.o;  // scratch row
    ed.resize(sz(n));
    for (int64_t r = 0; r < n; ++r) {
      for (int64_t s = 0; s <= r; ++s) ed[sz(s)] = G[r] - G[s];
      exp_inplace(ed.data(), r + 1);
      for (int64_t s = 0; s < n; ++s) {
        A[r * n + s] = s < r ? -beta[c0 + r] * A[r * n + s] * ed[sz(s)] : 0.0f;
        M[r * n + s] = s <= r ? M[r * n + s] * ed[sz(s)] : 0.0f;
      }
    }
    // (I - L)^{-1} by forward substitution: row_i <- row_i + row_i[:i] A[:i, :i] (rows above already final)
    for (int64_t i = 1; i < n; ++i) {
      float* ri = A + i * n;
      float tmp[256];
      float* row = n <= 256 ? tmp : nullptr;
      std::vector<float> big;
      if (!row) {
        big.assign(ri, ri + i);
        row = big.data();
      } else {
        std::memcpy(row, ri, sz(i) * 4);
      }
      for (int64_t m = 1; m < i; ++m) {
        const float rm = row[m];
        const float* am = A + m * n;
        for (int64_t s = 0; s < m; ++s) ri[s] = std::fma(rm, am[s], ri[s]);
      }
    }
    for (int64_t r = 0; r < n; ++r) A[r * n + r] = 1.0f;
    // Vb = beta v, Kb = beta k e^{G}, Kd = k e^{G_last - G}, Qg = q e^{G}
    for (int64_t r = 0; r < n; ++r) {
      const float b = beta[c0 + r], eg = std::exp(G[r]), el = std::exp(glast - G[r]);
      for (int64_t d = 0; d < Dv; ++d) Vb[r * Dv + d] = b * vc[r * Dv + d];
      for (int64_t j = 0; j < Dk; ++j) {
        Kb[r * Dk + j] = b * kc[r * Dk + j] * eg;
        Kd[r * Dk + j] = kc[r * Dk + j] * el;
        Qg[r * Dk + j] = qc[r * Dk + j] * eg;
      }
    }
    mm_nn(n, Dv, n, A, n, Vb, Dv, U, Dv, false, true);   // U = T (beta v)
    mm_nn(n, Dk, n, A, n, Kb, Dk, Wm, Dk, false, true);  // W = T (beta k e^G)
    // S^T [Dk, Dv]; V_new = U - W S^T
    transpose(S, Dv, Dk, Dk, ST, Dv);
    mm_nn(n, Dv, Dk, Wm, Dk, ST, Dv, Vn, Dv, false);
    for (int64_t i = 0; i < n * Dv; ++i) Vn[i] = U[i] - Vn[i];
    // O = (q e^G) S^T + M V_new
    float* oc = o + c0 * Dv;
    mm_nn(n, Dv, Dk, Qg, Dk, ST, Dv, oc, Dv, false);
    mm_nn(n, Dv, n, M, n, Vn, Dv, oc, Dv, true, true);
    // S = e^{G_last} S + V_new^T (k e^{G_last - G})
    const __m256 el = _mm256_set1_ps(std::exp(glast));
    for (int64_t i = 0; i + 8 <= Dv * Dk; i += 8) _mm256_storeu_ps(S + i, _mm256_mul_ps(_mm256_loadu_ps(S + i), el));
    for (int64_t i = Dv * Dk / 8 * 8; i < Dv * Dk; ++i) S[i] *= std::exp(glast);
    transpose(Vn, n, Dv, Dv, VnT, n);
    mm_nn(Dv, Dk, n, VnT, n, Kd, Dk, S, Dk, true);
  }
}

}  // namespace

void gated_delta_avx2(const GdnArgs& a, bool chunked, int64_t chunk, ThreadPool& pool) {
  const int64_t ratio = a.Hv / a.Hk, T = a.T, Dk = a.Dk, Dv = a.Dv;
  if (Dk % 8 != 0) return gated_delta_generic(a, chunked, chunk, pool);
  const double work = double(T) * double(a.Hv) * double(Dk) * double(Dv) * (chunked ? 6.0 : 3.0);
  pool.parallel_for(a.Hv, 1, work, 1 << 17, [&](int64_t h0, int64_t h1) {
    thread_local ChunkScratch w;
    for (int64_t h = h0; h < h1; ++h) {
      const int64_t kidx = h / ratio;
      float* S = a.S + h * Dv * Dk;
      if (!chunked) {
        for (int64_t t = 0; t < T; ++t)
          gdn_step_head(S, a.q + (t * a.Hk + kidx) * Dk, a.k + (t * a.Hk + kidx) * Dk, a.v + (t * a.Hv + h) * Dv,
                        a.g[t * a.Hv + h], a.beta[t * a.Hv + h], Dk, Dv, a.o + (t * a.Hv + h) * Dv);
        continue;
      }
      w.q.resize(sz(T * Dk));
      w.k.resize(sz(T * Dk));
      w.v.resize(sz(T * Dv));
      w.g.resize(sz(T));
      w.beta.resize(sz(T));
      std::vector<float>& oh = w.oh;  // per-thread, reused: no page faults per head
      oh.resize(sz(T * Dv));
      for (int64_t t = 0; t < T; ++t) {
        std::memcpy(w.q.data() + t * Dk, a.q + (t * a.Hk + kidx) * Dk, sz(Dk) * 4);
        std::memcpy(w.k.data() + t * Dk, a.k + (t * a.Hk + kidx) * Dk, sz(Dk) * 4);
        std::memcpy(w.v.data() + t * Dv, a.v + (t * a.Hv + h) * Dv, sz(Dv) * 4);
        w.g[sz(t)] = a.g[t * a.Hv + h];
        w.beta[sz(t)] = a.beta[t * a.Hv + h];
      }
      gdn_chunked_head(S, w.q.data(), w.k.data(), w.v.data(), w.g.data(), w.beta.data(), T, Dk, Dv, chunk, oh.data(), w);
      for (int64_t t = 0; t < T; ++t) std::memcpy(a.o + (t * a.Hv + h) * Dv, oh.data() + t * Dv, sz(Dv) * 4);
    }
  });
}

}  // namespace mere::fast
