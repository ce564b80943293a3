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
  double ws_us = 0, blas_us = 0;  // µs a call at the measured T (median of rounds); ws_us: the faster grid
  double streamk_us = 0, whole_us = 0;  // the ws GEMM on each grid (WsGrid)
  bool ws = false;                // the wgmma GEMM beat the cuBLASLt path by >= 2%
  WsGrid grid = WsGrid::StreamK;  // whole tiles where they beat stream-K by >= 2%
};

// A group of matrices that share X (one gemm_shared call of the engine: the 27B GDN qkv / z / b / a,
// attention q / k / v, gate / up) timed as ONE wgemm_group launch against its matrices on their own
// paths (each shape's choice above, one launch each).
struct PrefillGroupChoice {
  std::vector<int64_t> rows;  // the matrices' rows in launch order
  int64_t cols = 0;
  double group_us = 0, separate_us = 0;  // group_us: the faster grid
  double streamk_us = 0, whole_us = 0;
  bool grouped = false;  // the one launch beat the separate ones by >= 2%
  WsGrid grid = WsGrid::StreamK;
};

class PrefillGemmChoices {
 public:
  // Times every distinct shape among `mats` that wgemm supports on both paths at T rows (input
  // xq: [T, cols] bf16 for the widest matrix, its values irrelevant to the time; outputs into a
  // scratch allocated here). blas must hold the largest matrix; ws must be a warp-specialised form.
  void measure(CudaDevice& dev, const std::vector<QWeightView>& mats, BlasGemm& blas, WgemmStreamK& ws,
               const uint16_t* xq, int64_t T);
  // Whether measure / measure_groups also time the whole-tile grid (else every ws launch is stream-K).
  void allow_whole_tiles(bool on) { whole_ok_ = on; }
  // Whether W is a matrix the wgmma GEMM reads and its shape was measured faster there (false for
  // shapes never measured and for layouts it cannot read, such as tiled weights).
  bool ws(const CudaDevice& dev, const QWeightView& W) const;
  // The grid the ws GEMM runs W's shape on (StreamK for shapes never measured).
  WsGrid grid(const QWeightView& W) const;
  // After measure(): times each distinct group (2..kWgemmMaxGroup matrices wgemm supports, the same
  // cols; groups of another size or mixed cols are skipped) both ways at T rows. blas may be null when
  // no shape took the cuBLASLt path.
  void measure_groups(CudaDevice& dev, const std::vector<std::vector<QWeightView>>& groups, BlasGemm* blas,
                      WgemmStreamK& ws, const uint16_t* xq, int64_t T);
  // Whether these matrices (in this order) were measured faster as one launch, and on which grid.
  bool grouped(const WgemmOut* outs, int n, WsGrid* grid) const;
  bool any_grouped() const { return any_grouped_; }
  const std::vector<PrefillGemmChoice>& records() const { return records_; }
  const std::vector<PrefillGroupChoice>& group_records() const { return groups_; }
  // "[rows,cols] ws 172.1 us (blas 205.4); ...; group [10240+6144+48+48,5120] one launch 150.2 us
  // (separate 210.3); ..." ("" before measure)
  std::string summary() const;

 private:
  const PrefillGemmChoice* record(const QWeightView& W) const;  // W's shape's record, or null
  std::vector<PrefillGemmChoice> records_;
  std::vector<PrefillGroupChoice> groups_;
  bool any_grouped_ = false;
  bool whole_ok_ = true;
};

}  // namespace mere::cuda
