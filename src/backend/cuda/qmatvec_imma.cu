// 4-bit integer-contract matvec with the exact chunk sums on the tensor cores (mma.sync m16n8k32
// s8 x s8 -> s32); contract: qmatvec.h "4-bit, integer"; notes: docs/cuda-kernels.md §1 "v8".
//
// Why: the IDP4A kernels spend 24 IDP4A per 32 weights and token, a quarter-rate pipe on sm_90: the
// H200 sweep of session 7 measured ~7.5 µs per extra token at [17408,5120], and at T = 1 that pipe
// time sits next to the 10.6 µs the bytes need (20 µs in a graph). One mma does 16 rows x 32 columns
// x 8 (digit, token) columns at once, so the products cost ~1/20 of that and the kernel can be
// bound by the bytes.
//
// Bitwise the IDP4A kernels' rows (so T = 1 and T = 2..9 may use either kernel):
// * V = sum q * X of a 32-column chunk is an exact integer however the products are ordered: the
//   mma takes the code word's even / odd nibbles as 8 s8 k-values (k = 4t + i: column 8t + 2i,
//   k = 16 + 4t + i: column 8t + 2i + 1, t = the lane's index in its quad) against the prepared
//   digit units (qmatvec_prep.cuh int_emit: unit 2d word t = digit d of the even columns of word t,
//   unit 2d + 1 the odd ones), one n-column per (token, digit); V = (P2 * 256 + P1) * 256 + P0.
// * The fp32 part follows the contract's lane slots: chunk j belongs to slot j mod 32, each slot's
//   fma chain runs over its chunks in increasing order, the 32 slots meet in the xor butterfly's
//   tree. The warp walks its 16 rows' chunks in address order, two at a time (one 32-byte sector a
//   row); epilogue lane L keeps row L/2's 16 slots of parity L % 2 in registers (slot 2m + p is
//   acc[m], m = (j / 2) mod 16 is static after unrolling a 32-chunk span), reduces them over bits 4..1
//   of the slot in the butterfly's pairing and adds the partner lane's other parity last.
//
// Data movement: lane L copies row L/2's chunk 2i + L%2 (16 bytes) of iteration i into a per-warp
// ring of D stages with cp.async (the weights depend on no earlier kernel, so D - 1 stages are in
// flight before the programmatic-launch wait); after cp.async.wait_group and __syncwarp the quad
// lanes read their fragments (stage layout [parity][row][16 bytes]: conflict-free 32-bit reads).
// The mma results go through a small per-warp scratch to the epilogue lanes.
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>

#include "backend/cuda/async_copy.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/qmatvec_common.cuh"
#include "backend/cuda/qmatvec_int.h"
#include "backend/cuda/qmatvec_prep.cuh"
#include "backend/cuda/smem_opt_in.h"

namespace mere::cuda::detail {
namespace {

constexpr int kWarps = 4;  // warps a block; every warp owns one tile of 16 rows

struct MmaMat {
  const uint4* codes;  // [rows, cols/32] 16-byte chunks
  const uint16_t* scales;
  const uint16_t* biases;
  float* y;
  int rows, tile_end, accumulate;  // tile_end: end of this matrix in the launch's flat tile space
};
struct MmaArgs {
  MmaMat m[kMaxMultiMatrices];
  int n, tiles;
};

// n-tiles of 8 (token, digit) columns for T tokens, and the scratch row stride (words, padded).
__host__ __device__ constexpr int ntiles(int T) { return (3 * T + 7) / 8; }
__host__ __device__ constexpr int scratch_stride(int T) { return 8 * ntiles(T) + 1; }
// Shared memory of one warp: the ring and the mma result scratch [parity][row][stride] s32.
__host__ __device__ constexpr int warp_smem(int T, int D) { return D * 512 + 2 * 16 * scratch_stride(T) * 4; }

__device__ __forceinline__ void mma_s8(const uint32_t (&a)[4], uint32_t b0, uint32_t b1, int (&c)[4]) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};"
      : "=r"(c[0]), "=r"(c[1]), "=r"(c[2]), "=r"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "r"(0), "r"(0), "r"(0), "r"(0));
}

