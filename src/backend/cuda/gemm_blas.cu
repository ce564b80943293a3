// Prefill matmuls through cuBLASLt (gemm_blas.h): whole-matrix dequantisation to bf16, then one
// cuBLASLt GEMM (bf16 operands, fp32 accumulation and output).
#include "backend/cuda/gemm_blas.h"

#include <cublasLt.h>

#include <algorithm>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/gemm_dequant.cuh"
#include "backend/cuda/launch.cuh"

namespace mere::cuda {
namespace {

// MLX layout: one thread per 8 codes (4-bit: one u32 word; 8-bit: two) -> 16 bytes of bf16, so a
// warp reads 128 (256) contiguous bytes and writes 512 (v1 took 32 codes a thread and wrote 64-byte
// strided pieces: 53% of the copy bandwidth on the H100, docs/cuda-kernels.md "prefill v4").
template <int BITS>
__global__ void dequant_mlx_kernel(const uint32_t* __restrict__ codes, const uint16_t* __restrict__ scales,
                                   const uint16_t* __restrict__ biases, int64_t n8, uint16_t* __restrict__ wq) {
  pdl_begin();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;  // 8-code unit
  if (i >= n8) return;
  const int64_t col = i * 8;         // flat element index of the unit's first code
  const int64_t grp = col >> 6;      // flat group index = row * (cols / 64) + group (cols % 64 == 0)
  const uint32_t s_raw = scales[grp], b_raw = biases[grp];
  uint32_t o[4];
  if constexpr (BITS == 4) {
    dq::q4_word(codes[i], s_raw, b_raw, o);
  } else {
    const uint2 w = reinterpret_cast<const uint2*>(codes)[i];
    dq::q8_words(w.x, w.y, __uint_as_float(s_raw << 16), __uint_as_float(b_raw << 16), o);
  }
  reinterpret_cast<uint4*>(wq)[i] = make_uint4(o[0], o[1], o[2], o[3]);
}

// Tiled 4-bit layout (qmatvec.h): one thread per u32 of the codes array. Word k of lane (g, t) of
// block (tile, group) is word 2t + (k & 1) of the group of row 16 tile + g + 8 (k >> 1) -> 8
// columns of that row. Padding rows (>= rows) are skipped.
__global__ void dequant_tiled_kernel(const uint32_t* __restrict__ codes, const uint32_t* __restrict__ sb,
                                     int64_t rows, int cols, int64_t nwords, uint16_t* __restrict__ wq) {
  pdl_begin();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= nwords) return;
  const int ng = cols / 64;
  const int k = static_cast<int>(i & 3), lane = static_cast<int>((i >> 2) & 31);
  const int64_t blk = i >> 7, tile = blk / ng;
  const int G = static_cast<int>(blk - tile * ng);
  const int g = lane >> 2, t = lane & 3, half = k >> 1;
  const int64_t r = tile * 16 + g + 8 * half;
  if (r >= rows) return;
  const uint32_t p = sb[(blk * 8 + g) * 2 + half];  // {scale | bias << 16} of row r
  uint32_t o[4];
  dq::q4_word(codes[i], p & 0xFFFFu, p >> 16, o);
  reinterpret_cast<uint4*>(wq + r * cols + G * 64 + (2 * t + (k & 1)) * 8)[0] = make_uint4(o[0], o[1], o[2], o[3]);
}

void lt_check(cublasStatus_t st, const char* what) {
  MERE_CHECK(st == CUBLAS_STATUS_SUCCESS, "cuBLASLt", what, " failed: ", cublasLtGetStatusName(st), " (",
             cublasLtGetStatusString(st), ")");
}

constexpr size_t kWorkspaceBytes = size_t{32} << 20;

}  // namespace

void qgemm_dequant(CudaDevice& dev, const QWeightView& W, uint16_t* wq) {
  DeviceGuard guard(dev.ordinal());
  qgemm_dequant_on(dev.stream(), W, wq);
}

