// AVX2/FMA linear kernels: y[t] = W x[t] for affine 4/8-bit (MLX layout, read in place) and
// float (F32/BF16/F16) weights. Quantised weights use int8-quantised activations (per token and
// weight group: d = max|x|/127) and integer dot products (vpmaddubsw for 4-bit, vpmaddwd for 8-bit):
//   y = sum_g s_g d_g sum_c q_c xq_c  +  sum_g [b_g X_g + o s_g (X_g - d_g sum_c xq_c)]
// with X_g = sum_c x_c in exact f32 and o = 2^(bits-1): the last term makes the activation
// rounding error multiply s (q - o) (half the group's range) instead of s q.
// 4-bit codes stay packed as MLX stores them (byte i of a 64-column chunk holds columns 2i, 2i+1);
// the activations are permuted to match (evens, then odds), so no weight repacking is needed.
// Tiles of NR rows x NT tokens share loads; each (row, token) accumulator sees the same operation
// sequence in every tile shape, hence batch-width invariance. Reference: ops::linear.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

#include "backend/cpu/fast/kernels.h"
#include "backend/cpu/fast/simd_avx2.h"
#include "core/error.h"

namespace mere::fast {

using namespace avx2;

namespace {

inline int64_t round_up(int64_t n, int64_t m) { return (n + m - 1) / m * m; }

// A tuning switch from the environment: unset or empty gives `dflt`; anything but one of `allowed`
// (or, with an empty list, an integer in [lo, hi]) stops the process with a message naming the
// variable. These are read before main, where an exception could only end the process without one.
int64_t knob(const char* name, int64_t dflt, std::initializer_list<int64_t> allowed, int64_t lo = 0, int64_t hi = 0) {
  const char* e = std::getenv(name);
  if (e == nullptr || *e == '\0') return dflt;
  char* end = nullptr;
  const long long v = std::strtoll(e, &end, 10);
  bool ok = end != e && *end == '\0';
  if (ok) ok = allowed.size() ? std::find(allowed.begin(), allowed.end(), v) != allowed.end() : v >= lo && v <= hi;
  if (!ok) {
    std::string want;
    for (int64_t a : allowed) want += (want.empty() ? "" : ", ") + std::to_string(a);
    if (want.empty()) want = "an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
    std::fprintf(stderr, "error: %s: expected %s, got \"%s\"\n", name, want.c_str(), e);
    std::exit(2);
  }
  return v;
}

// Software prefetch distance (bytes) for the decode matrix-vector kernels; MERE_CPU_PREFETCH overrides.
const int64_t g_prefetch = knob("MERE_CPU_PREFETCH", 0, {}, 0, int64_t{1} << 20);
// quantised weights at T = 1: rows a tile; one row at a time: a purely sequential stream (1.6-2x faster than 4)
const int g_gemv_rows = static_cast<int>(knob("MERE_CPU_GEMV_ROWS", 1, {1, 2, 4}));
// float (bf16/f16/f32) weights at T = 1: rows a tile (1, 2 or 4). Each row keeps its one fma chain, so
// the bits do not depend on it; 4 chains in flight instead of 1 (the bundled dense model's matrices sit
// in the caches, where the chain's latency, not the stream, bounds a row: +9% decode on this 2-core box,
// session 30; quantised matrices stream from DRAM and keep g_gemv_rows)
const int g_float_rows = static_cast<int>(knob("MERE_CPU_FLOAT_ROWS", 4, {1, 2, 4}));
const bool g_prefetch_params = knob("MERE_CPU_PREFETCH_PARAMS", 1, {0, 1}) != 0;

// Quantised activations for one matrix format, T rows.
struct QuantActs {
  int64_t T = 0, cols = 0, stride = 0;  // stride: bytes (4-bit) or int16s (8-bit) per row
  int64_t groups = 0, groups_pad = 0, units = 0;
  std::vector<int8_t> q8;     // 4-bit: [T, stride] permuted per 64-column chunk, zero padded
  std::vector<int16_t> q16;   // 8-bit: [T, stride] natural order
  std::vector<float> dxv;     // 4-bit: [T, units, 8] activation scale per lane of a unit
  std::vector<float> dx;      // [T, groups_pad] activation scale per group (zero padded)
  std::vector<float> xs;      // [T, groups_pad] sum of x over each group (zero padded)
  std::vector<float> xe;      // [T, groups_pad] o * (X_g - d_g sum_c xq_c), o = 2^(bits-1) (zero padded)
};

// Scales/biases of one row as f32, zero-padded to a multiple of 8 groups.
MERE_AVX2 void row_params(const Matrix& W, int64_t r, int64_t groups, int64_t groups_pad, float* sc, float* bi) {
  const size_t off = static_cast<size_t>(r * groups);
  switch (W.scale_dtype) {
    case DType::BF16: {
      const auto* s = static_cast<const uint16_t*>(W.scales) + off;
      const auto* b = static_cast<const uint16_t*>(W.biases) + off;
      int64_t g = 0;
      for (; g + 8 <= groups; g += 8) {
        _mm256_storeu_ps(sc + g, load_bf16x8(s + g));
        _mm256_storeu_ps(bi + g, load_bf16x8(b + g));
      }
      for (; g < groups; ++g) sc[g] = bf16_to_f32(s[g]), bi[g] = bf16_to_f32(b[g]);
      break;
    }
    case DType::F16: {
      const auto* s = static_cast<const uint16_t*>(W.scales) + off;
      const auto* b = static_cast<const uint16_t*>(W.biases) + off;
      for (int64_t g = 0; g < groups; ++g) sc[g] = f16_to_f32(s[g]), bi[g] = f16_to_f32(b[g]);
      break;
    }
    default: {
      const auto* s = static_cast<const float*>(W.scales) + off;
      const auto* b = static_cast<const float*>(W.biases) + off;
      std::memcpy(sc, s, static_cast<size_t>(groups) * 4);
      std::memcpy(bi, b, static_cast<size_t>(groups) * 4);
    }
  }
  for (int64_t g = groups; g < groups_pad; ++g) sc[g] = bi[g] = 0.0f;
}

// 8 floats -> 8 int32 codes round(x * id) (nearest even), added to *sum.
MERE_AVX2_INLINE __m256i quant8(const float* x, __m256 id, __m256i* sum) {
  __m256i q = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x), id));
  *sum = _mm256_add_epi32(*sum, q);
  return q;
}

