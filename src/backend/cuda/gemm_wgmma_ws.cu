// The warp-specialised wgmma prefill GEMM (v6d, MERE_CUDA_WGEMM=ws; gemm_wgmma.h). Why and the
// numbers: docs/cuda-kernels.md "Prefill v6d".
//
// v6c (gemm_wgmma.cu, tile_groups_ss) keeps the tensor pipe 44.5% busy: every thread of the block
// issues the next group's copies, waits at a block barrier a group and computes their addresses, so
// the dequantisation chain in front of each group's wgmmas is long. Here the copies are a producer
// warp's job: per 64-column group, two TMA loads — the X tile (256 tokens x 64 columns of bf16 in
// the 128-byte swizzle a K-major descriptor reads; rows past T arrive as zeros) and the codes (128
// weight rows x 32 bytes) — complete on the stage's "full" mbarrier; the consumers hand the stage
// back on its "empty" mbarrier once the wgmmas that read it are done. No block barrier in the loop.
//
// Block: 288 threads = consumer warpgroups 0 and 1 (64 weight rows each, 256 tokens: wgmma
// m64n256k16 with both operands in shared memory, d = 128 fp32 a thread) + producer warp 8 (lane 0
// issues). Per group a consumer thread dequantises one 16-byte chunk of codes (row i / 2, words
// 4 (i % 2) .. + 3 of its warpgroup's 64 rows) into one of its warpgroup's two A buffers (the X
// tiles' swizzle), fences, meets its warpgroup at a named barrier, issues the 4 wgmmas, and waits
// until only these are in flight: the previous group's A buffer and stage are then free.
// Stream-K over (row tile, token tile, group) iterations as v6b/v6c (wgemm_split.h); the operands,
// hence the products, are v6c's (dq::q4_word, the same bf16 weights), the summation order too.
#include "backend/cuda/gemm_wgmma_ws.h"

#include <cuda_bf16.h>

#include <algorithm>

#include "backend/cuda/async_copy.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/gemm_dequant.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/tma.cuh"
#include "backend/cuda/tma_map.h"
#include "backend/cuda/wgemm_fixup.cuh"
#include "backend/cuda/wgemm_split.h"
#include "backend/cuda/wgmma_ops.cuh"

