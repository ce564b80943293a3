// MLX affine quantisation: hand-computed packing layouts, the exact scale/bias rule of
// mlx::core::quantize (positive and negative scales, the q0 == 0 edge), round-trip error bounds for
// bits 4/8 and group sizes 32/64/128, scale dtypes, and argument validation.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "quant/affine.h"

namespace q = mere::quant;
using mere::bf16_to_f32;
using mere::f32_to_bf16;

TEST(Affine, PackingIsLsbFirst) {
  std::vector<uint8_t> c4 = {1, 2, 3, 4, 5, 6, 7, 8, 15, 0, 0, 0, 0, 0, 0, 9};
  uint32_t w4[2];
  q::pack_codes(c4.data(), 16, 4, w4);
  EXPECT_EQ(w4[0], 0x87654321u);  // element c in bits 4*(c%8)..4*(c%8)+3
  EXPECT_EQ(w4[1], 0x9000000Fu);
  std::vector<uint8_t> c8 = {0x11, 0x22, 0x33, 0x44};
  uint32_t w8;
  q::pack_codes(c8.data(), 4, 8, &w8);
  EXPECT_EQ(w8, 0x44332211u);
  std::vector<uint8_t> c2 = {1, 2, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3};
  uint32_t w2;
  q::pack_codes(c2.data(), 16, 2, &w2);
  EXPECT_EQ(w2, 0xC0000039u);
  std::vector<uint8_t> back(16);
  q::unpack_codes(w4, 16, 4, back.data());
  EXPECT_EQ(back, c4);
  EXPECT_EQ(q::code_at(w4, 15, 4), 9u);
  EXPECT_EQ(q::code_at(&w8, 2, 8), 0x33u);
  std::vector<uint8_t> bad = {16, 0, 0, 0, 0, 0, 0, 0};
  EXPECT_THROW(q::pack_codes(bad.data(), 8, 4, w4), mere::Error);
  EXPECT_THROW(q::pack_codes(c4.data(), 7, 4, w4), mere::Error);
}

TEST(Affine, MlxScaleRulePositiveScale) {
  // |min| > |max|: positive scale, bias = min. w = -1 + 0.05 j (j = 0..31): max = 0.55.
  std::vector<float> w(32);
  for (int j = 0; j < 32; ++j) w[j] = -1.0f + 0.05f * static_cast<float>(j);
  auto p = q::affine_params(w.data(), 32, 4);
  float s0 = (w[31] - w[0]) / 15.0f;
  float q0 = std::rint(-1.0f / s0);
  EXPECT_FLOAT_EQ(p.bias, -1.0f);
  EXPECT_FLOAT_EQ(p.scale, -1.0f / q0);
  EXPECT_GT(p.scale, 0);
  std::vector<uint32_t> packed(4);
  uint16_t s, b;
  q::quantize_rows(w.data(), 1, 32, 4, 32, packed.data(), &s, &b);
  EXPECT_EQ(s, f32_to_bf16(p.scale));
  EXPECT_EQ(b, f32_to_bf16(-1.0f));
  for (int j = 0; j < 32; ++j) {
    float expect = std::min(std::max(std::rint((w[j] - p.bias) / p.scale), 0.0f), 15.0f);
    EXPECT_EQ(q::code_at(packed.data(), j, 4), static_cast<uint32_t>(expect)) << j;
  }
  EXPECT_EQ(q::code_at(packed.data(), 0, 4), 0u);
}

TEST(Affine, MlxScaleRuleNegativeScale) {
  // |max| >= |min|: negative scale, bias = max; the max maps to code 0 and the min to the top code.
  std::vector<float> w(32, 0.0f);
  w[0] = -0.5f;
  w[1] = 1.0f;
  for (int j = 2; j < 32; ++j) w[j] = 0.25f;
  auto p = q::affine_params(w.data(), 32, 4);
  EXPECT_FLOAT_EQ(p.bias, 1.0f);
  EXPECT_FLOAT_EQ(p.scale, 1.0f / std::rint(1.0f / (-1.5f / 15.0f)));  // 1 / -10
  EXPECT_LT(p.scale, 0);
  EXPECT_EQ(q::affine_code(1.0f, p, 4), 0u);
  EXPECT_EQ(q::affine_code(-0.5f, p, 4), 15u);
  EXPECT_EQ(q::affine_code(0.25f, p, 4), static_cast<uint32_t>(std::rint(0.75f / 0.1f)));
}

TEST(Affine, MlxScaleRuleDegenerateGroups) {
  std::vector<float> zeros(64, 0.0f);
  auto p = q::affine_params(zeros.data(), 64, 4);
  EXPECT_EQ(p.bias, 0.0f);  // q0 == 0: bias stays 0, scale = -eps
  EXPECT_FLOAT_EQ(p.scale, -1e-7f);
  std::vector<float> same(64, 0.3f);
  p = q::affine_params(same.data(), 64, 8);
  EXPECT_FLOAT_EQ(p.bias, 0.3f);
  std::vector<uint32_t> packed(16);
  uint16_t s, b;
  q::quantize_rows(same.data(), 1, 64, 8, 64, packed.data(), &s, &b);
  std::vector<float> out(64);
  q::dequantize_row(packed.data(), &s, &b, 64, 8, 64, out.data());
  for (float v : out) EXPECT_NEAR(v, bf16_to_f32(f32_to_bf16(0.3f)), 1e-6f);
  for (uint32_t word : packed) EXPECT_EQ(word, 0u);
}