// 32 floats -> 32 int8 in natural order.
MERE_AVX2_INLINE __m256i quant32_i8(const float* x, __m256 id, __m256i* sum) {
  __m256i a = _mm256_packs_epi32(quant8(x, id, sum), quant8(x + 8, id, sum));  // a0-3 b0-3 | a4-7 b4-7
  __m256i b = _mm256_packs_epi32(quant8(x + 16, id, sum), quant8(x + 24, id, sum));
  __m256i c = _mm256_packs_epi16(a, b);  // lanes interleaved by 4 bytes
  return _mm256_permutevar8x32_epi32(c, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

MERE_AVX2_INLINE int32_t hsum_epi32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  return _mm_cvtsi128_si32(s);
}

// Quantises row t of x [cols] (cols % group == 0) into qa: bits 4: permuted int8 + dxv; bits 8:
// int16 + dx; both: per-group sums xs.
MERE_AVX2 void quantize_row(const float* x, int64_t cols, int group, int bits, QuantActs& qa, int64_t t) {
  const int64_t G = group, groups = cols / G;
  float* xs = qa.xs.data() + t * qa.groups_pad;
  float* xe = qa.xe.data() + t * qa.groups_pad;
  const float offset = bits == 8 ? 128.0f : 8.0f;
  alignas(32) int8_t nat[128];  // natural-order codes, indexed by column mod 128
  int64_t next_chunk = 0;       // first 64-column chunk not yet permuted (4-bit)
  const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  for (int64_t g = 0; g < groups; ++g) {
    const float* xg = x + g * G;
    __m256 vmax = _mm256_setzero_ps(), vsum = _mm256_setzero_ps();
    for (int64_t c = 0; c < G; c += 8) {
      __m256 v = _mm256_loadu_ps(xg + c);
      vsum = _mm256_add_ps(vsum, v);
      vmax = _mm256_max_ps(vmax, _mm256_and_ps(v, absmask));
    }
    xs[g] = hsum8(vsum);
    const float amax = hmax8(vmax);
    const float d = amax / 127.0f;
    const __m256 id = _mm256_set1_ps(amax > 0.0f ? 127.0f / amax : 0.0f);
    __m256i qsum = _mm256_setzero_si256();
    if (bits == 8) {
      qa.dx[static_cast<size_t>(t * qa.groups_pad + g)] = d;
      int16_t* q16 = qa.q16.data() + t * qa.stride + g * G;
      for (int64_t c = 0; c < G; c += 16) {
        __m256i a = _mm256_packs_epi32(quant8(xg + c, id, &qsum), quant8(xg + c + 8, id, &qsum));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(q16 + c), _mm256_permute4x64_epi64(a, 0xD8));
      }
      xe[g] = offset * (xs[g] - d * static_cast<float>(hsum_epi32(qsum)));
      continue;
    }
    qa.dx[static_cast<size_t>(t * qa.groups_pad + g)] = d;
    float* dxv = qa.dxv.data() + t * qa.units * 8;
    if (G == 32)
      for (int l = 0; l < 4; ++l) dxv[(g / 2) * 8 + (g & 1) * 4 + l] = d;
    else
      for (int l = 0; l < 8; ++l) dxv[g * 8 + l] = d;  // one unit per group (64 or 128 columns)
    for (int64_t c = 0; c < G; c += 32)
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(nat + ((g * G + c) & 127)), quant32_i8(xg + c, id, &qsum));
    xe[g] = offset * (xs[g] - d * static_cast<float>(hsum_epi32(qsum)));
    // permute every chunk completed by this group: evens then odds of each 32-column half
    const int64_t end = (g + 1) * G;
    int8_t* q8 = qa.q8.data() + t * qa.stride;
    const __m256i shuf = _mm256_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15, 0, 2, 4, 6, 8, 10, 12,
                                          14, 1, 3, 5, 7, 9, 11, 13, 15);
    while (next_chunk * 64 < end && (next_chunk * 64 + 64 <= end || g == groups - 1)) {
      const int64_t c0 = next_chunk * 64;
      const int8_t* n = nat + (c0 & 127);
      __m256i n0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(n));
      __m256i n1 = end - c0 >= 64 ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(n + 32)) : _mm256_setzero_si256();
      __m256i a = _mm256_permute4x64_epi64(_mm256_shuffle_epi8(n0, shuf), 0xD8);  // E(0..31) | O(0..31)
      __m256i b = _mm256_permute4x64_epi64(_mm256_shuffle_epi8(n1, shuf), 0xD8);  // E(32..63) | O(32..63)
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(q8 + c0), _mm256_permute2x128_si256(a, b, 0x20));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(q8 + c0 + 32), _mm256_permute2x128_si256(a, b, 0x31));
      ++next_chunk;
    }
  }
  for (int64_t g = groups; g < qa.groups_pad; ++g) xs[g] = xe[g] = 0.0f;
}

