// The stream-K split of the wgmma prefill GEMM (gemm_wgmma.cu, MERE_CUDA_WGEMM=streamk), host- and
// device-callable so the unit tests check the partition the kernel runs (tests/unit/wgemm_split_test.cpp).
//
// A matrix product is `tiles` output tiles of `ng` 64-column groups each: I = tiles * ng iterations
// in (tile, group) order. Block b of P takes iterations [first(b), first(b + 1)). Walking its range
// it meets pieces of tiles: a piece that starts at group 0 is its tile's "owner" (it stores the
// tile); a piece that starts later is a "helper" (it publishes its partial sums). Since ranges are
// contiguous, a helper piece can only be the first piece of its block, the owner piece of a split
// tile is the last piece of its block, and the helpers of a tile are the blocks owner + 1 .. end - 1,
// in the tile's group order — so adding them in block order adds them in k order.
#pragma once
#include <cstdint>

#if defined(__CUDACC__)
#define MERE_WSPLIT_FN __host__ __device__ __forceinline__
#else
#define MERE_WSPLIT_FN inline
#endif

namespace mere::cuda::wsplit {

// First iteration of block b (b = P: the end). Needs I * P < 2^63.
MERE_WSPLIT_FN int64_t first(int64_t I, int P, int b) { return I * b / P; }

struct Piece {
  int64_t tile;
  int k0, k1;  // groups [k0, k1) of the tile
};

// The piece that starts at iteration it of a range ending at `end`.
MERE_WSPLIT_FN Piece piece(int64_t it, int64_t end, int ng) {
  const int64_t tile = it / ng;
  const int k0 = static_cast<int>(it - tile * ng);
  const int64_t rest = end - it;
  return Piece{tile, k0, rest < ng - k0 ? k0 + static_cast<int>(rest) : ng};
}

// One past the last helper block of the tile that block `owner` owns (owner + 1 when none).
MERE_WSPLIT_FN int helpers_end(int64_t I, int P, int owner, int64_t tile, int ng) {
  const int64_t tile_end = (tile + 1) * ng;
  int b = owner + 1;
  while (b < P && first(I, P, b) < tile_end) ++b;
  return b;
}

// The grid of a launch: at most `resident` blocks (all must be resident: owners wait for later
// blocks) and never more than the iterations; and at least kMinGroups groups a block unless that
// leaves fewer blocks than tiles — a helper's partial sums cost a tile's worth of stores and loads,
// worth it only for a real share of its K (s17 H100: k/v [1024, 5120] 98.9 -> 64.5 µs).
constexpr int64_t kMinGroups = 32;
MERE_WSPLIT_FN int grid(int64_t tiles, int ng, int resident) {
  const int64_t I = tiles * ng, want = tiles > (I + kMinGroups - 1) / kMinGroups ? tiles : (I + kMinGroups - 1) / kMinGroups;
  int64_t P = resident < I ? resident : I;
  if (want < P) P = want;
  return static_cast<int>(P);
}

}  // namespace mere::cuda::wsplit
