// 4-bit integer-contract matvec with the weights streamed by the bulk-copy engine (TMA,
// cp.async.bulk) into a per-warp ring in shared memory (contract: qmatvec.h "4-bit, integer"; notes:
// docs/cuda-kernels.md §1 "v11"; `MERE_CUDA_QMATVEC=int-bulk`).
//
// Why: the register kernel keeps one 16-byte load a row and lane in flight and each batch is a chain
// of dependent round trips; the per-lane cp.async ring (qmatvec_int_pipe.cu) spends an instruction
// and an address a lane for every 16 bytes and was not faster in the engine. Here one lane of each
// warp asks the copy engine for whole 512-byte row segments (the 32 chunks the warp's lanes use in one
// iteration), plus the 32 bytes of scales and of biases of the same 16 groups, D iterations ahead,
// with one mbarrier a stage counting the bytes; the other lanes only wait on the barrier and compute.
// The first D - 1 stages are asked for before the programmatic-launch wait (weights only).
//
// Arithmetic, row split, batches and lane-to-chunk map are the register kernel's (qmatvec_int.cuh),
// so every row is bitwise what the register kernel gives it (cuda_check: "integer: all launch
// shapes"). Needs cols % 512 == 0 (whole 16-byte pieces of scales a stage) and 16-byte aligned
// codes, scales and biases; other launches run on the register kernel (same bits).
#include <cuda_runtime.h>

#include <algorithm>
#include <iterator>

#include "backend/cuda/async_copy.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/qmatvec_common.cuh"
#include "backend/cuda/qmatvec_int.cuh"
#include "backend/cuda/qmatvec_int.h"
#include "backend/cuda/qmatvec_prep.cuh"