void prepare_acts(const Matrix& W, const float* x, int64_t T, QuantActs& qa, ThreadPool& pool) {
  const int64_t cols = W.cols;
  qa.T = T;
  qa.cols = cols;
  qa.groups = cols / W.group;
  qa.groups_pad = round_up(qa.groups, 8);
  if (W.bits == 4) {
    qa.stride = round_up(cols, 64);
    qa.units = W.group == 128 ? cols / 128 : qa.stride / 64;
    qa.q8.resize(static_cast<size_t>(T * qa.stride));
    qa.dxv.assign(static_cast<size_t>(T * qa.units * 8), 0.0f);
  } else {
    qa.stride = cols;
    qa.units = qa.groups;
    qa.q16.resize(static_cast<size_t>(T * qa.stride));
  }
  qa.dx.assign(static_cast<size_t>(T * qa.groups_pad), 0.0f);
  qa.xs.resize(static_cast<size_t>(T * qa.groups_pad));
  qa.xe.resize(qa.xs.size());
  auto body = [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) quantize_row(x + t * cols, cols, W.group, W.bits, qa, t);
  };
  if (T * cols >= (1 << 16)) pool.parallel_for(T, 4, body);
  else body(0, T);
}

// ---- 4-bit tile: NR rows x NT tokens ----
template <int G, int NR, int NT>
MERE_AVX2 void q4_tile(const uint8_t* const* codes, const float* const* sc, const float* const* bi, const QuantActs& qa,
                       int64_t t0, float* y, int64_t ldy, int64_t r0) {
  const __m256i m4 = _mm256_set1_epi8(0x0F), ones = _mm256_set1_epi16(1);
  __m256 acc[NR][NT];
  for (int r = 0; r < NR; ++r)
    for (int t = 0; t < NT; ++t) acc[r][t] = _mm256_setzero_ps();
  const int64_t cols = qa.cols;
  const int8_t* xq[NT];
  const float* dv[NT];
  for (int t = 0; t < NT; ++t) {
    xq[t] = qa.q8.data() + (t0 + t) * qa.stride;
    dv[t] = qa.dxv.data() + (t0 + t) * qa.units * 8;
  }
  constexpr int CPU = G == 128 ? 2 : 1;  // 64-column chunks per unit
  const int64_t full_units = G == 128 ? cols / 128 : cols / 64;
  const int64_t pf = NT == 1 ? g_prefetch : 0;  // decode streams the weights: prefetch ahead
  for (int64_t u = 0; u < full_units; ++u) {
    const int64_t c0 = u * 64 * CPU;
    if (pf && (CPU == 2 || (u & 1) == 0))
      for (int r = 0; r < NR; ++r) _mm_prefetch(reinterpret_cast<const char*>(codes[r] + c0 / 2 + pf), _MM_HINT_T0);
    for (int r = 0; r < NR; ++r) {
      __m256i lo[CPU], hi[CPU];
      for (int k = 0; k < CPU; ++k) {
        __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(codes[r] + (c0 + 64 * k) / 2));
        lo[k] = _mm256_and_si256(v, m4);
        hi[k] = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
      }
      __m256 sv = _mm256_broadcast_ss(sc[r] + u);  // G = 32: two groups per 64-column unit
      if (G == 32) sv = _mm256_set_m128(_mm_broadcast_ss(sc[r] + 2 * u + 1), _mm_broadcast_ss(sc[r] + 2 * u));
      for (int t = 0; t < NT; ++t) {
        __m256i p = _mm256_setzero_si256();
        for (int k = 0; k < CPU; ++k) {
          const int8_t* xk = xq[t] + c0 + 64 * k;
          __m256i pe = _mm256_maddubs_epi16(lo[k], _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xk)));
          __m256i po = _mm256_maddubs_epi16(hi[k], _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xk + 32)));
          p = k == 0 ? _mm256_add_epi16(pe, po) : _mm256_add_epi16(p, _mm256_add_epi16(pe, po));
        }
        __m256 f = _mm256_cvtepi32_ps(_mm256_madd_epi16(p, ones));
        acc[r][t] = _mm256_fmadd_ps(_mm256_mul_ps(f, _mm256_loadu_ps(dv[t] + u * 8)), sv, acc[r][t]);
      }
    }
  }
  if (G == 32 && cols % 64 != 0) {  // a trailing half chunk (one 32-column group)
    const int64_t u = full_units, c0 = u * 64;
    for (int r = 0; r < NR; ++r) {
      __m256i v = _mm256_zextsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(codes[r] + c0 / 2)));
      __m256i lo = _mm256_and_si256(v, m4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
      __m256 sv = _mm256_set_m128(_mm_setzero_ps(), _mm_broadcast_ss(sc[r] + 2 * u));
      for (int t = 0; t < NT; ++t) {
        const int8_t* xk = xq[t] + c0;
        __m256i pe = _mm256_maddubs_epi16(lo, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xk)));
        __m256i po = _mm256_maddubs_epi16(hi, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xk + 32)));
        __m256 f = _mm256_cvtepi32_ps(_mm256_madd_epi16(_mm256_add_epi16(pe, po), ones));
        acc[r][t] = _mm256_fmadd_ps(_mm256_mul_ps(f, _mm256_loadu_ps(dv[t] + u * 8)), sv, acc[r][t]);
      }
    }
  }
  // bias term, then the fixed horizontal reduction
  for (int r = 0; r < NR; ++r)
    for (int t = 0; t < NT; ++t) {
      const float* xs = qa.xs.data() + (t0 + t) * qa.groups_pad;
      const float* xe = qa.xe.data() + (t0 + t) * qa.groups_pad;
      __m256 b = _mm256_setzero_ps();
      for (int64_t g = 0; g < qa.groups_pad; g += 8) {
        b = _mm256_fmadd_ps(_mm256_loadu_ps(bi[r] + g), _mm256_loadu_ps(xs + g), b);
        b = _mm256_fmadd_ps(_mm256_loadu_ps(sc[r] + g), _mm256_loadu_ps(xe + g), b);
      }
      y[(t0 + t) * ldy + r0 + r] = hsum8(_mm256_add_ps(acc[r][t], b));
    }
}

