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
// Block: 384 threads = consumer warpgroups 0 and 1 (64 weight rows each, 256 tokens: wgmma
// m64n256k16 with both operands in shared memory, d = 128 fp32 a thread) + the producer warpgroup 2
// (its thread 0 issues). Per group a consumer thread dequantises one 16-byte chunk of codes (row
// i / 2, words 4 (i % 2) .. + 3 of its warpgroup's 64 rows) into one of its warpgroup's two A
// buffers (the X tiles' swizzle), fences, meets its warpgroup at a named barrier, issues the 4
// wgmmas, and waits until only these are in flight: the previous group's A buffer and stage are
// then free.
// Stream-K over (row tile, token tile, group) iterations as v6b/v6c (wgemm_split.h); the operands,
// hence the products, are v6c's (dq::q4_word, the same bf16 weights), the summation order too.
// Also here: the tall tiles (wst) and v6f (wsd, DQ: the producer warpgroup dequantises into the
// stage, the consumers only issue wgmmas; bitwise v6d). Measurements: docs/cuda-kernels.md "v6d".."v6f".
#include "backend/cuda/gemm_wgmma_ws.h"

#include <cuda_bf16.h>

#include <algorithm>

#include "backend/cuda/async_copy.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/gemm_dequant.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/smem_opt_in.h"
#include "backend/cuda/tma.cuh"
#include "backend/cuda/tma_map.h"
#include "backend/cuda/wgemm_fixup.cuh"
#include "backend/cuda/wgemm_split.h"
#include "backend/cuda/wgmma_ops.cuh"

