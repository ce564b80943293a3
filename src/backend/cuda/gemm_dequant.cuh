// Affine 4/8-bit -> bf16 dequantisation shared by qgemm's shared-memory tiles (gemm.cu), the
// whole-matrix dequantisation in front of cuBLASLt (gemm_blas.cu) and the wgmma GEMM's A registers
// (gemm_wgmma.cu), so every GEMM path multiplies bitwise the same bf16 weights. Output order: the 8
// codes of an aligned group of 8 columns come out as the pairs {0,4} {1,5} {2,6} {3,7} (low half
// first) — the prepared-X column order of gemm.h.
#pragma once
#include <cuda_bf16.h>

#include <cstdint>

namespace mere::cuda::dq {

__device__ __forceinline__ uint32_t lop_and_or(uint32_t x, uint32_t m, uint32_t c) {
  uint32_t r;
  asm("lop3.b32 %0, %1, %2, %3, 0xEA;\n" : "=r"(r) : "r"(x), "r"(m), "r"(c));  // (x & m) | c
  return r;
}
__device__ __forceinline__ uint32_t bf2_u32(__nv_bfloat162 v) { return *reinterpret_cast<uint32_t*>(&v); }
__device__ __forceinline__ __nv_bfloat162 u32_bf2(uint32_t v) { return *reinterpret_cast<__nv_bfloat162*>(&v); }

// 4-bit pair j (0..3) of a 32-bit word of 8 codes (LSB first): codes j and j + 4 -> the bf16 pair
// {bf16(q_j * s + b), bf16(q_j+4 * s + b)}, one rounding each (bf16 fma). s2 / b2: the group's scale
// and bias in both halves. j may be a run-time value (the wgmma GEMM's lanes take pair lane % 4).
__device__ __forceinline__ uint32_t q4_pair(uint32_t w, int j, __nv_bfloat162 s2, __nv_bfloat162 b2) {
  const __nv_bfloat162 one2 = u32_bf2(0x3F803F80u), m128 = u32_bf2(0xC300C300u);  // 1, -128
  // codes j and j+4 -> bf16 (128 + q) pair -> q exactly -> fma(q, s, b), one rounding
  const uint32_t t = lop_and_or(w >> (4 * j), 0x000F000Fu, 0x43004300u);
  const __nv_bfloat162 q = __hfma2(u32_bf2(t), one2, m128);
  return bf2_u32(__hfma2(q, s2, b2));
}
__device__ __forceinline__ __nv_bfloat162 bf2_splat(uint32_t raw) { return u32_bf2(raw | (raw << 16)); }

// 4-bit: one 32-bit word of 8 codes (LSB first) -> o[4] bf16 pairs, bf16(q * s + b) with one
// rounding (bf16 fma); s_raw / b_raw: bf16 bits of the group's scale and bias.
__device__ __forceinline__ void q4_word(uint32_t w, uint32_t s_raw, uint32_t b_raw, uint32_t o[4]) {
  const __nv_bfloat162 s2 = bf2_splat(s_raw), b2 = bf2_splat(b_raw);
#pragma unroll
  for (int j = 0; j < 4; ++j) o[j] = q4_pair(w, j, s2, b2);
}

// 8-bit: two words (codes 0..3 and 4..7 of a group of 8) -> o[4] bf16 pairs, bf16(fp32 fma(q, s, b)).
__device__ __forceinline__ void q8_words(uint32_t wa, uint32_t wb, float s, float b, uint32_t o[4]) {
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const float qa = __uint_as_float(__byte_perm(wa, 0x4B000000u, 0x7440u + j)) - 8388608.0f;
    const float qb = __uint_as_float(__byte_perm(wb, 0x4B000000u, 0x7440u + j)) - 8388608.0f;
    o[j] = bf2_u32(__floats2bfloat162_rn(__fmaf_rn(qa, s, b), __fmaf_rn(qb, s, b)));
  }
}

}  // namespace mere::cuda::dq
