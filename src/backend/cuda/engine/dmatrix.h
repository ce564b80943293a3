// A weight matrix on the device: MLX affine 4/8-bit group-64 with bf16 scales/biases (the qmatvec
// layout, uploaded unchanged) or float (bf16 or f32 rows). `count` > 1 stacks that many matrices of
// the same shape back to back (a MoE layer's experts), addressed by index on the device.
#pragma once
#include <cstdint>
#include <vector>

#include "backend/cuda/device.h"
#include "backend/cuda/qmatvec.h"
#include "backend/cuda/vmm_heap.h"
#include "model/matrix.h"

namespace mere::cuda {

struct DMat {
  int64_t rows = 0, cols = 0, count = 1;
  int bits = 0;        // 4 or 8: quantised; 0: float
  bool bf16 = false;   // float storage: bf16 (true) or f32
  const void* data = nullptr;        // quant: u32 codes [count*rows, cols*bits/32]; float: [count*rows, cols]
  const uint16_t* scales = nullptr;  // quant: bf16 [count*rows, cols/64]
  const uint16_t* biases = nullptr;
  bool tiled = false;  // 4-bit in qmatvec's tiled layout (data = tiled codes, scales = the {scale, bias} pairs)
  bool quantized() const { return bits != 0; }
  QWeightView qview() const {
    return QWeightView{static_cast<const uint32_t*>(data), scales, biases, rows, cols, bits, tiled};
  }
  size_t bytes_one() const {  // bytes of one of the `count` matrices
    if (bits) return static_cast<size_t>(rows * cols * bits / 8 + rows * (cols / 64) * 4);
    return static_cast<size_t>(rows * cols) * (bf16 ? 2 : 4);
  }
};

// Owns the device copies of the weights. Matrices are uploaded once; a host matrix seen again
// (the tied embedding / lm_head) maps to the same device copy.
class WeightArena {
 public:
  // Reserves address space for the whole device memory (weights are bump-allocated in it).
  explicit WeightArena(CudaDevice& dev) : dev_(dev), heap_(dev.ordinal(), dev.props().totalGlobalMem) {}
  // tile: a 4-bit matrix read only by qmatvec / qgemm goes up in the tiled layout when the process
  // runs the group-integer kernel (qmatvec_tiled_weights). A host matrix seen before keeps the layout
  // of its first upload (the tied embedding is read by the embedding kernel: MLX).
  DMat upload(const Matrix& m, const char* what, bool tile = false);
  // experts: E host matrices of one shape and format, stacked into one DMat with count = E
  DMat upload_stacked(const std::vector<const Matrix*>& ms, const char* what);
  const float* upload_vec(const std::vector<float>& v, const char* what);
  size_t bytes() const { return bytes_; }
  size_t mapped_bytes() const { return heap_.mapped(); }  // device memory behind the weights
  // Frees the staging buffer of tiled uploads (call when the uploads are done).
  void end_uploads() { stage_.reset(); }

 private:
  DMat upload_tiled(const Matrix& m, const char* what);
  void* put(const void* host, size_t bytes, const char* what);
  CudaDevice& dev_;
  VmmHeap heap_;
  std::vector<std::pair<const void*, DMat>> seen_;
  DeviceBuffer stage_;  // tiled uploads: host MLX bytes -> here -> permuted into place
  size_t bytes_ = 0;
};

}  // namespace mere::cuda
