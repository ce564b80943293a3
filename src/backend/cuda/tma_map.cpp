#include "backend/cuda/tma_map.h"

#include <cuda_runtime.h>
#include <cudaTypedefs.h>

#include "backend/cuda/cuda_check.h"

namespace mere::cuda {
namespace {

PFN_cuTensorMapEncodeTiled_v12000 encoder() {
  static const PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
    MERE_CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &q));
    MERE_CHECK(q == cudaDriverEntryPointSuccess && p != nullptr, "cuda tma", "the driver has no cuTensorMapEncodeTiled");
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(p);
  }();
  return fn;
}

}  // namespace

CUtensorMap tma_map_2d(const void* base, CUtensorMapDataType dtype, uint64_t rows, uint64_t cols, uint64_t row_bytes,
                       uint32_t box_rows, uint32_t box_cols, CUtensorMapSwizzle swizzle) {
  MERE_CHECK((reinterpret_cast<uintptr_t>(base) & 15u) == 0 && row_bytes % 16 == 0 && rows > 0 && cols > 0,
             "cuda tma", "tensor map: base must be 16-byte aligned and rows a multiple of 16 bytes apart (row_bytes ",
             row_bytes, ", ", rows, " x ", cols, ")");
  CUtensorMap map;
  const cuuint64_t dims[2] = {cols, rows};
  const cuuint64_t strides[1] = {row_bytes};
  const cuuint32_t box[2] = {box_cols, box_rows};
  const cuuint32_t elem[2] = {1, 1};
  const CUresult r = encoder()(&map, dtype, 2, const_cast<void*>(base), dims, strides, box, elem,
                               CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                               CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  MERE_CHECK(r == CUDA_SUCCESS, "cuda tma", "cuTensorMapEncodeTiled refused [", rows, " x ", cols, "] rows ", row_bytes,
             " bytes apart, box [", box_rows, " x ", box_cols, "], swizzle ", static_cast<int>(swizzle), " (CUresult ",
             static_cast<int>(r), ")");
  return map;
}

}  // namespace mere::cuda