namespace mere::cuda {
namespace {
using namespace wg;

constexpr int kConsumers = 256;  // threads of the two consumer warpgroups
constexpr int kThreads = kConsumers + 128;  // + the producer warpgroup (setmaxnreg works on whole warpgroups)
// Registers a thread: launched at 168 (65,536 / 384, rounded down to 8); the producer warpgroup
// gives back to 40, the consumers take 232 — 128 x (2 x 232 + 40) = 64,512 of the SM's 65,536.
constexpr int kProducerRegs = 40, kConsumerRegs = 232;
// v6f (DQ): the producer warpgroup dequantises, the consumers only issue wgmmas — 88 / 208 (ptxas:
// no spills; 56 / 224 and 72 / 216 spilled)
constexpr int kDqProducerRegs = 88, kDqConsumerRegs = 208;
constexpr int kScaleAhead = 3, kScaleSlots = 4;  // v6f: scale words copied 3 groups ahead, 4 slots a thread

// Tile shapes: MT weight sub-tiles of 64 rows a consumer warpgroup, 256 / MT tokens — MT = 1: 128
// rows x 256 tokens (wgmma m64n256, v6d); MT = 2: 256 rows x 128 tokens (two m64n128 a group, "tall":
// half the X bytes a block reads per weight row, 4x fewer per weight than MT = 1). DQ (v6f, MT = 1):
// the dequantised A tile (both warpgroups' 64 rows) is part of the stage, written by the producer
// warpgroup; 4 stages instead of 5 and no consumer A buffers.
template <int MT, bool DQ = false>
struct WsGeo {
  static_assert(!DQ || MT == 1, "v6f has 128-row tiles");
  static constexpr int kStages = DQ ? 4 : 5;
  static constexpr int kNT = 256 / MT;               // tokens of a tile (the wgmma N)
  static constexpr int kRows = 128 * MT;             // weight rows of a tile
  static constexpr int kXBytes = kNT * 128;          // one group's X tile, 128-byte swizzled
  static constexpr int kCBytes = kRows * 32;         // one group's codes, [row][8 words]
  static constexpr int kABuf = MT * 8192;            // one warpgroup's A tile: MT x 64 rows x 64 bf16
  static constexpr int kStageBytes = kXBytes + kCBytes + (DQ ? 2 * kABuf : 0);
  // v6d: two A buffers a consumer warpgroup; v6f: the producer threads' scale-word slots
  static constexpr int kExtra = DQ ? kScaleSlots * 128 * 8 : 2 * 2 * kABuf;
  static constexpr int kBarOffset = kStages * kStageBytes + kExtra;
  static constexpr int kBarriers = DQ ? 3 : 2;       // full, empty (+ ready: the A tile is written)
  static constexpr size_t kSmem = size_t{kBarOffset} + kBarriers * kStages * 8 + 1024;  // + aligning stage 0
  static_assert(kStageBytes % 1024 == 0 && kABuf % 1024 == 0, "stages and A buffers on 1024-byte atoms");
};

// One matrix of a launch (a group of up to kWgemmMaxGroup matrices of the same K shares X and one
// stream-K iteration space; matrix i holds row tiles [tile_end[i-1], tile_end[i]) of it).
struct WsMat {
  const uint16_t* scales;  // [N, K/64] bf16
  const uint16_t* biases;
  float* y;  // [T, ldy]
  int64_t ldy;
  int N, tile_end;
};
struct WsArgs {
  WsMat m[kWgemmMaxGroup];
  int n, K, T;
  int whole;  // > 0: block c multiplies whole tiles [c whole, (c + 1) whole), no stream-K split
};
// The tensor maps of a launch: X ([T, K] bf16) and each matrix's codes ([N, K/8] u32).
struct WsMaps {
  CUtensorMap x;
  CUtensorMap c[kWgemmMaxGroup];
};

// The matrix of row tile rt of the launch and the tile's first row in it (rows: rows a tile). The
// matrices are few: unrolled scans with constant indices, so the parameters are read from the constant
// bank and selected (indexing them with a run-time value, or taking their address, would copy them to
// local memory; the tensor maps are __grid_constant__, so their addresses are fine).
struct WsLoc {
  int m, row0;
};
__device__ __forceinline__ WsLoc locate(const WsArgs& p, int rt, int rows) {
  WsLoc l{0, rt * rows};
#pragma unroll
  for (int i = 1; i < kWgemmMaxGroup; ++i)
    if (i < p.n && rt >= p.m[i - 1].tile_end) l = WsLoc{i, (rt - p.m[i - 1].tile_end) * rows};
  return l;
}
// f(p.m[m]) for a run-time m < p.n
template <class F>
__device__ __forceinline__ auto pick(const WsArgs& p, int m, F&& f) {
  auto v = f(p.m[0]);
#pragma unroll
  for (int i = 1; i < kWgemmMaxGroup; ++i)
    if (i == m) v = f(p.m[i]);
  return v;
}
__device__ __forceinline__ const CUtensorMap* codes_map(const WsMaps& maps, int m) {
  const CUtensorMap* c = &maps.c[0];
#pragma unroll
  for (int i = 1; i < kWgemmMaxGroup; ++i)
    if (i == m) c = &maps.c[i];
  return c;
}

// 32-bit shared addresses of the ring: stage s (X tile, codes, v6f: the A tile of warpgroup w), v6d's
// A buffer (w, b), v6f's scale slot (slot, thread), mbarriers
template <int MT, bool DQ = false>
struct Ring {
  using G = WsGeo<MT, DQ>;
  uint32_t base;
  __device__ __forceinline__ uint32_t stage(int s) const { return base + static_cast<uint32_t>(s * G::kStageBytes); }
  __device__ __forceinline__ uint32_t atile(int s, int w) const {
    return stage(s) + static_cast<uint32_t>(G::kXBytes + G::kCBytes + w * G::kABuf);
  }
  __device__ __forceinline__ uint32_t abuf(int w, int b) const {
    return base + static_cast<uint32_t>(G::kStages * G::kStageBytes + (w * 2 + b) * G::kABuf);
  }
  __device__ __forceinline__ uint32_t slot(int k, int i) const {
    return base + static_cast<uint32_t>(G::kStages * G::kStageBytes + (k * 128 + i) * 8);
  }
  __device__ __forceinline__ uint32_t full(int s) const { return base + static_cast<uint32_t>(G::kBarOffset + 8 * s); }
  __device__ __forceinline__ uint32_t empty(int s) const {
    return base + static_cast<uint32_t>(G::kBarOffset + 8 * (G::kStages + s));
  }
  __device__ __forceinline__ uint32_t ready(int s) const {
    return base + static_cast<uint32_t>(G::kBarOffset + 8 * (2 * G::kStages + s));
  }
};

// The producer: every group of every piece of this block's range, in the consumers' order.
template <int MT>
__device__ void produce(const Ring<MT>& ring, const WsArgs& p, const WsMaps& maps, int ng, int ntok, int64_t begin,
                        int64_t end) {
  using G = WsGeo<MT>;
  constexpr int kStages = G::kStages;
  int st = 0;
  uint32_t phase = 1;  // a fresh "empty" barrier: waiting for parity 1 returns at once
  for (int64_t it = begin; it < end;) {
    const wsplit::Piece pc = wsplit::piece(it, end, ng);
    const int tok0 = static_cast<int>(pc.tile % ntok) * G::kNT;
    const WsLoc at = locate(p, static_cast<int>(pc.tile / ntok), G::kRows);
    const CUtensorMap* tmc = codes_map(maps, at.m);
    for (int kb = pc.k0; kb < pc.k1; ++kb) {
      tma::mbar_wait(ring.empty(st), phase);
      tma::mbar_arrive_expect_tx(ring.full(st), G::kStageBytes);
      tma::load_2d(ring.stage(st), &maps.x, kb * 64, tok0, ring.full(st));
      tma::load_2d(ring.stage(st) + G::kXBytes, tmc, kb * 8, at.row0, ring.full(st));
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

// Accumulators of sub-tile m (MT * NT / 2 = 128 floats a thread in all).
template <int MT>
__device__ __forceinline__ float (&sub(float (&d)[128], int m))[128 / MT] {
  return *reinterpret_cast<float(*)[128 / MT]>(d + m * (128 / MT));
}

// The scales and biases ([N, K/64] bf16) of the matrix a piece multiplies.
struct WsRows {
  const uint16_t* scales;
  const uint16_t* biases;
  int N;
};
__device__ __forceinline__ WsRows rows_of(const WsArgs& p, int m) {
  return WsRows{pick(p, m, [](const WsMat& x) { return x.scales; }), pick(p, m, [](const WsMat& x) { return x.biases; }),
                pick(p, m, [](const WsMat& x) { return x.N; })};
}

// Groups [k0, k1) of the tile at row0 of matrix q into d (zeroed here); every wgmma done and every
// stage handed back when it returns. Warpgroup w owns rows [w 64 MT, (w + 1) 64 MT) of the tile,
// sub-tile m the 64 from w 64 MT + 64 m; thread i converts row i / 2 of each sub-tile, words 4 (i % 2)
// .. + 3.
template <int MT>
__device__ __forceinline__ void consume(const Ring<MT>& ring, const WsRows& q, int ng, int row0, int k0, int k1,
                                        ConsumerPos& pos, float (&d)[128]) {
  using G = WsGeo<MT>;
  constexpr int kStages = G::kStages;
  const int tid = static_cast<int>(threadIdx.x), wgi = tid >> 7, r = (tid & 127) >> 1, h = tid & 1;
  const int lane = tid & 31;
  int64_t si[MT];  // scale index of group 0 of this thread's row in each sub-tile
  uint32_t c_off[MT];
#pragma unroll
  for (int m = 0; m < MT; ++m) {
    const int rb = wgi * 64 * MT + m * 64 + r;  // row within the tile
    si[m] = static_cast<int64_t>(min(row0 + rb, q.N - 1)) * ng;
    c_off[m] = static_cast<uint32_t>(G::kXBytes + rb * 32 + h * 16);
  }
  const uint32_t a_row = static_cast<uint32_t>(r * 128), a_sw = static_cast<uint32_t>(r & 7);
#pragma unroll
  for (int i = 0; i < 128; ++i) d[i] = 0.0f;
  // scales and biases of the even groups in (s_e, b_e), of the odd ones in (s_o, b_o): a set is
  // refilled with the group two ahead right after the dequantisation that last reads it, so no
  // register copy waits on a load (v6d moved s2 -> s_n -> s_r at the loop's end, and a copy of a
  // register a load has not yet written stalls for the load: qmatvec v9c's lesson)
  uint32_t s_e[MT], b_e[MT], s_o[MT], b_o[MT];
#pragma unroll
  for (int m = 0; m < MT; ++m) {
    s_e[m] = q.scales[si[m] + k0], b_e[m] = q.biases[si[m] + k0];
    s_o[m] = q.scales[si[m] + min(k0 + 1, k1 - 1)], b_o[m] = q.biases[si[m] + min(k0 + 1, k1 - 1)];
  }
  int prev = -1;  // the stage of the previous group (handed back once its wgmmas are done)
  auto step = [&](int kb, uint32_t(&sr)[MT], uint32_t(&br)[MT]) {
    tma::mbar_wait(ring.full(pos.st), pos.phase);
    const uint32_t abuf = ring.abuf(wgi, pos.g & 1);  // read by the wgmmas of group g - 2: done
#pragma unroll
    for (int m = 0; m < MT; ++m) {
      uint32_t w[4];
      asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n"
                   : "=r"(w[0]), "=r"(w[1]), "=r"(w[2]), "=r"(w[3])
                   : "r"(ring.stage(pos.st) + c_off[m]));
      dequant_a_half(w, sr[m], br[m], h, abuf + m * 8192 + a_row, a_sw);
    }
    const int k2 = min(kb + 2, k1 - 1);
#pragma unroll
    for (int m = 0; m < MT; ++m) sr[m] = q.scales[si[m] + k2], br[m] = q.biases[si[m] + k2];
    fence_async_smem();                                                // the stores, to wgmma's proxy
    asm volatile("bar.sync %0, 128;\n" ::"r"(1 + wgi) : "memory");  // the warpgroup's rows are in
    const uint64_t db = sw128_desc(ring.stage(pos.st));
    wg_fence();
#pragma unroll
    for (int m = 0; m < MT; ++m) {
      const uint64_t da = sw128_desc(abuf + m * 8192);
#pragma unroll
      for (int s = 0; s < 4; ++s) wgmma_ss_k16(sub<MT>(d, m), da + 2 * s, db + 2 * s);  // + 32 bytes a k-step
    }
    wg_commit();
    wg_wait<1>();  // the previous group's wgmmas are done: hand its stage back (one arrival a warp)
    if (prev >= 0 && lane == 0) tma::mbar_arrive(ring.empty(prev));
    prev = pos.st;
    if (++pos.st == kStages) pos.st = 0, pos.phase ^= 1;
    ++pos.g;
  };
#pragma unroll 1
  for (int kb = k0; kb < k1; kb += 2) {
    step(kb, s_e, b_e);
    if (kb + 1 < k1) step(kb + 1, s_o, b_o);
  }
  wg_wait0();
  pin(d);
  if (prev >= 0 && lane == 0) tma::mbar_arrive(ring.empty(prev));
}

// v6f's producer warpgroup, thread i (0..127) = row i of the tile: per group of this block's range
// (iterations j = begin .. end - 1 in order, tile j / ng, group j % ng) it waits for the stage's X and
// codes, dequantises its row (both halves, dequant_a_half: v6d's bf16 values and layout) into the
// stage's A tile, fences and arrives on "ready". Thread 0 issues the TMA loads: it waits for a
// stage's "empty" barrier only for the group about to be dequantised; every other group it issues
// when its stage is already free (test, no wait), so the warp never stalls on the consumers while
// it has work (s18d: issuing group j + 3 after group j with a wait, the warp — reconverging after
// thread 0 — waited for the consumers' group j - 1 each group: 307 µs vs v6d's 173 at gate/up).
// Scales and biases: the 4-byte words holding this thread's (rows of an even number of groups, so a
// word never straddles rows), copied kScaleAhead groups ahead by cp.async into private slots: no
// register waits on a load.
__device__ void dequant_produce(const Ring<1, true>& ring, const WsArgs& p, const WsMaps& maps, int ng, int ntok,
                                int begin, int end) {
  using G = WsGeo<1, true>;
  constexpr int S = G::kStages;
  const int i = static_cast<int>(threadIdx.x) - kConsumers;
  auto row_group = [&](int j, int& kb) {  // iteration j's matrix and first row, and its group
    const int tile = j / ng;
    kb = j - tile * ng;
    return locate(p, tile / ntok, G::kRows);
  };
  auto copy_scales = [&](int j) {  // group j's words into slot j % kScaleSlots (an empty commit past the end)
    if (j < end) {
      int kb;
      const WsLoc l = row_group(j, kb);
      const WsRows q = rows_of(p, l.m);
      const int at = (min(l.row0 + i, q.N - 1) * ng + kb) >> 1;
      const uint32_t dst = ring.slot((j - begin) % kScaleSlots, i);
      cp_async4(dst, reinterpret_cast<const uint32_t*>(q.scales) + at);
      cp_async4(dst + 4, reinterpret_cast<const uint32_t*>(q.biases) + at);
    }
    cp_async_commit();
  };
  int tj = begin, tst = 0;  // the TMA thread's next group and its stage / "empty" parity
  uint32_t tph = 1;
  auto issue = [&](int need) {  // every group up to `need` (waiting), then those whose stage is free
    if (tj >= end) return;
    if (tj > need && !tma::mbar_test(ring.empty(tst), tph)) return;
    int kb;
    const WsLoc l = row_group(tj, kb);
    const int tok0 = (tj / ng % ntok) * G::kNT;
    tma::mbar_wait(ring.empty(tst), tph);
    tma::mbar_arrive_expect_tx(ring.full(tst), G::kXBytes + G::kCBytes);
    tma::load_2d(ring.stage(tst), &maps.x, kb * 64, tok0, ring.full(tst));
    tma::load_2d(ring.stage(tst) + G::kXBytes, codes_map(maps, l.m), kb * 8, l.row0, ring.full(tst));
    if (++tst == S) tst = 0, tph ^= 1;
    ++tj;
  };
  if (i == 0)
    for (int k = 0; k < S; ++k) issue(begin);  // the first S stages are free
  for (int k = 0; k < kScaleAhead; ++k) copy_scales(begin + k);
  const uint32_t a_row = static_cast<uint32_t>((i & 63) * 128), a_sw = static_cast<uint32_t>(i & 7);
  int st = 0;
  uint32_t phase = 0;
#pragma unroll 1
  for (int j = begin; j < end; ++j) {
    if (i == 0)
      for (int k = 0; k < S; ++k) issue(j);  // group j's loads (waiting if need be), then any free stage
    copy_scales(j + kScaleAhead);
    cp_async_wait<kScaleAhead>();  // group j's words are in
    const int kb = j % ng;
    const uint32_t slot = ring.slot((j - begin) % kScaleSlots, i);
    uint32_t sv, bv;
    asm volatile("ld.shared.v2.u32 {%0, %1}, [%2];\n" : "=r"(sv), "=r"(bv) : "r"(slot));
    const int shift = (kb & 1) * 16;
    const uint32_t s_raw = (sv >> shift) & 0xffffu, b_raw = (bv >> shift) & 0xffffu;
    tma::mbar_wait(ring.full(st), phase);
    const uint32_t codes = ring.stage(st) + static_cast<uint32_t>(G::kXBytes + i * 32);
    const uint32_t a = ring.atile(st, i >> 6) + a_row;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      uint32_t w[4];
      asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n"
                   : "=r"(w[0]), "=r"(w[1]), "=r"(w[2]), "=r"(w[3])
                   : "r"(codes + 16 * h));
      dequant_a_half(w, s_raw, b_raw, h, a, a_sw);
    }
    fence_async_smem();  // the A tile, to wgmma's proxy
    tma::mbar_arrive(ring.ready(st));
    if (++st == S) st = 0, phase ^= 1;
  }
}

// v6f's consumers: groups [k0, k1) of the tile into d (zeroed here) — wait for the stage's X and A
// tile, issue the 4 wgmmas, keep one group in flight, hand the previous stage back.
__device__ __forceinline__ void consume_dq(const Ring<1, true>& ring, int k0, int k1, ConsumerPos& pos,
                                           float (&d)[128]) {
  using G = WsGeo<1, true>;
  const int tid = static_cast<int>(threadIdx.x), wgi = tid >> 7, lane = tid & 31;
#pragma unroll
  for (int i = 0; i < 128; ++i) d[i] = 0.0f;
  int prev = -1;
#pragma unroll 1
  for (int kb = k0; kb < k1; ++kb) {
    tma::mbar_wait(ring.full(pos.st), pos.phase);   // X (seen complete by the producers already)
    tma::mbar_wait(ring.ready(pos.st), pos.phase);  // the A tile
    const uint64_t db = sw128_desc(ring.stage(pos.st)), da = sw128_desc(ring.atile(pos.st, wgi));
    wg_fence();
#pragma unroll
    for (int s = 0; s < 4; ++s) wgmma_ss_k16(d, da + 2 * s, db + 2 * s);
    wg_commit();
    wg_wait<1>();
    if (prev >= 0 && lane == 0) tma::mbar_arrive(ring.empty(prev));
    prev = pos.st;
    if (++pos.st == G::kStages) pos.st = 0, pos.phase ^= 1;
  }
  wg_wait0();
  pin(d);
  if (prev >= 0 && lane == 0) tma::mbar_arrive(ring.empty(prev));
}

// The D fragment of sub-tile m: d_m[4j + i] = (row (lane >> 2) + 8 (i >> 1) of the warp's 16, token
// 8j + 2t + (i & 1)), as wgmma lays it out.
template <int MT>
__device__ __forceinline__ void store_tile(const WsArgs& p, int mi, int tok0, int row0, float (&d)[128]) {
  using G = WsGeo<MT>;
  const int tid = static_cast<int>(threadIdx.x), lane = tid & 31, warp = tid >> 5, t = lane & 3;
  float* const y = pick(p, mi, [](const WsMat& x) { return x.y; });
  const int64_t ldy = pick(p, mi, [](const WsMat& x) { return x.ldy; });
  const int N = pick(p, mi, [](const WsMat& x) { return x.N; });
#pragma unroll
  for (int m = 0; m < MT; ++m) {
    const int rw = row0 + (warp >> 2) * 64 * MT + m * 64 + (warp & 3) * 16 + (lane >> 2);
    const float(&dm)[128 / MT] = sub<MT>(d, m);
#pragma unroll
    for (int j = 0; j < G::kNT / 8; ++j)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int tok = tok0 + 8 * j + 2 * t + (i & 1), row = rw + 8 * (i >> 1);
        if (tok < p.T && row < N) y[static_cast<int64_t>(tok) * ldy + row] = dm[4 * j + i];
      }
  }
}

// Consumer-only barrier (the producer warpgroup never joins): named barrier 3 over the 256 consumer threads.
__device__ __forceinline__ void consumers_sync() { asm volatile("bar.sync 3, 256;\n" ::: "memory"); }

// One block an SM. A 288-thread block at 224 registers does not fit: the register file is four
// 16,384-register quarters, one per scheduler, and 9 warps put 3 on one quarter (3 x 224 x 32 >
// 16,384) — hence a producer warpgroup and setmaxnreg, the usual Hopper arrangement.
template <int MT, bool DQ>
__global__ void __launch_bounds__(kThreads, 1)
    wgemm_ws_kernel(const __grid_constant__ WsMaps maps, const WsArgs p, int ntok, float* __restrict__ ws,
                    unsigned* __restrict__ flags) {
  using G = WsGeo<MT, DQ>;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const Ring<MT, DQ> ring{(smem_u32(smem_raw) + 1023u) & ~1023u};
  const int tid = static_cast<int>(threadIdx.x);
  const int ng = p.K >> 6, P = static_cast<int>(gridDim.x), c = static_cast<int>(blockIdx.x);
  // the launch's row tiles: G::kRows-row tiles of each matrix in turn (tile_end counts them)
  const int64_t I = static_cast<int64_t>(pick(p, p.n - 1, [](const WsMat& x) { return x.tile_end; })) * ntok * ng;
  // stream-K ranges, or `whole` whole tiles a block (every piece then starts at group 0 and ends at ng:
  // no helpers, no partial sums)
  const int64_t tiles = I / ng;
  const int64_t begin = p.whole > 0 ? min(int64_t{c} * p.whole, tiles) * ng : wsplit::first(I, P, c);
  const int64_t end = p.whole > 0 ? min(int64_t{c + 1} * p.whole, tiles) * ng : wsplit::first(I, P, c + 1);
  if (tid == kConsumers) {
    for (int s = 0; s < G::kStages; ++s) {
      tma::mbar_init(ring.full(s), 1);   // the producer's arrival (+ the bytes of its two loads)
      tma::mbar_init(ring.empty(s), 8);  // one arrival per consumer warp
      if constexpr (DQ) tma::mbar_init(ring.ready(s), 128);  // every producer thread's row
    }
    tma::mbar_init_fence();
    tma::prefetch_map(&maps.x);
#pragma unroll
    for (int i = 0; i < kWgemmMaxGroup; ++i)
      if (i < p.n) tma::prefetch_map(&maps.c[i]);
  }
  __syncthreads();
  pdl_begin();
  if (tid >= kConsumers) {  // the producer warpgroup: thread 0 of it issues every copy (v6f: all dequantise)
    if constexpr (DQ) {
      asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kDqProducerRegs));
      dequant_produce(ring, p, maps, ng, ntok, static_cast<int>(begin), static_cast<int>(end));
    } else {
      asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kProducerRegs));
      if (tid == kConsumers) produce<MT>(ring, p, maps, ng, ntok, begin, end);
    }
    return;
  }
  if constexpr (DQ) asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kDqConsumerRegs));
  else asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kConsumerRegs));
  ConsumerPos pos;
  for (int64_t it = begin; it < end;) {
    const wsplit::Piece pc = wsplit::piece(it, end, ng);
    const int tok0 = static_cast<int>(pc.tile % ntok) * G::kNT;
    const WsLoc at = locate(p, static_cast<int>(pc.tile / ntok), G::kRows);
    float d[128];
    if constexpr (DQ) consume_dq(ring, pc.k0, pc.k1, pos, d);
    else consume<MT>(ring, rows_of(p, at.m), ng, at.row0, pc.k0, pc.k1, pos, d);
    wsplit::finish_piece(pc, I, P, c, ng, ws, flags, kConsumers, tid, d, consumers_sync,
                         [&](float(&v)[128]) { store_tile<MT>(p, at.m, tok0, at.row0, v); });
    it += pc.k1 - pc.k0;
  }
}

