// MLX-compatible affine quantisation ("mode": "affine") for bits 2/4/8 and group sizes 32/64/128.
// Quantisation runs along the last dim in groups of `group` elements, with the exact per-group
// scale/bias rule of mlx::core's CPU quantize (mlx/backend/cpu/quantized.cpp); codes are packed
// LSB-first into uint32 words (4-bit: element c in word c/8, bits 4*(c%8)..+3); dequantisation is
// `w = scale * q + bias` in fp32 from the stored (bf16) scale and bias.
#pragma once
#include <cstdint>
#include <string_view>

#include "core/dtype.h"

namespace mere::quant {

// Throws mere::Error "[where] ..." unless bits in {2,4,8}, group in {32,64,128}, cols % group == 0.
void check_affine(int bits, int group, int64_t cols, std::string_view where = "affine");
inline int64_t packed_cols(int64_t cols, int bits) { return cols * bits / 32; }  // uint32 words per row
inline int64_t group_cols(int64_t cols, int group) { return cols / group; }      // scales per row

// Scale and bias of one group before rounding to the storage dtype, exactly as MLX computes them:
//   n = 2^bits - 1; s = max((max - min) / n, 1e-7); edge = the min if |min| > |max| (s > 0) else
//   the max (s < 0); q0 = rint(edge / s); if q0 != 0 { s = edge / q0; bias = edge } else bias = 0.
struct AffineParams {
  float scale;
  float bias;
};
AffineParams affine_params(const float* w, int group, int bits);  // w: [group] f32
// Code of one value: clamp(rint((w - bias) / scale), 0, 2^bits - 1) (round half to even).
uint32_t affine_code(float w, AffineParams p, int bits);

// w [rows, cols] f32 -> packed [rows, cols*bits/32] u32, scales/biases [rows, cols/group] bf16
// (raw uint16 bits). Codes use the unrounded fp32 scale/bias, then scale/bias are rounded to bf16,
// as MLX does for a bf16 weight. To reproduce mlx.core.quantize of a bf16 tensor bit for bit, pass
// values that are exactly representable in bf16.
void quantize_rows(const float* w, int64_t rows, int64_t cols, int bits, int group, uint32_t* packed,
                   uint16_t* scales_bf16, uint16_t* biases_bf16);
// Same, with scales/biases stored as scale_dtype (BF16, F16 or F32 — MLX uses the weight's dtype):
// scales/biases [rows, cols/group] of that dtype.
void quantize_rows_as(const float* w, int64_t rows, int64_t cols, int bits, int group, uint32_t* packed,
                      DType scale_dtype, void* scales, void* biases);

// packed [cols*bits/32] u32, scales/biases [cols/group] bf16 -> out [cols] f32.
void dequantize_row(const uint32_t* packed, const uint16_t* scales_bf16, const uint16_t* biases_bf16, int64_t cols,
                    int bits, int group, float* out);
// rows at once: packed [rows, cols*bits/32], scales/biases [rows, cols/group] -> out [rows, cols].
void dequantize_rows(const uint32_t* packed, const uint16_t* scales_bf16, const uint16_t* biases_bf16, int64_t rows,
                     int64_t cols, int bits, int group, float* out);
// Any scale dtype (BF16/F16/F32).
void dequantize_rows_as(const uint32_t* packed, DType scale_dtype, const void* scales, const void* biases,
                        int64_t rows, int64_t cols, int bits, int group, float* out);

// Raw code packing: codes [n] (each < 2^bits) -> packed [n*bits/32]; n must be a multiple of 32/bits.
void pack_codes(const uint8_t* codes, int64_t n, int bits, uint32_t* packed);
void unpack_codes(const uint32_t* packed, int64_t n, int bits, uint8_t* codes);
inline uint32_t code_at(const uint32_t* packed, int64_t i, int bits) {
  const int per = 32 / bits;
  return (packed[i / per] >> (bits * (i % per))) & ((1u << bits) - 1u);
}

}  // namespace mere::quant
