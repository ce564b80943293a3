// Matrix row access: float conversion or the MLX affine dequant formula w = scale*q + bias.
#include "model/matrix.h"

#include "core/error.h"

namespace mere {

void Matrix::row_f32(int64_t r, float* out) const {
  if (!quantized()) {
    const size_t es = dtype_size(dtype);
    convert_to_f32(dtype, static_cast<const uint8_t*>(data) + static_cast<size_t>(r * cols) * es, out,
                   static_cast<size_t>(cols));
    return;
  }
  const int64_t ngroups = cols / group;
  const int64_t words_per_row = cols * bits / 32;
  const auto* w = static_cast<const uint32_t*>(data) + r * words_per_row;
  float sc[1], bi[1];
  const uint32_t mask = (1u << bits) - 1u;
  for (int64_t g = 0; g < ngroups; ++g) {
    const size_t es = dtype_size(scale_dtype);
    convert_to_f32(scale_dtype, static_cast<const uint8_t*>(scales) + static_cast<size_t>(r * ngroups + g) * es, sc, 1);
    convert_to_f32(scale_dtype, static_cast<const uint8_t*>(biases) + static_cast<size_t>(r * ngroups + g) * es, bi, 1);
    for (int64_t c = g * group; c < (g + 1) * group; ++c) {
      // little-endian bit stream, LSB first: element c occupies bits [c*bits, c*bits+bits)
      const int64_t bit = c * bits;
      const int64_t word = bit >> 5, off = bit & 31;
      uint64_t v = w[word] >> off;
      if (off + bits > 32) v |= static_cast<uint64_t>(w[word + 1]) << (32 - off);
      out[c] = sc[0] * static_cast<float>(static_cast<uint32_t>(v) & mask) + bi[0];
    }
  }
}

Matrix Matrix::row_slice(int64_t r0, int64_t n) const {
  MERE_CHECK(r0 >= 0 && n >= 0 && r0 + n <= rows, "matrix", "row slice [", r0, ", ", r0 + n, ") out of ", rows, " rows");
  Matrix m = *this;
  m.rows = n;
  if (!quantized()) {
    m.data = static_cast<const uint8_t*>(data) + static_cast<size_t>(r0 * cols) * dtype_size(dtype);
  } else {
    const int64_t ngroups = cols / group;
    m.data = static_cast<const uint32_t*>(data) + r0 * (cols * bits / 32);
    m.scales = static_cast<const uint8_t*>(scales) + static_cast<size_t>(r0 * ngroups) * dtype_size(scale_dtype);
    m.biases = static_cast<const uint8_t*>(biases) + static_cast<size_t>(r0 * ngroups) * dtype_size(scale_dtype);
  }
  return m;
}

size_t Matrix::storage_bytes() const {
  if (!quantized()) return static_cast<size_t>(rows * cols) * dtype_size(dtype);
  return static_cast<size_t>(rows * cols * bits / 8) + 2 * static_cast<size_t>(rows * (cols / group)) * dtype_size(scale_dtype);
}

}  // namespace mere
