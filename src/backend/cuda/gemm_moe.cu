// MoE experts as a weight stream (gemm_moe.h).
//
// Block = 4 warps on one (expert, tile of <= 32 gathered rows); warp w owns two m-tiles of 16
// weight rows (single: rows rb..rb+31 of W; pair: rows rb..rb+15 of G and of U). Lane (g = lane/4,
// c = lane%4) loads, per span of 128 columns and per m-tile, the 16 bytes at column 32c of rows
// g and g + 8: words j = 0..3 hold columns 32c + 8j .. +7 (one group of 64: 2*span + c/2).
// mma.m16n8k16's A fragment wants rows g, g+8 at k slots {2c, 2c+1, 2c+8, 2c+9}; k slot order is
// free as long as A and B agree, so k-step (j, s) maps slots 2c,2c+1 -> prepared columns
// 32c + 8j + 4s + {0,1} and 2c+8,2c+9 -> + {2,3}: dq::q4_word(word j) gives the pairs in prepared
// order, o[2s] and o[2s+1] are the A registers, and the B registers are the 16 prepared bytes of X
// at the same columns for token g of the n-tile (uint4 halves 2s, 2s+1). Two register buffers
// alternate so that each refill is issued after the last use of its registers (no register move
// that waits for a load: docs/cuda-kernels.md §1 v9).
#include "backend/cuda/gemm_moe.h"

#include <algorithm>

#include "backend/cuda/async_copy.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/engine/k_math.cuh"
#include "backend/cuda/gemm_dequant.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/moe_tiles.cuh"
#include "backend/cuda/qmatvec_common.cuh"