template <int MT, bool DQ>
int resident_blocks(const CudaDevice& dev) {
  using G = WsGeo<MT, DQ>;
  opt_in_smem(wgemm_ws_kernel<MT, DQ>, static_cast<int>(G::kSmem));  // on this device, before any launch
  static const int per_sm = [] {  // a property of the GPU model (the same on every device of one kind)
    int n = 0;
    MERE_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, wgemm_ws_kernel<MT, DQ>, kThreads, G::kSmem));
    return n;
  }();
  MERE_CHECK(per_sm >= 1, "cuda wgemm", "the warp-specialised kernel (", MT, " sub-tiles", DQ ? ", v6f" : "",
             ") does not fit an SM (", G::kSmem, " bytes of shared memory)");
  return per_sm * dev.sm_count();
}

template <int MT, bool DQ>
void run(CudaDevice& dev, const WgemmOut* outs, int n, const uint16_t* xq, int64_t T, WsGrid grid, int blocks,
         float* partials, unsigned* flags) {
  using G = WsGeo<MT, DQ>;
  const int64_t K = outs[0].W.cols;
  // X as [T, K] bf16 and each matrix's codes as [N, K/8] u32; boxes of one group: kNT x 64, kRows x 8 words
  WsMaps maps{};
  maps.x = tma_map_2d(xq, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, static_cast<uint64_t>(T), static_cast<uint64_t>(K),
                      static_cast<uint64_t>(K * 2), G::kNT, 64, CU_TENSOR_MAP_SWIZZLE_128B);
  WsArgs args{};
  args.n = n, args.K = static_cast<int>(K), args.T = static_cast<int>(T);
  int tiles = 0;  // row tiles of the launch
  for (int i = 0; i < n; ++i) {
    const QWeightView& W = outs[i].W;
    maps.c[i] = tma_map_2d(W.codes, CU_TENSOR_MAP_DATA_TYPE_UINT32, static_cast<uint64_t>(W.rows),
                           static_cast<uint64_t>(K / 8), static_cast<uint64_t>(K / 2), G::kRows, 8,
                           CU_TENSOR_MAP_SWIZZLE_NONE);
    tiles += static_cast<int>((W.rows + G::kRows - 1) / G::kRows);
    args.m[i] = WsMat{W.scales, W.biases, outs[i].y, outs[i].ldy, static_cast<int>(W.rows), tiles};
  }
  const int ntok = static_cast<int>((T + G::kNT - 1) / G::kNT);
  const int resident = std::min(blocks, resident_blocks<MT, DQ>(dev));
  const int64_t all = int64_t{ntok} * tiles;  // (row, token) tiles
  int P = wsplit::grid(all, static_cast<int>(K / 64), resident);
  if (grid == WsGrid::WholeTiles) {  // the fewest whole tiles a block that fit the resident blocks
    args.whole = static_cast<int>((all + resident - 1) / resident);
    P = static_cast<int>((all + args.whole - 1) / args.whole);
  }
  launch(DQ ? "wgemm_ws_kernel<1, dq>" : MT == 1 ? "wgemm_ws_kernel<1>" : "wgemm_ws_kernel<2>", wgemm_ws_kernel<MT, DQ>,
         dim3(static_cast<unsigned>(P)), dim3(kThreads), G::kSmem, dev.stream(), maps, args, ntok, partials, flags);
}

}  // namespace

