// The wgmma prefill GEMMs (gemm_wgmma.h): Y = X · W^T with W 4-bit MLX, dequantised per 64-column
// group straight into wgmma's A registers. Why and the numbers: docs/cuda-kernels.md §5 "prefill v6".
//
// Block: 256 threads = two warpgroups, 128 weight rows (warpgroup w: "half" w, 64 rows, one
// wgmma.m64nNTk16 per k-step; a half can come from any matrix: the next 64 rows, or the MoE up
// projection beside the gate) x NT token rows (the wgmma N: 128 dense, 32 grouped MoE). K in groups
// of 64 columns (4 k-steps); a ring of stages in shared memory, each one group's X tile (NT rows x
// 128 bytes, 128-byte swizzle: chunk c of row r at r*128 + ((c ^ (r & 7)) << 4), the layout a
// K-major SWIZZLE_128B descriptor reads) and its codes (128 rows x 32 bytes), filled with cp.async
// stages - 2 groups ahead. Per group a thread waits for its warpgroup's previous wgmmas (they read
// the A registers), then for each k-step s reads words 2s, 2s+1 of its two rows and dequantises
// them into 4 A registers (dq::q4_pair: lane (g, t) holds pair t of those words of rows g, g + 8 —
// the A fragment's columns 2t, 2t+1 and 2t+8, 2t+9 in the prepared order), and issues the 4
// wgmmas without waiting. Measured slower than the paths it would replace (gemm_wgmma.h "Status").
#include "backend/cuda/gemm_wgmma.h"
#include "backend/cuda/gemm_wgmma_ws.h"

#include <cuda_bf16.h>

#include <algorithm>

#include "backend/cuda/async_copy.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/engine/k_math.cuh"
#include "backend/cuda/gemm_dequant.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/moe_tiles.cuh"
#include "backend/cuda/wgemm_fixup.cuh"
#include "backend/cuda/wgemm_split.h"
#include "backend/cuda/wgmma_ops.cuh"

namespace mere::cuda {
namespace {
using namespace wg;

constexpr int kRows = 128;  // weight rows of a block (two halves of 64)
constexpr int kThreads = 256;
constexpr int kWBytes = kRows * 32;  // one group's codes: 128 rows x 64 4-bit codes

// Shapes by token-tile width: NT = 256 (dense, v6c: one block an SM, 217 KB of shared memory), 128
// (dense v6a, 2 blocks an SM), 32 (MoE experts at ~16 rows each, 3 blocks an SM with a deeper ring:
// the bytes in flight are what the experts need).
template <int NT>
struct Geo {
  static constexpr int kXBytes = NT * 128;                // one group's X tile
  static constexpr int kStageBytes = kXBytes + kWBytes;   // a multiple of 1024: X tiles start atoms
  static constexpr int kStages = NT == 256 ? 5 : NT == 128 ? 5 : 8;
  static constexpr int kABytes = NT == 256 ? 2 * kRows * 128 : 0;  // v6c: two A buffers after the stages
  static constexpr size_t kSmem = size_t{kStages} * kStageBytes + kABytes + 1024;  // + aligning the first
  static_assert(kStageBytes % 1024 == 0, "X tiles must start on 1024-byte swizzle atoms");
};

// 64 weight rows of one matrix: rows [first, first + count) of codes / scales / biases (count may
// be < 64: the rest read row first + count - 1 and are never stored)
struct Half {
  const uint32_t* codes;   // [rows, K/8] u32
  const uint16_t* scales;  // [rows, K/64] bf16
  const uint16_t* biases;
  int64_t first;
  int count;
};

// The rows of X a tile multiplies: xq rows [first, first + count) (count <= NT; the rest are zeros)
struct XRows {
  const uint16_t* xq;  // [*, K] bf16, prepared order
  int64_t first;
  int count;
};

// One thread's part of a tile's group loop: its copies (code row tid / 2, chunk tid % 2, and X chunks
// tid + i * 256 of each group) and its A rows (g and g + 8 of its warp's 16 in its warpgroup's half)
// with their scale / bias indices.
template <int NT>
struct TileIo {
  using G = Geo<NT>;
  int K, ng, k0, t, la, lb;
  XRows xr;
  const uint16_t* sc;
  const uint16_t* bi;
  int64_t sa, sb;  // scale index of group 0, rows la and lb
  const uint32_t* crow;
  int cbytes;
  uint32_t cdst, base;

