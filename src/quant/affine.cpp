// MLX affine quantise / dequantise and LSB-first uint32 packing (see affine.h). The hot loop
// rounds with the 1.5*2^23 trick on a pre-clamped value, which equals rint() in the default
// rounding mode for |x| < 2^22; on x86 it runs as SSE2 (baseline) with bit-identical results to the
// scalar path (IEEE division, max/min with the same operand order, so NaN maps to code 0 in both).
#include "quant/affine.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "core/error.h"

namespace mere::quant {

namespace {

// Round half to even for |x| < 2^22 (x is clamped to [-1, 2^bits] before this).
inline float round_even_small(float x) {
  const float magic = 12582912.0f;  // 1.5 * 2^23
  return (x + magic) - magic;
}

void store_scale(DType t, void* base, int64_t i, float v) {
  switch (t) {
    case DType::BF16: static_cast<uint16_t*>(base)[i] = f32_to_bf16(v); return;
    case DType::F16: static_cast<uint16_t*>(base)[i] = f32_to_f16(v); return;
    case DType::F32: static_cast<float*>(base)[i] = v; return;
    default: fail("affine", cat("scale dtype: expected BF16, F16 or F32, got ", dtype_name(t)));
  }
}

float load_scale(DType t, const void* base, int64_t i) {
  switch (t) {
    case DType::BF16: return bf16_to_f32(static_cast<const uint16_t*>(base)[i]);
    case DType::F16: return f16_to_f32(static_cast<const uint16_t*>(base)[i]);
    case DType::F32: return static_cast<const float*>(base)[i];
    default: fail("affine", cat("scale dtype: expected BF16, F16 or F32, got ", dtype_name(t)));
  }
}

// x86 MAXPS / MINPS semantics (the second operand wins on NaN), so scalar and SSE2 agree.
inline float max_ps(float a, float b) { return a > b ? a : b; }
inline float min_ps(float a, float b) { return a < b ? a : b; }

// Codes of one group: clamp(rint((w - bias) / scale), 0, 2^bits - 1), clamped to [-1, 2^bits]
// before rounding so the rounding trick is exact.
template <int kBits>
void quantize_group_codes(const float* w, int group, AffineParams p, uint32_t* out) {
  constexpr int per = 32 / kBits;
  const float top = static_cast<float>((1 << kBits) - 1);
#if defined(__SSE2__)
  if constexpr (kBits == 4 || kBits == 8) {
    if (group % 16 == 0) {
      const __m128 bias = _mm_set1_ps(p.bias), scale = _mm_set1_ps(p.scale), lo = _mm_set1_ps(-1.0f),
                   hi = _mm_set1_ps(top + 1.0f), magic = _mm_set1_ps(12582912.0f), zero = _mm_setzero_ps(),
                   topv = _mm_set1_ps(top);
      for (int j = 0; j < group; j += 16) {
        __m128i q[4];
        for (int k = 0; k < 4; ++k) {
          __m128 x = _mm_div_ps(_mm_sub_ps(_mm_loadu_ps(w + j + 4 * k), bias), scale);
          x = _mm_min_ps(_mm_max_ps(x, lo), hi);
          x = _mm_sub_ps(_mm_add_ps(x, magic), magic);
          x = _mm_min_ps(_mm_max_ps(x, zero), topv);
          q[k] = _mm_cvttps_epi32(x);
        }
        // 16 codes as bytes, element order kept.
        __m128i b = _mm_packus_epi16(_mm_packs_epi32(q[0], q[1]), _mm_packs_epi32(q[2], q[3]));
        if constexpr (kBits == 8) {
          _mm_storeu_si128(reinterpret_cast<__m128i*>(out + j / 4), b);
        } else {
          __m128i even = _mm_and_si128(b, _mm_set1_epi16(0x00FF));
          __m128i odd = _mm_srli_epi16(b, 8);
          __m128i pairs = _mm_or_si128(even, _mm_slli_epi16(odd, 4));  // c0 | c1 << 4 per 16-bit lane
          _mm_storel_epi64(reinterpret_cast<__m128i*>(out + j / 8), _mm_packus_epi16(pairs, pairs));
        }
      }
      return;
    }
  }
#endif
  for (int j = 0; j < group; j += per) {
    uint32_t word = 0;
    for (int k = 0; k < per; ++k) {
      float x = (w[j + k] - p.bias) / p.scale;
      x = min_ps(max_ps(x, -1.0f), top + 1.0f);
      x = min_ps(max_ps(round_even_small(x), 0.0f), top);
      word |= static_cast<uint32_t>(x) << (kBits * k);
    }
    out[j / per] = word;
  }
}

void check_scale_dtype(DType t) {
  MERE_CHECK(t == DType::BF16 || t == DType::F16 || t == DType::F32, "affine",
             "scale dtype: expected BF16, F16 or F32, got ", dtype_name(t));
}

}  // namespace

void check_affine(int bits, int group, int64_t cols, std::string_view where) {
  MERE_CHECK(bits == 2 || bits == 4 || bits == 8, where, "bits: expected 2, 4 or 8, got ", bits);
  MERE_CHECK(group == 32 || group == 64 || group == 128, where, "group size: expected 32, 64 or 128, got ", group);
  MERE_CHECK(cols > 0 && cols % group == 0, where, "columns: expected a positive multiple of the group size ",
             group, ", got ", cols);
}

AffineParams affine_params(const float* w, int group, int bits) {
  const float n_bins = static_cast<float>((1 << bits) - 1);
  const float eps = 1e-7f;
  float w_min = std::numeric_limits<float>::infinity(), w_max = -w_min;
  int j = 0;
#if defined(__SSE2__)
  // Same min/max as the scalar loop for NaN-free input (the sign of a zero extreme never changes
  // the result: see the edge rule below).
  if (group >= 4) {
    __m128 mn = _mm_loadu_ps(w), mx = mn;
    for (j = 4; j + 4 <= group; j += 4) {
      __m128 v = _mm_loadu_ps(w + j);
      mn = _mm_min_ps(mn, v);
      mx = _mm_max_ps(mx, v);
    }
    float a[4], b[4];
    _mm_storeu_ps(a, mn);
    _mm_storeu_ps(b, mx);
    for (int k = 0; k < 4; ++k) {
      w_min = std::min(w_min, a[k]);
      w_max = std::max(w_max, b[k]);
    }
  }
#endif
  for (; j < group; ++j) {
    w_max = std::max(w_max, w[j]);
    w_min = std::min(w_min, w[j]);
  }
  bool mask = std::fabs(w_min) > std::fabs(w_max);
  float scale = std::max((w_max - w_min) / n_bins, eps);
  scale = mask ? scale : -scale;
  float edge = mask ? w_min : w_max;
  float q0 = std::rint(edge / scale);
  float bias = 0;
  if (q0 != 0) {
    scale = edge / q0;
    bias = edge;
  }
  return {scale, bias};
}

uint32_t affine_code(float w, AffineParams p, int bits) {
  const float top = static_cast<float>((1 << bits) - 1);
  float x = std::rint((w - p.bias) / p.scale);
  return static_cast<uint32_t>(min_ps(max_ps(x, 0.0f), top));  // NaN -> 0, as in the packed path
}

void quantize_rows_as(const float* w, int64_t rows, int64_t cols, int bits, int group, uint32_t* packed,
                      DType scale_dtype, void* scales, void* biases) {
  check_affine(bits, group, cols);
  check_scale_dtype(scale_dtype);
  const int64_t words_per_group = group * bits / 32;
  const int64_t groups = cols / group;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t g = 0; g < groups; ++g) {
      const float* src = w + r * cols + g * group;
      AffineParams p = affine_params(src, group, bits);
      uint32_t* dst = packed + (r * groups + g) * words_per_group;
      if (bits == 4) quantize_group_codes<4>(src, group, p, dst);
      else if (bits == 8) quantize_group_codes<8>(src, group, p, dst);
      else quantize_group_codes<2>(src, group, p, dst);
      store_scale(scale_dtype, scales, r * groups + g, p.scale);
      store_scale(scale_dtype, biases, r * groups + g, p.bias);
    }
  }
}

