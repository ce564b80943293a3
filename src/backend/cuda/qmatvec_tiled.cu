// 4-bit weights in the tiled layout of the group-integer kernel (qmatvec.h "tiled 4-bit weights",
// docs/cuda-kernels.md §1 "v8b"): a load-time permutation of the MLX bytes, nothing rounded.
//
// Why: the kernel's mma lane (g, t) needs quarter t (8 bytes) of one group of rows g and g + 8. In
// the MLX layout a warp's load then touches 8 rows = 8 cache lines for 256 bytes, and the scales of
// 16 rows 16 more lines: ~48 L1 wavefronts per 16 x 64 weights, 4x the integer kernel's; v8a ran at
// 21% of the copy bandwidth, T-independent (LSU-bound). Tiled, a warp's codes of one group are 512
// contiguous bytes (4 wavefronts) and its scales 64 (1).
#include <cuda_runtime.h>

#include <algorithm>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/qmatvec.h"

namespace mere::cuda {
namespace {

// One thread per (tile, group, lane): codes block lane (g, t) = {row g words 2t, 2t+1; row g+8 words
// 2t, 2t+1} of the group; lanes g*4 also write the {scale | bias << 16} pair of rows g and g+8.
// Source rows [0, rows) of this chunk start at tile 0; rows past `rows` are zero.
__global__ void tile_kernel(const uint32_t* __restrict__ codes, const uint16_t* __restrict__ scales,
                            const uint16_t* __restrict__ biases, int64_t rows, int cols, int64_t tiles,
                            uint4* __restrict__ dst_codes, uint2* __restrict__ dst_sb) {
  pdl_begin();
  const int ng = cols / 64, wpr = cols / 8;  // groups, u32 words a row
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= tiles * ng * 32) return;
  const int lane = static_cast<int>(idx & 31);
  const int64_t blk = idx >> 5, tile = blk / ng;
  const int G = static_cast<int>(blk - tile * ng);
  const int g = lane >> 2, t = lane & 3;
  const int64_t ra = tile * 16 + g, rb = ra + 8;
  uint4 o = make_uint4(0u, 0u, 0u, 0u);
  uint2 sb = make_uint2(0u, 0u);
  if (ra < rows) {
    const uint32_t* w = codes + ra * wpr + 8 * G + 2 * t;
    o.x = w[0], o.y = w[1];
    sb.x = static_cast<uint32_t>(scales[ra * ng + G]) | (static_cast<uint32_t>(biases[ra * ng + G]) << 16);
  }
  if (rb < rows) {
    const uint32_t* w = codes + rb * wpr + 8 * G + 2 * t;
    o.z = w[0], o.w = w[1];
    sb.y = static_cast<uint32_t>(scales[rb * ng + G]) | (static_cast<uint32_t>(biases[rb * ng + G]) << 16);
  }
  dst_codes[idx] = o;
  if (t == 0) dst_sb[blk * 8 + g] = sb;
}

void check_tiled_shape(int64_t rows, int64_t cols) {
  MERE_CHECK(rows > 0 && cols > 0 && cols % 64 == 0 && rows < (int64_t{1} << 31), "qmatvec tiled weights",
             "shape out of range: expected rows in 1..2^31 and cols a positive multiple of 64, got [", rows, ", ", cols,
             "]");
}

void launch_tile(CudaDevice& dev, const uint32_t* codes, const uint16_t* scales, const uint16_t* biases, int64_t rows,
                 int64_t cols, int64_t tile0, void* dst_codes, void* dst_sb) {
  const int64_t tiles = (rows + 15) / 16, ng = cols / 64;
  const int64_t threads = tiles * ng * 32;
  launch("qmatvec tile_kernel", tile_kernel, dim3(static_cast<unsigned>((threads + 255) / 256)), dim3(256), 0,
         dev.stream(), codes, scales, biases, rows, static_cast<int>(cols), tiles,
         static_cast<uint4*>(dst_codes) + tile0 * ng * 32, static_cast<uint2*>(dst_sb) + tile0 * ng * 8);
}

}  // namespace

QTiledBytes qmatvec_tiled_bytes(int64_t rows, int64_t cols) {
  check_tiled_shape(rows, cols);
  const size_t tiles = static_cast<size_t>((rows + 15) / 16), ng = static_cast<size_t>(cols / 64);
  return QTiledBytes{tiles * ng * 512, tiles * ng * 64};
}

size_t qmatvec_tile_staging_min(int64_t cols) { return static_cast<size_t>(16 * (cols / 2 + (cols / 64) * 4)); }

void qmatvec_tile_upload(CudaDevice& dev, const void* codes, const uint16_t* scales, const uint16_t* biases,
                         int64_t rows, int64_t cols, void* dst_codes, void* dst_sb, void* staging,
                         size_t staging_bytes) {
  check_tiled_shape(rows, cols);
  const size_t row_bytes = static_cast<size_t>(cols / 2 + (cols / 64) * 4);  // codes + scales + biases
  MERE_CHECK(staging != nullptr && staging_bytes >= qmatvec_tile_staging_min(cols), "qmatvec tiled weights",
             "staging buffer too small: need ", qmatvec_tile_staging_min(cols), " bytes, got ", staging_bytes);
  DeviceGuard guard(dev.ordinal());
  const int64_t chunk = static_cast<int64_t>(staging_bytes / row_bytes) / 16 * 16;  // rows a chunk, whole tiles
  const int64_t ng = cols / 64;
  auto* st = static_cast<uint8_t*>(staging);
  for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
    const int64_t n = std::min(chunk, rows - r0);
    uint8_t* sc = st + n * (cols / 2);
    uint8_t* bi = sc + n * ng * 2;
    dev.upload(st, static_cast<const uint8_t*>(codes) + r0 * (cols / 2), static_cast<size_t>(n * (cols / 2)));
    dev.upload(sc, scales + r0 * ng, static_cast<size_t>(n * ng * 2));
    dev.upload(bi, biases + r0 * ng, static_cast<size_t>(n * ng * 2));
    launch_tile(dev, reinterpret_cast<const uint32_t*>(st), reinterpret_cast<const uint16_t*>(sc),
                reinterpret_cast<const uint16_t*>(bi), n, cols, r0 / 16, dst_codes, dst_sb);
    dev.synchronize("qmatvec tile upload");  // the next chunk overwrites the staging buffer
  }
}

QWeightView qmatvec_tile_device(CudaDevice& dev, const QWeightView& src, void* dst_codes, void* dst_sb) {
  MERE_CHECK(src.bits == 4 && !src.tiled, "qmatvec tiled weights", "expected a 4-bit MLX-layout matrix");
  check_tiled_shape(src.rows, src.cols);
  DeviceGuard guard(dev.ordinal());
  launch_tile(dev, src.codes, src.scales, src.biases, src.rows, src.cols, 0, dst_codes, dst_sb);
  QWeightView v = src;
  v.codes = static_cast<const uint32_t*>(dst_codes);
  v.scales = static_cast<const uint16_t*>(dst_sb);
  v.biases = nullptr;
  v.tiled = true;
  return v;
}

}  // namespace mere::cuda