  __device__ __forceinline__ TileIo(int K_, const XRows& xr_, const Half (&hv)[2], uint32_t base_, int k0_)
      : K(K_), ng(K_ >> 6), k0(k0_), xr(xr_), base(base_) {
    const int tid = static_cast<int>(threadIdx.x), lane = tid & 31, warp = tid >> 5;
    t = lane & 3;
    const Half& h = warp >= 4 ? hv[1] : hv[0];  // the half of this thread's A rows (uniform per warpgroup)
    const int ra = (warp & 3) * 16 + (lane >> 2);
    la = (warp >> 2) * 64 + ra, lb = la + 8;
    sc = h.scales, bi = h.biases;
    sa = (h.first + min(ra, h.count - 1)) * ng;
    sb = (h.first + min(ra + 8, h.count - 1)) * ng;
    const int cr = tid >> 1, chh = tid & 1;
    const Half& chf = cr >= 64 ? hv[1] : hv[0];
    crow = chf.codes + (chf.first + min(cr & 63, chf.count - 1)) * (K >> 3) + chh * 4;
    cbytes = (cr & 63) < chf.count ? 16 : 0;
    cdst = static_cast<uint32_t>(cr * 32 + ((chh ^ ((cr >> 2) & 1)) << 4));  // conflict-free reads
  }
  __device__ __forceinline__ uint32_t stage_addr(int kb) const {
    return base + static_cast<uint32_t>(((kb - k0) % G::kStages) * G::kStageBytes);
  }
  // group kb's X tile and codes into its stage (rows out of range: zeros)
  __device__ __forceinline__ void load_group(int kb) const {
    const int tid = static_cast<int>(threadIdx.x);
    const uint32_t sx = stage_addr(kb);
#pragma unroll
    for (int i = 0; i < (NT * 8 + kThreads - 1) / kThreads; ++i) {
      const int c = tid + i * kThreads, r = c >> 3, ch = c & 7;
      if (NT * 8 % kThreads == 0 || c < NT * 8) {
        const uint16_t* src = xr.xq + (xr.first + min(r, xr.count - 1)) * K + kb * 64 + ch * 8;
        cp_async16(sx + r * 128 + ((ch ^ (r & 7)) << 4), src, r < xr.count ? 16 : 0);
      }
    }
    cp_async16(sx + G::kXBytes + cdst, crow + kb * 8, cbytes);
  }
  // the first stages - 2 groups of [k0, k1), one commit group each
  __device__ __forceinline__ void prologue(int k1) const {
#pragma unroll 1
    for (int kb = k0; kb < k0 + G::kStages - 2; ++kb) {
      if (kb < k1) load_group(kb);
      cp_async_commit();
    }
  }
  // group kb's copies have landed for every thread; every warpgroup has passed its wait for the
  // wgmmas of group kb - 2, so that stage is free
  __device__ __forceinline__ void wait_group() const {
    cp_async_wait<G::kStages - 3>();
    fence_async_smem();
    __syncthreads();
  }
  // requests group kb + stages - 2 (into the stage of group kb - 2), one commit group
  __device__ __forceinline__ void request(int kb, int k1) const {
    if (kb + G::kStages - 2 < k1) load_group(kb + G::kStages - 2);
    cp_async_commit();
  }
  __device__ __forceinline__ void begin_group(int kb, int k1) const {
    wait_group();
    request(kb, k1);
  }
  // group kb's A fragment (dq::q4_pair: lane (g, t) holds pair t of words 2s, 2s + 1 of rows g, g + 8,
  // the A fragment's columns 2t, 2t+1 and 2t+8, 2t+9 in the prepared order) with scales (sa_, ba_) of
  // row la and (sb_, bb_) of row lb
  __device__ __forceinline__ void dequant(const unsigned char* sbase, int kb, uint32_t s_a, uint32_t b_a, uint32_t s_b,
                                          uint32_t b_b, uint32_t (&a)[4][4]) const {
    const unsigned char* sw = sbase + ((kb - k0) % G::kStages) * G::kStageBytes + G::kXBytes;
    auto word_pair = [&](int r, int s) {  // words 2s, 2s + 1 of row r's codes (halves swizzled as stored)
      return *reinterpret_cast<const uint2*>(sw + r * 32 + (((s >> 1) ^ ((r >> 2) & 1)) << 4) + ((s & 1) << 3));
    };
    const __nv_bfloat162 s2a = dq::bf2_splat(s_a), b2a = dq::bf2_splat(b_a);
    const __nv_bfloat162 s2b = dq::bf2_splat(s_b), b2b = dq::bf2_splat(b_b);
#pragma unroll
    for (int s = 0; s < 4; ++s) {
      const uint2 wa = word_pair(la, s), wb = word_pair(lb, s);
      a[s][0] = dq::q4_pair(wa.x, t, s2a, b2a);
      a[s][1] = dq::q4_pair(wb.x, t, s2b, b2b);
      a[s][2] = dq::q4_pair(wa.y, t, s2a, b2a);
      a[s][3] = dq::q4_pair(wb.y, t, s2b, b2b);
    }
  }
  template <int N>
  __device__ __forceinline__ void mma_group(int kb, const uint32_t (&a)[4][4], float (&d)[N]) const {
    const uint64_t desc = sw128_desc(stage_addr(kb));
    wg_fence();
#pragma unroll
    for (int s = 0; s < 4; ++s) wgmma_k16(d, a[s], desc + 2 * s);  // + 32 bytes a k-step
    wg_commit();
  }
};

__device__ __forceinline__ void zero(uint32_t (&a)[4][4]) {
#pragma unroll
  for (int s = 0; s < 4; ++s)
#pragma unroll
    for (int i = 0; i < 4; ++i) a[s][i] = 0u;
}

// Groups [k0, k1) of the tile (x rows, two halves of weight rows) into d (which the caller zeroed),
// one A buffer: per group a warpgroup waits for its previous wgmmas before dequantising (v6a).
// Leaves every wgmma and cp.async complete.
template <int NT>
__device__ __forceinline__ void tile_groups(int K, const XRows& xr, const Half (&hv)[2], uint32_t base,
                                            const unsigned char* sbase, int k0, int k1, float (&d)[NT / 2]) {
  const TileIo<NT> io(K, xr, hv, base, k0);
  uint32_t a[4][4];
  zero(a);
  __syncthreads();  // a previous tile's readers of the ring are done (they waited for their wgmmas)
  io.prologue(k1);
  uint32_t s_a = io.sc[io.sa + k0], b_a = io.bi[io.sa + k0], s_b = io.sc[io.sb + k0], b_b = io.bi[io.sb + k0];
#pragma unroll 1
  for (int kb = k0; kb < k1; ++kb) {
    const int kn = min(kb + 1, k1 - 1);  // the next group's scales, one group ahead
    const uint32_t ns_a = io.sc[io.sa + kn], nb_a = io.bi[io.sa + kn], ns_b = io.sc[io.sb + kn], nb_b = io.bi[io.sb + kn];
    io.begin_group(kb, k1);
    wg_wait0();  // this warpgroup's wgmmas of group kb - 1 are done: a[] is free
    pin(d);
    pin(a);
    io.dequant(sbase, kb, s_a, b_a, s_b, b_b, a);
    io.mma_group(kb, a, d);
    s_a = ns_a, b_a = nb_a, s_b = ns_b, b_b = nb_b;
  }
  wg_wait0();
  pin(d);
  pin(a);
  cp_async_wait<0>();
}

// v6c, 256-token tiles: the warpgroup dequantises its 64 rows of group kb into shared memory (one
// of two A buffers, 8 KB, the 128-byte swizzle of the X tiles) and runs wgmma with both operands in
// shared memory, so it can dequantise group kb while the tensor cores still run group kb - 1 (an A
// operand in registers cannot be rewritten under in-flight wgmmas: ptxas serialises them, C7513).
// Thread i of a warpgroup converts row i / 2, words 4 (i % 2) .. + 3 (one 16-byte read of the staged
// codes, four 16-byte stores: conflict-free under the swizzle), with that row's scale and bias.
template <int NT>
__device__ __forceinline__ void tile_groups_ss(int K, const XRows& xr, const Half (&hv)[2], uint32_t base,
                                               const unsigned char* sbase, int k0, int k1, float (&d)[NT / 2]) {
  using G = Geo<NT>;
  static_assert(G::kABytes == 2 * kRows * 128, "two A buffers of 128 rows x 64 bf16");
  const TileIo<NT> io(K, xr, hv, base, k0);
  const int tid = static_cast<int>(threadIdx.x), wgi = tid >> 7, r = (tid & 127) >> 1, h = tid & 1;
  const Half hf = wgi ? hv[1] : hv[0];  // a copy: indexing hv by a run-time value would put it in local memory
  const int64_t si = (hf.first + min(r, hf.count - 1)) * io.ng;  // this row's scale index of group 0
  const int rb = wgi * 64 + r;                                     // its row in the block's codes
  const uint32_t a_base = base + G::kStages * G::kStageBytes + wgi * 8192;  // + buffer * 16 KB
  const uint32_t a_row = static_cast<uint32_t>(r * 128), a_sw = static_cast<uint32_t>(r & 7);
  __syncthreads();  // a previous tile's readers of the ring and the A buffers are done
  io.prologue(k1);
  // scale and bias of this row: group kb (s_r, b_r) and kb + 1 (s_n, b_n) in registers, kb + 2 requested
  uint32_t s_r = hf.scales[si + k0], b_r = hf.biases[si + k0];
  uint32_t s_n = hf.scales[si + min(k0 + 1, k1 - 1)], b_n = hf.biases[si + min(k0 + 1, k1 - 1)];
#pragma unroll 1
  for (int kb = k0; kb < k1; ++kb) {
    const int k2 = min(kb + 2, k1 - 1);
    const uint32_t s2 = hf.scales[si + k2], b2 = hf.biases[si + k2];
    io.wait_group();
    // A buffer kb & 1: the wgmmas of group kb - 2 that read it are done (wg_wait<1> below, last group)
    const uint32_t abuf = a_base + static_cast<uint32_t>((kb & 1) * 16384);
    const unsigned char* sw = sbase + ((kb - k0) % G::kStages) * G::kStageBytes + G::kXBytes;
    const uint4 w4 = *reinterpret_cast<const uint4*>(sw + rb * 32 + ((h ^ ((rb >> 2) & 1)) << 4));
    const uint32_t words[4] = {w4.x, w4.y, w4.z, w4.w};
    dequant_a_half(words, s_r, b_r, h, abuf + a_row, a_sw);
    fence_async_smem();  // the stores become visible to wgmma's reads
    asm volatile("bar.sync %0, 128;\n" ::"r"(1 + wgi) : "memory");  // the whole warpgroup's rows are in
    const uint64_t da = sw128_desc(abuf), db = sw128_desc(io.stage_addr(kb));
    wg_fence();
#pragma unroll
    for (int s = 0; s < 4; ++s) wgmma_ss_k16(d, da + 2 * s, db + 2 * s);  // + 32 bytes a k-step
    wg_commit();
    io.request(kb, k1);  // the copies are issued under the wgmmas, not in front of the dequantisation
    wg_wait<1>();  // group kb - 1 is done: its A buffer and (for every warpgroup, at the next barrier) its stage
    s_r = s_n, b_r = b_n, s_n = s2, b_n = b2;
  }
  wg_wait0();
  pin(d);
  cp_async_wait<0>();
}

__device__ __forceinline__ uint32_t smem_base(const unsigned char* smem_raw, const unsigned char*& sbase) {
  const uint32_t raw = smem_u32(smem_raw), base = (raw + 1023u) & ~1023u;  // X tiles on 1024-byte atoms
  sbase = smem_raw + (base - raw);
  return base;
}

// ---------------------------------------------------------------- dense (wgemm)
struct WgArgs {
  const uint32_t* codes;  // [N, K/8] u32
  const uint16_t* scales;  // [N, K/64] bf16
  const uint16_t* biases;
  int N, K;
  const uint16_t* xq;  // [T, K] bf16, prepared order
  int T;
  float* y;  // [T, ldy]
  int64_t ldy;
};

// Groups [k0, k1) of the dense tile (tok0, row0) of NT tokens into d (zeroed here): NT = 128 the
// one-buffer register loop (v6a), 256 the shared-memory A loop (v6c).
template <int NT>
__device__ __forceinline__ void dense_groups(const WgArgs& p, int tok0, int row0, int k0, int k1, uint32_t base,
                                             const unsigned char* sbase, float (&d)[NT / 2]) {
  const XRows xr{p.xq, tok0, min(NT, p.T - tok0)};
  Half hv[2];
  for (int w = 0; w < 2; ++w) {  // a half past the last row reads row N - 1 (never stored)
    const int first = min(row0 + 64 * w, p.N - 1);
    hv[w] = Half{p.codes, p.scales, p.biases, first, max(1, min(64, p.N - first))};
  }
#pragma unroll
  for (int i = 0; i < NT / 2; ++i) d[i] = 0.0f;
  if constexpr (NT == 256)
    tile_groups_ss<NT>(p.K, xr, hv, base, sbase, k0, k1, d);
  else
    tile_groups<NT>(p.K, xr, hv, base, sbase, k0, k1, d);
}

template <int NT>
__device__ __forceinline__ void store_dense(const WgArgs& p, int tok0, int row0, const float (&d)[NT / 2]) {
  for_fragment<NT>([&](int i, int x, int r) {
    const int tok = tok0 + x, row = row0 + r;
    if (tok < p.T && row < p.N) p.y[static_cast<int64_t>(tok) * p.ldy + row] = d[i];
  });
}

// Data-parallel: block (token tile, row tile) computes its whole tile.
__global__ void __launch_bounds__(kThreads, 2) wgemm_q4_kernel(const WgArgs p) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const unsigned char* sbase = nullptr;
  const uint32_t base = smem_base(smem_raw, sbase);
  const int tok0 = static_cast<int>(blockIdx.x) * 128, row0 = static_cast<int>(blockIdx.y) * kRows;
  pdl_begin();
  float d[64];
  dense_groups<128>(p, tok0, row0, 0, p.K >> 6, base, sbase, d);
  store_dense<128>(p, tok0, row0, d);
}

// Stream-K (wgemm_fixup.cuh finishes each piece): gridDim.x blocks, all resident at once, split the tiles x groups iterations evenly
// (wgemm_split.h: block c takes [c I / P, (c + 1) I / P) in (row tile, token tile, group) order). A
// tile whose groups span several blocks is finished by the block holding its group 0 (the owner,
// which reaches it last in its range): the helpers store their partial sums to ws[block] and raise
// flags[block]; the owner waits for each flag in block order, adds the partials in that (k) order,
// lowers the flag (so every launch finds the flags zero, graph replays included) and stores.
// Deterministic for a given (shape, T, block count); an owner only waits for blocks after it, all
// resident.
template <int NT>
__global__ void __launch_bounds__(kThreads, NT == 256 ? 1 : 2)
    wgemm_q4_streamk_kernel(const WgArgs p, int ntok, float* __restrict__ ws, unsigned* __restrict__ flags) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const unsigned char* sbase = nullptr;
  const uint32_t base = smem_base(smem_raw, sbase);
  const int ng = p.K >> 6, P = static_cast<int>(gridDim.x), c = static_cast<int>(blockIdx.x);
  const int tid = static_cast<int>(threadIdx.x);
  const int64_t I = static_cast<int64_t>((p.N + kRows - 1) / kRows) * ntok * ng;
  const int64_t end = wsplit::first(I, P, c + 1);
  pdl_begin();
  for (int64_t it = wsplit::first(I, P, c); it < end;) {
    const wsplit::Piece pc = wsplit::piece(it, end, ng);
    const int tok0 = static_cast<int>(pc.tile % ntok) * NT, row0 = static_cast<int>(pc.tile / ntok) * kRows;
    float d[NT / 2];
    dense_groups<NT>(p, tok0, row0, pc.k0, pc.k1, base, sbase, d);
    wsplit::finish_piece(pc, I, P, c, ng, ws, flags, kThreads, tid, d, [] { __syncthreads(); },
                         [&](const float(&v)[NT / 2]) { store_dense<NT>(p, tok0, row0, v); });
    it += pc.k1 - pc.k0;
  }
}