int wgemm_ws_resident_blocks(const CudaDevice& dev, WsShape shape) {
  return shape == WsShape::Tall ? resident_blocks<2, false>(dev)
         : shape == WsShape::Dequant ? resident_blocks<1, true>(dev)
                                     : resident_blocks<1, false>(dev);
}

bool wgemm_ws_dequant_fits(const QWeightView& W, int64_t T) {
  // 4-byte scale words (an even group count a row, aligned arrays) and int iteration indices
  const int64_t tiles = (W.rows + 127) / 128 * ((T + 255) / 256);
  return (W.cols / 64) % 2 == 0 && (reinterpret_cast<uintptr_t>(W.scales) & 3u) == 0 &&
         (reinterpret_cast<uintptr_t>(W.biases) & 3u) == 0 && tiles * (W.cols / 64) < (int64_t{1} << 31);
}

void wgemm_ws(CudaDevice& dev, const WgemmOut* outs, int n, const uint16_t* xq, int64_t T, WsShape shape, WsGrid grid,
              int blocks, float* partials, unsigned* flags) {
  MERE_CHECK(n >= 1 && n <= kWgemmMaxGroup, "cuda wgemm", "a launch takes 1 to ", kWgemmMaxGroup, " matrices, got ", n);
  // v6f computes v6d's products in v6d's order: a group it cannot take runs on v6d, bitwise the same
  int64_t tiles = 0;
  for (int i = 0; i < n; ++i) {
    if (shape == WsShape::Dequant && !wgemm_ws_dequant_fits(outs[i].W, T)) shape = WsShape::Wide;
    tiles += (outs[i].W.rows + 127) / 128;
  }
  const int64_t ntok = (T + 255) / 256;
  MERE_CHECK(tiles * 2 * ntok * (outs[0].W.cols / 64) < (int64_t{1} << 31), "cuda wgemm",
             "too many (tile, group) iterations for one launch: ", tiles, " row tiles of 128, ", ntok,
             " token tiles, ", outs[0].W.cols / 64, " groups");
  if (shape == WsShape::Tall) run<2, false>(dev, outs, n, xq, T, grid, blocks, partials, flags);
  else if (shape == WsShape::Dequant) run<1, true>(dev, outs, n, xq, T, grid, blocks, partials, flags);
  else run<1, false>(dev, outs, n, xq, T, grid, blocks, partials, flags);
}

}  // namespace mere::cuda
