// dtype names, sizes and float conversions.
#include "core/dtype.h"

#include <cmath>

#include "core/error.h"

namespace mere {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::F32: case DType::U32: case DType::I32: return 4;
    case DType::F16: case DType::BF16: case DType::U16: case DType::I16: return 2;
    case DType::U8: case DType::I8: case DType::BOOL: return 1;
    case DType::I64: case DType::F64: return 8;
  }
  return 0;
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "F32";
    case DType::F16: return "F16";
    case DType::BF16: return "BF16";
    case DType::U32: return "U32";
    case DType::I32: return "I32";
    case DType::U8: return "U8";
    case DType::I64: return "I64";
    case DType::F64: return "F64";
    case DType::I8: return "I8";
    case DType::U16: return "U16";
    case DType::I16: return "I16";
    case DType::BOOL: return "BOOL";
  }
  return "?";
}

bool parse_dtype(std::string_view s, DType* out) {
  static const std::pair<const char*, DType> kNames[] = {
      {"F32", DType::F32}, {"F16", DType::F16}, {"BF16", DType::BF16}, {"U32", DType::U32},
      {"I32", DType::I32}, {"U8", DType::U8},   {"I64", DType::I64},   {"F64", DType::F64},
      {"I8", DType::I8},   {"U16", DType::U16}, {"I16", DType::I16},   {"BOOL", DType::BOOL}};
  for (const auto& [name, t] : kNames)
    if (s == name) {
      *out = t;
      return true;
    }
  return false;
}

float f16_to_f32(uint16_t h) {
  uint32_t sign = (h >> 15) & 1, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  float v;
  if (exp == 0) v = std::ldexp(static_cast<float>(man), -24);
  else if (exp == 31) v = man ? NAN : INFINITY;
  else v = std::ldexp(static_cast<float>(man | 0x400), static_cast<int>(exp) - 25);
  return sign ? -v : v;
}

uint16_t f32_to_f16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  uint32_t sign = (u >> 16) & 0x8000;
  uint32_t a = u & 0x7fffffff;
  if (a > 0x7f800000) return static_cast<uint16_t>(sign | 0x7e00);
  if (a >= 0x477ff000) return static_cast<uint16_t>(sign | 0x7c00);  // overflow -> inf
  if (a < 0x38800000) {                                                // subnormal or zero
    float af;
    std::memcpy(&af, &a, 4);
    uint32_t m = static_cast<uint32_t>(std::nearbyint(af * 16777216.0f));  // 2^24, ties-to-even
    return static_cast<uint16_t>(sign | m);
  }
  uint32_t r = a + 0xfff + ((a >> 13) & 1);  // round to nearest even on the 13 dropped bits
  return static_cast<uint16_t>(sign | ((r - 0x38000000) >> 13));
}

void convert_to_f32(DType t, const void* src, float* dst, size_t n) {
  switch (t) {
    case DType::F32: std::memcpy(dst, src, n * 4); return;
    case DType::BF16: {
      const auto* s = static_cast<const uint16_t*>(src);
      for (size_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(s[i]);
      return;
    }
    case DType::F16: {
      const auto* s = static_cast<const uint16_t*>(src);
      for (size_t i = 0; i < n; ++i) dst[i] = f16_to_f32(s[i]);
      return;
    }
    case DType::F64: {
      const auto* s = static_cast<const double*>(src);
      for (size_t i = 0; i < n; ++i) dst[i] = static_cast<float>(s[i]);
      return;
    }
    default: fail("dtype", cat("cannot convert ", dtype_name(t), " to F32: not a float type"));
  }
}

}  // namespace mere