// ---------------------------------------------------------------- grouped MoE experts
struct WgMoeArgs {
  Half w0, w1;            // w0: the experts' matrix (gate, or down); w1: up (paired) or unused
  int E, Ne, K;
  const uint16_t* xq;     // [P, K] bf16 prepared rows in expert order
  const int32_t* offsets;  // [E + 1]
  float* y;               // [P, ldy]
  int64_t ldy;
};

// Block (row tile, expert tile): tile blockIdx.y of find_expert_tile (32 gathered rows of one
// expert) x 128 weight rows of that expert — rows [64 bx, 64 bx + 64) of gate and of up (PAIR: the
// SwiGLU fused into the store, rounded as k::swiglu), or [128 bx, 128 bx + 128) of one matrix.
template <bool PAIR>
__global__ void __launch_bounds__(kThreads, 3) wgemm_moe_kernel(const WgMoeArgs p) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const unsigned char* sbase = nullptr;
  const uint32_t base = smem_base(smem_raw, sbase);
  pdl_begin();
  const ExpertTile et = find_expert_tile(p.offsets, p.E, static_cast<int>(blockIdx.y), 32,
                                         static_cast<int>(threadIdx.x) & 31);
  if (et.expert < 0) return;
  const int r0 = static_cast<int>(blockIdx.x) * (PAIR ? 64 : 128);  // first row within the expert
  const int64_t e0 = static_cast<int64_t>(et.expert) * p.Ne;
  const XRows xr{p.xq, et.m0, min(32, et.m_end - et.m0)};
  Half hv[2];
  hv[0] = p.w0, hv[0].first = e0 + r0, hv[0].count = 64;
  hv[1] = PAIR ? p.w1 : p.w0, hv[1].first = e0 + r0 + (PAIR ? 0 : 64), hv[1].count = 64;
  float d[16];
