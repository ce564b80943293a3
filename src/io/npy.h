// NumPy .npy files: a writer for float32 / int32 C-order arrays (`text logits --out x.npy`) and a
// bounds-checked reader for the fixtures numpy writes (format 1.0/2.0/3.0, little-endian '<f4' or
// '<i4'/'<i8', fortran_order False). Every malformed input is a mere::Error naming the file.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace mere {

template <class T>
struct NpyArray {
  std::vector<int64_t> shape;  // () for a scalar
  std::vector<T> data;         // C order, numel() elements
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
};

// The full preamble (magic, version 1.0, header dict padded to a multiple of 64 bytes).
// descr is "<f4" or "<i4".
std::string npy_preamble(std::string_view descr, const std::vector<int64_t>& shape);

// data: numel(shape) elements, C order. Written to <path>.tmp then renamed.
void write_npy_f32(const std::string& path, const float* data, const std::vector<int64_t>& shape);
void write_npy_i32(const std::string& path, const int32_t* data, const std::vector<int64_t>& shape);

// Readers. source names the input in error messages.
NpyArray<float> parse_npy_f32(const void* bytes, size_t size, std::string_view source = "npy");
NpyArray<float> read_npy_f32(const std::string& path);
// Accepts '<i4' and '<i8' (values must fit in int32).
NpyArray<int32_t> parse_npy_i32(const void* bytes, size_t size, std::string_view source = "npy");
NpyArray<int32_t> read_npy_i32(const std::string& path);

}  // namespace mere