// ---- 8-bit tile ----
template <int NR, int NT>
MERE_AVX2 void q8_tile(const uint8_t* const* codes, const float* const* sc, const float* const* bi, const QuantActs& qa,
                       int64_t t0, float* y, int64_t ldy, int64_t r0, int G) {
  __m256 acc[NR][NT];
  for (int r = 0; r < NR; ++r)
    for (int t = 0; t < NT; ++t) acc[r][t] = _mm256_setzero_ps();
  for (int64_t g = 0; g < qa.groups; ++g) {
    __m256i is[NR][NT];
    for (int r = 0; r < NR; ++r)
      for (int t = 0; t < NT; ++t) is[r][t] = _mm256_setzero_si256();
    for (int64_t c = g * G; c < (g + 1) * G; c += 32) {
      __m256i wl[NR], wh[NR];
      for (int r = 0; r < NR; ++r) {
        wl[r] = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(codes[r] + c)));
        wh[r] = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(codes[r] + c + 16)));
      }
      for (int t = 0; t < NT; ++t) {
        const int16_t* xt = qa.q16.data() + (t0 + t) * qa.stride + c;
        __m256i xl = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xt));
        __m256i xh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xt + 16));
        for (int r = 0; r < NR; ++r)
          is[r][t] = _mm256_add_epi32(is[r][t], _mm256_add_epi32(_mm256_madd_epi16(wl[r], xl), _mm256_madd_epi16(wh[r], xh)));
      }
    }
    for (int t = 0; t < NT; ++t) {
      const __m256 d = _mm256_broadcast_ss(qa.dx.data() + (t0 + t) * qa.groups_pad + g);
      for (int r = 0; r < NR; ++r)
        acc[r][t] = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(is[r][t]), d), _mm256_broadcast_ss(sc[r] + g), acc[r][t]);
    }
  }
  for (int r = 0; r < NR; ++r)
    for (int t = 0; t < NT; ++t) {
      const float* xs = qa.xs.data() + (t0 + t) * qa.groups_pad;
      const float* xe = qa.xe.data() + (t0 + t) * qa.groups_pad;
      __m256 b = _mm256_setzero_ps();
      for (int64_t g = 0; g < qa.groups_pad; g += 8) {
        b = _mm256_fmadd_ps(_mm256_loadu_ps(bi[r] + g), _mm256_loadu_ps(xs + g), b);
        b = _mm256_fmadd_ps(_mm256_loadu_ps(sc[r] + g), _mm256_loadu_ps(xe + g), b);
      }
      y[(t0 + t) * ldy + r0 + r] = hsum8(_mm256_add_ps(acc[r][t], b));
    }
}