template <int T, int D>
__global__ void __launch_bounds__(kWarps * 32)
    qmatvec_imma_kernel(const MmaArgs args, const uint32_t* __restrict__ dg, const float2* __restrict__ dsx,
                        int cols, int spans) {
  constexpr int NT = ntiles(T), CS = scratch_stride(T);
  extern __shared__ __align__(16) unsigned char imma_smem[];
  const int lane = threadIdx.x & 31, wib = static_cast<int>(threadIdx.x >> 5);
  const int tile = blockIdx.x * kWarps + wib;
  if (tile >= args.tiles) {
    pdl_begin();
    return;
  }
  unsigned char* wbase = imma_smem + wib * warp_smem(T, D);
  const uint32_t ring = smem_u32(wbase);
  int* scratch = reinterpret_cast<int*>(wbase + D * 512);

  MmaMat M = args.m[0];
  int tbegin = 0;
#pragma unroll
  for (int i = 1; i < kMaxMultiMatrices; ++i)
    if (i < args.n && tile >= args.m[i - 1].tile_end) M = args.m[i], tbegin = args.m[i - 1].tile_end;
  const int row0 = (tile - tbegin) * 16;
  const int nchunk = cols >> 5, ngroups = cols >> 6, nit = nchunk >> 1;

  // copies: lane L brings row L/2's chunk 2i + L%2 of iteration i
  const int prow = row0 + (lane >> 1), ph = lane & 1;
  const bool pvalid = prow < M.rows;
  const uint4* psrc = M.codes + static_cast<size_t>(pvalid ? prow : row0) * nchunk + ph;
  const uint32_t pdst = ring + (ph * 16 + (lane >> 1)) * 16;
  auto issue = [&](int it) {
    if (pvalid && it < nit) cp_async16(pdst + (it % D) * 512, psrc + 2 * it, 16);
    cp_async_commit();
  };
#pragma unroll
  for (int p = 0; p < D - 1; ++p) issue(p);
  pdl_begin();

  const int g = lane >> 2, t = lane & 3;     // mma roles: rows g and g + 8, k-quad t, n-column g
  const int er = lane >> 1, ep = lane & 1;   // epilogue roles: row er of the tile, chunk parity ep
  const int erow = row0 + er;
  const bool evalid = erow < M.rows;
  const uint16_t* sp = M.scales + static_cast<size_t>(evalid ? erow : row0) * ngroups;
  const uint16_t* bp = M.biases + static_cast<size_t>(evalid ? erow : row0) * ngroups;
  // B operand sources: n-column c = 8 nt + g is (token c / 3, digit c % 3) while c < 3T
  int bsrc[NT];
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
    const int c = 8 * nt + g;
    bsrc[nt] = c < 3 * T ? ((c / 3) * spans * 6 + 2 * (c % 3)) * 32 : -1;  // uint4 index of unit 2d at span 0, lane 0
  }

  float acc[T][16];
#pragma unroll
  for (int k = 0; k < T; ++k)
#pragma unroll
    for (int m = 0; m < 16; ++m) acc[k][m] = 0.0f;

  for (int s = 0; 16 * s < nit; ++s) {
#pragma unroll
    for (int m = 0; m < 16; ++m) {
      const int it = 16 * s + m;
      if (it >= nit) break;
      cp_async_wait<D - 2>();  // this lane's copy of iteration it has landed ...
      __syncwarp();            // ... and every lane's; all lanes are done with iteration it - 1
      issue(it + D - 1);
      const unsigned char* st = wbase + (it % D) * 512;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int j = 2 * it + h;
        const uint32_t w0 = *reinterpret_cast<const uint32_t*>(st + (h * 16 + g) * 16 + 4 * t);
        const uint32_t w8 = *reinterpret_cast<const uint32_t*>(st + (h * 16 + g + 8) * 16 + 4 * t);
        const uint32_t a[4] = {w0 & 0x0F0F0F0Fu, w8 & 0x0F0F0F0Fu, (w0 >> 4) & 0x0F0F0F0Fu, (w8 >> 4) & 0x0F0F0F0Fu};
        const int unit_off = (j >> 5) * 6 * 32 + (j & 31);  // uint4 offset of chunk j inside a token's units
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
          uint32_t b0 = 0u, b1 = 0u;
          if (bsrc[nt] >= 0) {
            const uint32_t* u = dg + static_cast<size_t>(bsrc[nt] + unit_off) * 4 + t;
            b0 = __ldg(u);
            b1 = __ldg(u + 32 * 4);
          }
          int c[4];
          mma_s8(a, b0, b1, c);
          int* sr = scratch + (h * 16 + g) * CS + 8 * nt + 2 * t;
          sr[0] = c[0], sr[1] = c[1];
          sr[8 * CS] = c[2], sr[8 * CS + 1] = c[3];
        }
      }
      __syncwarp();
      const int j = 2 * it + ep;
      if (j < nchunk) {  // always true: nchunk is even
        const float sc = qm::bf16_to_f32(__ldg(sp + (j >> 1)));
        const float bi = qm::bf16_to_f32(__ldg(bp + (j >> 1)));
        const int* pr = scratch + (ep * 16 + er) * CS;
#pragma unroll
        for (int k = 0; k < T; ++k) {
          const int V = (pr[3 * k + 2] * 256 + pr[3 * k + 1]) * 256 + pr[3 * k];
          const float2 ci = __ldg(dsx + static_cast<size_t>(k) * nchunk + j);
          const float qx = __fmul_rn(__int2float_rn(V), ci.x);
          acc[k][m] = __fmaf_rn(sc, qx, __fmaf_rn(bi, ci.y, acc[k][m]));
        }
      }
    }
  }
  cp_async_wait<0>();

  // the butterfly's tree: slots l and l ^ 16 first (m, m + 8), then ^8, ^4, ^2, the parities last