namespace mere::cuda {
namespace {

constexpr int kWarps = 4, kThreads = 32 * kWarps;
constexpr int kBT = 32;      // gathered rows (tokens) a block: 4 n-tiles of 8
constexpr int kSpan = 128;   // columns a load step
// ring variant: per lane and stage, 6 x 16 bytes of shared memory laid out [stage][slot][lane]
// (consecutive lanes, consecutive 16 bytes: no bank conflicts): slots 0-3 the codes of (m-tile,
// row half), slot 4 the four scale words, slot 5 the four bias words
constexpr int kStages = 4, kSlots = 6;
constexpr int kRingBytes = kWarps * kStages * kSlots * 32 * 16;  // 48 KB a block

struct Args {
  const uint8_t* codes[2];   // m-tile 0 / 1 matrix ([E*Ne, K/2] bytes)
  const uint32_t* scales[2]; // [E*Ne, K/64] bf16 viewed as u32 pairs (K % 128 == 0: rows start aligned)
  const uint32_t* biases[2];
  const uint16_t* x;         // [P, K] prepared bf16
  float* y;                  // [P, ldy]
  int64_t ldy;
  const int32_t* offsets;    // [E+1]
  int E, Ne, K;
};

__device__ __forceinline__ void mma_bf16(float* c, uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                         uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// One span's operands of this lane: codes of rows g / g+8 of both m-tiles, their scale/bias words.
struct Buf {
  uint4 w[2][2];
  uint32_t s[2][2], b[2][2];
};

// RING: the codes and scale words go global -> shared by cp.async through a kStages-deep ring of
// this lane's own slots (each lane reads back only what it copied, so cp.async.wait_group alone
// orders it: no barrier), which keeps ~3 spans in flight without holding them in registers.
template <bool PAIR, int NT, bool RING>
__device__ __forceinline__ void run(const Args& a, int e, int m0, int m_end, int rb, int lane, uint4* ring) {
  const int g = lane >> 2, c = lane & 3;
  const int K = a.K, nspan = K / kSpan, groups = K / 64;
  // this lane's rows g (h = 0) and g + 8 (h = 1) of each m-tile; Ne % 16 == 0, so a 16-row m-tile
  // that starts inside the expert ends inside it; single: m-tile 1 past Ne repeats m-tile 0 unstored
  const uint8_t* cp[2];
  const uint32_t *sp[2], *bp[2];
  int r0[2];
#pragma unroll
  for (int mt = 0; mt < 2; ++mt) {
    r0[mt] = PAIR ? rb : (rb + 16 * mt < a.Ne ? rb + 16 * mt : rb);
    const int64_t wr = static_cast<int64_t>(e) * a.Ne + r0[mt] + g;
    cp[mt] = a.codes[mt] + wr * (K / 2) + 16 * c;
    sp[mt] = a.scales[mt] + wr * groups / 2;
    bp[mt] = a.biases[mt] + wr * groups / 2;
  }
  const bool store1 = PAIR || rb + 16 < a.Ne;
  const int64_t code_h = int64_t{8} * (K / 2);  // bytes from row g to row g + 8
  const int sb_h = 8 * groups / 2;              // u32 words from row g to row g + 8
  const int sh = 16 * (c >> 1);  // this lane's group within the span: low or high bf16 of the word
  // B rows: token g of each n-tile (clamped to the tile's last row), as offsets from x
  const int last = m_end - 1;
  int xo[NT];
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) xo[nt] = min(m0 + 8 * nt + g, last) * K + 32 * c;

  float acc[2][NT][4];
#pragma unroll
  for (int mt = 0; mt < 2; ++mt)
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[mt][nt][i] = 0.0f;

  auto load = [&](Buf& B, int span) {
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        B.w[mt][h] = qm::ld_stream(reinterpret_cast<const uint4*>(cp[mt] + h * code_h + 64 * span));
        B.s[mt][h] = __ldg(sp[mt] + h * sb_h + span);
        B.b[mt][h] = __ldg(bp[mt] + h * sb_h + span);
      }
  };
  auto compute = [&](const Buf& B, int span) {
    uint32_t s[2][2], b[2][2];
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        s[mt][h] = (B.s[mt][h] >> sh) & 0xFFFFu;
        b[mt][h] = (B.b[mt][h] >> sh) & 0xFFFFu;
      }
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      uint4 xf[NT];
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) xf[nt] = __ldg(reinterpret_cast<const uint4*>(a.x + xo[nt] + span * kSpan + 8 * j));
#pragma unroll
      for (int mt = 0; mt < 2; ++mt) {
        uint32_t o0[4], o1[4];
        dq::q4_word(qm::word_of(B.w[mt][0], j), s[mt][0], b[mt][0], o0);
        dq::q4_word(qm::word_of(B.w[mt][1], j), s[mt][1], b[mt][1], o1);
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
          mma_bf16(acc[mt][nt], o0[0], o1[0], o0[1], o1[1], xf[nt].x, xf[nt].y);
          mma_bf16(acc[mt][nt], o0[2], o1[2], o0[3], o1[3], xf[nt].z, xf[nt].w);
        }
      }
    }
  };

  if constexpr (RING) {
    auto issue = [&](int stage, int span) {  // span >= nspan: codes zero-filled (no read), words clamped
      const int sc = min(span, nspan - 1);
      const int bytes = span < nspan ? 16 : 0;
      uint4* st = ring + stage * kSlots * 32 + lane;
      uint32_t* sw = reinterpret_cast<uint32_t*>(st + 4 * 32);
      uint32_t* bw = reinterpret_cast<uint32_t*>(st + 5 * 32);
#pragma unroll
      for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          cp_async16(smem_u32(st + (2 * mt + h) * 32), cp[mt] + h * code_h + 64 * sc, bytes);
          cp_async4(smem_u32(sw + 2 * mt + h), sp[mt] + h * sb_h + sc);
          cp_async4(smem_u32(bw + 2 * mt + h), bp[mt] + h * sb_h + sc);
        }
    };