template <int NR, int NT>
MERE_AVX2 void qtile(const Matrix& W, const uint8_t* const* codes, const float* const* sc, const float* const* bi,
                     const QuantActs& qa, int64_t t0, float* y, int64_t r0) {
  if (W.bits == 8) return q8_tile<NR, NT>(codes, sc, bi, qa, t0, y, W.rows, r0, W.group);
  switch (W.group) {
    case 32: return q4_tile<32, NR, NT>(codes, sc, bi, qa, t0, y, W.rows, r0);
    case 64: return q4_tile<64, NR, NT>(codes, sc, bi, qa, t0, y, W.rows, r0);
    default: return q4_tile<128, NR, NT>(codes, sc, bi, qa, t0, y, W.rows, r0);
  }
}

template <int NR>
MERE_AVX2 void qtile_tokens(const Matrix& W, const uint8_t* const* codes, const float* const* sc, const float* const* bi,
                            const QuantActs& qa, int64_t t0, int nt, float* y, int64_t r0) {
  switch (nt) {
    case 4: return qtile<NR, 4>(W, codes, sc, bi, qa, t0, y, r0);
    case 3: return qtile<NR, 3>(W, codes, sc, bi, qa, t0, y, r0);
    case 2: return qtile<NR, 2>(W, codes, sc, bi, qa, t0, y, r0);
    default: return qtile<NR, 1>(W, codes, sc, bi, qa, t0, y, r0);
  }
}