namespace mere::cuda::detail {
namespace {

using qi::Cursor;
using qi::cursor_batch;
using qi::cursor_next;
using qi::IntArgs;
using qi::kWarps;

// One stage of a warp's ring: R rows x {512 bytes of codes (32 chunks), 32 bytes of scales, 32 of
// biases (16 groups)}; then D mbarriers of 8 bytes.
constexpr int kStageRowBytes = 512 + 32 + 32;
template <int R, int D>
__host__ __device__ constexpr int bulk_ring_bytes() {
  return D * R * kStageRowBytes + D * 8;
}

__device__ __forceinline__ void mbar_init(uint32_t bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_expect(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ bool mbar_try_wait(uint32_t bar, uint32_t phase) {
  uint32_t ok = 0;
  asm volatile(
      "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}\n"
      : "=r"(ok)
      : "r"(bar), "r"(phase)
      : "memory");
  return ok != 0;
}
__device__ __forceinline__ void bulk_g2s(uint32_t dst, const void* src, uint32_t bytes, uint32_t bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(dst),
               "l"(src), "r"(bytes), "r"(bar)
               : "memory");
}

// Lane 0: asks for stage slot s = iteration c.i of the cursor's live rows (nothing when done).
template <int R, int D>
__device__ __forceinline__ void bulk_issue(const Cursor& c, int s, int nchunk, int ngroups, uint32_t ring) {
  if (c.done) return;
  const int ch0 = 32 * c.i, nch = min(32, nchunk - ch0);  // nch % 16 == 0 (cols % 512 == 0)
  const uint32_t code_bytes = static_cast<uint32_t>(nch) * 16, sb_bytes = static_cast<uint32_t>(nch);
  const uint32_t bar = ring + D * R * kStageRowBytes + s * 8;
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");  // the warp's reads of this slot came first
  mbar_expect(bar, static_cast<uint32_t>(c.nr) * (code_bytes + 2 * sb_bytes));
#pragma unroll
  for (int r = 0; r < R; ++r)
    if (r < c.nr) {
      const size_t row = static_cast<size_t>(c.l0 + r);
      const uint32_t slot = ring + (s * R + r) * kStageRowBytes;
      bulk_g2s(slot, c.M.codes + row * nchunk + ch0, code_bytes, bar);
      bulk_g2s(slot + 512, c.M.scales + row * ngroups + ch0 / 2, sb_bytes, bar);
      bulk_g2s(slot + 544, c.M.biases + row * ngroups + ch0 / 2, sb_bytes, bar);
    }
}

template <int T, int R, int D, int MINB>
__global__ void __launch_bounds__(kWarps * 32, MINB)
    qmatvec_int_bulk_kernel(const IntArgs args, const uint4* __restrict__ dg, const float2* __restrict__ dsx, int cols,
                            int spans, int nb) {
  extern __shared__ __align__(16) unsigned char bulk_smem[];
  const int nchunk = cols >> 5, ngroups = cols >> 6;
  const int lane = threadIdx.x & 31, wib = static_cast<int>(threadIdx.x >> 5);
  const int64_t gw = static_cast<int64_t>(blockIdx.x) * kWarps + wib;
  int rb = 0, re = 0;
  qi::warp_rows(args, gw, static_cast<int64_t>(gridDim.x) * kWarps, &rb, &re);
  const int rows_w = re - rb;
  const int nit = (nchunk + 31) >> 5;
  const size_t tstride = static_cast<size_t>(spans) * 6 * 32;
  unsigned char* ring_p = bulk_smem + wib * bulk_ring_bytes<R, D>();
  const uint32_t ring = smem_u32(ring_p);
  const uint32_t bars = ring + D * R * kStageRowBytes;

  if (lane == 0) {
#pragma unroll
    for (int s = 0; s < D; ++s) mbar_init(bars + 8 * s, 1);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncwarp();

  Cursor cons{}, prod{};
  cons.done = rows_w <= 0;
  if (!cons.done) cursor_batch(cons, args, rb, rows_w, nb);
  prod = cons;
#pragma unroll
  for (int p = 0; p < D - 1; ++p) {  // weights only: before the wait for the previous kernel
    if (lane == 0) bulk_issue<R, D>(prod, p, nchunk, ngroups, ring);
    if (!prod.done) cursor_next(prod, args, rb, rows_w, nb, nit);
  }
  pdl_begin();

  float acc[R][T];
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int t = 0; t < T; ++t) acc[r][t] = 0.0f;
  for (int it = 0; !cons.done; ++it) {
    __syncwarp();  // every lane is done with slot (it - 1) % D, which is refilled now
    if (lane == 0) bulk_issue<R, D>(prod, (it + D - 1) % D, nchunk, ngroups, ring);
    if (!prod.done) cursor_next(prod, args, rb, rows_w, nb, nit);

    const int s = it % D;
    const int j = 32 * cons.i + lane;
    while (!mbar_try_wait(bars + 8 * s, static_cast<uint32_t>(it / D) & 1u)) {
    }
    if (j < nchunk) {
      float sc[R], bi[R];
      uint32_t lo[R][4], hi[R][4];
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const unsigned char* slot = ring_p + (s * R + r) * kStageRowBytes;
        const uint4 w = r < cons.nr ? reinterpret_cast<const uint4*>(slot)[lane] : make_uint4(0u, 0u, 0u, 0u);
        const uint16_t sw = r < cons.nr ? reinterpret_cast<const uint16_t*>(slot + 512)[lane >> 1] : uint16_t{0};
        const uint16_t bw = r < cons.nr ? reinterpret_cast<const uint16_t*>(slot + 544)[lane >> 1] : uint16_t{0};
        sc[r] = qm::bf16_to_f32(sw);
        bi[r] = qm::bf16_to_f32(bw);
        qi::split_nibbles(w, lo[r], hi[r]);
      }
      qi::chunk_step<T, R>(lo, hi, sc, bi, dg + 192 * cons.i + lane, tstride, dsx + j, nchunk, acc);
    }
    if (cons.i == nit - 1) qi::store_rows<T, R>(acc, cons, lane);  // the sub-batch's last iteration
    cursor_next(cons, args, rb, rows_w, nb, nit);
  }
}

template <int R, int D, int TLO, int THI, int MINB>
qi::RingVariant make_bulk() {
  qi::RingVariant v{R, D, TLO, THI, kWarps * bulk_ring_bytes<R, D>(), {}};
  qm::fill_by_T<TLO, THI>(v.fns, [](auto t) { return &qmatvec_int_bulk_kernel<decltype(t)::value, R, D, MINB>; });
  return v;
}

const qi::RingVariant* find_bulk(int64_t T, int R, int D, int* index) {
  // R4D4: 8 KB of codes a warp in flight (37 KB a block, 4 blocks an SM); R2D8 the same bytes over
  // twice the warps' rows; R4D6 deeper (55 KB a block, 3 blocks an SM)
  static const qi::RingVariant table[] = {make_bulk<4, 4, 1, 9, 4>(), make_bulk<2, 8, 1, 9, 4>(),
                                          make_bulk<4, 6, 1, 4, 3>()};
  return qi::find_ring(table, static_cast<int>(std::size(table)), T, R, D, index);
}

}  // namespace

bool q4bulk_available(int64_t T, const QMatvecConfig& cfg) {
  int i = 0;
  return T >= 1 && T <= kMaxSkinnyRows && find_bulk(T, cfg.rows_per_warp, cfg.stages, &i) != nullptr;
}

bool q4bulk_supported(const QMatvecOut* outs, int n, int64_t cols) {
  return qi::ring_supported(outs, n, cols, 512, 16);  // whole 16-byte pieces of scales and biases in every stage
}

void q4bulk_launch(cudaStream_t s, const qi::IntArgs& args, const float* ws, int64_t T, int64_t cols,
                   const QMatvecConfig& cfg, int sms) {
  int index = 0;
  const qi::RingVariant* v = find_bulk(T, cfg.rows_per_warp, cfg.stages, &index);
  MERE_CHECK(v != nullptr, "qmatvec", "no compiled bulk-copy integer kernel for T=", T,
             " rows_per_warp=", cfg.rows_per_warp, " stages=", cfg.stages);
  static qi::RingOccupancy occupancy;
  qi::ring_launch("qmatvec_int_bulk_kernel", s, *v, index, occupancy, args, ws, T, cols, sms);
}

}  // namespace mere::cuda::detail
