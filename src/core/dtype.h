// Element types of checkpoint tensors and conversions to fp32 (the reference backend's compute type).
#pragma once
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace mere {

enum class DType : uint8_t { F32, F16, BF16, U32, I32, U8, I64, F64, I8, U16, I16, BOOL };

size_t dtype_size(DType t);
const char* dtype_name(DType t);          // safetensors spelling: "F32", "BF16", ...
bool parse_dtype(std::string_view s, DType* out);  // false for unknown names

inline float bf16_to_f32(uint16_t b) {
  uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
// Round-to-nearest-even, NaN kept quiet (matches torch's float -> bfloat16).
inline uint16_t f32_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);

// Converts n elements of a float-valued dtype (F32/F16/BF16/F64) to fp32. Throws for other dtypes.
void convert_to_f32(DType t, const void* src, float* dst, size_t n);

}  // namespace mere