#pragma unroll
    for (int i = 0; i < kStages - 1; ++i) {
      issue(i, i);
      cp_async_commit();
    }
    for (int span = 0; span < nspan; ++span) {
      cp_async_wait<kStages - 2>();  // this lane's copies of `span` have landed
      const uint4* st = ring + (span % kStages) * kSlots * 32 + lane;
      Buf B;
#pragma unroll
      for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int h = 0; h < 2; ++h) B.w[mt][h] = st[(2 * mt + h) * 32];
      const uint4 sv = st[4 * 32], bv = st[5 * 32];
      B.s[0][0] = sv.x, B.s[0][1] = sv.y, B.s[1][0] = sv.z, B.s[1][1] = sv.w;
      B.b[0][0] = bv.x, B.b[0][1] = bv.y, B.b[1][0] = bv.z, B.b[1][1] = bv.w;
      issue((span + kStages - 1) % kStages, span + kStages - 1);  // the slot read one span ago
      cp_async_commit();
      compute(B, span);
    }
    cp_async_wait<0>();
  } else {
    Buf A, B;
    load(A, 0);
    for (int span = 0; span < nspan; span += 2) {
      load(B, min(span + 1, nspan - 1));
      compute(A, span);
      if (span + 1 >= nspan) break;
      load(A, min(span + 2, nspan - 1));
      compute(B, span + 1);
    }
  }

  // C fragment: [0], [1] = (row g, tokens 2c, 2c+1), [2], [3] = (row g+8, same tokens)
#pragma unroll
  for (int nt = 0; nt < NT; ++nt)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int m = m0 + 8 * nt + 2 * c + (i & 1), h = i >> 1;
      if (m >= m_end) continue;
      float* yr = a.y + static_cast<int64_t>(m) * a.ldy;
      const int r = r0[0] + g + 8 * h;
      if constexpr (PAIR) {
        yr[r] = __fmul_rn(k::silu(acc[0][nt][i]), acc[1][nt][i]);
      } else {
        yr[r] = acc[0][nt][i];
        if (store1) yr[r + 16] = acc[1][nt][i];
      }
    }
}

template <bool PAIR, bool RING>
__device__ __forceinline__ void stream_block(const Args& a, uint4* ring_base) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  constexpr int kRowsWarp = PAIR ? 16 : 32;
  const int rb = (blockIdx.y * kWarps + warp) * kRowsWarp;
  if (rb >= a.Ne) return;
  const ExpertTile t = find_expert_tile(a.offsets, a.E, blockIdx.x, kBT, lane);
  if (t.expert < 0) return;
  const int m_end = min(t.m0 + kBT, t.m_end);
  uint4* ring = RING ? ring_base + warp * kStages * kSlots * 32 : nullptr;
  switch ((m_end - t.m0 + 7) / 8) {
    case 1: run<PAIR, 1, RING>(a, t.expert, t.m0, m_end, rb, lane, ring); break;
    case 2: run<PAIR, 2, RING>(a, t.expert, t.m0, m_end, rb, lane, ring); break;
    case 3: run<PAIR, 3, RING>(a, t.expert, t.m0, m_end, rb, lane, ring); break;
    default: run<PAIR, 4, RING>(a, t.expert, t.m0, m_end, rb, lane, ring); break;
  }
}

// register buffers: 150 / 158 registers, 3 blocks an SM (the bounds are the compiler's own choice)
template <bool PAIR>
__global__ void __launch_bounds__(kThreads) moe_stream_kernel(const Args a) {
  pdl_begin();
  stream_block<PAIR, false>(a, nullptr);
}

// the same held to 4 blocks an SM (128 registers; ptxas spills 64-136 bytes, L1-resident): 5%
// faster than 3 blocks (docs/cuda-kernels.md "MoE prefill v2c"), the engine's default
template <bool PAIR>
__global__ void __launch_bounds__(kThreads, 4) moe_stream_tight_kernel(const Args a) {
  pdl_begin();
  stream_block<PAIR, false>(a, nullptr);
}

// shared-memory ring: 48 KB a block; held to 3 blocks an SM (168 registers) without spills
template <bool PAIR>
__global__ void __launch_bounds__(kThreads, 3) moe_stream_ring_kernel(const Args a) {
  pdl_begin();
  extern __shared__ uint4 moe_ring[];  // [kWarps][kStages][kSlots][32]
  stream_block<PAIR, true>(a, moe_ring);
}