#pragma unroll
  for (int i = 0; i < 16; ++i) d[i] = 0.0f;
  tile_groups<32>(p.K, xr, hv, base, sbase, 0, p.K >> 6, d);
  if constexpr (PAIR) {  // warpgroup 1 (up) hands its values to warpgroup 0 (gate) through shared memory
    float* u = reinterpret_cast<float*>(const_cast<unsigned char*>(sbase));  // the ring is drained
    const int tid = static_cast<int>(threadIdx.x);
    __syncthreads();
    if (tid >= 128) {
#pragma unroll
      for (int i = 0; i < 16; ++i) u[i * 128 + (tid - 128)] = d[i];
    }
    __syncthreads();
    if (tid < 128)
      for_fragment<32>([&](int i, int x, int r) {
        if (x < xr.count)
          p.y[(et.m0 + x) * p.ldy + r0 + r] = __fmul_rn(k::silu(d[i]), u[i * 128 + tid]);
      });
  } else {
    for_fragment<32>([&](int i, int x, int r) {
      if (x < xr.count) p.y[(et.m0 + x) * p.ldy + r0 + r] = d[i];
    });
  }
}

template <class Kern>
void set_smem(Kern* k, size_t bytes) {
  MERE_CUDA_CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
}

}  // namespace

bool wgemm_supported(const CudaDevice& dev, const QWeightView& W) {
  return dev.props().major == 9 && W.bits == 4 && !W.tiled && W.biases != nullptr && W.cols > 0 &&
         W.cols % 64 == 0 && W.rows > 0 && (reinterpret_cast<uintptr_t>(W.codes) & 15u) == 0;
}