namespace mere::cuda {
namespace {
using namespace wg;

constexpr int kNT = 256;          // tokens of a tile (the wgmma N)
constexpr int kRows = 128;        // weight rows of a tile (two consumer warpgroups of 64)
constexpr int kConsumers = 256;   // threads of the two consumer warpgroups
constexpr int kThreads = kConsumers + 32;
constexpr int kStages = 5;
constexpr int kXBytes = kNT * 128;                 // one group's X tile, 128-byte swizzled
constexpr int kCBytes = kRows * 32;                // one group's codes, [row][8 words]
constexpr int kStageBytes = kXBytes + kCBytes;     // 36 KB, a multiple of 1024
constexpr int kABytes = 2 * 2 * 64 * 128;          // [warpgroup][buffer] 64 rows x 64 bf16
constexpr int kBarOffset = kStages * kStageBytes + kABytes;
constexpr size_t kSmem = size_t{kBarOffset} + 2 * kStages * 8 + 1024;  // + aligning the first stage
static_assert(kStageBytes % 1024 == 0 && kABytes % 1024 == 0, "stages and A buffers on 1024-byte atoms");

struct WsArgs {
  const uint16_t* scales;  // [N, K/64] bf16
  const uint16_t* biases;
  int N, K, T;
  float* y;  // [T, ldy]
  int64_t ldy;
};

// 32-bit shared addresses of the ring: stage s (X tile, then codes), A buffer (w, b), mbarriers
struct Ring {
  uint32_t base;
  __device__ __forceinline__ uint32_t stage(int s) const { return base + static_cast<uint32_t>(s * kStageBytes); }
  __device__ __forceinline__ uint32_t abuf(int w, int b) const {
    return base + static_cast<uint32_t>(kStages * kStageBytes + (w * 2 + b) * 8192);
  }
  __device__ __forceinline__ uint32_t full(int s) const { return base + static_cast<uint32_t>(kBarOffset + 8 * s); }
  __device__ __forceinline__ uint32_t empty(int s) const {
    return base + static_cast<uint32_t>(kBarOffset + 8 * (kStages + s));
  }
};

// The producer: every group of every piece of this block's range, in the consumers' order.
__device__ void produce(const Ring& ring, const CUtensorMap* tmx, const CUtensorMap* tmc, int ng, int ntok,
                        int64_t begin, int64_t end) {
  int st = 0;
  uint32_t phase = 1;  // a fresh "empty" barrier: waiting for parity 1 returns at once
  for (int64_t it = begin; it < end;) {
    const wsplit::Piece pc = wsplit::piece(it, end, ng);
    const int tok0 = static_cast<int>(pc.tile % ntok) * kNT, row0 = static_cast<int>(pc.tile / ntok) * kRows;
    for (int kb = pc.k0; kb < pc.k1; ++kb) {
      tma::mbar_wait(ring.empty(st), phase);
      tma::mbar_arrive_expect_tx(ring.full(st), kStageBytes);
      tma::load_2d(ring.stage(st), tmx, kb * 64, tok0, ring.full(st));
      tma::load_2d(ring.stage(st) + kXBytes, tmc, kb * 8, row0, ring.full(st));
      if (++st == kStages) st = 0, phase ^= 1;
    }
    it += pc.k1 - pc.k0;
  }
}

// Consumer state carried across pieces: the ring position and the A buffer parity.
struct ConsumerPos {
  int st = 0;
  uint32_t phase = 0;  // the "full" barrier's phase to wait for
  int g = 0;           // groups done by this block (A buffer g & 1)
};

// Groups [k0, k1) of the tile at row0 into d (zeroed here); every wgmma done and every stage handed
// back when it returns.
__device__ __forceinline__ void consume(const Ring& ring, const WsArgs& p, int row0, int k0, int k1, ConsumerPos& pos,
                                        float (&d)[128]) {
  const int tid = static_cast<int>(threadIdx.x), wgi = tid >> 7, r = (tid & 127) >> 1, h = tid & 1;
  const int lane = tid & 31;
  const int ng = p.K >> 6;
  const int64_t si = static_cast<int64_t>(min(row0 + wgi * 64 + r, p.N - 1)) * ng;  // this row's scales, group 0
  const uint32_t a_row = static_cast<uint32_t>(r * 128), a_sw = static_cast<uint32_t>(r & 7);
  const uint32_t c_off = static_cast<uint32_t>(kXBytes + (wgi * 64 + r) * 32 + h * 16);
#pragma unroll
  for (int i = 0; i < 128; ++i) d[i] = 0.0f;
  uint32_t s_r = p.scales[si + k0], b_r = p.biases[si + k0];
  uint32_t s_n = p.scales[si + min(k0 + 1, k1 - 1)], b_n = p.biases[si + min(k0 + 1, k1 - 1)];
  int prev = -1;  // the stage of the previous group (handed back once its wgmmas are done)
#pragma unroll 1
  for (int kb = k0; kb < k1; ++kb) {
    const int k2 = min(kb + 2, k1 - 1);
    const uint32_t s2 = p.scales[si + k2], b2 = p.biases[si + k2];
    tma::mbar_wait(ring.full(pos.st), pos.phase);
    uint32_t w[4];
    asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(w[0]), "=r"(w[1]), "=r"(w[2]), "=r"(w[3])
                 : "r"(ring.stage(pos.st) + c_off));
    const uint32_t abuf = ring.abuf(wgi, pos.g & 1);  // read by the wgmmas of group g - 2: done
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      uint32_t o[4];
      dq::q4_word(w[j], s_r, b_r, o);
      const uint32_t ch = static_cast<uint32_t>(4 * h + j);
      st_shared_v4(abuf + a_row + ((ch ^ a_sw) << 4), o[0], o[1], o[2], o[3]);
    }
    fence_async_smem();                                                // the stores, to wgmma's proxy
    asm volatile("bar.sync %0, 128;\n" ::"r"(1 + wgi) : "memory");  // the warpgroup's 64 rows are in
    const uint64_t da = sw128_desc(abuf), db = sw128_desc(ring.stage(pos.st));
    wg_fence();
#pragma unroll
    for (int s = 0; s < 4; ++s) wgmma_ss_k16(d, da + 2 * s, db + 2 * s);  // + 32 bytes a k-step
    wg_commit();
    wg_wait<1>();  // the previous group's wgmmas are done: hand its stage back (one arrival a warp)
    if (prev >= 0 && lane == 0) tma::mbar_arrive(ring.empty(prev));
    prev = pos.st;
    if (++pos.st == kStages) pos.st = 0, pos.phase ^= 1;
    ++pos.g;
    s_r = s_n, b_r = b_n, s_n = s2, b_n = b2;
  }
  wg_wait0();
  pin(d);
  if (prev >= 0 && lane == 0) tma::mbar_arrive(ring.empty(prev));
}

__device__ __forceinline__ void store_tile(const WsArgs& p, int tok0, int row0, const float (&d)[128]) {
  for_fragment<kNT>([&](int i, int x, int r) {
    const int tok = tok0 + x, row = row0 + r;
    if (tok < p.T && row < p.N) p.y[static_cast<int64_t>(tok) * p.ldy + row] = d[i];
  });
}

// Consumer-only barrier (the producer warp never joins): named barrier 3 over the 256 consumer threads.
__device__ __forceinline__ void consumers_sync() { asm volatile("bar.sync 3, 256;\n" ::: "memory"); }

