// The (expert, row tile) enumeration of the grouped MoE matmuls (gemm.cu qgemm_grouped, gemm_moe.cu):
// tile index i counts the BM-row tiles of expert 0, then expert 1, ...; a warp finds tile i's expert
// and rows from the device offsets with a warp scan, so the grid can be sized on the host from P and
// E alone (sum over experts of ceil(c_e / BM) <= P / BM + min(E, P)) without reading offsets back.
#pragma once
#include <cstdint>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/qmatvec.h"  // QWeightView

namespace mere::cuda {

// How many tiles of bm gathered rows find_expert_tile can return for P rows over E experts: every
// expert with rows adds at most one partial tile, so sum ceil(c_e / bm) <= ceil(P / bm) + min(E, P).
// The grouped kernels size their grids with it on the host (no read-back of the offsets); tiles
// past the last are empty blocks.
inline int64_t expert_tiles_max(int64_t P, int64_t E, int64_t bm) { return (P + bm - 1) / bm + (E < P ? E : P); }

// The shape contract of a grouped expert launch (moe_stream, wgemm_moe): W holds E experts of Ne
// rows stacked, P gathered rows of K = W.cols, output row stride ldy >= Ne. mere::Error naming `where`.
inline void check_expert_launch(const QWeightView& W, int64_t E, int64_t Ne, int64_t P, int64_t ldy, const char* where) {
  MERE_CHECK(E >= 1 && Ne >= 1 && E * Ne == W.rows && W.rows < (int64_t{1} << 31), where,
             "experts: expected E * Ne = rows (", W.rows, "), got E = ", E, ", Ne = ", Ne);
  MERE_CHECK(ldy >= Ne && P >= 0 && P * W.cols < (int64_t{1} << 31), where, "ldy / P out of range: ldy = ", ldy,
             ", P = ", P);
}

struct ExpertTile {
  int expert;  // -1: tile i is past the last expert's last tile (the block has nothing to do)
  int m0;      // first gathered row of the tile
  int m_end;   // one past the expert's last row (the tile covers [m0, min(m0 + BM, m_end)))
};

// All 32 lanes of the warp must call it (same tile); every lane gets the result. The offsets of 8
// chunks of 32 experts are loaded before any of them is scanned (independent loads, one round trip
// for E <= 256 instead of one a chunk).
__device__ __forceinline__ ExpertTile find_expert_tile(const int32_t* __restrict__ offsets, int E, int tile, int bm,
                                                       int lane) {
  constexpr int kChunks = 8;
  int base = 0;
  for (int e0 = 0; e0 < E; e0 += 32 * kChunks) {
    int beg[kChunks], end[kChunks];
#pragma unroll
    for (int i = 0; i < kChunks; ++i) {
      const int e = e0 + 32 * i + lane;
      beg[i] = e < E ? __ldg(offsets + e) : 0;
      end[i] = e < E ? __ldg(offsets + e + 1) : 0;
    }
#pragma unroll
    for (int i = 0; i < kChunks; ++i) {
      const int nt = (end[i] - beg[i] + bm - 1) / bm;
      int incl = nt;
#pragma unroll
      for (int off = 1; off < 32; off <<= 1) {
        const int t = __shfl_up_sync(0xffffffffu, incl, off);
        if (lane >= off) incl += t;
      }
      const int excl = incl - nt;
      const unsigned hit = __ballot_sync(0xffffffffu, tile >= base + excl && tile < base + incl);
      if (hit != 0) {
        const int src = __ffs(hit) - 1;
        return ExpertTile{e0 + 32 * i + src, __shfl_sync(0xffffffffu, beg[i] + (tile - base - excl) * bm, src),
                          __shfl_sync(0xffffffffu, end[i], src)};
      }
      base += __shfl_sync(0xffffffffu, incl, 31);
    }
  }
  return ExpertTile{-1, 0, 0};
}

}  // namespace mere::cuda