#pragma unroll
  for (int k = 0; k < T; ++k) {
    float u[16];
#pragma unroll
    for (int m = 0; m < 16; ++m) u[m] = acc[k][m];
#pragma unroll
    for (int half = 8; half >= 1; half >>= 1)
#pragma unroll
      for (int m = 0; m < half; ++m) u[m] = __fadd_rn(u[m], u[m + half]);
    const float v = __fadd_rn(u[0], __shfl_xor_sync(0xffffffffu, u[0], 1));
    if (ep == 0 && evalid) {
      float* yp = M.y + static_cast<size_t>(k) * M.rows + erow;
      *yp = M.accumulate ? __fadd_rn(*yp, v) : v;
    }
  }
}

using MmaFn = void (*)(MmaArgs, const uint32_t*, const float2*, int, int);

struct MmaVariant {
  int D, t_lo, t_hi;
  MmaFn fns[kMaxSkinnyRows];
  int smem[kMaxSkinnyRows];
};

template <int D, int TLO, int THI>
MmaVariant make_mma() {
  MmaVariant v{D, TLO, THI, {}, {}};
  qm::fill_by_T<TLO, THI>(v.fns, [](auto t) { return &qmatvec_imma_kernel<decltype(t)::value, D>; });
  for (int T = TLO; T <= THI; ++T) v.smem[T - 1] = kWarps * warp_smem(T, D);
  return v;
}

const MmaVariant* mma_variants(int* count) {
  static const MmaVariant table[] = {make_mma<8, 1, 4>(), make_mma<16, 1, 4>()};
  *count = static_cast<int>(sizeof(table) / sizeof(table[0]));
  return table;
}

const MmaVariant* find_mma(int64_t T, int D, int* index) {
  int n = 0;
  const MmaVariant* v = mma_variants(&n);
  for (int i = 0; i < n; ++i)
    if (v[i].D == D && T >= v[i].t_lo && T <= v[i].t_hi) {
      *index = i;
      return &v[i];
    }
  return nullptr;
}

// The dynamic shared-memory limit of a kernel is raised before its first launch on each device.
void raise_smem(int64_t T, const MmaVariant& v) { opt_in_smem(v.fns[T - 1], v.smem[T - 1]); }

}  // namespace

bool q4imma_available(int64_t T, const QMatvecConfig& cfg) {
  int i = 0;
  return T >= 1 && T <= kMaxSkinnyRows && cfg.rows_per_warp == 16 && find_mma(T, cfg.stages, &i) != nullptr;
}

int q4imma_stages(int64_t tiles) {
  // ~6 MB of codes in flight on the chip (copy bandwidth x loaded latency), 512 bytes a stage and tile
  const int64_t want = (6 << 20) / (std::max<int64_t>(tiles, 1) * 512);
  return want <= 8 ? 8 : 16;
}

bool q4imma_supported(const QMatvecOut* outs, int n) {
  for (int i = 0; i < n; ++i)
    if (reinterpret_cast<uintptr_t>(outs[i].W.codes) & 15u) return false;
  return true;
}

void q4imma_launch(cudaStream_t s, const QMatvecOut* outs, int n, const float* ws, int64_t T, int64_t cols,
                   const QMatvecConfig& cfg) {
  MmaArgs args{};
  args.n = n;
  int tiles = 0;
  for (int i = 0; i < n; ++i) {
    const QWeightView& W = outs[i].W;
    tiles += static_cast<int>((W.rows + 15) / 16);
    args.m[i] = MmaMat{reinterpret_cast<const uint4*>(W.codes), W.scales, W.biases, outs[i].y,
                       static_cast<int>(W.rows), tiles, outs[i].accumulate ? 1 : 0};
  }
  args.tiles = tiles;
  const int D = cfg.stages > 0 ? cfg.stages : q4imma_stages(tiles);
  int index = 0;
  const MmaVariant* v = find_mma(T, D, &index);
  MERE_CHECK(v != nullptr, "qmatvec", "no compiled tensor-core integer kernel for T=", T, " stages=", D);
  raise_smem(T, *v);
  const prep::Layout L = prep::layout(const_cast<float*>(ws), T, cols, 4);
  launch("qmatvec_imma_kernel", v->fns[T - 1], dim3(static_cast<unsigned>((tiles + kWarps - 1) / kWarps)),
         dim3(kWarps * 32), static_cast<size_t>(v->smem[T - 1]), s, args, reinterpret_cast<const uint32_t*>(L.dg),
         L.dsx, static_cast<int>(cols), L.spans);
}

}  // namespace mere::cuda::detail