// 224 registers: 288 threads fit one SM (ptxas would otherwise budget for 384 threads, 168 a thread)
__global__ void __maxnreg__(224)
    wgemm_ws_kernel(const __grid_constant__ CUtensorMap tmx, const __grid_constant__ CUtensorMap tmc, const WsArgs p,
                    int ntok, float* __restrict__ ws, unsigned* __restrict__ flags) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const Ring ring{(smem_u32(smem_raw) + 1023u) & ~1023u};
  const int tid = static_cast<int>(threadIdx.x);
  const int ng = p.K >> 6, P = static_cast<int>(gridDim.x), c = static_cast<int>(blockIdx.x);
  const int64_t I = static_cast<int64_t>((p.N + kRows - 1) / kRows) * ntok * ng;
  const int64_t begin = wsplit::first(I, P, c), end = wsplit::first(I, P, c + 1);
  if (tid == kConsumers) {
    for (int s = 0; s < kStages; ++s) {
      tma::mbar_init(ring.full(s), 1);       // the producer's arrival (+ the bytes of its two loads)
      tma::mbar_init(ring.empty(s), 8);      // one arrival per consumer warp
    }
    tma::mbar_init_fence();
    tma::prefetch_map(&tmx);
    tma::prefetch_map(&tmc);
  }
  __syncthreads();
  pdl_begin();
  if (tid >= kConsumers) {  // the producer warp: lane 0 issues every copy
    if (tid == kConsumers) produce(ring, &tmx, &tmc, ng, ntok, begin, end);
    return;
  }
  ConsumerPos pos;
  for (int64_t it = begin; it < end;) {
    const wsplit::Piece pc = wsplit::piece(it, end, ng);
    const int tok0 = static_cast<int>(pc.tile % ntok) * kNT, row0 = static_cast<int>(pc.tile / ntok) * kRows;
    float d[128];
    consume(ring, p, row0, pc.k0, pc.k1, pos, d);
    if (pc.k0 > 0) {  // a helper piece (only ever the first of a block's range): publish it
      wsplit::publish(ws, flags, c, kConsumers, tid, d, consumers_sync);
    } else {  // the owner: add the helpers' parts in group order, then store
      const int hend = pc.k1 < ng ? wsplit::helpers_end(I, P, c, pc.tile, ng) : c + 1;
      wsplit::gather(ws, flags, c + 1, hend, kConsumers, tid, d, consumers_sync);
      store_tile(p, tok0, row0, d);
    }
    it += pc.k1 - pc.k0;
  }
}

}  // namespace

int wgemm_ws_resident_blocks(const CudaDevice& dev) {
  static const int per_sm = [] {
    MERE_CUDA_CHECK(cudaFuncSetAttribute(wgemm_ws_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(kSmem)));
    int n = 0;
    MERE_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, wgemm_ws_kernel, kThreads, kSmem));
    return n;
  }();
  MERE_CHECK(per_sm >= 1, "cuda wgemm", "the warp-specialised kernel does not fit an SM (", kSmem,
             " bytes of shared memory)");
  return per_sm * dev.sm_count();
}

void wgemm_ws(CudaDevice& dev, const QWeightView& W, const uint16_t* xq, int64_t T, float* y, int64_t ldy, int blocks,
              float* partials, unsigned* flags) {
  const int64_t N = W.rows, K = W.cols;
  // the codes as [N, K/8] u32 and X as [T, K] bf16; boxes of one group: 128 rows x 8 words, 256 rows x 64
  const CUtensorMap tmc = tma_map_2d(W.codes, CU_TENSOR_MAP_DATA_TYPE_UINT32, static_cast<uint64_t>(N),
                                     static_cast<uint64_t>(K / 8), static_cast<uint64_t>(K / 2), kRows, 8,
                                     CU_TENSOR_MAP_SWIZZLE_NONE);
  const CUtensorMap tmx = tma_map_2d(xq, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, static_cast<uint64_t>(T),
                                     static_cast<uint64_t>(K), static_cast<uint64_t>(K * 2), kNT, 64,
                                     CU_TENSOR_MAP_SWIZZLE_128B);
  const WsArgs args{W.scales, W.biases, static_cast<int>(N), static_cast<int>(K), static_cast<int>(T), y, ldy};
  const int ntok = static_cast<int>((T + kNT - 1) / kNT), nrow = static_cast<int>((N + kRows - 1) / kRows);
  constexpr int64_t kMinGroups = 32;  // as wgemm's stream-K grids
  const int64_t tiles = int64_t{ntok} * nrow, iters = tiles * (K / 64);
  const int64_t want = std::max(tiles, (iters + kMinGroups - 1) / kMinGroups);
  const int P = static_cast<int>(
      std::min<int64_t>(std::min<int64_t>(std::min(blocks, wgemm_ws_resident_blocks(dev)), iters), want));
  launch("wgemm_ws_kernel", wgemm_ws_kernel, dim3(static_cast<unsigned>(P)), dim3(kThreads), kSmem, dev.stream(), tmx,
         tmc, args, ntok, partials, flags);
}

}  // namespace mere::cuda