void qgemm_dequant_on(cudaStream_t stream, const QWeightView& W, uint16_t* wq) {
  MERE_CHECK(W.bits == 4 || W.bits == 8, "cuda qgemm_dequant", "bits: expected 4 or 8, got ", W.bits);
  MERE_CHECK(W.cols > 0 && W.cols % 64 == 0 && W.cols < (int64_t{1} << 30), "cuda qgemm_dequant",
             "cols: expected a positive multiple of 64, got ", W.cols);
  MERE_CHECK(W.rows > 0 && W.rows < (int64_t{1} << 31), "cuda qgemm_dequant", "rows out of range, got ", W.rows);
  MERE_CHECK(!W.tiled || W.bits == 4, "cuda qgemm_dequant", "tiled weights are 4-bit only, got ", W.bits);
  MERE_CHECK((reinterpret_cast<uintptr_t>(W.codes) & 15u) == 0 && (reinterpret_cast<uintptr_t>(wq) & 15u) == 0,
             "cuda qgemm_dequant", "codes and output must be 16-byte aligned");
  const int cols = static_cast<int>(W.cols);
  if (W.tiled) {
    const int64_t n = (W.rows + 15) / 16 * (W.cols / 64) * 128;  // u32 words of the tiled codes
    launch("qgemm dequant_tiled", dequant_tiled_kernel, static_cast<unsigned>((n + 255) / 256), 256, 0, stream,
           W.codes, reinterpret_cast<const uint32_t*>(W.scales), W.rows, cols, n, wq);
    return;
  }
  const int64_t n = W.rows * (W.cols / 8);
  if (W.bits == 4)
    launch("qgemm dequant_mlx4", dequant_mlx_kernel<4>, static_cast<unsigned>((n + 255) / 256), 256, 0, stream,
           W.codes, W.scales, W.biases, n, wq);
  else
    launch("qgemm dequant_mlx8", dequant_mlx_kernel<8>, static_cast<unsigned>((n + 255) / 256), 256, 0, stream,
           W.codes, W.scales, W.biases, n, wq);
}

struct BlasGemm::Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  size_t ws = 0;
  ~Plan() {
    if (c) cublasLtMatrixLayoutDestroy(c);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (desc) cublasLtMatmulDescDestroy(desc);
  }
};

BlasGemm::BlasGemm(CudaDevice& dev, int64_t max_weights, int overlap_sms)
    : dev_(dev), max_weights_(max_weights), overlap_sms_(overlap_sms) {
  MERE_CHECK(max_weights > 0, "cuda BlasGemm", "max_weights: expected > 0, got ", max_weights);
  MERE_CHECK(overlap_sms >= 0 && overlap_sms < dev.sm_count(), "cuda BlasGemm", "overlap_sms: expected 0..",
             dev.sm_count() - 1, ", got ", overlap_sms);
  DeviceGuard guard(dev.ordinal());
  for (int b = 0; b < (overlap_sms > 0 ? 2 : 1); ++b)
    scratch_[b] = dev.alloc(static_cast<size_t>(max_weights) * 2, "prefill bf16 weight scratch (cuBLASLt path)");
  workspace_ = dev.alloc(kWorkspaceBytes, "cuBLASLt workspace");
  // the handle last: nothing after it can throw, so the destructor always runs once it exists
  if (overlap_sms > 0) {
    MERE_CUDA_CHECK(cudaStreamCreateWithFlags(&side_, cudaStreamNonBlocking));
    for (int b = 0; b < 2; ++b) {
      MERE_CUDA_CHECK(cudaEventCreateWithFlags(&ready_[b], cudaEventDisableTiming));
      MERE_CUDA_CHECK(cudaEventCreateWithFlags(&free_[b], cudaEventDisableTiming));
    }
  }
  cublasLtHandle_t h = nullptr;
  lt_check(cublasLtCreate(&h), "cublasLtCreate");
  handle_ = h;
}

BlasGemm::~BlasGemm() {  // no DeviceGuard: it may throw; none of these calls needs the current device
  if (side_) cudaStreamSynchronize(side_);
  for (int b = 0; b < 2; ++b) {
    if (ready_[b]) cudaEventDestroy(ready_[b]);
    if (free_[b]) cudaEventDestroy(free_[b]);
  }
  if (side_) cudaStreamDestroy(side_);
  plans_.clear();
  if (handle_) cublasLtDestroy(static_cast<cublasLtHandle_t>(handle_));
}

