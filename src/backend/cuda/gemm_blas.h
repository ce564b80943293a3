// Prefill matmuls through cuBLASLt (MERE_CUDA_PREFILL=blas): Y[T, N] = X[T, K] · W^T for W an MLX
// affine-quantised matrix (4/8-bit, group 64) or tiled 4-bit weights (qmatvec.h).
//
// W is first dequantised to bf16 into a scratch on the device (qgemm_dequant: bitwise the values
// qgemm's shared-memory tiles hold, in the prepared-X column order of gemm.h, so X comes from
// qgemm_prepare_x unchanged), then one cuBLASLt bf16 x bf16 GEMM with fp32 accumulation writes fp32
// Y. Numerics are qgemm's (the same bf16 operands, fp32 sums) up to the order of the fp32 sums,
// which cuBLASLt chooses per shape: deterministic for a given (T, N, K) on one GPU and library,
// but not the same sums for different T. Why: docs/cuda-kernels.md §5 "prefill v4".
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <tuple>
#include <vector>

#include <cuda_runtime.h>

#include "backend/cuda/device.h"
#include "backend/cuda/qmatvec.h"  // QWeightView

namespace mere::cuda {

// W -> wq: [W.rows, W.cols] bf16 (raw bits), row stride W.cols, columns of every aligned group of 8
// in the order {0, 4, 1, 5, 2, 6, 3, 7}; element value bf16(q * scale + bias) exactly as qgemm.
void qgemm_dequant(CudaDevice& dev, const QWeightView& W, uint16_t* wq);
// The same on `stream` (of W's device, which must be current).
void qgemm_dequant_on(cudaStream_t stream, const QWeightView& W, uint16_t* wq);

// One per engine (per device): the cuBLASLt handle, its workspace, the bf16 weight scratch and the
// matmul plans of the shapes seen so far. Not thread-safe; the GEMMs run on dev.stream().
//
// Overlap (overlap_sms > 0): the matrices of a pass come in the same order every pass, so run()
// learns that order and, after queueing matrix i's GEMM, dequantises matrix i + 1 into the second
// scratch on a side stream (events order it after the GEMM that last read that scratch, and the next
// GEMM after it); the GEMMs then target overlap_sms fewer SMs so the dequantisation has SMs to run
// on. Call begin_pass() where a pass (of the learned order) starts. Any call out of the learned order
// is correct, just not overlapped.
class BlasGemm {
 public:
  // Scratch for matrices of up to max_weights elements (two with overlap). Throws mere::Error naming
  // what failed (cuBLASLt initialisation, device memory, the stream).
  BlasGemm(CudaDevice& dev, int64_t max_weights, int overlap_sms = 0);
  ~BlasGemm();
  BlasGemm(const BlasGemm&) = delete;
  BlasGemm& operator=(const BlasGemm&) = delete;

  // y: [T, W.rows] f32 (row stride ldy >= W.rows) = xq · dequant(W)^T. xq: [T, W.cols] bf16 from
  // qgemm_prepare_x. W.rows * W.cols must fit the scratch.
  void run(const QWeightView& W, const uint16_t* xq, int64_t T, float* y, int64_t ldy);
  // Y = xq · wq^T for an already dequantised wq [N, K] (benchmarks, checks).
  void gemm(const uint16_t* wq, int64_t N, int64_t K, const uint16_t* xq, int64_t T, float* y, int64_t ldy);

  // The next run() is the first matrix of a pass.
  void begin_pass() { pos_ = 0; }

  size_t device_bytes() const { return scratch_[0].bytes() + scratch_[1].bytes() + workspace_.bytes(); }
  int64_t max_weights() const { return max_weights_; }

 private:
  struct Plan;
  using Key = std::tuple<int64_t, int64_t, int64_t, int64_t>;  // N, K, T, ldy
  const Plan& plan(int64_t N, int64_t K, int64_t T, int64_t ldy);
  void gemm_on(const uint16_t* wq, int64_t N, int64_t K, const uint16_t* xq, int64_t T, float* y, int64_t ldy);

  CudaDevice& dev_;
  int64_t max_weights_ = 0;
  int overlap_sms_ = 0;
  DeviceBuffer scratch_[2], workspace_;
  void* handle_ = nullptr;  // cublasLtHandle_t
  std::map<Key, std::unique_ptr<Plan>> plans_;
  // overlap state
  cudaStream_t side_ = nullptr;
  cudaEvent_t ready_[2] = {nullptr, nullptr};  // side: scratch b holds its matrix
  cudaEvent_t free_[2] = {nullptr, nullptr};   // main: the last GEMM reading scratch b is done
  std::vector<QWeightView> order_;             // the learned order of a pass
  size_t pos_ = 0;                             // index of the next run() in order_
  int64_t prefetched_ = -1;                    // order_ index dequantised ahead (into scratch index % 2)
};

}  // namespace mere::cuda