namespace {
// Blocks of the stream-K kernel of NT tokens that fit one SM (its shared memory set up once).
template <int NT>
int streamk_per_sm() {
  static const int per_sm = [] {
    set_smem(wgemm_q4_streamk_kernel<NT>, Geo<NT>::kSmem);
    int n = 0;
    MERE_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, wgemm_q4_streamk_kernel<NT>, kThreads, Geo<NT>::kSmem));
    return n;
  }();
  MERE_CHECK(per_sm >= 1, "cuda wgemm", "the stream-K kernel of ", NT, "-token tiles does not fit an SM (",
             Geo<NT>::kSmem, " bytes of shared memory)");
  return per_sm;
}

int wgemm_resident_blocks(const CudaDevice& dev, bool wide) {
  return (wide ? streamk_per_sm<256>() : streamk_per_sm<128>()) * dev.sm_count();
}
}  // namespace

const char* wgemm_form_name(WgemmForm f) {
  return f == WgemmForm::StreamK                ? "stream-K"
         : f == WgemmForm::Wide                 ? "wide"
         : f == WgemmForm::WarpSpecialized      ? "ws"
         : f == WgemmForm::WarpSpecializedTall  ? "wst"
                                                : "wsd";
}

WgemmStreamK::WgemmStreamK(CudaDevice& dev, WgemmForm form)
    : form_(form) {
  blocks_ = !ws() ? wgemm_resident_blocks(dev, form == WgemmForm::Wide)
            // wsd falls back to ws for the matrices it cannot take: a grid both fit
            : form == WgemmForm::WarpSpecializedDequant
                ? std::min(wgemm_ws_resident_blocks(dev, WsShape::Dequant), wgemm_ws_resident_blocks(dev, WsShape::Wide))
                : wgemm_ws_resident_blocks(dev, form == WgemmForm::WarpSpecializedTall ? WsShape::Tall : WsShape::Wide);
  // 256 threads a block hold the partial sums in each form (the ws kernel's consumers)
  ws_ = dev.alloc(static_cast<size_t>(blocks_) * kThreads * (wide() ? 128 : 64) * 4, "wgemm stream-K partial sums");
  flags_ = dev.alloc(static_cast<size_t>(blocks_) * 4, "wgemm stream-K flags");
  dev.fill_bytes(flags_.get(), 0, flags_.bytes());
}

