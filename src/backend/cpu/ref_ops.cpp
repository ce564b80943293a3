// CPU reference implementations of ops.h: straightforward loops, fp32 (double where cheap and
// it only tightens the reference) accumulation in a fixed order.
#include <cmath>
#include <vector>

#include "core/error.h"
#include "ops/ops.h"

namespace mere::ops {

float softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

void rms_norm(const float* x, const float* w, int64_t T, int64_t n, float eps, float* y) {
  for (int64_t t = 0; t < T; ++t) {
    const float* xr = x + t * n;
    float ss = 0.0f;
    for (int64_t i = 0; i < n; ++i) ss += xr[i] * xr[i];
    const float r = 1.0f / std::sqrt(ss / static_cast<float>(n) + eps);
    for (int64_t i = 0; i < n; ++i) y[t * n + i] = xr[i] * r * w[i];
  }
}

void gated_rms_norm(const float* x, const float* z, const float* w, int64_t n, float eps, float* y) {
  float ss = 0.0f;
  for (int64_t i = 0; i < n; ++i) ss += x[i] * x[i];
  const float r = 1.0f / std::sqrt(ss / static_cast<float>(n) + eps);
  for (int64_t i = 0; i < n; ++i) y[i] = w[i] * (x[i] * r) * silu(z[i]);
}

void linear(const Matrix& W, const float* x, int64_t T, float* y) {
  std::vector<float> row(static_cast<size_t>(W.cols));
  for (int64_t r = 0; r < W.rows; ++r) {
    W.row_f32(r, row.data());
    for (int64_t t = 0; t < T; ++t) {
      const float* xr = x + t * W.cols;
      float acc = 0.0f;
      for (int64_t c = 0; c < W.cols; ++c) acc += row[static_cast<size_t>(c)] * xr[c];
      y[t * W.rows + r] = acc;
    }
  }
}

void embed(const Matrix& E, const int32_t* ids, int64_t T, float* out) {
  for (int64_t t = 0; t < T; ++t) {
    MERE_CHECK(ids[t] >= 0 && ids[t] < E.rows, "embed", "token id ", ids[t], " out of range: vocabulary has ", E.rows,
               " entries");
    E.row_f32(ids[t], out + t * E.cols);
  }
}

void rope(float* x, int64_t heads, int64_t hd, int64_t rotary_dim, int64_t pos, double theta) {
  const int64_t half = rotary_dim / 2;
  for (int64_t i = 0; i < half; ++i) {
    // inv_freq in fp32 as the reference computes it, angle = pos * inv_freq in fp32
    const float inv = static_cast<float>(1.0 / std::pow(theta, static_cast<double>(2 * i) / static_cast<double>(rotary_dim)));
    const float ang = static_cast<float>(pos) * inv;
    const float c = std::cos(ang), s = std::sin(ang);
    for (int64_t h = 0; h < heads; ++h) {
      float* xh = x + h * hd;
      const float a = xh[i], b = xh[i + half];
      xh[i] = a * c - b * s;
      xh[i + half] = b * c + a * s;
    }
  }
}

void attention(const float* q, const float* k, const float* v, int64_t len, int64_t nh, int64_t nkv, int64_t hd,
               float scale, float* out) {
  const int64_t group = nh / nkv;
  std::vector<float> p(static_cast<size_t>(len));
  for (int64_t h = 0; h < nh; ++h) {
    const int64_t kh = h / group;
    const float* qh = q + h * hd;
    float mx = -INFINITY;
    for (int64_t j = 0; j < len; ++j) {
      const float* kj = k + (j * nkv + kh) * hd;
      float s = 0.0f;
      for (int64_t d = 0; d < hd; ++d) s += qh[d] * kj[d];
      p[static_cast<size_t>(j)] = s * scale;
      mx = std::max(mx, p[static_cast<size_t>(j)]);
    }
    float sum = 0.0f;
    for (int64_t j = 0; j < len; ++j) sum += (p[static_cast<size_t>(j)] = std::exp(p[static_cast<size_t>(j)] - mx));
    float* oh = out + h * hd;
    for (int64_t d = 0; d < hd; ++d) oh[d] = 0.0f;
    for (int64_t j = 0; j < len; ++j) {
      const float w = p[static_cast<size_t>(j)] / sum;
      const float* vj = v + (j * nkv + kh) * hd;
      for (int64_t d = 0; d < hd; ++d) oh[d] += w * vj[d];
    }
  }
}

void l2_normalize(float* x, int64_t n, float eps) {
  float ss = 0.0f;
  for (int64_t i = 0; i < n; ++i) ss += x[i] * x[i];
  const float r = 1.0f / std::sqrt(ss + eps);
  for (int64_t i = 0; i < n; ++i) x[i] *= r;
}

void conv_step(float* state, const float* w, const float* x, int64_t C, int64_t K, float* y) {
  for (int64_t c = 0; c < C; ++c) {
    float acc = 0.0f;
    for (int64_t j = 0; j < K - 1; ++j) acc += w[c * K + j] * state[j * C + c];
    acc += w[c * K + K - 1] * x[c];
    y[c] = silu(acc);
  }
  // shift history: drop the oldest row, append x
  for (int64_t j = 0; j + 1 < K - 1; ++j)
    for (int64_t c = 0; c < C; ++c) state[j * C + c] = state[(j + 1) * C + c];
  if (K > 1)
    for (int64_t c = 0; c < C; ++c) state[(K - 2) * C + c] = x[c];
}

void gdn_step(float* S, const float* q, const float* k, const float* v, float g, float beta, int64_t Dk, int64_t Dv,
              float* o) {
  const float decay = std::exp(g);
  for (int64_t i = 0; i < Dv; ++i) {
    float* Si = S + i * Dk;
    float m = 0.0f;
    for (int64_t j = 0; j < Dk; ++j) {
      Si[j] *= decay;
      m += Si[j] * k[j];
    }
    const float d = beta * (v[i] - m);
    float acc = 0.0f;
    for (int64_t j = 0; j < Dk; ++j) {
      Si[j] += d * k[j];
      acc += Si[j] * q[j];
    }
    o[i] = acc;
  }
}

void gdn_chunked(float* S, const float* q, const float* k, const float* v, const float* g, const float* beta, int64_t T,
                 int64_t Dk, int64_t Dv, int64_t chunk, float* o) {
  const int64_t C = chunk;
  std::vector<float> G(static_cast<size_t>(C)), A(static_cast<size_t>(C * C)), U(static_cast<size_t>(C * Dv)),
      W(static_cast<size_t>(C * Dk)), Vn(static_cast<size_t>(C * Dv));
  for (int64_t c0 = 0; c0 < T; c0 += C) {
    const int64_t n = std::min(C, T - c0);  // rows of this chunk (the tail is not padded: zero rows add nothing)
    const float* qc = q + c0 * Dk;
    const float* kc = k + c0 * Dk;
    const float* vc = v + c0 * Dv;
    // cumulative log decay inside the chunk
    float acc = 0.0f;
    for (int64_t r = 0; r < n; ++r) G[static_cast<size_t>(r)] = (acc += g[c0 + r]);
    // A[r, s] = -(beta_r k_r . k_s) e^{G_r - G_s}, s < r; then forward substitution gives (I + A')^{-1}
    for (int64_t r = 0; r < n; ++r)
      for (int64_t s = 0; s < n; ++s) {
        float val = 0.0f;
        if (s < r) {
          float dot = 0.0f;
          for (int64_t j = 0; j < Dk; ++j) dot += kc[r * Dk + j] * kc[s * Dk + j];
          val = -beta[c0 + r] * dot * std::exp(G[static_cast<size_t>(r)] - G[static_cast<size_t>(s)]);
        }
        A[static_cast<size_t>(r * C + s)] = val;
      }
    // T = (I - L)^{-1} computed row by row as in the reference: row_i += row_i[:i] @ T[:i, :i]
    for (int64_t i = 1; i < n; ++i) {
      std::vector<float> row(A.begin() + i * C, A.begin() + i * C + i);
      for (int64_t s = 0; s < i; ++s) {
        float add = 0.0f;
        for (int64_t m = s + 1; m < i; ++m) add += row[static_cast<size_t>(m)] * A[static_cast<size_t>(m * C + s)];
        A[static_cast<size_t>(i * C + s)] = row[static_cast<size_t>(s)] + add;
      }
    }
    for (int64_t r = 0; r < n; ++r) A[static_cast<size_t>(r * C + r)] = 1.0f;
    // U = T (beta v), W = T (beta k e^{G})
    for (int64_t r = 0; r < n; ++r) {
      for (int64_t d = 0; d < Dv; ++d) {
        float a = 0.0f;
        for (int64_t s = 0; s <= r; ++s) a += A[static_cast<size_t>(r * C + s)] * beta[c0 + s] * vc[s * Dv + d];
        U[static_cast<size_t>(r * Dv + d)] = a;
      }
      for (int64_t j = 0; j < Dk; ++j) {
        float a = 0.0f;
        for (int64_t s = 0; s <= r; ++s)
          a += A[static_cast<size_t>(r * C + s)] * beta[c0 + s] * kc[s * Dk + j] * std::exp(G[static_cast<size_t>(s)]);
        W[static_cast<size_t>(r * Dk + j)] = a;
      }
    }
    // V_new = U - W S^T  (S is [Dv, Dk]: (W S^T)[r, d] = sum_j W[r, j] S[d, j])
    for (int64_t r = 0; r < n; ++r)
      for (int64_t d = 0; d < Dv; ++d) {
        float a = 0.0f;
        for (int64_t j = 0; j < Dk; ++j) a += W[static_cast<size_t>(r * Dk + j)] * S[d * Dk + j];
        Vn[static_cast<size_t>(r * Dv + d)] = U[static_cast<size_t>(r * Dv + d)] - a;
      }
    // O = (q e^{G}) S^T + M V_new, M[r, s] = (q_r . k_s) e^{G_r - G_s} for s <= r
    for (int64_t r = 0; r < n; ++r) {
      const float eg = std::exp(G[static_cast<size_t>(r)]);
      std::vector<float> m(static_cast<size_t>(r + 1));
      for (int64_t s = 0; s <= r; ++s) {
        float dot = 0.0f;
        for (int64_t j = 0; j < Dk; ++j) dot += qc[r * Dk + j] * kc[s * Dk + j];
        m[static_cast<size_t>(s)] = dot * std::exp(G[static_cast<size_t>(r)] - G[static_cast<size_t>(s)]);
      }
      for (int64_t d = 0; d < Dv; ++d) {
        float inter = 0.0f;
        for (int64_t j = 0; j < Dk; ++j) inter += qc[r * Dk + j] * S[d * Dk + j];
        float intra = 0.0f;
        for (int64_t s = 0; s <= r; ++s) intra += m[static_cast<size_t>(s)] * Vn[static_cast<size_t>(s * Dv + d)];
        o[(c0 + r) * Dv + d] = inter * eg + intra;
      }
    }
    // S = e^{G_last} S + sum_s (k_s e^{G_last - G_s}) V_new[s]^T
    const float glast = G[static_cast<size_t>(n - 1)];
    const float elast = std::exp(glast);
    for (int64_t d = 0; d < Dv; ++d)
      for (int64_t j = 0; j < Dk; ++j) {
        float a = 0.0f;
        for (int64_t s = 0; s < n; ++s)
          a += kc[s * Dk + j] * std::exp(glast - G[static_cast<size_t>(s)]) * Vn[static_cast<size_t>(s * Dv + d)];
        S[d * Dk + j] = S[d * Dk + j] * elast + a;
      }
  }
}

}  // namespace mere::ops

