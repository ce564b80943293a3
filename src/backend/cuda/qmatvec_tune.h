// Measured launch shapes for the 4-bit integer matvec (MERE_CUDA_MV_TUNE; docs/cuda-kernels.md §1
// "v12"). Every shape of the integer contract (rows a batch, chunks in flight, register or cp.async
// ring) gives every row bitwise the same value (mere_cuda_check: "integer: all launch shapes"), so
// which one a launch uses is a speed choice only, and the fastest depends on the launch's row count
// and width (session-15 sweep: R3U1 at [12288,5120], the cp.async ring R4D3 at [10240,5120], R8U1
// at the lm_head, R2U1 at [5120,17408]). The table times each compiled shape on the engine's own
// matrices once, at load, and the engine passes the winner to qmatvec_multi.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "backend/cuda/device.h"
#include "backend/cuda/qmatvec.h"

namespace mere::cuda {

// MERE_CUDA_MV_TUNE: unset or 2 -> the engine measures its 1-token matvec launches at load, each
// shape timed cold (the graph cycles through the same launch of up to 16 layers, so the weights come
// from DRAM as in a decode step instead of the L2 that one matrix's 16 repeats fit in), with R4U2 and
// the double-buffered register kernel (R2DB, R4DB, R8DB) among the candidates; 1 -> session 16's
// tuning (one layer's launch repeated, the older candidates); 0 -> qmatvec's default shapes.
// Anything else is a mere::Error. Read once per process.
int matvec_tune_mode();
bool matvec_tune_enabled();

// One measured launch: its matrices' rows, width and token count, each shape's time a launch
// (µs, CUDA-graph replay, the median of rounds), the shape kept.
struct MatvecTuneRecord {
  std::vector<int64_t> rows;
  int64_t cols = 0, T = 0;
  std::vector<std::pair<std::string, double>> tried;
  std::string chosen;
  double chosen_us = 0, default_us = 0;
  QMatvecConfig cfg;
  // the fastest register-kernel shape (cfg.integer 1, or {} when the default is one and none beat it
  // by the margin): the shape of the launch with its input norm inside (qmatvec_norm_multi)
  QMatvecConfig register_cfg;
};

// Human-readable shape name: "R4U1", "fit", "pipe R4D3", "default".
std::string matvec_shape_name(const QMatvecConfig& c);

class MatvecShapeTable {
 public:
  // The measured shape of this launch (same matrix rows, width, bits and T), or {} (qmatvec's
  // default) when it was not measured.
  QMatvecConfig get(const QMatvecOut* outs, int n, int64_t T) const;
  // The measured register-kernel shape of this launch (record's register_cfg), or {}.
  QMatvecConfig get_register(const QMatvecOut* outs, int n, int64_t T) const;
  // Times every compiled integer-contract shape on this launch and keeps the fastest; a shape must
  // beat the default by 2% to replace it (the graph timings vary ~1-3% run to run). The outputs'
  // y are overwritten (never accumulated into: the caller passes scratch). 4-bit MLX-layout
  // launches only (others keep their default); measured once per key.
  // sets > 1: outs holds `sets` launches of this shape ([sets][n], other layers' matrices), timed in
  // turn (cold weights); the record is keyed by set 0.
  void tune(CudaDevice& dev, const QMatvecOut* outs, int n, int sets, const float* ws, int64_t T);
  const std::vector<MatvecTuneRecord>& records() const { return records_; }

 private:
  const MatvecTuneRecord* find(const QMatvecOut* outs, int n, int64_t T) const;
  std::vector<MatvecTuneRecord> records_;
};

}  // namespace mere::cuda