namespace {
WsShape ws_shape(WgemmForm f) {
  return f == WgemmForm::WarpSpecializedTall ? WsShape::Tall
         : f == WgemmForm::WarpSpecializedDequant ? WsShape::Dequant
                                                   : WsShape::Wide;
}

void check_operands(const CudaDevice& dev, const QWeightView& W, const uint16_t* xq, int64_t T, int64_t ldy) {
  MERE_CHECK(wgemm_supported(dev, W), "cuda wgemm", "needs an sm_90 device and 4-bit MLX weights with 64 | cols (got ",
             W.bits, "-bit", W.tiled ? " tiled" : "", " [", W.rows, ", ", W.cols, "] on sm_", dev.props().major,
             dev.props().minor, ")");
  MERE_CHECK(T > 0 && T < (int64_t{1} << 31) && W.rows < (int64_t{1} << 31) && W.cols < (int64_t{1} << 24) &&
                 ldy >= W.rows && (W.rows + kRows - 1) / kRows <= 65535,
             "cuda wgemm", "shape out of range: T = ", T, ", rows = ", W.rows, ", cols = ", W.cols, ", ldy = ", ldy);
  MERE_CHECK((reinterpret_cast<uintptr_t>(xq) & 15u) == 0, "cuda wgemm", "xq must be 16-byte aligned");
}
}  // namespace