void quantize_rows(const float* w, int64_t rows, int64_t cols, int bits, int group, uint32_t* packed,
                   uint16_t* scales_bf16, uint16_t* biases_bf16) {
  quantize_rows_as(w, rows, cols, bits, group, packed, DType::BF16, scales_bf16, biases_bf16);
}

void dequantize_rows_as(const uint32_t* packed, DType scale_dtype, const void* scales, const void* biases,
                        int64_t rows, int64_t cols, int bits, int group, float* out) {
  check_affine(bits, group, cols);
  check_scale_dtype(scale_dtype);
  const int64_t groups = cols / group;
  const int64_t words = cols * bits / 32;
  const uint32_t mask = (1u << bits) - 1u;
  const int per = 32 / bits;
  for (int64_t r = 0; r < rows; ++r) {
    const uint32_t* row = packed + r * words;
    for (int64_t g = 0; g < groups; ++g) {
      float s = load_scale(scale_dtype, scales, r * groups + g);
      float b = load_scale(scale_dtype, biases, r * groups + g);
      for (int64_t c = g * group; c < (g + 1) * group; ++c) {
        uint32_t q = (row[c / per] >> (bits * (c % per))) & mask;
        out[r * cols + c] = s * static_cast<float>(q) + b;
      }
    }
  }
}

void dequantize_rows(const uint32_t* packed, const uint16_t* scales_bf16, const uint16_t* biases_bf16, int64_t rows,
                     int64_t cols, int bits, int group, float* out) {
  dequantize_rows_as(packed, DType::BF16, scales_bf16, biases_bf16, rows, cols, bits, group, out);
}

void dequantize_row(const uint32_t* packed, const uint16_t* scales_bf16, const uint16_t* biases_bf16, int64_t cols,
                    int bits, int group, float* out) {
  dequantize_rows(packed, scales_bf16, biases_bf16, 1, cols, bits, group, out);
}

void pack_codes(const uint8_t* codes, int64_t n, int bits, uint32_t* packed) {
  MERE_CHECK(bits == 2 || bits == 4 || bits == 8, "affine", "bits: expected 2, 4 or 8, got ", bits);
  const int per = 32 / bits;
  MERE_CHECK(n % per == 0, "affine", "pack_codes: expected a multiple of ", per, " codes, got ", n);
  const uint32_t mask = (1u << bits) - 1u;
  for (int64_t w = 0; w < n / per; ++w) {
    uint32_t word = 0;
    for (int k = 0; k < per; ++k) {
      uint32_t q = codes[w * per + k];
      MERE_CHECK(q <= mask, "affine", "pack_codes: code ", w * per + k, ": expected < ", mask + 1, ", got ", q);
      word |= q << (bits * k);
    }
    packed[w] = word;
  }
}

void unpack_codes(const uint32_t* packed, int64_t n, int bits, uint8_t* codes) {
  MERE_CHECK(bits == 2 || bits == 4 || bits == 8, "affine", "bits: expected 2, 4 or 8, got ", bits);
  for (int64_t i = 0; i < n; ++i) codes[i] = static_cast<uint8_t>(code_at(packed, i, bits));
}

}  // namespace mere::quant
