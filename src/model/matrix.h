// A weight matrix view [rows, cols] (PyTorch [out, in]) over checkpoint memory: float
// (F32/BF16/F16) or MLX affine-quantised (packed uint32 codes + per-group scales/biases).
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "core/dtype.h"

namespace mere {

struct Matrix {
  int64_t rows = 0, cols = 0;
  DType dtype = DType::F32;       // element dtype for float matrices
  const void* data = nullptr;     // float: [rows, cols]; quantised: uint32 [rows, cols*bits/32]
  // affine quantisation (bits == 0: not quantised); w = scale * q + bias per group of `group` columns
  int bits = 0, group = 0;
  DType scale_dtype = DType::BF16;
  const void* scales = nullptr;   // [rows, cols/group]
  const void* biases = nullptr;   // [rows, cols/group]
  std::shared_ptr<const std::vector<uint8_t>> owner;  // keeps transformed data alive, if any

  bool empty() const { return data == nullptr; }
  bool quantized() const { return bits != 0; }
  // Writes row r as fp32 (dequantised when quantised). out: [cols]
  void row_f32(int64_t r, float* out) const;
  // Sub-matrix of rows [r0, r0+n) (a view, same storage).
  Matrix row_slice(int64_t r0, int64_t n) const;
  size_t storage_bytes() const;
};

}  // namespace mere