const BlasGemm::Plan& BlasGemm::plan(int64_t N, int64_t K, int64_t T, int64_t ldy) {
  const Key key{N, K, T, ldy};
  auto it = plans_.find(key);
  if (it != plans_.end()) return *it->second;
  auto p = std::make_unique<Plan>();
  // Row-major Y[T, N] = X[T, K] · W[N, K]^T is column-major Y^T (N x T, ld ldy) = W_cm^T · X_cm with
  // W_cm = W as K x N (ld K) transposed, X_cm = X as K x T (ld K): "TN", cuBLASLt's fastest form.
  lt_check(cublasLtMatmulDescCreate(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate");
  const cublasOperation_t tA = CUBLAS_OP_T, tB = CUBLAS_OP_N;
  lt_check(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &tA, sizeof(tA)), "set TRANSA");
  lt_check(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tB, sizeof(tB)), "set TRANSB");
  if (overlap_sms_ > 0) {  // leave SMs to the side stream's dequantisation
    const int32_t sms = dev_.sm_count() - overlap_sms_;
    lt_check(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET, &sms, sizeof(sms)),
             "set SM_COUNT_TARGET");
  }
  lt_check(cublasLtMatrixLayoutCreate(&p->a, CUDA_R_16BF, static_cast<uint64_t>(K), static_cast<uint64_t>(N), K),
           "layout A");
  lt_check(cublasLtMatrixLayoutCreate(&p->b, CUDA_R_16BF, static_cast<uint64_t>(K), static_cast<uint64_t>(T), K),
           "layout B");
  lt_check(cublasLtMatrixLayoutCreate(&p->c, CUDA_R_32F, static_cast<uint64_t>(N), static_cast<uint64_t>(T), ldy),
           "layout C");
  cublasLtMatmulPreference_t pref = nullptr;
  lt_check(cublasLtMatmulPreferenceCreate(&pref), "preference");
  size_t ws = workspace_.bytes();
  lt_check(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)),
           "preference workspace");
  cublasLtMatmulHeuristicResult_t res{};
  int found = 0;
  const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(static_cast<cublasLtHandle_t>(handle_), p->desc, p->a,
                                                           p->b, p->c, p->c, pref, 1, &res, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  lt_check(st, "cublasLtMatmulAlgoGetHeuristic");
  MERE_CHECK(found > 0, "cuBLASLt", "no bf16 GEMM algorithm for Y[", T, ", ", N, "] = X[", T, ", ", K, "] W^T");
  p->algo = res.algo;
  p->ws = res.workspaceSize;
  return *plans_.emplace(key, std::move(p)).first->second;
}

void BlasGemm::gemm_on(const uint16_t* wq, int64_t N, int64_t K, const uint16_t* xq, int64_t T, float* y,
                       int64_t ldy) {
  MERE_CHECK(N > 0 && K > 0 && T > 0 && ldy >= N, "cuda BlasGemm", "shape out of range: N = ", N, ", K = ", K,
             ", T = ", T, ", ldy = ", ldy);
  const Plan& p = plan(N, K, T, ldy);
  const float one = 1.0f, zero = 0.0f;
  lt_check(cublasLtMatmul(static_cast<cublasLtHandle_t>(handle_), p.desc, &one, wq, p.a, xq, p.b, &zero, y, p.c, y,
                          p.c, &p.algo, workspace_.get(), p.ws, dev_.stream()),
           "cublasLtMatmul");
}

void BlasGemm::gemm(const uint16_t* wq, int64_t N, int64_t K, const uint16_t* xq, int64_t T, float* y, int64_t ldy) {
  DeviceGuard guard(dev_.ordinal());
  gemm_on(wq, N, K, xq, T, y, ldy);
}

void BlasGemm::run(const QWeightView& W, const uint16_t* xq, int64_t T, float* y, int64_t ldy) {
  MERE_CHECK(W.rows * W.cols <= max_weights_, "cuda BlasGemm", "matrix [", W.rows, ", ", W.cols,
             "] exceeds the bf16 scratch of ", max_weights_, " weights");
  DeviceGuard guard(dev_.ordinal());
  if (overlap_sms_ == 0) {
    qgemm_dequant(dev_, W, scratch_[0].as<uint16_t>());
    gemm_on(scratch_[0].as<uint16_t>(), W.rows, W.cols, xq, T, y, ldy);
    return;
  }
  cudaStream_t s = dev_.stream();
  // where this matrix is in the learned order (relearn from here when the order changed)
  const size_t i = pos_++;
  const bool known = i < order_.size() && order_[i].codes == W.codes && order_[i].rows == W.rows &&
                     order_[i].cols == W.cols;
  if (!known) {
    order_.resize(std::min(order_.size(), i));
    order_.push_back(W);
  }
  const int b = static_cast<int>(i & 1);
  uint16_t* wq = scratch_[b].as<uint16_t>();
  // scratch b: dequantised ahead on the side stream, or a stale prefetch may still be writing it
  MERE_CUDA_CHECK(cudaStreamWaitEvent(s, ready_[b], 0));
  if (!known || prefetched_ != static_cast<int64_t>(i)) qgemm_dequant(dev_, W, wq);
  prefetched_ = -1;
  gemm_on(wq, W.rows, W.cols, xq, T, y, ldy);
  MERE_CUDA_CHECK(cudaEventRecord(free_[b], s));
  if (i + 1 < order_.size()) {  // dequantise the next matrix of the pass into the other scratch
    const int nb = b ^ 1;
    MERE_CUDA_CHECK(cudaStreamWaitEvent(side_, free_[nb], 0));
    const QWeightView& Wn = order_[i + 1];
    qgemm_dequant_on(side_, Wn, scratch_[nb].as<uint16_t>());
    MERE_CUDA_CHECK(cudaEventRecord(ready_[nb], side_));
    prefetched_ = static_cast<int64_t>(i + 1);
  }
}

}  // namespace mere::cuda