TEST(Affine, RoundTripErrorBounds) {
  std::mt19937 rng(1234);
  std::normal_distribution<float> nd(0.0f, 0.02f);
  for (int bits : {4, 8}) {
    for (int group : {32, 64, 128}) {
      const int64_t rows = 7, cols = 256;
      std::vector<float> w(rows * cols);
      for (auto& v : w) v = bf16_to_f32(f32_to_bf16(nd(rng) + (&v - w.data()) % 3 * 0.01f));
      std::vector<uint32_t> packed(q::packed_cols(cols, bits) * rows);
      std::vector<uint16_t> sc(q::group_cols(cols, group) * rows), bi(sc.size());
      q::quantize_rows(w.data(), rows, cols, bits, group, packed.data(), sc.data(), bi.data());
      std::vector<float> back(w.size());
      q::dequantize_rows(packed.data(), sc.data(), bi.data(), rows, cols, bits, group, back.data());
      const float top = static_cast<float>((1 << bits) - 1);
      double sum_rel = 0;
      for (int64_t i = 0; i < rows * cols; ++i) {
        const int64_t g = (i / cols) * (cols / group) + (i % cols) / group;
        const float s = std::fabs(bf16_to_f32(sc[g])), b = std::fabs(bf16_to_f32(bi[g]));
        // Rounding error (<= s/2; up to s where MLX's snapped scale clips the far edge) plus the bf16
        // rounding of scale and bias.
        const float bound = s + std::ldexp(b + top * s, -8) + 1e-7f;
        EXPECT_LE(std::fabs(back[i] - w[i]), bound) << "bits " << bits << " group " << group << " i " << i;
        sum_rel += std::fabs(back[i] - w[i]) / s;
      }
      EXPECT_LT(sum_rel / (rows * cols), 0.35) << "bits " << bits << " group " << group;
      // dequantize_row of one row equals the batch result.
      std::vector<float> row(cols);
      q::dequantize_row(packed.data() + 3 * q::packed_cols(cols, bits), sc.data() + 3 * (cols / group),
                        bi.data() + 3 * (cols / group), cols, bits, group, row.data());
      for (int64_t c = 0; c < cols; ++c) EXPECT_EQ(row[c], back[3 * cols + c]);
    }
  }
}

TEST(Affine, DequantIsScaleTimesCodePlusBias) {
  std::vector<float> w(64);
  for (int j = 0; j < 64; ++j) w[j] = std::sin(0.37f * j);
  std::vector<uint32_t> packed(8);
  uint16_t s, b;
  q::quantize_rows(w.data(), 1, 64, 4, 64, packed.data(), &s, &b);
  std::vector<float> out(64);
  q::dequantize_row(packed.data(), &s, &b, 64, 4, 64, out.data());
  for (int j = 0; j < 64; ++j)
    EXPECT_EQ(out[j], bf16_to_f32(s) * static_cast<float>(q::code_at(packed.data(), j, 4)) + bf16_to_f32(b));
}

TEST(Affine, ScaleDtypes) {
  std::vector<float> w(128);
  for (int j = 0; j < 128; ++j) w[j] = 0.01f * static_cast<float>(j % 17) - 0.05f;
  std::vector<uint32_t> p1(16), p2(16);
  float s32[2], b32[2];
  uint16_t s16[2], b16[2];
  q::quantize_rows_as(w.data(), 1, 128, 4, 64, p1.data(), mere::DType::F32, s32, b32);
  q::quantize_rows_as(w.data(), 1, 128, 4, 64, p2.data(), mere::DType::F16, s16, b16);
  EXPECT_EQ(p1, p2);  // codes use the unrounded scale whatever the storage dtype
  auto p = q::affine_params(w.data(), 64, 4);
  EXPECT_EQ(s32[0], p.scale);
  EXPECT_EQ(s16[0], mere::f32_to_f16(p.scale));
  std::vector<float> a(128), b(128);
  q::dequantize_rows_as(p1.data(), mere::DType::F32, s32, b32, 1, 128, 4, 64, a.data());
  q::dequantize_rows_as(p2.data(), mere::DType::F16, s16, b16, 1, 128, 4, 64, b.data());
  for (int j = 0; j < 128; ++j) EXPECT_NEAR(a[j], b[j], 1e-3f);
  EXPECT_THROW(q::quantize_rows_as(w.data(), 1, 128, 4, 64, p1.data(), mere::DType::I32, s32, b32), mere::Error);
}

TEST(Affine, ValidatesArguments) {
  std::vector<float> w(96);
  std::vector<uint32_t> p(96);
  std::vector<uint16_t> s(8), b(8);
  EXPECT_THROW(q::quantize_rows(w.data(), 1, 96, 4, 64, p.data(), s.data(), b.data()), mere::Error);  // 96 % 64
  EXPECT_THROW(q::quantize_rows(w.data(), 1, 96, 3, 32, p.data(), s.data(), b.data()), mere::Error);
  EXPECT_THROW(q::quantize_rows(w.data(), 1, 96, 4, 48, p.data(), s.data(), b.data()), mere::Error);
  try {
    q::check_affine(4, 64, 100, "where");
    FAIL();
  } catch (const mere::Error& e) {
    EXPECT_EQ(std::string(e.what()), "[where] columns: expected a positive multiple of the group size 64, got 100");
  }
  EXPECT_NO_THROW(q::quantize_rows(w.data(), 1, 96, 4, 32, p.data(), s.data(), b.data()));
  EXPECT_EQ(q::packed_cols(4096, 4), 512);
  EXPECT_EQ(q::packed_cols(4096, 8), 1024);
  EXPECT_EQ(q::group_cols(4096, 64), 64);
}
