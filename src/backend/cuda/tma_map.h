// Host side of TMA (tma.cuh): encoding a 2-D tensor map (the descriptor a cp.async.bulk.tensor load
// reads) through the driver's cuTensorMapEncodeTiled, reached via the runtime's driver entry point,
// so nothing links libcuda directly.
#pragma once
#include <cuda.h>

#include <cstdint>

namespace mere::cuda {

// A row-major [rows, cols] tensor of `dtype` elements at `base` (16-byte aligned), rows `row_bytes`
// apart (a multiple of 16), read in boxes of [box_rows, box_cols] (box_cols * element size a
// multiple of 16; with SWIZZLE_128B exactly 128 bytes). Out-of-range elements read as zeros.
// Throws mere::Error naming the argument the driver refused.
CUtensorMap tma_map_2d(const void* base, CUtensorMapDataType dtype, uint64_t rows, uint64_t cols, uint64_t row_bytes,
                       uint32_t box_rows, uint32_t box_cols, CUtensorMapSwizzle swizzle);

}  // namespace mere::cuda