constexpr int64_t kBlockRows = 32;  // rows per work item (their params are converted once)

void linear_quant(const Matrix& W, const float* x, int64_t T, float* y, ThreadPool& pool) {
  thread_local QuantActs tls;
  QuantActs& qa = tls;  // the caller's instance: workers must not resolve `tls` to their own
  prepare_acts(W, x, T, qa, pool);
  const int64_t rows = W.rows, groups = qa.groups, gp = qa.groups_pad;
  const int64_t row_bytes = W.cols * W.bits / 8;
  auto body = [&](int64_t b0, int64_t b1) {
    std::vector<float> sc(static_cast<size_t>(kBlockRows * gp)), bi(static_cast<size_t>(kBlockRows * gp));
    for (int64_t rb = b0 * kBlockRows; rb < std::min(rows, b1 * kBlockRows); rb += kBlockRows) {
      const int64_t nr = std::min(kBlockRows, rows - rb);
      if (T == 1 && g_prefetch_params && rb + kBlockRows < rows) {  // the next block's scales and biases
        const size_t ss = dtype_size(W.scale_dtype), off = static_cast<size_t>((rb + kBlockRows) * groups) * ss;
        const size_t len = static_cast<size_t>(std::min(kBlockRows, rows - rb - kBlockRows) * groups) * ss;
        for (size_t o = 0; o < len; o += 64) {
          _mm_prefetch(static_cast<const char*>(W.scales) + off + o, _MM_HINT_T0);
          _mm_prefetch(static_cast<const char*>(W.biases) + off + o, _MM_HINT_T0);
        }
      }
      for (int64_t i = 0; i < nr; ++i) row_params(W, rb + i, groups, gp, sc.data() + i * gp, bi.data() + i * gp);
      auto ptrs = [&](int64_t i, const uint8_t** c, const float** s, const float** b, int n) {
        for (int k = 0; k < n; ++k) {
          c[k] = static_cast<const uint8_t*>(W.data) + (rb + i + k) * row_bytes;
          s[k] = sc.data() + (i + k) * gp;
          b[k] = bi.data() + (i + k) * gp;
        }
      };
      const uint8_t* c[4];
      const float *s[4], *b[4];
      if (T == 1) {
        int64_t i = 0;
        if (g_gemv_rows == 2)
          for (; i + 2 <= nr; i += 2) {
            ptrs(i, c, s, b, 2);
            qtile<2, 1>(W, c, s, b, qa, 0, y, rb + i);
          }
        if (g_gemv_rows == 4)
          for (; i + 4 <= nr; i += 4) {
            ptrs(i, c, s, b, 4);
            qtile<4, 1>(W, c, s, b, qa, 0, y, rb + i);
          }
        for (; i < nr; ++i) {
          ptrs(i, c, s, b, 1);
          qtile<1, 1>(W, c, s, b, qa, 0, y, rb + i);
        }
        continue;
      }
      for (int64_t t = 0; t < T; t += 4) {
        const int nt = static_cast<int>(std::min<int64_t>(4, T - t));
        int64_t i = 0;
        for (; i + 2 <= nr; i += 2) {
          ptrs(i, c, s, b, 2);
          qtile_tokens<2>(W, c, s, b, qa, t, nt, y, rb + i);
        }
        if (i < nr) {
          ptrs(i, c, s, b, 1);
          qtile_tokens<1>(W, c, s, b, qa, t, nt, y, rb + i);
        }
      }
    }
  };
  const int64_t blocks = (rows + kBlockRows - 1) / kBlockRows;
  if (rows * W.cols * T < (1 << 17)) body(0, blocks);
  else pool.parallel_for(blocks, std::max<int64_t>(1, std::min<int64_t>(8, blocks / (8 * pool.size()))), body);
}

