// Portable versions of the fast CPU kernels (no intrinsics): the path for CPUs without AVX2/FMA and
// for weight formats the AVX2 kernels do not cover (2/3/5/6-bit). Same structure as ops.h
// (dequantise a row with the MLX formula, fp32 dots) but threaded, with the recurrent GatedDeltaNet
// fused into one pass over the state and attention split by heads. Batch-width invariant: each
// output row is computed by the same code whatever T is.
#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/fast/kernels.h"
#include "ops/ops.h"

namespace mere::fast {

namespace {

// Fixed-order dot product: 8 partial sums combined as ((0+1)+(2+3))+((4+5)+(6+7)).
float dot8(const float* a, const float* b, int64_t n) {
  float p[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int l = 0; l < 8; ++l) p[l] = std::fma(a[i + l], b[i + l], p[l]);
  for (int l = 0; i < n; ++i, ++l) p[l] = std::fma(a[i], b[i], p[l]);
  return ((p[0] + p[1]) + (p[2] + p[3])) + ((p[4] + p[5]) + (p[6] + p[7]));
}

}  // namespace

void linear_generic(const Matrix& W, const float* x, int64_t T, float* y, ThreadPool& pool) {
  if (T <= 0 || W.rows == 0) return;
  auto body = [&](int64_t r0, int64_t r1) {
    std::vector<float> row(static_cast<size_t>(W.cols));
    for (int64_t r = r0; r < r1; ++r) {
      W.row_f32(r, row.data());
      for (int64_t t = 0; t < T; ++t) y[t * W.rows + r] = dot8(row.data(), x + t * W.cols, W.cols);
    }
  };
  if (W.rows * W.cols * T < (1 << 17)) body(0, W.rows);
  else pool.parallel_for(W.rows, 16, body);
}

void gated_delta_generic(const GdnArgs& a, bool chunked, int64_t chunk, ThreadPool& pool) {
  const int64_t ratio = a.Hv / a.Hk, T = a.T, Dk = a.Dk, Dv = a.Dv;
  const double work = double(T) * double(a.Hv) * double(Dk) * double(Dv) * 3.0;
  pool.parallel_for(a.Hv, 1, work, 1 << 17, [&](int64_t h0, int64_t h1) {
    std::vector<float> qh(static_cast<size_t>(T * Dk)), kh(static_cast<size_t>(T * Dk)), vh(static_cast<size_t>(T * Dv)),
        gh(static_cast<size_t>(T)), bh(static_cast<size_t>(T)), oh(static_cast<size_t>(T * Dv));
    for (int64_t h = h0; h < h1; ++h) {
      const int64_t kidx = h / ratio;
      float* S = a.S + h * Dv * Dk;
      if (!chunked) {
        for (int64_t t = 0; t < T; ++t) {
          const float* q = a.q + (t * a.Hk + kidx) * Dk;
          const float* k = a.k + (t * a.Hk + kidx) * Dk;
          const float* v = a.v + (t * a.Hv + h) * Dv;
          float* o = a.o + (t * a.Hv + h) * Dv;
          const float decay = std::exp(a.g[t * a.Hv + h]), beta = a.beta[t * a.Hv + h];
          for (int64_t i = 0; i < Dv; ++i) {
            float* Si = S + i * Dk;
            for (int64_t j = 0; j < Dk; ++j) Si[j] *= decay;
            const float d = beta * (v[i] - dot8(Si, k, Dk));
            for (int64_t j = 0; j < Dk; ++j) Si[j] = std::fma(d, k[j], Si[j]);
            o[i] = dot8(Si, q, Dk);
          }
        }
        continue;
      }
      for (int64_t t = 0; t < T; ++t) {
        std::copy_n(a.q + (t * a.Hk + kidx) * Dk, Dk, qh.data() + t * Dk);
        std::copy_n(a.k + (t * a.Hk + kidx) * Dk, Dk, kh.data() + t * Dk);
        std::copy_n(a.v + (t * a.Hv + h) * Dv, Dv, vh.data() + t * Dv);
        gh[static_cast<size_t>(t)] = a.g[t * a.Hv + h];
        bh[static_cast<size_t>(t)] = a.beta[t * a.Hv + h];
      }
      ops::gdn_chunked(S, qh.data(), kh.data(), vh.data(), gh.data(), bh.data(), T, Dk, Dv, chunk, oh.data());
      for (int64_t t = 0; t < T; ++t) std::copy_n(oh.data() + t * Dv, Dv, a.o + (t * a.Hv + h) * Dv);
    }
  });
}

void attention_generic(const AttnArgs& a, ThreadPool& pool) {
  const int64_t group = a.nh / a.nkv, hd = a.hd;
  const double work = double(a.T) * double(a.nh) * double(a.first_len + a.T) * double(hd) * 2.0;
  pool.parallel_for(a.T * a.nh, 4, work, 1 << 17, [&](int64_t i0, int64_t i1) {
    std::vector<float> p;
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t t = i / a.nh, h = i % a.nh, kh = h / group, len = a.first_len + t;
      const float* q = a.q + (t * a.nh + h) * hd;
      p.resize(static_cast<size_t>(len));
      float mx = -INFINITY;
      for (int64_t j = 0; j < len; ++j) {
        p[static_cast<size_t>(j)] = dot8(q, a.k + (j * a.nkv + kh) * hd, hd) * a.scale;
        mx = std::max(mx, p[static_cast<size_t>(j)]);
      }
      float sum = 0.0f;
      for (int64_t j = 0; j < len; ++j) sum += (p[static_cast<size_t>(j)] = std::exp(p[static_cast<size_t>(j)] - mx));
      const float inv = 1.0f / sum;
      float* o = a.out + (t * a.nh + h) * hd;
      std::fill(o, o + hd, 0.0f);
      for (int64_t j = 0; j < len; ++j) {
        const float w = p[static_cast<size_t>(j)] * inv;
        const float* vj = a.v + (j * a.nkv + kh) * hd;
        for (int64_t d = 0; d < hd; ++d) o[d] = std::fma(w, vj[d], o[d]);
      }
    }
  });
}

}  // namespace mere::fast