void wgemm_group(CudaDevice& dev, const WgemmOut* outs, int n, const uint16_t* xq, int64_t T, WgemmStreamK& sk,
                 WsGrid grid) {
  MERE_CHECK(sk.ws(), "cuda wgemm", "a group of matrices runs on a warp-specialised form (ws, wst, wsd), not ",
             wgemm_form_name(sk.form()));
  MERE_CHECK(n >= 1 && n <= kWgemmMaxGroup, "cuda wgemm", "a group holds 1 to ", kWgemmMaxGroup, " matrices, got ", n);
  int64_t tiles = 0;
  for (int i = 0; i < n; ++i) {
    check_operands(dev, outs[i].W, xq, T, outs[i].ldy);
    MERE_CHECK(outs[i].W.cols == outs[0].W.cols, "cuda wgemm", "a group shares X: matrix ", i, " has ", outs[i].W.cols,
               " cols, matrix 0 ", outs[0].W.cols);
    tiles += (outs[i].W.rows + kRows - 1) / kRows;
  }
  MERE_CHECK(tiles <= 65535, "cuda wgemm", "a group of ", tiles, " row tiles is out of range");
  DeviceGuard guard(dev.ordinal());
  wgemm_ws(dev, outs, n, xq, T, ws_shape(sk.form()), grid, sk.blocks(), sk.partials(), sk.flags());
}

void wgemm(CudaDevice& dev, const QWeightView& W, const uint16_t* xq, int64_t T, float* y, int64_t ldy,
           WgemmStreamK* sk, WsGrid grid) {
  check_operands(dev, W, xq, T, ldy);
  DeviceGuard guard(dev.ordinal());
  const WgArgs args{W.codes, W.scales, W.biases, static_cast<int>(W.rows), static_cast<int>(W.cols), xq,
                    static_cast<int>(T), y, ldy};
  const int nrow = static_cast<int>((W.rows + kRows - 1) / kRows);
  if (sk != nullptr && sk->ws()) {  // codes alignment and 64 | cols: wgemm_supported
    const WgemmOut one{W, y, ldy};
    wgemm_ws(dev, &one, 1, xq, T, ws_shape(sk->form()), grid, sk->blocks(), sk->partials(), sk->flags());
    return;
  }
  if (sk != nullptr) {
    const int nt = sk->wide() ? 256 : 128, ntok = static_cast<int>((T + nt - 1) / nt);
    const int P = wsplit::grid(int64_t{ntok} * nrow, static_cast<int>(W.cols / 64),
                               std::min(sk->blocks(), wgemm_resident_blocks(dev, sk->wide())));
    if (sk->wide())
      launch("wgemm_q4_streamk_kernel<256>", wgemm_q4_streamk_kernel<256>, dim3(static_cast<unsigned>(P)),
             dim3(kThreads), Geo<256>::kSmem, dev.stream(), args, ntok, sk->partials(), sk->flags());
    else
      launch("wgemm_q4_streamk_kernel<128>", wgemm_q4_streamk_kernel<128>, dim3(static_cast<unsigned>(P)),
             dim3(kThreads), Geo<128>::kSmem, dev.stream(), args, ntok, sk->partials(), sk->flags());
    return;
  }
  const int ntok = static_cast<int>((T + 127) / 128);
  static const bool configured = (set_smem(wgemm_q4_kernel, Geo<128>::kSmem), true);
  (void)configured;
  launch("wgemm_q4_kernel", wgemm_q4_kernel, dim3(static_cast<unsigned>(ntok), static_cast<unsigned>(nrow)),
         dim3(kThreads), Geo<128>::kSmem, dev.stream(), args);
}