// ---- float weights ----
template <DType D>
MERE_AVX2_INLINE __m256 load_w8(const void* base, int64_t i) {
  if constexpr (D == DType::BF16) return load_bf16x8(static_cast<const uint16_t*>(base) + i);
  else if constexpr (D == DType::F16) return load_f16x8(static_cast<const uint16_t*>(base) + i);
  else return _mm256_loadu_ps(static_cast<const float*>(base) + i);
}

template <DType D, int NR, int NT>
MERE_AVX2 void f_tile(const Matrix& W, int64_t r0, const float* xp, int64_t xstride, int64_t t0, float* y) {
  const int64_t cols = W.cols, full = cols / 8 * 8;
  const size_t es = dtype_size(D);
  const uint8_t* rowp[NR];
  for (int r = 0; r < NR; ++r) rowp[r] = static_cast<const uint8_t*>(W.data) + static_cast<size_t>((r0 + r) * cols) * es;
  __m256 acc[NR][NT];
  for (int r = 0; r < NR; ++r)
    for (int t = 0; t < NT; ++t) acc[r][t] = _mm256_setzero_ps();
  for (int64_t c = 0; c < full; c += 8) {
    __m256 xv[NT];
    for (int t = 0; t < NT; ++t) xv[t] = _mm256_loadu_ps(xp + (t0 + t) * xstride + c);
    for (int r = 0; r < NR; ++r) {
      __m256 w = load_w8<D>(rowp[r], c);
      for (int t = 0; t < NT; ++t) acc[r][t] = _mm256_fmadd_ps(w, xv[t], acc[r][t]);
    }
  }
  if (full < cols) {  // tail: weights copied into a zero-padded vector (x is zero padded)
    for (int r = 0; r < NR; ++r) {
      float wt[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      convert_to_f32(D, rowp[r] + static_cast<size_t>(full) * es, wt, static_cast<size_t>(cols - full));
      __m256 w = _mm256_loadu_ps(wt);
      for (int t = 0; t < NT; ++t)
        acc[r][t] = _mm256_fmadd_ps(w, _mm256_loadu_ps(xp + (t0 + t) * xstride + full), acc[r][t]);
    }
  }
  for (int r = 0; r < NR; ++r)
    for (int t = 0; t < NT; ++t) y[(t0 + t) * W.rows + r0 + r] = hsum8(acc[r][t]);
}

template <DType D, int NR>
MERE_AVX2 void f_tile_tokens(const Matrix& W, int64_t r0, const float* xp, int64_t xs, int64_t t0, int nt, float* y) {
  switch (nt) {
    case 4: return f_tile<D, NR, 4>(W, r0, xp, xs, t0, y);
    case 3: return f_tile<D, NR, 3>(W, r0, xp, xs, t0, y);
    case 2: return f_tile<D, NR, 2>(W, r0, xp, xs, t0, y);
    default: return f_tile<D, NR, 1>(W, r0, xp, xs, t0, y);
  }
}

template <DType D>
void linear_float_t(const Matrix& W, const float* x, int64_t T, float* y, ThreadPool& pool) {
  const int64_t cols = W.cols, rows = W.rows;
  const float* xp = x;
  int64_t xstride = cols;
  thread_local std::vector<float> xpad;  // only touched by the calling thread (workers see xp)
  if (cols % 8 != 0) {  // zero-padded copy so every row reads whole vectors
    xstride = round_up(cols, 8);
    xpad.assign(static_cast<size_t>(T * xstride), 0.0f);
    for (int64_t t = 0; t < T; ++t) std::memcpy(xpad.data() + t * xstride, x + t * cols, static_cast<size_t>(cols) * 4);
    xp = xpad.data();
  }
  auto body = [&](int64_t b0, int64_t b1) {
    for (int64_t rb = b0 * kBlockRows; rb < std::min(rows, b1 * kBlockRows); rb += kBlockRows) {
      const int64_t nr = std::min(kBlockRows, rows - rb);
      if (T == 1) {  // g_float_rows rows at a time: each row's chain is the same, so the same bits
        int64_t i = 0;
        if (g_float_rows == 4)
          for (; i + 4 <= nr; i += 4) f_tile<D, 4, 1>(W, rb + i, xp, xstride, 0, y);
        if (g_float_rows == 2)
          for (; i + 2 <= nr; i += 2) f_tile<D, 2, 1>(W, rb + i, xp, xstride, 0, y);
        for (; i < nr; ++i) f_tile<D, 1, 1>(W, rb + i, xp, xstride, 0, y);
        continue;
      }
      for (int64_t t = 0; t < T; t += 4) {
        const int nt = static_cast<int>(std::min<int64_t>(4, T - t));
        int64_t i = 0;
        for (; i + 2 <= nr; i += 2) f_tile_tokens<D, 2>(W, rb + i, xp, xstride, t, nt, y);
        if (i < nr) f_tile_tokens<D, 1>(W, rb + i, xp, xstride, t, nt, y);
      }
    }
  };
  const int64_t blocks = (rows + kBlockRows - 1) / kBlockRows;
  if (rows * cols * T < (1 << 17)) body(0, blocks);
  else pool.parallel_for(blocks, std::max<int64_t>(1, std::min<int64_t>(8, blocks / (8 * pool.size()))), body);
}

}  // namespace

bool avx2_supports(const Matrix& W) {
  if (!W.quantized()) return W.dtype == DType::F32 || W.dtype == DType::BF16 || W.dtype == DType::F16;
  const bool scale_ok = W.scale_dtype == DType::BF16 || W.scale_dtype == DType::F16 || W.scale_dtype == DType::F32;
  return scale_ok && (W.bits == 4 || W.bits == 8) && (W.group == 32 || W.group == 64 || W.group == 128) &&
         W.cols % W.group == 0;
}

void linear_avx2(const Matrix& W, const float* x, int64_t T, float* y, ThreadPool& pool) {
  if (T <= 0 || W.rows == 0) return;
  if (!avx2_supports(W)) return linear_generic(W, x, T, y, pool);
  if (W.quantized()) return linear_quant(W, x, T, y, pool);
  switch (W.dtype) {
    case DType::BF16: return linear_float_t<DType::BF16>(W, x, T, y, pool);
    case DType::F16: return linear_float_t<DType::F16>(W, x, T, y, pool);
    default: return linear_float_t<DType::F32>(W, x, T, y, pool);
  }
}

}  // namespace mere::fast