void check(const QWeightView& W, int64_t E, int64_t Ne, int64_t P, int64_t ldy, const char* where) {
  MERE_CHECK(moe_stream_supported(W, Ne), where,
             "expected 4-bit MLX-layout weights with cols % 128 == 0 and rows an expert % 16 == 0, got bits = ", W.bits,
             ", cols = ", W.cols, ", Ne = ", Ne, W.tiled ? ", tiled" : "");
  check_expert_launch(W, E, Ne, P, ldy, where);
}

template <bool PAIR>
void launch_stream(CudaDevice& dev, const QWeightView& W0, const QWeightView& W1, int64_t E, int64_t Ne,
                   const uint16_t* xq, const int32_t* offsets, int64_t P, float* y, int64_t ldy, MoeStreamLoads loads) {
  if (P == 0) return;
  DeviceGuard guard(dev.ordinal());
  Args a{};
  const QWeightView* w[2] = {&W0, &W1};
  for (int i = 0; i < 2; ++i) {
    a.codes[i] = reinterpret_cast<const uint8_t*>(w[i]->codes);
    a.scales[i] = reinterpret_cast<const uint32_t*>(w[i]->scales);
    a.biases[i] = reinterpret_cast<const uint32_t*>(w[i]->biases);
  }
  a.x = xq;
  a.y = y;
  a.ldy = ldy;
  a.offsets = offsets;
  a.E = static_cast<int>(E);
  a.Ne = static_cast<int>(Ne);
  a.K = static_cast<int>(W0.cols);
  const int64_t rows_block = kWarps * (PAIR ? 16 : 32);
  const int64_t tiles = expert_tiles_max(P, E, kBT);
  const dim3 grid(static_cast<unsigned>(tiles), static_cast<unsigned>((Ne + rows_block - 1) / rows_block), 1);
  if (loads == MoeStreamLoads::Ring)
    launch(PAIR ? "moe_stream_ring_kernel<pair>" : "moe_stream_ring_kernel", &moe_stream_ring_kernel<PAIR>, grid,
           kThreads, kRingBytes, dev.stream(), a);
  else if (loads == MoeStreamLoads::Tight)
    launch(PAIR ? "moe_stream_tight_kernel<pair>" : "moe_stream_tight_kernel", &moe_stream_tight_kernel<PAIR>, grid,
           kThreads, 0, dev.stream(), a);
  else
    launch(PAIR ? "moe_stream_kernel<pair>" : "moe_stream_kernel", &moe_stream_kernel<PAIR>, grid, kThreads, 0,
           dev.stream(), a);
}

}  // namespace

bool moe_stream_supported(const QWeightView& W, int64_t Ne) {
  return W.bits == 4 && !W.tiled && W.cols > 0 && W.cols % kSpan == 0 && W.biases != nullptr && Ne >= 16 &&
         Ne % 16 == 0;
}

void moe_stream(CudaDevice& dev, const QWeightView& W, int64_t E, int64_t Ne, const uint16_t* xq,
                const int32_t* offsets, int64_t P, float* y, int64_t ldy, MoeStreamLoads loads) {
  check(W, E, Ne, P, ldy, "cuda moe_stream");
  launch_stream<false>(dev, W, W, E, Ne, xq, offsets, P, y, ldy, loads);
}

void moe_stream_gate_up(CudaDevice& dev, const QWeightView& G, const QWeightView& U, int64_t E, int64_t Ne,
                        const uint16_t* xq, const int32_t* offsets, int64_t P, float* y, int64_t ldy,
                        MoeStreamLoads loads) {
  check(G, E, Ne, P, ldy, "cuda moe_stream_gate_up");
  check(U, E, Ne, P, ldy, "cuda moe_stream_gate_up");
  MERE_CHECK(G.cols == U.cols, "cuda moe_stream_gate_up", "gate and up: expected the same cols, got ", G.cols, " and ",
             U.cols);
  launch_stream<true>(dev, G, U, E, Ne, xq, offsets, P, y, ldy, loads);
}

}  // namespace mere::cuda
