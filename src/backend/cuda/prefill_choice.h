// Which prefill GEMM runs each 4-bit matrix under MERE_CUDA_PREFILL=auto (the default on sm_90):
// the warp-specialised wgmma GEMM that dequantises per group (gemm_wgmma_ws.h, v6d) or the
// cuBLASLt path (whole-matrix dequantisation, then a bf16 GEMM; gemm_blas.h). Neither wins
// everywhere — s18 H100, T = 512: ws 173 vs 206 µs at [17408, 5120] but 87 vs 76 at [6144, 5120],
// 32 vs 47 at [8192, 2048] — and the crossover moves with the GPU's compute-to-bandwidth ratio, so
// the engine times both on its own matrices once, at its first prompt, and keeps the faster a shape.
// Both use the same bf16 operands (the summation order differs: results agree to fp32 rounding).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "backend/cuda/device.h"
#include "backend/cuda/gemm_blas.h"
#include "backend/cuda/gemm_wgmma.h"
#include "backend/cuda/qmatvec.h"  // QWeightView

namespace mere::cuda {

struct PrefillGemmChoice {
  int64_t rows = 0, cols = 0;
  double ws_us = 0, blas_us = 0;  // µs a call at the measured T (median of rounds)
  bool ws = false;                // the wgmma GEMM beat the cuBLASLt path by >= 2%
};

class PrefillGemmChoices {
 public:
  // Times every distinct shape among `mats` that wgemm supports on both paths at T rows (input
  // xq: [T, cols] bf16 for the widest matrix, its values irrelevant to the time; outputs into a
  // scratch allocated here). blas must hold the largest matrix; ws must be a warp-specialised form.
  void measure(CudaDevice& dev, const std::vector<QWeightView>& mats, BlasGemm& blas, WgemmStreamK& ws,
               const uint16_t* xq, int64_t T);
  // Whether W is a matrix the wgmma GEMM reads and its shape was measured faster there (false for
  // shapes never measured and for layouts it cannot read, such as tiled weights).
  bool ws(const CudaDevice& dev, const QWeightView& W) const;
  const std::vector<PrefillGemmChoice>& records() const { return records_; }
  // "[rows,cols] ws 172.1 us (blas 205.4); ..." ("" before measure)
  std::string summary() const;

 private:
  std::vector<PrefillGemmChoice> records_;
};

}  // namespace mere::cuda
