// MLX affine quantise / dequantise and LSB-first uint32 packing (see affine.h). The hot loop
// rounds with the 1.5*2^23 trick on a pre-clamped value, which equals rint() in the default
// rounding mode for |x| < 2^22 and lets the compiler vectorise without SSE4.1.
#include "quant/affine.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

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

template <int kBits>
void quantize_group_codes(const float* w, int group, AffineParams p, uint32_t* out) {
  constexpr int per = 32 / kBits;
  const float top = static_cast<float>((1 << kBits) - 1);
  for (int j = 0; j < group; j += per) {
    uint32_t word = 0;
    for (int k = 0; k < per; ++k) {
      float x = (w[j + k] - p.bias) / p.scale;
      x = std::min(std::max(x, -1.0f), top + 1.0f);  // NaN-free inputs; keeps the rounding trick exact
      x = std::min(std::max(round_even_small(x), 0.0f), top);
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
  for (int j = 0; j < group; ++j) {
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
  return static_cast<uint32_t>(std::min(std::max(x, 0.0f), top));
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