bool wgemm_moe_supported(const CudaDevice& dev, const QWeightView& W, int64_t Ne) {
  return wgemm_supported(dev, W) && Ne > 0 && Ne % 128 == 0 && W.rows % Ne == 0;
}

namespace {
void moe_checks(const CudaDevice& dev, const QWeightView& W, int64_t E, int64_t Ne, int64_t P, int64_t ldy,
                const char* where) {
  MERE_CHECK(wgemm_moe_supported(dev, W, Ne), where, "needs an sm_90 device and 4-bit MLX experts with 64 | cols and ",
             "128 | rows an expert (got ", W.bits, "-bit", W.tiled ? " tiled" : "", ", cols ", W.cols, ", Ne ", Ne, ")");
  check_expert_launch(W, E, Ne, P, ldy, where);
}
// grid: row tiles x every expert tile of 32 rows the routing can produce
dim3 moe_grid(int64_t row_tiles, int64_t E, int64_t P) {
  return dim3(static_cast<unsigned>(row_tiles), static_cast<unsigned>(expert_tiles_max(P, E, 32)));
}
}  // namespace

void wgemm_moe(CudaDevice& dev, const QWeightView& W, int64_t E, int64_t Ne, const uint16_t* xq,
               const int32_t* offsets, int64_t P, float* y, int64_t ldy) {
  moe_checks(dev, W, E, Ne, P, ldy, "cuda wgemm_moe");
  if (P == 0) return;
  DeviceGuard guard(dev.ordinal());
  const Half h{W.codes, W.scales, W.biases, 0, 64};
  const WgMoeArgs args{h, h, static_cast<int>(E), static_cast<int>(Ne), static_cast<int>(W.cols), xq, offsets, y, ldy};
  static const bool configured = (set_smem(wgemm_moe_kernel<false>, Geo<32>::kSmem), true);
  (void)configured;
  launch("wgemm_moe_kernel", wgemm_moe_kernel<false>, moe_grid(Ne / 128, E, P), dim3(kThreads), Geo<32>::kSmem,
         dev.stream(), args);
}

void wgemm_moe_gate_up(CudaDevice& dev, const QWeightView& G, const QWeightView& U, int64_t E, int64_t Ne,
                       const uint16_t* xq, const int32_t* offsets, int64_t P, float* y, int64_t ldy) {
  moe_checks(dev, G, E, Ne, P, ldy, "cuda wgemm_moe_gate_up (gate)");
  moe_checks(dev, U, E, Ne, P, ldy, "cuda wgemm_moe_gate_up (up)");
  MERE_CHECK(G.rows == U.rows && G.cols == U.cols, "cuda wgemm_moe_gate_up", "gate [", G.rows, ", ", G.cols,
             "] and up [", U.rows, ", ", U.cols, "] differ");
  if (P == 0) return;
  DeviceGuard guard(dev.ordinal());
  const WgMoeArgs args{Half{G.codes, G.scales, G.biases, 0, 64}, Half{U.codes, U.scales, U.biases, 0, 64},
                       static_cast<int>(E), static_cast<int>(Ne), static_cast<int>(G.cols), xq, offsets, y, ldy};
  static const bool configured = (set_smem(wgemm_moe_kernel<true>, Geo<32>::kSmem), true);
  (void)configured;
  launch("wgemm_moe_kernel (gate+up)", wgemm_moe_kernel<true>, moe_grid(Ne / 64, E, P), dim3(kThreads),
         Geo<32>::kSmem, dev.stream(), args);
}

}  // namespace mere::cuda
